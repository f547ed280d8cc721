// GPU tests of nodes added to a capture in progress (conveyor/define/capture_nodes.hpp): a host callable between
// captured copies runs in order at every replay and is owned by the graph (alive while an executable graph is, gone
// after), also in a capture begun with the CUDA API itself and inside a graphed callable; a kernel with typed
// arguments returns its node, wired between its neighbours, and computes what eager launches compute (bitwise); IF,
// IF/ELSE, SWITCH and WHILE nodes (a nested IF in a captured WHILE body) added and their bodies captured within one
// capture, checked against the host on device inputs; refusals: a stream not capturing, a condition of another graph,
// a host node in a body, a conditional node in a capture Conveyor did not begin. Each test skips without a device.
#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"

#include <conveyor/conveyor.hpp>
#include <conveyor/define/capture_nodes.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using conveyor::conditional_kind;
using conveyor::test::all_equal;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::pinned_array;
using conveyor::test::random_floats;
using conveyor::test::sync_device;
using namespace conveyor::test::kernels;

const conveyor::launch_config one_thread{dim3(1), dim3(1)};

__global__ void store(int* out, int value) { *out = value; }
__global__ void add_one(int* out) { *out += 1; }
__global__ void twice_into(const int* in, int* out) { *out = 2 * *in; }
__global__ void set_from_value(cudaGraphConditionalHandle h, const int* value) {
  conveyor::set_condition(h, static_cast<unsigned>(*value));
}
__global__ void set_if_even(cudaGraphConditionalHandle h, const int* counter) {
  conveyor::set_condition(h, (*counter % 2 == 0) ? 1U : 0U);
}

#define REQUIRE_CONDITIONAL(kind)                                                                                      \
  do {                                                                                                                 \
    int driver_ = 0;                                                                                                   \
    CONVEYOR_CHECK(cudaDriverGetVersion(&driver_));                                                                    \
    if (driver_ < conveyor::required_cuda_version(kind))                                                               \
      GTEST_SKIP() << "the driver supports CUDA " << driver_ << "; this conditional kind needs "                       \
                   << conveyor::required_cuda_version(kind);                                                           \
  } while (0)

int read_one(const device_array<int>& a) { return a.download().at(0); }
void write_one(device_array<int>& a, int v) { a.upload(std::vector<int>{v}); }

// Releases what finished launches no longer use until `watch` has expired or two seconds pass (CUDA hands user-object
// payloads over from its own thread, a little after the last reference went). True when it expired.
bool released(const std::weak_ptr<int>& watch) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!watch.expired() && std::chrono::steady_clock::now() < until) {
    (void)conveyor::reclaim_resources(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return watch.expired();
}

// ---- host callables ------------------------------------------------------------------------------------------------

// One step: count up on the device, copy the count to the host, a host callable scales it by 10 (and logs it), copy
// it back, then add 1 on the device. Captured, the callable is a host node between the two copies; eagerly, the host
// waits for the first copy and runs the same callable.
struct host_step {
  device_array<int> counter{1};
  device_array<int> result{1};
  pinned_array<int> seen{1};
  pinned_array<int> scaled{1};
  std::shared_ptr<std::vector<int>> log = std::make_shared<std::vector<int>>();

  auto callable() {
    return [log = log, in = seen.get(), out = scaled.get()] {
      log->push_back(*in);
      *out = *in * 10;
    };
  }
  void enqueue_before(const conveyor::stream& s) {
    add_one<<<1, 1, 0, s.get()>>>(counter.get());
    conveyor::check_launch("add_one");
    CONVEYOR_CHECK(cudaMemcpyAsync(seen.get(), counter.get(), sizeof(int), cudaMemcpyDeviceToHost, s.get()));
  }
  void enqueue_after(const conveyor::stream& s) {
    CONVEYOR_CHECK(cudaMemcpyAsync(result.get(), scaled.get(), sizeof(int), cudaMemcpyHostToDevice, s.get()));
    add_one<<<1, 1, 0, s.get()>>>(result.get());
    conveyor::check_launch("add_one");
  }
};

TEST(CaptureNodes, HostCallableRunsBetweenCapturedCopiesAtEveryReplay) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  host_step captured;
  host_step eager;
  write_one(captured.counter, 0);
  write_one(eager.counter, 0);
  conveyor::node host;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    captured.enqueue_before(cs);
    host = conveyor::capture_host(cs, captured.callable());
    captured.enqueue_after(cs);
  });
  EXPECT_TRUE(g.owns(host));
  EXPECT_EQ(host.kind(), conveyor::node_kind::host);
  EXPECT_EQ(g.node_count(), 5U);
  const auto before = host.dependencies();
  const auto after = host.dependents();
  ASSERT_EQ(before.size(), 1U);
  ASSERT_EQ(after.size(), 1U);
  EXPECT_EQ(before[0].kind(), conveyor::node_kind::memcpy);
  EXPECT_EQ(after[0].kind(), conveyor::node_kind::memcpy);
  EXPECT_TRUE(captured.log->empty()); // nothing ran at capture

  auto exec = conveyor::instantiate(g);
  const auto step = eager.callable();
  for (int k = 1; k <= 5; ++k) {
    exec.launch(s);
    s.synchronize();
    eager.enqueue_before(s);
    s.synchronize();
    step();
    eager.enqueue_after(s);
    s.synchronize();
    EXPECT_EQ(read_one(captured.result), 10 * k + 1) << "replay " << k;
    EXPECT_EQ(read_one(captured.result), read_one(eager.result)) << "replay " << k;
  }
  EXPECT_EQ(*captured.log, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(*captured.log, *eager.log);
}

TEST(CaptureNodes, TheGraphOwnsTheCallableAsLongAsAnExecutableGraphLives) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  pinned_array<int> out(1);
  out[0] = 0;
  auto token = std::make_shared<int>(7);
  const std::weak_ptr<int> watch = token;
  std::optional<conveyor::graph_exec> exec;
  {
    conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
      (void)conveyor::capture_host(cs, [t = std::move(token), o = out.get()] { *o += *t; });
    });
    exec.emplace(conveyor::instantiate(g));
  } // the graph is gone; the executable graph keeps the callable
  EXPECT_FALSE(watch.expired());
  exec->launch(s);
  exec->launch(s);
  s.synchronize();
  EXPECT_EQ(out[0], 14);
  exec.reset();
  EXPECT_TRUE(released(watch)) << "the callable outlived every graph and executable graph";
}

TEST(CaptureNodes, HostCallableInACaptureBegunWithTheCudaApi) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  pinned_array<int> out(1);
  out[0] = 0;
  auto token = std::make_shared<int>(3);
  const std::weak_ptr<int> watch = token;
  CONVEYOR_CHECK(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal));
  conveyor::node host;
  try {
    host = conveyor::capture_host(s, [t = std::move(token), o = out.get()] { *o += *t; });
  } catch (...) {
    cudaGraph_t failed = nullptr;
    (void)cudaStreamEndCapture(s.get(), &failed);
    if (failed != nullptr) (void)cudaGraphDestroy(failed);
    throw;
  }
  EXPECT_EQ(host.graph_handle(), nullptr); // a graph Conveyor does not model
  cudaGraph_t raw = nullptr;
  CONVEYOR_CHECK(cudaStreamEndCapture(s.get(), &raw));
  ASSERT_NE(raw, nullptr);
  cudaGraphExec_t exec = nullptr;
  CONVEYOR_CHECK(cudaGraphInstantiate(&exec, raw, 0));
  CONVEYOR_CHECK(cudaGraphDestroy(raw));
  EXPECT_FALSE(watch.expired()); // the CUDA user object held by the executable graph
  CONVEYOR_CHECK(cudaGraphLaunch(exec, s.get()));
  s.synchronize();
  EXPECT_EQ(out[0], 3);
  CONVEYOR_CHECK(cudaGraphExecDestroy(exec));
  EXPECT_TRUE(released(watch));
}

TEST(CaptureNodes, HostCallableInsideAGraphedCallableRunsAtEveryReplay) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  pinned_array<int> calls(1);
  calls[0] = 0;
  device_array<int> value(1);
  write_one(value, 0);
  conveyor::graphed step([&](const conveyor::stream& cs, int* v) {
    add_one<<<1, 1, 0, cs.get()>>>(v);
    conveyor::check_launch("add_one");
    if (cs.is_capturing()) (void)conveyor::capture_host(cs, [c = calls.get()] { *c += 1; });
    else calls[0] += 1; // the eager warm-up: the stream is synchronised below before it is read
  });
  for (int k = 0; k < 6; ++k) step(s, value.get());
  s.synchronize();
  EXPECT_EQ(calls[0], 6);
  EXPECT_EQ(read_one(value), 6);
  EXPECT_EQ(step.statistics().warmups, 1U);
  EXPECT_EQ(step.statistics().captures, 1U);
  EXPECT_EQ(step.statistics().replays, 5U);
}

TEST(CaptureNodes, RefusedOnAStreamThatIsNotCapturing) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  try {
    (void)conveyor::capture_host(s, [] {});
    FAIL() << "a host node was added without a capture";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("the stream is not capturing"), std::string::npos) << e.what();
  }
  device_array<float> x(4);
  EXPECT_THROW((void)conveyor::capture_kernel(s, one_thread, scale, 4, 2.0F, x.get()), std::logic_error);
  REQUIRE_CONDITIONAL(conditional_kind::if_then);
  EXPECT_THROW((void)conveyor::capture_condition(s, 0, conveyor::condition_reset::each_launch), std::logic_error);
  conveyor::graph g;
  const auto c = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  EXPECT_THROW((void)conveyor::capture_conditional(s, conditional_kind::if_then, c), std::logic_error);
  EXPECT_EQ(g.node_count(), 0U);
}

// ---- typed kernels -------------------------------------------------------------------------------------------------

TEST(CaptureNodes, KernelWithTypedArgumentsReturnsItsNodeAndMatchesEager) {
  CONVEYOR_REQUIRE_GPU();
  constexpr int n = 1000;
  const auto x0 = random_floats(n, 11);
  const auto y0 = random_floats(n, 12);
  device_array<float> x(x0), y(y0), ex(x0), ey(y0);
  conveyor::stream s;
  const auto cfg = cover(n);
  const auto run = [&](const conveyor::stream& cs, float* xs, float* ys, bool typed) {
    scale<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 1.5F, xs);
    conveyor::check_launch("scale");
    conveyor::node mid;
    if (typed) mid = conveyor::capture_kernel(cs, cfg, axpy, n, -0.75F, xs, ys);
    else axpy<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, -0.75F, xs, ys);
    conveyor::check_launch("axpy");
    add_scalar<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 0.25F, ys);
    conveyor::check_launch("add_scalar");
    return mid;
  };
  conveyor::node mid;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) { mid = run(cs, x.get(), y.get(), true); });
  EXPECT_EQ(mid.kind(), conveyor::node_kind::kernel);
  EXPECT_EQ(mid.kernel_function(), reinterpret_cast<const void*>(&axpy));
  EXPECT_EQ(mid.kernel_config().grid.x, cfg.grid.x);
  ASSERT_EQ(mid.dependencies().size(), 1U);
  ASSERT_EQ(mid.dependents().size(), 1U);
  EXPECT_EQ(g.node_count(), 3U);
  EXPECT_EQ(g.edge_count(), 2U);
  auto exec = conveyor::instantiate(g);
  for (int k = 0; k < 3; ++k) {
    exec.launch(s);
    (void)run(s, ex.get(), ey.get(), false);
  }
  s.synchronize();
  EXPECT_TRUE(all_equal(x.download(), ex.download()));
  EXPECT_TRUE(all_equal(y.download(), ey.download()));
}

// ---- conditional nodes in one capture ------------------------------------------------------------------------------

TEST(CaptureNodes, WhileLoopAndItsBodyInOneCapture) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::while_loop);
  device_array<int> counter(1), limit(1), doubled(1);
  conveyor::stream s;
  conveyor::conditional_node loop;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    CONVEYOR_CHECK(cudaMemsetAsync(counter.get(), 0, sizeof(int), cs.get()));
    const auto c = conveyor::capture_condition(cs, 0, conveyor::condition_reset::each_launch);
    set_below_limit<<<1, 1, 0, cs.get()>>>(c.handle, counter.get(), limit.get());
    conveyor::check_launch("set_below_limit");
    loop = conveyor::capture_conditional(cs, conditional_kind::while_loop, c, [&](const conveyor::stream& body) {
      count_up<<<1, 1, 0, body.get()>>>(c.handle, counter.get(), limit.get());
      conveyor::check_launch("count_up");
    });
    twice_into<<<1, 1, 0, cs.get()>>>(counter.get(), doubled.get());
    conveyor::check_launch("twice_into");
  });
  EXPECT_EQ(g.node_count(), 4U); // memset, set_below_limit, the WHILE node, twice_into
  EXPECT_EQ(g.edge_count(), 3U);
  EXPECT_TRUE(g.owns(loop.node));
  EXPECT_EQ(loop.node.kind(), conveyor::node_kind::conditional);
  ASSERT_EQ(loop.bodies.size(), 1U);
  EXPECT_EQ(loop.bodies[0].node_count(), 1U);
  EXPECT_EQ(conveyor::statistics(conveyor::describe(g)).nested_nodes, 1U);
  auto exec = conveyor::instantiate(g);
  for (const int n : {5, 12, 1, 0, 40}) {
    write_one(limit, n);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(counter), n) << "limit " << n;
    EXPECT_EQ(read_one(doubled), 2 * n) << "limit " << n;
  }
}

TEST(CaptureNodes, NestedIfInsideACapturedWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::while_loop);
  device_array<int> counter(1), limit(1), evens(1);
  conveyor::stream s;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    CONVEYOR_CHECK(cudaMemsetAsync(counter.get(), 0, sizeof(int), cs.get()));
    CONVEYOR_CHECK(cudaMemsetAsync(evens.get(), 0, sizeof(int), cs.get()));
    const auto c = conveyor::capture_condition(cs, 0, conveyor::condition_reset::each_launch);
    set_below_limit<<<1, 1, 0, cs.get()>>>(c.handle, counter.get(), limit.get());
    conveyor::check_launch("set_below_limit");
    (void)conveyor::capture_conditional(cs, conditional_kind::while_loop, c, [&](const conveyor::stream& body) {
      count_up<<<1, 1, 0, body.get()>>>(c.handle, counter.get(), limit.get());
      conveyor::check_launch("count_up");
      const auto inner = conveyor::capture_condition(body, 0, conveyor::condition_reset::each_launch);
      set_if_even<<<1, 1, 0, body.get()>>>(inner.handle, counter.get());
      conveyor::check_launch("set_if_even");
      (void)conveyor::capture_conditional(body, conditional_kind::if_then, inner, [&](const conveyor::stream& b) {
        add_one<<<1, 1, 0, b.get()>>>(evens.get());
        conveyor::check_launch("add_one");
      });
    });
  });
  // the body: count_up, set_if_even, the IF node; the IF's body: add_one
  EXPECT_EQ(conveyor::statistics(conveyor::describe(g)).nested_nodes, 4U);
  auto exec = conveyor::instantiate(g);
  for (const int n : {7, 10}) {
    write_one(limit, n);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(counter), n);
    EXPECT_EQ(read_one(evens), n / 2) << "limit " << n; // 2, 4, ... up to n
  }
}

TEST(CaptureNodes, IfElseAndSwitchInOneCapture) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::switch_case);
  device_array<int> value(1), branch(1), picked(1);
  conveyor::stream s;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    const auto c = conveyor::capture_condition(cs, 0, conveyor::condition_reset::each_launch);
    set_from_value<<<1, 1, 0, cs.get()>>>(c.handle, value.get());
    conveyor::check_launch("set_from_value");
    (void)conveyor::capture_conditional(
        cs, conditional_kind::if_then_else, c,
        [&](const conveyor::stream& b) { store<<<1, 1, 0, b.get()>>>(branch.get(), 1); },
        [&](const conveyor::stream& b) { store<<<1, 1, 0, b.get()>>>(branch.get(), 2); });
    store<<<1, 1, 0, cs.get()>>>(picked.get(), -1);
    const auto sw = conveyor::capture_condition(cs, 0, conveyor::condition_reset::each_launch);
    set_from_value<<<1, 1, 0, cs.get()>>>(sw.handle, value.get());
    (void)conveyor::capture_conditional(
        cs, conditional_kind::switch_case, sw,
        [&](const conveyor::stream& b) { store<<<1, 1, 0, b.get()>>>(picked.get(), 10); },
        [&](const conveyor::stream& b) { store<<<1, 1, 0, b.get()>>>(picked.get(), 11); },
        [&](const conveyor::stream& b) { store<<<1, 1, 0, b.get()>>>(picked.get(), 12); });
    conveyor::check_launch("store");
  });
  EXPECT_EQ(g.node_count(), 5U); // set_from_value, IF/ELSE, store, set_from_value, SWITCH
  auto exec = conveyor::instantiate(g);
  for (const int v : {0, 1, 2, 5}) {
    write_one(value, v);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(branch), v != 0 ? 1 : 2) << "value " << v;
    EXPECT_EQ(read_one(picked), v < 3 ? 10 + v : -1) << "value " << v;
  }
}

TEST(CaptureNodes, ConditionalRefusals) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then);
  conveyor::stream s;
  device_array<int> out(1);
  conveyor::graph other;
  const auto foreign = conveyor::make_condition(other, 0, conveyor::condition_reset::each_launch);
  bool host_refused = false;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    EXPECT_THROW((void)conveyor::capture_conditional(cs, conditional_kind::if_then, foreign), std::invalid_argument);
    const auto c = conveyor::capture_condition(cs, 1, conveyor::condition_reset::each_launch);
    EXPECT_THROW(
        (void)conveyor::capture_conditional(cs, conditional_kind::if_then_else, c, [](const conveyor::stream&) {}),
        std::invalid_argument); // an IF/ELSE needs two bodies
    (void)conveyor::capture_conditional(cs, conditional_kind::if_then, c, [&](const conveyor::stream& b) {
      try {
        (void)conveyor::capture_host(b, [] {});
      } catch (const std::invalid_argument& e) {
        host_refused = std::string(e.what()).find("conditional node's body") != std::string::npos;
      }
      store<<<1, 1, 0, b.get()>>>(out.get(), 9);
    });
  });
  EXPECT_TRUE(host_refused);
  EXPECT_EQ(g.node_count(), 1U); // the IF node only: nothing of the refused calls
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(out), 9); // default value 1: the body ran

  // A capture Conveyor did not begin has no model for the bodies: refused, and the capture ends cleanly.
  CONVEYOR_CHECK(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal));
  bool refused = false;
  try {
    const auto c = conveyor::capture_condition(s, 0, conveyor::condition_reset::each_launch);
    (void)conveyor::capture_conditional(s, conditional_kind::if_then, c);
  } catch (const std::logic_error& e) {
    refused = std::string(e.what()).find("not begun by Conveyor") != std::string::npos;
  }
  cudaGraph_t raw = nullptr;
  CONVEYOR_CHECK(cudaStreamEndCapture(s.get(), &raw));
  if (raw != nullptr) CONVEYOR_CHECK(cudaGraphDestroy(raw));
  EXPECT_TRUE(refused);
}

} // namespace
