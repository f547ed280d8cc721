// The programmatic pass's decision (src/define/programmatic_plan.hpp) over plain node and edge lists: which edges
// become programmatic, which stay and why. No GPU needed.

#include "define/programmatic_plan.hpp"
#include "model/graph_state.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

using conveyor::edge_type;
using conveyor::node_kind;
using conveyor::detail::plan_edge;
using conveyor::detail::plan_node;
using conveyor::detail::plan_programmatic;

namespace {

plan_node kernel(const char* name, bool waits) { return {node_kind::kernel, waits, name}; }
plan_node of(node_kind kind, const char* name) { return {kind, false, name}; }

} // namespace

TEST(ProgrammaticPlan, ChangesFullEdgesBetweenKernelsIntoWaitingKernelsOnly) {
  const std::vector<plan_node> nodes{kernel("a", false), kernel("b", true),
                                     kernel("c", false), of(node_kind::memcpy, "copy"),
                                     kernel("d", true),  of(node_kind::memset, "m")};
  const std::vector<plan_edge> edges{{0, 1, edge_type::full},  // a -> b: b waits: change
                                     {1, 2, edge_type::full},  // b -> c: c does not wait
                                     {2, 3, edge_type::full},  // c -> copy: not into a kernel: not reported
                                     {3, 4, edge_type::full},  // copy -> d: predecessor is a memcpy
                                     {1, 4, edge_type::full},  // b -> d: change
                                     {4, 5, edge_type::full}}; // d -> memset: not reported
  const auto plan = plan_programmatic(nodes, edges);
  EXPECT_EQ(plan.change, (std::vector<std::size_t>{0, 4}));
  ASSERT_EQ(plan.left.size(), 2U);
  EXPECT_EQ(plan.left[0].first, 1U);
  EXPECT_NE(plan.left[0].second.find("c is not in the waiting set"), std::string::npos) << plan.left[0].second;
  EXPECT_EQ(plan.left[1].first, 3U);
  EXPECT_NE(plan.left[1].second.find("memcpy"), std::string::npos) << plan.left[1].second;
  EXPECT_EQ(plan.already, 0U);
}

TEST(ProgrammaticPlan, CountsTypedEdgesAndReportsUnnamedPorts) {
  const std::vector<plan_node> nodes{kernel("a", true), kernel("b", true), kernel("c", true)};
  const std::vector<plan_edge> edges{
      {0, 1, edge_type::programmatic}, {1, 2, edge_type::launch_completion}, {0, 2, std::nullopt}};
  const auto plan = plan_programmatic(nodes, edges);
  EXPECT_TRUE(plan.change.empty());
  EXPECT_EQ(plan.already, 2U);
  ASSERT_EQ(plan.left.size(), 1U);
  EXPECT_EQ(plan.left[0].first, 2U);
  EXPECT_NE(plan.left[0].second.find("ports"), std::string::npos);
}

TEST(ProgrammaticPlan, AnEdgeToAMissingNodeIsAnError) {
  const std::vector<plan_node> nodes{kernel("a", true)};
  EXPECT_THROW((void)plan_programmatic(nodes, {{0, 3, edge_type::full}}), std::out_of_range);
}

TEST(EdgeType, EdgeDataRoundTripsAndUnknownPortsAreNotNamed) {
  for (edge_type t : {edge_type::full, edge_type::programmatic, edge_type::launch_completion})
    EXPECT_EQ(conveyor::from_edge_data(conveyor::to_edge_data(t)), t) << conveyor::to_string(t);
  cudaGraphEdgeData odd{};
  odd.to_port = 1;
  EXPECT_EQ(conveyor::from_edge_data(odd), std::nullopt);
  odd = {};
  odd.type = cudaGraphDependencyTypeProgrammatic; // programmatic type on the default port: not valid in CUDA
  EXPECT_EQ(conveyor::from_edge_data(odd), std::nullopt);
}

// node_list keeps each dependency's type beside its node, inline (up to inline_capacity) and on the heap beyond,
// and copies keep them: no CUDA call (the handles are never dereferenced).
TEST(NodeList, TypedDependenciesInlineAndOnTheHeapSurviveCopies) {
  using conveyor::dependency;
  using conveyor::node_list;
  using conveyor::detail::access;
  auto fake = [](std::uintptr_t i) {
    return access::make_node(reinterpret_cast<cudaGraphNode_t>(0x1000 + 16 * i), nullptr);
  };
  for (std::size_t count : {std::size_t{3}, node_list::inline_capacity, node_list::inline_capacity + 5}) {
    std::vector<dependency> deps;
    for (std::size_t i = 0; i < count; ++i)
      deps.emplace_back(fake(i), i % 3 == 1 ? edge_type::programmatic
                                            : (i % 3 == 2 ? edge_type::launch_completion : edge_type::full));
    const node_list list(deps);
    const node_list copy = list; // NOLINT(performance-unnecessary-copy-initialization): the copy is under test
    for (const node_list* l : {&list, &copy}) {
      ASSERT_EQ(l->size(), count);
      EXPECT_TRUE(l->typed());
      for (std::size_t i = 0; i < count; ++i) {
        EXPECT_EQ(l->handles()[i], fake(i).get()) << count << " dependencies, entry " << i;
        EXPECT_EQ((*l)[i].get(), fake(i).get());
        EXPECT_EQ(l->type(i), deps[i].type) << count << " dependencies, entry " << i;
      }
    }
  }
  const node_list plain{fake(0), fake(1)};
  EXPECT_FALSE(plain.typed());
  EXPECT_EQ(plain.type(1), edge_type::full);
  const node_list all_full{dependency(fake(0)), dependency(fake(1))};
  EXPECT_FALSE(all_full.typed());
  EXPECT_THROW((void)node_list({dependency(fake(0)), dependency(conveyor::node{})}), std::invalid_argument);
}
