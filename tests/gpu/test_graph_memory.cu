// GPU tests of graph memory (conveyor/runtime/graph_memory.hpp, graph::mem_alloc with allocation_options, graphed's
// byte budget): the graph allocator's accounting follows an allocation node and trim gives the memory back; an
// allocation on an explicit device carries its pool properties and refuses bad devices and peers (and, with two GPUs,
// a peer device's kernel writes into it); graphed evicts least-recently-used graphs by the bytes of their allocations
// and reports what each cached graph holds, its results equal to eager calls. Each test skips without a CUDA device.
#include "gpu/gpu_test_util.hpp"
#include "support/gpu.hpp"

#include <conveyor/conveyor.hpp>
#include <conveyor/runtime/graph_memory.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using conveyor::test::all_equal;
using conveyor::test::device_array;

constexpr std::size_t mib = std::size_t{1} << 20;

// out[i] = seed * 7 + i for i < n.
__global__ void stamp(int n, int seed, int* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = seed * 7 + i;
}

// A graph that allocates `bytes`, stamps its first 256 ints, copies them to `out` and frees the allocation.
conveyor::graph allocating_graph(std::size_t bytes, int seed, int* out,
                                 const conveyor::allocation_options& where = {}) {
  conveyor::graph g;
  const auto a = g.mem_alloc({}, bytes, where);
  const auto k = g.kernel({a.node}, {dim3(1), dim3(256)}, stamp, 256, seed, a.as<int>());
  const auto c = g.memcpy({k}, out, a.pointer, 256 * sizeof(int), cudaMemcpyDeviceToDevice);
  (void)g.mem_free({c}, a.pointer);
  return g;
}

std::vector<int> stamped(int seed) {
  std::vector<int> v(256);
  for (int i = 0; i < 256; ++i) v[static_cast<std::size_t>(i)] = seed * 7 + i;
  return v;
}

TEST(GraphMemory, AccountingFollowsAnAllocationNodeAndTrimGivesItBack) {
  CONVEYOR_REQUIRE_GPU();
  const int dev = conveyor::current_device();
  const std::size_t bytes = 64 * mib;
  device_array<int> out(256);
  conveyor::stream s;
  conveyor::trim_graph_memory(dev);
  conveyor::reset_graph_memory_high_water(dev);
  conveyor::graph_memory_usage during;
  {
    conveyor::graph g = allocating_graph(bytes, 3, out.get());
    auto exec = conveyor::instantiate(g);
    exec.launch(s);
    s.synchronize();
    during = conveyor::graph_memory(dev);
    EXPECT_TRUE(all_equal(out.download(), stamped(3)));
  } // the executable graph is gone: nothing uses its memory any more
  EXPECT_GE(during.used_high, bytes);
  EXPECT_GE(during.reserved, bytes);
  EXPECT_GE(during.reserved_high, during.reserved);
  conveyor::trim_graph_memory(dev);
  const auto after = conveyor::graph_memory(dev);
  EXPECT_LT(after.reserved, during.reserved) << "trim gave nothing back";
  conveyor::reset_graph_memory_high_water(dev);
  const auto reset = conveyor::graph_memory(dev);
  EXPECT_LE(reset.used_high, during.used_high);
  EXPECT_LE(reset.reserved_high, during.reserved_high);
  EXPECT_THROW((void)conveyor::graph_memory(conveyor::device_count()), conveyor::cuda_error);
}

// A graph holding memory allocation or free nodes as a child graph: CUDA refuses it, and the error names the rule,
// the node and the fix instead of passing CUDA's bare error on.
TEST(GraphMemory, AChildGraphWithMemoryNodesNamesTheRuleTheNodeAndTheFix) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graph body;
  const conveyor::allocation a = body.mem_alloc(1 << 20);
  (void)body.mem_free({a.node}, a.pointer);
  conveyor::graph parent;
  try {
    (void)parent.child(body);
    FAIL() << "CUDA accepted a child graph with memory nodes";
  } catch (const conveyor::cuda_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not allow a graph that holds memory allocation or free nodes as a child graph"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("node 0"), std::string::npos) << what;
    EXPECT_NE(what.find("graph::mem_alloc"), std::string::npos) << what;
  }
  EXPECT_EQ(parent.node_count(), 0U);
}

TEST(GraphMemory, AllocationOnAnExplicitDeviceCarriesItsPoolProperties) {
  CONVEYOR_REQUIRE_GPU();
  const int dev = conveyor::current_device();
  device_array<int> out(256);
  conveyor::stream s;
  conveyor::allocation_options where;
  where.device = dev;
  {
    conveyor::graph g = allocating_graph(4 * mib, 11, out.get(), where);
    const auto nodes = g.root_nodes();
    ASSERT_EQ(nodes.size(), 1U);
    cudaMemAllocNodeParams p{};
    CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(nodes[0].get(), &p));
    EXPECT_EQ(p.poolProps.location.type, cudaMemLocationTypeDevice);
    EXPECT_EQ(p.poolProps.location.id, dev);
    EXPECT_EQ(p.poolProps.allocType, cudaMemAllocationTypePinned);
    EXPECT_EQ(p.accessDescCount, 0U);
    EXPECT_EQ(p.bytesize, 4 * mib);
    auto exec = conveyor::instantiate(g);
    exec.launch(s);
    s.synchronize();
    EXPECT_TRUE(all_equal(out.download(), stamped(11)));
  }
  conveyor::graph g;
  EXPECT_THROW((void)g.mem_alloc({}, mib, {.device = conveyor::device_count()}), std::invalid_argument);
  EXPECT_THROW((void)g.mem_alloc({}, mib, {.device = dev, .peers = {{dev, false}}}), std::invalid_argument);
  EXPECT_THROW((void)g.mem_alloc({}, mib, {.device = dev, .peers = {{-1, false}}}), std::invalid_argument);
  EXPECT_EQ(g.node_count(), 0U); // nothing added by the refused calls
}

TEST(GraphMemory, APeerDeviceWritesIntoAnAllocationOnAnotherDevice) {
  CONVEYOR_REQUIRE_GPUS(2);
  int possible = 0;
  CONVEYOR_CHECK(cudaDeviceCanAccessPeer(&possible, 0, 1));
  if (possible == 0) GTEST_SKIP() << "device 0 cannot access device 1's memory";
  const conveyor::device_guard on(0);
  device_array<int> out(256); // on device 0
  conveyor::stream s;         // on device 0
  {
    conveyor::graph g = allocating_graph(4 * mib, 5, out.get(), {.device = 1, .peers = {{0, false}}});
    cudaMemAllocNodeParams p{};
    CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(g.root_nodes().at(0).get(), &p));
    EXPECT_EQ(p.poolProps.location.id, 1);
    ASSERT_EQ(p.accessDescCount, 1U);
    EXPECT_EQ(p.accessDescs[0].location.id, 0);
    auto exec = conveyor::instantiate(g);
    exec.launch(s);
    s.synchronize();
  }
  EXPECT_TRUE(all_equal(out.download(), stamped(5)));
  conveyor::graph g;
  EXPECT_THROW((void)g.mem_alloc({}, mib, {.device = 1, .peers = {{0, false}, {0, true}}}), std::invalid_argument);
}

// A graphed step that allocates `n` × 2 MiB with cudaMallocAsync (a mem_alloc node once captured), stamps it, copies
// 256 ints out and frees it.
void allocating_step(const conveyor::stream& s, int n, int* out) {
  int* scratch = nullptr;
  CONVEYOR_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), static_cast<std::size_t>(n) * 2 * mib, s.get()));
  stamp<<<1, 256, 0, s.get()>>>(256, n, scratch);
  conveyor::check_launch("stamp");
  CONVEYOR_CHECK(cudaMemcpyAsync(out, scratch, 256 * sizeof(int), cudaMemcpyDeviceToDevice, s.get()));
  CONVEYOR_CHECK(cudaFreeAsync(scratch, s.get()));
}

TEST(GraphedBudget, EvictsByTheBytesOfTheGraphsAllocationsAndSaysWhatEachHolds) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(256);
  device_array<int> want(256);
  conveyor::stream s;
  conveyor::graphed_options o;
  o.warmup_calls = 0;
  o.max_bytes = 8 * mib;
  o.trim_on_evict = true;
  conveyor::graphed step(allocating_step, o);
  for (const int n : {1, 2, 3, 1, 3}) { // 2, 4, 6, 2, 6 MiB
    step(s, n, out.get());
    allocating_step(s, n, want.get());
    s.synchronize();
    EXPECT_TRUE(all_equal(out.download(), want.download())) << "n = " << n;
  }
  // 2 + 4 held; 6 more needs 12 > 8: both evicted (least recently used first); then 2 + 6 = 8 fits; 6 replays.
  const auto& st = step.statistics();
  EXPECT_EQ(st.budget_evictions, 2U) << step.report();
  EXPECT_EQ(st.evictions, 2U) << step.report();
  EXPECT_EQ(st.instantiations, 4U) << step.report();
  EXPECT_EQ(st.replays, 5U) << step.report();
  EXPECT_EQ(st.held_bytes, 8 * mib) << step.report();
  const auto held = step.cached();
  ASSERT_EQ(held.size(), 2U);
  EXPECT_EQ(held[0].shape, "0=3"); // most recently used first
  EXPECT_EQ(held[0].allocations, 1U);
  EXPECT_EQ(held[0].allocation_bytes, 6 * mib);
  EXPECT_EQ(held[0].last_call, 5U);
  EXPECT_EQ(held[1].shape, "0=1");
  EXPECT_EQ(held[1].allocation_bytes, 2 * mib);
  const std::string report = step.report("allocating");
  EXPECT_NE(report.find("graph for shape (0=3): 4 nodes, 1 graph allocation(s) of 6.0 MiB, last used at call 5"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("the cached graphs hold 8.0 MiB of graph allocations (budget 8.0 MiB); 2 evicted for the "
                        "budget"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("evicted the least recently used graph holding 2.0 MiB of graph allocations (byte budget "
                        "8.0 MiB: 6.0 MiB held, 6.0 MiB more wanted)"),
            std::string::npos)
      << report;
}

} // namespace
