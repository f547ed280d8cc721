// GPU tests of rebinding in conveyor::graphed: a changed pointer or scalar is patched into the executable graph
// without capturing again, once a re-capture verified where it sits. Every case runs the same calls through a graphed
// callable and eagerly (graphed_options::disabled) on buffers of its own, and compares the results bitwise.
#include "support/gpu.hpp"

#include "gpu/gpu_test_util.hpp"

#include "gpu/test_kernels.cuh"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/observe/export.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

namespace k = conveyor::test::kernels;
using conveyor::test::device_array;
using conveyor::test::random_floats;
using conveyor::test::reasons_of;
using conveyor::test::same_bits;

unsigned blocks(int n) { return static_cast<unsigned>((n + 255) / 256); }

bool any_reason(const auto& step, const std::string& text) {
  for (const auto& r : step.reasons())
    if (r.find(text) != std::string::npos) return true;
  return false;
}

const conveyor::graphed_options eager{.disabled = true};
// Every argument declared to flow only into node fields: rebinding learns where each sits and patches it.
constexpr auto learn = conveyor::rebind_policy::learn;

// out = a * in + 0.5 * (in + a): three kernels, each embedding `in`, `out` or `a`.
void chain(const conveyor::stream& s, int n, float a, const float* in, float* out) {
  k::copy_plus<<<blocks(n), 256, 0, s.get()>>>(n, in, a, out);
  k::scale<<<blocks(n), 256, 0, s.get()>>>(n, 0.5F, out);
  k::axpy<<<blocks(n), 256, 0, s.get()>>>(n, a, in, out);
  conveyor::check_launch("chain");
}

// Ping-pong between two buffers for 20 calls; `a` changes at call 10 (a re-capture in the middle of rebinding).
std::vector<float> ping_pong(const conveyor::graphed_options& options, conveyor::graphed_statistics* stats = nullptr,
                             std::string* log = nullptr) {
  const int n = 5000;
  device_array<float> x(random_floats(n, 1)), y(n);
  conveyor::stream s;
  conveyor::graphed step(chain, options);
  for (int call = 0; call < 20; ++call) {
    const bool even = call % 2 == 0;
    step(s, n, call < 10 ? 0.25F : -0.75F, even ? x.get() : y.get(), even ? y.get() : x.get());
  }
  s.synchronize();
  if (stats != nullptr) *stats = step.statistics();
  if (log != nullptr) *log = step.report();
  auto out = x.download();
  auto other = y.download();
  out.insert(out.end(), other.begin(), other.end());
  return out;
}

TEST(Rebind, PointerPingPongIsPatchedWithoutCaptureAndMatchesEagerBitwise) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graphed_statistics st;
  std::string log;
  const auto got = ping_pong({.warmup_calls = 0, .rebind = learn}, &st, &log);
  EXPECT_TRUE(same_bits(got, ping_pong(eager)));
  // Call 0 captures; call 1 re-captures and verifies both pointers; call 10 re-captures for the scalar (never
  // changed before); every other call patches.
  EXPECT_EQ(st.captures, 3U) << log;
  EXPECT_EQ(st.rebinds, 17U) << log;
  EXPECT_EQ(st.nodes_patched, 17U * 3U) << log; // in and out reach all three kernels
  EXPECT_EQ(st.instantiations, 1U) << log;
  EXPECT_NE(log.find("patched 3 node(s) in place, no capture"), std::string::npos) << log;
  EXPECT_NE(log.find("argument 2 verified"), std::string::npos) << log;
}

TEST(Rebind, ReCaptureOnlyAndDeclaredPatchGiveTheSameResult) {
  CONVEYOR_REQUIRE_GPU();
  const auto want = ping_pong(eager);
  conveyor::graphed_statistics off;
  EXPECT_TRUE(same_bits(ping_pong({.warmup_calls = 0, .rebind = conveyor::rebind_policy::recapture}, &off), want));
  EXPECT_EQ(off.rebinds, 0U);
  EXPECT_EQ(off.captures, 20U);
  conveyor::graphed_statistics declared;
  std::string log;
  EXPECT_TRUE(same_bits(
      ping_pong({.warmup_calls = 0,
                 .rebind_arguments = {{2, conveyor::rebind_policy::patch}, {3, conveyor::rebind_policy::patch}}},
                &declared, &log),
      want));
  EXPECT_EQ(declared.rebinds, 18U) << log; // no verifying re-capture for the declared pointers
}

// `p` is one argument; the callable works on p, p + n and p + n/2, all inside p's allocation.
void offsets(const conveyor::stream& s, int n, float* p, const float* q) {
  k::axpy<<<blocks(n), 256, 0, s.get()>>>(n, 2.0F, q, p + n);
  k::add_vectors<<<blocks(n / 2), 256, 0, s.get()>>>(n / 2, p + n, p + n / 2, p + n / 2);
  k::scale<<<blocks(n), 256, 0, s.get()>>>(n, 0.5F, p);
  conveyor::check_launch("offsets");
}

std::vector<float> run_offsets(const conveyor::graphed_options& options, conveyor::graphed_statistics* stats,
                               std::string* log) {
  const int n = 4096;
  device_array<float> arena(random_floats(5 * static_cast<std::size_t>(n), 2));
  device_array<float> q1(random_floats(n, 3)), q2(random_floats(n, 4));
  conveyor::stream s;
  conveyor::graphed step(offsets, options);
  for (int call = 0; call < 12; ++call) step(s, n, arena.get() + (call % 3) * n, call % 4 < 2 ? q1.get() : q2.get());
  s.synchronize();
  if (stats != nullptr) *stats = step.statistics();
  if (log != nullptr) *log = step.report();
  return arena.download();
}

TEST(Rebind, PointersAtOffsetsInsideTheArgumentsAllocationFollowIt) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graphed_statistics st;
  std::string log;
  EXPECT_TRUE(
      same_bits(run_offsets({.warmup_calls = 0, .rebind = learn}, &st, &log), run_offsets(eager, nullptr, nullptr)));
  EXPECT_GE(st.rebinds, 8U) << log;
  EXPECT_EQ(st.instantiations, 1U) << log;
}

// Two arguments inside one allocation that always move together: each word could be either argument's, so the
// mapping is ambiguous and both re-capture; the result is still the eager one.
void two_views(const conveyor::stream& s, int n, const float* x, float* y) {
  k::copy_plus<<<blocks(n), 256, 0, s.get()>>>(n, x, 1.0F, y);
  conveyor::check_launch("two_views");
}

TEST(Rebind, TwoArgumentsMovingTogetherInOneAllocationFallBackToReCapture) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  auto run = [&](const conveyor::graphed_options& options, conveyor::graphed_statistics* st, std::string* log) {
    device_array<float> arena(random_floats(8 * static_cast<std::size_t>(n), 5));
    conveyor::stream s;
    conveyor::graphed step(two_views, options);
    for (int call = 0; call < 6; ++call) step(s, n, arena.get() + call * n, arena.get() + (call + 1) * n);
    s.synchronize();
    if (st != nullptr) *st = step.statistics();
    if (log != nullptr) *log = reasons_of(step);
    return arena.download();
  };
  conveyor::graphed_statistics st;
  std::string log;
  EXPECT_TRUE(same_bits(run({.warmup_calls = 0, .rebind = learn}, &st, &log), run(eager, nullptr, nullptr)));
  EXPECT_EQ(st.rebinds, 0U) << log;
  EXPECT_NE(log.find("in the same bytes"), std::string::npos) << log;
}

// x = x - lr * g
__global__ void descend(int n, float lr, const float* g, float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] - lr * g[i];
}

// A learning-rate schedule: x -= lr * g, lr changing at every call.
void sgd_step(const conveyor::stream& s, int n, float lr, const float* g, float* x) {
  descend<<<blocks(n), 256, 0, s.get()>>>(n, lr, g, x);
  k::scale<<<blocks(n), 256, 0, s.get()>>>(n, 0.999F, x);
  conveyor::check_launch("sgd_step");
}

TEST(Rebind, AScalarScheduleIsPatchedEveryCallAndMatchesEagerBitwise) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 3000;
  auto run = [&](const conveyor::graphed_options& options, conveyor::graphed_statistics* st) {
    device_array<float> g(random_floats(n, 6)), x(random_floats(n, 7));
    conveyor::stream s;
    conveyor::graphed step(sgd_step, options);
    float lr = 0.1F;
    for (int call = 0; call < 30; ++call, lr *= 0.9F) step(s, n, lr, g.get(), x.get());
    s.synchronize();
    if (st != nullptr) *st = step.statistics();
    return x.download();
  };
  conveyor::graphed_statistics st;
  EXPECT_TRUE(same_bits(run({.warmup_calls = 0, .rebind = learn}, &st), run(eager, nullptr)));
  EXPECT_EQ(st.rebinds, 28U);
  EXPECT_EQ(st.nodes_patched, 28U); // the descend node only
}

// The callable passes `a` to one kernel and the constant 2 to another: while a == 2 the constant looks like a.
void scale_then_add_two(const conveyor::stream& s, int n, float a, float* x) {
  k::scale<<<blocks(n), 256, 0, s.get()>>>(n, a, x);
  k::add_scalar<<<blocks(n), 256, 0, s.get()>>>(n, 2.0F, x);
  conveyor::check_launch("scale_then_add_two");
}

TEST(Rebind, ACoincidentalScalarValueIsNotPatchedIntoTheOtherNode) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  const float as[] = {2.0F, 3.0F, 2.0F, 0.5F, -1.0F, 2.0F, 1.25F};
  auto run = [&](const conveyor::graphed_options& options, conveyor::graphed_statistics* st,
                 std::vector<conveyor::argument_binding>* map) {
    device_array<float> x(random_floats(n, 8));
    conveyor::stream s;
    conveyor::graphed step(scale_then_add_two, options);
    for (float a : as) step(s, n, a, x.get());
    s.synchronize();
    if (st != nullptr) *st = step.statistics();
    if (map != nullptr) *map = step.bindings();
    return x.download();
  };
  conveyor::graphed_statistics st;
  std::vector<conveyor::argument_binding> map;
  EXPECT_TRUE(same_bits(run({.warmup_calls = 0, .rebind = learn}, &st, &map), run(eager, nullptr, nullptr)));
  EXPECT_EQ(st.rebinds, 5U);
  EXPECT_EQ(st.nodes_patched, 5U); // the scale node only
  ASSERT_EQ(map.size(), 2U);       // a (scalar) and x (pointer)
  EXPECT_EQ(map[0].position, 1U);
  EXPECT_EQ(map[0].state, conveyor::binding_state::patched) << map[0].reason;
  ASSERT_EQ(map[0].sites.size(), 1U);
  EXPECT_EQ(map[0].sites[0].node, 0U);
  EXPECT_EQ(map[0].sites[0].field, "kernel parameter 1");
}

// The callable computes the pointer it launches with from its argument (a scratch buffer looked up by input): the
// graph changes in a way the argument does not explain, so its changes re-capture.
TEST(Rebind, APointerTheCallableComputesFromItsArgumentFallsBackToReCapture) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1500;
  auto run = [&](const conveyor::graphed_options& options, conveyor::graphed_statistics* st, std::string* log) {
    device_array<float> in1(random_floats(n, 9)), in2(random_floats(n, 10)), t1(n), t2(n), out(n), acc(n);
    CONVEYOR_CHECK(cudaMemset(acc.get(), 0, acc.bytes()));
    CONVEYOR_CHECK(cudaDeviceSynchronize()); // the legacy stream's memset, before work on s (non-blocking)
    std::map<const float*, float*> scratch{{in1.get(), t1.get()}, {in2.get(), t2.get()}};
    auto body = [&](const conveyor::stream& s, const float* in, float* o) {
      float* tmp = scratch.at(in);
      k::copy_plus<<<blocks(n), 256, 0, s.get()>>>(n, in, 1.0F, tmp);
      k::add_vectors<<<blocks(n), 256, 0, s.get()>>>(n, tmp, in, o);
      k::add_vectors<<<blocks(n), 256, 0, s.get()>>>(n, acc.get(), o, acc.get());
      conveyor::check_launch("scratch body");
    };
    conveyor::stream s;
    conveyor::graphed step(body, options);
    for (int call = 0; call < 8; ++call) step(s, call % 2 == 0 ? in1.get() : in2.get(), out.get());
    s.synchronize();
    if (st != nullptr) *st = step.statistics();
    if (log != nullptr) *log = reasons_of(step);
    auto result = acc.download();
    const auto t = t2.download();
    result.insert(result.end(), t.begin(), t.end());
    return result;
  };
  conveyor::graphed_statistics st;
  std::string log;
  EXPECT_TRUE(same_bits(run({.warmup_calls = 0, .rebind = learn}, &st, &log), run(eager, nullptr, nullptr)));
  EXPECT_EQ(st.rebinds, 0U) << log;
  EXPECT_EQ(st.captures, 8U) << log;
  EXPECT_NE(log.find("argument 0 re-captures from now on"), std::string::npos) << log;
  EXPECT_NE(log.find("not patched: argument 0 re-captures"), std::string::npos) << log;
}

// Copies and memsets embed pointers too: a staged step (copy in, clear, combine) over rotating buffers.
void staged(const conveyor::stream& s, int n, const float* src, float* stage, float* dst) {
  CONVEYOR_CHECK(cudaMemcpyAsync(stage, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s.get()));
  CONVEYOR_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(float), s.get()));
  k::add_vectors<<<blocks(n), 256, 0, s.get()>>>(n, stage, src, dst);
  k::add_scalar<<<blocks(n), 256, 0, s.get()>>>(n, 1.0F, stage);
  conveyor::check_launch("staged");
}

TEST(Rebind, MemcpyAndMemsetPointersArePatchedToo) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2500;
  auto run = [&](const conveyor::graphed_options& options, conveyor::graphed_statistics* st, std::string* log) {
    device_array<float> a(random_floats(n, 11)), b(random_floats(n, 12)), c(random_floats(n, 13)), d(n), e(n);
    float* bufs[] = {a.get(), b.get(), c.get(), d.get(), e.get()};
    conveyor::stream s;
    conveyor::graphed step(staged, options);
    for (int call = 0; call < 10; ++call) step(s, n, bufs[call % 3], bufs[3 + call % 2], bufs[(call + 1) % 3]);
    s.synchronize();
    if (st != nullptr) *st = step.statistics();
    if (log != nullptr) *log = reasons_of(step);
    std::vector<float> all;
    for (auto* p : {&a, &b, &c, &d, &e}) {
      const auto v = p->download();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  conveyor::graphed_statistics st;
  std::string log;
  EXPECT_TRUE(same_bits(run({.warmup_calls = 0, .rebind = learn}, &st, &log), run(eager, nullptr, nullptr)));
  EXPECT_GE(st.rebinds, 6U) << log;
  EXPECT_EQ(st.instantiations, 1U) << log;
}

// A partial batch (batch_size::real below the bucket) is patched, not re-captured.
__global__ void masked_scale(int real, float a, float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < real) x[i] *= a;
}

TEST(Rebind, APartialBatchSizeIsPatchedIntoTheGraph) {
  CONVEYOR_REQUIRE_GPU();
  auto body = [](const conveyor::stream& s, conveyor::batch_size n, float* x) {
    masked_scale<<<static_cast<unsigned>((n.padded + 255) / 256), 256, 0, s.get()>>>(static_cast<int>(n.real), 1.5F, x);
    conveyor::check_launch("masked_scale");
  };
  auto run = [&](const conveyor::graphed_options& options, conveyor::graphed_statistics* st) {
    device_array<float> x(random_floats(1024, 14));
    conveyor::stream s;
    conveyor::graphed step(body, options);
    for (std::size_t real : {1000U, 700U, 1024U, 513U, 999U, 700U}) step(s, conveyor::batch_size{real}, x.get());
    s.synchronize();
    if (st != nullptr) *st = step.statistics();
    return x.download();
  };
  conveyor::graphed_statistics st;
  auto options = conveyor::graphed_options{.warmup_calls = 0, .buckets = {1024}, .rebind = learn};
  EXPECT_TRUE(same_bits(run(options, &st), run(eager, nullptr)));
  EXPECT_EQ(st.captures, 2U);
  EXPECT_EQ(st.rebinds, 4U);
}

TEST(Rebind, TheMappingIsReadableAndExported) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  device_array<float> x(random_floats(n, 15)), y(n), z(n);
  conveyor::stream s;
  conveyor::graphed step(chain, conveyor::graphed_options{.warmup_calls = 0, .rebind = learn});
  step(s, n, 0.5F, x.get(), y.get());
  const auto before = step.bindings(); // read before any change: candidates
  ASSERT_EQ(before.size(), 3U);
  EXPECT_EQ(before[1].state, conveyor::binding_state::learning);
  step(s, n, 0.5F, x.get(), z.get()); // out changes: verified
  s.synchronize();
  const auto map = step.bindings();
  ASSERT_EQ(map.size(), 3U);
  EXPECT_EQ(map[2].position, 3U);
  EXPECT_EQ(map[2].state, conveyor::binding_state::patched) << map[2].reason;
  ASSERT_EQ(map[2].sites.size(), 3U);
  for (const auto& site : map[2].sites) {
    EXPECT_TRUE(site.verified);
    EXPECT_FALSE(site.node_name.empty());
    EXPECT_EQ(site.offset, 0);
  }
  const auto d = step.describe();
  ASSERT_EQ(d.nodes.size(), 3U);
  ASSERT_FALSE(d.nodes[1].bindings.empty());
  EXPECT_EQ(d.nodes[1].bindings[0], "argument 3 -> kernel parameter 2");
  EXPECT_NE(conveyor::to_json(d).find("\"bindings\""), std::string::npos);
  EXPECT_NE(conveyor::to_dot(d).find("binds argument 3"), std::string::npos);
}

} // namespace

namespace {

// Issue 39 item 9: the buffers of a graphed callable freed and allocated again at another size, call after call,
// stream-ordered (cudaFreeAsync / cudaMallocAsync: the next allocation often gets the freed one's address, with
// another size) or not (cudaFree, which waits for the device). Every call's output is copied behind it into one
// results array; the sequence must finish (the test's CTest timeout bounds it) and match eager bitwise.
std::vector<float> reallocating_calls(const conveyor::graphed_options& options, bool stream_ordered,
                                      conveyor::graphed_statistics* stats = nullptr) {
  const std::vector<int> sizes{5000, 3000, 8000, 3000, 1000, 8000, 8000, 2500, 5000, 1000, 7000, 7000};
  std::size_t total = 0;
  for (int n : sizes) total += static_cast<std::size_t>(n);
  device_array<float> results(total);
  conveyor::stream s;
  conveyor::graphed step(chain, options);
  std::size_t at = 0;
  for (std::size_t call = 0; call < sizes.size(); ++call) {
    const int n = sizes[call];
    const auto bytes = static_cast<std::size_t>(n) * sizeof(float);
    const auto input = random_floats(static_cast<std::size_t>(n), 40 + static_cast<unsigned>(call));
    float* in = nullptr;
    float* out = nullptr;
    if (stream_ordered) {
      CONVEYOR_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&in), bytes, s.get()));
      CONVEYOR_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&out), bytes, s.get()));
    } else {
      CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&in), bytes));
      CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&out), bytes));
    }
    CONVEYOR_CHECK(cudaMemcpyAsync(in, input.data(), bytes, cudaMemcpyHostToDevice, s.get()));
    step(s, n, call % 3 == 0 ? 0.25F : -1.5F, in, out);
    CONVEYOR_CHECK(cudaMemcpyAsync(results.get() + at, out, bytes, cudaMemcpyDeviceToDevice, s.get()));
    at += static_cast<std::size_t>(n);
    if (stream_ordered) {
      CONVEYOR_CHECK(cudaFreeAsync(in, s.get()));
      CONVEYOR_CHECK(cudaFreeAsync(out, s.get()));
    } else {
      s.synchronize(); // `input` is pageable: the copy above is done once the stream is
      CONVEYOR_CHECK(cudaFree(in));
      CONVEYOR_CHECK(cudaFree(out));
    }
    if (stream_ordered) s.synchronize(); // the pageable `input` goes out of scope
  }
  s.synchronize();
  if (stats != nullptr) *stats = step.statistics();
  return results.download();
}

TEST(Rebind, BuffersFreedAndAllocatedAgainAtAnotherSizeFinishAndMatchEagerBitwise) {
  CONVEYOR_REQUIRE_GPU();
  for (bool stream_ordered : {true, false}) {
    SCOPED_TRACE(stream_ordered ? "cudaMallocAsync / cudaFreeAsync" : "cudaMalloc / cudaFree");
    const auto want = reallocating_calls(eager, stream_ordered);
    conveyor::graphed_statistics learned;
    EXPECT_TRUE(same_bits(reallocating_calls({.warmup_calls = 0, .rebind = learn}, stream_ordered, &learned), want));
    EXPECT_GT(learned.captures, 1U); // n sizes the grid: a changed n is never patched
    EXPECT_TRUE(same_bits(reallocating_calls({.warmup_calls = 0}, stream_ordered), want));
    const conveyor::graphed_options declared{
        .warmup_calls = 0,
        .rebind_arguments = {{3, conveyor::rebind_policy::patch}, {4, conveyor::rebind_policy::patch}}};
    EXPECT_TRUE(same_bits(reallocating_calls(declared, stream_ordered), want));
    const conveyor::graphed_options per_node{
        .warmup_calls = 0, .recapture = conveyor::recapture_update::per_node, .audit_every = 1};
    EXPECT_TRUE(same_bits(reallocating_calls(per_node, stream_ordered), want));
  }
}

} // namespace
