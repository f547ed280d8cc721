// GPU tests of what executable graphs keep alive, and for how long: resources that queued launches use survive the
// destruction, whole-graph update, per-node update, set_host and re-instantiation of the executable graph that
// launched them (without waiting), are released once those launches have finished, and stay bounded over many
// updates; a failed re-instantiation leaves the executable graph working; threads capturing and updating their own
// graphs concurrently get correct results. Each test skips without a CUDA device.

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"

#include <conveyor/conveyor.hpp>

#include "cuda/lifetime.hpp"           // defer_release, fence: the release queue at exit
#include "execute/graph_exec_impl.hpp" // exec_access: the definitions an update retired

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using conveyor::test::all_equal;
using conveyor::test::all_near;
using conveyor::test::contains;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::gate;
using conveyor::test::pinned_array;
using conveyor::test::random_floats;
using conveyor::test::sync_device;
using namespace conveyor::test::kernels;

namespace {

// State a host callable captures: 4 KiB of values, counted while alive and poisoned (NaN) when destroyed, so that a
// callable running on freed state reports NaN (and the memory checkers see the access).
struct tracked_state {
  static std::atomic<int> live;
  std::vector<float> values;
  explicit tracked_state(unsigned seed) : values(random_floats(1024, seed)) { live.fetch_add(1); }
  tracked_state(const tracked_state&) = delete;
  tracked_state& operator=(const tracked_state&) = delete;
  ~tracked_state() {
    std::fill(values.begin(), values.end(), std::nanf(""));
    live.fetch_sub(1);
  }
  [[nodiscard]] double checksum() const { return std::accumulate(values.begin(), values.end(), 0.0); }
};
std::atomic<int> tracked_state::live{0};

// A host callable that writes its state's checksum to `out` (pinned memory) each time it runs.
auto writes_checksum(std::shared_ptr<tracked_state> state, double* out) {
  return [state = std::move(state), out] { *out = state->checksum(); };
}

// Releases what finished launches no longer use, until `live` is at most `most` or two seconds pass (CUDA hands
// released resources over from its own thread, a little after the launch finished). Returns the last count.
int settle(int most) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int now = tracked_state::live.load();
  while (now > most && std::chrono::steady_clock::now() < until) {
    (void)conveyor::reclaim_resources();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    now = tracked_state::live.load();
  }
  return now;
}

// Resident memory of this process, in bytes (/proc/self/statm).
std::size_t resident_bytes() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

class Lifetime : public ::testing::Test {
protected:
  void SetUp() override {
    CONVEYOR_REQUIRE_GPU();
    ASSERT_EQ(settle(0), 0) << "state of an earlier test is still alive";
  }
  void TearDown() override {
    if (conveyor::has_device()) EXPECT_EQ(settle(0), 0) << "the test leaked host-callable state";
  }
};

} // namespace

// reclaim_resources() is the one point at which every resource of finished launches is gone: a host callable's
// state handed over by a whole-graph update (released by CUDA from its own thread, some time after the launch) is
// destroyed exactly once by it, every round, with no polling.
TEST_F(Lifetime, ReclaimResourcesDestroysWhatWholeGraphUpdatesHandedOverExactlyOnce) {
  pinned_array<double> out(2);
  conveyor::stream s;
  for (int round = 0; round < 50; ++round) {
    auto a = std::make_shared<tracked_state>(300 + round);
    auto b = std::make_shared<tracked_state>(400 + round);
    const double want = b->checksum();
    {
      conveyor::graph g1;
      g1.host(writes_checksum(std::move(a), out.get()));
      auto exec = conveyor::instantiate(g1);
      exec.launch(s);
      conveyor::graph g2;
      g2.host(writes_checksum(std::move(b), out.get() + 1));
      const auto r = exec.update(g2);
      ASSERT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
      exec.launch(s);
    } // graphs and executable graph destroyed while the launches may still run
    s.synchronize();
    ASSERT_EQ(conveyor::reclaim_resources(), 0U) << "round " << round;
    ASSERT_EQ(tracked_state::live.load(), 0) << "round " << round << ": state alive after reclaim_resources()";
    ASSERT_EQ(out[1], want) << "round " << round;
  }
}

// An update checks without a lock whether the new graph holds resources to tie to it (every update and instantiation
// asks): a graph that held none at one update and keeps one later (keep_alive) has it tied at the next update, so
// that the executable graph keeps it after the graph and the user let go.
TEST_F(Lifetime, AResourceKeptAfterAnUpdateIsTiedToTheExecutableGraphAtTheNextUpdate) {
  const int n = 256;
  device_array<float> x(random_floats(n, 8101));
  conveyor::stream s;
  conveyor::graph g1;
  g1.kernel(cover(n), scale, n, 2.0F, x.get());
  auto exec = conveyor::instantiate(g1);
  std::weak_ptr<tracked_state> watched;
  {
    conveyor::graph g2;
    g2.kernel(cover(n), scale, n, 3.0F, x.get());
    auto r = exec.update(g2); // nothing to tie: the lock-free check returns
    ASSERT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
    auto kept = std::make_shared<tracked_state>(8102);
    watched = kept;
    g2.keep_alive(std::move(kept));
    r = exec.update(g2);
    ASSERT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
    exec.launch(s);
  } // g2 and the user's reference gone
  s.synchronize();
  (void)conveyor::reclaim_resources();
  EXPECT_FALSE(watched.expired()) << "the executable graph updated to g2 let its kept resource go with g2";
  exec.reset();
  EXPECT_EQ(settle(0), 0) << "the resource outlived the executable graph that held it";
}

// A graph definition an update replaced is destroyed behind the next launch (while the GPU runs it), not inside the
// update (destroying a graph of N nodes costs about as much as updating to it); what it held for launches (the state
// of a host callable the user let go) is released at the update as before, and the launch runs the new graph.
TEST_F(Lifetime, AGraphAnUpdateReplacedIsDestroyedBehindTheNextLaunch) {
  pinned_array<double> out(3);
  out[2] = 0.0;
  conveyor::stream s;
  auto c = std::make_shared<tracked_state>(503);
  const double want = c->checksum();
  conveyor::graph g1;
  g1.host(writes_checksum(std::make_shared<tracked_state>(501), out.get()));
  auto exec = conveyor::instantiate(g1);
  {
    conveyor::graph g2;
    g2.host(writes_checksum(std::make_shared<tracked_state>(502), out.get() + 1));
    ASSERT_EQ(exec.update(g2).method, conveyor::update_method::whole_graph);
  } // g2's definition is now held by the executable graph alone, as the graph it runs
  conveyor::graph g3;
  g3.host(writes_checksum(std::move(c), out.get() + 2));
  const auto r = exec.update(g3);
  ASSERT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
  const auto& state = conveyor::detail::exec_access::state(exec);
  ASSERT_EQ(state.retired.size(), 1U) << "the update destroyed the graph it replaced itself";
  const std::weak_ptr<conveyor::detail::graph_state> replaced = state.retired.front();
  s.synchronize();
  EXPECT_EQ(settle(2), 2) << "the retired definition kept its host callable's state alive";
  exec.launch(s);
  EXPECT_TRUE(replaced.expired()) << "the replaced graph outlived the next launch";
  EXPECT_TRUE(state.retired.empty());
  s.synchronize();
  EXPECT_EQ(out[2], want);
}

TEST_F(Lifetime, DestroyedExecutableGraphKeepsWhatItsQueuedLaunchUses) {
  pinned_array<double> out(1);
  out[0] = 0.0;
  auto state = std::make_shared<tracked_state>(101);
  const double want = state->checksum();
  conveyor::stream s;
  gate held;
  {
    conveyor::graph g;
    g.host(writes_checksum(std::move(state), out.get()));
    auto exec = conveyor::instantiate(g);
    held.hold(s);
    exec.launch(s);
  } // the graph and the executable graph are destroyed while the launch is still queued
  EXPECT_EQ(cudaStreamQuery(s.get()), cudaErrorNotReady) << "the destructor waited for the launch";
  (void)cudaGetLastError();
  (void)conveyor::reclaim_resources(std::chrono::milliseconds(0)); // launches still queued: no wait
  EXPECT_EQ(tracked_state::live.load(), 1) << "the queued launch's callable state was destroyed";
  held.open();
  s.synchronize();
  EXPECT_EQ(out[0], want) << "the host node ran on destroyed state";
  EXPECT_EQ(settle(0), 0) << "the state outlived the launch that used it";
}

TEST_F(Lifetime, WholeGraphUpdateKeepsTheOldCallableForQueuedLaunches) {
  pinned_array<double> out(2);
  out[0] = out[1] = 0.0;
  auto a = std::make_shared<tracked_state>(201);
  auto b = std::make_shared<tracked_state>(202);
  const double want_a = a->checksum(), want_b = b->checksum();
  conveyor::stream s;
  gate held;
  std::optional<conveyor::graph_exec> exec;
  {
    conveyor::graph g1;
    g1.host(writes_checksum(std::move(a), out.get()));
    exec.emplace(conveyor::instantiate(g1));
    held.hold(s);
    exec->launch(s); // runs a's callable, queued
    conveyor::graph g2;
    g2.host(writes_checksum(std::move(b), out.get() + 1));
    const auto r = exec->update(g2);
    ASSERT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
    exec->launch(s);                                               // runs b's callable, queued
  }                                                                // both graphs destroyed
  (void)conveyor::reclaim_resources(std::chrono::milliseconds(0)); // launches still queued: no wait
  EXPECT_EQ(tracked_state::live.load(), 2);
  held.open();
  s.synchronize();
  EXPECT_EQ(out[0], want_a);
  EXPECT_EQ(out[1], want_b);
  EXPECT_EQ(settle(1), 1) << "a's state must be released once its launch finished; b's is still in use";
  exec.reset();
  EXPECT_EQ(settle(0), 0);
}

TEST_F(Lifetime, PerNodeUpdateOfAHostNodeKeepsTheOldCallableForQueuedLaunches) {
  pinned_array<double> out(2);
  out[0] = out[1] = 0.0;
  device_array<float> x(random_floats(256, 301));
  sync_device();
  auto a = std::make_shared<tracked_state>(302);
  auto b = std::make_shared<tracked_state>(303);
  const double want_a = a->checksum(), want_b = b->checksum();
  conveyor::stream s;
  gate held;
  auto build = [&](std::shared_ptr<tracked_state> st, double* slot) {
    conveyor::graph g;
    auto k = g.kernel(cover(256), scale, 256, 1.0F, x.get());
    g.host({k}, writes_checksum(std::move(st), slot));
    return g;
  };
  std::optional<conveyor::graph_exec> exec;
  {
    conveyor::graph g1 = build(std::move(a), out.get());
    exec.emplace(conveyor::instantiate(g1));
    held.hold(s);
    exec->launch(s);
    conveyor::graph g2 = build(std::move(b), out.get() + 1);
    const auto r = exec->update_incremental(g2);
    ASSERT_EQ(r.method, conveyor::update_method::per_node) << r.reason();
    EXPECT_EQ(r.nodes_set, 1U) << r.reason();
    exec->launch(s);
  }
  (void)conveyor::reclaim_resources(std::chrono::milliseconds(0)); // launches still queued: no wait
  EXPECT_EQ(tracked_state::live.load(), 2);
  held.open();
  s.synchronize();
  EXPECT_EQ(out[0], want_a);
  EXPECT_EQ(out[1], want_b);
  // Bounded: the resources of the graph it was instantiated from (CUDA holds them until a whole-graph update or the
  // executable graph's end) and those of the node set by the update.
  EXPECT_EQ(settle(2), 2);
  exec.reset();
  EXPECT_EQ(settle(0), 0);
}

// Every update path keeps what a graph applied node by node holds for the launches queued while it was current, as a
// whole-graph update does (issue 39, item 5). Here the buffer the first graph reads is kept by it (keep_alive) with a
// deleter that does not synchronise: it hands the buffer back to a pool, whose next user overwrites it on another
// stream at once. The replay must read what the eager kernel reads: the buffer's values, not the next user's.
TEST_F(Lifetime, AGraphAppliedNodeByNodeKeepsItsBuffersForTheLaunchesQueuedWhileItWasCurrent) {
  const int n = 4096;
  const std::vector<float> b0 = random_floats(n, 311);
  device_array<float> a(random_floats(n, 312)), out1(n), out2(n), eager(n);
  struct buffer_pool { // buffers handed back, for the next user; shared with the deleter, which may run late
    std::mutex mutex;
    std::vector<float*> free;
    std::atomic<bool> opened{false};
    std::atomic<int> released_while_queued{0};
  };
  auto pool = std::make_shared<buffer_pool>();
  float* raw = nullptr;
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&raw), n * sizeof(float)));
  CONVEYOR_CHECK(cudaMemcpy(raw, b0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  copy_plus<<<cover(n).grid, cover(n).block>>>(n, raw, 1.0F, eager.get()); // eager: the same kernel, same buffer
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  conveyor::stream s, side;
  gate held;
  auto build = [&](const float* in, float b, float* out) {
    conveyor::graph g;
    (void)g.kernel(cover(n), copy_plus, n, in, b, out);
    return g;
  };
  auto exec = conveyor::instantiate(build(a.get(), 0.5F, out2.get()));
  {
    conveyor::graph g1 = build(raw, 1.0F, out1.get());
    g1.keep_alive(std::shared_ptr<float>(raw, [pool](float* p) {
      if (!pool->opened.load()) pool->released_while_queued.fetch_add(1);
      const std::lock_guard lock(pool->mutex);
      pool->free.push_back(p);
    }));
    const auto r = exec.update_incremental(g1);
    ASSERT_EQ(r.method, conveyor::update_method::per_node) << r.reason();
    held.hold(s);
    exec.launch(s); // waits behind the gate, then reads the buffer g1 keeps
  }                 // the caller lets g1 go
  const auto r2 = exec.update_incremental(build(a.get(), 2.0F, out2.get()));
  ASSERT_EQ(r2.method, conveyor::update_method::per_node) << r2.reason();
  exec.launch(s);
  (void)conveyor::reclaim_resources(std::chrono::milliseconds(0));
  {
    const std::lock_guard lock(pool->mutex); // the pool's next user overwrites what it was handed, at once
    for (float* p : pool->free) CONVEYOR_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), side.get()));
  }
  side.synchronize();
  pool->opened = true;
  held.open();
  s.synchronize();
  EXPECT_EQ(pool->released_while_queued.load(), 0) << "the buffer went back to the pool while a launch using it was "
                                                      "queued";
  EXPECT_TRUE(all_equal(out1.download(), eager.download())) << "the replay read the buffer's next user's values";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  auto released = [&] {
    const std::lock_guard lock(pool->mutex);
    return pool->free.size();
  };
  while (released() == 0 && std::chrono::steady_clock::now() < until) (void)conveyor::reclaim_resources();
  EXPECT_EQ(released(), 1U) << "the buffer was not released once its launches had finished";
  exec.reset();
  (void)conveyor::reclaim_resources();
  CONVEYOR_CHECK(cudaFree(raw));
}

TEST_F(Lifetime, SetHostReleasesTheReplacedCallableOnlyAfterQueuedLaunches) {
  pinned_array<double> out(3);
  out[0] = out[1] = out[2] = 0.0;
  auto a = std::make_shared<tracked_state>(401);
  auto b = std::make_shared<tracked_state>(402);
  auto c = std::make_shared<tracked_state>(403);
  const double want_a = a->checksum(), want_b = b->checksum(), want_c = c->checksum();
  conveyor::stream s;
  gate held;
  conveyor::graph g;
  auto h = g.host(writes_checksum(std::move(a), out.get()));
  auto exec = conveyor::instantiate(g);
  held.hold(s);
  exec.launch(s);                                                  // a
  exec.set_host(h, writes_checksum(std::move(b), out.get() + 1));  // b replaces the graph's callable
  exec.launch(s);                                                  // b
  exec.set_host(h, writes_checksum(std::move(c), out.get() + 2));  // c replaces b, whose launch is still queued
  exec.launch(s);                                                  // c
  (void)conveyor::reclaim_resources(std::chrono::milliseconds(0)); // launches still queued: no wait
  EXPECT_EQ(tracked_state::live.load(), 3) << "a callable a queued launch uses was released";
  held.open();
  s.synchronize();
  EXPECT_EQ(out[0], want_a);
  EXPECT_EQ(out[1], want_b);
  EXPECT_EQ(out[2], want_c);
  EXPECT_EQ(settle(2), 2) << "b must be released after its launch; a (the graph's) and c (installed) stay";
  // Many replacements without synchronising: what is kept stays bounded by what queued launches can use.
  for (int i = 0; i < 2000; ++i) {
    exec.set_host(h, writes_checksum(std::make_shared<tracked_state>(500 + i), out.get() + 2));
    exec.launch(s);
  }
  s.synchronize();
  EXPECT_LE(settle(2), 2);
}

TEST_F(Lifetime, ReinstantiationKeepsWhatTheOldExecutableGraphsQueuedLaunchUses) {
  pinned_array<double> out(2);
  out[0] = out[1] = 0.0;
  auto a = std::make_shared<tracked_state>(601);
  auto b = std::make_shared<tracked_state>(602);
  const double want_a = a->checksum(), want_b = b->checksum();
  conveyor::stream s;
  gate held;
  std::optional<conveyor::graph_exec> exec;
  {
    conveyor::graph g1;
    g1.host(writes_checksum(std::move(a), out.get()));
    exec.emplace(conveyor::instantiate(g1));
    held.hold(s);
    exec->launch(s);
    conveyor::graph g2; // another topology: two nodes
    auto first = g2.empty();
    g2.host({first}, writes_checksum(std::move(b), out.get() + 1));
    const auto r = exec->update_or_reinstantiate(g2);
    ASSERT_TRUE(r.reinstantiated()) << r.reason();
    exec->launch(s);
  }
  (void)conveyor::reclaim_resources(std::chrono::milliseconds(0)); // launches still queued: no wait
  EXPECT_EQ(tracked_state::live.load(), 2);
  held.open();
  s.synchronize();
  EXPECT_EQ(out[0], want_a);
  EXPECT_EQ(out[1], want_b);
  EXPECT_EQ(settle(1), 1);
  exec.reset();
  EXPECT_EQ(settle(0), 0);
}

TEST_F(Lifetime, FailedReinstantiationLeavesTheExecutableGraphWorking) {
  pinned_array<double> out(1);
  auto a = std::make_shared<tracked_state>(701);
  const double want = a->checksum();
  conveyor::graph g1;
  g1.host(writes_checksum(std::move(a), out.get()));
  auto exec = conveyor::instantiate(g1);
  // Another topology (update refused) that cannot be instantiated: a condition no conditional node uses.
  conveyor::graph g2;
  auto e = g2.empty();
  g2.empty({e});
  (void)conveyor::make_condition(g2, 0, conveyor::condition_reset::each_launch);
  const auto handle_before = exec.get();
  EXPECT_THROW((void)exec.update_or_reinstantiate(g2), conveyor::cuda_error);
  EXPECT_THROW((void)exec.update_incremental(g2), conveyor::cuda_error);
  EXPECT_EQ(exec.get(), handle_before) << "a failed instantiation replaced the executable graph";
  (void)conveyor::reclaim_resources(std::chrono::milliseconds(0)); // launches still queued: no wait
  EXPECT_EQ(tracked_state::live.load(), 1) << "the executable graph's resources were released by the failure";
  conveyor::stream s;
  out[0] = 0.0;
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(out[0], want) << "the executable graph no longer runs its own callable intact";
}

// The seed's update loop: each step rebuilds the definition (a kernel whose pointer alternates, a host callable
// holding 4 KiB) and updates the executable graph as a whole. What it keeps must stay bounded; the full
// 1,000,000-step run with times is `conveyor bench --update-growth` (docs/benchmarks.md).
TEST_F(Lifetime, MemoryStaysBoundedOverManyWholeGraphUpdates) {
  const int n = 256;
  const int steps = 20'000;
  device_array<float> x0(random_floats(n, 801)), x1(random_floats(n, 802));
  sync_device();
  pinned_array<double> out(1);
  std::atomic<long> runs{0};
  conveyor::stream s;
  auto build = [&](int step) {
    conveyor::graph g;
    auto k = g.kernel(cover(n), scale, n, 1.0F, step % 2 == 0 ? x0.get() : x1.get());
    auto st = std::make_shared<tracked_state>(900 + static_cast<unsigned>(step % 7));
    g.host({k}, [st, &runs, p = out.get()] {
      *p = st->checksum();
      runs.fetch_add(1);
    });
    return g;
  };
  auto exec = conveyor::instantiate(build(0));
  std::size_t rss_early = 0;
  for (int step = 1; step <= steps; ++step) {
    const auto r = exec.update(build(step));
    ASSERT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
    exec.launch(s);
    if (step % 2000 == 0) {
      s.synchronize();
      EXPECT_LE(settle(1), 1) << "after " << step << " updates more callable states are alive than launches use";
      if (step == 2000) rss_early = resident_bytes();
    }
  }
  s.synchronize();
  EXPECT_EQ(runs.load(), steps);
  const std::size_t rss_late = resident_bytes();
  // Before the fix every applied graph was kept: +4.3 KiB a step, 77 MB over these 18,000 steps.
  EXPECT_LT(rss_late, rss_early + (16U << 20)) << "resident memory grew from " << rss_early << " to " << rss_late;
}

// N threads, each with its own stream, buffers and graphs, capture (thread-local mode, with a forked stream),
// update incrementally and launch at once. Every result must match the host reference. (Buffers are made before the
// threads start: cudaDeviceSynchronize, which the test buffers use, is refused while any stream captures.)
TEST(ThreadSafety, ThreadsCaptureAndUpdateTheirOwnGraphsConcurrently) {
  CONVEYOR_REQUIRE_GPU();
  const int threads = 8;
  const int iterations = 40;
  const int n = 4096;
  struct lane {
    std::vector<float> x0;
    device_array<float> x, y, z;
    explicit lane(unsigned seed) : x0(random_floats(n, seed)), x(x0), y(n), z(n) {}
  };
  std::vector<std::unique_ptr<lane>> lanes;
  for (int t = 0; t < threads; ++t) lanes.push_back(std::make_unique<lane>(1000 + static_cast<unsigned>(t)));
  sync_device();
  std::vector<std::string> failures(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        lane& l = *lanes[t];
        conveyor::stream s, side;
        std::optional<conveyor::graph_exec> exec;
        std::vector<float> got(n);
        for (int i = 0; i < iterations; ++i) {
          const float a = 0.5F + static_cast<float>(i % 5), b = static_cast<float>(t) - static_cast<float>(i % 3);
          // y = x + b; z = a x (on the side stream); y = y + z
          conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
            copy_plus<<<(n + 255) / 256, 256, 0, cs.get()>>>(n, l.x.get(), b, l.y.get());
            conveyor::fork(cs, side);
            CONVEYOR_CHECK(cudaMemcpyAsync(l.z.get(), l.x.get(), l.z.bytes(), cudaMemcpyDeviceToDevice, side.get()));
            scale<<<(n + 255) / 256, 256, 0, side.get()>>>(n, a, l.z.get());
            conveyor::join(cs, side);
            add_vectors<<<(n + 255) / 256, 256, 0, cs.get()>>>(n, l.y.get(), l.z.get(), l.y.get());
          });
          if (!exec) exec.emplace(conveyor::instantiate(g));
          else if (const auto r = exec->update_incremental(g); !r)
            throw std::runtime_error("update refused: " + r.reason());
          exec->launch(s);
          CONVEYOR_CHECK(cudaMemcpyAsync(got.data(), l.y.get(), l.y.bytes(), cudaMemcpyDeviceToHost, s.get()));
          s.synchronize();
          std::vector<float> want(n);
          for (int k = 0; k < n; ++k) want[k] = (l.x0[k] + b) + a * l.x0[k];
          if (auto ok = all_near(got, want, 1e-6F); !ok) throw std::runtime_error(ok.message());
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

// At exit, the release queue waits for the launches that still use what it holds, but not without a bound: with
// CONVEYOR_EXIT_WAIT_S=0.2, a launch that runs for seconds leaves its item unreleased, and stderr says so. (A
// "threadsafe" death test: the child re-runs this program, so CUDA starts afresh there.)
// The child's body: a launch that runs for seconds, an item released behind it, then exit.
[[noreturn]] void exit_while_a_launch_runs() {
  setenv("CONVEYOR_EXIT_WAIT_S", "0.2", 1);
  const conveyor::stream s;
  conveyor::test::device_array<float> x(256);
  // About 2 s of spinning at ~2 GHz, then a scale: the item is still in use when exit begins.
  conveyor::test::kernels::spin_then_scale<<<1, 256, 0, s.get()>>>(256, 2.0f, x.get(), 4'000'000'000LL);
  conveyor::detail::defer_release(std::make_shared<int>(7), conveyor::detail::fence::record(s.get()));
  std::exit(0);
}

TEST(ReleaseAtExit, WaitsForUnfinishedLaunchesWithABoundAndSaysWhatWasLeft) {
  CONVEYOR_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exit_while_a_launch_runs(), ::testing::ExitedWithCode(0),
              "at exit, 1 resource\\(s\\) of executable graphs were still in use .* not finished after 0.2 s");
}
