// GPU tests of stream capture: conveyor::capture, fork/join, capture_into, and what happens when the captured
// callable throws or makes an illegal call (the exception propagates, no stream is left capturing, every stream is
// usable afterwards). Each test skips without a CUDA device.

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"
#include "support/moved_from.hpp"

#include <conveyor/conveyor.hpp>

#include "define/stream_watch.hpp" // stream_watch_unavailable

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <thread>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::test::all_equal;
using conveyor::test::all_near;
using conveyor::test::contains;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::random_floats;
using conveyor::test::sync_device;

// ---- kernels (shared: gpu/test_kernels.cuh) ----------------------------------------------------------------------

using namespace conveyor::test::kernels;

namespace {

constexpr long long spin_cycles = 5'000'000;

// Enqueues x *= a on s, outside any graph or inside a capture.
void launch_scale(const conveyor::stream& s, int n, float a, float* x) {
  auto cfg = cover(n);
  scale<<<cfg.grid, cfg.block, 0, s.get()>>>(n, a, x);
  conveyor::check_launch("scale");
}

void launch_add(const conveyor::stream& s, int n, float b, float* x) {
  auto cfg = cover(n);
  add_scalar<<<cfg.grid, cfg.block, 0, s.get()>>>(n, b, x);
  conveyor::check_launch("add_scalar");
}

// Proves that `s` is out of capture mode and runs work: scales a fresh buffer eagerly and checks it.
void expect_stream_usable(const conveyor::stream& s, unsigned seed) {
  EXPECT_FALSE(s.is_capturing());
  const int n = 777;
  const auto v0 = random_floats(n, seed);
  device_array<float> v(v0);
  sync_device();
  launch_scale(s, n, -4.0F, v.get());
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = v0[i] * -4.0F;
  EXPECT_TRUE(all_near(v.download(), want));
}

std::vector<float> twice_plus_one(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * 2.0F + 1.0F;
  return out;
}

} // namespace

// ---- plain capture ------------------------------------------------------------------------------------------------

TEST(Capture, ChainOfKernelsIsCapturedNotRunAndReplays) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 3001;
  const auto x0 = random_floats(n, 1001);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s;

  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    EXPECT_EQ(&cs, &s);
    EXPECT_TRUE(cs.is_capturing());
    launch_scale(cs, n, 2.0F, x.get());
    launch_add(cs, n, 1.0F, x.get());
  });
  EXPECT_FALSE(s.is_capturing());
  s.synchronize();
  EXPECT_TRUE(all_equal(x.download(), x0)); // capturing does not run the work

  EXPECT_EQ(g.node_count(), 2U);
  EXPECT_EQ(g.edge_count(), 1U);
  for (const auto& node : g.nodes()) EXPECT_EQ(node.kind(), conveyor::node_kind::kernel);

  auto exec = conveyor::instantiate(g);
  for (int i = 0; i < 3; ++i) exec.launch(s);
  s.synchronize();
  auto want = twice_plus_one(twice_plus_one(twice_plus_one(x0)));
  EXPECT_TRUE(all_near(x.download(), want));
}

TEST(Capture, CallableWithoutStreamParameter) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 500;
  const auto x0 = random_floats(n, 1011);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s;
  auto g = conveyor::capture(s, [&] { launch_add(s, n, 0.25F, x.get()); });
  ASSERT_EQ(g.node_count(), 1U);
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] + 0.25F;
  EXPECT_TRUE(all_near(x.download(), want));
}

TEST(Capture, MemsetAndMemcpyAsyncBecomeNodes) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2500;
  const auto x0 = random_floats(n, 1021);
  device_array<float> x(x0), y(random_floats(n, 1022));
  sync_device();
  conveyor::stream s;
  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    CONVEYOR_CHECK(cudaMemcpyAsync(y.get(), x.get(), x.bytes(), cudaMemcpyDeviceToDevice, cs.get()));
    CONVEYOR_CHECK(cudaMemsetAsync(x.get(), 0, x.bytes() / 2, cs.get()));
    launch_add(cs, n, 1.0F, x.get());
  });
  ASSERT_EQ(g.node_count(), 3U);
  std::multiset<conveyor::node_kind> kinds;
  for (const auto& node : g.nodes()) kinds.insert(node.kind());
  EXPECT_EQ(kinds, (std::multiset<conveyor::node_kind>{conveyor::node_kind::memcpy, conveyor::node_kind::memset,
                                                       conveyor::node_kind::kernel}));
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want_x(n);
  for (int i = 0; i < n; ++i) want_x[i] = (i < n / 2 ? 0.0F : x0[i]) + 1.0F;
  EXPECT_TRUE(all_equal(y.download(), x0));
  EXPECT_TRUE(all_near(x.download(), want_x));
}

// ---- fork / join --------------------------------------------------------------------------------------------------

TEST(Capture, ForkJoinOfTwoStreamsCapturesParallelBranches) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4000;
  const auto x0 = random_floats(n, 1101);
  const auto y0 = random_floats(n, 1102);
  const auto z0 = random_floats(n, 1103);
  const auto w0 = random_floats(n, 1104);
  device_array<float> x(x0), y(y0), z(z0), w(w0), out(random_floats(n, 1105));
  sync_device();
  conveyor::stream s, s2, s3;
  const auto cfg = cover(n);

  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    // A: x *= 2 (slow, so that a branch not ordered after it would read old values)
    spin_then_scale<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 2.0F, x.get(), spin_cycles);
    conveyor::check_launch("spin_then_scale");
    conveyor::fork(cs, s2);
    conveyor::fork(cs, s3);
    EXPECT_TRUE(s2.is_capturing());
    EXPECT_TRUE(s3.is_capturing());
    // B on s2: y += x; C on s3: z += x; D on s: w *= 3
    add_vectors<<<cfg.grid, cfg.block, 0, s2.get()>>>(n, y.get(), x.get(), y.get());
    conveyor::check_launch("add_vectors");
    add_vectors<<<cfg.grid, cfg.block, 0, s3.get()>>>(n, z.get(), x.get(), z.get());
    conveyor::check_launch("add_vectors");
    launch_scale(cs, n, 3.0F, w.get());
    conveyor::join(cs, s2);
    conveyor::join(cs, s3);
    // E on s: out = y + z + w
    add3<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, y.get(), z.get(), w.get(), out.get());
    conveyor::check_launch("add3");
  });
  EXPECT_FALSE(s.is_capturing());
  EXPECT_FALSE(s2.is_capturing());
  EXPECT_FALSE(s3.is_capturing());

  // Structure: A -> {B, C, D} -> E.
  EXPECT_EQ(g.node_count(), 5U);
  EXPECT_EQ(g.edge_count(), 6U);
  auto roots = g.root_nodes();
  ASSERT_EQ(roots.size(), 1U);
  EXPECT_EQ(roots[0].dependents().size(), 3U);
  std::size_t sinks = 0;
  for (const auto& node : g.nodes())
    if (node.dependents().empty()) {
      ++sinks;
      EXPECT_EQ(node.dependencies().size(), 3U);
    }
  EXPECT_EQ(sinks, 1U);
  auto stats = conveyor::statistics(conveyor::describe(g));
  EXPECT_GE(stats.width, 2U);
  EXPECT_EQ(stats.width, 3U);
  EXPECT_EQ(stats.depth, 3U);

  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) {
    const float x2 = x0[i] * 2.0F;
    want[i] = ((y0[i] + x2) + (z0[i] + x2)) + w0[i] * 3.0F;
  }
  EXPECT_TRUE(all_near(out.download(), want));
}

// ---- exceptions and illegal calls inside the callable ---------------------------------------------------------------

TEST(Capture, ExceptionMidCapturePropagatesAndLeavesStreamUsable) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const auto x0 = random_floats(n, 1201);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s;

  bool thrown = false;
  try {
    (void)conveyor::capture(s, [&](const conveyor::stream& cs) {
      launch_scale(cs, n, 2.0F, x.get());
      throw std::runtime_error("boom inside capture");
    });
  } catch (const std::runtime_error& e) {
    thrown = true;
    EXPECT_STREQ(e.what(), "boom inside capture");
    EXPECT_EQ(dynamic_cast<const conveyor::cuda_error*>(&e), nullptr); // the user's exception, not a wrapper
  }
  EXPECT_TRUE(thrown);
  EXPECT_FALSE(s.is_capturing());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);

  s.synchronize();
  EXPECT_TRUE(all_equal(x.download(), x0)); // the captured kernel never ran
  launch_scale(s, n, 2.0F, x.get());        // eager work on the same stream
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * 2.0F;
  EXPECT_TRUE(all_near(x.download(), want));

  // And it can be captured again.
  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) { launch_add(cs, n, 1.0F, x.get()); });
  EXPECT_EQ(g.node_count(), 1U);
}

TEST(Capture, ExceptionAfterForkBeforeJoinLeavesBothStreamsUsable) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const auto x0 = random_floats(n, 1211);
  const auto y0 = random_floats(n, 1212);
  device_array<float> x(x0), y(y0);
  sync_device();
  conveyor::stream s, s2;

  EXPECT_THROW(
      {
        (void)conveyor::capture(s, [&](const conveyor::stream& cs) {
          launch_scale(cs, n, 2.0F, x.get());
          conveyor::fork(cs, s2);
          launch_scale(s2, n, 5.0F, y.get());
          throw std::logic_error("thrown between fork and join");
        });
      },
      std::logic_error);
  EXPECT_FALSE(s.is_capturing());
  EXPECT_FALSE(s2.is_capturing());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  s.synchronize();
  s2.synchronize();
  EXPECT_TRUE(all_equal(x.download(), x0));
  EXPECT_TRUE(all_equal(y.download(), y0));
  expect_stream_usable(s, 1213);
  expect_stream_usable(s2, 1214);

  // A later fork/join capture on the same streams works (nothing stale is left registered).
  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    conveyor::fork(cs, s2);
    launch_scale(s2, n, 5.0F, y.get());
    launch_scale(cs, n, 2.0F, x.get());
    conveyor::join(cs, s2);
  });
  EXPECT_EQ(g.node_count(), 2U);
  EXPECT_EQ(g.edge_count(), 0U);
  EXPECT_EQ(g.root_nodes().size(), 2U);
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want_x(n), want_y(n);
  for (int i = 0; i < n; ++i) {
    want_x[i] = x0[i] * 2.0F;
    want_y[i] = y0[i] * 5.0F;
  }
  EXPECT_TRUE(all_near(x.download(), want_x));
  EXPECT_TRUE(all_near(y.download(), want_y));
}

TEST(Capture, ForbiddenCudaMallocInGlobalModeThrowsCudaErrorWithHint) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> x(random_floats(n, 1301));
  sync_device();
  conveyor::stream s;
  void* p = nullptr;

  bool thrown = false;
  try {
    (void)conveyor::capture(
        s,
        [&](const conveyor::stream& cs) {
          launch_scale(cs, n, 2.0F, x.get());
          CONVEYOR_CHECK(cudaMalloc(&p, 1024));
        },
        conveyor::capture_mode::global);
  } catch (const conveyor::cuda_error& e) {
    thrown = true;
    EXPECT_TRUE(e.code() == cudaErrorStreamCaptureUnsupported || e.code() == cudaErrorStreamCaptureInvalidated)
        << "code " << e.name();
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "cudaMalloc")) << what;
    EXPECT_TRUE(contains(what, "Fix:")) << what;
    EXPECT_TRUE(contains(e.call(), "cudaMalloc")) << e.call();
    EXPECT_FALSE(e.hint().empty());
    EXPECT_TRUE(contains(what, std::string(e.name()))) << what;
  }
  EXPECT_TRUE(thrown);
  EXPECT_FALSE(s.is_capturing());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  expect_stream_usable(s, 1302);
}

TEST(Capture, UncheckedIllegalSynchronisationInvalidatesTheCapture) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  const auto x0 = random_floats(n, 1311);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s;

  bool thrown = false;
  try {
    (void)conveyor::capture(s, [&](const conveyor::stream& cs) {
      launch_scale(cs, n, 2.0F, x.get());
      // Illegal while capturing (cudaErrorStreamCaptureUnsupported); its error code is deliberately ignored.
      (void)cudaStreamSynchronize(cs.get());
      auto cfg = cover(n);
      add_scalar<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 1.0F, x.get()); // unchecked too
    });
  } catch (const conveyor::cuda_error& e) {
    thrown = true;
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureInvalidated) << e.what();
    EXPECT_TRUE(contains(e.what(), "Fix:")) << e.what();
    EXPECT_TRUE(contains(e.call(), "cudaStreamEndCapture")) << e.call();
  }
  EXPECT_TRUE(thrown);
  EXPECT_FALSE(s.is_capturing());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess); // the refused call's error does not resurface later
  s.synchronize();
  EXPECT_TRUE(all_equal(x.download(), x0)); // nothing captured ran
  expect_stream_usable(s, 1312);
}

// Observed with CUDA 13.0 and driver 580 (H200): a synchronous cudaMemcpy during a capture of a non-blocking stream
// is not refused and does not invalidate the capture; it runs at once, on the legacy stream, and is not part of the
// graph. (error.cpp's hint for cudaErrorStreamCaptureUnsupported lists cudaMemcpy/cudaMemset among refused calls.)
// A synchronous cudaMemcpy inside a capture runs on the legacy default stream: it would run once, at capture time,
// and never in a replay. The capture refuses it (the per-thread default stream takes part in every capture, so CUDA
// refuses the implicit dependency); with the check off, it runs at once and is not captured.
TEST(Capture, SynchronousMemcpyInsideCaptureIsRefusedAndOtherwiseRunsAtOnce) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  const auto x0 = random_floats(n, 1321);
  device_array<float> x(x0), y(random_floats(n, 1322));
  sync_device();
  conveyor::stream s;
  cudaError_t copy_rc = cudaErrorUnknown;
  auto body = [&](const conveyor::stream& cs) {
    launch_scale(cs, n, 2.0F, x.get());
    copy_rc = cudaMemcpy(y.get(), x.get(), x.bytes(), cudaMemcpyDeviceToDevice);
  };
  try {
    (void)conveyor::capture(s, body);
    ADD_FAILURE() << "a synchronous copy inside a capture was accepted";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureImplicit) << e.what();
    EXPECT_TRUE(contains(e.what(), "legacy default stream")) << e.what();
  }
  EXPECT_EQ(copy_rc, cudaErrorStreamCaptureImplicit) << cudaGetErrorName(copy_rc);
  conveyor::capture_options unchecked;
  unchecked.catch_default_streams = false;
  auto g = conveyor::capture(s, body, unchecked);
  EXPECT_EQ(copy_rc, cudaSuccess) << cudaGetErrorName(copy_rc);
  EXPECT_EQ(g.node_count(), 1U);            // only the kernel
  EXPECT_TRUE(all_equal(y.download(), x0)); // copied at capture time, before the captured kernel ever ran
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * 2.0F;
  EXPECT_TRUE(all_near(x.download(), want));
  EXPECT_TRUE(all_equal(y.download(), x0)); // replaying the graph does not copy
}

TEST(Capture, RelaxedModeAllowsCudaMalloc) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 300;
  const auto x0 = random_floats(n, 1325);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s;
  void* p = nullptr;
  auto g = conveyor::capture(
      s,
      [&](const conveyor::stream& cs) {
        CONVEYOR_CHECK(cudaMalloc(&p, 1024)); // not observed by the capture
        launch_scale(cs, n, 3.0F, x.get());
      },
      conveyor::capture_mode::relaxed);
  ASSERT_NE(p, nullptr);
  CONVEYOR_CHECK(cudaFree(p));
  EXPECT_EQ(g.node_count(), 1U);
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * 3.0F;
  EXPECT_TRUE(all_near(x.download(), want));
}

TEST(Capture, LegacyDefaultStreamIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  auto legacy = conveyor::stream::adopt(nullptr);
  bool called = false;
  try {
    (void)conveyor::capture(legacy, [&] { called = true; });
    ADD_FAILURE() << "capture of the legacy default stream did not throw";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureUnsupported);
    EXPECT_TRUE(contains(e.what(), "Fix:")) << e.what();
  }
  EXPECT_FALSE(called);
}

// Outside a capture, fork and join are plain cross-stream dependencies: one function serves eager and captured runs.
TEST(Capture, ForkAndJoinOutsideACaptureOrderTheStreams) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1 << 16;
  const auto x0 = random_floats(n, 1330);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s, s2;
  for (int round = 0; round < 20; ++round) launch_scale(s, n, 1.0F, x.get()); // keep s busy
  launch_scale(s, n, 2.0F, x.get());
  conveyor::fork(s, s2);
  launch_scale(s2, n, 3.0F, x.get()); // must run after s's work
  conveyor::join(s, s2);
  launch_scale(s, n, 0.5F, x.get()); // must run after s2's work
  EXPECT_FALSE(s.is_capturing());
  EXPECT_FALSE(s2.is_capturing());
  s.synchronize();
  std::vector<float> want(x0);
  for (auto& v : want) v = v * 2.0F * 3.0F * 0.5F;
  EXPECT_TRUE(all_near(x.download(), want));
}

// fork/join reuse one event per thread: eager and captured fork/join, mixed in one process, must each keep their
// order. The steps do not commute (x = (2x + 1) * 3, the doubling slow), so a lost dependency changes the result.
TEST(Capture, ForkJoinKeepsOrderWhenEagerAndCapturedRunsAlternate) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  const auto x0 = random_floats(n, 1340);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s, s2, s3;
  const auto cfg = cover(n);
  auto step = [&](const conveyor::stream& main) {
    spin_then_scale<<<cfg.grid, cfg.block, 0, main.get()>>>(n, 2.0F, x.get(), spin_cycles);
    conveyor::check_launch("spin_then_scale");
    conveyor::fork(main, s2);
    launch_add(s2, n, 1.0F, x.get()); // after the doubling
    conveyor::join(main, s2);
    conveyor::fork(main, s3);
    launch_scale(s3, n, 3.0F, x.get()); // after the addition
    conveyor::join(main, s3);
  };
  step(s); // eager
  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) { step(cs); });
  step(s); // eager again, after a capture used the events
  auto exec = conveyor::instantiate(g);
  exec.launch(s); // the captured step, twice
  exec.launch(s);
  auto g2 = conveyor::capture(s, [&](const conveyor::stream& cs) { step(cs); });
  // doubling -> addition -> scaling, plus doubling -> scaling: join adds the branch to the main stream's
  // dependencies, which still hold the doubling, and the next fork passes both on.
  EXPECT_EQ(g2.node_count(), 3U);
  EXPECT_EQ(g2.edge_count(), 3U);
  for (const auto& node : g2.nodes())
    if (node.dependents().empty()) EXPECT_EQ(node.dependencies().size(), 2U); // the scaling waits for both
  step(s);                                                                    // and eager once more
  s.synchronize();
  std::vector<float> want(x0);
  for (auto& v : want)
    for (int k = 0; k < 5; ++k) v = (v * 2.0F + 1.0F) * 3.0F;
  EXPECT_TRUE(all_near(x.download(), want));
}

TEST(Capture, NestedCaptureOfTheSameStreamThrowsAndEndsBoth) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  EXPECT_THROW(
      {
        (void)conveyor::capture(s, [&](const conveyor::stream& cs) {
          (void)conveyor::capture(cs, [] {}); // cudaStreamBeginCapture on a capturing stream
        });
      },
      conveyor::cuda_error);
  EXPECT_FALSE(s.is_capturing());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  expect_stream_usable(s, 1341);
}

// ---- unjoined fork ------------------------------------------------------------------------------------------------

TEST(Capture, UnjoinedForkThrowsUnjoinedAndReleasesBothStreams) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 512;
  const auto x0 = random_floats(n, 1401);
  const auto y0 = random_floats(n, 1402);
  device_array<float> x(x0), y(y0);
  sync_device();
  conveyor::stream s, s2;

  bool thrown = false;
  try {
    (void)conveyor::capture(s, [&](const conveyor::stream& cs) {
      launch_scale(cs, n, 2.0F, x.get());
      conveyor::fork(cs, s2);
      launch_scale(s2, n, 3.0F, y.get());
      // no join
    });
  } catch (const conveyor::cuda_error& e) {
    thrown = true;
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureUnjoined) << e.what();
    EXPECT_TRUE(contains(e.what(), "join")) << e.what();
  }
  EXPECT_TRUE(thrown);
  EXPECT_FALSE(s.is_capturing());
  EXPECT_FALSE(s2.is_capturing());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  s.synchronize();
  s2.synchronize();
  EXPECT_TRUE(all_equal(x.download(), x0));
  EXPECT_TRUE(all_equal(y.download(), y0));
  expect_stream_usable(s, 1403);
  expect_stream_usable(s2, 1404);
}

// ---- capture into an existing graph ---------------------------------------------------------------------------------

TEST(Capture, CaptureIntoExistingGraphReturnsFrontier) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2222;
  const auto x0 = random_floats(n, 1501);
  device_array<float> x(x0), y(random_floats(n, 1502));
  sync_device();
  conveyor::stream s;

  conveyor::graph g;
  auto first = g.kernel(cover(n), spin_then_scale, n, 2.0F, x.get(), spin_cycles).label("first");
  auto frontier = conveyor::capture_into(
      g, s,
      [&](const conveyor::stream& cs) {
        launch_add(cs, n, 1.0F, x.get()); // x = 2x + 1
        CONVEYOR_CHECK(cudaMemcpyAsync(y.get(), x.get(), x.bytes(), cudaMemcpyDeviceToDevice, cs.get()));
      },
      {first});
  EXPECT_FALSE(s.is_capturing());
  ASSERT_EQ(frontier.size(), 1U);
  EXPECT_EQ(frontier[0].kind(), conveyor::node_kind::memcpy);
  EXPECT_TRUE(g.owns(frontier[0]));
  EXPECT_EQ(g.node_count(), 3U);
  auto roots = g.root_nodes();
  ASSERT_EQ(roots.size(), 1U);
  EXPECT_EQ(roots[0], first);
  EXPECT_EQ(roots[0].label(), "first");

  // Later builder work depends on the frontier.
  auto last = g.kernel(frontier, cover(n), scale, n, 3.0F, y.get());
  ASSERT_EQ(last.dependencies().size(), 1U);
  EXPECT_EQ(last.dependencies()[0], frontier[0]);
  EXPECT_EQ(g.node_count(), 4U);
  EXPECT_EQ(g.edge_count(), 3U);

  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want_x = twice_plus_one(x0), want_y(n);
  for (int i = 0; i < n; ++i) want_y[i] = want_x[i] * 3.0F;
  EXPECT_TRUE(all_near(x.download(), want_x));
  EXPECT_TRUE(all_near(y.download(), want_y));
}

TEST(Capture, CaptureIntoRejectsADependencyOfAnotherGraph) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 1511));
  sync_device();
  conveyor::stream s;
  conveyor::graph g, other;
  auto foreign = other.kernel(cover(n), scale, n, 2.0F, x.get());
  bool called = false;
  EXPECT_THROW((void)conveyor::capture_into(g, s, [&] { called = true; }, {foreign}), std::invalid_argument);
  EXPECT_FALSE(called);
  EXPECT_FALSE(s.is_capturing());
  EXPECT_EQ(g.node_count(), 0U);
}

TEST(Capture, CaptureIntoAMovedFromGraphIsRefusedBeforeTheCaptureBegins) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 1521));
  sync_device();
  conveyor::stream s;
  conveyor::graph g;
  conveyor::graph taken(std::move(g));
  bool called = false;
  EXPECT_REFUSES_MOVED_FROM("conveyor::capture_into", (void)conveyor::capture_into(g, s, [&] { called = true; }));
  EXPECT_REFUSES_MOVED_FROM("conveyor::capture_into", conveyor::capture_session session(g, s));
  EXPECT_FALSE(called);
  EXPECT_FALSE(s.is_capturing());
  // The stream captures into the graph moved into as before.
  const auto frontier = conveyor::capture_into(taken, s, [&] { launch_scale(s, n, 2.0F, x.get()); });
  EXPECT_EQ(frontier.size(), 1U);
  EXPECT_EQ(taken.node_count(), 1U);
}

TEST(Capture, CaptureIntoThatThrowsKeepsTheTargetGraphUsable) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  const auto x0 = random_floats(n, 1521);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s;

  conveyor::graph g;
  auto first = g.kernel(cover(n), scale, n, 2.0F, x.get());
  EXPECT_THROW(
      {
        (void)conveyor::capture_into(g, s,
                                     [&](const conveyor::stream& cs) {
                                       launch_add(cs, n, 1.0F, x.get());
                                       throw std::runtime_error("boom inside capture_into");
                                     },
                                     {first});
      },
      std::runtime_error);
  EXPECT_FALSE(s.is_capturing());

  // Documented: nodes already added stay in g, and g itself stays valid.
  ASSERT_NE(g.get(), nullptr);
  std::size_t nodes = 0;
  ASSERT_NO_THROW(nodes = g.node_count());
  EXPECT_EQ(nodes, 2U);
  ASSERT_NO_THROW({
    auto exec = conveyor::instantiate(g);
    exec.launch(s);
    s.synchronize();
  });
  EXPECT_TRUE(all_near(x.download(), twice_plus_one(x0)));
}

TEST(Capture, CaptureIntoWithUnjoinedForkThrowsAndKeepsTheTargetGraph) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 512;
  const auto x0 = random_floats(n, 1531);
  device_array<float> x(x0), y(random_floats(n, 1532));
  sync_device();
  conveyor::stream s, s2;

  conveyor::graph g;
  auto first = g.kernel(cover(n), scale, n, 2.0F, x.get());
  try {
    (void)conveyor::capture_into(g, s,
                                 [&](const conveyor::stream& cs) {
                                   conveyor::fork(cs, s2);
                                   launch_scale(s2, n, 3.0F, y.get());
                                 },
                                 {first});
    ADD_FAILURE() << "capture_into with an unjoined fork did not throw";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureUnjoined) << e.what();
  }
  EXPECT_FALSE(s.is_capturing());
  EXPECT_FALSE(s2.is_capturing());
  ASSERT_NE(g.get(), nullptr);
  std::size_t nodes = 0;
  ASSERT_NO_THROW(nodes = g.node_count()); // the target graph was not destroyed
  EXPECT_GE(nodes, 1U);
  expect_stream_usable(s, 1533);
  expect_stream_usable(s2, 1534);
}

// ---- zero-size work, and forks that would merge two captures ---------------------------------------------------

TEST(Capture, ZeroSizeAsyncCopiesAndMemsetsCaptureNothingAndKeepTheOrder) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1500;
  const auto x0 = random_floats(n, 1901);
  device_array<float> x(x0), y(n);
  sync_device();
  conveyor::stream s;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    auto cfg = cover(n);
    spin_then_scale<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 2.0F, x.get(), spin_cycles);
    CONVEYOR_CHECK(cudaMemcpyAsync(y.get(), x.get(), 0, cudaMemcpyDeviceToDevice, cs.get()));
    CONVEYOR_CHECK(cudaMemsetAsync(y.get(), 0, 0, cs.get()));
    CONVEYOR_CHECK(cudaMemcpyAsync(y.get(), x.get(), x.bytes(), cudaMemcpyDeviceToDevice, cs.get()));
  });
  EXPECT_EQ(g.node_count(), 2U); // the kernel and the real copy
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * 2.0F;
  EXPECT_TRUE(all_equal(y.download(), want));
}

TEST(Capture, ForkFromAConditionalBodyOntoAStreamCapturingAnotherGraphThrowsAndBothCapturesStayValid) {
  CONVEYOR_REQUIRE_GPU();
  int driver = 0;
  CONVEYOR_CHECK(cudaDriverGetVersion(&driver));
  if (driver < 12040) GTEST_SKIP() << "conditional nodes need CUDA 12.4";
  const int n = 512;
  const auto x0 = random_floats(n, 1911);
  device_array<float> x(x0), y(random_floats(n, 1912));
  sync_device();
  conveyor::stream body_stream, outer_stream;
  std::string message;
  conveyor::graph body_owner;
  auto cond = conveyor::make_condition(body_owner, 1, conveyor::condition_reset::each_launch);
  auto c = conveyor::add_conditional(body_owner, {}, conveyor::conditional_kind::if_then, cond);
  // The outer capture goes on after the failed fork: its graph must be valid and run.
  conveyor::graph outer = conveyor::capture(outer_stream, [&](const conveyor::stream& os) {
    launch_scale(os, n, 2.0F, x.get());
    try {
      (void)conveyor::capture_into(c.bodies[0], body_stream, [&](const conveyor::stream& bs) {
        launch_add(bs, n, 1.0F, y.get());
        conveyor::fork(bs, outer_stream); // outer_stream is capturing another graph
        launch_add(outer_stream, n, 100.0F, y.get());
        conveyor::join(bs, outer_stream);
      });
      ADD_FAILURE() << "forking onto a stream of another capture did not throw";
    } catch (const conveyor::cuda_error& e) {
      message = e.what();
      EXPECT_EQ(e.code(), cudaErrorStreamCaptureMerge) << e.what();
    }
    launch_add(os, n, 1.0F, x.get());
  });
  EXPECT_TRUE(contains(message, "already capturing")) << message;
  EXPECT_FALSE(body_stream.is_capturing());
  EXPECT_FALSE(outer_stream.is_capturing());
  EXPECT_EQ(outer.node_count(), 2U);
  auto exec = conveyor::instantiate(outer);
  exec.launch(outer_stream);
  outer_stream.synchronize();
  EXPECT_TRUE(all_near(x.download(), twice_plus_one(x0)));
  expect_stream_usable(body_stream, 1913);
  expect_stream_usable(outer_stream, 1914);
}

TEST(Capture, JoinOfStreamsInDifferentCapturesIsRefusedBeforeAnythingIsEnqueued) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> x(random_floats(n, 1921));
  sync_device();
  conveyor::stream a, b;
  conveyor::graph ga = conveyor::capture(a, [&](const conveyor::stream& as) {
    launch_scale(as, n, 2.0F, x.get());
    conveyor::graph gb = conveyor::capture(b, [&](const conveyor::stream& bs) {
      launch_scale(bs, n, 3.0F, x.get());
      try {
        conveyor::join(as, bs);
        ADD_FAILURE() << "join across two captures did not throw";
      } catch (const conveyor::cuda_error& e) {
        EXPECT_EQ(e.code(), cudaErrorStreamCaptureIsolation) << e.what();
      }
      try {
        conveyor::fork(as, bs);
        ADD_FAILURE() << "fork onto a stream of another capture did not throw";
      } catch (const conveyor::cuda_error& e) {
        EXPECT_EQ(e.code(), cudaErrorStreamCaptureMerge) << e.what();
      }
    });
    EXPECT_EQ(gb.node_count(), 1U);
  });
  EXPECT_EQ(ga.node_count(), 1U);
  // A capturing stream joined from one that is not capturing: refused too.
  conveyor::stream eager;
  conveyor::graph gc = conveyor::capture(a, [&](const conveyor::stream& as) {
    launch_scale(as, n, 2.0F, x.get());
    EXPECT_THROW(conveyor::join(eager, as), conveyor::cuda_error);
    EXPECT_THROW(conveyor::fork(eager, as), conveyor::cuda_error);
  });
  EXPECT_EQ(gc.node_count(), 1U);
  expect_stream_usable(a, 1922);
  expect_stream_usable(b, 1923);
}

// ---- a raw stream adopted inside the captured code ----------------------------------------------------------------
// cudaStreamGetDevice (like cudaStreamGetFlags and cudaStreamGetId) fails on a capturing stream and invalidates its
// capture (CUDA 13.0, H200): stream::adopt and launch on a cudaStream_t, which code holding raw streams calls inside
// captures, read the device through the stream's context instead. Each test compares the replay with the same calls
// run eagerly, bitwise.

namespace {
// x = a * x + b through conveyor::launch on a raw cudaStream_t (the overload that adopts it).
void raw_stream_axpb(cudaStream_t s, int n, float a, float b, float* x) {
  const auto cfg = cover(n);
  conveyor::launch(s, conveyor::launch_config{cfg.grid, cfg.block}, scale, n, a, x);
  conveyor::launch(s, conveyor::launch_config{cfg.grid, cfg.block}, add_scalar, n, b, x);
}
} // namespace

TEST(Capture, ALaunchOnARawStreamAsTheCapturesFirstCallKeepsItValidAndMatchesEager) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4099;
  const auto x0 = random_floats(n, 4401);
  device_array<float> graphed(x0);
  device_array<float> eager(x0);
  conveyor::stream s;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    raw_stream_axpb(cs.get(), n, 1.5F, -0.25F, graphed.get());
    EXPECT_TRUE(cs.is_capturing()) << "the capture was invalidated";
  });
  EXPECT_EQ(g.nodes().size(), 2U);
  auto exec = conveyor::instantiate(g);
  for (int k = 0; k < 3; ++k) {
    exec.launch(s);
    raw_stream_axpb(s.get(), n, 1.5F, -0.25F, eager.get());
  }
  s.synchronize();
  EXPECT_TRUE(all_equal(graphed.download(), eager.download()));
  EXPECT_FALSE(all_equal(graphed.download(), x0)) << "the replays changed nothing";
}

TEST(Capture, AdoptingTheCapturingStreamTellsItsDeviceAndLeavesTheCaptureValid) {
  CONVEYOR_REQUIRE_GPU();
  int current = -1;
  CONVEYOR_CHECK(cudaGetDevice(&current));
  conveyor::stream s;
  device_array<float> x(random_floats(64, 4402));
  int adopted_device = -2;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    const conveyor::stream borrowed = conveyor::stream::adopt(cs.get());
    adopted_device = borrowed.device();
    CONVEYOR_CHECK(cudaStreamIsCapturing(cs.get(), &status));
    launch_scale(borrowed, 64, 2.0F, x.get());
  });
  EXPECT_EQ(adopted_device, current);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_EQ(g.nodes().size(), 1U);
}

// ---- the stream watch (capture_options::watch_streams, issue 39 item 1) -----------------------------------------

namespace {

// Skips the test where CUPTI's callback API cannot be had (under compute-sanitizer, itself a subscriber).
#define REQUIRE_STREAM_WATCH()                                                                                         \
  do {                                                                                                                 \
    const std::string why = conveyor::detail::stream_watch_unavailable();                                              \
    if (!why.empty()) GTEST_SKIP() << "the stream watch cannot run here: " << why;                                     \
  } while (0)

conveyor::capture_options watching(conveyor::stream_watch w = conveyor::stream_watch::on) {
  conveyor::capture_options o;
  o.watch_streams = w;
  return o;
}

// A pointer as the refusal prints it ("0x7f..."), glibc's %p and fmt's {} alike.
std::string fmt_pointer(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// The refusal's text, or "" when `capture` did not throw a cuda_error.
template <class F>
std::string refusal_of(F&& capture) {
  try {
    capture();
  } catch (const conveyor::cuda_error& e) {
    return e.what();
  }
  return {};
}

// x = 2 x on the capturing stream, then y = y + 1 on `side`: eagerly, both run.
struct forgotten_side_stream {
  static constexpr int n = 4096;
  std::vector<float> x0 = random_floats(n, 3101), y0 = random_floats(n, 3102);
  device_array<float> x{x0}, y{y0};
  conveyor::stream side;
  void reset() {
    x.upload(x0);
    y.upload(y0);
    sync_device();
  }
  void operator()(const conveyor::stream& s) {
    scale<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, 2.0F, x.get());
    add_scalar<<<cover(n).grid, cover(n).block, 0, side.get()>>>(n, 1.0F, y.get()); // not forked into the capture
  }
  // From the first values: the same work with `side` forked into a watched capture on `s` and joined back, the
  // graph instantiated and launched once, waited for.
  void replay_forked_and_joined(const conveyor::stream& s) {
    reset();
    auto joined = conveyor::capture(
        s,
        [&](const conveyor::stream& cs) {
          conveyor::fork(cs, side);
          (*this)(cs);
          conveyor::join(cs, side);
        },
        watching());
    auto exec = conveyor::instantiate(joined);
    exec.launch(s);
    sync_device();
  }
};

} // namespace

// A kernel on a side stream the code forgot to fork runs once at capture time: the unwatched graph's replay computes
// less than the eager call (shown here), and the watched capture refuses, naming the call, the kernel and the stream.
TEST(StreamWatch, AKernelOnAStreamTheCaptureDoesNotKnowIsRefusedByName) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_STREAM_WATCH();
  forgotten_side_stream w;
  conveyor::stream s;
  w.reset();
  w(s);
  sync_device();
  const auto eager_x = w.x.download(), eager_y = w.y.download();

  w.reset();
  auto unwatched = conveyor::capture(
      s, [&](const conveyor::stream& cs) { w(cs); }, watching(conveyor::stream_watch::off));
  w.reset();
  auto exec = conveyor::instantiate(unwatched);
  exec.launch(s);
  sync_device();
  EXPECT_TRUE(all_equal(w.x.download(), eager_x));
  EXPECT_FALSE(all_equal(w.y.download(), eager_y))
      << "the unwatched replay was expected to miss the side stream's work";

  w.reset();
  const std::string text = refusal_of([&] {
    (void)conveyor::capture(
        s, [&](const conveyor::stream& cs) { w(cs); }, watching());
  });
  std::printf("stream watch: %s\n", text.c_str());
  EXPECT_TRUE(contains(text, "cuLaunchKernel")) << text;
  EXPECT_TRUE(contains(text, "add_scalar")) << text;
  EXPECT_TRUE(contains(text, fmt_pointer(w.side.get()))) << text;
  EXPECT_TRUE(contains(text, "from the capturing thread")) << text;
  EXPECT_TRUE(contains(text, "conveyor::fork")) << text;
  EXPECT_FALSE(s.is_capturing());
  // Forked and joined, the same work is captured: accepted, and the replay is the eager call's, bit for bit.
  w.replay_forked_and_joined(s);
  EXPECT_TRUE(all_equal(w.x.download(), eager_x));
  EXPECT_TRUE(all_equal(w.y.download(), eager_y));
}

// Copies and memsets on such a stream, and a helper thread's work on its own per-thread default stream, are refused
// too, each named (the helper's from another thread).
TEST(StreamWatch, CopiesMemsetsAndAHelperThreadsPerThreadStreamAreRefused) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_STREAM_WATCH();
  const int n = 2048;
  device_array<float> a(random_floats(n, 3111)), b(n);
  conveyor::stream s, side;
  const std::string copies = refusal_of([&] {
    (void)conveyor::capture(
        s,
        [&](const conveyor::stream& cs) {
          scale<<<cover(n).grid, cover(n).block, 0, cs.get()>>>(n, 2.0F, a.get());
          CONVEYOR_CHECK(cudaMemcpyAsync(b.get(), a.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, side.get()));
          CONVEYOR_CHECK(cudaMemsetAsync(b.get(), 0, n * sizeof(float), side.get()));
        },
        watching());
  });
  EXPECT_TRUE(contains(copies, "2 operation(s)")) << copies;
  EXPECT_TRUE(contains(copies, "cuMemcpy")) << copies;
  EXPECT_TRUE(contains(copies, "cuMemset")) << copies;
  side.synchronize();

  const std::string helper = refusal_of([&] {
    (void)conveyor::capture(
        s,
        [&](const conveyor::stream& cs) {
          scale<<<cover(n).grid, cover(n).block, 0, cs.get()>>>(n, 2.0F, a.get());
          std::thread t([&] {
            add_scalar<<<cover(n).grid, cover(n).block, 0, cudaStreamPerThread>>>(n, 1.0F, b.get());
            (void)cudaStreamSynchronize(cudaStreamPerThread);
          });
          t.join();
        },
        watching());
  });
  EXPECT_TRUE(contains(helper, "add_scalar")) << helper;
  EXPECT_TRUE(contains(helper, "the per-thread default stream, from another thread")) << helper;
}

// graphed watches the first capture of each shape by default (where CUPTI is free); CONVEYOR_WATCH_STREAMS=0 turns it
// off, and the replay then misses the side stream's work, as the unwatched capture above.
TEST(StreamWatch, GraphedWatchesTheFirstCaptureOfEachShapeByDefault) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_STREAM_WATCH();
  forgotten_side_stream w;
  conveyor::stream s;
  ASSERT_EQ(std::getenv("CONVEYOR_WATCH_STREAMS"), nullptr) << "the test sets the variable itself";
  conveyor::graphed_options options;
  options.warmup_calls = 0;
  conveyor::graphed step([&](const conveyor::stream& cs, int) { w(cs); }, options);
  w.reset();
  const std::string text = refusal_of([&] { step(s, 1); });
  EXPECT_TRUE(contains(text, "add_scalar")) << text;
  ::setenv("CONVEYOR_WATCH_STREAMS", "0", 1);
  w.reset();
  EXPECT_NO_THROW(step(s, 2));
  ::unsetenv("CONVEYOR_WATCH_STREAMS");
  sync_device();
  // The default refuses the capturing thread's work only: another thread's eager work meanwhile (here on its own
  // stream, while the first capture of a shape is open) is not refused, and the graph replays the capture.
  conveyor::stream elsewhere;
  device_array<float> other(random_floats(forgotten_side_stream::n, 3121));
  conveyor::graphed loader(
      [&](const conveyor::stream& cs, int) {
        scale<<<cover(forgotten_side_stream::n).grid, cover(forgotten_side_stream::n).block, 0, cs.get()>>>(
            forgotten_side_stream::n, 2.0F, w.x.get());
        std::thread t([&] {
          add_scalar<<<cover(forgotten_side_stream::n).grid, cover(forgotten_side_stream::n).block, 0,
                       elsewhere.get()>>>(forgotten_side_stream::n, 1.0F, other.get());
        });
        t.join();
      },
      options);
  w.reset();
  EXPECT_NO_THROW(loader(s, 1));
  EXPECT_EQ(loader.statistics().captures, 1U) << loader.report();
  sync_device();
}

// A hold keeps CUPTI's subscription between watched captures (graphed::prepare holds it for its buckets): eager work
// while no capture is open is not recorded, a watched capture still refuses the work that misses it, naming only that
// work, and the subscription is let go with the last hold (a later check can subscribe again).
TEST(StreamWatch, AHeldWatchRecordsNothingBetweenCapturesAndStillRefusesWorkThatMissesOne) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_STREAM_WATCH();
  forgotten_side_stream w;
  conveyor::stream s;
  {
    const conveyor::stream_watch_hold hold = conveyor::hold_stream_watch(conveyor::stream_watch::on);
    ASSERT_TRUE(hold.held());
    EXPECT_FALSE(conveyor::hold_stream_watch(conveyor::stream_watch::off).held());
    w.reset();
    w(s); // eager, on both streams, with no capture open: nothing to refuse
    sync_device();
    const std::string text = refusal_of([&] {
      (void)conveyor::capture(
          s, [&](const conveyor::stream& cs) { w(cs); }, watching());
    });
    EXPECT_TRUE(contains(text, "1 operation(s)")) << text;
    EXPECT_TRUE(contains(text, "add_scalar")) << text;
    EXPECT_TRUE(contains(text, fmt_pointer(w.side.get()))) << text;
    w.side.synchronize();
    // The capture's own stream takes the callback's fast path; forked and joined, the work is captured and replays.
    w.reset();
    w(s);
    sync_device();
    const auto eager_x = w.x.download(), eager_y = w.y.download();
    w.replay_forked_and_joined(s);
    EXPECT_TRUE(all_equal(w.x.download(), eager_x));
    EXPECT_TRUE(all_equal(w.y.download(), eager_y));
    // graphed::prepare holds the watch for its buckets: each bucket's capture is watched.
    conveyor::graphed_options options;
    options.buckets = {16, 32};
    conveyor::graphed step([&](const conveyor::stream& cs, conveyor::batch_size) { w(cs); }, options);
    const std::string prepared = refusal_of([&] { step.prepare(s, conveyor::batch_size{1}); });
    EXPECT_TRUE(contains(prepared, "add_scalar")) << prepared;
    sync_device();
  }
  EXPECT_EQ(conveyor::detail::stream_watch_unavailable(), "") << "the hold kept CUPTI's subscription";
}
