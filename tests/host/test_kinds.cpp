// Host-only tests of the node-kind table: every node_kind has its own entry (the table is complete), kinds are
// CUDA's values, and what each kind supports is what the library does with it.
#include <conveyor/define/node_kind.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

using conveyor::node_kind;

TEST(NodeKinds, EveryKindHasItsOwnEntryWithAUniqueName) {
  std::set<std::string> names;
  for (node_kind k : conveyor::all_node_kinds) {
    const auto s = conveyor::support_of(k);
    EXPECT_EQ(s.kind, k) << "kind " << static_cast<int>(k) << " falls back to another entry";
    EXPECT_EQ(s.name, conveyor::to_string(k));
    EXPECT_FALSE(s.name.empty());
    EXPECT_TRUE(names.insert(std::string(s.name)).second) << "duplicate name " << s.name;
  }
  EXPECT_EQ(names.size(), conveyor::all_node_kinds.size());
}

TEST(NodeKinds, ValuesAreCudasOwnAndConvertBothWays) {
  EXPECT_EQ(static_cast<int>(node_kind::kernel), static_cast<int>(cudaGraphNodeTypeKernel));
  EXPECT_EQ(static_cast<int>(node_kind::child_graph), static_cast<int>(cudaGraphNodeTypeGraph));
  EXPECT_EQ(static_cast<int>(node_kind::mem_free), static_cast<int>(cudaGraphNodeTypeMemFree));
  EXPECT_EQ(static_cast<int>(node_kind::conditional), static_cast<int>(cudaGraphNodeTypeConditional));
  for (node_kind k : conveyor::all_node_kinds) {
    if (k == node_kind::other) continue;
    EXPECT_EQ(conveyor::to_node_kind(static_cast<cudaGraphNodeType>(k)), k) << conveyor::to_string(k);
  }
  EXPECT_EQ(conveyor::to_node_kind(static_cast<cudaGraphNodeType>(99)), node_kind::other);
  EXPECT_EQ(conveyor::support_of(static_cast<node_kind>(99)).kind, node_kind::other);
}

TEST(NodeKinds, SupportMatchesWhatCudaAllows) {
  struct expected {
    node_kind kind;
    bool builder, comparable, settable, in_body;
  };
  // Per-node setters exist for kernel, memcpy, memset, host, child-graph, event and external-semaphore nodes
  // (cudaGraphExec*SetParams); memory, conditional and batch-memory-operation nodes change only through a
  // whole-graph update or a new instantiation. Conditional bodies allow kernel, memcpy, memset, empty, child-graph
  // and conditional nodes.
  const expected table[] = {
      {node_kind::kernel, true, true, true, true},
      {node_kind::memcpy, true, true, true, true},
      {node_kind::memset, true, true, true, true},
      {node_kind::host, true, true, true, false},
      {node_kind::child_graph, true, true, true, true},
      {node_kind::empty, true, true, true, true},
      {node_kind::event_wait, true, true, true, false},
      {node_kind::event_record, true, true, true, false},
      {node_kind::ext_semaphore_signal, false, true, true, false},
      {node_kind::ext_semaphore_wait, false, true, true, false},
      {node_kind::mem_alloc, true, true, false, false},
      {node_kind::mem_free, true, true, false, false},
      {node_kind::batch_mem_op, false, false, false, false},
      {node_kind::conditional, true, true, false, true},
      {node_kind::other, false, false, false, false},
  };
  ASSERT_EQ(std::size(table), conveyor::all_node_kinds.size());
  for (const auto& e : table) {
    const auto s = conveyor::support_of(e.kind);
    SCOPED_TRACE(std::string(s.name));
    EXPECT_EQ(s.builder, e.builder);
    EXPECT_EQ(s.comparable, e.comparable);
    EXPECT_EQ(s.settable_per_node, e.settable);
    EXPECT_EQ(s.allowed_in_conditional_body, e.in_body);
  }
}

} // namespace
