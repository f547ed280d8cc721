// Host-only tests of the node-kind table: every node_kind has its own entry (the table is complete), kinds are
// CUDA's values, and every facet of every entry agrees with CUDA's rules for the kind.
#include <conveyor/define/node_kind.hpp>

#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include <gtest/gtest.h>

#include <cstring>
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

// CUDA's rules for each kind (CUDA Runtime API reference, "Graph Management"; CUDA Programming Guide, "Conditional
// Graph Nodes" and "Device Graph Launch"), as sets of kinds: the facts the kind table must agree with.
struct cuda_rules {
  // cudaGraphExec*NodeSetParams exist (empty: nothing to set); memory, conditional and batch-memory-operation nodes
  // change only through a whole-graph update or a new instantiation.
  std::set<node_kind> per_node_setter{node_kind::kernel,
                                      node_kind::memcpy,
                                      node_kind::memset,
                                      node_kind::host,
                                      node_kind::child_graph,
                                      node_kind::empty,
                                      node_kind::event_wait,
                                      node_kind::event_record,
                                      node_kind::ext_semaphore_signal,
                                      node_kind::ext_semaphore_wait};
  std::set<node_kind> in_conditional_body{node_kind::kernel, node_kind::memcpy,      node_kind::memset,
                                          node_kind::empty,  node_kind::child_graph, node_kind::conditional};
  std::set<node_kind> in_device_graph{node_kind::kernel, node_kind::memcpy, node_kind::memset, node_kind::child_graph};
  std::set<node_kind> work{node_kind::kernel, node_kind::memcpy, node_kind::memset};
  // Device-graph rules only the CUDA graph shows: a copy may not involve a CUDA array, kernels on one device.
  std::set<node_kind> device_rules_in_parameters{node_kind::kernel, node_kind::memcpy};
  // Conveyor's own choices: typed builder calls, full comparisons, the fields rebinding patches, host memory the
  // capture checks look at, and graphs they walk into.
  std::set<node_kind> no_builder{node_kind::ext_semaphore_signal, node_kind::ext_semaphore_wait,
                                 node_kind::batch_mem_op, node_kind::other};
  std::set<node_kind> not_comparable{node_kind::batch_mem_op, node_kind::other};
  std::set<node_kind> patchable{node_kind::kernel, node_kind::memcpy, node_kind::memset};
  std::set<node_kind> holds_host_memory{node_kind::memcpy, node_kind::host};
  std::set<node_kind> embeds_a_graph{node_kind::child_graph};
  // Step-through runs these as graphs of their own; it steps into child graphs and conditional bodies, and cannot
  // run allocation nodes apart from their executable graph (CUDA reserves their addresses at instantiation).
  std::set<node_kind> runs_alone{node_kind::kernel,
                                 node_kind::memcpy,
                                 node_kind::memset,
                                 node_kind::host,
                                 node_kind::empty,
                                 node_kind::event_record,
                                 node_kind::event_wait,
                                 node_kind::ext_semaphore_signal,
                                 node_kind::ext_semaphore_wait};
  // Graph files (docs/graph-files.md): kinds saved with a stated meaning; the others are refused at save with a reason
  // and a fix (external semaphores are another API's handles; batch memory operations cannot be read back).
  std::set<node_kind> saved_in_files{node_kind::kernel,     node_kind::memcpy,       node_kind::memset,
                                     node_kind::host,       node_kind::child_graph,  node_kind::empty,
                                     node_kind::event_wait, node_kind::event_record, node_kind::mem_alloc,
                                     node_kind::mem_free,   node_kind::conditional};
};

// Every entry of the kind table, facet by facet, against CUDA's rules.
TEST(NodeKinds, EveryEntryOfTheTableAgreesWithCudasRules) {
  const cuda_rules rules;
  for (node_kind k : conveyor::all_node_kinds) {
    const conveyor::detail::kind_traits& t = conveyor::detail::traits_of(k);
    SCOPED_TRACE(std::string(t.name));
    const auto in = [&](const std::set<node_kind>& s) { return s.contains(k); };
    EXPECT_EQ(t.kind, k);
    EXPECT_EQ(t.copy_to_exec != nullptr, in(rules.per_node_setter));
    EXPECT_EQ(t.allowed_in_body, in(rules.in_conditional_body));
    EXPECT_EQ(t.device_launch.refusal.empty(), in(rules.in_device_graph));
    EXPECT_EQ(t.device_launch.fix.empty(), t.device_launch.refusal.empty()) << "a refusal without its fix";
    EXPECT_EQ(t.device_launch_check != nullptr, in(rules.device_rules_in_parameters));
    EXPECT_EQ(t.work, in(rules.work));
    EXPECT_EQ(t.has_builder, !in(rules.no_builder));
    EXPECT_EQ(t.comparable, !in(rules.not_comparable));
    EXPECT_NE(t.compare, nullptr);
    EXPECT_NE(t.describe, nullptr);
    EXPECT_EQ(t.read_fields != nullptr, in(rules.patchable));
    EXPECT_EQ(t.set_fields != nullptr, in(rules.patchable));
    EXPECT_EQ(t.field_name != nullptr, in(rules.patchable));
    if (t.field_name != nullptr) {
      EXPECT_FALSE(t.field_name(0).empty());
      EXPECT_NE(t.field_name(0), t.field_name(1));
    }
    EXPECT_EQ(t.host_addresses != nullptr, in(rules.holds_host_memory));
    EXPECT_EQ(t.embedded_graph != nullptr, in(rules.embeds_a_graph));
    EXPECT_EQ(t.add_copy != nullptr, in(rules.runs_alone));
    ASSERT_NE(t.keep, nullptr) << "every kind says how graph files treat it";
    EXPECT_EQ(t.keep->save != nullptr, in(rules.saved_in_files));
    EXPECT_EQ(t.keep->load != nullptr, in(rules.saved_in_files));
    EXPECT_EQ(t.keep->describe != nullptr, in(rules.saved_in_files));
    EXPECT_EQ(t.keep->compare != nullptr, in(rules.saved_in_files));
    EXPECT_EQ(t.keep->refusal.empty(), in(rules.saved_in_files)) << "a refused kind needs its reason";
    EXPECT_EQ(t.keep->fix.empty(), t.keep->refusal.empty()) << "a refusal without its fix";
    ASSERT_EQ(t.dot_colour.size(), 7U);
    EXPECT_EQ(t.dot_colour[0], '#');
    EXPECT_EQ(t.dot_colour.find_first_not_of("0123456789abcdef", 1), std::string_view::npos) << t.dot_colour;
    // The public view is the same entry.
    const auto s = conveyor::support_of(k);
    EXPECT_EQ(s.builder, t.has_builder);
    EXPECT_EQ(s.comparable, t.comparable);
    EXPECT_EQ(s.settable_per_node, t.copy_to_exec != nullptr);
    EXPECT_EQ(s.allowed_in_conditional_body, t.allowed_in_body);
  }
}

// What a kernel node made without attributes holds for `id`.
cudaLaunchAttributeValue made_without(cudaLaunchAttributeID id) {
  cudaLaunchAttributeValue v;
  std::memset(&v, 0, sizeof v);
  if (id == cudaLaunchAttributeMemSyncDomainMap) v.memSyncDomainMap.remote = 1;
  return v;
}

// made_without(id) with its field number `which` (0-2; unchanged past the attribute's fields) set to another value.
cudaLaunchAttributeValue one_field_changed(cudaLaunchAttributeID id, int which) {
  cudaLaunchAttributeValue v = made_without(id);
  switch (id) {
  case cudaLaunchAttributeAccessPolicyWindow:
    if (which == 0) v.accessPolicyWindow.num_bytes = 4096;
    if (which == 1) v.accessPolicyWindow.hitRatio = 0.5F;
    if (which == 2) v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    break;
  case cudaLaunchAttributeCooperative: v.cooperative = 1; break;
  case cudaLaunchAttributeClusterDimension: v.clusterDim.x = which == 0 ? 2 : 1; break;
  case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    v.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
    break;
  case cudaLaunchAttributePriority: v.priority = which == 0 ? -1 : 3; break;
  case cudaLaunchAttributeMemSyncDomainMap:
    if (which == 0) v.memSyncDomainMap.remote = 0;
    if (which == 1) v.memSyncDomainMap.default_ = 1;
    break;
  case cudaLaunchAttributeMemSyncDomain: v.memSyncDomain = cudaLaunchMemSyncDomainRemote; break;
  case cudaLaunchAttributePreferredClusterDimension: v.preferredClusterDim.y = 2; break;
  case cudaLaunchAttributeDeviceUpdatableKernelNode: v.deviceUpdatableKernelNode.deviceUpdatable = 1; break;
  case cudaLaunchAttributePreferredSharedMemoryCarveout: v.sharedMemCarveout = 50; break;
  default: break;
  }
  return v;
}

// A snapshot stores a kernel node's launch attribute only when it differs from what a node made without attributes
// holds (attribute_holds_default, field by field, no default value built); diff compares stored values with
// same_attribute_value. The two must agree for every attribute, or a snapshot would drop a change diff would see.
TEST(LaunchAttributes, TheDefaultTestAgreesWithTheComparisonForEveryAttribute) {
  const cudaLaunchAttributeID ids[] = {
      cudaLaunchAttributeAccessPolicyWindow,
      cudaLaunchAttributeCooperative,
      cudaLaunchAttributeClusterDimension,
      cudaLaunchAttributeClusterSchedulingPolicyPreference,
      cudaLaunchAttributePriority,
      cudaLaunchAttributeMemSyncDomainMap,
      cudaLaunchAttributeMemSyncDomain,
      cudaLaunchAttributePreferredClusterDimension,
      cudaLaunchAttributeDeviceUpdatableKernelNode,
      cudaLaunchAttributePreferredSharedMemoryCarveout,
  };
  for (cudaLaunchAttributeID id : ids) {
    SCOPED_TRACE(static_cast<int>(id));
    const cudaLaunchAttributeValue none = made_without(id);
    EXPECT_TRUE(conveyor::detail::attribute_holds_default(id, none));
    EXPECT_TRUE(conveyor::detail::same_attribute_value(id, none, none));
    for (int which = 0; which < 3; ++which) {
      const cudaLaunchAttributeValue v = one_field_changed(id, which);
      const bool differs = std::memcmp(&v, &none, sizeof v) != 0;
      EXPECT_EQ(conveyor::detail::attribute_holds_default(id, v), !differs) << "field " << which;
      EXPECT_EQ(conveyor::detail::same_attribute_value(id, v, none), !differs) << "field " << which;
    }
    // Bytes of the union no field of a known attribute covers are not compared.
    cudaLaunchAttributeValue padded = none;
    reinterpret_cast<unsigned char*>(&padded)[sizeof padded - 1] = 0xAB;
    EXPECT_TRUE(conveyor::detail::attribute_holds_default(id, padded));
    EXPECT_TRUE(conveyor::detail::same_attribute_value(id, padded, none));
  }
}

} // namespace
