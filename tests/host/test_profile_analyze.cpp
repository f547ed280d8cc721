// Host-only tests of the profile analysis and its exports (include/conveyor/profile/report.hpp) on hand-made traces:
// attribution through CUPTI's flattened node numbering, conditional-body records, per-node and per-launch numbers,
// the critical path, eager steps, and the Perfetto (trace-event JSON), DOT and text exports. No GPU needed.
#include <conveyor/profile/report.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using conveyor::graph_description;
using conveyor::node_description;
using conveyor::node_kind;
using namespace conveyor::profile;
using nlohmann::json;

// CUPTI timestamps are ns since the epoch: test with numbers as large, so that precision losses show.
constexpr std::uint64_t t0 = 1'700'000'000'000'000'000ULL;

node_description make(node_kind kind, std::string label = {}, std::string kernel = {}) {
  node_description n;
  n.kind = kind;
  n.label = std::move(label);
  n.kernel_name = std::move(kernel);
  return n;
}

node_description kernel_node(std::string kernel, std::string label = {}) {
  return make(node_kind::kernel, std::move(label), std::move(kernel));
}

graph_description graph_of(std::vector<node_description> nodes,
                           std::vector<std::pair<std::size_t, std::size_t>> edges) {
  graph_description g;
  for (std::size_t i = 0; i < nodes.size(); ++i) nodes[i].id = i;
  g.nodes = std::move(nodes);
  g.edges = std::move(edges);
  return g;
}

// A kernel record of node `index` of executable graph `exec` (times in ns from t0).
activity graph_kernel(std::uint32_t exec, std::uint32_t index, std::string name, std::uint64_t start, std::uint64_t end,
                      std::uint32_t correlation, std::uint32_t stream = 7) {
  activity a;
  a.kind = activity_kind::kernel;
  a.start_ns = t0 + start;
  a.end_ns = t0 + end;
  a.stream = stream;
  a.correlation = correlation;
  a.exec_id = exec;
  a.node_id = (std::uint64_t{exec} << 32U) | index;
  a.name = std::move(name);
  return a;
}

// An eager kernel record.
activity eager_kernel(std::string name, std::uint64_t start, std::uint64_t end, std::uint64_t step,
                      std::uint32_t correlation, std::uint32_t stream = 1) {
  activity a;
  a.kind = activity_kind::kernel;
  a.start_ns = t0 + start;
  a.end_ns = t0 + end;
  a.stream = stream;
  a.correlation = correlation;
  a.name = std::move(name);
  a.step = step;
  return a;
}

host_call call(std::uint32_t correlation, std::uint64_t start, std::uint64_t step, bool graph_launch,
               std::string name = "cudaLaunchKernel") {
  return {correlation, t0 + start, t0 + start + 2000, std::move(name), step, graph_launch};
}

const node_profile* find_node(const profile_report& r, const std::string& label, const std::string& track = {}) {
  for (const auto& n : r.nodes)
    if (n.ref.label == label && n.ref.track == track) return &n;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------------
// Attribution

// top K0, C1, C2, K3 = 0..3; C1's body A = {KA0, CA1} = 4, 5; CA1's body B = {KB0} = 6; C2's body D = {KD0, KD1}
// = 7, 8 (measured on an H200).
graph_description nested_graph() {
  auto b = graph_of({kernel_node("kb0")}, {});
  auto ca1 = make(node_kind::child_graph, "inner");
  ca1.bodies.push_back(b);
  auto a = graph_of({kernel_node("ka0"), ca1}, {{0, 1}});
  auto c1 = make(node_kind::child_graph, "outer");
  c1.bodies.push_back(a);
  auto d = graph_of({kernel_node("kd0"), kernel_node("kd1")}, {{0, 1}});
  auto c2 = make(node_kind::conditional, "loop");
  c2.conditional_type = "while";
  c2.bodies.push_back(d);
  auto k0 = kernel_node("k0");
  k0.grid = {4, 1, 1};
  k0.block = {128, 1, 1};
  return graph_of({k0, c1, c2, kernel_node("k3")}, {{0, 1}, {1, 2}, {2, 3}});
}

TEST(ProfileAnalyze, FlattenedNumberingAttributesNestedBodies) {
  trace t;
  t.graphs.push_back({5, "nested", nested_graph()});
  auto k0 = graph_kernel(5, 0, "k0", 0, 1000, 10);
  k0.grid = {4, 1, 1};
  k0.block = {128, 1, 1};
  t.activities = {k0,
                  graph_kernel(5, 4, "ka0", 1100, 2000, 10),
                  graph_kernel(5, 6, "kb0", 2100, 3000, 10),
                  graph_kernel(5, 7, "kd0", 3100, 4000, 0),
                  graph_kernel(5, 8, "kd1", 4100, 5000, 0),
                  graph_kernel(5, 3, "k3", 5100, 6000, 10)};
  const auto r = analyze(t);
  EXPECT_EQ(r.records, 6U);
  EXPECT_EQ(r.attributed, 6U);
  EXPECT_TRUE(r.unattributed.empty());
  struct expected {
    std::string label;
    std::vector<std::size_t> path;
  };
  for (const auto& e : std::vector<expected>{{"k0", {0}},
                                             {"outer/body 0/ka0", {1, 0, 0}},
                                             {"outer/body 0/inner/body 0/kb0", {1, 0, 1, 0, 0}},
                                             {"loop/body 0/kd0", {2, 0, 0}},
                                             {"loop/body 0/kd1", {2, 0, 1}},
                                             {"k3", {3}}}) {
    const auto* n = find_node(r, e.label);
    ASSERT_NE(n, nullptr) << e.label;
    EXPECT_EQ(n->ref.path, e.path) << e.label;
    EXPECT_EQ(n->ref.graph, "nested");
    EXPECT_EQ(n->kind, node_kind::kernel);
    EXPECT_EQ(n->records, 1U);
  }
  ASSERT_EQ(r.launches.size(), 1U); // the loop's records (correlation 0) joined the launch
  EXPECT_EQ(r.launches[0].activities, 6U);
  EXPECT_EQ(r.launches[0].graph, "nested");
  EXPECT_EQ(r.launches[0].correlation, 10U);
  // Critical path: the chain through every level.
  EXPECT_EQ(r.launches[0].critical_path,
            (std::vector<std::string>{"k0", "outer/body 0/ka0", "outer/body 0/inner/body 0/kb0", "loop/body 0/kd0",
                                      "loop/body 0/kd1", "k3"}));
}

TEST(ProfileAnalyze, MismatchesAreUnattributedWithTheReason) {
  auto k = kernel_node("axpy");
  k.grid = {4, 1, 1};
  k.block = {256, 1, 1};
  auto copy = make(node_kind::memcpy, "upload");
  copy.bytes = 1024;
  auto fill = make(node_kind::memset);
  fill.bytes = 0; // unknown size: not checked
  trace t;
  t.graphs.push_back({7, "g", graph_of({k, copy, fill}, {{0, 1}, {1, 2}})});
  auto good = graph_kernel(7, 0, "axpy", 0, 100, 1);
  good.grid = {4, 1, 1};
  good.block = {256, 1, 1};
  auto wrong_name = good;
  wrong_name.name = "scale";
  wrong_name.correlation = 2;
  auto wrong_grid = good;
  wrong_grid.grid = {8, 1, 1};
  wrong_grid.correlation = 3;
  auto wrong_block = good;
  wrong_block.block = {64, 1, 1};
  wrong_block.correlation = 4;
  activity wrong_bytes;
  wrong_bytes.kind = activity_kind::memcpy;
  wrong_bytes.name = "memcpy HtoD";
  wrong_bytes.copy_kind = "HtoD";
  wrong_bytes.bytes = 2048;
  wrong_bytes.start_ns = t0 + 200;
  wrong_bytes.end_ns = t0 + 300;
  wrong_bytes.exec_id = 7;
  wrong_bytes.node_id = (std::uint64_t{7} << 32U) | 1U;
  wrong_bytes.correlation = 1;
  auto right_bytes = wrong_bytes;
  right_bytes.bytes = 1024;
  right_bytes.correlation = 2;
  activity any_memset = wrong_bytes;
  any_memset.kind = activity_kind::memset;
  any_memset.name = "memset";
  any_memset.bytes = 77;
  any_memset.node_id = (std::uint64_t{7} << 32U) | 2U;
  auto wrong_kind = graph_kernel(7, 1, "axpy", 400, 500, 1);
  auto high_bits = graph_kernel(7, 0, "axpy", 600, 700, 1);
  high_bits.node_id = (std::uint64_t{5} << 32U) | 0U;
  auto out_of_range = graph_kernel(7, 10, "axpy", 800, 900, 1);
  auto unwatched1 = graph_kernel(99, 0, "foo", 0, 100, 50);
  auto unwatched2 = graph_kernel(99, 1, "bar", 200, 300, 50);
  t.activities = {good,       wrong_name, wrong_grid, wrong_block,  wrong_bytes, right_bytes,
                  any_memset, wrong_kind, high_bits,  out_of_range, unwatched1,  unwatched2};
  const auto r = analyze(t);
  EXPECT_EQ(r.records, 12U);
  EXPECT_EQ(r.attributed, 3U); // good, right_bytes, any_memset
  auto group = [&](const std::string& part) -> const unattributed_group* {
    for (const auto& g : r.unattributed)
      if (g.reason.find(part) != std::string::npos) return &g;
    return nullptr;
  };
  const auto* name = group("the record ran kernel 'scale', the node launches 'axpy'");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(name->records, 1U);
  ASSERT_NE(group("the record ran grid 8x1x1, the node has grid 4x1x1"), nullptr);
  ASSERT_NE(group("the record ran block 64x1x1, the node has block 256x1x1"), nullptr);
  ASSERT_NE(group("the record copied 2048 bytes, the node 1024 bytes"), nullptr);
  ASSERT_NE(group("node 1 ('upload') is a memcpy node, the record a kernel"), nullptr);
  ASSERT_NE(group("high 32 bits"), nullptr);
  ASSERT_NE(group("node index beyond the 3 nodes of graph 'g'"), nullptr);
  const auto* unwatched = group("executable graph 99 was not watched (profiler::watch)");
  ASSERT_NE(unwatched, nullptr);
  EXPECT_EQ(unwatched->records, 2U);
  EXPECT_EQ(unwatched->example, "kernel foo at node 99:0");
  EXPECT_EQ(r.unattributed.front().records, 2U); // most records first
  std::size_t grouped = 0;
  for (const auto& g : r.unattributed) grouped += g.records;
  EXPECT_EQ(grouped + r.attributed, r.records);
  // Nothing was guessed: only the matching records reached the nodes.
  const auto* axpy = find_node(r, "axpy");
  ASSERT_NE(axpy, nullptr);
  EXPECT_EQ(axpy->records, 1U);
}

// ---------------------------------------------------------------------------------------------------------------
// Conditional bodies

// prep -> loop (WHILE, body {step}) -> finish
graph_description while_graph() {
  auto loop = make(node_kind::conditional, "loop");
  loop.conditional_type = "while";
  loop.bodies.push_back(graph_of({kernel_node("step_kernel", "step")}, {}));
  return graph_of({kernel_node("prep"), loop, kernel_node("finish")}, {{0, 1}, {1, 2}});
}

TEST(ProfileAnalyze, WhileBodyRecordsCountPerIterationInTheirLaunch) {
  trace t;
  t.graphs.push_back({3, "solver", while_graph()});
  t.host_calls = {call(100, 0, 0, true, "cudaGraphLaunch"), call(200, 9000, 0, true, "cudaGraphLaunch")};
  // Launch 1: three iterations; launch 2: two. Body records have no correlation.
  t.activities = {
      graph_kernel(3, 0, "prep", 5000, 5010, 100),        graph_kernel(3, 3, "step_kernel", 5012, 5020, 0),
      graph_kernel(3, 3, "step_kernel", 5022, 5030, 0),   graph_kernel(3, 3, "step_kernel", 5032, 5040, 0),
      graph_kernel(3, 2, "finish", 5042, 5050, 100),      graph_kernel(3, 0, "prep", 10000, 10010, 200),
      graph_kernel(3, 3, "step_kernel", 10012, 10020, 0), graph_kernel(3, 3, "step_kernel", 10022, 10030, 0),
      graph_kernel(3, 2, "finish", 10032, 10040, 200)};
  const auto r = analyze(t);
  EXPECT_EQ(r.attributed, 9U);
  const auto* body = find_node(r, "loop/body 0/step");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->records, 5U);
  EXPECT_EQ(body->launches, 2U);
  EXPECT_EQ(body->ref.path, (std::vector<std::size_t>{1, 0, 0}));
  ASSERT_EQ(r.launches.size(), 2U);
  EXPECT_EQ(r.launches[0].correlation, 100U);
  EXPECT_EQ(r.launches[0].activities, 5U);
  EXPECT_EQ(r.launches[1].correlation, 200U);
  EXPECT_EQ(r.launches[1].activities, 4U);
  EXPECT_NEAR(r.launches[0].api_to_gpu_us, 5.0, 1e-9);
  EXPECT_NEAR(r.launches[1].api_to_gpu_us, 1.0, 1e-9);
  // The critical path runs through every iteration.
  EXPECT_EQ(r.launches[0].critical_path,
            (std::vector<std::string>{"prep", "loop/body 0/step", "loop/body 0/step", "loop/body 0/step", "finish"}));
  EXPECT_NEAR(r.launches[0].critical_gaps_us, 0.008, 1e-9);
}

TEST(ProfileAnalyze, LongWhileLoopsKeepEveryIteration) {
  trace t;
  t.graphs.push_back({3, "solver", while_graph()});
  constexpr std::uint64_t iterations = 20'000;
  for (std::uint32_t launch = 0; launch < 3; ++launch) {
    const std::uint64_t b = launch * 100'000'000ULL;
    const std::uint32_t correlation = launch + 1;
    t.activities.push_back(graph_kernel(3, 0, "prep", b, b + 1000, correlation));
    for (std::uint64_t k = 0; k < iterations; ++k)
      t.activities.push_back(
          graph_kernel(3, 3, "step_kernel", b + 2000 + k * 1500, b + 2000 + k * 1500 + 1000 + (k == 7 ? 400 : 0), 0));
    const std::uint64_t e = b + 2000 + iterations * 1500;
    t.activities.push_back(graph_kernel(3, 2, "finish", e, e + 1000, correlation));
  }
  const auto r = analyze(t);
  ASSERT_EQ(r.launches.size(), 3U);
  for (const auto& l : r.launches) {
    EXPECT_EQ(l.activities, iterations + 2);
    EXPECT_EQ(l.critical_path.size(), iterations + 2);
    EXPECT_EQ(l.gap_count, iterations + 1);
  }
  const auto* body = find_node(r, "loop/body 0/step");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->records, 3 * iterations);
  EXPECT_NEAR(body->max_us, 1.4, 1e-9);
  EXPECT_NEAR(body->median_us, 1.0, 1e-9);
}

TEST(ProfileAnalyze, BodyRecordsBeforeTheirLaunchsFirstRecordGoToTheRightLaunch) {
  // loop (WHILE) -> finish: each launch's body records come before its first correlated record.
  auto loop = make(node_kind::conditional, "loop");
  loop.bodies.push_back(graph_of({kernel_node("body")}, {}));
  trace t;
  t.graphs.push_back({4, "g", graph_of({loop, kernel_node("finish")}, {{0, 1}})});
  t.host_calls = {call(100, 0, 0, true, "cudaGraphLaunch"), call(200, 40, 0, true, "cudaGraphLaunch")};
  t.activities = {graph_kernel(4, 2, "body", 100, 110, 0), graph_kernel(4, 2, "body", 112, 120, 0),
                  graph_kernel(4, 1, "finish", 122, 130, 100), graph_kernel(4, 2, "body", 200, 210, 0),
                  graph_kernel(4, 1, "finish", 212, 220, 200)};
  const auto r = analyze(t);
  ASSERT_EQ(r.launches.size(), 2U);
  EXPECT_EQ(r.launches[0].correlation, 100U);
  EXPECT_EQ(r.launches[0].activities, 3U);
  EXPECT_EQ(r.launches[1].correlation, 200U);
  EXPECT_EQ(r.launches[1].activities, 2U);
  EXPECT_EQ(r.launches[1].start_ns, t0 + 200);
}

// ---------------------------------------------------------------------------------------------------------------
// Per-node numbers, busy time, gaps

TEST(ProfileAnalyze, PerNodeStatisticsAndShares) {
  trace t;
  t.steps = {{1, "a", t0, t0}, {2, "a", t0, t0}, {3, "a", t0, t0}, {4, "a", t0, t0}, {5, "b", t0, t0}};
  // Track a: "even" runs 1, 2, 3, 4 µs (median 2.5); "odd" 1, 9, 5 µs in steps 1-3 (median 5).
  const std::uint64_t base[] = {0, 100'000, 200'000, 300'000};
  for (std::uint64_t s = 0; s < 4; ++s)
    t.activities.push_back(eager_kernel("even", base[s], base[s] + (s + 1) * 1000, s + 1, 1));
  const std::uint64_t odd[] = {1000, 9000, 5000};
  for (std::uint64_t s = 0; s < 3; ++s)
    t.activities.push_back(eager_kernel("odd", base[s] + 50'000, base[s] + 50'000 + odd[s], s + 1, 2));
  t.activities.push_back(eager_kernel("other", 500'000, 503'000, 5, 3));
  const auto r = analyze(t);
  const auto* even = find_node(r, "even", "a");
  const auto* oddn = find_node(r, "odd", "a");
  const auto* other = find_node(r, "other", "b");
  ASSERT_TRUE(even != nullptr && oddn != nullptr && other != nullptr);
  EXPECT_EQ(even->records, 4U);
  EXPECT_EQ(even->launches, 4U);
  EXPECT_NEAR(even->median_us, 2.5, 1e-9);
  EXPECT_NEAR(even->min_us, 1.0, 1e-9);
  EXPECT_NEAR(even->max_us, 4.0, 1e-9);
  EXPECT_NEAR(even->total_us, 10.0, 1e-9);
  EXPECT_EQ(oddn->records, 3U);
  EXPECT_NEAR(oddn->median_us, 5.0, 1e-9);
  EXPECT_NEAR(oddn->min_us, 1.0, 1e-9);
  EXPECT_NEAR(oddn->max_us, 9.0, 1e-9);
  EXPECT_NEAR(oddn->total_us, 15.0, 1e-9);
  EXPECT_EQ(even->kind, node_kind::kernel);
  EXPECT_EQ(even->kernel_name, "even");
  EXPECT_NEAR(even->share, 10.0 / 25.0, 1e-9);
  EXPECT_NEAR(oddn->share, 15.0 / 25.0, 1e-9);
  EXPECT_NEAR(other->share, 1.0, 1e-9);
  std::map<std::string, double> shares;
  for (const auto& n : r.nodes) shares[n.ref.track] += n.share;
  for (const auto& [track, sum] : shares) EXPECT_NEAR(sum, 1.0, 1e-9) << track;
  // By track in order of appearance, then by total time.
  ASSERT_EQ(r.nodes.size(), 3U);
  EXPECT_EQ(r.nodes[0].ref.label, "odd");
  EXPECT_EQ(r.nodes[1].ref.label, "even");
  EXPECT_EQ(r.nodes[2].ref.label, "other");
  ASSERT_EQ(r.tracks.size(), 2U);
  EXPECT_EQ(r.tracks[0].track, "a");
  EXPECT_EQ(r.tracks[0].launches, 4U);
  EXPECT_NEAR(r.tracks[0].node_time_us, 25.0, 1e-9);
  EXPECT_EQ(r.tracks[1].track, "b");
}

TEST(ProfileAnalyze, BusyTimeIsTheUnionAndGapsAreTheIdleIntervals) {
  trace t;
  t.steps = {{1, "s", t0, t0}};
  // [0,100] [50,150] | gap 50 | [200,300] [250,260] | gap 100 | [400,500]
  t.activities = {eager_kernel("a", 0, 100, 1, 1, 1), eager_kernel("b", 50, 150, 1, 2, 2),
                  eager_kernel("c", 200, 300, 1, 3, 1), eager_kernel("d", 250, 260, 1, 4, 2),
                  eager_kernel("e", 400, 500, 1, 5, 1)};
  const auto r = analyze(t);
  ASSERT_EQ(r.launches.size(), 1U);
  const auto& l = r.launches[0];
  EXPECT_EQ(l.step, 1U);
  EXPECT_EQ(l.track, "s");
  EXPECT_EQ(l.activities, 5U);
  EXPECT_NEAR(l.wall_us, 0.5, 1e-12);
  EXPECT_NEAR(l.busy_us, 0.35, 1e-12);
  EXPECT_NEAR(l.utilisation, 0.7, 1e-12);
  EXPECT_EQ(l.gap_count, 2U);
  EXPECT_NEAR(l.gap_total_us, 0.15, 1e-12);
  EXPECT_NEAR(l.gap_total_us, l.wall_us - l.busy_us, 1e-12);
  EXPECT_NEAR(l.largest_gap.duration_us, 0.1, 1e-12);
  EXPECT_NEAR(l.largest_gap.start_us, 0.3, 1e-12);
  EXPECT_EQ(l.largest_gap.after, "c");
  EXPECT_EQ(l.largest_gap.before, "e");
  // Stream order: e waited on c (stream 1), c on a.
  EXPECT_EQ(l.critical_path, (std::vector<std::string>{"a", "c", "e"}));
  EXPECT_TRUE(l.largest_gap.on_critical_path);
  EXPECT_NEAR(l.critical_path_us, 0.3, 1e-12);
  EXPECT_NEAR(l.critical_gaps_us, 0.2, 1e-12);
  ASSERT_EQ(r.tracks.size(), 1U);
  EXPECT_NEAR(r.tracks[0].busy_us, 0.35, 1e-12);
  EXPECT_NEAR(r.tracks[0].node_time_us, 0.41, 1e-12); // nodes overlapped
  EXPECT_NEAR(r.tracks[0].utilisation, 0.7, 1e-12);
}

// ---------------------------------------------------------------------------------------------------------------
// Critical path

// A -> {B, C} -> D: B is the long branch.
graph_description fork_join() {
  return graph_of({kernel_node("ka", "A"), kernel_node("kb", "B"), kernel_node("kc", "C"), kernel_node("kd", "D")},
                  {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
}

TEST(ProfileAnalyze, CriticalPathFollowsTheLongBranch) {
  trace t;
  t.graphs.push_back({2, "fj", fork_join()});
  t.activities = {graph_kernel(2, 0, "ka", 0, 1000, 1), graph_kernel(2, 2, "kc", 1100, 2000, 1, 8),
                  graph_kernel(2, 1, "kb", 1200, 5000, 1, 7), graph_kernel(2, 3, "kd", 5150, 6000, 1)};
  const auto r = analyze(t);
  ASSERT_EQ(r.launches.size(), 1U);
  const auto& l = r.launches[0];
  EXPECT_EQ(l.critical_path, (std::vector<std::string>{"A", "B", "D"}));
  EXPECT_NEAR(l.critical_path_us, 1.0 + 3.8 + 0.85, 1e-9);
  EXPECT_NEAR(l.critical_gaps_us, 0.2 + 0.15, 1e-9);
  EXPECT_EQ(l.gap_count, 2U);
  EXPECT_NEAR(l.gap_total_us, 0.1 + 0.15, 1e-9);
  EXPECT_NEAR(l.largest_gap.duration_us, 0.15, 1e-9);
  EXPECT_EQ(l.largest_gap.after, "B");
  EXPECT_EQ(l.largest_gap.before, "D");
  EXPECT_TRUE(l.largest_gap.on_critical_path);
  EXPECT_NEAR(l.busy_us, 5.75, 1e-9);
  EXPECT_NEAR(l.utilisation, 5.75 / 6.0, 1e-9);
  EXPECT_NEAR(r.tracks[0].median_critical_path_us, 5.65, 1e-9);
}

TEST(ProfileAnalyze, CriticalPathWalksThroughNodesWithoutRecords) {
  // A -> E (empty) -> B; C is an independent root that ends after A, before B starts.
  trace t;
  t.graphs.push_back(
      {2, "g",
       graph_of({kernel_node("ka", "A"), make(node_kind::empty, "E"), kernel_node("kb", "B"), kernel_node("kc", "C")},
                {{0, 1}, {1, 2}})});
  t.activities = {graph_kernel(2, 0, "ka", 0, 1000, 1), graph_kernel(2, 3, "kc", 0, 1900, 1, 8),
                  graph_kernel(2, 2, "kb", 2000, 3000, 1)};
  const auto r = analyze(t);
  ASSERT_EQ(r.launches.size(), 1U);
  EXPECT_EQ(r.launches[0].critical_path, (std::vector<std::string>{"A", "B"}));
  EXPECT_NEAR(r.launches[0].critical_gaps_us, 1.0, 1e-9);
  EXPECT_FALSE(r.launches[0].largest_gap.on_critical_path); // the gap before B follows C, which B did not wait on
  EXPECT_EQ(r.launches[0].gap_count, 1U);
  EXPECT_EQ(r.launches[0].largest_gap.after, "C");
}

// ---------------------------------------------------------------------------------------------------------------
// Eager steps, tracks, skipping

TEST(ProfileAnalyze, EagerStepsAreNamedByKernelAndOccurrence) {
  trace t;
  for (std::uint64_t s = 1; s <= 3; ++s) t.steps.push_back({s, "stream", t0 + s * 100'000, t0 + s * 100'000 + 50'000});
  t.steps.push_back({4, "sync", t0 + 400'000, t0 + 450'000});
  std::uint32_t correlation = 1;
  for (std::uint64_t s = 1; s <= 3; ++s) {
    const std::uint64_t b = s * 100'000;
    activity copy;
    copy.kind = activity_kind::memcpy;
    copy.copy_kind = "HtoD";
    copy.bytes = 4096;
    copy.start_ns = t0 + b + 5000;
    copy.end_ns = t0 + b + 6000;
    copy.stream = 1;
    copy.step = s;
    copy.correlation = correlation;
    t.host_calls.push_back(call(correlation++, b, s, false, "cudaMemcpyAsync"));
    t.activities.push_back(copy);
    t.activities.push_back(eager_kernel("gemm", b + 7000, b + 9000, s, correlation++));
    t.activities.push_back(eager_kernel("relu", b + 9500, b + 10'000, s, correlation++));
    t.activities.push_back(eager_kernel("gemm", b + 11'000, b + 14'000 + s * 1000, s, correlation++));
  }
  t.activities.push_back(eager_kernel("gemm", 400'000, 402'000, 4, correlation++));
  const auto r = analyze(t);
  EXPECT_EQ(r.records, 13U);
  EXPECT_EQ(r.attributed, 13U);
  const auto* first = find_node(r, "gemm #1", "stream");
  const auto* second = find_node(r, "gemm #2", "stream");
  const auto* relu = find_node(r, "relu", "stream");
  const auto* copy = find_node(r, "memcpy HtoD", "stream");
  const auto* single = find_node(r, "gemm", "sync");
  ASSERT_TRUE(first && second && relu && copy && single);
  EXPECT_EQ(first->ref.ordinal, 1U);
  EXPECT_EQ(second->ref.ordinal, 2U);
  EXPECT_TRUE(second->ref.graph.empty());
  EXPECT_TRUE(second->ref.path.empty());
  EXPECT_EQ(second->records, 3U);
  EXPECT_EQ(second->launches, 3U);
  EXPECT_NEAR(second->median_us, 5.0, 1e-9); // 4, 5, 6 µs
  EXPECT_EQ(copy->kind, node_kind::memcpy);
  EXPECT_EQ(single->records, 1U);
  EXPECT_EQ(single->ref.ordinal, 1U);
  ASSERT_EQ(r.launches.size(), 4U);
  EXPECT_EQ(r.launches[0].step, 1U);
  EXPECT_NEAR(r.launches[0].api_to_gpu_us, 5.0, 1e-9);
  EXPECT_EQ(r.launches[0].critical_path, (std::vector<std::string>{"memcpy HtoD", "gemm #1", "relu", "gemm #2"}));
  ASSERT_EQ(r.tracks.size(), 2U);
  const auto& stream = r.tracks[0];
  EXPECT_EQ(stream.track, "stream");
  EXPECT_EQ(stream.launches, 3U);
  // Walls: 10, 11, 12 µs; busy: 1 + 2 + 0.5 + 4/5/6 = 7.5, 8.5, 9.5 µs.
  EXPECT_NEAR(stream.median_wall_us, 11.0, 1e-9);
  EXPECT_NEAR(stream.median_busy_us, 8.5, 1e-9);
  EXPECT_NEAR(stream.utilisation, 25.5 / 33.0, 1e-9);
  // From the first start (105 µs) to the last end (317 µs).
  EXPECT_NEAR(stream.span_utilisation, 25.5 / 212.0, 1e-9);
  EXPECT_NEAR(stream.gap_total_us, 33.0 - 25.5, 1e-9);
  EXPECT_EQ(r.tracks[1].track, "sync");
  EXPECT_EQ(r.tracks[1].launches, 1U);
}

TEST(ProfileAnalyze, EagerWorkOutsideStepsIsOneUnit) {
  trace t;
  t.activities = {eager_kernel("k", 0, 100, 0, 1), eager_kernel("k", 200, 300, 0, 2)};
  const auto r = analyze(t);
  ASSERT_EQ(r.launches.size(), 1U);
  EXPECT_EQ(r.launches[0].track, "");
  EXPECT_EQ(r.launches[0].activities, 2U);
  ASSERT_NE(find_node(r, "k #2"), nullptr);
  EXPECT_EQ(r.launches[0].api_to_gpu_us, -1.0); // no API call recorded
}

TEST(ProfileAnalyze, SkipLaunchesLeavesOutEachTracksFirstUnits) {
  trace t;
  t.graphs.push_back({2, "fj", fork_join()});
  std::uint32_t correlation = 1;
  for (std::uint64_t s = 1; s <= 3; ++s) {
    t.steps.push_back({s, "graph", t0, t0});
    const std::uint64_t b = s * 100'000;
    const std::uint64_t slow = s == 1 ? 50'000 : 0; // the warm-up launch is slow
    for (std::uint32_t n = 0; n < 4; ++n) {
      auto a = graph_kernel(2, n, std::string("k") + "abcd"[n], b + n * 2000, b + n * 2000 + 1000 + (n == 0 ? slow : 0),
                            correlation);
      a.step = s;
      t.activities.push_back(a);
    }
    ++correlation;
    t.steps.push_back({s + 10, "eager", t0, t0});
    t.activities.push_back(eager_kernel("e", b + 60'000, b + 61'000, s + 10, 100 + correlation));
  }
  const auto all = analyze(t);
  EXPECT_EQ(all.launches.size(), 6U);
  EXPECT_EQ(all.records, 15U);
  const auto r = analyze(t, {1});
  EXPECT_EQ(r.launches.size(), 4U);
  EXPECT_EQ(r.records, 10U);
  ASSERT_EQ(r.tracks.size(), 2U);
  EXPECT_EQ(r.tracks[0].launches, 2U);
  EXPECT_EQ(r.tracks[1].launches, 2U);
  const auto* a = find_node(r, "A", "graph");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->records, 2U);
  EXPECT_NEAR(a->max_us, 1.0, 1e-9); // the slow warm-up is gone
  EXPECT_NEAR(find_node(all, "A", "graph")->max_us, 51.0, 1e-9);
  for (const auto& l : r.launches) EXPECT_NE(l.step, 1U);
}

TEST(ProfileAnalyze, InvalidDescriptionsThrow) {
  trace t;
  t.graphs.push_back(
      {1, "cyclic", graph_of({kernel_node("a"), kernel_node("b"), kernel_node("c")}, {{0, 1}, {1, 2}, {2, 1}})});
  try {
    (void)analyze(t);
    FAIL() << "a cycle must throw";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'cyclic'"), std::string::npos) << what;
    EXPECT_NE(what.find("cycle"), std::string::npos) << what;
    EXPECT_NE(what.find("2 ('c') -> 1 ('b') -> 2 ('c')"), std::string::npos) << what;
  }
  t.graphs[0] = {1, "range", graph_of({kernel_node("a"), kernel_node("b")}, {{0, 1}, {1, 5}})};
  try {
    (void)analyze(t);
    FAIL() << "an edge out of range must throw";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'range'"), std::string::npos) << what;
    EXPECT_NE(what.find("edge 1 (1 -> 5)"), std::string::npos) << what;
    EXPECT_NE(what.find("out of range"), std::string::npos) << what;
  }
  auto child = make(node_kind::child_graph, "sub");
  child.bodies.push_back(graph_of({kernel_node("x")}, {{0, 0}}));
  t.graphs[0] = {1, "nested", graph_of({child}, {})};
  try {
    (void)analyze(t);
    FAIL() << "a cycle in a body must throw";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("body 0 of node 0 ('sub')"), std::string::npos) << what;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Exports

// A realistic trace: track "graph" with three launches of the fork/join graph whose branches B and C run on the
// same stream id and overlap without nesting; track "stream" with eager steps; host calls for all.
trace realistic() {
  trace t;
  t.device_name = "NVIDIA H200";
  t.graphs.push_back({2, "fj", fork_join()});
  std::uint32_t correlation = 1;
  std::uint64_t id = 1;
  for (int k = 0; k < 4; ++k, ++id) {
    const std::uint64_t b = 1'000'000 + static_cast<std::uint64_t>(k) * 20'000;
    t.steps.push_back({id, "graph", t0 + b - 3000, t0 + b + 15'000});
    t.host_calls.push_back(call(correlation, b - 3000, id, true, "cudaGraphLaunch"));
    std::vector<activity> records = {graph_kernel(2, 0, "ka", b, b + 1000, correlation),
                                     graph_kernel(2, 1, "kb", b + 1200, b + 5000, correlation, 7),
                                     graph_kernel(2, 2, "kc", b + 1100, b + 2000, correlation, 7),
                                     graph_kernel(2, 3, "kd", b + 5150, b + 6000, correlation)};
    for (auto& a : records) {
      a.step = id;
      a.grid = {1, 1, 1};
      a.block = {32, 1, 1};
      t.activities.push_back(a);
    }
    ++correlation;
  }
  for (int k = 0; k < 3; ++k, ++id) {
    const std::uint64_t b = 9'000'000 + static_cast<std::uint64_t>(k) * 30'000;
    t.steps.push_back({id, "stream", t0 + b - 4000, t0 + b + 20'000});
    activity copy;
    copy.kind = activity_kind::memcpy;
    copy.name = "memcpy HtoD";
    copy.copy_kind = "HtoD";
    copy.bytes = 1 << 20;
    copy.start_ns = t0 + b;
    copy.end_ns = t0 + b + 3000;
    copy.stream = 3;
    copy.step = id;
    copy.correlation = correlation;
    t.host_calls.push_back(call(correlation++, b - 4000, id, false, "cudaMemcpyAsync"));
    t.activities.push_back(copy);
    for (int n = 0; n < 3; ++n) {
      const std::uint64_t s = b + 4000 + static_cast<std::uint64_t>(n) * 3000;
      t.host_calls.push_back(call(correlation, s - 2500, id, false));
      t.activities.push_back(eager_kernel("kern", s, s + 2000, id, correlation++, 3));
    }
  }
  // An unwatched graph outside steps.
  t.activities.push_back(graph_kernel(77, 0, "other", 20'000'000, 20'001'000, 999));
  t.host_calls.push_back(call(999, 19'990'000, 0, true, "cudaGraphLaunch"));
  return t;
}

std::string fmt_thread(const std::pair<long, long>& t) {
  return "pid " + std::to_string(t.first) + " tid " + std::to_string(t.second);
}

// A checker of the Chrome trace-event format, as the spec describes it
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
std::vector<std::string> trace_event_errors(const json& doc, bool aligned) {
  std::vector<std::string> errors;
  auto error = [&](std::string text) { errors.push_back(std::move(text)); };
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    error("no traceEvents array");
    return errors;
  }
  if (doc.contains("displayTimeUnit") && doc["displayTimeUnit"] != "ns" && doc["displayTimeUnit"] != "ms")
    error("displayTimeUnit must be ns or ms");
  struct span {
    double ts;
    double end;
    std::string name;
  };
  std::map<std::pair<long, long>, std::vector<span>> threads;
  std::set<long> named_processes;
  std::set<std::pair<long, long>> named_threads;
  std::map<std::string, std::vector<json>> flows;
  std::map<long, double> first_ts;
  for (const auto& e : doc["traceEvents"]) {
    if (!e.contains("ph") || !e["ph"].is_string()) {
      error("event without ph: " + e.dump());
      continue;
    }
    const std::string ph = e["ph"];
    const bool has_ids =
        e.contains("pid") && e["pid"].is_number_integer() && e.contains("tid") && e["tid"].is_number_integer();
    if (ph == "X") {
      const auto before = errors.size();
      if (!e.contains("ts") || !e["ts"].is_number()) error("X without numeric ts: " + e.dump());
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0)
        error("X without dur >= 0: " + e.dump());
      if (!has_ids) error("X without pid/tid: " + e.dump());
      if (!e.contains("name") || !e["name"].is_string()) error("X without name: " + e.dump());
      if (errors.size() != before) continue;
      const double ts = e["ts"];
      const long pid = e["pid"];
      threads[{pid, e["tid"].get<long>()}].push_back({ts, ts + e["dur"].get<double>(), e["name"]});
      auto [it, fresh] = first_ts.try_emplace(pid, ts);
      if (!fresh) it->second = std::min(it->second, ts);
    } else if (ph == "M") {
      const std::string name = e.value("name", "");
      if (name != "process_name" && name != "thread_name") error("M with name " + name);
      if (!e.contains("args") || !e["args"].contains("name") || !e["args"]["name"].is_string())
        error("M without args.name: " + e.dump());
      if (!e.contains("pid")) error("M without pid");
      if (name == "process_name") named_processes.insert(e["pid"].get<long>());
      if (name == "thread_name") {
        if (!has_ids) error("thread_name without tid");
        else named_threads.insert({e["pid"].get<long>(), e["tid"].get<long>()});
      }
    } else if (ph == "s" || ph == "f") {
      const auto before = errors.size();
      if (!e.contains("id")) error("flow without id: " + e.dump());
      if (!has_ids || !e.contains("ts") || !e["ts"].is_number()) error("flow without pid/tid/ts: " + e.dump());
      if (ph == "f" && e.value("bp", "") != "e") error("f without bp e: " + e.dump());
      if (errors.size() == before) flows[e["id"].dump()].push_back(e);
    } else {
      error("unexpected phase " + ph);
    }
  }
  constexpr double eps = 1e-6; // µs
  for (auto& [thread, spans] : threads) {
    if (named_threads.count(thread) == 0) error(fmt_thread(thread) + " has no thread_name");
    if (named_processes.count(thread.first) == 0) error("pid " + std::to_string(thread.first) + " has no name");
    std::sort(spans.begin(), spans.end(),
              [](const span& x, const span& y) { return x.ts != y.ts ? x.ts < y.ts : x.end > y.end; });
    std::vector<span> open;
    for (const auto& s : spans) {
      while (!open.empty() && open.back().end <= s.ts + eps) open.pop_back();
      if (!open.empty() && s.end > open.back().end + eps)
        error(fmt_thread(thread) + ": '" + s.name + "' overlaps '" + open.back().name + "' without nesting");
      open.push_back(s);
    }
  }
  auto inside_a_slice = [&](const json& e) {
    const auto it = threads.find({e["pid"].get<long>(), e["tid"].get<long>()});
    if (it == threads.end()) return false;
    const double ts = e["ts"];
    return std::any_of(it->second.begin(), it->second.end(),
                       [&](const span& s) { return s.ts - eps <= ts && ts <= s.end + eps; });
  };
  for (const auto& [id, events] : flows) {
    if (events.size() != 2 || events[0]["ph"] != "s" || events[1]["ph"] != "f") {
      error("flow " + id + " is not one s then one f");
      continue;
    }
    if (events[0].value("cat", "") != events[1].value("cat", "")) error("flow " + id + ": s and f differ in cat");
    if (events[0]["ts"].get<double>() > events[1]["ts"].get<double>()) error("flow " + id + " goes back in time");
    if (!inside_a_slice(events[0]) || !inside_a_slice(events[1])) error("flow " + id + " is not on a slice");
  }
  if (aligned)
    for (const auto& [pid, ts] : first_ts)
      if (std::abs(ts) > eps) error("pid " + std::to_string(pid) + " starts at " + std::to_string(ts));
  return errors;
}

std::map<std::pair<long, long>, std::string> thread_names(const json& doc) {
  std::map<std::pair<long, long>, std::string> names;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") names[{e["pid"], e["tid"]}] = e["args"]["name"];
  return names;
}

TEST(ProfileExport, PerfettoTraceIsValidTraceEventJson) {
  const auto t = realistic();
  const auto r = analyze(t, {1});
  const auto doc = json::parse(to_perfetto(t, r));
  const auto errors = trace_event_errors(doc, true);
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_EQ(doc["otherData"]["device"], "NVIDIA H200");

  std::set<std::string> processes;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"]);
  EXPECT_EQ(processes, (std::set<std::string>{"graph", "stream", "graph: executable graph 77"}));
  std::set<std::string> rows;
  for (const auto& [thread, name] : thread_names(doc)) rows.insert(name);
  EXPECT_EQ(rows.count("device 0 stream 7"), 1U);
  EXPECT_EQ(rows.count("device 0 stream 7 lane 2"), 1U); // B and C overlap on stream 7
  EXPECT_EQ(rows.count("launches"), 1U);
  EXPECT_EQ(rows.count("host"), 1U);

  std::size_t kernels = 0;
  std::size_t launch_spans = 0;
  std::size_t skipped = 0;
  std::size_t flows = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") ++flows;
    if (e["ph"] != "X") continue;
    if (e["cat"] == "kernel") {
      ++kernels;
      EXPECT_TRUE(e["args"].contains("kernel"));
      if (e["args"].contains("graph")) EXPECT_EQ(e["args"]["grid"], json::array({1, 1, 1}));
      else EXPECT_FALSE(e["args"].contains("grid")); // eager records here have no launch shape
    }
    if (e["name"] == "B") EXPECT_EQ(e["args"]["path"], json::array({1}));
    if (e["cat"] == "launch") {
      ++launch_spans;
      if (e["args"].value("analysed", true) == false) ++skipped;
    }
  }
  EXPECT_EQ(kernels, 4U * 4 + 3 * 3 + 1);
  EXPECT_EQ(launch_spans, 4U + 3 + 1);
  EXPECT_EQ(skipped, 3U); // the first launch of each track ("graph", "stream", "") was skipped in the report
  // 4 dependencies (A->B, A->C, B->D, C->D) for the first 3 launches.
  EXPECT_EQ(flows, 12U);

  perfetto_options options;
  options.align_tracks = false;
  options.flow_launches = 0;
  options.host_calls = false;
  const auto plain = json::parse(to_perfetto(t, r, options));
  for (const auto& e : trace_event_errors(plain, false)) ADD_FAILURE() << e;
  double graph_first = 1e300;
  double stream_first = 1e300;
  double overall = 1e300;
  for (const auto& e : plain["traceEvents"]) {
    EXPECT_NE(e["ph"], "s");
    if (e["ph"] != "X") continue;
    EXPECT_NE(e["cat"], "api");
    overall = std::min(overall, e["ts"].get<double>());
    if (e["name"] == "A") graph_first = std::min(graph_first, e["ts"].get<double>());
    if (e["name"] == "memcpy HtoD") stream_first = std::min(stream_first, e["ts"].get<double>());
  }
  EXPECT_EQ(overall, 0.0);
  EXPECT_NEAR(graph_first, 0.0, 1e-9);
  EXPECT_NEAR(stream_first, 8000.0, 1e-9); // 8 ms later, not aligned
}

TEST(ProfileExport, TheValidatorCatchesOverlapsAndBrokenFlows) {
  json bad = {{"traceEvents",
               {{{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "p"}}}},
                {{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "t"}}}},
                {{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", 0.0}, {"dur", 2.0}},
                {{"ph", "X"}, {"name", "b"}, {"pid", 1}, {"tid", 1}, {"ts", 1.0}, {"dur", 2.0}},
                {{"ph", "s"}, {"id", 1}, {"pid", 1}, {"tid", 1}, {"ts", 1.0}}}}};
  const auto errors = trace_event_errors(bad, true);
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_NE(errors[0].find("without nesting"), std::string::npos);
  EXPECT_NE(errors[1].find("not one s then one f"), std::string::npos);
}

TEST(ProfileExport, DotColoursNodesByShare) {
  trace t;
  auto d = graph_of({kernel_node("ka", "A \"first\""), kernel_node("kb", "B"), kernel_node("kc", "C"),
                     make(node_kind::empty, "join")},
                    {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  auto loop = make(node_kind::conditional, "loop");
  loop.bodies.push_back(graph_of({kernel_node("kl", "body")}, {}));
  d.nodes.push_back(loop);
  d.nodes.back().id = 4;
  d.edges.emplace_back(3, 4);
  t.graphs.push_back({2, "fj", d});
  t.steps = {{1, "graph", t0, t0}};
  t.activities = {graph_kernel(2, 0, "ka", 0, 1000, 1), graph_kernel(2, 1, "kb", 1000, 5000, 1),
                  graph_kernel(2, 2, "kc", 1000, 2000, 1), graph_kernel(2, 5, "kl", 5000, 5500, 0)};
  for (auto& a : t.activities) a.step = a.correlation != 0 ? 1 : 0;
  const auto r = analyze(t);
  ASSERT_EQ(r.attributed, 4U);
  const auto dot = to_dot(d, r, "fj");
  EXPECT_NE(dot.find("digraph \"conveyor\" {"), std::string::npos);
  // B has the largest share: pure red; the join node has no records: grey; A lighter.
  EXPECT_NE(dot.find("n1 [label=\"B\\nmedian 4.00 µs\\ntotal 4.0 µs / 61.5 %\", fillcolor=\"#ff0000\"]"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n3 [label=\"join\\nempty\\nno profile data\", fillcolor=\"#d9d9d9\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("A \\\"first\\\""), std::string::npos);              // quotes escaped
  EXPECT_NE(dot.find("fillcolor=\"#ffbfbf\""), std::string::npos) << dot; // A: 1/4 of B's share
  EXPECT_NE(dot.find("subgraph cluster_n4_0"), std::string::npos);
  EXPECT_NE(dot.find("n4_0_0 [label=\"body\\nmedian 0.50 µs"), std::string::npos) << dot;
  EXPECT_NE(dot.find("bodies: total 0.5 µs / 7.7 %"), std::string::npos) << dot;
  EXPECT_EQ(std::count(dot.begin(), dot.end(), '{'), std::count(dot.begin(), dot.end(), '}'));
  // Another track has no data: everything grey.
  const auto none = to_dot(d, r, "fj", "stream");
  EXPECT_EQ(none.find("#ff"), std::string::npos);
  if (std::system("which dot > /dev/null 2>&1") == 0) {
    const std::string path = ::testing::TempDir() + "conveyor_profile_test.dot";
    std::ofstream(path) << dot;
    EXPECT_EQ(std::system(("dot -Tsvg " + path + " -o /dev/null").c_str()), 0) << dot;
    std::remove(path.c_str());
  } else {
    std::printf("dot is not installed: skipping the Graphviz check\n");
  }
}

TEST(ProfileExport, TextReportHasTheNumbers) {
  auto t = realistic();
  t.dropped_records = 17;
  const auto r = analyze(t);
  const auto text = to_text(r, 3);
  for (const std::string part :
       {"profile on NVIDIA H200: 29 records, 28 attributed (96.6 %)", "WARNING: 17 records were dropped",
        "track \"graph\": 4 launches, median wall 6.00 µs, median busy 5.75 µs, utilisation 95.8 %",
        "critical path 5.65 µs of 6.00 µs wall", "largest gap: 0.15 µs after 'B' before 'D'", "on the critical path",
        "track \"stream\": 3 launches", "B ", "3.80", "unattributed: 1 of 29 records",
        "1 records: executable graph 77 was not watched (profiler::watch) (e.g. kernel other at node 77:0)",
        "track (outside steps)", "... and 1 more nodes"})
    EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part << "\n" << text;
  // The node table row of B: 4 records, 15.20 µs in total, share 15.2 / (4 + 15.2 + 3.6 + 3.4) = 58.0 %.
  EXPECT_NE(text.find("15.20"), std::string::npos) << text;
  EXPECT_NE(text.find("58.0%"), std::string::npos) << text;
}

// The text table shortens kernel names (readable.hpp), the verbose one prints them whole.
TEST(ProfileExport, TextReportShortensKernelNamesUnlessVerbose) {
  profile_report r;
  r.records = r.attributed = 2;
  track_summary t;
  t.track = "graph";
  t.launches = 1;
  r.tracks.push_back(t);
  const std::string long_name =
      "void conveyor::cavity::(anonymous namespace)::stream_collide<double, 9>(double const*, double*)";
  node_profile n;
  n.ref.track = "graph";
  n.ref.label = long_name;
  n.records = 2;
  n.total_us = 4.5;
  n.share = 1.0;
  r.nodes.push_back(n);
  const std::string brief = to_text(r);
  EXPECT_NE(brief.find("\n  stream_collide  "), std::string::npos) << brief;
  EXPECT_EQ(brief.find("anonymous"), std::string::npos) << brief;
  EXPECT_NE(brief.find("4.50"), std::string::npos) << brief;
  const std::string full = to_text(r, 12, true);
  EXPECT_NE(full.find(long_name.substr(0, 60)), std::string::npos) << full;
}

} // namespace

namespace {

// The shape of `conveyor solve`'s graph-while: init -> finish -> check -> WHILE (body: 3 kernels in a chain) ->
// copy; many iterations, each body kernel 1 µs, 0.5 µs between body kernels, 20 µs between iterations. The
// critical path runs through every iteration: its gaps are the idle time between the body's kernels, not the loop.
TEST(ProfileAnalyze, CriticalPathRunsThroughEveryWhileIteration) {
  auto body = graph_of({kernel_node("b0"), kernel_node("b1"), kernel_node("b2")}, {{0, 1}, {1, 2}});
  auto loop = make(node_kind::conditional, "loop");
  loop.conditional_type = "while";
  loop.bodies.push_back(body);
  auto copy = make(node_kind::memcpy, "copy");
  const auto g = graph_of({kernel_node("init"), kernel_node("finish"), kernel_node("check"), loop, copy},
                          {{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  trace t;
  t.graphs.push_back({9, "cg", g});
  const std::uint32_t corr = 50;
  t.host_calls.push_back(call(corr, 0, 0, true, "cudaGraphLaunch"));
  std::uint64_t at = 5000;
  for (std::uint32_t k = 0; k < 3; ++k, at += 1500)
    t.activities.push_back(graph_kernel(9, k, k == 0 ? "init" : k == 1 ? "finish" : "check", at, at + 1000, corr));
  constexpr int iterations = 200;
  for (int i = 0; i < iterations; ++i) {
    at += 20000;
    for (std::uint32_t k = 0; k < 3; ++k, at += 1500)
      t.activities.push_back(graph_kernel(9, 5 + k, "b" + std::to_string(k), at, at + 1000, 0, 8)); // body stream
  }
  activity c;
  c.kind = activity_kind::memcpy;
  c.start_ns = t0 + at + 3000;
  c.end_ns = c.start_ns + 2000;
  c.correlation = corr;
  c.exec_id = 9;
  c.node_id = (std::uint64_t{9} << 32U) | 4U;
  c.stream = 7;
  for (const bool eager_copy : {false, true}) {
    // Second pass: the copy is not a node but an eager cudaMemcpyAsync after the launch, in the same step, on the
    // stream the graph was launched into (its nodes ran on other streams): it waits for the loop all the same.
    trace u = t;
    activity copy = c;
    if (eager_copy) {
      u.graphs[0].graph.nodes.pop_back();
      u.graphs[0].graph.edges.pop_back();
      copy.exec_id = 0;
      copy.node_id = 0;
      copy.correlation = corr + 1;
      copy.stream = 7; // where init, finish and check ran: stream order alone would skip the loop
      copy.name = "memcpy DtoH";
      u.steps.push_back({1, "graph-while", t0, t0 + at + 10000});
      for (auto& a : u.activities) {
        if (a.correlation != 0) a.step = 1;
        if ((a.node_id & 0xffffffffU) >= 5U) --a.node_id; // the body numbers after 4 top-level nodes now
      }
      copy.step = 1;
      u.host_calls[0].step = 1;
    }
    u.activities.push_back(copy);
    const auto r = analyze(u);
    ASSERT_EQ(r.attributed, r.records) << to_text(r);
    ASSERT_EQ(r.launches.size(), 1U) << to_text(r);
    const auto& l = r.launches[0];
    EXPECT_EQ(l.critical_path.size(), 3U + 3U * iterations + 1U) << "eager copy: " << eager_copy;
    EXPECT_NEAR(l.critical_path_us, 3.0 + 3.0 * iterations + 2.0, 1e-6) << "eager copy: " << eager_copy;
    EXPECT_NEAR(l.critical_path_us + l.critical_gaps_us, l.wall_us, 1e-6) << "eager copy: " << eager_copy;
  }
}

} // namespace

namespace {

// Traces written by real runs (`conveyor <workload> --profile FILE.json` on a GPU machine), named in the environment
// variable CONVEYOR_TRACE_FILES (separated by ':'), checked with the same trace-event validator: how the traces in
// docs/observe.md were validated. Skips when the variable is unset.
TEST(ProfileExport, RecordedTracesAreValidTraceEventJson) {
  const char* files = std::getenv("CONVEYOR_TRACE_FILES");
  if (files == nullptr || *files == '\0') GTEST_SKIP() << "set CONVEYOR_TRACE_FILES to traces to check";
  std::string list = files;
  std::size_t checked = 0;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(':', at), list.size());
    const std::string path = list.substr(at, end - at);
    at = end + 1;
    if (path.empty()) continue;
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    const json trace = json::parse(in);
    const auto errors = trace_event_errors(trace, true);
    EXPECT_TRUE(errors.empty()) << path << ": " << (errors.empty() ? "" : errors.front());
    std::size_t slices = 0;
    for (const auto& e : trace.at("traceEvents")) slices += e.at("ph") == "X" ? 1 : 0;
    EXPECT_GT(slices, 0U) << path;
    std::printf("%s: %zu events, %zu slices, valid\n", path.c_str(), trace.at("traceEvents").size(), slices);
    ++checked;
  }
  EXPECT_GT(checked, 0U);
}

} // namespace

namespace {

// CUDA runs some memset nodes as its own kernel ("memset32", seen on an H200 for a 4-byte memset node): the record
// is the node's. Another kernel at a memset node's number is still a mismatch.
TEST(ProfileAnalyze, MemsetNodesRunAsCudasOwnKernelAreAttributed) {
  auto ms = make(node_kind::memset, "zero");
  ms.bytes = 4096;
  const auto g = graph_of({ms, kernel_node("axpy")}, {{0, 1}});
  trace t;
  t.graphs.push_back({3, "g", g});
  t.host_calls.push_back(call(10, 0, 0, true, "cudaGraphLaunch"));
  t.activities.push_back(graph_kernel(3, 0, "memset32", 1000, 2000, 10));
  t.activities.push_back(graph_kernel(3, 1, "axpy", 2500, 3500, 10));
  t.host_calls.push_back(call(11, 5000, 0, true, "cudaGraphLaunch"));
  t.activities.push_back(graph_kernel(3, 0, "axpy", 6000, 7000, 11)); // not CUDA's memset kernel
  t.activities.push_back(graph_kernel(3, 1, "axpy", 7500, 8500, 11));
  const auto r = analyze(t);
  EXPECT_EQ(r.records, 4U);
  EXPECT_EQ(r.attributed, 3U);
  ASSERT_EQ(r.unattributed.size(), 1U);
  EXPECT_NE(r.unattributed[0].reason.find("memset node"), std::string::npos) << r.unattributed[0].reason;
  const auto* zero = find_node(r, "zero");
  ASSERT_NE(zero, nullptr);
  EXPECT_EQ(zero->records, 1U);
  EXPECT_EQ(zero->kind, node_kind::memset);
}

} // namespace

namespace {

// Inputs no measurement gives are refused with the reason, not turned into nonsense numbers.
TEST(ProfileAnalyze, RefusesAnActivityEndingBeforeItStartsAndAGraphWatchedTwice) {
  const auto g = graph_of({kernel_node("k")}, {});
  trace t;
  t.graphs.push_back({4, "g", g});
  t.activities.push_back(graph_kernel(4, 0, "k", 2000, 1000, 7));
  try {
    (void)analyze(t);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ends before it starts"), std::string::npos) << e.what();
  }
  t.activities[0] = graph_kernel(4, 0, "k", 1000, 2000, 7);
  EXPECT_NO_THROW((void)analyze(t));
  t.graphs.push_back({4, "again", g});
  try {
    (void)analyze(t);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("watched twice"), std::string::npos) << e.what();
  }
  auto bad = g;
  bad.edges.emplace_back(0, 3);
  EXPECT_THROW((void)to_dot(bad, profile_report{}, "g"), std::invalid_argument);
  EXPECT_NE(to_text(profile_report{}).find("no records"), std::string::npos) << to_text(profile_report{});
}

// A long WHILE loop: every iteration counted, and the export (with dependency arrows inside the loop's body for the
// first launches) stays linear: 3 launches x 5,000 iterations of a 3-kernel body.
TEST(ProfileExport, LongWhileLoopsExportWithArrowsThroughEveryIteration) {
  auto body = graph_of({kernel_node("b0"), kernel_node("b1"), kernel_node("b2")}, {{0, 1}, {1, 2}});
  auto loop = make(node_kind::conditional, "loop");
  loop.conditional_type = "while";
  loop.bodies.push_back(body);
  const auto g = graph_of({kernel_node("init"), loop}, {{0, 1}});
  trace t;
  t.graphs.push_back({5, "w", g});
  constexpr int iterations = 5000;
  std::uint64_t at = 0;
  for (std::uint32_t launch = 0; launch < 3; ++launch) {
    const std::uint32_t corr = 100 + launch;
    t.host_calls.push_back(call(corr, at, 0, true, "cudaGraphLaunch"));
    at += 3000;
    t.activities.push_back(graph_kernel(5, 0, "init", at, at + 1000, corr));
    at += 1500;
    for (int i = 0; i < iterations; ++i)
      for (std::uint32_t k = 0; k < 3; ++k, at += 1500)
        t.activities.push_back(graph_kernel(5, 2 + k, "b" + std::to_string(k), at, at + 1000, 0, 8));
    at += 10000;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = analyze(t);
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(r.attributed, r.records);
  ASSERT_EQ(r.launches.size(), 3U);
  const auto text = to_perfetto(t, r);
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("analyze %.2f s, to_perfetto %.2f s\n", std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
  const auto doc = json::parse(text);
  std::size_t flows = 0;
  for (const auto& e : doc.at("traceEvents")) flows += e.at("ph") == "s" ? 1 : 0;
  // Per launch: init -> the loop's first kernel, then b0 -> b1 and b1 -> b2 in every iteration (the body's edges;
  // the loop's own repetition is no edge).
  EXPECT_EQ(flows, 3U * (1U + 2U * iterations));
}

} // namespace

// Programmatic dependent launch: each node starts (and waits) before its predecessor ends. The critical path still
// runs through the chain, counts each node from its predecessor's end, and finds no idle time on it.
TEST(ProfileAnalyze, CriticalPathRunsThroughProgrammaticOverlap) {
  auto g = graph_of({kernel_node("k", "a"), kernel_node("k", "b"), kernel_node("k", "c")}, {{0, 1}, {1, 2}});
  g.edge_types = {conveyor::edge_type::programmatic, conveyor::edge_type::programmatic};
  trace t;
  t.graphs.push_back({3, "pdl", g});
  t.activities = {graph_kernel(3, 0, "k", 0, 1000, 1), graph_kernel(3, 1, "k", 600, 2000, 1),
                  graph_kernel(3, 2, "k", 1500, 3000, 1)};
  const auto r = analyze(t);
  ASSERT_EQ(r.launches.size(), 1U);
  const auto& l = r.launches[0];
  EXPECT_EQ(l.critical_path, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_NEAR(l.critical_path_us, 3.0, 1e-9); // 1.0 + (2.0 - 1.0) + (3.0 - 2.0)
  EXPECT_NEAR(l.critical_gaps_us, 0.0, 1e-9);
  EXPECT_NEAR(l.wall_us, 3.0, 1e-9);
  // The trace's dependency arrows start where the dependent may start: inside the predecessor, forward in time.
  const auto doc = json::parse(to_perfetto(t, r));
  for (const auto& e : trace_event_errors(doc, true)) ADD_FAILURE() << e;
  std::size_t flows = 0;
  for (const auto& e : doc["traceEvents"]) flows += e["ph"] == "s" ? 1U : 0U;
  EXPECT_EQ(flows, 2U);

  // The same records with full edges are not a chain: b and c could not have waited on what they overlap.
  auto full = g;
  full.edge_types.clear();
  trace u = t;
  u.graphs[0].graph = full;
  const auto rf = analyze(u);
  EXPECT_NE(rf.launches[0].critical_path, (std::vector<std::string>{"a", "b", "c"}));
}
