// GPU tests of the promise that a graphed or replayed step computes what the same code run eagerly computes, never
// differently: arguments the callable branches on re-capture by default (compared bitwise with an eager run of the
// same calls); host memory that a replay would read after it is gone is refused at capture; work that escapes a
// capture on a default stream is refused; a buffer freed and reallocated between graphed calls never hangs; CUDA's
// bare refusals get the rule and the fix. Each test skips without a CUDA device.
#include "support/gpu.hpp"

#include "gpu/gpu_test_util.hpp"

#include "gpu/test_kernels.cuh"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/conveyor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace k = conveyor::test::kernels;
using conveyor::test::device_array;
using conveyor::test::pinned_array;
using conveyor::test::random_floats;
using conveyor::test::reasons_of;
using conveyor::test::same_bits;

unsigned blocks(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const conveyor::graphed_options eager{.disabled = true};

// ---- 1. arguments the callable's control flow depends on ---------------------------------------------------------

constexpr int n_elems = 3000;

// A kernel picked by the sign of `a`: negative values negate x first.
void signed_step(const conveyor::stream& s, int n, float a, float* x) {
  if (a < 0) k::scale<<<blocks(n), 256, 0, s.get()>>>(n, -1.0F, x);
  k::add_scalar<<<blocks(n), 256, 0, s.get()>>>(n, a, x);
  conveyor::check_launch("signed_step");
}

// A step skipped when its factor is 0.
void maybe_scaled(const conveyor::stream& s, int n, float f, float* x) {
  if (f != 0.0F) k::scale<<<blocks(n), 256, 0, s.get()>>>(n, f, x);
  k::add_scalar<<<blocks(n), 256, 0, s.get()>>>(n, 1.0F, x);
  conveyor::check_launch("maybe_scaled");
}

// An in-place variant when the two pointers are equal.
void maybe_in_place(const conveyor::stream& s, int n, const float* in, float* out) {
  if (in == out) k::scale<<<blocks(n), 256, 0, s.get()>>>(n, 2.0F, out);
  else k::copy_plus<<<blocks(n), 256, 0, s.get()>>>(n, in, 1.0F, out);
  conveyor::check_launch("maybe_in_place");
}

// A node count that depends on a size: one kernel per 256 real rows.
void per_chunk(const conveyor::stream& s, conveyor::batch_size rows, float* x) {
  for (std::size_t first = 0; first < rows.real; first += 256)
    k::add_scalar<<<1, 256, 0, s.get()>>>(static_cast<int>(std::min<std::size_t>(256, rows.real - first)), 0.25F,
                                          x + first);
  conveyor::check_launch("per_chunk");
}

template <class F>
std::vector<float> run_scalar_calls(F f, const conveyor::graphed_options& options, const std::vector<float>& values,
                                    std::string* log = nullptr) {
  device_array<float> x(random_floats(n_elems, 21));
  conveyor::stream s;
  conveyor::graphed step(f, options);
  for (float v : values) step(s, n_elems, v, x.get());
  s.synchronize();
  if (log != nullptr) *log = step.report();
  return x.download();
}

TEST(Soundness, AKernelChosenByAScalarsSignFollowsEveryCallByDefault) {
  CONVEYOR_REQUIRE_GPU();
  const std::vector<float> as = {2.0F, 3.0F, -1.0F, -2.0F, 0.5F, -4.0F, -4.0F, 1.5F};
  std::string log;
  const auto got = run_scalar_calls(signed_step, {.warmup_calls = 0}, as, &log);
  EXPECT_TRUE(same_bits(got, run_scalar_calls(signed_step, eager, as))) << log;
  // Every change re-captured (7 changes, the repeated -4 replays) and none was patched.
  EXPECT_TRUE(has(log, "8 calls, 8 replays, 0 warm-ups, 7 captures")) << log;
  EXPECT_TRUE(has(log, "0 rebinds")) << log;
}

TEST(Soundness, AStepSkippedWhenItsFactorIsZeroFollowsEveryCallByDefault) {
  CONVEYOR_REQUIRE_GPU();
  const std::vector<float> fs = {1.5F, 0.0F, 0.0F, 2.0F, 0.0F, 0.75F};
  std::string log;
  const auto got = run_scalar_calls(maybe_scaled, {.warmup_calls = 0}, fs, &log);
  EXPECT_TRUE(same_bits(got, run_scalar_calls(maybe_scaled, eager, fs))) << log;
  EXPECT_TRUE(has(log, "0 rebinds")) << log;
}

TEST(Soundness, AnInPlaceVariantForEqualPointersFollowsEveryCallByDefault) {
  CONVEYOR_REQUIRE_GPU();
  auto run = [](const conveyor::graphed_options& options, std::vector<conveyor::argument_binding>* map) {
    device_array<float> a(random_floats(n_elems, 22)), b(random_floats(n_elems, 23));
    conveyor::stream s;
    conveyor::graphed step(maybe_in_place, options);
    float* pa = a.get();
    float* pb = b.get();
    const std::pair<float*, float*> calls[] = {{pa, pb}, {pa, pa}, {pb, pb}, {pa, pb}, {pb, pa}, {pb, pb}};
    for (const auto& [in, out] : calls) step(s, n_elems, in, out);
    s.synchronize();
    if (map != nullptr) *map = step.bindings();
    auto out = a.download();
    const auto more = b.download();
    out.insert(out.end(), more.begin(), more.end());
    return out;
  };
  std::vector<conveyor::argument_binding> map;
  EXPECT_TRUE(same_bits(run({.warmup_calls = 0}, &map), run(eager, nullptr)));
  // The map says why: neither pointer was declared, so each change re-captures.
  ASSERT_EQ(map.size(), 2U);
  for (const auto& b : map) {
    EXPECT_EQ(b.state, conveyor::binding_state::recaptured) << b.reason;
    EXPECT_TRUE(has(b.reason, "the default")) << b.reason;
  }
}

TEST(Soundness, ANodeCountThatDependsOnARealSizeFollowsEveryCallByDefault) {
  CONVEYOR_REQUIRE_GPU();
  auto run = [](const conveyor::graphed_options& options, std::string* log) {
    device_array<float> x(random_floats(1024, 24));
    conveyor::stream s;
    conveyor::graphed step(per_chunk, options);
    for (std::size_t real : {1000U, 300U, 1000U, 1024U, 1U, 513U}) step(s, conveyor::batch_size{real}, x.get());
    s.synchronize();
    if (log != nullptr) *log = step.report();
    return x.download();
  };
  std::string log;
  EXPECT_TRUE(same_bits(run({.warmup_calls = 0, .buckets = {1024}}, &log), run(eager, nullptr))) << log;
  EXPECT_TRUE(has(log, "0 rebinds")) << log;
}

TEST(Soundness, ADeclaredArgumentIsStillLearntVerifiedAndPatched) {
  CONVEYOR_REQUIRE_GPU();
  // add_scalar's `a` only flows into a kernel argument: declared, it is patched after one verifying re-capture.
  auto body = [](const conveyor::stream& s, int n, float a, float* x) {
    k::add_scalar<<<blocks(n), 256, 0, s.get()>>>(n, a, x);
    conveyor::check_launch("add_scalar");
  };
  const std::vector<float> as = {1.0F, 2.0F, 3.0F, 4.0F, 5.0F, 6.0F};
  std::string log;
  const auto got =
      run_scalar_calls(body, {.warmup_calls = 0, .rebind_arguments = {{1, conveyor::rebind_policy::learn}}}, as, &log);
  EXPECT_TRUE(same_bits(got, run_scalar_calls(body, eager, as))) << log;
  EXPECT_TRUE(has(log, "2 captures")) << log;
  EXPECT_TRUE(has(log, "4 rebinds")) << log;
}

// ---- 2. host memory a replay would read after it is gone ---------------------------------------------------------

// Copies `value` from a local variable of its own frame: the copy node re-reads that stack slot at every replay.
void copy_from_local(const conveyor::stream& s, float value, float* d) {
  const float local = value;
  CONVEYOR_CHECK(cudaMemcpyAsync(d, &local, sizeof local, cudaMemcpyHostToDevice, s.get()));
}

TEST(Soundness, ACopyFromALocalVariableOfTheCapturedCodeIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> d(1);
  conveyor::stream s;
  try {
    (void)conveyor::capture(s, [&] { copy_from_local(s, 2.0F, d.get()); });
    FAIL() << "the capture was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_TRUE(has(what, "node 0 (memcpy)")) << what;
    EXPECT_TRUE(has(what, "as its source (4 B)")) << what;
    EXPECT_TRUE(has(what, "stack frame that returned")) << what;
    EXPECT_TRUE(has(what, "cudaMallocHost")) << what;
  }
  // capture_into, and a lambda's own local (a temporary of the captured code)
  conveyor::graph g;
  EXPECT_THROW((void)conveyor::capture_into(g, s,
                                            [&] {
                                              float tmp = 3.0F;
                                              CONVEYOR_CHECK(
                                                  cudaMemcpyAsync(d.get(), &tmp, 4, cudaMemcpyHostToDevice, s.get()));
                                            }),
               std::invalid_argument);
  // The stream is usable again, and a local of the frame that outlives the graph is kept once declared (it is
  // pageable memory: refused by default).
  float alive = 4.0F;
  conveyor::capture_options declared;
  declared.host_memory = conveyor::host_memory_check::returned_frames;
  const conveyor::graph ok = conveyor::capture(
      s, [&] { CONVEYOR_CHECK(cudaMemcpyAsync(d.get(), &alive, 4, cudaMemcpyHostToDevice, s.get())); }, declared);
  auto exec = conveyor::instantiate(ok);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(d.download()[0], 4.0F);
}

void CUDART_CB read_float(void* p) { std::printf("%g", static_cast<double>(*static_cast<float*>(p)) * 0.0); }

TEST(Soundness, AHostFunctionWhoseDataIsALocalIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  try {
    (void)conveyor::capture(s, [&] {
      float local = 1.0F;
      CONVEYOR_CHECK(cudaLaunchHostFunc(s.get(), read_float, &local));
    });
    FAIL() << "the capture was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(has(e.what(), "as its data pointer")) << e.what();
    EXPECT_TRUE(has(e.what(), "graph::host")) << e.what();
  }
}

TEST(Soundness, GraphedRefusesCopiesFromItsCallablesLocalsAndFromItsCopyOfTheArguments) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> d(1);
  conveyor::stream s;
  conveyor::graphed by_value(copy_from_local, {.warmup_calls = 0});
  try {
    by_value(s, 2.0F, d.get());
    FAIL() << "the capture was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(has(e.what(), "stack frame that returned")) << e.what();
  }
  // The callable takes the value by reference: the copy reads graphed's copy of the arguments.
  auto by_reference = [](const conveyor::stream& cs, const float& value, float* out) {
    CONVEYOR_CHECK(cudaMemcpyAsync(out, &value, sizeof value, cudaMemcpyHostToDevice, cs.get()));
  };
  conveyor::graphed ref(by_reference, {.warmup_calls = 0});
  try {
    ref(s, 2.0F, d.get());
    FAIL() << "the capture was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(has(e.what(), "graphed's copy of the call's arguments")) << e.what();
  }
  // Eager warm-up calls are not captured: they run as written.
  conveyor::graphed warm(copy_from_local, {.warmup_calls = 1});
  warm(s, 7.0F, d.get());
  s.synchronize();
  EXPECT_EQ(d.download()[0], 7.0F);
}

TEST(Soundness, GraphedRefusesPageableHostMemoryUnlessTheCallerDeclaresIt) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> d(4);
  std::vector<float> host = {1.0F, 2.0F, 3.0F, 4.0F}; // heap, pageable: the replay reads it when it runs
  auto body = [&](const conveyor::stream& cs, float* out) {
    CONVEYOR_CHECK(cudaMemcpyAsync(out, host.data(), 16, cudaMemcpyHostToDevice, cs.get()));
  };
  conveyor::stream s;
  conveyor::graphed refused(body, {.warmup_calls = 0}); // the default: refused, naming the node and the fix
  try {
    refused(s, d.get());
    FAIL() << "pageable host memory was accepted by default";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(has(e.what(), "node 0")) << e.what();
    EXPECT_TRUE(has(e.what(), "pageable host memory")) << e.what();
    EXPECT_TRUE(has(e.what(), "pageable_policy::allow")) << e.what();
  }
  conveyor::graphed warned(body, {.warmup_calls = 0, .pageable = conveyor::pageable_policy::warn}); // declared
  warned(s, d.get());
  s.synchronize();
  EXPECT_EQ(d.download()[3], 4.0F);
  EXPECT_TRUE(has(reasons_of(warned), "pageable host memory in 1 copy node(s)")) << reasons_of(warned);
  conveyor::graphed quiet(body, {.warmup_calls = 0, .pageable = conveyor::pageable_policy::allow}); // declared
  quiet(s, d.get());
  s.synchronize();
  EXPECT_FALSE(has(reasons_of(quiet), "pageable")) << reasons_of(quiet);
}

// A helper that uploads from a local std::vector: eagerly right (the copy is done, through a staging buffer, before
// the vector is freed), captured wrong (every replay would read the freed heap block). conveyor::capture refuses it
// by default, naming the node, the address and the fix; declared (host_memory_check::returned_frames), it is kept.
[[gnu::noinline]] void upload_from_local(const conveyor::stream& s, float* out, float value) {
  std::vector<float> local(64, value);
  CONVEYOR_CHECK(cudaMemcpyAsync(out, local.data(), local.size() * sizeof(float), cudaMemcpyHostToDevice, s.get()));
}

TEST(Soundness, CaptureRefusesPageableHeapMemoryACopyReadsByDefault) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> d(64);
  conveyor::stream s;
  upload_from_local(s, d.get(), 5.0F); // eager
  s.synchronize();
  EXPECT_EQ(d.download()[63], 5.0F);
  try {
    (void)conveyor::capture(s, [&](const conveyor::stream& cs) { upload_from_local(cs, d.get(), 6.0F); });
    FAIL() << "a copy from freed heap memory was captured";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(has(e.what(), "node 0")) << e.what();
    EXPECT_TRUE(has(e.what(), "pageable host memory 0x")) << e.what();
    EXPECT_TRUE(has(e.what(), "cudaMallocHost")) << e.what();
    EXPECT_TRUE(has(e.what(), "host_memory_check::returned_frames")) << e.what();
  }
  std::vector<float> kept(64, 7.0F); // outlives the graph: declared
  conveyor::capture_options declared;
  declared.host_memory = conveyor::host_memory_check::returned_frames;
  const conveyor::graph g = conveyor::capture(
      s,
      [&](const conveyor::stream& cs) {
        CONVEYOR_CHECK(cudaMemcpyAsync(d.get(), kept.data(), 64 * sizeof(float), cudaMemcpyHostToDevice, cs.get()));
      },
      declared);
  auto e = conveyor::instantiate(g);
  e.launch(s);
  s.synchronize();
  EXPECT_EQ(d.download()[0], 7.0F);
}

// ---- 3. work that escapes a capture on a default stream ----------------------------------------------------------

TEST(Soundness, AKernelOnTheLegacyDefaultStreamInsideACaptureIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(256, 25));
  conveyor::stream s;
  try {
    (void)conveyor::capture(s, [&] {
      k::scale<<<1, 256, 0, s.get()>>>(256, 2.0F, x.get());
      k::add_scalar<<<1, 256>>>(256, 1.0F, x.get()); // the forgotten stream argument
    });
    FAIL() << "the capture was accepted";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureImplicit) << e.what();
    EXPECT_TRUE(has(e.what(), "legacy default stream")) << e.what();
    EXPECT_TRUE(has(e.what(), "pass the capturing stream")) << e.what();
  }
  // Both streams work again: a correct capture replays the right result.
  const auto before = x.download();
  const conveyor::graph g = conveyor::capture(s, [&] { k::add_scalar<<<1, 256, 0, s.get()>>>(256, 1.0F, x.get()); });
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  k::add_scalar<<<1, 256>>>(256, 0.0F, x.get());
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  const auto after = x.download();
  EXPECT_EQ(after[7], before[7] + 1.0F);
}

TEST(Soundness, AKernelOnThePerThreadDefaultStreamInsideACaptureIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(256, 26));
  conveyor::stream s;
  try {
    (void)conveyor::capture(s, [&] {
      k::scale<<<1, 256, 0, s.get()>>>(256, 2.0F, x.get());
      k::add_scalar<<<1, 256, 0, cudaStreamPerThread>>>(256, 1.0F, x.get());
    });
    FAIL() << "the capture was accepted";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_TRUE(has(e.what(), "per-thread default stream")) << e.what();
  }
  // Forked and joined on purpose, the per-thread stream is a branch like any other.
  const auto per_thread = conveyor::stream::adopt(cudaStreamPerThread, conveyor::ownership::borrowed);
  const conveyor::graph g = conveyor::capture(s, [&] {
    conveyor::fork(s, per_thread);
    k::add_scalar<<<1, 256, 0, cudaStreamPerThread>>>(256, 1.0F, x.get());
    conveyor::join(s, per_thread);
  });
  EXPECT_EQ(g.node_count(), 1U);
}

// The guard joins the per-thread default stream into every capture and, when nothing was enqueued on it, lets the
// capture end without joining it back (two calls fewer a capture): afterwards the stream is not capturing, runs work
// at once, the legacy stream too, and the next capture guards it again.
TEST(Soundness, ThePerThreadDefaultStreamIsLeftAsItWasAfterAGuardedCapture) {
  CONVEYOR_REQUIRE_GPU();
  const auto x0 = random_floats(256, 27);
  device_array<float> x(x0);
  conveyor::stream s;
  const conveyor::graph g = conveyor::capture(s, [&] { k::scale<<<1, 256, 0, s.get()>>>(256, 2.0F, x.get()); });
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  CONVEYOR_CHECK(cudaStreamIsCapturing(cudaStreamPerThread, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  k::add_scalar<<<1, 256, 0, cudaStreamPerThread>>>(256, 1.0F, x.get());
  CONVEYOR_CHECK(cudaGetLastError());
  CONVEYOR_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  k::add_scalar<<<1, 256>>>(256, 0.5F, x.get());
  CONVEYOR_CHECK(cudaGetLastError());
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  const auto after = x.download();
  for (std::size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], ((x0[i] + 1.0F) + 0.5F) * 2.0F) << "element " << i;
  EXPECT_THROW((void)conveyor::capture(s,
                                       [&] {
                                         k::scale<<<1, 256, 0, s.get()>>>(256, 2.0F, x.get());
                                         k::add_scalar<<<1, 256, 0, cudaStreamPerThread>>>(256, 1.0F, x.get());
                                       }),
               conveyor::cuda_error);
}

// A kernel with a forgotten stream argument: it goes to the legacy default stream.
struct forgetful {
  float* x;
  void operator()(const conveyor::stream& cs, float a) const {
    k::scale<<<1, 256, 0, cs.get()>>>(256, a, x);
    k::add_scalar<<<1, 256>>>(256, 1.0F, x);
  }
};

TEST(Soundness, AnEscapeIsRefusedInCaptureInto) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(256, 27));
  conveyor::stream s;
  conveyor::graph g;
  EXPECT_THROW((void)conveyor::capture_into(g, s, [&] { forgetful{x.get()}(s, 2.0F); }), conveyor::cuda_error);
  EXPECT_THROW((void)g.empty(), std::logic_error); // lost: CUDA freed it when the capture was invalidated
}

TEST(Soundness, AnEscapeIsRefusedInGraphed) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(256, 28));
  conveyor::stream s;
  conveyor::graphed step(forgetful{x.get()}, {.warmup_calls = 0});
  EXPECT_THROW(step(s, 2.0F), conveyor::cuda_error);
}

// Into a conditional body, capture_into catches the escape by a dry run into a graph of its own (an invalidated
// capture into a body corrupts CUDA 13.0's state: seen on the H200): the escaping launch never runs, the body stays
// empty, the parent is destroyed cleanly and the process goes on working. A body without an escape is captured.
TEST(Soundness, AnEscapeIntoAConditionalBodyIsRefusedByADryRun) {
  CONVEYOR_REQUIRE_GPU();
  const auto start = random_floats(256, 29);
  device_array<float> x(start);
  conveyor::stream s;
  {
    conveyor::graph parent;
    const auto cond = conveyor::make_condition(parent, 1, conveyor::condition_reset::each_launch);
    auto branch = conveyor::add_conditional(parent, {}, conveyor::conditional_kind::if_then, cond);
    try {
      (void)conveyor::capture_into(branch.bodies[0], s, [&] { forgetful{x.get()}(s, 2.0F); });
      FAIL() << "the escape into the body was not refused";
    } catch (const conveyor::cuda_error& e) {
      EXPECT_NE(std::string(e.what()).find("default stream"), std::string::npos) << e.what();
    }
    CONVEYOR_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(branch.bodies[0].node_count(), 0U);
    (void)conveyor::capture_into(branch.bodies[0], s,
                                 [&] { k::add_scalar<<<1, 256, 0, s.get()>>>(256, 1.0F, x.get()); });
    EXPECT_EQ(branch.bodies[0].node_count(), 1U);
    auto exec = conveyor::instantiate(parent);
    exec.launch(s);
    s.synchronize();
  }
  // Nothing ran but the body's add: the escaping kernel (it doubles x) never did.
  const auto after = x.download();
  for (std::size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], start[i] + 1.0F) << i;
  const conveyor::graph ok = conveyor::capture(s, [&] { k::add_scalar<<<1, 256, 0, s.get()>>>(256, 1.0F, x.get()); });
  EXPECT_EQ(ok.node_count(), 1U);
}

TEST(Soundness, WithTheCheckOffAnEscapeRunsOnceAndIsMissingFromTheGraph) {
  CONVEYOR_REQUIRE_GPU();
  device_array<float> x(random_floats(256, 30));
  conveyor::stream s;
  conveyor::capture_options off;
  off.catch_default_streams = false;
  const conveyor::graph escaped = conveyor::capture(
      s, [&] { forgetful{x.get()}(s, 2.0F); }, off);
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(escaped.node_count(), 1U);
}

// ---- 5. a buffer freed and reallocated at another size between calls ---------------------------------------------

// Fails the test and ends the program when `body` takes longer than `limit` (a hang must not stall the suite).
template <class F>
void within(std::chrono::seconds limit, const char* what, F body) {
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!done.load()) {
      std::fprintf(stderr, "%s: no result after %lld s: hung\n", what, static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::_Exit(3);
    }
  });
  body();
  done.store(true);
  watchdog.join();
}

// Uses `p` at offsets: a memset of its second half, a copy of its first quarter into its third, a kernel on it.
void at_offsets(const conveyor::stream& s, float* p, int n) {
  CONVEYOR_CHECK(cudaMemsetAsync(p + n / 2, 0, sizeof(float) * (n / 2), s.get()));
  CONVEYOR_CHECK(cudaMemcpyAsync(p + n / 2, p, sizeof(float) * (n / 4), cudaMemcpyDeviceToDevice, s.get()));
  k::add_scalar<<<blocks(n), 256, 0, s.get()>>>(n - 1, 1.0F, p + 1);
  conveyor::check_launch("at_offsets");
}

// The size as an integer argument (a shape: one graph per size), or as a batch_size padded to buckets (the real
// size a binding: one graph per bucket, re-captured and updated as the size changes).
void at_offsets_padded(const conveyor::stream& s, float* p, conveyor::batch_size n) {
  at_offsets(s, p, static_cast<int>(n.real));
}

std::vector<float> realloc_run(const conveyor::graphed_options& options, bool stream_ordered, bool padded) {
  conveyor::stream s;
  conveyor::graphed_options o = options;
  if (padded) o.buckets = {1024, 8192};
  conveyor::graphed with_size(at_offsets, o);
  conveyor::graphed with_batch(at_offsets_padded, o);
  int n = 0;
  auto step = [&](float* p) {
    if (padded) with_batch(s, p, conveyor::batch_size{static_cast<std::size_t>(n)});
    else with_size(s, p, n);
  };
  std::vector<float> out;
  float* p = nullptr;
  const int sizes[] = {1024, 4096, 1024, 1024, 256, 8192, 4096, 4096, 256, 1024};
  for (int round = 0; round < 10; ++round) {
    if (p != nullptr) {
      if (stream_ordered) CONVEYOR_CHECK(cudaFreeAsync(p, s.get()));
      else {
        s.synchronize();
        CONVEYOR_CHECK(cudaFree(p));
      }
    }
    n = sizes[round];
    const auto init = random_floats(static_cast<std::size_t>(n), 40U + static_cast<unsigned>(round));
    if (stream_ordered) CONVEYOR_CHECK(cudaMallocAsync(&p, sizeof(float) * n, s.get()));
    else CONVEYOR_CHECK(cudaMalloc(&p, sizeof(float) * n));
    CONVEYOR_CHECK(cudaMemcpyAsync(p, init.data(), sizeof(float) * n, cudaMemcpyHostToDevice, s.get()));
    for (int call = 0; call < 3; ++call) step(p);
    std::vector<float> host(static_cast<std::size_t>(n));
    CONVEYOR_CHECK(cudaMemcpyAsync(host.data(), p, sizeof(float) * n, cudaMemcpyDeviceToHost, s.get()));
    s.synchronize();
    out.insert(out.end(), host.begin(), host.end());
  }
  if (stream_ordered) CONVEYOR_CHECK(cudaFreeAsync(p, s.get()));
  else CONVEYOR_CHECK(cudaFree(p));
  s.synchronize();
  return out;
}

// Each allocator, with the size an integer argument and a padded batch_size, by default and declared learn.
void check_reallocated(bool stream_ordered, bool padded) {
  std::vector<float> want, got_default, got_learn;
  within(std::chrono::seconds(60), "reallocated buffer", [&] {
    want = realloc_run(eager, stream_ordered, padded);
    got_default = realloc_run({.warmup_calls = 0}, stream_ordered, padded);
    got_learn = realloc_run({.warmup_calls = 0, .rebind = conveyor::rebind_policy::learn}, stream_ordered, padded);
  });
  EXPECT_TRUE(same_bits(got_default, want));
  EXPECT_TRUE(same_bits(got_learn, want));
}

TEST(Soundness, ABufferReallocatedWithCudaMallocAtAnotherSizeNeverHangsAndMatchesEager) {
  CONVEYOR_REQUIRE_GPU();
  check_reallocated(false, false);
}

TEST(Soundness, ABufferReallocatedWithCudaMallocAtAnotherPaddedSizeNeverHangsAndMatchesEager) {
  CONVEYOR_REQUIRE_GPU();
  check_reallocated(false, true);
}

TEST(Soundness, ABufferReallocatedWithCudaMallocAsyncAtAnotherSizeNeverHangsAndMatchesEager) {
  CONVEYOR_REQUIRE_GPU();
  check_reallocated(true, false);
}

TEST(Soundness, ABufferReallocatedWithCudaMallocAsyncAtAnotherPaddedSizeNeverHangsAndMatchesEager) {
  CONVEYOR_REQUIRE_GPU();
  check_reallocated(true, true);
}

// ---- 8. CUDA's bare refusals get the rule, the node and the fix --------------------------------------------------

TEST(Soundness, CudasRulesForAllocationGraphsAreNamed) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graph g;
  const conveyor::allocation a = g.mem_alloc(4096);
  const auto fill = g.memset({a.node}, static_cast<unsigned char*>(a.pointer), 0, 4096);
  (void)g.mem_free({fill}, a.pointer);
  const auto first = conveyor::instantiate(g);
  try {
    (void)conveyor::instantiate(g);
    FAIL() << "a second executable graph of an allocation graph was made";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_TRUE(has(e.what(), "only one executable graph at a time")) << e.what();
    EXPECT_TRUE(has(e.what(), "node 0")) << e.what();
  }
  try {
    (void)g.clone();
    FAIL() << "an allocation graph was cloned";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_TRUE(has(e.what(), "cannot clone a graph that holds memory allocation")) << e.what();
  }
  // A body that allocates (what a library's workspace allocation captures into) is refused at capture.
  conveyor::graph parent;
  const auto cond = conveyor::make_condition(parent, 1, conveyor::condition_reset::each_launch);
  auto branch = conveyor::add_conditional(parent, {}, conveyor::conditional_kind::if_then, cond);
  conveyor::stream s;
  try {
    (void)conveyor::capture_into(branch.bodies[0], s, [&] {
      void* scratch = nullptr;
      CONVEYOR_CHECK(cudaMallocAsync(&scratch, 1024, s.get()));
      CONVEYOR_CHECK(cudaFreeAsync(scratch, s.get()));
    });
    FAIL() << "an allocation inside a conditional body was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(has(e.what(), "conditional node's body")) << e.what();
    EXPECT_TRUE(has(e.what(), "preallocated workspace")) << e.what();
  }
}

} // namespace
