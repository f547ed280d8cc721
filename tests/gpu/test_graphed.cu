// GPU tests of the assembly line: conveyor::graphed (shape keys, in-place update, buckets, eviction, static
// pointers) and conveyor::pipeline (hybrid graphed + eager stages).
#include "support/gpu.hpp"

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/assembly/pipeline.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/observe/describe.hpp>
#include <conveyor/runtime/launch.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using conveyor::test::contains;
using conveyor::test::device_array;
using conveyor::test::random_floats;

__global__ void scale_kernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
__global__ void add_one_kernel(int n, const float* y, float* z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = y[i] + 1.0F;
}
__global__ void double_kernel(int n, float* z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] *= 2.0F;
}
// Sum of the first `real` elements into out[0], one thread (a deterministic reduction for small tests).
__global__ void sum_kernel(int real, const float* x, float* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float s = 0.0F;
    for (int i = 0; i < real; ++i) s += x[i];
    out[0] = s;
  }
}

int blocks(std::size_t n) { return static_cast<int>((n + 255) / 256); }

// Busy-waits about `cycles` clock cycles (thread 0 of block 0), then doubles x[0..n).
__global__ void spin_then_double_kernel(int n, float* x, long long cycles) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const long long start = clock64();
    while (clock64() - start < cycles) {}
  }
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0F;
}

// z = 2 * (a * x + 1): three kernels.
void three_step(const conveyor::stream& s, int n, float a, const float* x, float* y, float* z) {
  scale_kernel<<<blocks(n), 256, 0, s.get()>>>(n, a, x, y);
  add_one_kernel<<<blocks(n), 256, 0, s.get()>>>(n, y, z);
  double_kernel<<<blocks(n), 256, 0, s.get()>>>(n, z);
  conveyor::check_launch("three_step");
}

void expect_three_step(const std::vector<float>& x, float a, const std::vector<float>& z, int n) {
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(z[i], 2.0F * (a * x[i] + 1.0F)) << "element " << i;
}

TEST(Graphed, WarmsUpCapturesThenReplays) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  auto hx = random_floats(n, 1);
  device_array<float> x(hx), y(n), z(n);
  conveyor::stream s;
  conveyor::graphed step(three_step, conveyor::graphed_options{.warmup_calls = 2});
  for (int call = 0; call < 6; ++call) step(s, n, 1.5F, x.get(), y.get(), z.get());
  s.synchronize();
  expect_three_step(hx, 1.5F, z.download(), n);
  const auto& st = step.statistics();
  EXPECT_EQ(st.calls, 6U);
  EXPECT_EQ(st.warmups, 2U);
  EXPECT_EQ(st.instantiations, 1U);
  EXPECT_EQ(st.replays, 4U); // the capturing call launches too
  EXPECT_EQ(step.cached_graphs(), 1U);
}

TEST(Graphed, NewShapeGetsItsOwnGraph) {
  CONVEYOR_REQUIRE_GPU();
  const int big = 2048;
  auto hx = random_floats(big, 2);
  device_array<float> x(hx), y(big), z(big);
  conveyor::stream s;
  conveyor::graphed step(three_step, conveyor::graphed_options{.warmup_calls = 0});
  for (int n : {512, 2048, 512, 2048}) {
    CONVEYOR_CHECK(cudaMemsetAsync(z.get(), 0xFF, z.bytes(), s.get()));
    step(s, n, 0.5F, x.get(), y.get(), z.get());
    s.synchronize();
    auto hz = z.download();
    expect_three_step(hx, 0.5F, hz, n);
    if (n < big) EXPECT_TRUE(std::isnan(hz[n])) << "element past n was written";
  }
  EXPECT_EQ(step.statistics().instantiations, 2U);
  EXPECT_EQ(step.statistics().replays, 4U);
  EXPECT_EQ(step.cached_graphs(), 2U);
}

// recapture_update::per_node: the re-capture is compared with the graph the executable graph runs, and only the
// nodes that differ are set (named in the reason).
TEST(Graphed, PointerOrScalarChangeUpdatesOnlyTheChangedNodes) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  auto hx = random_floats(n, 3);
  device_array<float> x(hx), y(n), z1(n), z2(n);
  conveyor::stream s;
  conveyor::graphed step(
      three_step, conveyor::graphed_options{.warmup_calls = 0, .recapture = conveyor::recapture_update::per_node});
  step(s, n, 2.0F, x.get(), y.get(), z1.get());
  // Scalar a changes: only the scale kernel embeds it.
  step(s, n, 3.0F, x.get(), y.get(), z1.get());
  s.synchronize();
  expect_three_step(hx, 3.0F, z1.download(), n);
  EXPECT_EQ(step.statistics().per_node_updates, 1U);
  EXPECT_EQ(step.statistics().nodes_set, 1U);
  // Output pointer z changes: add_one and double embed it (2 nodes).
  step(s, n, 3.0F, x.get(), y.get(), z2.get());
  s.synchronize();
  expect_three_step(hx, 3.0F, z2.download(), n);
  EXPECT_EQ(step.statistics().per_node_updates, 2U);
  EXPECT_EQ(step.statistics().nodes_set, 3U);
  EXPECT_EQ(step.statistics().instantiations, 1U);
  ASSERT_GE(step.reasons().size(), 3U);
  const std::string last = step.reasons().back();
  EXPECT_NE(last.find("argument 4 pointer changed from 0x"), std::string::npos) << last;
  EXPECT_NE(last.find("updated 2 node(s) in place"), std::string::npos) << last;
  // Same arguments again: plain replay, no update.
  step(s, n, 3.0F, x.get(), y.get(), z2.get());
  EXPECT_EQ(step.statistics().per_node_updates, 2U);
  EXPECT_EQ(step.statistics().replays, 4U);
}

// The default (recapture_update::whole_graph): each change re-captures and applies the capture with one
// cudaGraphExecUpdate; every result equals an eager run of the same calls, bitwise, and a change of the node count
// (the callable branches on a value) re-instantiates.
TEST(Graphed, RecaptureByWholeGraphUpdateMatchesEagerBitwise) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  const auto hx = random_floats(n, 31);
  auto body = [](const conveyor::stream& cs, int count, float a, const float* x, float* y, float* z) {
    three_step(cs, count, a, x, y, z);
    if (a < 0) three_step(cs, count, -a, z, y, z); // a branch on the value: another topology
  };
  const auto start = random_floats(n, 32); // outputs start equal, and not zero, in both runs
  device_array<float> x(hx), gy(start), gz1(start), gz2(start), ey(start), ez1(start), ez2(start);
  conveyor::stream s;
  conveyor::graphed step(body, conveyor::graphed_options{.warmup_calls = 0});
  const float scalars[] = {2.0F, 3.0F, 3.0F, -1.5F, -0.5F, 0.25F};
  for (int call = 0; call < 6; ++call) {
    const float a = scalars[call];
    const bool second = call % 3 == 2;
    step(s, n, a, x.get(), gy.get(), second ? gz2.get() : gz1.get());
    body(s, n, a, x.get(), ey.get(), second ? ez2.get() : ez1.get());
    s.synchronize();
    for (auto [got, want] : {std::pair{&gz1, &ez1}, std::pair{&gz2, &ez2}}) {
      const auto g = got->download();
      const auto e = want->download();
      ASSERT_EQ(std::memcmp(g.data(), e.data(), g.size() * sizeof(float)), 0) << "call " << call << "\n"
                                                                              << step.report();
    }
  }
  // Calls 1, 2 and 5 re-capture with the node count of the first graph (whole-graph updates); 3 branches into six
  // kernels (re-instantiated), 4 keeps them (a whole-graph update), 5 goes back to three (re-instantiated).
  const auto& st = step.statistics();
  EXPECT_EQ(st.captures, 6U) << step.report();
  EXPECT_EQ(st.per_node_updates, 0U) << step.report();
  EXPECT_EQ(st.whole_graph_updates + st.instantiations, 6U) << step.report();
  EXPECT_EQ(st.instantiations, 3U) << step.report();
  EXPECT_NE(step.reasons().back().find("re-captured, re-instantiated"), std::string::npos) << step.report();
  bool whole = false;
  for (const auto& r : step.reasons()) whole = whole || r.find("re-captured, whole-graph update") != std::string::npos;
  EXPECT_TRUE(whole) << step.report();
}

// A struct of two device pointers, swapped between calls (ping-pong buffers): graphed keys it by its bytes, so the
// swapped call updates the graph instead of replaying the old pointers.
struct ping_pong {
  const float* in;
  float* out;
};

void scale_through(const conveyor::stream& s, int n, float a, ping_pong buffers) {
  scale_kernel<<<blocks(n), 256, 0, s.get()>>>(n, a, buffers.in, buffers.out);
  conveyor::check_launch("scale_kernel");
}

TEST(Graphed, SwappedStructOfPointersUpdatesTheGraph) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 3000;
  const auto h0 = random_floats(n, 11);
  device_array<float> a(h0), b(n);
  conveyor::stream s;
  conveyor::graphed step(scale_through, conveyor::graphed_options{.warmup_calls = 0});
  std::vector<float> want = h0;
  for (int call = 0; call < 6; ++call) {
    const bool even = call % 2 == 0;
    step(s, n, 2.0F, ping_pong{even ? a.get() : b.get(), even ? b.get() : a.get()});
    for (auto& v : want) v *= 2.0F;
  }
  s.synchronize();
  const auto got = a.download(); // 6 steps: the last one wrote a
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << "element " << i << "\n" << step.report();
  EXPECT_EQ(step.statistics().instantiations, 1U);
  // Each swap re-captures and updates the graph in place (the struct is not declared: no patching).
  EXPECT_EQ(step.statistics().whole_graph_updates, 5U) << step.report();
  EXPECT_EQ(step.statistics().rebinds, 0U) << step.report();
  EXPECT_NE(step.reasons().back().find("argument 2 value changed"), std::string::npos) << step.report();
}

TEST(Graphed, PaddingToABucketMatchesExactEagerRun) {
  CONVEYOR_REQUIRE_GPU();
  const std::size_t cap = 256;
  auto hx = random_floats(2 * cap, 4); // room for the eager call above the largest bucket
  device_array<float> x(hx), padded_sum(1), eager_sum(1);
  conveyor::stream s;
  auto body = [](const conveyor::stream& cs, conveyor::batch_size n, const float* in, float* out) {
    // Launch shape follows the padded size; the work masks by the real size.
    sum_kernel<<<static_cast<unsigned>((n.padded + 255) / 256), 32, 0, cs.get()>>>(static_cast<int>(n.real), in, out);
    conveyor::check_launch("sum_kernel");
  };
  conveyor::graphed sum(body, conveyor::graphed_options{.warmup_calls = 0, .buckets = {64, 128, 256}});
  for (std::size_t real : {100U, 77U, 128U, 3U}) {
    sum(s, conveyor::batch_size{real}, x.get(), padded_sum.get());
    body(s, conveyor::batch_size{real, real}, x.get(), eager_sum.get());
    s.synchronize();
    double ref = 0.0;
    for (std::size_t i = 0; i < real; ++i) ref += hx[i];
    const float got = padded_sum.download()[0];
    EXPECT_EQ(got, eager_sum.download()[0]) << "real size " << real;
    EXPECT_NEAR(got, ref, 1e-4 * (1.0 + std::abs(ref))) << "real size " << real;
  }
  // 100 and 77 share the 128 bucket (77 re-captures and updates the real size in place), 128 too; 3 uses bucket 64.
  EXPECT_EQ(sum.statistics().instantiations, 2U);
  EXPECT_EQ(sum.statistics().whole_graph_updates, 2U);
  EXPECT_EQ(sum.statistics().rebinds, 0U);
  // Above the largest bucket: eager, with the reason.
  sum(s, conveyor::batch_size{300}, x.get(), padded_sum.get());
  s.synchronize();
  double ref300 = 0.0;
  for (std::size_t i = 0; i < 300; ++i) ref300 += hx[i];
  EXPECT_NEAR(padded_sum.download()[0], ref300, 1e-4 * (1.0 + std::abs(ref300)));
  EXPECT_EQ(sum.statistics().eager_fallbacks, 1U);
  EXPECT_NE(sum.reasons().back().find("size 300 above the largest bucket 256"), std::string::npos)
      << sum.reasons().back();
}

TEST(Graphed, PrepareCapturesBucketsLargestFirstWithoutRunning) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(256, 5)), out(1);
  conveyor::stream s;
  int eager_runs = 0;
  auto body = [&](const conveyor::stream& cs, conveyor::batch_size n, const float* in, float* o) {
    if (!cs.is_capturing()) ++eager_runs;
    sum_kernel<<<1, 32, 0, cs.get()>>>(static_cast<int>(n.real), in, o);
  };
  conveyor::graphed sum(body, conveyor::graphed_options{.warmup_calls = 1, .buckets = {32, 256, 64}});
  sum.prepare(s, conveyor::batch_size{1}, x.get(), out.get());
  EXPECT_EQ(sum.cached_graphs(), 3U);
  EXPECT_EQ(eager_runs, 1);
  ASSERT_GE(sum.reasons().size(), 3U);
  EXPECT_NE(sum.reasons()[0].find("=256"), std::string::npos) << sum.reasons()[0];
  EXPECT_NE(sum.reasons()[2].find("=32"), std::string::npos) << sum.reasons()[2];
  sum(s, conveyor::batch_size{50}, x.get(), out.get());
  EXPECT_EQ(sum.statistics().instantiations, 3U);
  EXPECT_EQ(eager_runs, 1);
}

TEST(Graphed, LeastRecentlyUsedGraphIsEvicted) {
  CONVEYOR_REQUIRE_GPU();
  const int big = 1024;
  auto hx = random_floats(big, 6);
  device_array<float> x(hx), y(big), z(big);
  conveyor::stream s;
  conveyor::graphed step(three_step, conveyor::graphed_options{.warmup_calls = 0, .max_graphs = 2});
  for (int n : {256, 512, 256, 1024, 512}) step(s, n, 1.0F, x.get(), y.get(), z.get());
  s.synchronize();
  expect_three_step(hx, 1.0F, z.download(), 512);
  // 256, 512 cached; 1024 evicts 512 (256 was used more recently); 512 again evicts 256.
  EXPECT_EQ(step.statistics().evictions, 2U);
  EXPECT_EQ(step.statistics().instantiations, 4U);
  EXPECT_EQ(step.cached_graphs(), 2U);
}

// Evicting a graph whose launch is still running must neither wait for it nor destroy what it uses: the call
// returns while the stream is busy, and the results (and compute-sanitizer, in scripts/gpu-check.sh) stay right.
TEST(Graphed, EvictionDoesNotWaitForTheStream) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  const auto hx = random_floats(n, 7);
  device_array<float> x(hx);
  conveyor::stream s;
  // 1 block per 256 elements; block 0 spins about 0.2 s at 2 GHz, so the first launch is still running when the
  // second call evicts its graph.
  auto step = [](const conveyor::stream& st, int count, float* data, long long cycles) {
    spin_then_double_kernel<<<blocks(count), 256, 0, st.get()>>>(count, data, cycles);
    conveyor::check_launch("spin_then_double_kernel");
  };
  conveyor::graphed run(step, conveyor::graphed_options{.warmup_calls = 0, .max_graphs = 1});
  const long long cycles = 400'000'000;
  run(s, 256, x.get(), cycles); // graph for 256, launched
  run(s, 512, x.get(), cycles); // graph for 512: evicts the one for 256, still running
  EXPECT_EQ(cudaStreamQuery(s.get()), cudaErrorNotReady) << "the eviction waited for the stream";
  (void)cudaGetLastError();
  EXPECT_EQ(run.statistics().evictions, 1U);
  run(s, 1024, x.get(), 0); // evicts the graph for 512, possibly still queued
  s.synchronize();
  const auto got = x.download();
  for (int i = 0; i < n; ++i) {
    const float times = i < 256 ? 8.0F : i < 512 ? 4.0F : 2.0F;
    ASSERT_FLOAT_EQ(got[i], hx[i] * times) << "element " << i;
  }
  EXPECT_EQ(run.statistics().evictions, 2U);
  EXPECT_EQ(run.cached_graphs(), 1U);
}

TEST(Graphed, ChangedStaticPointerIsRefusedBeforeReplay) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 512;
  device_array<float> x1(random_floats(n, 7)), x2(random_floats(n, 8)), y(n), z(n);
  conveyor::stream s;
  conveyor::graphed step(three_step, conveyor::graphed_options{.warmup_calls = 0, .static_arguments = {2}});
  step(s, n, 1.0F, x1.get(), y.get(), z.get());
  try {
    step(s, n, 1.0F, x2.get(), y.get(), z.get());
    FAIL() << "a changed static pointer was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("argument 2 was declared static"), std::string::npos) << what;
    EXPECT_NE(what.find("stale"), std::string::npos) << what;
  }
  EXPECT_EQ(step.statistics().replays, 1U);
}

// A pipeline: graphed stage (z = 2(a x + 1)), an eager stage that reads z[0] on the host and picks the next scale
// from it, a graphed stage using that scale. Compared against the all-eager run of the same stages.
TEST(Pipeline, HybridEqualsAllEager) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  auto hx = random_floats(n, 9);
  auto run = [&](bool graphed_stages) {
    device_array<float> x(hx), y(n), z(n), w(n);
    float host_scale = 1.0F;
    float* scale_slot = nullptr;
    CONVEYOR_CHECK(cudaMallocHost(&scale_slot, sizeof(float)));
    conveyor::pipeline<int, float*> p;
    auto first = [&](const conveyor::stream& cs, int count, float*) {
      three_step(cs, count, 0.75F, x.get(), y.get(), z.get());
    };
    auto decide = [&](const conveyor::stream& cs, int, float* slot) {
      CONVEYOR_CHECK(cudaMemcpyAsync(slot, z.get(), sizeof(float), cudaMemcpyDeviceToHost, cs.get()));
      cs.synchronize(); // host-dependent control flow: cannot be captured
      host_scale = *slot > 0.0F ? 0.5F : -0.5F;
    };
    auto second = [&](const conveyor::stream& cs, int count, float* slot) {
      (void)slot;
      scale_kernel<<<blocks(count), 256, 0, cs.get()>>>(count, 1.0F, z.get(), w.get());
      double_kernel<<<blocks(count), 256, 0, cs.get()>>>(count, w.get());
      conveyor::check_launch("second");
    };
    if (graphed_stages) {
      p.graphed_stage("first", first, {.warmup_calls = 1});
      p.eager_stage("decide", decide);
      p.graphed_stage("second", second, {.warmup_calls = 1});
    } else {
      p.eager_stage("first", first).eager_stage("decide", decide).eager_stage("second", second);
    }
    conveyor::stream s;
    std::vector<float> scales;
    for (int step = 0; step < 5; ++step) {
      p(s, n, scale_slot);
      scales.push_back(host_scale);
    }
    s.synchronize();
    auto out = w.download();
    if (graphed_stages) {
      EXPECT_EQ(p.statistics(0)->replays, 4U);
      EXPECT_EQ(p.statistics(1), nullptr);
      EXPECT_EQ(p.statistics(2)->replays, 4U);
    }
    CONVEYOR_CHECK(cudaFreeHost(scale_slot));
    out.insert(out.end(), scales.begin(), scales.end());
    return out;
  };
  const auto hybrid = run(true);
  const auto eager = run(false);
  ASSERT_EQ(hybrid.size(), eager.size());
  for (std::size_t i = 0; i < hybrid.size(); ++i) ASSERT_EQ(hybrid[i], eager[i]) << "element " << i;
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(eager[i], 2.0F * 2.0F * (0.75F * hx[i] + 1.0F)) << i;
}

} // namespace

// graphed_options::transform runs on every capture before graphed instantiates or updates with it: here the
// programmatic pass, so the executable graph's edge is programmatic after the first capture and after a re-capture
// that updates it in place; the results stay those of the host computation.
TEST(Graphed, TransformRunsOnEveryCaptureBeforeInstantiateAndUpdate) {
  CONVEYOR_REQUIRE_GPU();
  using conveyor::test::kernels::pdl_affine;
  const int n = 1000;
  const auto x0 = random_floats(n, 911);
  device_array<float> x(x0);
  int transforms = 0;
  conveyor::graphed_options o;
  o.warmup_calls = 0;
  o.rebind = conveyor::rebind_policy::recapture; // every changed scalar re-captures: the transform runs again
  o.transform = [&](conveyor::graph& g) {
    ++transforms;
    (void)conveyor::make_programmatic(g, conveyor::waiting_kernels{}.add(pdl_affine));
  };
  auto body = [n](const conveyor::stream& s, float* p, float a) {
    const conveyor::launch_config cfg{dim3(static_cast<unsigned>((n + 127) / 128)), dim3(128)};
    conveyor::launch(s, cfg, pdl_affine, n, a, 1.0F, p, 2000LL);
    conveyor::launch(s, cfg, pdl_affine, n, 0.5F, a, p, 2000LL);
  };
  conveyor::graphed step(body, o);
  conveyor::stream s;
  std::vector<double> want(x0.begin(), x0.end());
  for (const float a : {2.0F, 3.0F, 3.0F}) {
    step(s, x.get(), a);
    for (auto& v : want) v = 0.5 * (static_cast<double>(a) * v + 1.0) + a;
  }
  s.synchronize();
  EXPECT_EQ(transforms, 2); // the first capture and the re-capture for a = 3; the third call replays
  ASSERT_EQ(step.executables().size(), 1U);
  const auto d = conveyor::describe(*step.executables().front());
  ASSERT_EQ(d.edges.size(), 1U);
  EXPECT_EQ(d.edge_type_of(0), conveyor::edge_type::programmatic);
  const auto got = x.download();
  for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << "element " << i;
}

// ---- graphed_options::instantiate_in_background (issue 42 item 2) ---------------------------------------------

namespace {

// Runs step(s, n, a, x, y, z) with z poisoned first, and checks z against the CPU reference (and that nothing past n
// was written), whatever path the call took.
template <class Step>
void call_and_check(Step& step, conveyor::stream& s, int n, float a, const device_array<float>& x,
                    const std::vector<float>& hx, device_array<float>& y, device_array<float>& z) {
  CONVEYOR_CHECK(cudaMemsetAsync(z.get(), 0xFF, z.bytes(), s.get()));
  step(s, n, a, x.get(), y.get(), z.get());
  s.synchronize();
  const auto hz = z.download();
  expect_three_step(hx, a, hz, n);
  if (static_cast<std::size_t>(n) < hz.size()) EXPECT_TRUE(std::isnan(hz[static_cast<std::size_t>(n)]));
}

// A host function in the capture cannot be in a graph for device launch (see the error test below).
void three_step_and_host(const conveyor::stream& s, int n, float a, const float* x, float* y, float* z) {
  three_step(s, n, a, x, y, z);
  CONVEYOR_CHECK(cudaLaunchHostFunc(
      s.get(), [](void*) {}, nullptr));
}

} // namespace

// The capture of a new shape is handed to the worker thread; that call runs eagerly, as do the calls of its shape
// until the graph is ready; the first call that finds it ready replays it. Every call's result is the CPU's.
TEST(Graphed, BackgroundInstantiationRunsEagerlyUntilReadyThenReplays) {
  CONVEYOR_REQUIRE_GPU();
  const int big = 4096;
  const auto hx = random_floats(big, 41);
  device_array<float> x(hx), y(big), z(big), z2(big);
  conveyor::stream s;
  conveyor::graphed step(three_step, conveyor::graphed_options{.warmup_calls = 1, .instantiate_in_background = true});
  call_and_check(step, s, 1000, 1.5F, x, hx, y, z); // warm-up
  call_and_check(step, s, 1000, 1.5F, x, hx, y, z); // captured, handed over, run eagerly
  EXPECT_EQ(step.statistics().captures, 1U);
  EXPECT_EQ(step.statistics().instantiations, 0U);
  EXPECT_EQ(step.statistics().replays, 0U);
  EXPECT_EQ(step.cached_graphs(), 0U);
  step.cache().wait_for_background();
  call_and_check(step, s, 1000, 1.5F, x, hx, y, z); // taken into the cache and replayed
  EXPECT_EQ(step.statistics().instantiations, 1U);
  EXPECT_EQ(step.statistics().background_instantiations, 1U);
  EXPECT_EQ(step.statistics().replays, 1U);
  EXPECT_EQ(step.cached_graphs(), 1U);
  // Another shape, not waited for: eager until ready (how many calls depends on the CPU), then replays.
  call_and_check(step, s, big, 0.25F, x, hx, y, z); // warm-up
  call_and_check(step, s, big, 0.25F, x, hx, y, z); // handed over
  int calls = 0;
  while (step.statistics().replays < 2 && calls < 100000) {
    call_and_check(step, s, big, 0.25F, x, hx, y, z);
    ++calls;
  }
  const auto& st = step.statistics();
  EXPECT_EQ(st.replays, 2U) << step.report();
  EXPECT_EQ(st.background_instantiations, 2U);
  EXPECT_EQ(st.eager_while_instantiating, static_cast<std::size_t>(calls - 1)) << step.report();
  EXPECT_EQ(st.calls, st.warmups + st.captures + st.replays + st.eager_while_instantiating) << step.report();
  // A changed pointer of a shape taken from the worker: re-captured and updated in place, as any cached graph.
  call_and_check(step, s, 1000, 1.5F, x, hx, y, z2);
  EXPECT_EQ(step.statistics().whole_graph_updates, 1U) << step.report();
  bool ready_noted = false;
  for (const auto& r : step.reasons())
    ready_noted = ready_noted || contains(r, "instantiated in the background is ready");
  EXPECT_TRUE(ready_noted) << step.report();
}

// The background instantiation fails (a host node in a graph for device launch); the call that finds it throws
// CUDA's refusal; the calls before it ran eagerly and right.
TEST(Graphed, BackgroundInstantiationErrorIsThrownByTheCallThatTakesIt) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const auto hx = random_floats(n, 42);
  device_array<float> x(hx), y(n), z(n);
  conveyor::stream s;
  conveyor::graphed step(three_step_and_host,
                         conveyor::graphed_options{.warmup_calls = 0,
                                                   .flags = conveyor::instantiate_flags::device_launch,
                                                   .instantiate_in_background = true});
  call_and_check(step, s, n, 2.0F, x, hx, y, z); // handed over, run eagerly
  step.cache().wait_for_background();
  try {
    step(s, n, 2.0F, x.get(), y.get(), z.get());
    ADD_FAILURE() << "the failed background instantiation was not thrown";
  } catch (const std::exception& e) {
    EXPECT_TRUE(contains(e.what(), "nstantiate")) << e.what();
  }
  EXPECT_EQ(step.statistics().instantiations, 0U);
  EXPECT_EQ(step.cached_graphs(), 0U);
}

// prepare with instantiate_in_background: the buckets are instantiated on two worker threads while the next are
// captured, and every one is cached when prepare returns (no call of them runs eagerly or waits).
TEST(Graphed, PrepareInTheBackgroundCachesEveryBucketBeforeItReturns) {
  CONVEYOR_REQUIRE_GPU();
  const auto hx = random_floats(256, 43);
  device_array<float> x(hx), out(1);
  conveyor::stream s;
  int eager_runs = 0;
  auto body = [&](const conveyor::stream& cs, conveyor::batch_size n, const float* in, float* o) {
    if (!cs.is_capturing()) ++eager_runs;
    sum_kernel<<<1, 32, 0, cs.get()>>>(static_cast<int>(n.real), in, o);
  };
  conveyor::graphed sum(body, conveyor::graphed_options{.warmup_calls = 1,
                                                        .buckets = {32, 256, 64},
                                                        .instantiate_in_background = true,
                                                        .instantiate_threads = 2});
  sum.prepare(s, conveyor::batch_size{1}, x.get(), out.get());
  EXPECT_EQ(sum.cached_graphs(), 3U) << sum.report();
  EXPECT_EQ(sum.cache().pending_instantiations(), 0U);
  EXPECT_EQ(sum.statistics().background_instantiations, 3U) << sum.report();
  EXPECT_EQ(eager_runs, 1);                             // the warm-up alone
  sum(s, conveyor::batch_size{64}, x.get(), out.get()); // the bucket's own size: replayed
  s.synchronize();
  EXPECT_EQ(sum.statistics().replays, 1U) << sum.report();
  EXPECT_EQ(eager_runs, 1);
  double want = 0;
  for (int i = 0; i < 64; ++i) want += hx[static_cast<std::size_t>(i)];
  EXPECT_NEAR(out.download()[0], want, 1e-4 * (1.0 + std::fabs(want)));
}

// A finished background instantiation is taken into the cache by the next call of any shape, so max_graphs holds it:
// with room for one graph, taking the second evicts the first.
TEST(Graphed, FinishedBackgroundGraphsAreTakenByAnyCallWithinTheCap) {
  CONVEYOR_REQUIRE_GPU();
  const int big = 2048;
  const auto hx = random_floats(big, 44);
  device_array<float> x(hx), y(big), z(big);
  conveyor::stream s;
  conveyor::graphed step(
      three_step, conveyor::graphed_options{.warmup_calls = 1, .max_graphs = 1, .instantiate_in_background = true});
  call_and_check(step, s, 512, 0.5F, x, hx, y, z); // shape 512: warm-up
  call_and_check(step, s, 512, 0.5F, x, hx, y, z); // handed over
  step.cache().wait_for_background();
  call_and_check(step, s, big, 0.5F, x, hx, y, z); // shape 2048's warm-up takes 512's graph
  EXPECT_EQ(step.cached_graphs(), 1U) << step.report();
  EXPECT_EQ(step.cache().pending_instantiations(), 0U);
  call_and_check(step, s, big, 0.5F, x, hx, y, z); // handed over
  step.cache().wait_for_background();
  call_and_check(step, s, big, 0.5F, x, hx, y, z); // taken (512's evicted), replayed
  const auto& st = step.statistics();
  EXPECT_EQ(st.background_instantiations, 2U) << step.report();
  EXPECT_EQ(st.evictions, 1U) << step.report();
  EXPECT_EQ(st.replays, 1U) << step.report();
  EXPECT_EQ(step.cached_graphs(), 1U);
}

// Captures in global mode on the calling thread while the worker threads instantiate, upload and create streams:
// their relaxed mode keeps either side from invalidating the other. Every call's result is the CPU's.
TEST(Graphed, GlobalModeCapturesBesideBackgroundInstantiationsStayRight) {
  CONVEYOR_REQUIRE_GPU();
  const int big = 4096;
  const auto hx = random_floats(big, 45);
  device_array<float> x(hx), y(big), z(big);
  conveyor::stream s;
  conveyor::graphed step(three_step, conveyor::graphed_options{.warmup_calls = 0,
                                                               .mode = conveyor::capture_mode::global,
                                                               .instantiate_in_background = true,
                                                               .instantiate_threads = 2});
  for (int round = 0; round < 3; ++round)
    for (int n = 256; n <= big; n += 256) call_and_check(step, s, n, 0.75F, x, hx, y, z);
  step.cache().finish_background();
  EXPECT_EQ(step.statistics().background_instantiations, 16U) << step.report();
  EXPECT_EQ(step.cached_graphs(), 16U);
}
