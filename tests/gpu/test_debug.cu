// GPU tests of the graph debugger (conveyor/debug/step.hpp): a step-through run equals a replay bitwise (a DAG with
// copies, a host node, a child graph; WHILE, IF/ELSE and SWITCH nodes followed iteration by iteration); the node
// that fails is named (its own instantiation refused; an illegal address, sticky, in a fresh process); the first
// non-finite value is named with its node, buffer, index and earlier value (float, double, half, bfloat16);
// graphed's step mode and audit; the determinism check; CONVEYOR_STEP_THROUGH.
#include "support/gpu.hpp"
#include "support/moved_from.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"

#include <conveyor/conveyor.hpp>
#include <conveyor/define/conditional_device.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using conveyor::conditional_kind;
using conveyor::test::device_array;
using conveyor::test::pinned_array;

const conveyor::launch_config one_thread{dim3(1), dim3(1)};

conveyor::launch_config cover(int n) { return {dim3(static_cast<unsigned>((n + 127) / 128)), dim3(128)}; }

using conveyor::test::kernels::scale;
//! x *= 3; launched with dynamic shared memory it does not use (a launch CUDA can refuse).
__global__ void triple(int n, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 3.0F;
}
__global__ void sine(int n, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = sinf(x[i]) + 0.5F * x[i];
}
//! x[k] = log(-|x[k]| - 1): NaN at index k only.
__global__ void spoil(float* x, int k) { x[k] = logf(-fabsf(x[k]) - 1.0F); }
__global__ void spoil_double(double* x, int k) { x[k] = 1.0 / (x[k] - x[k]); } // +inf or nan
__global__ void overflow_half(__half* x, int k) { x[k] = __hmul(x[k], __float2half(60000.0F)); }
//! x[k] = x[k] / (x[k] - x[k]): an infinity (divided by a zero the compiler cannot see).
__global__ void divide_bfloat16(__nv_bfloat16* x, int k) {
  const float v = __bfloat162float(x[k]);
  x[k] = __float2bfloat16(v / (v - v));
}
//! Writes far outside any allocation: an illegal address.
__global__ void write_far(float* x) { x[1LL << 40] = 1.0F; }
__global__ void stamp_clock(long long* out) { out[0] = clock64(); }
//! WHILE body of the SWITCH test: body `which` adds `which + 1` to x[0].
__global__ void add_case(float* x, int which) { x[0] += static_cast<float>(which + 1); }
//! Sets the condition from a value in device memory.
__global__ void set_from(cudaGraphConditionalHandle h, const int* v) {
  conveyor::set_condition(h, static_cast<unsigned>(*v));
}
__global__ void grow_and_continue(cudaGraphConditionalHandle h, float* x, int* counter, int limit) {
  x[0] = x[0] * 1.5F + static_cast<float>(*counter);
  const int c = ++*counter;
  conveyor::set_condition(h, c < limit ? 1U : 0U);
}

std::vector<float> download(const device_array<float>& a) { return a.download(); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- step-through equals replay ----------------------------------------------------------------------------------

// A fork/join DAG with a pinned upload, a host node, a memset and a child graph, run node by node: the same bits as
// one replay, in a topological order, each node once.
TEST(StepThrough, AMovedFromGraphIsRefusedBeforeAnythingRuns) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> x(conveyor::test::random_floats(n, 75));
  conveyor::graph g;
  (void)g.kernel(cover(n), scale, n, 2.0F, x.get()).label("scale x");
  conveyor::graph taken(std::move(g));
  conveyor::stream s;
  int steps = 0;
  conveyor::step_options options;
  options.on_step = [&](const conveyor::step_node&) { ++steps; };
  EXPECT_REFUSES_MOVED_FROM("conveyor::step_through", (void)conveyor::step_through(g, s, options));
  EXPECT_REFUSES_MOVED_FROM("conveyor::step_order", (void)conveyor::step_order(g));
  EXPECT_EQ(steps, 0);
  EXPECT_EQ(conveyor::step_order(taken).size(), 1U);
}

TEST(StepThrough, ADagRunNodeByNodeEqualsItsReplayBitwise) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4000;
  const auto input = conveyor::test::random_floats(n, 71);
  pinned_array<float> host_in(n);
  host_in.assign(input);
  device_array<float> x(n), y(n), z(n);
  int host_calls = 0;
  conveyor::graph body;
  (void)body.kernel(cover(n), sine, n, z.get()).label("sine z");
  conveyor::graph g;
  const auto up = g.memcpy(x.get(), host_in.get(), x.bytes()).label("upload x");
  const auto clear = g.memset(y.get(), 0.0F, static_cast<std::size_t>(n)).label("y = 0");
  const auto a = g.kernel({up}, cover(n), scale, n, 1.25F, x.get()).label("scale x");
  using conveyor::test::kernels::add_vectors; // out = a + b
  // After `scale x`: `y += x` reads x, which `scale x` writes (side by side they would race).
  const auto b = g.kernel({a, clear}, cover(n), add_vectors, n, static_cast<const float*>(x.get()),
                          static_cast<const float*>(y.get()), y.get())
                     .label("y += x");
  const auto c = g.kernel({a, b}, cover(n), add_vectors, n, static_cast<const float*>(y.get()),
                          static_cast<const float*>(x.get()), x.get())
                     .label("x += y");
  const auto h = g.host({c}, [&] { ++host_calls; }).label("count");
  const auto copy = g.memcpy({c}, z.get(), x.get(), x.bytes()).label("z = x");
  (void)g.child({copy, h}, body).label("child");

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  const auto replay_x = download(x), replay_y = download(y), replay_z = download(z);
  ASSERT_EQ(host_calls, 1);

  std::vector<std::string> seen;
  conveyor::step_options o;
  o.on_step = [&](const conveyor::step_node& node) { seen.push_back(node.path); };
  const auto report = conveyor::step_through(exec, s, o);
  EXPECT_EQ(host_calls, 2);
  EXPECT_TRUE(same_bits(download(x), replay_x));
  EXPECT_TRUE(same_bits(download(y), replay_y));
  EXPECT_TRUE(same_bits(download(z), replay_z));
  EXPECT_EQ(report.steps, 8U); // 7 nodes, the child graph stepped into (1 node)
  ASSERT_EQ(seen.size(), 8U);
  const auto at = [&](const std::string& part) {
    return std::find_if(seen.begin(), seen.end(),
                        [&](const std::string& p) { return p.find(part) != std::string::npos; }) -
           seen.begin();
  };
  EXPECT_LT(at("'upload x'"), at("'scale x'"));
  EXPECT_LT(at("'y = 0'"), at("'y += x'"));
  EXPECT_LT(at("'scale x'"), at("'y += x'"));
  EXPECT_LT(at("'y += x'"), at("'x += y'"));
  EXPECT_LT(at("'z = x'"), at("'sine z'"));
  EXPECT_NE(seen[static_cast<std::size_t>(at("'sine z'"))].find("'child' (child_graph) > node 0 'sine z' (kernel)"),
            std::string::npos)
      << seen.back();
  // The order a reader sees without running it.
  const auto order = conveyor::step_order(g);
  ASSERT_EQ(order.size(), 8U);
  EXPECT_EQ(order.front().path, seen.front());
}

// WHILE, IF/ELSE and SWITCH nodes whose conditions kernels compute on the device: each body iteration stepped
// through, the conditions followed as the graph follows them, the same bits as a replay.
TEST(StepThrough, ConditionalBodiesAreFollowedIterationByIteration) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(1);
  device_array<int> counter(1), which(1), flag(1);
  const int limit = 7;
  // x grows in a loop of `limit` iterations (the condition set by the body), then an IF/ELSE on a flag and a
  // SWITCH on `which` add their case.
  device_array<int> limit_value(1);
  limit_value.upload({limit});
  conveyor::graph g2;
  const auto c_loop = conveyor::make_condition(g2, 0, conveyor::condition_reset::each_launch);
  const auto c_if = conveyor::make_condition(g2, 0, conveyor::condition_reset::each_launch);
  const auto c_switch = conveyor::make_condition(g2, 0, conveyor::condition_reset::each_launch);
  const auto reset = g2.memset(counter.get(), 0, 1).label("counter = 0");
  const auto seed = g2.memset(x.get(), 1.0F, 1).label("x = 1");
  const auto first = g2.kernel({reset, seed}, one_thread, conveyor::test::kernels::set_below_limit, c_loop.handle,
                               static_cast<const int*>(counter.get()), static_cast<const int*>(limit_value.get()))
                         .label("loop while counter < limit");
  auto loop = conveyor::add_conditional(g2, {first}, conditional_kind::while_loop, c_loop);
  (void)loop.bodies[0]
      .kernel(one_thread, grow_and_continue, c_loop.handle, x.get(), counter.get(), limit)
      .label("grow");
  const auto set_if =
      g2.kernel({loop.node}, one_thread, set_from, c_if.handle, static_cast<const int*>(flag.get())).label("if flag");
  auto branch = conveyor::add_conditional(g2, {set_if}, conditional_kind::if_then_else, c_if);
  (void)branch.bodies[0].kernel(one_thread, add_case, x.get(), 10).label("flag set");
  (void)branch.bodies[1].kernel(one_thread, add_case, x.get(), 20).label("flag clear");
  const auto set_switch =
      g2.kernel({branch.node}, one_thread, set_from, c_switch.handle, static_cast<const int*>(which.get()))
          .label("switch on which");
  auto cases = conveyor::add_conditional(g2, {set_switch}, conditional_kind::switch_case, c_switch, 3);
  for (int k = 0; k < 3; ++k)
    (void)cases.bodies[static_cast<std::size_t>(k)].kernel(one_thread, add_case, x.get(), 100 * k);

  std::printf("condition handles: %#llx %#llx %#llx\n", static_cast<unsigned long long>(c_loop.handle),
              static_cast<unsigned long long>(c_if.handle), static_cast<unsigned long long>(c_switch.handle));
  conveyor::stream s;
  auto exec = conveyor::instantiate(g2);
  for (const auto [f, w] : {std::pair{1, 2}, std::pair{0, 1}, std::pair{1, 5}}) {
    flag.upload({f});
    which.upload({w});
    exec.launch(s);
    s.synchronize();
    const auto replayed = download(x);
    const int replay_count = counter.download()[0];
    x.upload({-3.0F});
    counter.upload({-9});
    const auto report = conveyor::step_through(exec, s);
    EXPECT_TRUE(same_bits(download(x), replayed)) << "flag " << f << " which " << w;
    EXPECT_EQ(counter.download()[0], replay_count);
    EXPECT_EQ(replay_count, limit);
    // limit WHILE iterations, one IF body, a SWITCH body unless `which` is past the cases.
    EXPECT_EQ(report.iterations, static_cast<std::size_t>(limit) + 1 + (w < 3 ? 1 : 0)) << "which " << w;
    EXPECT_EQ(report.steps, 3 + static_cast<std::size_t>(limit) + 2 + 1 + (w < 3 ? 1 : 0));
  }
}

// ---- the failing node is named ---------------------------------------------------------------------------------

// A kernel node whose own launch CUDA refuses (more dynamic shared memory than the device has): the step-through
// run names it, its position, launch shape and dependencies; the error is not sticky, and the nodes before it ran.
TEST(StepThrough, ANodeCudaRefusesIsNamedWithItsShapeAndDependencies) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 512;
  device_array<float> x(conveyor::test::random_floats(n, 5));
  conveyor::graph g;
  const auto a = g.kernel(cover(n), scale, n, 2.0F, x.get()).label("double x");
  // A node CUDA accepts when it is added and refuses when it runs: `triple` is allowed 100 KiB of dynamic shared
  // memory while the node is added, and the allowance is taken back before the step-through.
  conveyor::launch_config big = cover(n);
  big.shared_bytes = 100U << 10;
  cudaFuncAttributes attributes{};
  CONVEYOR_CHECK(cudaFuncGetAttributes(&attributes, triple));
  CONVEYOR_CHECK(cudaFuncSetAttribute(triple, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10));
  (void)g.kernel({a}, big, triple, n, x.get()).label("triple x");
  CONVEYOR_CHECK(
      cudaFuncSetAttribute(triple, cudaFuncAttributeMaxDynamicSharedMemorySize, attributes.maxDynamicSharedSizeBytes));
  const auto before = x.download();
  conveyor::stream s;
  try {
    (void)conveyor::step_through(g, s);
    FAIL() << "the refused node was not reported";
  } catch (const conveyor::step_failure& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.node().order, 1U) << what;
    EXPECT_EQ(e.node().label, "triple x");
    EXPECT_FALSE(e.sticky());
    EXPECT_NE(what.find("step 1: node 1 'triple x' (kernel"), std::string::npos) << what;
    EXPECT_NE(what.find("102400 B dynamic shared memory"), std::string::npos) << what;
    EXPECT_NE(what.find("after node 0 'double x' (kernel)"), std::string::npos) << what;
    EXPECT_NE(what.find("arguments 0: 0x200 (4 B)"), std::string::npos) << what; // n = 512
    ASSERT_EQ(e.node().position, std::vector<std::size_t>{1});
    // The node before it ran: x doubled.
    const auto after = x.download();
    for (int i = 0; i < n; ++i) ASSERT_EQ(after[i], before[i] * 2.0F) << i;
    // The description marks it for the exports.
    auto d = conveyor::describe(g);
    ASSERT_TRUE(conveyor::mark_fault(d, e.node(), cudaGetErrorName(e.code())));
    EXPECT_NE(conveyor::to_dot(d).find("penwidth=3"), std::string::npos);
    EXPECT_NE(conveyor::to_json(d).find("\"fault\""), std::string::npos);
  }
}

// An illegal address inside a graph: sticky, so the step-through run happens in a fresh process (a death test that
// re-runs this program), which names the node and says the error is sticky.
TEST(StepThroughDeathTest, AnIllegalAddressIsNamedInAFreshProcess) {
  CONVEYOR_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        device_array<float> x(64);
        conveyor::graph g;
        const auto a = g.memset(x.get(), 1.0F, 64).label("x = 1");
        const auto b = g.kernel({a}, cover(64), scale, 64, 2.0F, x.get()).label("double x");
        (void)g.kernel({b}, one_thread, write_far, x.get()).label("write far away");
        conveyor::stream s;
        try {
          (void)conveyor::step_through(g, s);
        } catch (const conveyor::step_failure& e) {
          std::fprintf(stderr, "%s\nsticky=%d\n", e.what(), e.sticky() ? 1 : 0);
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3),
      "step 2: node 2 'write far away' \\(kernel.*cudaErrorIllegalAddress.*This error is sticky");
}

// ---- the first non-finite value ----------------------------------------------------------------------------------

TEST(StepThrough, TheFirstNonFiniteValueIsNamedWithNodeBufferIndexAndEarlierValue) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const auto input = conveyor::test::random_floats(n, 17);
  device_array<float> x(input), other(input);
  conveyor::graph g;
  const auto a = g.kernel(cover(n), scale, n, 2.0F, x.get()).label("double x");
  const auto b = g.kernel({a}, cover(n), sine, n, x.get()).label("sine x");
  const auto c = g.kernel({b}, one_thread, spoil, x.get(), 37).label("spoil x[37]");
  (void)g.kernel({c}, cover(n), scale, n, 3.0F, x.get()).label("triple x");
  (void)g.kernel(cover(n), scale, n, 0.5F, other.get()).label("halve other");
  conveyor::step_options o;
  o.nonfinite = {{"other", other.get(), conveyor::element_type::f32, static_cast<std::size_t>(n)},
                 {"x", x.get(), conveyor::element_type::f32, static_cast<std::size_t>(n)}};
  conveyor::stream s;
  try {
    (void)conveyor::step_through(g, s, o);
    FAIL() << "no non-finite value reported";
  } catch (const conveyor::nonfinite_error& e) {
    EXPECT_EQ(e.node().label, "spoil x[37]") << e.what();
    EXPECT_EQ(e.buffer(), "x");
    EXPECT_EQ(e.index(), 37U);
    EXPECT_TRUE(std::isnan(e.after()));
    const float doubled = input[37] * 2.0F;
    EXPECT_FLOAT_EQ(static_cast<float>(e.before()), sinf(doubled) + 0.5F * doubled);
    EXPECT_NE(std::string(e.what()).find("buffer 'x' holds nan at index 37"), std::string::npos) << e.what();
  }
}

// double, half and bfloat16 buffers: infinities and NaNs found in each element type.
TEST(StepThrough, NonFiniteValuesAreFoundInDoubleHalfAndBfloat16) {
  CONVEYOR_REQUIRE_GPU();
  device_array<double> d(std::vector<double>(16, 2.5));
  device_array<__half> h(std::vector<__half>(16, __float2half(3.0F)));
  device_array<__nv_bfloat16> bf(std::vector<__nv_bfloat16>(16, __float2bfloat16(1.5F)));
  struct kase {
    const char* label;
    conveyor::watched_buffer buffer;
    int index;
    double before;
  };
  const kase cases[] = {
      {"inf in double", {"d", d.get(), conveyor::element_type::f64, 16}, 5, 2.5},
      {"overflow in half", {"h", h.get(), conveyor::element_type::f16, 16}, 9, 3.0},
      {"inf in bfloat16", {"bf", bf.get(), conveyor::element_type::bf16, 16}, 2, 1.5},
  };
  for (const auto& k : cases) {
    conveyor::graph g;
    if (k.buffer.type == conveyor::element_type::f64)
      (void)g.kernel(one_thread, spoil_double, d.get(), k.index).label(k.label);
    if (k.buffer.type == conveyor::element_type::f16)
      (void)g.kernel(one_thread, overflow_half, h.get(), k.index).label(k.label);
    if (k.buffer.type == conveyor::element_type::bf16)
      (void)g.kernel(one_thread, divide_bfloat16, bf.get(), k.index).label(k.label);
    conveyor::step_options o;
    o.nonfinite = {k.buffer};
    conveyor::stream s;
    try {
      (void)conveyor::step_through(g, s, o);
      ADD_FAILURE() << k.label << ": not reported";
    } catch (const conveyor::nonfinite_error& e) {
      EXPECT_EQ(e.index(), static_cast<std::size_t>(k.index)) << k.label;
      EXPECT_EQ(e.before(), k.before) << k.label;
      EXPECT_FALSE(std::isfinite(e.after())) << k.label;
      EXPECT_EQ(e.node().label, k.label);
    }
  }
}

// ---- graphed: step mode and audit --------------------------------------------------------------------------------

void diverging_step(const conveyor::stream& s, int n, float lr, float* w) {
  scale<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, lr, w);
  sine<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, w);
  spoil<<<1, 1, 0, s.get()>>>(w, n - 1);
  conveyor::check_launch("diverging_step");
}

TEST(Graphed, StepModeNamesTheNodeWhereAWatchedBufferStopsBeingFinite) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> w(conveyor::test::random_floats(n, 9));
  conveyor::graphed_options o;
  o.warmup_calls = 0;
  o.step_through = true;
  o.step.nonfinite = {{"weights", w.get(), conveyor::element_type::f32, static_cast<std::size_t>(n)}};
  conveyor::graphed step(diverging_step, o);
  conveyor::stream s;
  try {
    step(s, n, 0.5F, w.get());
    FAIL() << "not reported";
  } catch (const conveyor::nonfinite_error& e) {
    EXPECT_EQ(e.node().order, 2U) << e.what();
    EXPECT_EQ(e.index(), static_cast<std::size_t>(n - 1));
    EXPECT_NE(e.node().kernel_name.find("spoil"), std::string::npos) << e.what();
  }
  EXPECT_EQ(step.statistics().stepped, 1U);
  EXPECT_EQ(step.cached_graphs(), 0U);
}

// An argument declared patchable (rebind_policy::patch) although the callable branches on it: the patched replay
// runs the old branch. The audit re-captures and names the difference at that call.
void branchy(const conveyor::stream& s, int n, float a, float* x) {
  if (a < 0) scale<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, -1.0F, x); // negate first
  scale<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, a < 0 ? -a : a, x);
  conveyor::check_launch("branchy");
}

TEST(Graphed, AnAuditCatchesAPatchedArgumentTheCallableBranchesOn) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 300;
  device_array<float> x(conveyor::test::random_floats(n, 13));
  conveyor::graphed_options o;
  o.warmup_calls = 0;
  o.rebind = conveyor::rebind_policy::patch; // a wrong promise: the callable branches on `a`
  o.audit_every = 1;
  conveyor::graphed step(branchy, o);
  conveyor::stream s;
  step(s, n, 2.0F, x.get()); // captured
  step(s, n, 3.0F, x.get()); // patched, and the audit agrees
  EXPECT_EQ(step.statistics().rebinds, 1U) << step.report();
  EXPECT_EQ(step.statistics().audits, 1U);
  try {
    step(s, n, -1.0F, x.get()); // patched: the negate branch is missing
    FAIL() << "the audit did not see the other branch\n" << step.report();
  } catch (const conveyor::audit_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("call 3"), std::string::npos) << what;
    EXPECT_NE(what.find("the capture has 2 nodes, the executable graph 1"), std::string::npos) << what;
  }
}

// State the callable reads by reference is not in the key: a replay runs what the capture saw, and the audit says so.
TEST(Graphed, AnAuditCatchesStateTheKeyDoesNotSee) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 128;
  device_array<float> x(conveyor::test::random_floats(n, 19));
  float factor = 2.0F;
  conveyor::graphed_options o;
  o.warmup_calls = 0;
  o.audit_every = 2;
  conveyor::graphed step(
      [&factor](const conveyor::stream& s, int count, float* p) {
        scale<<<cover(count).grid, cover(count).block, 0, s.get()>>>(count, factor, p);
      },
      o);
  conveyor::stream s;
  step(s, n, x.get());
  step(s, n, x.get()); // replay 1: not audited (every 2nd)
  step(s, n, x.get()); // replay 2: audited, equal
  EXPECT_EQ(step.statistics().audits, 1U);
  factor = 4.0F;
  step(s, n, x.get()); // replay 3: not audited
  try {
    step(s, n, x.get()); // replay 4: audited, the capture now scales by 4
    FAIL() << "the audit did not see the changed state";
  } catch (const conveyor::audit_error& e) {
    EXPECT_NE(std::string(e.what()).find("node 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("arguments 1"), std::string::npos) << e.what();
  }
}

// ---- determinism -------------------------------------------------------------------------------------------------

TEST(Determinism, AClockReadingNodeIsNamedAndADeterministicGraphPasses) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  device_array<float> x(conveyor::test::random_floats(n, 23));
  device_array<long long> stamp(1);
  conveyor::graph g;
  const auto a = g.kernel(cover(n), sine, n, x.get()).label("sine x");
  (void)g.kernel({a}, one_thread, stamp_clock, stamp.get()).label("stamp clock");
  (void)g.kernel({a}, cover(n), scale, n, 1.5F, x.get()).label("scale x");
  auto exec = conveyor::instantiate(g);
  conveyor::stream s;
  const conveyor::watched_buffer xb{"x", x.get(), conveyor::element_type::f32, static_cast<std::size_t>(n)};
  const conveyor::watched_buffer sb{"stamp", stamp.get(), conveyor::element_type::f64, 1}; // 8 bytes compared
  const auto plain = conveyor::check_determinism(exec, s, {xb});
  EXPECT_TRUE(plain.deterministic());
  const auto report = conveyor::check_determinism(exec, s, {xb, sb}, true);
  ASSERT_EQ(report.differing.size(), 1U);
  EXPECT_EQ(report.differing[0].name, "stamp");
  ASSERT_TRUE(report.first_node.has_value());
  EXPECT_EQ(report.first_node->label, "stamp clock");
}

// ---- CONVEYOR_STEP_THROUGH ---------------------------------------------------------------------------------------

// Run by CTest with CONVEYOR_STEP_THROUGH=1 (StepThroughEnv.*): an unchanged launch runs node by node and names the
// refused node.
__global__ void spin_then_flag(volatile int* flag, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
  *flag = 1;
}

TEST(StepThroughEnv, AnUnchangedLaunchRunsNodeByNodeWhenTheVariableIsSet) {
  CONVEYOR_REQUIRE_GPU();
  const char* v = std::getenv("CONVEYOR_STEP_THROUGH");
  if (v == nullptr || std::string(v) == "0") GTEST_SKIP() << "run with CONVEYOR_STEP_THROUGH=1 (CTest does)";
  int* flag = nullptr; // mapped pinned memory: the host sees the kernel's write without a synchronisation
  CONVEYOR_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int), cudaHostAllocMapped));
  *flag = 0;
  int* device_flag = nullptr;
  CONVEYOR_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0));
  conveyor::graph g;
  (void)g.kernel(one_thread, spin_then_flag, static_cast<volatile int*>(device_flag), 200'000'000LL).label("spin");
  auto exec = conveyor::instantiate(g);
  EXPECT_TRUE(exec.steps_through_launches());
  EXPECT_TRUE(exec.facts().step_through);
  conveyor::stream s;
  exec.launch(s); // step by step: returns after the node's synchronisation (about 0.1 s of spinning)
  EXPECT_EQ(*static_cast<volatile int*>(flag), 1);
  s.synchronize();
  CONVEYOR_CHECK(cudaFreeHost(flag));
}

// Run by CTest with CONVEYOR_AUDIT_EVERY=1 (AuditEnv.*): a whole program audited without changing its code. The
// callable sizes its grid from what a pointer argument points to; the caller changes it in place. The key sees the
// pointer, not the value: the replay would run the old grid. The audit (on through the variable) names the node.
struct step_params {
  int n = 0;
};

void sized_by_params(const conveyor::stream& s, const step_params* p, float* x) {
  scale<<<cover(p->n).grid, cover(p->n).block, 0, s.get()>>>(p->n, 2.0F, x);
  conveyor::check_launch("sized_by_params");
}

TEST(AuditEnv, TheVariableAuditsAProgramThatChangesStateBehindAPointer) {
  CONVEYOR_REQUIRE_GPU();
  const char* v = std::getenv("CONVEYOR_AUDIT_EVERY");
  if (v == nullptr || std::string(v) != "1") GTEST_SKIP() << "run with CONVEYOR_AUDIT_EVERY=1 (CTest does)";
  conveyor::graphed_options o;
  EXPECT_EQ(o.audit_every, 1U);
  o.warmup_calls = 0;
  conveyor::graphed step(sized_by_params, o);
  device_array<float> x(conveyor::test::random_floats(4096, 23));
  step_params p{256};
  conveyor::stream s;
  step(s, &p, x.get()); // captured: one block
  step(s, &p, x.get()); // replayed, audited, equal
  p.n = 4096;           // changed in place: the eager call would launch 16 blocks
  try {
    step(s, &p, x.get());
    FAIL() << "the audit did not see the grid the eager call would launch\n" << step.report();
  } catch (const conveyor::audit_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node 0"), std::string::npos) << what;
    EXPECT_NE(what.find("scale"), std::string::npos) << what;
  }
  EXPECT_EQ(step.statistics().audits, 2U);
}

} // namespace
