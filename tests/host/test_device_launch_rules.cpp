// The device-launch rules (conveyor/execute/device_graph.hpp) over plain graph descriptions, without a GPU: every
// node kind CUDA refuses in a device graph is named with its node and a fix, child graphs are checked inside, an
// empty graph and copies of pageable host memory are refused, and graphs that keep the rules pass. The same header
// compiles in a plain C++ translation unit (g++).
#include <conveyor/execute/device_graph.hpp>

#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

namespace {

using conveyor::device_launch_violations;
using conveyor::graph_description;
using conveyor::node_description;
using conveyor::node_kind;

node_description make_node(std::size_t id, node_kind kind, std::string label = {}) {
  node_description n;
  n.id = id;
  n.kind = kind;
  n.label = std::move(label);
  return n;
}

//! kernel -> memcpy (DtoD) -> memset: a graph CUDA launches from the device.
graph_description launchable() {
  graph_description d;
  d.nodes.push_back(make_node(0, node_kind::kernel));
  d.nodes[0].kernel_name = "scale";
  d.nodes.push_back(make_node(1, node_kind::memcpy, "copy back"));
  d.nodes[1].copy_kind = "DtoD";
  d.nodes[1].bytes = 4096;
  d.nodes.push_back(make_node(2, node_kind::memset));
  d.edges = {{0, 1}, {1, 2}};
  return d;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DeviceLaunchRules, KernelMemcpyMemsetAndChildGraphsPass) {
  auto d = launchable();
  node_description child = make_node(3, node_kind::child_graph, "inner");
  child.bodies.push_back(launchable());
  d.nodes.push_back(child);
  EXPECT_TRUE(device_launch_violations(d).empty());
  EXPECT_NO_THROW(conveyor::check_device_launchable(d));
}

TEST(DeviceLaunchRules, EveryKindOtherThanKernelMemcpyMemsetChildIsRefusedWithItsNodeAndAFix) {
  for (const node_kind kind : conveyor::all_node_kinds) {
    auto d = launchable();
    d.nodes.push_back(make_node(3, kind, "the node"));
    d.edges.emplace_back(2, 3);
    const auto v = device_launch_violations(d);
    const bool allowed = kind == node_kind::kernel || kind == node_kind::memcpy || kind == node_kind::memset ||
                         kind == node_kind::child_graph;
    if (allowed) {
      EXPECT_TRUE(v.empty()) << to_string(kind) << ": " << (v.empty() ? "" : v[0].message());
      continue;
    }
    ASSERT_EQ(v.size(), 1U) << to_string(kind);
    EXPECT_EQ(v[0].kind, kind);
    EXPECT_EQ(v[0].where, "node 3 'the node' (" + std::string(to_string(kind)) + ")");
    EXPECT_TRUE(contains(v[0].rule, "cannot be in a device graph") || contains(v[0].rule, "cannot be checked"))
        << v[0].rule;
    EXPECT_TRUE(contains(v[0].rule, "kernel, memcpy, memset and child-graph")) << v[0].rule;
    EXPECT_FALSE(v[0].fix.empty()) << to_string(kind);
  }
}

TEST(DeviceLaunchRules, HostNodeMessageNamesTheNodeTheRuleAndTheFix) {
  auto d = launchable();
  d.nodes.push_back(make_node(3, node_kind::host, "log step"));
  try {
    conveyor::check_device_launchable(d);
    FAIL() << "a host node was accepted";
  } catch (const conveyor::device_launch_error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "conveyor: this graph cannot be launched from the device (1 rule broken)")) << what;
    EXPECT_TRUE(contains(what, "node 3 'log step' (host): a host node cannot be in a device graph")) << what;
    EXPECT_TRUE(contains(what, "fix: do the host work in a host graph")) << what;
    ASSERT_EQ(e.violations().size(), 1U);
    EXPECT_EQ(e.violations()[0].kind, node_kind::host);
  }
}

TEST(DeviceLaunchRules, MemoryNodesEventsAndConditionalsAreEachListed) {
  graph_description d;
  d.nodes.push_back(make_node(0, node_kind::mem_alloc));
  d.nodes.push_back(make_node(1, node_kind::kernel));
  d.nodes.push_back(make_node(2, node_kind::mem_free));
  d.nodes.push_back(make_node(3, node_kind::event_record, "done"));
  d.nodes.push_back(make_node(4, node_kind::conditional, "loop"));
  d.edges = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  const auto v = device_launch_violations(d);
  ASSERT_EQ(v.size(), 4U);
  EXPECT_EQ(v[0].where, "node 0 (mem_alloc)");
  EXPECT_TRUE(contains(v[0].fix, "allocate before instantiating")) << v[0].fix;
  EXPECT_EQ(v[1].where, "node 2 (mem_free)");
  EXPECT_EQ(v[2].where, "node 3 'done' (event_record)");
  EXPECT_EQ(v[3].where, "node 4 'loop' (conditional)");
  EXPECT_TRUE(contains(v[3].fix, "add_relaunch")) << v[3].fix;
  try {
    conveyor::check_device_launchable(d);
    FAIL() << "accepted";
  } catch (const conveyor::device_launch_error& e) {
    EXPECT_TRUE(contains(e.what(), "(4 rules broken)")) << e.what();
    EXPECT_EQ(e.violations().size(), 4U);
  }
}

TEST(DeviceLaunchRules, AViolationInsideAChildGraphNamesThePathToIt) {
  graph_description inner = launchable();
  inner.nodes.push_back(make_node(3, node_kind::host, "print"));
  graph_description d = launchable();
  node_description child = make_node(3, node_kind::child_graph, "body");
  child.bodies.push_back(inner);
  d.nodes.push_back(child);
  const auto v = device_launch_violations(d);
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].where, "node 3 'body' (child_graph) > node 3 'print' (host)");
  EXPECT_EQ(v[0].kind, node_kind::host);
}

TEST(DeviceLaunchRules, ConditionalBodiesAreNotReportedAgain) {
  graph_description body;
  body.nodes.push_back(make_node(0, node_kind::host));
  graph_description d = launchable();
  node_description loop = make_node(3, node_kind::conditional);
  loop.bodies.push_back(body);
  d.nodes.push_back(loop);
  const auto v = device_launch_violations(d);
  ASSERT_EQ(v.size(), 1U); // the conditional node itself; its body goes with it
  EXPECT_EQ(v[0].kind, node_kind::conditional);
}

TEST(DeviceLaunchRules, CopyOfPageableHostMemoryIsRefusedWithItsDirectionAndSize) {
  auto d = launchable();
  d.nodes[1].pageable_host = true;
  d.nodes[1].copy_kind = "HtoD";
  const auto v = device_launch_violations(d);
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].where, "node 1 'copy back' (memcpy)");
  EXPECT_TRUE(contains(v[0].rule, "pageable host memory")) << v[0].rule;
  EXPECT_TRUE(contains(v[0].rule, "HtoD, 4096 bytes")) << v[0].rule;
  EXPECT_TRUE(contains(v[0].fix, "cudaMallocHost")) << v[0].fix;
}

TEST(DeviceLaunchRules, PinnedHostCopyPasses) {
  auto d = launchable();
  d.nodes[1].copy_kind = "HtoD"; // pinned: pageable_host stays false
  EXPECT_TRUE(device_launch_violations(d).empty());
}

TEST(DeviceLaunchRules, AGraphWithoutKernelMemcpyOrMemsetIsRefused) {
  graph_description empty;
  auto v = device_launch_violations(empty);
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].where, "");
  EXPECT_TRUE(contains(v[0].message(), "graph: a device graph must hold at least one kernel, memcpy or memset node"))
      << v[0].message();

  // Only a child graph holding only a child graph that holds nothing: still no work.
  graph_description outer;
  node_description child = make_node(0, node_kind::child_graph);
  child.bodies.push_back(graph_description{});
  outer.nodes.push_back(child);
  v = device_launch_violations(outer);
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].where, "");

  // Work inside a child graph counts.
  outer.nodes[0].bodies[0] = launchable();
  EXPECT_TRUE(device_launch_violations(outer).empty());
}

TEST(DeviceLaunchRules, KernelNodeNamedByItsKernelWhenUnlabelled) {
  graph_description d;
  d.nodes.push_back(make_node(0, node_kind::kernel));
  d.nodes[0].kernel_name = "step";
  d.nodes.push_back(make_node(1, node_kind::empty));
  const auto v = device_launch_violations(d);
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].where, "node 1 (empty)");
  EXPECT_TRUE(contains(v[0].rule, "size 0")) << v[0].rule; // says where Conveyor adds empty nodes itself
}

TEST(DeviceLaunchRules, HandlesKernelsTakeArePlainValues) {
  static_assert(std::is_trivially_copyable_v<conveyor::device_graph_ref>);
  static_assert(std::is_trivially_copyable_v<conveyor::device_node>);
  static_assert(sizeof(conveyor::device_graph_ref) == sizeof(void*));
  EXPECT_EQ(conveyor::device_graph_ref{}.exec, nullptr);
  EXPECT_EQ(conveyor::device_node{}.handle, nullptr);
}

} // namespace
