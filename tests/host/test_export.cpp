// Host-only tests of the export formats and statistics, on hand-made graph descriptions (no GPU needed).
#include <conveyor/observe/export.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

using conveyor::graph_description;
using conveyor::node_description;
using conveyor::node_kind;

node_description make(std::size_t id, node_kind kind, std::string label = {}) {
  node_description n;
  n.id = id;
  n.kind = kind;
  n.label = std::move(label);
  return n;
}

// gather -> {gemm, copy} -> loss, plus a child graph hanging off loss: depth 4 (gather, gemm, loss, child), width 2.
graph_description diamond() {
  graph_description d;
  auto gather = make(0, node_kind::kernel, "gather \"batch\"");
  gather.kernel_name = "gather_rows";
  gather.grid = {128, 1, 1};
  gather.block = {256, 1, 1};
  auto gemm = make(1, node_kind::kernel);
  gemm.kernel_name = "sm90_xmma_gemm";
  gemm.grid = {4, 2, 1};
  gemm.block = {128, 1, 1};
  gemm.shared_bytes = 49152;
  auto copy = make(2, node_kind::memcpy, "labels");
  copy.bytes = 3 * 1024 * 1024;
  copy.copy_kind = "HtoD";
  auto loss = make(3, node_kind::memset);
  loss.bytes = 512;
  auto child = make(4, node_kind::child_graph, "optimizer");
  graph_description body;
  body.nodes = {make(0, node_kind::kernel, "adam"), make(1, node_kind::host, "log")};
  body.edges = {{0, 1}};
  child.bodies.push_back(body);
  d.nodes = {gather, gemm, copy, loss, child};
  d.edges = {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}};
  return d;
}

TEST(Statistics, CountsDepthWidthAndKinds) {
  auto s = conveyor::statistics(diamond());
  EXPECT_EQ(s.nodes, 5U);
  EXPECT_EQ(s.edges, 5U);
  EXPECT_EQ(s.nested_nodes, 2U);
  EXPECT_EQ(s.depth, 4U);
  EXPECT_EQ(s.width, 2U);
  EXPECT_EQ(s.by_kind.at(node_kind::kernel), 2U);
  EXPECT_EQ(s.by_kind.at(node_kind::memcpy), 1U);
  EXPECT_EQ(s.memcpy_bytes, 3U * 1024 * 1024);
}

TEST(Statistics, RejectsCycleAndOutOfRangeEdge) {
  auto d = diamond();
  d.edges.emplace_back(3, 0);
  EXPECT_THROW((void)conveyor::statistics(d), std::invalid_argument);
  auto e = diamond();
  e.edges.emplace_back(1, 9);
  try {
    (void)conveyor::statistics(e);
    FAIL() << "an edge to node 9 of 5 was accepted";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("out of range"), std::string::npos) << err.what();
  }
}

TEST(Dot, NamesKindsShapesAndEscapes) {
  const std::string dot = conveyor::to_dot(diamond(), "step");
  EXPECT_EQ(dot.rfind("digraph \"step\" {", 0), 0U) << dot;
  EXPECT_NE(dot.find("gather \\\"batch\\\""), std::string::npos) << "quotes in labels must be escaped:\n" << dot;
  EXPECT_NE(dot.find("grid 128x1x1 block 256x1x1"), std::string::npos) << dot;
  EXPECT_NE(dot.find("sm90_xmma_gemm"), std::string::npos) << dot;
  EXPECT_NE(dot.find("smem 48.00 KiB"), std::string::npos) << dot;
  EXPECT_NE(dot.find("memcpy HtoD 3.00 MiB"), std::string::npos) << dot;
  EXPECT_NE(dot.find("memset 512 B"), std::string::npos) << dot;
  EXPECT_NE(dot.find("subgraph cluster_n4_0"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n4_0_0 -> n4_0_1;"), std::string::npos) << dot;
  for (const char* edge : {"n0 -> n1;", "n0 -> n2;", "n1 -> n3;", "n2 -> n3;", "n3 -> n4;"})
    EXPECT_NE(dot.find(edge), std::string::npos) << edge << " missing in\n" << dot;
  EXPECT_EQ(dot.back(), '\n');
  EXPECT_EQ(dot[dot.size() - 2], '}');
}

TEST(Json, RoundTripsNodesEdgesAndStatistics) {
  const auto j = nlohmann::json::parse(conveyor::to_json(diamond()));
  ASSERT_EQ(j.at("nodes").size(), 5U);
  EXPECT_EQ(j.at("edges").size(), 5U);
  EXPECT_EQ(j.at("edges")[1], nlohmann::json::array({0, 2}));
  const auto& gemm = j.at("nodes")[1];
  EXPECT_EQ(gemm.at("kind"), "kernel");
  EXPECT_EQ(gemm.at("name"), "sm90_xmma_gemm");
  EXPECT_EQ(gemm.at("grid"), nlohmann::json::array({4, 2, 1}));
  EXPECT_EQ(gemm.at("shared_bytes"), 49152);
  EXPECT_EQ(j.at("nodes")[2].at("bytes"), 3 * 1024 * 1024);
  EXPECT_EQ(j.at("nodes")[2].at("copy_kind"), "HtoD");
  EXPECT_FALSE(j.at("nodes")[2].contains("grid"));
  const auto& body = j.at("nodes")[4].at("bodies")[0];
  EXPECT_EQ(body.at("nodes")[1].at("kind"), "host");
  EXPECT_EQ(j.at("statistics").at("depth"), 4);
  EXPECT_EQ(j.at("statistics").at("by_kind").at("kernel"), 2);
}

TEST(NodeDescription, DisplayNamePrefersLabelThenKernelThenKind) {
  auto n = make(0, node_kind::kernel);
  EXPECT_EQ(n.display_name(), "kernel");
  n.kernel_name = "axpy";
  EXPECT_EQ(n.display_name(), "axpy");
  n.label = "update x";
  EXPECT_EQ(n.display_name(), "update x");
}

TEST(Json, EmptyGraph) {
  const auto j = nlohmann::json::parse(conveyor::to_json(graph_description{}));
  EXPECT_TRUE(j.at("nodes").empty());
  EXPECT_EQ(j.at("statistics").at("depth"), 0);
}

// Each kind's node shows the description fields its kind fills, and no other (the kinds' `shows` facet): a node
// with every field set, of each kind, exported to JSON and DOT.
TEST(Export, EachKindShowsTheFieldsItsKindFillsAndNoOther) {
  for (node_kind kind : conveyor::all_node_kinds) {
    SCOPED_TRACE(std::string(conveyor::to_string(kind)));
    node_description n = make(0, kind, "n");
    n.kernel_name = "axpy";
    n.grid = {3, 1, 1};
    n.block = {128, 1, 1};
    n.bytes = 4096;
    n.copy_kind = "HtoD";
    graph_description d;
    d.nodes.push_back(n);
    const auto node = nlohmann::json::parse(conveyor::to_json(d)).at("nodes")[0];
    const std::string dot = conveyor::to_dot(d);
    const bool launch = kind == node_kind::kernel;
    const bool bytes = kind == node_kind::memcpy || kind == node_kind::memset || kind == node_kind::mem_alloc;
    const bool copy = kind == node_kind::memcpy;
    EXPECT_EQ(node.contains("grid"), launch);
    EXPECT_EQ(node.contains("kernel"), launch);
    EXPECT_EQ(dot.find("grid 3x1x1 block 128x1x1") != std::string::npos, launch) << dot;
    EXPECT_EQ(node.contains("bytes"), bytes);
    EXPECT_EQ(dot.find("4.00 KiB") != std::string::npos, bytes) << dot;
    EXPECT_EQ(node.contains("copy_kind"), copy);
    EXPECT_EQ(dot.find("HtoD") != std::string::npos, copy) << dot;
  }
}

} // namespace

TEST(Export, EdgeTypesAreDrawnAndListed) {
  auto d = diamond();
  d.edge_types = {conveyor::edge_type::programmatic, conveyor::edge_type::full}; // the rest: full (shorter list)
  d.edges.push_back({1, 4});
  d.edge_types.resize(d.edges.size(), conveyor::edge_type::full);
  d.edge_types.back() = conveyor::edge_type::launch_completion;
  const std::string dot = conveyor::to_dot(d, "step");
  EXPECT_NE(dot.find("n0 -> n1 [style=dashed, color=\"#1f77b4\", label=\"programmatic\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n4 [style=dotted, color=\"#1f77b4\", label=\"launch completion\"];"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n0 -> n2;"), std::string::npos) << dot;
  const auto j = nlohmann::json::parse(conveyor::to_json(d));
  ASSERT_EQ(j.at("edge_types").size(), j.at("edges").size());
  EXPECT_EQ(j.at("edge_types")[0], "programmatic");
  EXPECT_EQ(j.at("edge_types")[1], "full");
  EXPECT_EQ(j.at("edge_types")[5], "launch_completion");
  // A hand-made description without edge types: every edge full.
  const auto plain = nlohmann::json::parse(conveyor::to_json(diamond()));
  for (const auto& t : plain.at("edge_types")) EXPECT_EQ(t, "full");
}

// A graph whose nodes run on two devices gets a DOT cluster per device and the device in JSON; nodes on no
// device stay outside the clusters; a graph on one device gets no cluster.
TEST(Dot, MultiDeviceGraphGetsOneClusterPerDevice) {
  graph_description d;
  auto add = [&](node_kind kind, std::string label, int device, int source_device = -1) {
    node_description n;
    n.id = d.nodes.size();
    n.kind = kind;
    n.label = std::move(label);
    n.device = device;
    n.source_device = source_device;
    if (kind == node_kind::memcpy) {
      n.copy_kind = "DtoD";
      n.bytes = 4096;
    }
    d.nodes.push_back(n);
  };
  add(node_kind::kernel, "left", 0);
  add(node_kind::memcpy, "halo", 1, 0);
  add(node_kind::kernel, "right", 1);
  add(node_kind::empty, "join", -1);
  d.edges = {{0, 1}, {1, 2}, {2, 3}};
  EXPECT_EQ(d.devices(), (std::vector<int>{0, 1}));
  const std::string dot = conveyor::to_dot(d, "g");
  const auto c0 = dot.find("subgraph cluster_ndevice_0");
  const auto c1 = dot.find("subgraph cluster_ndevice_1");
  ASSERT_NE(c0, std::string::npos) << dot;
  ASSERT_NE(c1, std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"device 1\""), std::string::npos) << dot;
  const auto left = dot.find("n0 [label=\"left");
  const auto right = dot.find("n2 [label=\"right");
  const auto join = dot.find("n3 [label=\"join");
  EXPECT_TRUE(c0 < left && left < c1) << "the device-0 kernel sits in device 0's cluster\n" << dot;
  EXPECT_GT(right, c1) << dot;
  EXPECT_LT(join, c0) << "a node on no device stays outside the clusters\n" << dot;
  EXPECT_NE(dot.find("peer copy device 0 -> device 1"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2;"), std::string::npos) << dot;
  const auto j = nlohmann::json::parse(conveyor::to_json(d));
  EXPECT_EQ(j.at("devices"), nlohmann::json::array({0, 1}));
  EXPECT_EQ(j.at("nodes").at(1).at("device"), 1);
  EXPECT_EQ(j.at("nodes").at(1).at("source_device"), 0);
  EXPECT_FALSE(j.at("nodes").at(3).contains("device"));

  for (auto& n : d.nodes) n.device = n.device >= 0 ? 0 : -1, n.source_device = -1;
  EXPECT_EQ(conveyor::to_dot(d, "g").find("cluster_ndevice"), std::string::npos) << "one device: no clusters";
}
