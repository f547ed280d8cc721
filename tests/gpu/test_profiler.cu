// GPU tests of the profiler (conveyor/profile/profiler.hpp) and of what the doctor reads from CUDA: CUPTI records of
// a graph with a child graph and a WHILE body attributed to every node (instantiated before the profiler started),
// per-node times against the launches' busy time, unwatched graphs, eager steps, graphed callables' executable
// graphs, one profiler at a time; exec_facts (upload, legacy stream) and the description fields (buffers, pageable
// copies, capture stream).

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"

#include <conveyor/conveyor.hpp>
#include <conveyor/profile/doctor.hpp>
#include <conveyor/profile/profiler.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::random_floats;
namespace kernels = conveyor::test::kernels;
namespace profile = conveyor::profile;

const conveyor::launch_config one_thread{dim3(1), dim3(1)};

#define REQUIRE_WHILE()                                                                                                \
  do {                                                                                                                 \
    int driver_ = 0;                                                                                                   \
    CONVEYOR_CHECK(cudaDriverGetVersion(&driver_));                                                                    \
    if (driver_ < conveyor::required_cuda_version(conveyor::conditional_kind::while_loop))                             \
      GTEST_SKIP() << "the driver supports CUDA " << driver_ << "; WHILE nodes need more";                             \
  } while (0)

// A profiler, or the test skips when CUPTI cannot start one here (another CUPTI tool, e.g. compute-sanitizer).
#define START_PROFILER(name) CONVEYOR_START_CUPTI_SUBSCRIBER(profile::profiler, name)

const profile::node_profile* find_node(const profile::profile_report& r, const std::string& label) {
  for (const auto& n : r.nodes)
    if (n.ref.label == label) return &n;
  return nullptr;
}

std::string labels_of(const profile::profile_report& r) {
  std::string out;
  for (const auto& n : r.nodes) out += "'" + n.ref.label + "' ";
  return out;
}

// A serial graph touching every attribution path: memset -> axpy -> child graph (scale) -> WHILE (count_up x limit)
// -> memcpy DtoH. Returns the graph; the buffers live in the caller.
struct nested_buffers {
  int n = 1 << 16;
  device_array<float> x{random_floats(1 << 16, 7)};
  device_array<float> y{1 << 16};
  device_array<int> counter{1};
  device_array<int> limit{std::vector<int>{5}};
  conveyor::test::pinned_array<float> out{1 << 16};
};

conveyor::graph nested_graph(nested_buffers& b) {
  conveyor::graph g;
  const auto zero = g.memset(b.y.get(), 0.0F, b.n).label("zero y");
  const auto ax = g.kernel({zero}, cover(b.n), kernels::axpy, b.n, 2.0F, b.x.get(), b.y.get()).label("axpy");
  conveyor::graph body;
  (void)body.kernel(cover(b.n), kernels::scale, b.n, 0.5F, b.y.get()).label("halve");
  const auto child = g.child({ax}, body).label("child");
  const auto reset = g.memset({child}, b.counter.get(), 0, 1).label("counter = 0");
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto init = g.kernel({reset}, one_thread, kernels::set_below_limit, cond.handle, b.counter.get(), b.limit.get())
                        .label("init");
  auto loop = conveyor::add_conditional(g, {init}, conveyor::conditional_kind::while_loop, cond);
  loop.node.label("loop");
  (void)loop.bodies[0]
      .kernel(one_thread, kernels::count_up, cond.handle, b.counter.get(), b.limit.get())
      .label("count");
  (void)g.memcpy({loop.node}, b.out.get(), b.y.get(), b.n * sizeof(float), cudaMemcpyDeviceToHost).label("download");
  return g;
}

TEST(Profiler, AttributesEveryRecordOfANestedGraph) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_WHILE();
  nested_buffers b;
  auto g = nested_graph(b);
  conveyor::stream s;
  constexpr int launches = 10;
  START_PROFILER(prof);
  auto exec = conveyor::instantiate(g, conveyor::instantiate_flags::none, s);
  prof.watch(exec, "nested", conveyor::describe(exec));
  for (int i = 0; i < launches; ++i) {
    auto step = prof.step("graph");
    exec.launch(s);
  }
  const auto t = prof.collect(); // before the checks' own copies, which the profiler would record too
  // The graph computed what it should: y = (2x) / 2, and the loop counted to the limit.
  const auto hx = b.x.download();
  for (int i = 0; i < b.n; i += 997) ASSERT_FLOAT_EQ(b.out[i], hx[i]) << i;
  EXPECT_EQ(b.counter.download().at(0), 5);

  const auto r = profile::analyze(t);
  // memset, axpy, halve, memset, init, 5 x count, memcpy = 11 records per launch
  EXPECT_EQ(r.records, static_cast<std::size_t>(11 * launches));
  EXPECT_EQ(r.attributed, r.records) << profile::to_text(r);
  EXPECT_TRUE(r.unattributed.empty()) << profile::to_text(r);
  EXPECT_EQ(r.dropped_records, 0U);
  ASSERT_EQ(r.launches.size(), static_cast<std::size_t>(launches));

  const auto* count = find_node(r, "loop/body 0/count");
  ASSERT_NE(count, nullptr) << labels_of(r);
  EXPECT_EQ(count->records, static_cast<std::size_t>(5 * launches)); // every WHILE iteration
  EXPECT_EQ(count->launches, static_cast<std::size_t>(launches));
  const auto* halve = find_node(r, "child/body 0/halve"); // the body's own label, through CUDA's copy of it
  ASSERT_NE(halve, nullptr) << labels_of(r);
  EXPECT_EQ(halve->records, static_cast<std::size_t>(launches));
  const auto* ax = find_node(r, "axpy");
  ASSERT_NE(ax, nullptr) << labels_of(r);
  EXPECT_EQ(ax->kind, conveyor::node_kind::kernel);
  EXPECT_GT(ax->min_us, 0.0);
  EXPECT_LE(ax->min_us, ax->median_us);
  EXPECT_LE(ax->median_us, ax->max_us);
  const auto* download = find_node(r, "download");
  ASSERT_NE(download, nullptr) << labels_of(r);
  EXPECT_EQ(download->kind, conveyor::node_kind::memcpy);
  const auto* zero = find_node(r, "zero y"); // CUDA runs this memset node as a kernel of its own (memset32)
  ASSERT_NE(zero, nullptr) << labels_of(r);
  EXPECT_EQ(zero->records, static_cast<std::size_t>(launches));
  EXPECT_TRUE(r.notes.empty());

  // The graph is serial: node times add up to the busy time (within 5%), and the shares to 1.
  ASSERT_EQ(r.tracks.size(), 1U);
  const auto& track = r.tracks[0];
  EXPECT_EQ(track.track, "graph");
  EXPECT_NEAR(track.node_time_us / track.busy_us, 1.0, 0.05) << profile::to_text(r);
  double shares = 0;
  for (const auto& n : r.nodes) shares += n.share;
  EXPECT_NEAR(shares, 1.0, 1e-9);
  for (const auto& l : r.launches) {
    EXPECT_EQ(l.graph, "nested");
    EXPECT_GT(l.utilisation, 0.0);
    EXPECT_LE(l.utilisation, 1.0 + 1e-9);
    EXPECT_NEAR(l.gap_total_us, l.wall_us - l.busy_us, 1e-6);
    ASSERT_FALSE(l.critical_path.empty());
    EXPECT_EQ(l.critical_path.back(), "download"); // the last node of a chain ends the critical path
    EXPECT_LE(l.critical_path_us, l.wall_us + 1e-6);
    EXPECT_GE(l.api_to_gpu_us, 0.0);
  }

  // The Perfetto export holds one slice per record, named by node.
  const auto json = nlohmann::json::parse(profile::to_perfetto(t, r));
  std::size_t slices = 0;
  bool named = false;
  for (const auto& e : json.at("traceEvents"))
    if (e.at("ph") == "X" && e.value("cat", "") != "launch" && e.value("cat", "") != "host") {
      ++slices;
      named = named || e.at("name") == "loop/body 0/count";
    }
  EXPECT_GE(slices, r.records);
  EXPECT_TRUE(named);
  const auto dot = profile::to_dot(conveyor::describe(exec), r, "nested");
  EXPECT_NE(dot.find("halve"), std::string::npos);
}

// A graph instantiated before the process's first profiler started: CUPTI (CUDA 13.0, H200) then records only the
// first iteration of a WHILE body per launch. The profile says so, and what it records is still attributed.
TEST(Profiler, NotesWhileBodiesOfAGraphInstantiatedBeforeProfiling) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_WHILE();
  nested_buffers b;
  auto g = nested_graph(b);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g, conveyor::instantiate_flags::none, s); // before any profiler
  START_PROFILER(prof);
  prof.watch(exec, "early", conveyor::describe(exec));
  for (int i = 0; i < 3; ++i) {
    auto step = prof.step("graph");
    exec.launch(s);
  }
  const auto t = prof.collect();
  ASSERT_EQ(t.graphs.size(), 1U);
  if (!t.graphs[0].instantiated_before_profiling)
    GTEST_SKIP() << "a profiler ran earlier in this process (run this test alone, as CTest does)";
  const auto r = profile::analyze(t);
  EXPECT_EQ(r.attributed, r.records) << profile::to_text(r);
  ASSERT_EQ(r.notes.size(), 1U);
  EXPECT_NE(r.notes[0].find("'early' was instantiated before the first profiler"), std::string::npos) << r.notes[0];
  const auto* count = find_node(r, "loop/body 0/count");
  ASSERT_NE(count, nullptr) << labels_of(r);
  EXPECT_GE(count->records, 3U);
  EXPECT_LE(count->records, 15U);
  EXPECT_NE(profile::to_text(r).find("note: graph 'early'"), std::string::npos);
  EXPECT_EQ(b.counter.download().at(0), 5); // the loop itself ran every iteration
}

TEST(Profiler, ReportsAnUnwatchedGraphWithTheReason) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  device_array<float> x(random_floats(n, 3));
  conveyor::graph g;
  (void)g.kernel(cover(n), kernels::scale, n, 1.0F, x.get());
  conveyor::stream s;
  auto exec = conveyor::instantiate(g, conveyor::instantiate_flags::none, s);
  START_PROFILER(prof);
  exec.launch(s);
  const auto r = prof.report();
  EXPECT_EQ(r.records, 1U);
  EXPECT_EQ(r.attributed, 0U);
  ASSERT_EQ(r.unattributed.size(), 1U);
  EXPECT_NE(r.unattributed[0].reason.find("not watched"), std::string::npos) << r.unattributed[0].reason;
}

TEST(Profiler, AttributesEagerStepsByKernelAndOrder) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1 << 14;
  device_array<float> x(random_floats(n, 4)), y(random_floats(n, 5));
  conveyor::stream s;
  START_PROFILER(prof);
  for (int i = 0; i < 3; ++i) {
    auto step = prof.step("sync");
    kernels::axpy<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, 1.0F, x.get(), y.get());
    s.synchronize();
    kernels::scale<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, 0.5F, y.get());
    s.synchronize();
    kernels::axpy<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, 1.0F, x.get(), y.get());
    s.synchronize();
  }
  conveyor::check_launch("eager steps");
  const auto t = prof.collect();
  ASSERT_EQ(t.steps.size(), 3U);
  for (const auto& a : t.activities) EXPECT_NE(a.step, 0U) << a.name << " has no step";
  const auto r = profile::analyze(t);
  EXPECT_EQ(r.records, 9U);
  EXPECT_EQ(r.attributed, 9U) << profile::to_text(r);
  ASSERT_EQ(r.launches.size(), 3U);
  for (const auto& l : r.launches) {
    EXPECT_EQ(l.track, "sync");
    EXPECT_EQ(l.activities, 3U);
    EXPECT_LT(l.utilisation, 1.0); // the host waits between kernels: the GPU idles
    EXPECT_GE(l.gap_count, 2U);
  }
  const auto* first = find_node(r, "conveyor::test::kernels::axpy #1");
  const auto* second = find_node(r, "conveyor::test::kernels::axpy #2");
  const auto* sc = find_node(r, "conveyor::test::kernels::scale");
  ASSERT_TRUE(first && second && sc) << labels_of(r);
  EXPECT_EQ(first->records, 3U);
  EXPECT_EQ(second->records, 3U);
  EXPECT_EQ(sc->launches, 3U);
}

TEST(Profiler, ProfilesAGraphedCallablesExecutableGraphWithoutAnotherCapture) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1 << 12;
  device_array<float> x(random_floats(n, 6)), y(random_floats(n, 8));
  conveyor::stream s;
  conveyor::graphed step(
      [](const conveyor::stream& st, int m, const float* a, float* b) {
        kernels::axpy<<<cover(m).grid, cover(m).block, 0, st.get()>>>(m, 2.0F, a, b);
        kernels::scale<<<cover(m).grid, cover(m).block, 0, st.get()>>>(m, 0.5F, b);
        conveyor::check_launch("graphed step");
      },
      conveyor::graphed_options{.warmup_calls = 0});
  step(s, n, x.get(), y.get());
  const auto captures = step.statistics().captures;
  const auto execs = step.executables();
  ASSERT_EQ(execs.size(), 1U);
  START_PROFILER(prof);
  prof.watch(*execs[0], "step", conveyor::describe(*execs[0]));
  for (int i = 0; i < 4; ++i) step(s, n, x.get(), y.get());
  const auto r = prof.report();
  EXPECT_EQ(step.statistics().captures, captures); // profiling took no capture
  EXPECT_EQ(r.records, 8U);
  EXPECT_EQ(r.attributed, 8U) << profile::to_text(r);
  const auto* ax = find_node(r, "conveyor::test::kernels::axpy");
  ASSERT_NE(ax, nullptr) << labels_of(r);
  EXPECT_EQ(ax->records, 4U);
}

TEST(Profiler, OneAtATimeAndStepsDoNotNest) {
  CONVEYOR_REQUIRE_GPU();
  {
    START_PROFILER(first);
    EXPECT_THROW(profile::profiler second, profile::profiler_error);
    auto outer = first.step("a");
    EXPECT_THROW((void)first.step("b"), std::logic_error);
  }
  profile::profiler again; // the first one is gone
  const auto t = again.collect();
  EXPECT_TRUE(t.activities.empty());
  EXPECT_THROW(profile::profiler(profile::profiler_options{.copies = true, .buffer_bytes = 1024}),
               std::invalid_argument);
}

// ---- what the doctor reads from CUDA ---------------------------------------------------------------------------

// graphed instantiates and launches a new shape's graph in one call: its facts say so (no upload could come
// first), and a later upload is still recorded. (A review found the first launch overwriting this.)
TEST(ExecFacts, AGraphedFirstCallIsLaunchedAtInstantiation) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  device_array<float> x(random_floats(n, 19));
  conveyor::stream s;
  auto body = [](const conveyor::stream& st, int count, float* p) {
    kernels::scale<<<cover(count).grid, cover(count).block, 0, st.get()>>>(count, 1.5F, p);
    conveyor::check_launch("scale");
  };
  conveyor::graphed step(body, conveyor::graphed_options{.warmup_calls = 0});
  step(s, n, x.get());
  s.synchronize();
  const auto executables = step.executables();
  ASSERT_EQ(executables.size(), 1U);
  auto f = executables[0]->facts();
  EXPECT_TRUE(f.launched);
  EXPECT_TRUE(f.launched_at_instantiation);
  EXPECT_TRUE(f.first_launch_before_upload);
  EXPECT_FALSE(f.uploaded);
  executables[0]->upload(s);
  step(s, n, x.get());
  s.synchronize();
  f = executables[0]->facts();
  EXPECT_TRUE(f.uploaded);
  EXPECT_TRUE(f.launched_at_instantiation); // the first launch still came before it
}

TEST(ExecFacts, UploadBeforeTheFirstLaunchAndTheLegacyStream) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  device_array<float> x(random_floats(n, 9));
  conveyor::graph g;
  (void)g.kernel(cover(n), kernels::scale, n, 1.0F, x.get());
  conveyor::stream s;
  auto plain = conveyor::instantiate(g);
  EXPECT_FALSE(plain.facts().launched);
  plain.launch(s);
  auto f = plain.facts();
  EXPECT_TRUE(f.launched);
  EXPECT_FALSE(f.uploaded);
  EXPECT_TRUE(f.first_launch_before_upload);
  EXPECT_FALSE(f.launched_on_legacy_stream);

  auto uploaded = conveyor::instantiate(g, conveyor::instantiate_flags::auto_free_on_launch, s);
  uploaded.launch(s);
  f = uploaded.facts();
  EXPECT_TRUE(f.uploaded);
  EXPECT_FALSE(f.first_launch_before_upload);
  EXPECT_TRUE(f.auto_free_on_launch);

  auto later = conveyor::instantiate(g);
  later.upload(s);
  const auto legacy = conveyor::stream::adopt(cudaStreamLegacy);
  later.launch(legacy);
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  f = later.facts();
  EXPECT_FALSE(f.first_launch_before_upload);
  EXPECT_TRUE(f.launched_on_legacy_stream);

  // The doctor turns them into findings (and stays quiet for the uploaded one).
  profile::doctor_input in;
  const auto plain_facts = plain.facts();
  in.exec = &plain_facts;
  auto findings = profile::diagnose(in);
  EXPECT_TRUE(std::any_of(findings.begin(), findings.end(), [](const auto& x) { return x.check == "missing_upload"; }));
  const auto uploaded_facts = uploaded.facts();
  in.exec = &uploaded_facts;
  findings = profile::diagnose(in);
  EXPECT_FALSE(
      std::any_of(findings.begin(), findings.end(), [](const auto& x) { return x.check == "missing_upload"; }));
  in.exec = &f;
  findings = profile::diagnose(in);
  EXPECT_TRUE(std::any_of(findings.begin(), findings.end(), [](const auto& x) { return x.check == "legacy_stream"; }));
}

TEST(Describe, BuffersPageableCopiesAndTheCaptureStream) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  device_array<float> x(random_floats(n, 10)), y(random_floats(n, 11));
  std::vector<float> pageable(n);
  conveyor::test::pinned_array<float> pinned(n);
  conveyor::graph g;
  const auto k = g.kernel(cover(n), kernels::axpy, n, 1.0F, x.get(), y.get() + 128); // inside y's allocation
  (void)g.memcpy({k}, pinned.get(), y.get(), n * sizeof(float), cudaMemcpyDeviceToHost);
  const auto d = conveyor::describe(g);
  ASSERT_EQ(d.nodes.size(), 2U);
  std::vector<std::uint64_t> expected{reinterpret_cast<std::uint64_t>(x.get()),
                                      reinterpret_cast<std::uint64_t>(y.get())};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(d.nodes[0].buffers, expected);
  EXPECT_FALSE(d.nodes[1].pageable_host);
  // Pinned host memory is an allocation CUDA maps too: the copy touches both.
  std::vector<std::uint64_t> copy_buffers{reinterpret_cast<std::uint64_t>(y.get()),
                                          reinterpret_cast<std::uint64_t>(pinned.get())};
  std::sort(copy_buffers.begin(), copy_buffers.end());
  EXPECT_EQ(d.nodes[1].buffers, copy_buffers);
  EXPECT_EQ(d.nodes[1].copy_kind, "DtoH");
  EXPECT_FALSE(d.captured);

  conveyor::graph p;
  (void)p.memcpy(pageable.data(), y.get(), n * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_TRUE(conveyor::describe(p).nodes.at(0).pageable_host);

  for (const unsigned flags : {unsigned{cudaStreamNonBlocking}, unsigned{cudaStreamDefault}}) {
    conveyor::stream s(flags);
    auto c =
        conveyor::capture(s, [&] { kernels::scale<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, 1.0F, x.get()); });
    const auto cd = conveyor::describe(c);
    EXPECT_TRUE(cd.captured);
    EXPECT_EQ(cd.captured_on_blocking_stream, flags == cudaStreamDefault);
  }
}

} // namespace
