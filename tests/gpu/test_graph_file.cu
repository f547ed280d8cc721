// Graph files on the GPU (docs/graph-files.md): every node kind Conveyor can save is saved, loaded into the same
// buffers and into buffers load allocates, and replayed bitwise equal to the original (check_round_trip, and the
// load API read directly); addresses relocate and values stay values where the types say so, scanned words are a
// heuristic that strict mode refuses; kernels resolve through the registry or from an image embedded in the file
// (a module loaded through Conveyor; library kernels through CUPTI's module-load callback in test_graph_file_libs);
// every refusal names the node and the fix, and a refused load leaves no memory behind; graphed callables start from
// saved buckets and replay them only for the arguments they were made for.
#include "gpu_test_util.hpp"
#include "test_kernels.cuh"

#include <conveyor/conveyor.hpp>
#include <conveyor/keep/graphed_file.hpp>
#include <conveyor/keep/inspect.hpp>
#include <conveyor/keep/load.hpp>
#include <conveyor/keep/round_trip.hpp>
#include <conveyor/keep/save.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>

namespace {

using conveyor::test::device_array;
using conveyor::test::pinned_array;
namespace k = conveyor::test::kernels;

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0F, 1.0F);
  std::vector<float> out(n);
  for (auto& v : out) v = d(rng);
  return out;
}

void expect_bitwise(const conveyor::round_trip_report& r) {
  EXPECT_TRUE(r.bitwise_equal()) << r.first_difference << " (" << r.differ_same << " bytes differ in the same buffers, "
                                 << r.differ_other << " in new buffers)";
  EXPECT_GT(r.buffers, 0U);
  EXPECT_GT(r.bytes, 0U);
}

__global__ void write_value(long long v, long long* out) { *out = v; }

struct pointer_pair {
  const float* in;
  float* out;
  int n;
};
__global__ void copy_pair(pointer_pair p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.out[i] = 2.0F * p.in[i];
}

struct word {
  long long v;
};
__global__ void write_word(word w, long long* out) { *out = w.v; }

__global__ void countdown(cudaGraphConditionalHandle h, int* counter, float* x) {
  const int c = --*counter;
  x[c] += 1.0F;
  conveyor::set_condition(h, c > 0 ? 1U : 0U);
}
__global__ void choose(cudaGraphConditionalHandle h, const int* which) {
  conveyor::set_condition(h, static_cast<unsigned>(*which));
}

constexpr int n = 1024;

// The cubin built beside the test program (tests/CMakeLists.txt; scripts/gpu-pack.sh carries it).
std::filesystem::path module_cubin() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path() / "module_kernels.cubin";
}
constexpr unsigned blocks = (n + 255) / 256;

// Every builder node kind but conditional nodes: copies (1D HtoD from pinned memory, 2D pitched DtoD, DtoH into
// pinned memory), memsets of 1, 2 and 4 bytes, typed kernels with a programmatic edge and a priority, a child graph,
// an empty node, event record and wait, an allocation written by a kernel and copied out, its free, a host node.
struct builder_case {
  device_array<float> x{random_floats(n, 1)};
  device_array<float> y{random_floats(n, 2)};
  device_array<std::uint8_t> bytes{std::vector<std::uint8_t>(n, 7)};
  device_array<std::uint16_t> shorts{std::vector<std::uint16_t>(n, 9)};
  conveyor::test::pitched_array<float> a{64, 16};
  conveyor::test::pitched_array<float> b{64, 16};
  pinned_array<float> in{n};
  pinned_array<float> out{n};
  device_array<float> from_allocation{std::vector<float>(n, -1.0F)};
  conveyor::event done;
  std::atomic<int> ticks{0};
  conveyor::graph g;

  builder_case() {
    in.assign(random_floats(n, 3));
    for (std::size_t i = 0; i < n; ++i) out[i] = -2.0F;
    CONVEYOR_CHECK(cudaMemset2D(a.get(), a.pitch(), 0x3c, 64 * sizeof(float), 16));
    CONVEYOR_CHECK(cudaMemset2D(b.get(), b.pitch(), 0, 64 * sizeof(float), 16));
    CONVEYOR_CHECK(cudaDeviceSynchronize());
    const conveyor::launch_config cfg{blocks, 256};
    auto up = g.memcpy(x.get(), in.get(), n * sizeof(float), cudaMemcpyHostToDevice);
    auto s1 = g.memset<std::uint8_t>({up}, bytes.get(), 0x5a, n / 2);
    auto s2 = g.memset<std::uint16_t>({s1}, shorts.get(), 0x1234, n / 4);
    auto first = g.kernel({s2}, {blocks, 256, 0, -2}, k::axpy, n, 0.5F, x.get(), y.get());
    auto second = g.kernel({conveyor::programmatic(first)}, cfg, k::pdl_affine, n, 1.5F, 0.25F, y.get(), 100LL);
    auto copy2d = g.memcpy_2d({second}, b.get(), b.pitch(), a.get(), a.pitch(), 32 * sizeof(float), 8);
    conveyor::graph body;
    auto inner = body.kernel(cfg, k::scale, n, 3.0F, y.get());
    body.kernel({inner}, cfg, k::add_scalar, n, 0.125F, y.get());
    auto child = g.child({copy2d}, body);
    auto join = g.empty({child});
    auto record = g.event_record({join}, done);
    auto wait = g.event_wait({record}, done);
    auto alloc = g.mem_alloc({wait}, n * sizeof(float));
    auto fill = g.kernel({alloc.node}, cfg, k::copy_plus, n, y.get(), 1.0F, alloc.as<float>());
    auto out_copy = g.memcpy({fill}, from_allocation.get(), alloc.pointer, n * sizeof(float), cudaMemcpyDeviceToDevice);
    auto freed = g.mem_free({out_copy}, alloc.pointer);
    auto down = g.memcpy({freed}, out.get(), y.get(), n * sizeof(float), cudaMemcpyDeviceToHost);
    g.host({down}, [this] { ++ticks; }).label("tick");
    record.label("done");
  }

  [[nodiscard]] conveyor::save_options named() const {
    conveyor::save_options o;
    o.buffers = {{"x", x.get(), x.bytes()},
                 {"y", y.get(), y.bytes()},
                 {"bytes", bytes.get(), bytes.bytes()},
                 {"shorts", shorts.get(), shorts.bytes()},
                 {"a", a.get(), a.pitch() * 16},
                 {"b", b.get(), b.pitch() * 16},
                 {"in", in.get(), in.bytes()},
                 {"out", out.get(), out.bytes()},
                 {"from_allocation", from_allocation.get(), from_allocation.bytes()}};
    return o;
  }
};

TEST(GraphFiles, EveryBuilderNodeKindReplaysBitwiseEqualInTheSameAndInOtherBuffers) {
  CONVEYOR_REQUIRE_GPU();
  builder_case c;
  conveyor::kernel_registry registry;
  std::atomic<int> loaded_ticks{0};
  registry.add_host("tick", [&] { ++loaded_ticks; });
  const conveyor::stream s;
  const auto report = conveyor::check_round_trip({"builder", &c.g, nullptr}, c.named(), s.get(), &registry);
  expect_bitwise(report);
  EXPECT_EQ(report.buffers, 9U); // the nine named buffers (the graph allocation is gone after a launch)
  EXPECT_EQ(c.ticks.load(), 1);
  EXPECT_EQ(loaded_ticks.load(), 2); // the registry's callable ran in both loaded graphs
  // The file describes what was built, offline.
  const conveyor::graph_file f = conveyor::to_graph_file({{"builder", &c.g, nullptr}}, c.named());
  const auto d = conveyor::describe(f, "builder");
  const auto live = conveyor::describe(c.g);
  ASSERT_EQ(d.nodes.size(), live.nodes.size());
  for (std::size_t i = 0; i < d.nodes.size(); ++i) {
    EXPECT_EQ(d.nodes[i].kind, live.nodes[i].kind) << i;
    EXPECT_EQ(d.nodes[i].kernel_name, live.nodes[i].kernel_name) << i;
    EXPECT_EQ(d.nodes[i].grid, live.nodes[i].grid) << i;
    EXPECT_EQ(d.nodes[i].bytes, live.nodes[i].bytes) << i;
    EXPECT_EQ(d.nodes[i].attributes, live.nodes[i].attributes) << i;
    EXPECT_EQ(d.nodes[i].label, live.nodes[i].label) << i;
  }
  EXPECT_EQ(d.edges.size(), live.edges.size());
  EXPECT_EQ(d.edge_types, live.edge_types);
}

TEST(GraphFiles, TheLoadApiRelocatesIntoBuffersItAllocatesAndFillsThemWithTheSavedContents) {
  CONVEYOR_REQUIRE_GPU();
  const auto x0 = random_floats(n, 11);
  const auto y0 = random_floats(n, 12);
  device_array<float> x(x0);
  device_array<float> y(y0);
  conveyor::graph g;
  g.kernel({blocks, 256}, k::axpy, n, 2.0F, x.get(), y.get());
  conveyor::save_options o;
  o.contents = true;
  o.buffers = {{"y", y.get(), y.bytes()}}; // x is found through CUDA ("buffer0")
  const auto path = std::filesystem::temp_directory_path() / "conveyor-test-load-api.cgf";
  conveyor::save(path, g, o, "axpy");
  conveyor::kernel_registry registry;
  registry.add(k::axpy);
  conveyor::load_options lo;
  lo.registry = &registry;
  conveyor::loaded_graphs l = conveyor::load(path, lo);
  ASSERT_EQ(l.buffers().size(), 2U);
  const auto& ly = l.buffer("y");
  EXPECT_TRUE(ly.allocated);
  EXPECT_TRUE(ly.filled);
  EXPECT_NE(ly.pointer, static_cast<void*>(y.get()));
  EXPECT_TRUE(l.buffer("buffer0").allocated);
  const conveyor::stream s;
  auto e = conveyor::instantiate(l.at("axpy"));
  e.launch(s);
  s.synchronize();
  std::vector<float> loaded(n);
  CONVEYOR_CHECK(cudaMemcpy(loaded.data(), ly.pointer, y.bytes(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(y.download(), y0) << "the loaded graph wrote the original buffer";
  auto original = conveyor::instantiate(g);
  original.launch(s);
  s.synchronize();
  const auto expected = y.download();
  EXPECT_EQ(loaded, expected) << "the loaded graph computed something else";
  double worst = 0.0; // and both against a double-precision reference
  for (std::size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::abs(expected[i] - (2.0 * x0[i] + y0[i])) / (std::abs(2.0 * x0[i] + y0[i]) + 1e-30));
  EXPECT_LT(worst, 1e-6);
  EXPECT_THROW((void)l.at("nope"), std::out_of_range);
}

TEST(GraphFiles, ConditionalNodesReplayBitwiseEqual) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> counter(std::vector<int>{5});
  device_array<int> which(std::vector<int>{1});
  device_array<float> x(random_floats(n, 4));
  conveyor::graph g;
  const auto loop_cond = conveyor::make_condition(g, 1, conveyor::condition_reset::each_launch);
  auto loop = conveyor::add_conditional(g, {}, conveyor::conditional_kind::while_loop, loop_cond);
  loop.bodies[0].kernel({1, 1}, countdown, loop_cond.handle, counter.get(), x.get());
  const auto branch_cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  auto set = g.kernel({loop.node}, {1, 1}, choose, branch_cond.handle, which.get());
  auto branch = conveyor::add_conditional(g, {set}, conveyor::conditional_kind::if_then_else, branch_cond);
  branch.bodies[0].kernel({blocks, 256}, k::scale, n, 2.0F, x.get());
  branch.bodies[1].kernel({blocks, 256}, k::scale, n, -1.0F, x.get());
  const auto switch_cond = conveyor::make_condition(g, 2, conveyor::condition_reset::each_launch);
  auto sw = conveyor::add_conditional(g, {branch.node}, conveyor::conditional_kind::switch_case, switch_cond, 3);
  for (unsigned c = 0; c < 3; ++c)
    sw.bodies[c].kernel({blocks, 256}, k::add_scalar, n, 0.5F * static_cast<float>(c + 1), x.get());
  conveyor::save_options o;
  o.buffers = {
      {"counter", counter.get(), counter.bytes()}, {"which", which.get(), which.bytes()}, {"x", x.get(), x.bytes()}};
  const conveyor::stream s;
  expect_bitwise(conveyor::check_round_trip({"conditional", &g, nullptr}, o, s.get()));
  const auto f = conveyor::to_graph_file({{"conditional", &g, nullptr}}, o);
  EXPECT_EQ(f.graphs[0].graph.conditions.size(), 3U);
  std::size_t conditions = 0;
  for (const auto& node : f.graphs[0].graph.nodes)
    for (const auto& b : node.bodies)
      for (const auto& inner : b.nodes)
        if (const auto* kn = std::get_if<conveyor::saved_kernel_node>(&inner.parameters))
          for (const auto& r : kn->relocations)
            conditions += r.target == conveyor::relocation_target::condition ? 1 : 0;
  EXPECT_EQ(conditions, 1U); // the loop body's handle (typed: cudaGraphConditionalHandle)
}

TEST(GraphFiles, CapturedKernelsOfUnknownTypeAreScannedAndStrictModeRefusesThem) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> in(random_floats(n, 5));
  device_array<float> out(std::vector<float>(n, 0.0F));
  const conveyor::stream s;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    copy_pair<<<blocks, 256, 0, cs.get()>>>({in.get(), out.get(), n});
    CONVEYOR_CHECK(cudaGetLastError());
  });
  conveyor::kernel_registry registry; // resolves the kernel; its parameter is a class: words scanned
  registry.add(copy_pair);
  conveyor::save_options o;
  o.registry = &registry;
  const auto f = conveyor::to_graph_file({{"captured", &g, nullptr}}, o);
  const auto& kn = std::get<conveyor::saved_kernel_node>(f.graphs[0].graph.nodes.at(0).parameters);
  ASSERT_EQ(kn.relocations.size(), 2U);
  EXPECT_FALSE(kn.relocations[0].typed);
  EXPECT_EQ(f.buffers.size(), 2U); // both allocations found through CUDA
  expect_bitwise(conveyor::check_round_trip({"captured", &g, nullptr}, o, s.get(), &registry));
  o.strict = true;
  try {
    (void)conveyor::to_graph_file({{"captured", &g, nullptr}}, o);
    ADD_FAILURE() << "strict mode saved a scanned word";
  } catch (const conveyor::save_error& e) {
    EXPECT_NE(std::string(e.what()).find("graph 'captured' node 0 (kernel): kernel parameter 0 (argument bytes 0..7)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("fix: register the kernel"), std::string::npos) << e.what();
  }
}

TEST(GraphFiles, AValueThatLooksLikeAnAddressStaysAValueWhereTheProgramSaysSo) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(n, 6));
  device_array<long long> typed_out(std::vector<long long>{0});
  device_array<long long> struct_out(std::vector<long long>{0});
  const long long looks_like_x = static_cast<long long>(reinterpret_cast<std::uintptr_t>(x.get() + 16));
  conveyor::graph g;
  auto a = g.kernel({1, 1}, write_value, looks_like_x, typed_out.get());   // typed: long long is a value
  g.kernel({a}, {1, 1}, write_word, word{looks_like_x}, struct_out.get()); // a class: scanned
  conveyor::save_options o;
  o.contents = true;
  o.buffers = {{"x", x.get(), x.bytes()}, {"typed_out", typed_out.get(), 8}, {"struct_out", struct_out.get(), 8}};
  conveyor::kernel_registry registry;
  registry.add(write_value, write_word);
  o.registry = &registry;
  conveyor::graph_file f = conveyor::to_graph_file({{"values", &g, nullptr}}, o);
  conveyor::load_options lo;
  lo.registry = &registry;
  {
    conveyor::loaded_graphs l = conveyor::load(f, lo); // into new buffers
    const conveyor::stream s;
    auto e = conveyor::instantiate(l.at("values"));
    e.launch(s);
    s.synchronize();
    long long typed = 0;
    long long scanned = 0;
    CONVEYOR_CHECK(cudaMemcpy(&typed, l.buffer("typed_out").pointer, 8, cudaMemcpyDeviceToHost));
    CONVEYOR_CHECK(cudaMemcpy(&scanned, l.buffer("struct_out").pointer, 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ(typed, looks_like_x) << "a typed value was relocated";
    // The guaranteed side above; the heuristic side: the struct's word fell inside buffer x, so it was relocated
    // into the new x (docs/graph-files.md: a scanned word is relocated).
    EXPECT_EQ(scanned, static_cast<long long>(
                           reinterpret_cast<std::uintptr_t>(static_cast<float*>(l.buffer("x").pointer) + 16)));
  }
  // Declaring the struct's class makes it a value too.
  conveyor::kernel_registry declared;
  declared.add(write_value);
  declared.add_untyped(reinterpret_cast<const void*>(&write_word),
                       {conveyor::parameter_class::value, conveyor::parameter_class::pointer});
  o.registry = &declared;
  f = conveyor::to_graph_file({{"values", &g, nullptr}}, o);
  const auto& second = std::get<conveyor::saved_kernel_node>(f.graphs[0].graph.nodes.at(1).parameters);
  ASSERT_EQ(second.relocations.size(), 1U);
  EXPECT_EQ(second.relocations[0].offset, 8U); // only the output pointer
}

TEST(GraphFiles, RefusalsNameTheNodeTheReasonAndTheFixAndARefusedLoadLeavesNothingBehind) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(n, 7));
  auto save_error_of = [](const conveyor::graph& g, const conveyor::save_options& o) -> std::string {
    try {
      (void)conveyor::to_graph_file({{"g", &g, nullptr}}, o);
    } catch (const conveyor::save_error& e) {
      return e.what();
    }
    return {};
  };
  conveyor::graph unlabelled;
  auto first = unlabelled.kernel({blocks, 256}, k::scale, n, 2.0F, x.get());
  unlabelled.host({first}, [] {});
  auto text = save_error_of(unlabelled, {});
  EXPECT_NE(text.find("graph 'g' node 1 (host): an unlabelled host node"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: label the node"), std::string::npos) << text;
  std::vector<float> pageable(n, 1.0F);
  conveyor::graph copy;
  copy.memcpy(x.get(), pageable.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  text = save_error_of(copy, {});
  EXPECT_NE(text.find("node 0 (memcpy): memcpy source"), std::string::npos) << text;
  EXPECT_NE(text.find("is pageable host memory that no named buffer holds"), std::string::npos) << text;
  conveyor::save_options named;
  named.buffers = {{"host", pageable.data(), pageable.size() * sizeof(float)}};
  EXPECT_EQ(save_error_of(copy, named), ""); // named, pageable memory is saved (load allocates it, or takes it by name)
  // A conditional node added through raw CUDA: its bodies cannot be read back.
  conveyor::graph raw;
  cudaGraphConditionalHandle h{};
  CONVEYOR_CHECK(cudaGraphConditionalHandleCreate(&h, raw.get(), 0, 0));
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h;
  p.conditional.type = cudaGraphCondTypeIf;
  p.conditional.size = 1;
  raw.add_node({}, p);
  text = save_error_of(raw, {});
  EXPECT_NE(text.find("node 0 (conditional): a conditional node Conveyor did not build"), std::string::npos) << text;
  // An executable graph changed node by node does not run its definition: refused.
  conveyor::graph one;
  auto kn = one.kernel({blocks, 256}, k::scale, n, 2.0F, x.get());
  auto exec = conveyor::instantiate(one);
  exec.set_kernel_args(kn, k::scale, n, 4.0F, x.get());
  try {
    (void)conveyor::to_graph_file({{"e", nullptr, &exec}});
    ADD_FAILURE() << "saved an executable graph changed node by node";
  } catch (const conveyor::save_error& e) {
    EXPECT_NE(std::string(e.what()).find("has nodes changed by per-node setters"), std::string::npos) << e.what();
  }
  // A kernel the loading process cannot find (captured with <<<>>>: not registered, no image, never launched
  // through a typed call); the load fails after allocating 256 MiB for the buffer, and frees it.
  device_array<float> big(64 << 20);
  const conveyor::stream s;
  conveyor::graph uses_big = conveyor::capture(s, [&](const conveyor::stream& cs) {
    copy_pair<<<blocks, 256, 0, cs.get()>>>({big.get(), big.get() + n, n});
    CONVEYOR_CHECK(cudaGetLastError());
  });
  conveyor::graph_file f = conveyor::to_graph_file({{"big", &uses_big, nullptr}});
  std::size_t free_before = 0;
  std::size_t total = 0;
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  CONVEYOR_CHECK(cudaMemGetInfo(&free_before, &total));
  try {
    (void)conveyor::load(f);
    ADD_FAILURE() << "loaded a kernel that resolves nowhere";
  } catch (const conveyor::load_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("graph 'big' node 0 (kernel): kernel '(anonymous namespace)::copy_pair'"), std::string::npos)
        << what;
    EXPECT_NE(what.find("fix: register it (kernel_registry::add)"), std::string::npos) << what;
  }
  std::size_t free_after = 0;
  CONVEYOR_CHECK(cudaMemGetInfo(&free_after, &total));
  // cudaMemGetInfo is device-wide: in a parallel test run other processes allocate and free meanwhile. A leaked
  // 256 MiB buffer shows as at least that much less free memory; less than half of it is taken for noise.
  EXPECT_GT(free_after + (std::size_t{128} << 20), free_before)
      << "a refused load left device memory behind: " << free_before - free_after << " bytes fewer free";
  // A kernel whose parameters differ from the saved ones (another build of it) is refused.
  conveyor::kernel_registry registry;
  registry.add(copy_pair);
  f.kernels[0].parameters = {{0, 16}, {16, 8}};
  f.kernels[0].classes = {conveyor::parameter_class::opaque, conveyor::parameter_class::opaque};
  conveyor::load_options lo;
  lo.registry = &registry;
  try {
    (void)conveyor::load(f, lo);
    ADD_FAILURE() << "loaded a kernel whose parameters differ";
  } catch (const conveyor::load_error& e) {
    EXPECT_NE(std::string(e.what()).find("another version of the kernel"), std::string::npos) << e.what();
  }
}

TEST(GraphFiles, KernelsOfAModuleLoadedThroughConveyorLoadFromTheImageInTheFile) {
  CONVEYOR_REQUIRE_GPU();
  const auto x0 = random_floats(n, 13);
  const auto y0 = random_floats(n, 14);
  device_array<float> x(x0);
  device_array<float> y(y0);
  conveyor::save_options o;
  o.contents = true;
  o.buffers = {{"x", x.get(), x.bytes()}, {"y", y.get(), y.bytes()}};
  const conveyor::stream s;
  conveyor::graph_file f;
  {
    const conveyor::kernel_module m = conveyor::kernel_module::load_file(module_cubin());
    const void* fn = m.kernel("module_saxpy");
    conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
      int count = n;
      float a = 2.0F;
      const float* xp = x.get();
      float* yp = y.get();
      void* args[] = {&count, &a, &xp, &yp};
      CONVEYOR_CHECK(cudaLaunchKernel(fn, dim3(blocks), dim3(256), args, 0, cs.get()));
    });
    f = conveyor::to_graph_file({{"module", &g, nullptr}}, o);
    expect_bitwise(conveyor::check_round_trip({"module", &g, nullptr}, o, s.get()));
  } // the module is unloaded: the file alone has the kernel now
  ASSERT_EQ(f.kernels.size(), 1U);
  ASSERT_TRUE(f.kernels[0].image.has_value());
  EXPECT_EQ(f.images.at(0).source, "module 'module_kernels.cubin'");
  conveyor::loaded_graphs l = conveyor::load(f);
  auto e = conveyor::instantiate(l.at("module"));
  e.launch(s);
  s.synchronize();
  std::vector<float> out(n);
  CONVEYOR_CHECK(cudaMemcpy(out.data(), l.buffer("y").pointer, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_NEAR(out[i], 2.0 * x0[i] + y0[i], 1e-6 * (std::abs(2.0 * x0[i] + y0[i]) + 1.0)) << i;
}

TEST(GraphFiles, EventsBindByName) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(n, 8));
  conveyor::event done;
  conveyor::graph g;
  auto a = g.kernel({blocks, 256}, k::scale, n, 2.0F, x.get());
  g.event_record({a}, done).label("done");
  conveyor::kernel_registry registry;
  registry.add(k::scale);
  conveyor::save_options o;
  o.registry = &registry;
  const conveyor::graph_file f = conveyor::to_graph_file({{"g", &g, nullptr}}, o);
  ASSERT_EQ(f.events, std::vector<std::string>{"done"});
  conveyor::event mine;
  conveyor::load_options lo;
  lo.registry = &registry;
  lo.events = {{"done", mine.get()}};
  conveyor::loaded_graphs l = conveyor::load(f, lo);
  const conveyor::stream s;
  auto e = conveyor::instantiate(l.at("g"));
  e.launch(s);
  s.synchronize();
  EXPECT_EQ(cudaEventQuery(mine.get()), cudaSuccess);
}

TEST(GraphFiles, GraphedCallablesStartFromSavedBucketsAndReplayThemOnlyForTheirArguments) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(n, 9));
  device_array<float> y(random_floats(n, 10));
  auto step = [](const conveyor::stream& s, float* data, int count) {
    k::scale<<<(count + 255) / 256, 256, 0, s.get()>>>(count, 2.0F, data);
    CONVEYOR_CHECK(cudaGetLastError());
  };
  conveyor::graphed_options go;
  go.warmup_calls = 0;
  conveyor::graphed saving(step, go);
  const conveyor::stream s;
  saving(s, x.get(), 512);
  saving(s, x.get(), 1024);
  s.synchronize();
  ASSERT_EQ(saving.cached_graphs(), 2U);
  const auto path = std::filesystem::temp_directory_path() / "conveyor-test-buckets.cgf";
  conveyor::kernel_registry registry;
  registry.add(k::scale);
  conveyor::save_options o;
  o.registry = &registry;
  o.buffers = {{"data", x.get(), x.bytes()}};
  conveyor::save_buckets(path, saving, o);
  // A fresh callable of the same type, started from the file with `data` bound to y.
  conveyor::graphed loaded(step, go);
  conveyor::load_options lo;
  lo.registry = &registry;
  lo.buffers = {{"data", y.get(), y.bytes()}};
  EXPECT_EQ(conveyor::load_buckets(loaded, path, lo, s), 2U);
  const auto y0 = y.download();
  loaded(s, y.get(), 1024); // the saved bucket, relocated to y: replayed, no capture
  s.synchronize();
  EXPECT_EQ(loaded.statistics().captures, 0U) << loaded.report();
  EXPECT_EQ(loaded.statistics().replays, 1U) << loaded.report();
  auto y1 = y.download();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y1[i], 2.0F * y0[i]) << i;
  loaded(s, x.get(), 1024); // another binding: re-captured and updated, never replayed as is
  s.synchronize();
  EXPECT_EQ(loaded.statistics().captures, 1U) << loaded.report();
  // Another callable type is refused.
  auto other = [](const conveyor::stream& s2, float* data, int count) {
    k::add_scalar<<<(count + 255) / 256, 256, 0, s2.get()>>>(count, 1.0F, data);
  };
  conveyor::graphed wrong(other, go);
  EXPECT_THROW((void)conveyor::load_buckets(wrong, path, lo, s), conveyor::load_error);
}

} // namespace
