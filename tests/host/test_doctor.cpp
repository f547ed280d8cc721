// Host tests of the tuning doctor (conveyor/profile/doctor.hpp): for every check an input built to trigger it
// (check id, severity, nodes, numbers in the evidence) and a near miss that must not; ordering, validation and the
// text and JSON outputs. Inputs are plain values filled by hand (descriptions, exec facts, profile reports, graphed
// statistics): no GPU, no analysis.
#include <conveyor/profile/doctor.hpp>
#include <conveyor/profile/readable.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using conveyor::exec_facts;
using conveyor::graph_description;
using conveyor::graphed_statistics;
using conveyor::node_description;
using conveyor::node_kind;
using namespace conveyor::profile;

// ---- builders --------------------------------------------------------------------------------------------------

node_description node(std::size_t id, node_kind kind, std::string label = {}) {
  node_description n;
  n.id = id;
  n.kind = kind;
  n.label = std::move(label);
  return n;
}
node_description kernel(std::size_t id, std::string label, std::vector<std::uint64_t> buffers = {}) {
  node_description n = node(id, node_kind::kernel, std::move(label));
  n.kernel_name = "k_" + n.label;
  n.grid = {64, 1, 1};
  n.block = {256, 1, 1};
  n.buffers = std::move(buffers);
  return n;
}
node_description copy(std::size_t id, std::string label, std::string kind, std::size_t bytes, bool pageable = false) {
  node_description n = node(id, node_kind::memcpy, std::move(label));
  n.copy_kind = std::move(kind);
  n.bytes = bytes;
  n.pageable_host = pageable;
  return n;
}
// n kernels named k0..k{n-1} in a chain.
graph_description chain(std::size_t n, const std::string& prefix = "k") {
  graph_description g;
  for (std::size_t i = 0; i < n; ++i) g.nodes.push_back(kernel(i, prefix + std::to_string(i)));
  for (std::size_t i = 1; i < n; ++i) g.edges.push_back({i - 1, i});
  return g;
}
// A graph with enough independent work that few_nodes and pdl_chains stay quiet: `n` kernels fanned out from one.
graph_description fan(std::size_t n) {
  graph_description g;
  g.nodes.push_back(kernel(0, "root"));
  for (std::size_t i = 1; i <= n; ++i) {
    g.nodes.push_back(kernel(i, "leaf" + std::to_string(i)));
    g.edges.push_back({0, i});
  }
  return g;
}

launch_profile launch(double wall, double gap_total = 0, std::size_t gap_count = 0, double critical_gaps = 0) {
  launch_profile l;
  l.graph = "g";
  l.track = "graph";
  l.wall_us = wall;
  l.busy_us = wall - gap_total;
  l.gap_total_us = gap_total;
  l.gap_count = gap_count;
  l.critical_gaps_us = critical_gaps;
  return l;
}
node_profile measured(std::vector<std::size_t> path, std::string label, double median_us,
                      node_kind kind = node_kind::kernel, std::size_t records = 3, std::size_t launches = 3) {
  node_profile n;
  n.ref.graph = "g";
  n.ref.track = "graph";
  n.ref.path = std::move(path);
  n.ref.label = std::move(label);
  n.kind = kind;
  n.median_us = n.min_us = n.max_us = median_us;
  n.records = records;
  n.launches = launches;
  n.total_us = median_us * static_cast<double>(records);
  return n;
}

doctor_input with_graph(const graph_description& g) {
  doctor_input in;
  in.name = "test";
  in.graph = &g;
  return in;
}
doctor_input with_profile(doctor_input in, const profile_report& r) {
  in.profile = &r;
  in.profile_graph = "g";
  in.profile_track = "graph";
  return in;
}

std::vector<finding> of(const std::vector<finding>& all, const std::string& check) {
  std::vector<finding> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out), [&](const finding& f) { return f.check == check; });
  return out;
}
std::vector<finding> run(const doctor_input& in, const std::string& check) { return of(diagnose(in), check); }

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)
#define EXPECT_LACKS(text, part) EXPECT_EQ(std::string(text).find(part), std::string::npos) << (text)

// ---- the list, empty input, validation -------------------------------------------------------------------------

TEST(Doctor, ChecksListsSeventeenIdsInOrder) {
  const std::vector<std::string> expected{
      "failed_launch",         "few_nodes",        "short_kernels",    "critical_path_gaps",  "pdl_chains",
      "host_on_critical_path", "removable_copies", "missing_upload",   "unfreed_allocations", "captured_allocations",
      "recapture_churn",       "churn_guard",      "update_fallbacks", "serialised_branches", "tiny_loop_body",
      "legacy_stream",         "step_through"};
  EXPECT_EQ(doctor_checks(), expected);
  EXPECT_STREQ(to_string(severity::info), "info");
  EXPECT_STREQ(to_string(severity::warning), "warning");
  EXPECT_STREQ(to_string(severity::critical), "critical");
}

TEST(Doctor, EmptyInputHasNoFindings) {
  EXPECT_TRUE(diagnose(doctor_input{}).empty());
  const graph_description empty;
  const exec_facts facts;
  const profile_report report;
  const graphed_statistics stats;
  const std::deque<std::string> reasons;
  doctor_input in = with_profile(with_graph(empty), report);
  in.exec = &facts;
  in.graphed = &stats;
  in.graphed_reasons = &reasons;
  EXPECT_TRUE(diagnose(in).empty());
  EXPECT_EQ(to_text({}, "empty"), "tuning doctor: empty: no findings\n");
  EXPECT_EQ(nlohmann::json::parse(to_json({})), nlohmann::json::array());
}

TEST(Doctor, InvalidDescriptionThrows) {
  graph_description out_of_range = chain(2);
  out_of_range.edges.push_back({1, 5});
  EXPECT_THROW((void)diagnose(with_graph(out_of_range)), std::invalid_argument);

  graph_description cycle = chain(3);
  cycle.edges.push_back({2, 0});
  EXPECT_THROW((void)diagnose(with_graph(cycle)), std::invalid_argument);

  graph_description self = chain(2);
  self.edges.push_back({1, 1});
  EXPECT_THROW((void)diagnose(with_graph(self)), std::invalid_argument);

  graph_description nested = chain(1);
  node_description loop = node(1, node_kind::conditional, "loop");
  loop.conditional_type = "while";
  graph_description body = chain(2);
  body.edges.push_back({1, 0});
  loop.bodies.push_back(body);
  nested.nodes.push_back(loop);
  try {
    (void)diagnose(with_graph(nested));
    FAIL() << "a cycle in a body was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_HAS(e.what(), "body 0 of 'loop'");
  }
}

// ---- 1. few_nodes ----------------------------------------------------------------------------------------------

TEST(Doctor, FewNodesFromTheDescription) {
  graph_description g = chain(2);
  g.nodes.push_back(node(2, node_kind::empty, "join")); // not work: not counted
  g.edges.push_back({1, 2});
  const auto f = run(with_graph(g), "few_nodes");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_EQ(f[0].nodes, (std::vector<std::string>{"k0", "k1"}));
  EXPECT_HAS(f[0].evidence, "2 kernel/memcpy/memset nodes");
  EXPECT_HAS(f[0].evidence, "fewer than 4");
  EXPECT_HAS(f[0].fix, "WHILE");
}

TEST(Doctor, FewNodesFromAProfile) {
  const graph_description g = fan(6); // enough nodes: the profile decides
  profile_report r;
  for (double w : {8.0, 9.0, 7.0}) r.launches.push_back(launch(w));
  auto f = run(with_profile(with_graph(g), r), "few_nodes");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_HAS(f[0].evidence, "median wall time 8.00 µs");
  EXPECT_HAS(f[0].evidence, "3 launches");
  EXPECT_HAS(f[0].evidence, "= 10.0 µs");
  EXPECT_HAS(f[0].evidence, "7 kernel/memcpy/memset nodes");
  EXPECT_TRUE(f[0].nodes.empty()); // 7 nodes: not the problem

  // Shorter than one launch's overhead: the launch costs more than the work.
  r.launches = {launch(2.0), launch(2.2)};
  f = run(with_profile(with_graph(g), r), "few_nodes");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::critical);
  EXPECT_HAS(f[0].evidence, "2.10 µs");
}

TEST(Doctor, FewNodesNearMisses) {
  EXPECT_TRUE(run(with_graph(chain(4)), "few_nodes").empty()); // exactly min_nodes

  const graph_description two = chain(2); // few nodes, but the profile shows long work: amortised
  profile_report r;
  r.launches = {launch(50), launch(60), launch(55)};
  EXPECT_TRUE(run(with_profile(with_graph(two), r), "few_nodes").empty());

  graph_description looped; // a WHILE loop repeats its body: the count says nothing
  node_description loop = node(0, node_kind::conditional, "loop");
  loop.conditional_type = "while";
  loop.bodies.push_back(chain(2));
  looped.nodes.push_back(loop);
  EXPECT_TRUE(run(with_graph(looped), "few_nodes").empty());
}

// ---- 2. short_kernels ------------------------------------------------------------------------------------------

profile_report short_kernel_profile(double gap_total) {
  profile_report r;
  for (int i = 0; i < 4; ++i) r.launches.push_back(launch(40, gap_total, 5));
  r.nodes = {measured({0}, "k0", 1.0), measured({1}, "k1", 1.5), measured({2}, "k2", 2.5), measured({3}, "k3", 10.0),
             measured({4}, "k4", 0.5, node_kind::memset)};
  return r;
}

TEST(Doctor, ShortKernelsAreListedWithPairsToFuse) {
  graph_description g = chain(4); // k0 -> k1 -> k2 -> k3
  g.nodes.push_back(node(4, node_kind::memset, "clear"));
  g.edges.push_back({3, 4});
  const profile_report r = short_kernel_profile(10.0); // typical gap 10 / 5 = 2 µs
  const auto f = run(with_profile(with_graph(g), r), "short_kernels");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_EQ(f[0].nodes, (std::vector<std::string>{"k0", "k1"})); // k2 is short but longer than the gap
  EXPECT_HAS(f[0].evidence, "2 of 4 kernels");
  EXPECT_HAS(f[0].evidence, "2.00 µs");
  EXPECT_HAS(f[0].evidence, "k0 1.00 µs");
  EXPECT_HAS(f[0].evidence, "k1 1.50 µs");
  EXPECT_HAS(f[0].fix, "k0 → k1");

  // Without a description the profile's labels name them, and no pairs are named.
  doctor_input bare;
  bare = with_profile(bare, r);
  const auto b = run(bare, "short_kernels");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].nodes, (std::vector<std::string>{"k0", "k1"}));
  EXPECT_LACKS(b[0].fix, "→");
}

TEST(Doctor, ShortKernelsNearMiss) {
  const graph_description g = chain(4);
  // Gaps of 0.5 µs: every kernel is longer than the gap before it.
  EXPECT_TRUE(run(with_profile(with_graph(g), short_kernel_profile(2.5)), "short_kernels").empty());
  // Large gaps but every kernel at least 3 µs.
  profile_report r = short_kernel_profile(50.0);
  for (auto& n : r.nodes) n.median_us = 3.0;
  EXPECT_TRUE(run(with_profile(with_graph(g), r), "short_kernels").empty());
  // The description's kind wins: a node the profile calls a kernel but the graph holds as a copy is not one.
  graph_description copies = chain(4);
  copies.nodes[0] = copy(0, "k0", "DtoD", 64);
  copies.nodes[1] = copy(1, "k1", "DtoD", 64);
  EXPECT_TRUE(run(with_profile(with_graph(copies), short_kernel_profile(10.0)), "short_kernels").empty());
  // Another graph's launches and nodes are not this graph's.
  r = short_kernel_profile(10.0);
  doctor_input in = with_profile(with_graph(g), r);
  in.profile_graph = "other";
  EXPECT_TRUE(run(in, "short_kernels").empty());
}

// ---- 3. critical_path_gaps -------------------------------------------------------------------------------------

TEST(Doctor, CriticalPathGaps) {
  profile_report r;
  for (double gaps : {5.0, 4.0, 6.0}) {
    launch_profile l = launch(20, gaps, 3, gaps);
    l.largest_gap = {2, gaps / 2, "scale", "reduce", true};
    r.launches.push_back(l);
  }
  r.launches[2].largest_gap.duration_us = 3.5;
  doctor_input in = with_profile(doctor_input{}, r);
  auto f = run(in, "critical_path_gaps");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning); // 25%: above 10%, below 30%
  EXPECT_EQ(f[0].nodes, (std::vector<std::string>{"scale", "reduce"}));
  EXPECT_HAS(f[0].evidence, "median 5.00 µs");
  EXPECT_HAS(f[0].evidence, "25%");
  EXPECT_HAS(f[0].evidence, "20.0 µs");
  EXPECT_HAS(f[0].evidence, "largest gap 3.50 µs after scale before reduce");

  for (auto& l : r.launches) l.critical_gaps_us = 8; // 40%
  f = run(in, "critical_path_gaps");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::critical);
  EXPECT_HAS(f[0].evidence, "40%");
}

TEST(Doctor, CriticalPathGapsNearMiss) {
  profile_report r;
  for (int i = 0; i < 3; ++i) r.launches.push_back(launch(20, 6, 3, 1.5)); // 7.5% on the critical path
  EXPECT_TRUE(run(with_profile(doctor_input{}, r), "critical_path_gaps").empty());
}

// ---- 4. pdl_chains ---------------------------------------------------------------------------------------------

TEST(Doctor, PdlChainsFromTheDescription) {
  graph_description g = chain(3, "step"); // step0 -> step1 -> step2
  g.nodes.push_back(copy(3, "upload", "HtoD", 1 << 20));
  g.edges.push_back({3, 0});
  auto f = run(with_graph(g), "pdl_chains");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::info);
  EXPECT_EQ(f[0].nodes, (std::vector<std::string>{"step0", "step1", "step2"}));
  EXPECT_HAS(f[0].evidence, "a chain of 3 kernel nodes");
  EXPECT_HAS(f[0].fix, "make_programmatic");
  EXPECT_HAS(f[0].fix, "wait_for_dependencies");
  EXPECT_HAS(f[0].fix, "cudaGridDependencySynchronize");

  // With a profile: 2 links × a typical gap of 2 µs = 4 µs, 20% of 20 µs.
  profile_report r;
  for (int i = 0; i < 3; ++i) r.launches.push_back(launch(20, 6, 3));
  f = run(with_profile(with_graph(g), r), "pdl_chains");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_HAS(f[0].evidence, "about 4.00 µs");
  EXPECT_HAS(f[0].evidence, "2 × the typical gap 2.00 µs");
  EXPECT_HAS(f[0].evidence, "20%");
}

TEST(Doctor, PdlChainsInANestedBodyUseQualifiedNames) {
  graph_description g;
  node_description loop = node(0, node_kind::conditional, "loop");
  loop.conditional_type = "while";
  loop.bodies.push_back(chain(3, "s"));
  g.nodes.push_back(loop);
  const auto f = run(with_graph(g), "pdl_chains");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].nodes, (std::vector<std::string>{"loop/body 0/s0", "loop/body 0/s1", "loop/body 0/s2"}));
}

TEST(Doctor, PdlChainsNearMisses) {
  EXPECT_TRUE(run(with_graph(chain(2)), "pdl_chains").empty()); // too short

  graph_description fanned = chain(3); // k0 also feeds k2: k0 has two successors, k2 two predecessors
  fanned.edges.push_back({0, 2});
  EXPECT_TRUE(run(with_graph(fanned), "pdl_chains").empty());

  graph_description copy_between = chain(3); // k1 is a copy: no kernel chain
  copy_between.nodes[1] = copy(1, "mid", "DtoD", 1 << 20);
  EXPECT_TRUE(run(with_graph(copy_between), "pdl_chains").empty());

  graph_description linked = chain(3); // both links already programmatic edges: nothing left to close
  linked.edge_types = {conveyor::edge_type::programmatic, conveyor::edge_type::launch_completion};
  EXPECT_TRUE(run(with_graph(linked), "pdl_chains").empty());
  graph_description half = chain(4); // one of three links programmatic: the graph was made programmatic already,
  half.edge_types = {conveyor::edge_type::full, conveyor::edge_type::programmatic, conveyor::edge_type::full};
  const auto left = run(with_graph(half), "pdl_chains"); // and its full links are the ones the pass left
  ASSERT_EQ(left.size(), 1U);
  EXPECT_FALSE(left[0].applies);

  graph_description already = chain(3); // k1 already launched with programmatic dependent launch
  already.nodes[1].attributes.push_back("programmatic stream serialization");
  EXPECT_TRUE(run(with_graph(already), "pdl_chains").empty());
}

// ---- 5. host_on_critical_path ----------------------------------------------------------------------------------

TEST(Doctor, HostNodeOnEveryPathIsCritical) {
  graph_description g = chain(2);
  g.nodes.push_back(node(2, node_kind::host, "log"));
  g.nodes.push_back(kernel(3, "after"));
  g.edges.push_back({1, 2});
  g.edges.push_back({2, 3});
  const auto f = run(with_graph(g), "host_on_critical_path");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::critical);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"log"});
  EXPECT_HAS(f[0].evidence, "a host node");
  EXPECT_HAS(f[0].evidence, "on every path");
  EXPECT_HAS(f[0].fix, "cudaLaunchHostFunc");
}

TEST(Doctor, PageableCopyBesideABranchIsAWarningUntilTheProfileShowsItCritical) {
  // root -> {fetch (pageable HtoD), work} -> join
  graph_description g;
  g.nodes = {kernel(0, "root"), copy(1, "fetch", "HtoD", 4096, true), kernel(2, "work"), kernel(3, "join")};
  g.edges = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  auto f = run(with_graph(g), "host_on_critical_path");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"fetch"});
  EXPECT_HAS(f[0].evidence, "HtoD copy of 4096 B");
  EXPECT_HAS(f[0].evidence, "pageable");
  EXPECT_LACKS(f[0].evidence, "every path");
  EXPECT_HAS(f[0].fix, "cudaHostRegister");

  profile_report r;
  for (int i = 0; i < 3; ++i) r.launches.push_back(launch(30));
  r.launches[0].critical_path = r.launches[1].critical_path = {"root", "fetch", "join"};
  r.launches[2].critical_path = {"root", "work", "join"};
  r.nodes = {measured({1}, "fetch", 12.0, node_kind::memcpy)};
  f = run(with_profile(with_graph(g), r), "host_on_critical_path");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::critical);
  EXPECT_HAS(f[0].evidence, "on the critical path in 2 of 3 launches");
  EXPECT_HAS(f[0].evidence, "median 12.0 µs");
}

TEST(Doctor, HostOnCriticalPathNearMiss) {
  graph_description g;
  g.nodes = {kernel(0, "root"), copy(1, "fetch", "HtoD", 4096, false), kernel(2, "work")};
  g.edges = {{0, 1}, {1, 2}};
  EXPECT_TRUE(run(with_graph(g), "host_on_critical_path").empty()); // pinned copy, no host node
}

// ---- 6. removable_copies ---------------------------------------------------------------------------------------

TEST(Doctor, RemovableCopies) {
  // produce -> shuffle (1 MiB DtoD) -> consume; params (256 B HtoD) -> consume
  graph_description g;
  g.nodes = {kernel(0, "produce"), copy(1, "shuffle", "DtoD", 1 << 20), kernel(2, "consume"),
             copy(3, "params", "HtoD", 256), copy(4, "stage", "DtoD", 4096)};
  g.edges = {{0, 1}, {1, 2}, {3, 2}, {2, 4}};
  const auto f = run(with_graph(g), "removable_copies");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"shuffle"});
  EXPECT_EQ(f[0].level, severity::warning); // a large device copy costs bandwidth
  EXPECT_HAS(f[0].evidence, "DtoD copy of 1048576 B (1.0 MiB)");
  EXPECT_HAS(f[0].evidence, "kernel neighbours: produce, consume");
  EXPECT_HAS(f[0].fix, "swap the two pointers");

  EXPECT_EQ(f[1].nodes, std::vector<std::string>{"params"});
  EXPECT_EQ(f[1].level, severity::info);
  EXPECT_HAS(f[1].evidence, "HtoD copy of 256 B");
  EXPECT_HAS(f[1].fix, "neighbouring kernel (consume)");

  EXPECT_EQ(f[2].nodes, std::vector<std::string>{"stage"});
  EXPECT_EQ(f[2].level, severity::info);
  EXPECT_HAS(f[2].evidence, "DtoD copy of 4096 B (4.0 KiB)");
  EXPECT_HAS(f[2].fix, "write it in place");
  EXPECT_HAS(f[2].fix, "neighbouring kernel (consume)");

  // A profile adds the time, and a copy taking a large share is a warning.
  profile_report r;
  r.launches = {launch(100)};
  r.nodes = {measured({3}, "params", 9.0, node_kind::memcpy)};
  r.nodes[0].share = 0.2;
  const auto p = run(with_profile(with_graph(g), r), "removable_copies");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].nodes, std::vector<std::string>{"shuffle"});
  EXPECT_EQ(p[1].nodes, std::vector<std::string>{"params"});
  EXPECT_EQ(p[1].level, severity::warning);
  EXPECT_HAS(p[1].evidence, "median 9.00 µs, 20% of the graph's node time");
}

TEST(Doctor, RemovableCopiesNearMiss) {
  graph_description g;
  g.nodes = {copy(0, "upload", "HtoD", 1 << 20), kernel(1, "work"), copy(2, "flag", "DtoH", 4),
             node(3, node_kind::memset, "clear")};
  g.edges = {{0, 1}, {3, 2}}; // a large HtoD next to a kernel; a small copy next to no kernel
  EXPECT_TRUE(run(with_graph(g), "removable_copies").empty());
}

// ---- 7. missing_upload -----------------------------------------------------------------------------------------

TEST(Doctor, MissingUpload) {
  exec_facts facts;
  facts.launched = true;
  facts.first_launch_before_upload = true;
  doctor_input in;
  in.exec = &facts;
  const auto f = run(in, "missing_upload");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_HAS(f[0].evidence, "uploaded since: no");
  EXPECT_HAS(f[0].fix, "upload(stream)");

  facts.first_launch_before_upload = false; // near miss: uploaded before the first launch
  facts.uploaded = true;
  EXPECT_TRUE(run(in, "missing_upload").empty());
}

// ---- 8. unfreed_allocations ------------------------------------------------------------------------------------

graph_description allocating(std::size_t allocs, std::size_t frees) {
  graph_description g;
  for (std::size_t i = 0; i < allocs; ++i) {
    node_description a = node(g.nodes.size(), node_kind::mem_alloc, "scratch" + std::to_string(i));
    a.bytes = 1 << 20;
    g.nodes.push_back(a);
  }
  g.nodes.push_back(kernel(g.nodes.size(), "use"));
  for (std::size_t i = 0; i < allocs; ++i) g.edges.push_back({i, allocs});
  for (std::size_t i = 0; i < frees; ++i) {
    g.nodes.push_back(node(g.nodes.size(), node_kind::mem_free));
    g.edges.push_back({allocs, g.nodes.size() - 1});
  }
  return g;
}

TEST(Doctor, UnfreedAllocationsFromTheDescription) {
  const graph_description g = allocating(2, 1);
  const auto f = run(with_graph(g), "unfreed_allocations");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_EQ(f[0].nodes, (std::vector<std::string>{"scratch0", "scratch1"}));
  EXPECT_HAS(f[0].evidence, "2 mem_alloc nodes and 1 mem_free node");
  EXPECT_HAS(f[0].evidence, "1 allocation is not freed");
  EXPECT_HAS(f[0].fix, "auto_free_on_launch");
}

TEST(Doctor, CapturedAllocationsNameTheCallThatMadeThem) {
  graph_description g = allocating(2, 2);
  g.captured = true;
  g.nodes[0].label = "cublasSgemm: allocation";
  g.nodes[1].label = "";
  const auto f = run(with_graph(g), "captured_allocations");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_EQ(f[0].nodes.size(), 2u);
  EXPECT_EQ(f[0].nodes[0], "cublasSgemm: allocation");
  EXPECT_HAS(f[0].evidence, "2 allocation nodes in a captured graph (2097152 B (2.0 MiB) in all)");
  EXPECT_HAS(f[0].evidence, "made by cublasSgemm ×1, an unnamed call (a library's workspace, or cudaMallocAsync) ×1");
  EXPECT_HAS(f[0].fix, "docs/libraries.md");
  // Only unnamed allocations: said, as information (cudaMallocAsync in the captured code may be meant).
  g.nodes[0].label = "scratch";
  ASSERT_EQ(run(with_graph(g), "captured_allocations").size(), 1u);
  EXPECT_EQ(run(with_graph(g), "captured_allocations")[0].level, severity::info);
  // A graph built with the builder: its allocations are meant.
  g.captured = false;
  EXPECT_TRUE(run(with_graph(g), "captured_allocations").empty());
}

TEST(Doctor, UnfreedAllocationsFromTheExecutableGraphAreCritical) {
  const graph_description g = allocating(1, 0);
  exec_facts facts;
  facts.launched = true;
  facts.allocations_read = true;
  facts.unfreed_allocations = {"0x7f0000000000 (1048576 B) from node 0"};
  doctor_input in = with_graph(g);
  in.exec = &facts;
  const auto f = run(in, "unfreed_allocations");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::critical);
  EXPECT_EQ(f[0].nodes, facts.unfreed_allocations);
  EXPECT_HAS(f[0].evidence, "1 graph allocation is still allocated");
  EXPECT_HAS(f[0].evidence, "launching it again fails");
}

TEST(Doctor, UnfreedAllocationsNearMisses) {
  const graph_description balanced = allocating(2, 2);
  EXPECT_TRUE(run(with_graph(balanced), "unfreed_allocations").empty());

  const graph_description g = allocating(2, 0);
  exec_facts facts;
  facts.auto_free_on_launch = true; // relaunch frees them
  facts.allocations_read = true;
  facts.unfreed_allocations = {"a", "b"};
  doctor_input in = with_graph(g);
  in.exec = &facts;
  EXPECT_TRUE(run(in, "unfreed_allocations").empty());

  exec_facts freed_outside; // launched, read, nothing left: the caller frees them between launches
  freed_outside.launched = true;
  freed_outside.allocations_read = true;
  in.exec = &freed_outside;
  EXPECT_TRUE(run(in, "unfreed_allocations").empty());
}

// ---- 9. recapture_churn ----------------------------------------------------------------------------------------

TEST(Doctor, ChurnGuardNamesTheEagerCallsAndWhatReRecorded) {
  graphed_statistics s;
  s.calls = 40;
  s.captures = 6;
  s.instantiations = 6;
  s.guard_trips = 1;
  s.guard_resumes = 1;
  s.guarded_calls = 12;
  s.churn_max_records = 4;
  s.churn_window = 20;
  std::deque<std::string> reasons;
  for (int i = 0; i < 5; ++i)
    reasons.push_back("call " + std::to_string(i + 1) +
                      ": captured and instantiated a graph of 3 nodes for shape (0=" + std::to_string(i) + ")");
  reasons.push_back("call 5: churn guard: 5 captures and re-captures in the last 20 calls, more than 4: running "
                    "eagerly until the arguments settle (10 steady calls in a row)");
  reasons.push_back("call 17: churn guard: 10 steady calls in a row: graphing again");
  doctor_input in;
  in.graphed = &s;
  in.graphed_reasons = &reasons;
  const auto f = run(in, "churn_guard");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_HAS(f[0].evidence, "the churn guard ran 12 of 40 calls eagerly (30%)");
  EXPECT_HAS(f[0].evidence, "engaged 1 time when the callable made more than 4 captures and re-captures within 20 "
                            "calls, and resumed graphing 1 time");
  EXPECT_HAS(f[0].evidence, "what re-recorded: \"captured and instantiated a graph for a new shape\" ×5");
  EXPECT_LACKS(f[0].evidence, "runs eagerly now");
  EXPECT_HAS(f[0].fix, "graphed_options::dimensions");
  // The guard's own notes are not counted as shape churn.
  const auto churn = run(in, "recapture_churn");
  ASSERT_EQ(churn.size(), 1u);
  EXPECT_HAS(churn[0].evidence, "5 events for new shapes");
  // Engaged now: critical. Never engaged: no finding.
  s.guard_engaged = true;
  ASSERT_EQ(run(in, "churn_guard").size(), 1u);
  EXPECT_EQ(run(in, "churn_guard")[0].level, severity::critical);
  EXPECT_HAS(run(in, "churn_guard")[0].evidence, "it runs eagerly now");
  s.guard_trips = 0;
  s.guard_engaged = false;
  EXPECT_TRUE(run(in, "churn_guard").empty());
}

TEST(Doctor, RecaptureChurnFromBindings) {
  graphed_statistics s;
  s.calls = 101;
  s.warmups = 1;
  s.captures = 20;
  s.instantiations = 2;
  s.per_node_updates = 18;
  std::deque<std::string> reasons;
  reasons.push_back("call 2: captured and instantiated a graph of 3 nodes for shape (0=128)");
  for (int i = 0; i < 15; ++i)
    reasons.push_back("call " + std::to_string(10 + i) + ": argument 1 pointer changed from 0x" +
                      std::to_string(1000 + i) + " to 0x" + std::to_string(2000 + i) +
                      ": re-captured, updated 1 node(s) in place");
  for (int i = 0; i < 3; ++i)
    reasons.push_back("call " + std::to_string(40 + i) + ": argument 2 float changed from " + std::to_string(i) +
                      " to " + std::to_string(i + 1) + ": re-captured, updated 2 node(s) in place [rebind: learning]");
  reasons.push_back("call 60: argument 1 pointer changed from 0x1 to 0x2: patched 1 node(s) in place, no capture");
  doctor_input in;
  in.graphed = &s;
  in.graphed_reasons = &reasons;
  const auto f = run(in, "recapture_churn");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_HAS(f[0].evidence, "0.22 captures + instantiations per call");
  EXPECT_HAS(f[0].evidence, "20 captures + 2 instantiations over 100 calls after 1 warm-up");
  EXPECT_HAS(f[0].evidence,
             "most frequent reasons: \"argument 1 pointer changed: re-captured, updated node(s) in place\" ×15; "
             "\"argument 2 float changed: re-captured, updated node(s) in place\" ×3; \"captured and instantiated a "
             "graph for a new shape\" ×1");
  EXPECT_HAS(f[0].evidence, "1 event for new shapes, 18 re-captures for changed bindings");
  EXPECT_HAS(f[0].fix, "binding churn");

  // Without the reasons the statistics tell them apart.
  in.graphed_reasons = nullptr;
  const auto b = run(in, "recapture_churn");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_HAS(b[0].evidence, "2 events for new shapes, 18 re-captures for changed bindings");
  EXPECT_HAS(b[0].fix, "binding churn");
}

TEST(Doctor, RecaptureChurnFromShapesIsCriticalAboveHalf) {
  graphed_statistics s;
  s.calls = 12;
  s.warmups = 2;
  s.captures = 6;
  s.instantiations = 6;
  s.evictions = 2;
  std::deque<std::string> reasons;
  for (int i = 0; i < 6; ++i)
    reasons.push_back("call " + std::to_string(3 + i) +
                      ": captured and instantiated a graph of 4 nodes for shape (0=" + std::to_string(100 + i) + ")");
  reasons.push_back("call 9: evicted the least recently used graph (cache holds 4)");
  doctor_input in;
  in.graphed = &s;
  in.graphed_reasons = &reasons;
  const auto f = run(in, "recapture_churn");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::critical);
  EXPECT_HAS(f[0].evidence, "1.20 captures + instantiations per call");
  EXPECT_HAS(f[0].evidence, "\"captured and instantiated a graph for a new shape\" ×6");
  EXPECT_HAS(f[0].fix, "shape churn");
  EXPECT_HAS(f[0].fix, "buckets");
}

TEST(Doctor, RecaptureChurnNearMisses) {
  graphed_statistics s; // two shapes over a long run
  s.calls = 1000;
  s.warmups = 2;
  s.captures = 2;
  s.instantiations = 2;
  s.replays = 998;
  doctor_input in;
  in.graphed = &s;
  EXPECT_TRUE(run(in, "recapture_churn").empty());

  graphed_statistics once; // one graph, a short run: the first capture is not churn
  once.calls = 5;
  once.warmups = 1;
  once.captures = 1;
  once.instantiations = 1;
  in.graphed = &once;
  EXPECT_TRUE(run(in, "recapture_churn").empty());
}

// ---- 10. update_fallbacks --------------------------------------------------------------------------------------

TEST(Doctor, UpdateFallbacks) {
  graphed_statistics s;
  s.calls = 51;
  s.warmups = 1;
  s.captures = 10;
  s.instantiations = 2;
  s.whole_graph_updates = 3;
  s.unchanged_recaptures = 2;
  s.per_node_updates = 4;
  std::deque<std::string> reasons{
      "call 2: captured and instantiated a graph of 3 nodes for shape ()",
      "call 7: argument 0 pointer changed from 0x1 to 0x2: re-captured, re-instantiated (topology changed)"};
  doctor_input in;
  in.graphed = &s;
  in.graphed_reasons = &reasons;
  const auto f = run(in, "update_fallbacks");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning); // 6 events over 50 calls
  EXPECT_HAS(f[0].evidence, "3 whole-graph updates");
  EXPECT_HAS(f[0].evidence, "1 re-instantiation after a re-capture");
  EXPECT_HAS(f[0].evidence, "2 re-captures that changed nothing");
  EXPECT_HAS(f[0].evidence, "over 50 calls");
  EXPECT_HAS(f[0].fix, "conveyor::unkeyed");

  graphed_statistics r; // rebinding that keeps failing
  r.calls = 201;
  r.warmups = 1;
  r.captures = 5;
  r.instantiations = 1;
  r.per_node_updates = 4;
  r.rebind_fallbacks = 4;
  r.rebinds = 2;
  in.graphed = &r;
  in.graphed_reasons = nullptr;
  const auto g = run(in, "update_fallbacks");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].level, severity::info); // 4 over 200 calls
  EXPECT_HAS(g[0].evidence, "4 rebind fallbacks against 2 rebinds");
  EXPECT_HAS(g[0].fix, "rebind_policy::patch");
}

TEST(Doctor, UpdateFallbacksNearMiss) {
  graphed_statistics s; // per-node updates and rebinds: the fast paths
  s.calls = 100;
  s.warmups = 1;
  s.captures = 41;
  s.instantiations = 1;
  s.per_node_updates = 40;
  s.rebinds = 30;
  s.rebind_fallbacks = 1; // the learning re-capture
  doctor_input in;
  in.graphed = &s;
  EXPECT_TRUE(run(in, "update_fallbacks").empty());
}

// ---- 11. serialised_branches -----------------------------------------------------------------------------------

TEST(Doctor, SerialisedBranches) {
  graph_description g;
  g.nodes = {kernel(0, "left", {0x1000}), kernel(1, "right", {0x2000, 0x3000})};
  g.edges = {{0, 1}};
  auto f = run(with_graph(g), "serialised_branches");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::info);
  EXPECT_EQ(f[0].nodes, (std::vector<std::string>{"left", "right"}));
  EXPECT_HAS(f[0].evidence, "left uses allocations {0x1000} and right uses {0x2000, 0x3000}");
  EXPECT_HAS(f[0].fix, "pointers stored in device memory");

  profile_report r;
  r.launches = {launch(25), launch(25)};
  r.nodes = {measured({0}, "left", 12.0), measured({1}, "right", 10.0)};
  f = run(with_profile(with_graph(g), r), "serialised_branches");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_HAS(f[0].evidence, "could save up to 10.0 µs (40% of the median wall time)");
}

TEST(Doctor, SerialisedBranchesNearMisses) {
  graph_description shared;
  shared.nodes = {kernel(0, "a", {0x1000, 0x2000}), kernel(1, "b", {0x2000})};
  shared.edges = {{0, 1}};
  EXPECT_TRUE(run(with_graph(shared), "serialised_branches").empty());

  graph_description unknown; // buffers not read
  unknown.nodes = {kernel(0, "a", {0x1000}), kernel(1, "b")};
  unknown.edges = {{0, 1}};
  EXPECT_TRUE(run(with_graph(unknown), "serialised_branches").empty());

  graph_description ordered_anyway; // a -> c -> b orders a before b without the edge a -> b
  ordered_anyway.nodes = {kernel(0, "a", {0x1000}), kernel(1, "b", {0x2000}), kernel(2, "c", {0x1000, 0x2000})};
  ordered_anyway.edges = {{0, 1}, {0, 2}, {2, 1}};
  EXPECT_TRUE(run(with_graph(ordered_anyway), "serialised_branches").empty());
}

// ---- 12. tiny_loop_body ----------------------------------------------------------------------------------------

graph_description while_loop(std::size_t body_kernels, const std::string& type = "while") {
  graph_description g;
  g.nodes.push_back(kernel(0, "init"));
  node_description loop = node(1, node_kind::conditional, "loop");
  loop.conditional_type = type;
  loop.bodies.push_back(chain(body_kernels, "step"));
  g.nodes.push_back(loop);
  g.edges = {{0, 1}};
  return g;
}

TEST(Doctor, TinyLoopBodyFromTheDescription) {
  const graph_description g = while_loop(1);
  const auto f = run(with_graph(g), "tiny_loop_body");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::info);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"loop"});
  EXPECT_HAS(f[0].evidence, "1 kernel node, at most 2");
  EXPECT_HAS(f[0].fix, "unroll");
}

TEST(Doctor, TinyLoopBodyFromAProfile) {
  const graph_description g = while_loop(3); // 3 kernels: not tiny by count, but 2.5 µs per iteration
  profile_report r;
  r.launches = {launch(300), launch(300)};
  r.nodes = {measured({1, 0, 0}, "loop/body 0/step0", 1.0, node_kind::kernel, 100, 2),
             measured({1, 0, 1}, "loop/body 0/step1", 1.0, node_kind::kernel, 100, 2),
             measured({1, 0, 2}, "loop/body 0/step2", 0.5, node_kind::kernel, 100, 2)};
  const auto f = run(with_profile(with_graph(g), r), "tiny_loop_body");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"loop"});
  EXPECT_HAS(f[0].evidence, "2.50 µs per iteration");
  EXPECT_HAS(f[0].evidence, "3 measured nodes");
  EXPECT_HAS(f[0].evidence, "about 50 iterations per launch");
}

TEST(Doctor, TinyLoopBodyNearMisses) {
  const graph_description three = while_loop(3);
  EXPECT_TRUE(run(with_graph(three), "tiny_loop_body").empty());

  const graph_description one = while_loop(1); // one kernel, but a long one
  profile_report r;
  r.launches = {launch(2000)};
  r.nodes = {measured({1, 0, 0}, "loop/body 0/step0", 20.0, node_kind::kernel, 100, 1)};
  EXPECT_TRUE(run(with_profile(with_graph(one), r), "tiny_loop_body").empty());

  const graph_description branch = while_loop(1, "if"); // not a loop
  EXPECT_TRUE(run(with_graph(branch), "tiny_loop_body").empty());
}

// ---- 13. legacy_stream -----------------------------------------------------------------------------------------

TEST(Doctor, LegacyStream) {
  graph_description g = fan(4);
  g.captured = true;
  g.captured_on_blocking_stream = true;
  exec_facts facts;
  facts.launched = true;
  facts.launched_on_legacy_stream = true;
  doctor_input in = with_graph(g);
  in.exec = &facts;
  const auto f = run(in, "legacy_stream");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].level, severity::warning);
  EXPECT_HAS(f[0].evidence, "captured on a blocking stream");
  EXPECT_HAS(f[0].fix, "cudaStreamNonBlocking");
  EXPECT_EQ(f[1].level, severity::warning);
  EXPECT_HAS(f[1].evidence, "legacy default stream");
  EXPECT_HAS(f[1].fix, "non-default stream");

  g.captured_on_blocking_stream = false; // near miss
  facts.launched_on_legacy_stream = false;
  EXPECT_TRUE(run(in, "legacy_stream").empty());
}

// ---- order and outputs -----------------------------------------------------------------------------------------

// An input that triggers several checks at every severity.
struct many {
  graph_description g;
  exec_facts facts;
  doctor_input in;
  many() {
    g = chain(3, "s"); // pdl_chains (info), few_nodes (warning)
    g.nodes.push_back(node(3, node_kind::host, "log \"quoted\""));
    g.edges.push_back({2, 3});               // host on every path: critical
    g.captured_on_blocking_stream = true;    // legacy_stream: warning
    facts.first_launch_before_upload = true; // missing_upload: warning
    in = with_graph(g);
    in.exec = &facts;
  }
};

TEST(Doctor, FindingsAreSortedBySeverityThenCheckOrder) {
  const many m;
  const auto f = diagnose(m.in);
  std::vector<std::string> checks;
  for (const auto& x : f) checks.push_back(x.check);
  EXPECT_EQ(checks, (std::vector<std::string>{"host_on_critical_path", "few_nodes", "missing_upload", "legacy_stream",
                                              "pdl_chains"}));
  for (std::size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i - 1].level, f[i].level);
}

TEST(Doctor, VerboseTextHoldsEveryFindingWhole) {
  const many m;
  const auto f = diagnose(m.in);
  const std::string text = to_text(f, "step", true);
  EXPECT_HAS(text, "tuning doctor: step: 5 findings (1 critical, 3 warning, 1 info)");
  for (const auto& x : f) {
    EXPECT_HAS(text, "[" + std::string(to_string(x.level)) + "] " + x.check);
    EXPECT_HAS(text, x.evidence);
    EXPECT_HAS(text, x.fix);
    for (const auto& n : x.nodes) EXPECT_HAS(text, n);
  }
}

// The default text: each finding in three lines (what and where, cost, fix), names shortened, runs folded.
TEST(Doctor, BriefTextIsThreeLinesAFinding) {
  const many m;
  const auto f = diagnose(m.in);
  const std::string text = to_text(f, "step");
  EXPECT_HAS(text, "tuning doctor: step: 5 findings (1 critical, 3 warning, 1 info)");
  for (const auto& x : f) {
    const std::string head = "[" + std::string(to_string(x.level)) + "] " + x.check;
    const auto at = text.find(head);
    ASSERT_NE(at, std::string::npos) << head;
    const auto block_end = text.find("\n\n", at);
    const std::string block = text.substr(at, block_end == std::string::npos ? std::string::npos : block_end - at);
    EXPECT_EQ(std::count(block.begin(), block.end(), '\n'), block_end == std::string::npos ? 3 : 2) << block;
    EXPECT_HAS(block, "\n  cost: ");
    EXPECT_HAS(block, "\n  fix:  " + shorten_names(x.fix).substr(0, 40));
  }
}

TEST(Doctor, BriefTextFoldsManyNodesAndShortensKernelNames) {
  finding x;
  x.check = "pdl_chains";
  x.level = severity::info;
  for (int i = 0; i < 40; ++i) x.nodes.push_back("void ns::stencil<" + std::to_string(i) + ">(float const*, float*)");
  x.nodes.push_back("reduce");
  x.evidence = "a chain of 41 kernel nodes: void ns::stencil<0>(float const*, float*), " + std::string(400, 'x');
  x.fix = "launch with programmatic dependent launch";
  const std::string brief = to_text({x}, "g");
  EXPECT_HAS(brief, "[info] pdl_chains: stencil × 40, reduce\n");
  EXPECT_EQ(brief.find("ns::"), std::string::npos) << brief;
  EXPECT_EQ(brief.find("float const*"), std::string::npos) << brief;
  EXPECT_HAS(brief, "cost: a chain of 41 kernel nodes: stencil, ");
  EXPECT_HAS(brief, "… (cut: --verbose or --verbose-report shows all)");
  EXPECT_LT(brief.size(), 600u) << brief;
  const std::string full = to_text({x}, "g", true);
  EXPECT_HAS(full, x.evidence);
  EXPECT_HAS(full, "void ns::stencil<39>(float const*, float*)");
}

// Node labels that differ only in numbers fold into one entry in the brief text.
TEST(Doctor, BriefTextFoldsNumberedRuns) {
  finding x;
  x.check = "few_nodes";
  x.level = severity::warning;
  for (int i = 1; i <= 100; ++i)
    x.nodes.push_back("step " + std::to_string(i) + " (f" + std::to_string(i % 2) + " -> f" +
                      std::to_string((i + 1) % 2) + ")");
  x.evidence = "e";
  x.fix = "f";
  EXPECT_HAS(to_text({x}, "g"), "[warning] few_nodes: step 1 (f1 -> f0) … step 100 (f0 -> f1): 100 nodes\n");
}

TEST(Doctor, JsonRoundTripsTheFields) {
  const many m;
  const auto f = diagnose(m.in);
  for (int indent : {-1, 2}) {
    const auto j = nlohmann::json::parse(to_json(f, indent));
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), f.size());
    for (std::size_t i = 0; i < f.size(); ++i) {
      EXPECT_EQ(j[i].size(), 6u);
      EXPECT_EQ(j[i].at("applies").get<bool>(), f[i].applies);
      EXPECT_EQ(j[i].at("check").get<std::string>(), f[i].check);
      EXPECT_EQ(j[i].at("severity").get<std::string>(), to_string(f[i].level));
      EXPECT_EQ(j[i].at("nodes").get<std::vector<std::string>>(), f[i].nodes);
      EXPECT_EQ(j[i].at("evidence").get<std::string>(), f[i].evidence);
      EXPECT_EQ(j[i].at("fix").get<std::string>(), f[i].fix);
    }
  }
  EXPECT_EQ(nlohmann::json::parse(to_json(f))[0].at("nodes")[0].get<std::string>(), "log \"quoted\"");
  // Keys in the documented order.
  const std::string text = to_json(f, -1);
  const auto at = [&](const char* key) { return text.find(std::string("\"") + key + "\":"); };
  EXPECT_LT(at("check"), at("severity"));
  EXPECT_LT(at("severity"), at("nodes"));
  EXPECT_LT(at("nodes"), at("evidence"));
  EXPECT_LT(at("evidence"), at("fix"));
  EXPECT_LT(at("fix"), at("applies"));
}

} // namespace

namespace {

// The searches are linear: a long chain with a host node in the middle and a buffer per node is quick.
TEST(Doctor, LargeGraphsStayLinear) {
  graph_description g = chain(20000);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) g.nodes[i].buffers = {0x1000 * (i % 2 + 1)};
  g.nodes[10000] = node(10000, node_kind::host, "log");
  const auto f = diagnose(with_graph(g));
  ASSERT_EQ(of(f, "host_on_critical_path").size(), 1u);
  EXPECT_EQ(of(f, "host_on_critical_path")[0].level, severity::critical);
  EXPECT_EQ(of(f, "pdl_chains").size(), 2u);                   // the host node splits the chain
  EXPECT_EQ(of(f, "serialised_branches").size(), 19999u - 2u); // every kernel-kernel edge (alternating buffers)
}

} // namespace

namespace {

// Thresholds that would switch checks off silently are refused; launches with impossible numbers are left out.
TEST(Doctor, RefusesBadThresholdsAndIgnoresImpossibleLaunches) {
  conveyor::profile::doctor_input in;
  conveyor::profile::doctor_thresholds bad;
  bad.gap_share = std::nan("");
  EXPECT_THROW((void)conveyor::profile::diagnose(in, bad), std::invalid_argument);
  bad = {};
  bad.launch_overhead_us = -1;
  EXPECT_THROW((void)conveyor::profile::diagnose(in, bad), std::invalid_argument);
  bad = {};
  bad.min_nodes = 0;
  EXPECT_THROW((void)conveyor::profile::diagnose(in, bad), std::invalid_argument);

  conveyor::profile::profile_report report;
  conveyor::profile::launch_profile l;
  l.graph = "g";
  l.wall_us = std::nan("");
  report.launches.push_back(l);
  l.wall_us = -5;
  report.launches.push_back(l);
  in.profile = &report;
  in.profile_graph = "g";
  const auto findings = conveyor::profile::diagnose(in);
  for (const auto& f : findings) {
    EXPECT_EQ(f.evidence.find("nan"), std::string::npos) << f.check << ": " << f.evidence;
    EXPECT_EQ(f.evidence.find("-5"), std::string::npos) << f.check << ": " << f.evidence;
  }
}

} // namespace

namespace {

// A launch that failed: the doctor names the error and points at step-through.
TEST(Doctor, AFailedLaunchSuggestsStepThrough) {
  conveyor::exec_facts facts;
  facts.launched = true;
  facts.launch_error = "cudaErrorIllegalAddress";
  doctor_input in;
  in.exec = &facts;
  const auto found = run(in, "failed_launch");
  ASSERT_EQ(found.size(), 1U);
  EXPECT_EQ(found[0].level, conveyor::profile::severity::critical);
  EXPECT_HAS(found[0].evidence, "cudaErrorIllegalAddress");
  EXPECT_HAS(found[0].fix, "CONVEYOR_STEP_THROUGH=1");
  facts.launch_error.clear();
  EXPECT_TRUE(run(in, "failed_launch").empty());
}

// Launches that ran node by node are a debugging run: the doctor says the timings are not a replay's.
TEST(Doctor, StepThroughLaunchesAreNamed) {
  conveyor::exec_facts facts;
  facts.step_through = true;
  doctor_input in;
  in.exec = &facts;
  const auto found = run(in, "step_through");
  ASSERT_EQ(found.size(), 1U);
  EXPECT_HAS(found[0].evidence, "debugging run");
  facts.step_through = false;
  EXPECT_TRUE(run(in, "step_through").empty());
}

} // namespace

namespace {

// A graph already made programmatic where its kernels wait: the full links left (into library kernels) are no chain
// to fix; the check says so only in the verbose text and the JSON.
TEST(Doctor, PdlChainsDoesNotApplyToLinksTheProgrammaticPassLeft) {
  graph_description d;
  for (std::size_t i = 0; i < 5; ++i) {
    node_description n;
    n.id = i;
    n.kind = node_kind::kernel;
    n.kernel_name = i == 2 || i == 3 ? "cublas_gemm" : "own_kernel";
    d.nodes.push_back(n);
  }
  d.edges = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  doctor_input in;
  in.graph = &d;
  ASSERT_EQ(run(in, "pdl_chains").size(), 1U); // a chain of 5, nothing programmatic yet
  EXPECT_TRUE(run(in, "pdl_chains")[0].applies);
  d.edge_types = {conveyor::edge_type::programmatic, conveyor::edge_type::full, conveyor::edge_type::full,
                  conveyor::edge_type::programmatic};
  const auto found = run(in, "pdl_chains");
  ASSERT_EQ(found.size(), 1U);
  EXPECT_FALSE(found[0].applies);
  EXPECT_HAS(found[0].evidence, "2 full link(s) between kernels lead into kernels the programmatic pass left alone");
  const auto all = diagnose(in);
  EXPECT_HAS(to_text(all, "g"), "no findings");
  EXPECT_HAS(to_text(all, "g", true), "[does not apply] pdl_chains");
  EXPECT_HAS(to_json(all), "\"applies\": false");
}

// graphed instantiated and launched the graph in one call: an upload could not have been ahead of it.
TEST(Doctor, MissingUploadDoesNotApplyToAGraphedFirstCall) {
  exec_facts facts;
  facts.launched = true;
  facts.first_launch_before_upload = true;
  doctor_input in;
  in.exec = &facts;
  ASSERT_EQ(run(in, "missing_upload").size(), 1U);
  EXPECT_TRUE(run(in, "missing_upload")[0].applies);
  facts.launched_at_instantiation = true;
  const auto found = run(in, "missing_upload");
  ASSERT_EQ(found.size(), 1U);
  EXPECT_FALSE(found[0].applies);
  EXPECT_HAS(found[0].evidence, "graphed::prepare");
}

} // namespace
