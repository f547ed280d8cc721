// GPU tests of describe/statistics and the DOT and JSON exports on real graphs: built graphs with every common node
// kind (labelled), a child graph, and captured graphs. The DOT text is parsed back with Graphviz's cgraph library
// and the JSON with nlohmann::json. Each test skips without a CUDA device.

#include "gpu/gpu_test_util.hpp"
#include "support/gpu.hpp"
#include "support/moved_from.hpp"

#include <conveyor/conveyor.hpp>

#include <graphviz/cgraph.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

using conveyor::test::all_near;
using conveyor::test::contains;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::pinned_array;
using conveyor::test::random_floats;
using conveyor::test::sync_device;

// ---- kernels ------------------------------------------------------------------------------------------------------

__global__ void export_axpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void export_scale(int n, float a, float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a;
}

__global__ void export_add(int n, float b, float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] + b;
}

namespace {

// A graph with a labelled node of each common kind and a two-kernel child graph:
//
//   upload x (memcpy HtoD) ─┐
//                           ├─> axpy step (kernel) ─> post-process (child: scale -> add) ─> download y (memcpy DtoH)
//   clear y (memset)       ─┘                                                                  └─> notify (host)
struct sample {
  static constexpr int n = 1000;
  static constexpr float a = 1.75F;
  static constexpr float fill = 0.5F;
  std::vector<float> x0;
  pinned_array<float> host_in, host_out;
  device_array<float> x, y;
  std::atomic<int> host_calls{0};
  conveyor::graph body, g;
  conveyor::node upload, clear, step, post, download, notify;

  sample() : x0(random_floats(n, 3001)), host_in(n), host_out(n), x(n), y(n) {
    host_in.assign(x0);
    host_out.assign(random_floats(n, 3002));
    auto b1 = body.kernel(cover(n), export_scale, n, 2.0F, y.get());
    body.kernel({b1}, cover(n), export_add, n, 1.0F, y.get());

    upload = g.memcpy(x.get(), host_in.get(), host_in.bytes(), cudaMemcpyHostToDevice).label("upload x");
    clear = g.memset(y.get(), fill, n).label("clear y");
    step = g.kernel({upload, clear}, cover(n), export_axpy, n, a, x.get(), y.get()).label("axpy step");
    post = g.child({step}, body).label("post-process");
    download = g.memcpy({post}, host_out.get(), y.get(), host_out.bytes(), cudaMemcpyDeviceToHost).label("download y");
    notify = g.host({download}, [this] { host_calls.fetch_add(1); }).label("notify");
  }

  [[nodiscard]] std::vector<float> expected() const {
    std::vector<float> out(n);
    for (int i = 0; i < n; ++i) out[i] = (a * x0[i] + fill) * 2.0F + 1.0F;
    return out;
  }

  static constexpr std::size_t top_nodes = 6;
  static constexpr std::size_t top_edges = 5;
  static constexpr std::size_t body_nodes = 2;
  static constexpr std::size_t body_edges = 1;
};

const conveyor::node_description* find_label(const conveyor::graph_description& d, const std::string& label) {
  for (const auto& n : d.nodes)
    if (n.label == label) return &n;
  return nullptr;
}

const nlohmann::json* find_label(const nlohmann::json& nodes, const std::string& label) {
  for (const auto& n : nodes)
    if (n.value("label", "") == label) return &n;
  return nullptr;
}

// What cgraph read back from DOT text.
struct parsed_dot {
  bool ok = false;
  std::string name;
  std::size_t nodes = 0;
  std::size_t edges = 0;
  std::size_t subgraphs = 0;
  std::vector<std::string> labels; // each node's label attribute
};

parsed_dot parse_dot(const std::string& dot) {
  parsed_dot out;
  Agraph_t* g = agmemread(dot.c_str());
  if (g == nullptr) return out;
  out.ok = true;
  out.name = agnameof(g);
  char label_attr[] = "label";
  for (Agnode_t* n = agfstnode(g); n != nullptr; n = agnxtnode(g, n)) {
    ++out.nodes;
    const char* label = agget(n, label_attr);
    out.labels.emplace_back(label != nullptr ? label : "");
    for (Agedge_t* e = agfstout(g, n); e != nullptr; e = agnxtout(g, e)) ++out.edges;
  }
  for (Agraph_t* sub = agfstsubg(g); sub != nullptr; sub = agnxtsubg(sub)) ++out.subgraphs;
  agclose(g);
  return out;
}

bool any_contains(const std::vector<std::string>& texts, const std::string& part) {
  for (const auto& t : texts)
    if (contains(t, part)) return true;
  return false;
}

} // namespace

// ---- describe -----------------------------------------------------------------------------------------------------

TEST(ExportGpu, DescribeShowsKindsLabelsKernelNamesShapesAndBytes) {
  CONVEYOR_REQUIRE_GPU();
  sample smp;
  const auto d = conveyor::describe(smp.g);
  ASSERT_EQ(d.nodes.size(), sample::top_nodes);
  EXPECT_EQ(d.edges.size(), sample::top_edges);
  for (std::size_t i = 0; i < d.nodes.size(); ++i) EXPECT_EQ(d.nodes[i].id, i);

  const auto* upload = find_label(d, "upload x");
  const auto* clear = find_label(d, "clear y");
  const auto* step = find_label(d, "axpy step");
  const auto* post = find_label(d, "post-process");
  const auto* download = find_label(d, "download y");
  const auto* notify = find_label(d, "notify");
  ASSERT_TRUE(upload && clear && step && post && download && notify);

  EXPECT_EQ(upload->kind, conveyor::node_kind::memcpy);
  EXPECT_EQ(upload->bytes, sample::n * sizeof(float));
  EXPECT_EQ(upload->copy_kind, "HtoD");
  EXPECT_EQ(download->kind, conveyor::node_kind::memcpy);
  EXPECT_EQ(download->bytes, sample::n * sizeof(float));
  EXPECT_EQ(download->copy_kind, "DtoH");
  EXPECT_EQ(clear->kind, conveyor::node_kind::memset);
  EXPECT_EQ(clear->bytes, sample::n * sizeof(float));
  EXPECT_EQ(notify->kind, conveyor::node_kind::host);
  EXPECT_EQ(notify->display_name(), "notify");

  EXPECT_EQ(step->kind, conveyor::node_kind::kernel);
  EXPECT_TRUE(contains(step->kernel_name, "export_axpy")) << step->kernel_name;
  const auto cfg = cover(sample::n);
  EXPECT_EQ(step->grid, (std::array<unsigned, 3>{cfg.grid.x, 1, 1}));
  EXPECT_EQ(step->block, (std::array<unsigned, 3>{256, 1, 1}));
  EXPECT_EQ(step->shared_bytes, 0U);
  EXPECT_EQ(step->display_name(), "axpy step");

  // The edges name the right nodes: both copies-in feed the kernel.
  std::size_t into_step = 0;
  for (const auto& [from, to] : d.edges)
    if (to == step->id) {
      ++into_step;
      EXPECT_TRUE(from == upload->id || from == clear->id);
    }
  EXPECT_EQ(into_step, 2U);

  EXPECT_EQ(post->kind, conveyor::node_kind::child_graph);
  ASSERT_EQ(post->bodies.size(), 1U);
  const auto& body = post->bodies[0];
  ASSERT_EQ(body.nodes.size(), sample::body_nodes);
  EXPECT_EQ(body.edges.size(), sample::body_edges);
  std::vector<std::string> body_kernels;
  for (const auto& n : body.nodes) {
    EXPECT_EQ(n.kind, conveyor::node_kind::kernel);
    EXPECT_TRUE(n.label.empty());
    EXPECT_EQ(n.display_name(), n.kernel_name); // unlabelled: the kernel's name is shown
    body_kernels.push_back(n.kernel_name);
  }
  EXPECT_TRUE(any_contains(body_kernels, "export_scale"));
  EXPECT_TRUE(any_contains(body_kernels, "export_add"));
}

TEST(ExportGpu, StatisticsOfABuiltGraph) {
  CONVEYOR_REQUIRE_GPU();
  sample smp;
  const auto st = conveyor::statistics(conveyor::describe(smp.g));
  EXPECT_EQ(st.nodes, sample::top_nodes);
  EXPECT_EQ(st.edges, sample::top_edges);
  EXPECT_EQ(st.nested_nodes, sample::body_nodes);
  EXPECT_EQ(st.depth, 5U); // copy-in, axpy, child, copy-out, host
  EXPECT_EQ(st.width, 2U); // the two copies-in
  EXPECT_EQ(st.memcpy_bytes, 2 * sample::n * sizeof(float));
  EXPECT_EQ(st.by_kind.at(conveyor::node_kind::memcpy), 2U);
  EXPECT_EQ(st.by_kind.at(conveyor::node_kind::memset), 1U);
  EXPECT_EQ(st.by_kind.at(conveyor::node_kind::kernel), 1U);
  EXPECT_EQ(st.by_kind.at(conveyor::node_kind::child_graph), 1U);
  EXPECT_EQ(st.by_kind.at(conveyor::node_kind::host), 1U);
}

TEST(ExportGpu, ExportedGraphStillRunsCorrectly) {
  CONVEYOR_REQUIRE_GPU();
  sample smp;
  (void)conveyor::to_dot(smp.g);
  (void)conveyor::to_json(smp.g);
  conveyor::stream s;
  auto exec = conveyor::instantiate(smp.g);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(smp.host_calls.load(), 1);
  EXPECT_TRUE(all_near(smp.host_out.to_vector(), smp.expected()));
}

TEST(ExportGpu, AMovedFromGraphIsRefusedByDescribeAndTheExports) {
  CONVEYOR_REQUIRE_GPU();
  sample smp;
  conveyor::graph taken(std::move(smp.g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::describe", (void)conveyor::describe(smp.g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::to_dot", (void)conveyor::to_dot(smp.g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::to_json", (void)conveyor::to_json(smp.g));
  EXPECT_EQ(conveyor::describe(taken).nodes.size(), sample::top_nodes);
}

// ---- JSON ---------------------------------------------------------------------------------------------------------

TEST(ExportGpu, JsonParsesWithTheSameCounts) {
  CONVEYOR_REQUIRE_GPU();
  sample smp;
  const std::string text = conveyor::to_json(smp.g);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(text)) << text;
  ASSERT_TRUE(j.contains("nodes") && j.contains("edges") && j.contains("statistics")) << text;
  EXPECT_EQ(j["nodes"].size(), sample::top_nodes);
  EXPECT_EQ(j["edges"].size(), sample::top_edges);
  EXPECT_EQ(j["statistics"]["nodes"].get<std::size_t>(), sample::top_nodes);
  EXPECT_EQ(j["statistics"]["edges"].get<std::size_t>(), sample::top_edges);
  EXPECT_EQ(j["statistics"]["nested_nodes"].get<std::size_t>(), sample::body_nodes);
  for (const auto& e : j["edges"]) {
    ASSERT_EQ(e.size(), 2U);
    EXPECT_LT(e[0].get<std::size_t>(), sample::top_nodes);
    EXPECT_LT(e[1].get<std::size_t>(), sample::top_nodes);
  }

  const auto* step = find_label(j["nodes"], "axpy step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->at("kind"), "kernel");
  EXPECT_TRUE(contains(step->at("kernel").get<std::string>(), "export_axpy")) << step->dump();
  EXPECT_EQ(step->at("grid"), nlohmann::json::array({cover(sample::n).grid.x, 1, 1}));
  EXPECT_EQ(step->at("block"), nlohmann::json::array({256, 1, 1}));

  const auto* upload = find_label(j["nodes"], "upload x");
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->at("kind"), "memcpy");
  EXPECT_EQ(upload->at("bytes").get<std::size_t>(), sample::n * sizeof(float));
  EXPECT_EQ(upload->at("copy_kind"), "HtoD");

  const auto* clear = find_label(j["nodes"], "clear y");
  ASSERT_NE(clear, nullptr);
  EXPECT_EQ(clear->at("kind"), "memset");
  EXPECT_EQ(clear->at("bytes").get<std::size_t>(), sample::n * sizeof(float));

  const auto* notify = find_label(j["nodes"], "notify");
  ASSERT_NE(notify, nullptr);
  EXPECT_EQ(notify->at("kind"), "host");

  const auto* post = find_label(j["nodes"], "post-process");
  ASSERT_NE(post, nullptr);
  EXPECT_EQ(post->at("kind"), "child_graph");
  ASSERT_TRUE(post->contains("bodies")) << post->dump();
  ASSERT_EQ(post->at("bodies").size(), 1U);
  EXPECT_EQ(post->at("bodies").at(0).at("nodes").size(), sample::body_nodes);
  EXPECT_EQ(post->at("bodies").at(0).at("edges").size(), sample::body_edges);
}

// ---- DOT, read back by Graphviz -----------------------------------------------------------------------------------

TEST(ExportGpu, DotParsesWithGraphvizWithTheSameCounts) {
  CONVEYOR_REQUIRE_GPU();
  sample smp;
  const std::string dot = conveyor::to_dot(smp.g, "sample graph");
  const auto p = parse_dot(dot);
  ASSERT_TRUE(p.ok) << dot;
  EXPECT_EQ(p.name, "sample graph");
  // The child's body appears as extra nodes inside a cluster, with one dashed edge from the child node to it.
  EXPECT_EQ(p.nodes, sample::top_nodes + sample::body_nodes) << dot;
  EXPECT_EQ(p.edges, sample::top_edges + sample::body_edges + 1) << dot;
  EXPECT_EQ(p.subgraphs, 1U) << dot;
  for (const char* label : {"upload x", "clear y", "axpy step", "post-process", "download y", "notify"})
    EXPECT_TRUE(any_contains(p.labels, label)) << label << "\n" << dot;
  EXPECT_TRUE(any_contains(p.labels, "export_axpy")) << dot;
  EXPECT_TRUE(any_contains(p.labels, "export_scale")) << dot;
  EXPECT_TRUE(any_contains(p.labels, "export_add")) << dot;
}

TEST(ExportGpu, DotKeepsQuotesAndBackslashesInLabelsParseable) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 3101));
  sync_device();
  conveyor::graph g;
  auto a = g.kernel(cover(n), export_scale, n, 2.0F, x.get()).label("say \"hi\" \\ there");
  g.empty({a}).label("back\\slash\"");
  const std::string dot = conveyor::to_dot(g, "quote\"d");
  const auto p = parse_dot(dot);
  ASSERT_TRUE(p.ok) << dot;
  EXPECT_EQ(p.nodes, 2U) << dot;
  EXPECT_EQ(p.edges, 1U) << dot;
  EXPECT_TRUE(any_contains(p.labels, "say \"hi\"")) << dot;
}

// ---- other node kinds ---------------------------------------------------------------------------------------------

TEST(ExportGpu, DescribeReportsEventAllocationAndEmptyNodes) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 512;
  conveyor::event e(cudaEventDisableTiming);
  conveyor::graph g;
  auto wait = g.event_wait(e).label("wait");
  auto alloc = g.mem_alloc({wait}, n * sizeof(float));
  alloc.node.label("scratch");
  auto set = g.memset({alloc.node}, static_cast<float*>(alloc.pointer), 1.0F, n);
  auto fr = g.mem_free({set}, alloc.pointer).label("release");
  auto join = g.empty({fr}).label("join");
  g.event_record({join}, e).label("record");

  const auto d = conveyor::describe(g);
  ASSERT_EQ(d.nodes.size(), 6U);
  EXPECT_EQ(d.edges.size(), 5U);
  const auto* w = find_label(d, "wait");
  const auto* s = find_label(d, "scratch");
  const auto* r = find_label(d, "release");
  const auto* j = find_label(d, "join");
  const auto* rec = find_label(d, "record");
  ASSERT_TRUE(w && s && r && j && rec);
  EXPECT_EQ(w->kind, conveyor::node_kind::event_wait);
  EXPECT_EQ(s->kind, conveyor::node_kind::mem_alloc);
  EXPECT_EQ(s->bytes, n * sizeof(float));
  EXPECT_EQ(r->kind, conveyor::node_kind::mem_free);
  EXPECT_EQ(j->kind, conveyor::node_kind::empty);
  EXPECT_EQ(rec->kind, conveyor::node_kind::event_record);
  std::size_t memsets = 0;
  for (const auto& node : d.nodes)
    if (node.kind == conveyor::node_kind::memset) {
      ++memsets;
      EXPECT_EQ(node.bytes, n * sizeof(float));
      EXPECT_EQ(node.display_name(), "memset");
    }
  EXPECT_EQ(memsets, 1U);

  const auto st = conveyor::statistics(d);
  EXPECT_EQ(st.depth, 6U);
  EXPECT_EQ(st.width, 1U);

  const auto p = parse_dot(conveyor::to_dot(g));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.nodes, 6U);
  EXPECT_EQ(p.edges, 5U);
  auto j2 = nlohmann::json::parse(conveyor::to_json(g));
  EXPECT_EQ(j2["nodes"].size(), 6U);
  EXPECT_EQ(j2["edges"].size(), 5U);
  const auto* scratch = find_label(j2["nodes"], "scratch");
  ASSERT_NE(scratch, nullptr);
  EXPECT_EQ(scratch->at("kind"), "mem_alloc");
  EXPECT_EQ(scratch->at("bytes").get<std::size_t>(), n * sizeof(float));
}

// ---- captured graphs ----------------------------------------------------------------------------------------------

TEST(ExportGpu, CapturedGraphExportNamesItsKernels) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 3000;
  const auto x0 = random_floats(n, 3201);
  const auto y0 = random_floats(n, 3202);
  device_array<float> x(x0), y(y0);
  sync_device();
  conveyor::stream s, s2;
  const auto cfg = cover(n, 128);

  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    conveyor::fork(cs, s2);
    export_scale<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 3.0F, x.get());
    conveyor::check_launch("export_scale");
    export_add<<<cfg.grid, cfg.block, 0, s2.get()>>>(n, -1.0F, y.get());
    conveyor::check_launch("export_add");
    conveyor::join(cs, s2);
    export_axpy<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 2.0F, x.get(), y.get());
    conveyor::check_launch("export_axpy");
  });

  const auto d = conveyor::describe(g);
  ASSERT_EQ(d.nodes.size(), 3U);
  EXPECT_EQ(d.edges.size(), 2U);
  std::map<std::string, const conveyor::node_description*> by_kernel;
  for (const auto& node : d.nodes) {
    EXPECT_EQ(node.kind, conveyor::node_kind::kernel);
    EXPECT_TRUE(node.label.empty());
    EXPECT_FALSE(node.kernel_name.empty());
    EXPECT_EQ(node.grid, (std::array<unsigned, 3>{cfg.grid.x, 1, 1}));
    EXPECT_EQ(node.block, (std::array<unsigned, 3>{128, 1, 1}));
    for (const char* id : {"export_scale", "export_add", "export_axpy"})
      if (contains(node.kernel_name, id)) by_kernel[id] = &node;
  }
  ASSERT_EQ(by_kernel.size(), 3U);
  // Both branches feed the axpy.
  for (const auto& [from, to] : d.edges) EXPECT_EQ(to, by_kernel["export_axpy"]->id);
  EXPECT_EQ(conveyor::statistics(d).width, 2U);

  const auto p = parse_dot(conveyor::to_dot(g));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.nodes, 3U);
  EXPECT_EQ(p.edges, 2U);
  for (const char* id : {"export_scale", "export_add", "export_axpy"}) EXPECT_TRUE(any_contains(p.labels, id)) << id;

  auto j = nlohmann::json::parse(conveyor::to_json(g));
  ASSERT_EQ(j["nodes"].size(), 3U);
  std::vector<std::string> json_kernels;
  for (const auto& node : j["nodes"]) json_kernels.push_back(node.value("kernel", ""));
  for (const char* id : {"export_scale", "export_add", "export_axpy"})
    EXPECT_TRUE(any_contains(json_kernels, id)) << id;

  // And the captured graph computes what it says.
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = 2.0F * (x0[i] * 3.0F) + (y0[i] - 1.0F);
  EXPECT_TRUE(all_near(y.download(), want));
}
