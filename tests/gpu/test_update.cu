// GPU tests of executable graphs: instantiate flags, upload, per-node setters, whole-graph update (accepted and
// refused), update_or_reinstantiate, and executable graphs that outlive or are moved away from their source.
// Each test skips without a CUDA device.

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"
#include "support/moved_from.hpp"

#include <conveyor/conveyor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::test::all_equal;
using conveyor::test::all_near;
using conveyor::test::contains;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::random_floats;
using conveyor::test::random_ints;
using conveyor::test::random_scalar;
using conveyor::test::sync_device;

// ---- kernels (shared: gpu/test_kernels.cuh) ----------------------------------------------------------------------

using namespace conveyor::test::kernels;

namespace {

std::vector<float> scaled(const std::vector<float>& x, float a) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * a;
  return out;
}

std::vector<float> shifted(const std::vector<float>& x, float b) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] + b;
  return out;
}

// out = a * x + fill, as the pipeline below computes it (y is first filled with `fill`).
std::vector<float> pipeline_result(float a, const std::vector<float>& x, float fill) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = a * x[i] + fill;
  return out;
}

// The buffers of one pipeline: input x, work y, output out.
struct buffers {
  int n;
  std::vector<float> x0;
  device_array<float> x, y, out;
  buffers(int count, unsigned seed) :
      n(count),
      x0(random_floats(count, seed)),
      x(x0),
      y(random_floats(count, seed + 1)),
      out(random_floats(count, seed + 2)) {
    sync_device();
  }
  // Overwrites `out` with stale random values, to tell later whether something wrote it.
  std::vector<float> poison_out(unsigned seed) {
    auto stale = random_floats(n, seed, 100.0F, 200.0F);
    out.upload(stale);
    sync_device();
    return stale;
  }
};

// memset(y = fill) -> axpy(y = a x + y) -> memcpy(out = y) [-> scale(out *= 2) when `extra_node`]
struct pipeline {
  conveyor::graph g;
  conveyor::node fill_node, kernel_node, copy_node;
  pipeline(buffers& b, float a, float fill, bool extra_node = false) {
    fill_node = g.memset(b.y.get(), fill, b.n).label("fill y");
    kernel_node = g.kernel({fill_node}, cover(b.n), axpy, b.n, a, b.x.get(), b.y.get()).label("axpy");
    copy_node =
        g.memcpy({kernel_node}, b.out.get(), b.y.get(), b.out.bytes(), cudaMemcpyDeviceToDevice).label("copy out");
    if (extra_node) g.kernel({copy_node}, cover(b.n), scale, b.n, 2.0F, b.out.get()).label("double out");
  }
};

} // namespace

// ---- instantiate ----------------------------------------------------------------------------------------------------

TEST(Instantiate, WithoutFlags) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(1500, 2001);
  const float a = random_scalar(2004, 0.5F, 2.0F);
  pipeline p(b, a, 0.75F);
  auto exec = conveyor::instantiate(p.g);
  EXPECT_EQ(exec.flags(), conveyor::instantiate_flags::none);
  EXPECT_EQ(conveyor::to_string(exec.flags()), "none");
  EXPECT_NE(exec.get(), nullptr);
  conveyor::stream s;
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(a, b.x0, 0.75F)));
}

TEST(Instantiate, WithUploadOnAStream) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(1500, 2011);
  const float a = random_scalar(2014, 0.5F, 2.0F);
  pipeline p(b, a, -1.5F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p.g, conveyor::instantiate_flags::none, s);
  EXPECT_TRUE(conveyor::has_flag(exec.flags(), conveyor::instantiate_flags::upload));
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(a, b.x0, -1.5F)));

  // The upload flag without a stream is refused.
  EXPECT_THROW((void)conveyor::instantiate(p.g, conveyor::instantiate_flags::upload), std::invalid_argument);
}

TEST(Instantiate, ExplicitUploadBeforeLaunch) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(999, 2021);
  const float a = random_scalar(2024, 0.5F, 2.0F);
  pipeline p(b, a, 2.25F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p.g);
  exec.upload(s);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(a, b.x0, 2.25F)));
}

TEST(Instantiate, AutoFreeOnLaunchRelaunchesAGraphThatNeverFrees) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  const auto src1 = random_floats(n, 2031);
  const auto src2 = random_floats(n, 2032);
  device_array<float> src(src1), out(random_floats(n, 2033));
  sync_device();

  conveyor::graph g;
  auto alloc = g.mem_alloc(n * sizeof(float));
  auto* tmp = static_cast<float*>(alloc.pointer);
  auto in = g.memcpy({alloc.node}, tmp, src.get(), src.bytes(), cudaMemcpyDeviceToDevice);
  auto k = g.kernel({in}, cover(n), scale, n, 2.0F, tmp);
  g.memcpy({k}, out.get(), tmp, out.bytes(), cudaMemcpyDeviceToDevice);
  // No mem_free node: without auto_free_on_launch a second launch would find the allocation still live.

  conveyor::stream s;
  auto exec = conveyor::instantiate(g, conveyor::instantiate_flags::auto_free_on_launch);
  EXPECT_TRUE(conveyor::has_flag(exec.flags(), conveyor::instantiate_flags::auto_free_on_launch));
  EXPECT_EQ(conveyor::to_string(exec.flags()), "auto_free_on_launch");
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(out.download(), scaled(src1, 2.0F)));

  src.upload(src2);
  sync_device();
  exec.launch(s);
  exec.launch(s); // back to back as well
  s.synchronize();
  EXPECT_TRUE(all_near(out.download(), scaled(src2, 2.0F)));

  // The last launch's allocation is still live: free it as stream-ordered memory.
  CONVEYOR_CHECK(cudaFreeAsync(alloc.pointer, s.get()));
  s.synchronize();
}

TEST(Instantiate, SecondInstantiationOfAnAllocationGraphFailsWithCudaError) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graph g;
  auto alloc = g.mem_alloc(4096);
  g.mem_free({alloc.node}, alloc.pointer).label("release");
  auto first = conveyor::instantiate(g);
  // CUDA: only one instantiation of a graph with memory nodes may exist at a time.
  try {
    auto second = conveyor::instantiate(g);
    ADD_FAILURE() << "a second instantiation of a graph with allocation nodes succeeded";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_TRUE(contains(e.what(), "instantiate result")) << e.what();
    EXPECT_TRUE(contains(e.call(), "cudaGraphInstantiateWithParams")) << e.call();
  }
}

// ---- per-node setters ---------------------------------------------------------------------------------------------

TEST(Execute, SetKernelArgsWithNewPointerAndScalar) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 3000;
  const auto x1 = random_floats(n, 2101), y1 = random_floats(n, 2102);
  const auto x2 = random_floats(n, 2103), y2 = random_floats(n, 2104);
  device_array<float> dx1(x1), dy1(y1), dx2(x2), dy2(y2);
  sync_device();
  const float a1 = 1.5F, a2 = -2.5F;

  conveyor::graph g;
  auto k = g.kernel(cover(n), axpy, n, a1, dx1.get(), dy1.get());
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want1(n);
  for (int i = 0; i < n; ++i) want1[i] = a1 * x1[i] + y1[i];
  EXPECT_TRUE(all_near(dy1.download(), want1));

  exec.set_kernel_args(k, axpy, n, a2, dx2.get(), dy2.get());
  exec.launch(s);
  s.synchronize();
  std::vector<float> want2(n);
  for (int i = 0; i < n; ++i) want2[i] = a2 * x2[i] + y2[i];
  EXPECT_TRUE(all_near(dy2.download(), want2));
  EXPECT_TRUE(all_near(dy1.download(), want1)); // the old output was not written again
}

TEST(Execute, SetKernelArgsRejectsAnotherKernelAndOtherNodeKinds) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 128;
  device_array<float> x(random_floats(n, 2111));
  sync_device();
  conveyor::graph g;
  auto k = g.kernel(cover(n), scale, n, 2.0F, x.get());
  auto m = g.memset({k}, x.get(), 1.0F, n);
  auto exec = conveyor::instantiate(g);
  EXPECT_THROW(exec.set_kernel_args(k, add_scalar, n, 1.0F, x.get()), std::invalid_argument);
  EXPECT_THROW(exec.set_kernel_args(m, scale, n, 1.0F, x.get()), conveyor::cuda_error);
}

TEST(Execute, SetKernelChangesTheGridAndSetKernelArgsKeepsIt) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  const auto x0 = random_floats(n, 2121);
  device_array<float> x(x0);
  sync_device();

  // The node first covers only the first half of x.
  const conveyor::launch_config half{dim3(n / 2 / 256), dim3(256), 0};
  conveyor::graph g;
  auto k = g.kernel(half, scale, n, 2.0F, x.get());
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  auto want = x0;
  for (int i = 0; i < n / 2; ++i) want[i] = x0[i] * 2.0F;
  EXPECT_TRUE(all_near(x.download(), want));

  // A full grid with another scalar covers every element.
  x.upload(x0);
  sync_device();
  exec.set_kernel(k, cover(n), scale, n, 3.0F, x.get());
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), scaled(x0, 3.0F)));

  // New arguments only: the full grid given to set_kernel stays.
  x.upload(x0);
  sync_device();
  exec.set_kernel_args(k, scale, n, -0.5F, x.get());
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), scaled(x0, -0.5F)));
}

// set_kernel_args keeps a node's own launch configuration, whether the builder made the node (the handle carries
// its configuration) or a capture did (the configuration is read from the node once and remembered).
TEST(Execute, SetKernelArgsKeepsTheGridOfBuiltAndCapturedNodes) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  const auto x0 = random_floats(n, 2125);
  const conveyor::launch_config half{dim3(n / 2 / 256), dim3(256), 0};
  conveyor::stream s;
  for (const bool captured : {false, true}) {
    SCOPED_TRACE(captured ? "captured node" : "built node");
    device_array<float> x(x0);
    sync_device();
    conveyor::graph g;
    conveyor::node k;
    if (captured) {
      g = conveyor::capture(s, [&](const conveyor::stream& cs) {
        scale<<<half.grid, half.block, 0, cs.get()>>>(n, 2.0F, x.get());
        conveyor::check_launch("scale");
      });
      ASSERT_EQ(g.nodes().size(), 1U);
      k = g.nodes().front();
      EXPECT_EQ(k.kernel_function(), nullptr);
    } else {
      k = g.kernel(half, scale, n, 2.0F, x.get());
      EXPECT_EQ(k.kernel_function(), reinterpret_cast<const void*>(&scale));
      EXPECT_EQ(k.kernel_config().grid.x, half.grid.x);
    }
    auto exec = conveyor::instantiate(g);
    for (const float a : {3.0F, -0.5F}) { // the second call takes the remembered (or carried) configuration
      x.upload(x0);
      sync_device();
      exec.set_kernel_args(k, scale, n, a, x.get());
      exec.launch(s);
      s.synchronize();
      auto want = x0;
      for (int i = 0; i < n / 2; ++i) want[i] = x0[i] * a; // the half grid covers only the first half
      EXPECT_TRUE(all_near(x.download(), want)) << "a = " << a;
    }
    if (!captured) EXPECT_THROW(exec.set_kernel_args(k, add_scalar, n, 1.0F, x.get()), std::invalid_argument);
  }
}

TEST(Execute, SetKernelToAnotherFunctionThenSetKernelArgsForIt) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const auto x0 = random_floats(n, 2131);
  device_array<float> x(x0);
  sync_device();
  conveyor::graph g;
  auto k = g.kernel(cover(n), scale, n, 2.0F, x.get());
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);

  exec.set_kernel(k, cover(n), add_scalar, n, 5.0F, x.get());
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(x0, 5.0F)));

  // The node now runs add_scalar: new arguments for it are accepted (documented: "the last one given to
  // set_kernel"), while scale's are the ones that no longer match.
  x.upload(x0);
  sync_device();
  EXPECT_NO_THROW(exec.set_kernel_args(k, add_scalar, n, 7.0F, x.get()));
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(x0, 7.0F)));
}

TEST(Execute, SetMemcpyRetargetsTheCopy) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 5000;
  const auto src1 = random_floats(n, 2141), src2 = random_floats(n, 2142);
  const auto dst2_before = random_floats(n, 2144);
  device_array<float> dsrc1(src1), dsrc2(src2), ddst1(random_floats(n, 2143)), ddst2(dst2_before);
  sync_device();

  conveyor::graph g;
  auto m = g.memcpy(ddst1.get(), dsrc1.get(), ddst1.bytes(), cudaMemcpyDeviceToDevice);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(ddst1.download(), src1));
  EXPECT_TRUE(all_equal(ddst2.download(), dst2_before));

  const auto dst1_stale = random_floats(n, 2145);
  ddst1.upload(dst1_stale);
  sync_device();
  exec.set_memcpy(m, ddst2.get(), dsrc2.get(), ddst2.bytes(), cudaMemcpyDeviceToDevice);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(ddst2.download(), src2));
  EXPECT_TRUE(all_equal(ddst1.download(), dst1_stale)); // the old destination is no longer written
}

TEST(Execute, SetMemsetRetargetsTheFill) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4097;
  const auto before1 = random_ints<std::uint32_t>(n, 2151, 0, 0xFFFFFFFFLL);
  const auto before2 = random_ints<std::uint32_t>(n, 2152, 0, 0xFFFFFFFFLL);
  device_array<std::uint32_t> b1(before1), b2(before2);
  sync_device();
  const std::uint32_t v1 = 0x12345678U, v2 = 0x9ABCDEF0U;

  conveyor::graph g;
  auto m = g.memset(b1.get(), v1, n);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(b1.download(), std::vector<std::uint32_t>(n, v1)));
  EXPECT_TRUE(all_equal(b2.download(), before2));

  b1.upload(before1);
  sync_device();
  exec.set_memset(m, b2.get(), v2, n);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(b2.download(), std::vector<std::uint32_t>(n, v2)));
  EXPECT_TRUE(all_equal(b1.download(), before1));
}

TEST(Execute, SetHostReplacesTheCallable) {
  CONVEYOR_REQUIRE_GPU();
  std::atomic<int> old_calls{0}, new_calls{0};
  conveyor::graph g;
  auto h = g.host([&old_calls] { old_calls.fetch_add(1); });
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(old_calls.load(), 1);
  EXPECT_EQ(new_calls.load(), 0);

  exec.set_host(h, [&new_calls] { new_calls.fetch_add(10); });
  exec.launch(s);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(old_calls.load(), 1); // the old callable is not called any more
  EXPECT_EQ(new_calls.load(), 20);
}

TEST(Execute, SetEnabledFalseSkipsAKernel) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1234;
  const auto x0 = random_floats(n, 2161);
  device_array<float> x(x0);
  sync_device();
  conveyor::graph g;
  auto twice = g.kernel(cover(n), scale, n, 2.0F, x.get());
  g.kernel({twice}, cover(n), add_scalar, n, 1.0F, x.get());
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);

  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(scaled(x0, 2.0F), 1.0F)));

  x.upload(x0);
  sync_device();
  exec.set_enabled(twice, false);
  unsigned enabled = 1;
  CONVEYOR_CHECK(cudaGraphNodeGetEnabled(exec.get(), twice.get(), &enabled));
  EXPECT_EQ(enabled, 0U);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(x0, 1.0F)));

  x.upload(x0);
  sync_device();
  exec.set_enabled(twice, true);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(scaled(x0, 2.0F), 1.0F)));
}

// ---- whole-graph update -------------------------------------------------------------------------------------------

TEST(Update, SameTopologyOtherParametersSucceeds) {
  CONVEYOR_REQUIRE_GPU();
  buffers b1(2500, 2201), b2(2500, 2211);
  const float a1 = 1.25F, a2 = -0.75F, f1 = 0.5F, f2 = 4.0F;
  pipeline p1(b1, a1, f1);
  pipeline p2(b2, a2, f2);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b1.out.download(), pipeline_result(a1, b1.x0, f1)));

  auto r = exec.update(p2.g);
  EXPECT_TRUE(static_cast<bool>(r)) << r.reason();
  EXPECT_EQ(r.status, conveyor::update_status::success);
  EXPECT_EQ(r.method, conveyor::update_method::whole_graph);
  EXPECT_EQ(r.reason(), "whole_graph");
  EXPECT_EQ(r.node, nullptr);

  const auto stale1 = b1.poison_out(2221);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b2.out.download(), pipeline_result(a2, b2.x0, f2)));
  EXPECT_TRUE(all_equal(b1.out.download(), stale1)); // the first graph's buffers are not used any more
}

// The same 6-node DAG built twice in the same node order, its dependencies added in another order (lists at insertion
// in one, precede/succeed in the other): CUDA's whole-graph update pairs dependencies by their order and refuses it
// (topology_changed), Conveyor's comparison proves the DAG the same, and update() applies the change node by node.
TEST(Update, TheSameDagWithDependenciesAddedInAnotherOrderIsUpdated) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2000;
  device_array<float> x0(random_floats(n, 61)), x1(random_floats(n, 62)), x2(random_floats(n, 63));
  device_array<float> u0(n), u1(n), u2(n), v0(n), v1(n), z(n);
  auto build = [&](float a0, float a1, float a2, bool lists) {
    conveyor::graph g;
    auto c0 = g.kernel(cover(n), copy_plus, n, x0.get(), a0, u0.get());
    auto c1 = g.kernel(cover(n), copy_plus, n, x1.get(), a1, u1.get());
    auto c2 = g.kernel(cover(n), copy_plus, n, x2.get(), a2, u2.get());
    if (lists) {
      auto s0 = g.kernel({c0, c1}, cover(n), add_vectors, n, u0.get(), u1.get(), v0.get());
      auto s1 = g.kernel({c1, c2}, cover(n), add_vectors, n, u1.get(), u2.get(), v1.get());
      (void)g.kernel({s0, s1}, cover(n), add_vectors, n, v0.get(), v1.get(), z.get());
    } else {
      auto s0 = g.kernel(cover(n), add_vectors, n, u0.get(), u1.get(), v0.get());
      auto s1 = g.kernel(cover(n), add_vectors, n, u1.get(), u2.get(), v1.get());
      auto t = g.kernel(cover(n), add_vectors, n, v0.get(), v1.get(), z.get());
      // Every node's dependencies and dependents in the other order.
      c2.precede(s1);
      c1.precede({s1, s0});
      c0.precede(s0);
      t.succeed({s1, s0});
    }
    return g;
  };
  const conveyor::graph first = build(1.0F, 2.0F, 3.0F, true);
  const conveyor::graph second = build(-0.5F, 0.25F, 4.0F, false);
  EXPECT_TRUE(conveyor::diff(first, second).same_topology);
  conveyor::stream s;
  auto exec = conveyor::instantiate(first);
  const auto r = exec.update(second);
  ASSERT_TRUE(static_cast<bool>(r)) << r.reason();
  // CUDA applies it as a whole, or refuses it (topology_changed) and Conveyor sets the changed nodes one by one.
  if (r.method == conveyor::update_method::per_node) {
    EXPECT_EQ(r.nodes_set, 3U) << r.reason();
    EXPECT_TRUE(contains(r.reason(), "pairs dependencies by the order they were added")) << r.reason();
  } else {
    EXPECT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
  }
  std::printf("reordered dependencies: %s\n", r.reason().c_str());
  exec.launch(s);
  s.synchronize();
  const auto h0 = x0.download(), h1 = x1.download(), h2 = x2.download();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = ((h0[i] + -0.5F) + (h1[i] + 0.25F)) + ((h1[i] + 0.25F) + (h2[i] + 4.0F));
  EXPECT_TRUE(all_equal(z.download(), want));
  // Back to the first graph with update_incremental. After Conveyor's per-node update the nodes still match by
  // position, and the three changed ones are set again; after CUDA's whole-graph update they do not (CUDA paired
  // the two sums and their inputs the other way round, through the dependency order), and a whole-graph update
  // applies it. Either way the replay runs the first graph.
  const bool by_cuda = r.method == conveyor::update_method::whole_graph;
  const auto back = exec.update_incremental(first);
  EXPECT_EQ(back.method, by_cuda ? conveyor::update_method::whole_graph : conveyor::update_method::per_node)
      << back.reason();
  exec.launch(s);
  s.synchronize();
  for (int i = 0; i < n; ++i) want[i] = ((h0[i] + 1.0F) + (h1[i] + 2.0F)) + ((h1[i] + 2.0F) + (h2[i] + 3.0F));
  EXPECT_TRUE(all_equal(z.download(), want));
  // Node by node to the second graph (by position), then the same graph as a whole: CUDA pairs it its own way,
  // which the per-node update says nothing of, so going back is again a whole-graph update when CUDA took it.
  const auto again = exec.update_incremental(second);
  EXPECT_EQ(again.method, conveyor::update_method::per_node) << again.reason();
  const auto whole = exec.update(second);
  ASSERT_TRUE(static_cast<bool>(whole)) << whole.reason();
  const auto back2 = exec.update_incremental(first);
  if (whole.method == conveyor::update_method::whole_graph)
    EXPECT_EQ(back2.method, conveyor::update_method::whole_graph) << back2.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(z.download(), want));
}

// The same DAG with its dependencies added in another order, after a per-node setter changed a node that the new
// graph does not change (issue 39, item 7): CUDA refuses the whole-graph update, Conveyor proves the DAG the same and
// sets every node a setter can reach, so the replay runs the new graph, the setter's value gone, as its eager run;
// CUDA's reason stays in the explanation.
TEST(Update, TheSameDagReorderedIsUpdatedAfterAPerNodeSetter) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2000;
  device_array<float> x0(random_floats(n, 71)), x1(random_floats(n, 72)), u0(n), u1(n), z(n), eager(n);
  struct built {
    conveyor::graph g;
    conveyor::node first;
  };
  auto build = [&](float a0, float a1, bool lists) {
    built b;
    b.first = b.g.kernel(cover(n), copy_plus, n, x0.get(), a0, u0.get());
    auto c1 = b.g.kernel(cover(n), copy_plus, n, x1.get(), a1, u1.get());
    if (lists) {
      (void)b.g.kernel({b.first, c1}, cover(n), add_vectors, n, u0.get(), u1.get(), z.get());
    } else {
      auto sum = b.g.kernel(cover(n), add_vectors, n, u0.get(), u1.get(), z.get());
      sum.succeed({c1, b.first}); // the dependencies in the other order
    }
    return b;
  };
  const built first = build(1.0F, 2.0F, true);
  const built second = build(1.0F, -0.5F, false); // the first kernel as in `first`
  conveyor::stream s;
  auto exec = conveyor::instantiate(first.g);
  exec.set_kernel_args(first.first, copy_plus, n, x0.get(), 10.0F, u0.get()); // the executable graph only
  const auto r = exec.update(second.g);
  ASSERT_TRUE(static_cast<bool>(r)) << r.reason();
  std::printf("reordered dependencies after a setter: %s\n", r.reason().c_str());
  if (r.method == conveyor::update_method::per_node)
    EXPECT_TRUE(contains(r.reason(), "CUDA refused the whole-graph update (topology_changed")) << r.reason();
  exec.launch(s);
  s.synchronize();
  // Eager: the same kernels, in the new graph's order and arguments.
  copy_plus<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, x0.get(), 1.0F, u0.get());
  copy_plus<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, x1.get(), -0.5F, u1.get());
  add_vectors<<<cover(n).grid, cover(n).block, 0, s.get()>>>(n, u0.get(), u1.get(), eager.get());
  CONVEYOR_CHECK(cudaGetLastError());
  s.synchronize();
  EXPECT_TRUE(all_equal(z.download(), eager.download())) << "the replay kept the setter's value";
}

// set_kernel_args given a node of the source after an update that changed the grid sets the arguments with the launch
// shape the executable graph runs now, not the one the node was made with (issue 39, item 6), after a whole-graph
// update and after a per-node one; a node of the graph applied carries that shape itself. Compared with the eager
// launch of the same kernel, shape and arguments.
TEST(Update, SetKernelArgsKeepsTheLaunchShapeAnUpdateApplied) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  device_array<int> out(n), eager(n);
  fill_int<<<cover(n).grid, cover(n).block>>>(n, 7, eager.get());
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  const std::vector<int> want = eager.download();
  conveyor::stream s;
  for (const bool whole : {true, false}) {
    for (const bool of_source : {true, false}) {
      SCOPED_TRACE(std::string(whole ? "whole-graph update" : "per-node update") +
                   (of_source ? ", node of the source" : ", node of the graph applied"));
      conveyor::graph g1;
      const auto k1 = g1.kernel(cover(256), fill_int, n, 1, out.get()); // one block: 256 elements
      conveyor::graph g2;
      const auto k2 = g2.kernel(cover(n), fill_int, n, 2, out.get()); // every element
      auto exec = conveyor::instantiate(g1);
      const auto r = whole ? exec.update(g2) : exec.update_incremental(g2);
      ASSERT_TRUE(static_cast<bool>(r)) << r.reason();
      ASSERT_EQ(r.method, whole ? conveyor::update_method::whole_graph : conveyor::update_method::per_node)
          << r.reason();
      exec.set_kernel_args(of_source ? k1 : k2, fill_int, n, 7, out.get());
      CONVEYOR_CHECK(cudaMemsetAsync(out.get(), 0xff, n * sizeof(int), s.get())); // ordered before the launch
      exec.launch(s);
      s.synchronize();
      EXPECT_TRUE(all_equal(out.download(), want)) << "the setter restored the grid of the node it was given";
    }
  }
}

TEST(Update, SettersAcceptNodesOfTheUpdatedGraphAndOfTheSource) {
  CONVEYOR_REQUIRE_GPU();
  buffers b1(1800, 2301), b2(1800, 2311);
  pipeline p1(b1, 1.0F, 0.0F);
  pipeline p2(b2, 2.0F, 1.0F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);
  ASSERT_TRUE(static_cast<bool>(exec.update(p2.g)));

  // A node of the graph last applied...
  exec.set_kernel_args(p2.kernel_node, axpy, b2.n, -3.0F, b2.x.get(), b2.y.get());
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b2.out.download(), pipeline_result(-3.0F, b2.x0, 1.0F)));

  // ... and the corresponding node of the graph it was instantiated from.
  exec.set_kernel_args(p1.kernel_node, axpy, b2.n, 0.5F, b2.x.get(), b2.y.get());
  exec.set_memset(p1.fill_node, b2.y.get(), 7.0F, b2.n);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b2.out.download(), pipeline_result(0.5F, b2.x0, 7.0F)));
}

TEST(Update, TopologyChangeIsRefusedThenReinstantiated) {
  CONVEYOR_REQUIRE_GPU();
  buffers b1(2000, 2401), b3(2000, 2411);
  const float a1 = 1.5F, f1 = -1.0F, a3 = 0.25F, f3 = 3.0F;
  pipeline p1(b1, a1, f1);
  pipeline p3(b3, a3, f3, /*extra_node=*/true);
  ASSERT_EQ(p3.g.node_count(), p1.g.node_count() + 1);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);

  auto r = exec.update(p3.g);
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.status, conveyor::update_status::topology_changed);
  EXPECT_FALSE(r.reason().empty());
  EXPECT_TRUE(contains(r.reason(), "topology_changed")) << r.reason();

  // Refused: the executable graph still runs the first graph.
  const auto stale3 = b3.poison_out(2421);
  b1.poison_out(2422);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b1.out.download(), pipeline_result(a1, b1.x0, f1)));
  EXPECT_TRUE(all_equal(b3.out.download(), stale3));

  auto outcome = exec.update_or_reinstantiate(p3.g);
  EXPECT_TRUE(outcome.reinstantiated());
  EXPECT_EQ(outcome.method, conveyor::update_method::reinstantiated);
  EXPECT_EQ(outcome.status, conveyor::update_status::topology_changed);
  EXPECT_EQ(exec.flags(), conveyor::instantiate_flags::none);
  const auto stale1 = b1.poison_out(2423);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b3.out.download(), scaled(pipeline_result(a3, b3.x0, f3), 2.0F)));
  EXPECT_TRUE(all_equal(b1.out.download(), stale1));
}

TEST(Update, UpdateOrReinstantiateUpdatesInPlaceWhenItCan) {
  CONVEYOR_REQUIRE_GPU();
  buffers b1(900, 2501), b2(900, 2511);
  pipeline p1(b1, 1.0F, 1.0F);
  pipeline p2(b2, -2.0F, 0.5F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);
  const auto before = exec.get();
  auto outcome = exec.update_or_reinstantiate(p2.g);
  EXPECT_FALSE(outcome.reinstantiated());
  EXPECT_EQ(outcome.method, conveyor::update_method::whole_graph) << outcome.reason();
  EXPECT_EQ(exec.get(), before); // same executable graph
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b2.out.download(), pipeline_result(-2.0F, b2.x0, 0.5F)));
}

TEST(Update, KernelFunctionChangeIsAppliedInPlace) {
  // cudaGraphExecUpdate: a kernel node's function may change (FunctionChanged is reported only by drivers older
  // than 11.2) as long as the owning context, CDP use and cooperativeness stay the same.
  CONVEYOR_REQUIRE_GPU();
  const int n = 1600;
  const auto x0 = random_floats(n, 2601);
  device_array<float> x(x0);
  sync_device();
  conveyor::graph g1, g2;
  g1.kernel(cover(n), scale, n, 3.0F, x.get()).label("step");
  g2.kernel(cover(n), add_scalar, n, 3.0F, x.get()).label("step");
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1);
  auto r = exec.update(g2);
  if (!r) {
    // Should a driver refuse it, the report must name the labelled node.
    EXPECT_EQ(r.node_label, "step") << r.reason();
    EXPECT_TRUE(r.status == conveyor::update_status::function_changed ||
                r.status == conveyor::update_status::unsupported_function_change ||
                r.status == conveyor::update_status::not_supported)
        << r.reason();
  }
  ASSERT_TRUE(static_cast<bool>(r)) << r.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(x0, 3.0F)));
}

TEST(Update, NodeTypeChangeIsRefusedNamingTheLabelledNode) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  const auto x0 = random_floats(n, 2701);
  device_array<float> x(x0);
  sync_device();
  conveyor::graph g1, g2;
  auto a1 = g1.kernel(cover(n), scale, n, 2.0F, x.get());
  g1.kernel({a1}, cover(n), add_scalar, n, 1.0F, x.get()).label("tail");
  auto a2 = g2.kernel(cover(n), scale, n, 2.0F, x.get());
  auto tail2 = g2.memset({a2}, x.get(), 5.0F, n).label("tail"); // same position, another kind
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1);

  auto r = exec.update(g2);
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.status, conveyor::update_status::node_type_changed) << r.reason();
  EXPECT_EQ(r.node, tail2.get());
  EXPECT_EQ(r.node_label, "tail");
  EXPECT_TRUE(contains(r.reason(), "node_type_changed")) << r.reason();
  EXPECT_TRUE(contains(r.reason(), "tail")) << r.reason();

  exec.launch(s); // unchanged: still scale then add
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(scaled(x0, 2.0F), 1.0F)));
}

TEST(Update, UpdateKeepsTheNewGraphsHostCallableAlive) {
  CONVEYOR_REQUIRE_GPU();
  std::atomic<int> first{0}, second{0};
  conveyor::graph g1;
  g1.host([&first] { first.fetch_add(1); });
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1);
  {
    conveyor::graph g2;
    g2.host([&second] { second.fetch_add(1); });
    auto r = exec.update(g2);
    ASSERT_TRUE(static_cast<bool>(r)) << r.reason();
  } // g2 and the std::function it owns are gone from this scope
  exec.launch(s);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(first.load(), 0);
  EXPECT_EQ(second.load(), 2);
}

// A moved-from graph is refused by instantiate and by every update, before anything changes: the executable graph
// still runs its own graph afterwards.
TEST(Update, EveryUpdateRefusesAMovedFromGraphAndChangesNothing) {
  CONVEYOR_REQUIRE_GPU();
  buffers b1(700, 2601), b2(700, 2611);
  const float a = random_scalar(2604, 0.5F, 2.0F);
  pipeline p1(b1, a, 0.25F);
  pipeline p2(b2, -1.0F, 0.5F);
  auto exec = conveyor::instantiate(p1.g);
  const auto before = exec.get();
  conveyor::graph taken(std::move(p2.g));
  EXPECT_EQ(p2.g.get(), nullptr);
  EXPECT_REFUSES_MOVED_FROM("conveyor::instantiate", (void)conveyor::instantiate(p2.g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_exec::update", (void)exec.update(p2.g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_exec::update_or_reinstantiate", (void)exec.update_or_reinstantiate(p2.g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_exec::update_incremental", (void)exec.update_incremental(p2.g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_exec::update_incremental", (void)exec.update_incremental(p2.g, false));
  conveyor::graph assigned;
  assigned = std::move(taken); // move assignment empties `taken` too
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_exec::update", (void)exec.update(taken));
  EXPECT_EQ(exec.get(), before);
  conveyor::stream s;
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b1.out.download(), pipeline_result(a, b1.x0, 0.25F)));
  EXPECT_TRUE(static_cast<bool>(exec.update(assigned))) << "the graph moved into is whole";
}

// ---- lifetime -----------------------------------------------------------------------------------------------------

TEST(Update, ExecutableGraphOutlivesItsSourceGraph) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2000;
  const auto x0 = random_floats(n, 2801);
  device_array<float> x(x0);
  sync_device();
  std::atomic<int> calls{0}, replaced{0};
  conveyor::node k, h;

  // The graph lives only inside the lambda; the executable graph is returned (no move: guaranteed elision).
  auto exec = [&] {
    conveyor::graph g;
    k = g.kernel(cover(n), scale, n, 2.0F, x.get()).label("scale");
    h = g.host({k}, [&calls] { calls.fetch_add(1); });
    return conveyor::instantiate(g);
  }();

  conveyor::stream s;
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(all_near(x.download(), scaled(x0, 2.0F)));

  // Node handles saved while the graph existed still address the executable graph.
  EXPECT_EQ(k.label(), "scale");
  x.upload(x0);
  sync_device();
  exec.set_kernel_args(k, scale, n, 5.0F, x.get());
  exec.set_host(h, [&replaced] { replaced.fetch_add(1); });
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), scaled(x0, 5.0F)));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(replaced.load(), 1);

  x.upload(x0);
  sync_device();
  exec.set_enabled(k, false);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(x.download(), x0));
  EXPECT_EQ(replaced.load(), 2);
}

TEST(Update, MoveConstructedExecutableGraphStillLaunches) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 700;
  const auto x0 = random_floats(n, 2901);
  device_array<float> x(x0);
  sync_device();
  conveyor::graph g;
  g.kernel(cover(n), add_scalar, n, 2.0F, x.get());

  std::optional<conveyor::graph_exec> holder;
  {
    auto exec = conveyor::instantiate(g);
    holder.emplace(std::move(exec));
    EXPECT_EQ(exec.get(), nullptr); // moved-from: owns nothing
  }                                 // destroying the moved-from object must not destroy the handle now held by `holder`
  conveyor::stream s;
  ASSERT_NE(holder->get(), nullptr);
  holder->launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), shifted(x0, 2.0F)));
}

TEST(Update, MoveAssignmentReplacesTheExecutableGraph) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 700;
  const auto x0 = random_floats(n, 2911);
  device_array<float> x(x0);
  sync_device();
  conveyor::graph g1, g2;
  g1.kernel(cover(n), add_scalar, n, 2.0F, x.get());
  g2.kernel(cover(n), scale, n, -3.0F, x.get());
  auto exec = conveyor::instantiate(g1);
  {
    auto other = conveyor::instantiate(g2);
    exec = std::move(other);
    EXPECT_EQ(other.get(), nullptr);
  }
  conveyor::stream s;
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), scaled(x0, -3.0F)));
}

// ---- incremental update and graph_diff ------------------------------------------------------------------------------

TEST(GraphDiff, ParametersAndTopologyOfTwoBuilds) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(512, 3001);
  pipeline p1(b, 1.0F, 2.0F);
  pipeline same(b, 1.0F, 2.0F);
  pipeline other_scalar(b, 3.0F, 2.0F);
  pipeline longer(b, 1.0F, 2.0F, /*extra_node=*/true);

  auto d0 = conveyor::diff(p1.g, same.g);
  EXPECT_TRUE(d0.same_topology);
  EXPECT_TRUE(d0.identical()) << (d0.changed.empty() ? std::string{} : d0.lines()[0]);
  EXPECT_EQ(d0.nodes, 3U);

  auto d1 = conveyor::diff(p1.g, other_scalar.g);
  EXPECT_TRUE(d1.same_topology);
  ASSERT_EQ(d1.changed.size(), 1U);
  EXPECT_EQ(d1.changed[0].position, 1U); // memset, axpy, memcpy in creation order: the kernel
  EXPECT_EQ(d1.changed[0].kind, conveyor::node_kind::kernel);
  EXPECT_EQ(d1.changed[0].name, "axpy");
  EXPECT_EQ(d1.changed[0].what, "arguments 1") << d1.lines()[0]; // the scalar a, argument 1 of axpy
  EXPECT_TRUE(d1.changed[0].settable);
  EXPECT_TRUE(d1.changed[0].comparable);
  EXPECT_FALSE(d1.identical());

  auto d2 = conveyor::diff(p1.g, longer.g);
  EXPECT_FALSE(d2.same_topology);
  EXPECT_FALSE(d2.topology_reason.empty());
}

TEST(UpdateIncremental, IdenticalGraphSetsNothing) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(1500, 3101);
  pipeline p1(b, 1.5F, -2.0F);
  pipeline again(b, 1.5F, -2.0F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);
  auto r = exec.update_incremental(again.g);
  EXPECT_EQ(r.method, conveyor::update_method::none) << r.reason();
  EXPECT_EQ(r.nodes_changed, 0U);
  EXPECT_EQ(r.nodes_set, 0U);
  b.poison_out(3102);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(1.5F, b.x0, -2.0F)));
}

TEST(UpdateIncremental, OnlyTheChangedNodesAreSet) {
  CONVEYOR_REQUIRE_GPU();
  buffers b1(1500, 3201), b2(1500, 3211);
  pipeline p1(b1, 1.5F, -2.0F);
  pipeline new_scalar(b1, -0.5F, -2.0F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);

  auto r = exec.update_incremental(new_scalar.g);
  EXPECT_EQ(r.method, conveyor::update_method::per_node) << r.reason();
  EXPECT_EQ(r.nodes_changed, 1U);
  EXPECT_EQ(r.nodes_set, 1U);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b1.out.download(), pipeline_result(-0.5F, b1.x0, -2.0F)));

  // Other buffers and fill: all three nodes differ from the graph applied last.
  pipeline moved(b2, 2.0F, 0.25F);
  auto r2 = exec.update_incremental(moved.g);
  EXPECT_EQ(r2.method, conveyor::update_method::per_node) << r2.reason();
  EXPECT_EQ(r2.nodes_changed, 3U);
  EXPECT_EQ(r2.nodes_set, 3U);
  const auto stale1 = b1.poison_out(3221);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b2.out.download(), pipeline_result(2.0F, b2.x0, 0.25F)));
  EXPECT_TRUE(all_equal(b1.out.download(), stale1));

  // Nodes of the graph applied last may be passed to the setters.
  exec.set_kernel_args(moved.kernel_node, axpy, b2.n, 4.0F, b2.x.get(), b2.y.get());
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b2.out.download(), pipeline_result(4.0F, b2.x0, 0.25F)));
}

TEST(UpdateIncremental, AfterAPerNodeSetterTheWholeGraphIsUpdated) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(1000, 3301);
  pipeline p1(b, 1.0F, 1.0F);
  pipeline p2(b, 2.0F, 1.0F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);
  exec.set_memset(p1.fill_node, b.y.get(), 9.0F, b.n); // the executable graph no longer matches p1
  auto r = exec.update_incremental(p2.g);
  EXPECT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
  EXPECT_TRUE(static_cast<bool>(r)) << r.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(2.0F, b.x0, 1.0F))); // p2's fill, not the setter's
}

TEST(UpdateIncremental, TopologyChangeReinstantiatesOrReportsWhenNotAllowed) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(1000, 3401);
  pipeline p1(b, 1.0F, 1.0F);
  pipeline longer(b, 3.0F, 0.5F, /*extra_node=*/true);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p1.g);

  auto refused = exec.update_incremental(longer.g, /*reinstantiate=*/false);
  EXPECT_FALSE(static_cast<bool>(refused));
  EXPECT_EQ(refused.status, conveyor::update_status::topology_changed);
  EXPECT_EQ(refused.method, conveyor::update_method::refused) << refused.reason();
  EXPECT_TRUE(contains(refused.reason(), "node count 3 -> 4")) << refused.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(1.0F, b.x0, 1.0F))); // unchanged

  auto r = exec.update_incremental(longer.g);
  EXPECT_EQ(r.method, conveyor::update_method::reinstantiated) << r.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), scaled(pipeline_result(3.0F, b.x0, 0.5F), 2.0F)));
}

// ---- zero sizes and allocations never freed ---------------------------------------------------------------------

TEST(Execute, ZeroSizeSettersDisableTheNodeUntilANonZeroSize) {
  CONVEYOR_REQUIRE_GPU();
  buffers b(1200, 3601);
  pipeline p(b, 2.0F, 0.5F);
  conveyor::stream s;
  auto exec = conveyor::instantiate(p.g);
  // A copy of 0 bytes: the node does nothing (out keeps its stale values).
  exec.set_memcpy(p.copy_node, b.out.get(), b.y.get(), 0, cudaMemcpyDeviceToDevice);
  const auto stale = b.poison_out(3602);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(b.out.download(), stale));
  // A memset of 0 elements: y is not filled, so axpy accumulates on the previous y (= 2 x + 0.5).
  exec.set_memset(p.fill_node, b.y.get(), 0.5F, 0);
  exec.set_memcpy(p.copy_node, b.out.get(), b.y.get(), b.out.bytes(), cudaMemcpyDeviceToDevice); // enabled again
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(b.n);
  for (int i = 0; i < b.n; ++i) want[i] = 2.0F * b.x0[i] + (2.0F * b.x0[i] + 0.5F);
  EXPECT_TRUE(all_near(b.out.download(), want));
  // A non-zero memset enables the fill again.
  exec.set_memset(p.fill_node, b.y.get(), 0.5F, b.n);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(2.0F, b.x0, 0.5F)));
  // A whole-graph update also brings back the nodes a zero size disabled.
  exec.set_memcpy(p.copy_node, b.out.get(), b.y.get(), 0, cudaMemcpyDeviceToDevice);
  pipeline p2(b, 3.0F, 1.0F);
  ASSERT_TRUE(static_cast<bool>(exec.update_incremental(p2.g)));
  b.poison_out(3603);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(b.out.download(), pipeline_result(3.0F, b.x0, 1.0F)));
}

TEST(Instantiate, RelaunchOfAGraphThatNeverFreesNamesTheAllocationAndTheFix) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const auto v = random_floats(n, 3701);
  device_array<float> src(v), out(n);
  sync_device();
  conveyor::graph g;
  auto alloc = g.mem_alloc(n * sizeof(float));
  alloc.node.label("scratch");
  auto* tmp = static_cast<float*>(alloc.pointer);
  auto in = g.memcpy({alloc.node}, tmp, src.get(), src.bytes(), cudaMemcpyDeviceToDevice);
  auto k = g.kernel({in}, cover(n), scale, n, 2.0F, tmp);
  g.memcpy({k}, out.get(), tmp, out.bytes(), cudaMemcpyDeviceToDevice);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  ASSERT_EQ(exec.unfreed_allocations().size(), 1U);
  EXPECT_TRUE(contains(exec.unfreed_allocations()[0], "scratch")) << exec.unfreed_allocations()[0];
  EXPECT_TRUE(contains(exec.unfreed_allocations()[0], "4000 B")) << exec.unfreed_allocations()[0];
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(out.download(), scaled(v, 2.0F)));
  const std::source_location relaunch_site = std::source_location::current();
  try {
    exec.launch(s, relaunch_site);
    ADD_FAILURE() << "a second launch with the allocation still live succeeded";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_EQ(e.code(), cudaErrorInvalidValue);
    // The error names the public call and the test's line, not only the line inside the library.
    ASSERT_TRUE(e.api().has_value()) << e.what();
    EXPECT_EQ(e.api()->name, "conveyor::graph_exec::launch");
    EXPECT_EQ(e.api()->where.line(), relaunch_site.line());
    EXPECT_TRUE(contains(e.what(), std::string("test_update.cu:") + std::to_string(relaunch_site.line()) +
                                       ": conveyor::graph_exec::launch: cudaGraphLaunch failed"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "scratch")) << e.what();
    EXPECT_TRUE(contains(e.what(), "never frees")) << e.what();
    EXPECT_TRUE(contains(e.what(), "auto_free_on_launch")) << e.what();
  }
  // After freeing the allocation, it launches again.
  CONVEYOR_CHECK(cudaFreeAsync(alloc.pointer, s.get()));
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(out.download(), scaled(v, 2.0F)));
  CONVEYOR_CHECK(cudaFreeAsync(alloc.pointer, s.get()));
  s.synchronize();
  // With a free node, or auto_free_on_launch, nothing is reported.
  conveyor::graph freed;
  auto a2 = freed.mem_alloc(4096);
  freed.mem_free({a2.node}, a2.pointer);
  EXPECT_TRUE(conveyor::instantiate(freed).unfreed_allocations().empty());
}

namespace {

// An executable graph made later: empty until assigned, refused with the reason, and reset() destroys it at once
// (for graphs CUDA allows one executable graph of at a time, such as those with conditional nodes).
TEST(GraphExec, AnEmptyOneIsRefusedUntilAssignedAndResetFreesItsSlot) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graph_exec exec;
  EXPECT_TRUE(exec.empty());
  conveyor::stream s;
  try {
    exec.launch(s);
    FAIL() << "an empty executable graph launched";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("graph_exec::launch: this executable graph is empty"), std::string::npos);
  }
  EXPECT_THROW(exec.upload(s), std::logic_error);
  conveyor::test::device_array<int> counter(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 1, conveyor::condition_reset::each_launch);
  auto branch = conveyor::add_conditional(g, {}, conveyor::conditional_kind::if_then, cond);
  (void)branch.bodies[0].memset(counter.get(), 7, 1);
  exec = conveyor::instantiate(g);
  EXPECT_FALSE(exec.empty());
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(counter.download()[0], 7);
  // A second executable graph of a graph with a conditional node while the first lives: CUDA refuses it; after
  // reset() the slot is free.
  exec.reset();
  EXPECT_TRUE(exec.empty());
  exec = conveyor::instantiate(g);
  counter.upload({0});
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(counter.download()[0], 7);
}

} // namespace
