// GPU tests that diff sees every parameter CUDA runs a node with, and that every update path then runs the new
// parameters: kernel launch attributes (thread-block clusters, priority, memory sync domain, shared-memory carveout,
// cooperative), dynamic shared memory, launch shape, function and arguments; edge types; allocation, child-graph,
// conditional and event nodes. Each test skips without a CUDA device.

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"
#include "support/moved_from.hpp"

#include <conveyor/conveyor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using conveyor::test::all_equal;
using conveyor::test::all_near;
using conveyor::test::contains;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::random_floats;
using conveyor::test::sync_device;
using namespace conveyor::test::kernels;

namespace {

// Launches cluster_blocks over 4 blocks in clusters of `cluster` blocks (cudaLaunchKernelEx), as a user would.
void launch_clustered(const conveyor::stream& s, int* out, unsigned cluster) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(4);
  cfg.blockDim = dim3(32);
  cfg.stream = s.get();
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CONVEYOR_CHECK(cudaLaunchKernelEx(&cfg, cluster_blocks, out));
}

// True when device 0 runs thread-block clusters (compute capability 9.0 or newer).
bool clusters_supported() {
  int major = 0;
  CONVEYOR_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  return major >= 9;
}

int driver_version() {
  int driver = 0;
  CONVEYOR_CHECK(cudaDriverGetVersion(&driver));
  return driver;
}

// A graph holding a copy of `body` as a child graph added through graph::add_node (not graph::child).
conveyor::graph child_through_add_node(const conveyor::graph& body) {
  conveyor::graph g;
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeGraph;
  params.graph.graph = body.get();
  (void)g.add_node({}, params);
  return g;
}

int run_and_read(const conveyor::graph_exec& exec, const conveyor::stream& s, const device_array<int>& out) {
  exec.launch(s);
  s.synchronize();
  return out.download().at(0);
}

std::string what_of(const conveyor::graph_diff& d) {
  std::string out = d.topology_reason;
  for (const auto& line : d.lines()) out += "\n" + line;
  return out;
}

} // namespace

TEST(Diff, AMovedFromGraphIsRefusedNamingWhichArgumentItIs) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 3101));
  sync_device();
  conveyor::graph g;
  (void)g.kernel(cover(n), scale, n, 2.0F, x.get());
  conveyor::graph other = g.clone();
  conveyor::graph taken(std::move(g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::diff: an empty (moved-from) graph (before)", (void)conveyor::diff(g, taken));
  EXPECT_REFUSES_MOVED_FROM("conveyor::diff: an empty (moved-from) graph (after)", (void)conveyor::diff(other, g));
  EXPECT_TRUE(conveyor::diff(other, taken).identical());
}

TEST(Diff, ClusterDimensionsAreComparedAndEveryUpdateRunsTheNewCluster) {
  CONVEYOR_REQUIRE_GPU();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  device_array<int> out(1);
  conveyor::stream s;
  auto clustered = [&](unsigned c) {
    return conveyor::capture(s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), c); });
  };
  conveyor::graph g1 = clustered(1), g1_again = clustered(1), g2 = clustered(2);

  EXPECT_TRUE(conveyor::diff(g1, g1_again).identical()) << what_of(conveyor::diff(g1, g1_again));
  const auto d = conveyor::diff(g1, g2);
  EXPECT_FALSE(d.identical()) << "captures differing only in cluster dimensions were reported identical";
  ASSERT_EQ(d.changed.size(), 1U) << what_of(d);
  EXPECT_TRUE(contains(d.changed[0].what, "cluster 1x1x1 -> 2x1x1")) << d.changed[0].what;
  EXPECT_FALSE(d.changed[0].settable) << "a per-node kernel setter keeps the old attributes";
  const auto described = conveyor::describe(g2);
  ASSERT_EQ(described.nodes.size(), 1U);
  EXPECT_NE(std::find(described.nodes[0].attributes.begin(), described.nodes[0].attributes.end(), "cluster 2x1x1"),
            described.nodes[0].attributes.end());
  EXPECT_TRUE(contains(conveyor::to_json(g2), "cluster 2x1x1"));

  auto exec = conveyor::instantiate(g1);
  EXPECT_EQ(run_and_read(exec, s, out), 1);
  // After a launch, cudaGraphExecUpdate reports success for new cluster dimensions and keeps running the old ones:
  // update refuses the change, and the calls that may re-instantiate do so.
  auto r = exec.update(g2);
  EXPECT_EQ(r.method, conveyor::update_method::refused) << r.reason();
  EXPECT_EQ(r.status, conveyor::update_status::attributes_changed) << r.reason();
  EXPECT_EQ(run_and_read(exec, s, out), 1) << "a refused update changed the executable graph";
  r = exec.update_incremental(g2, /*reinstantiate=*/false);
  EXPECT_EQ(r.method, conveyor::update_method::refused) << r.reason();
  EXPECT_TRUE(contains(r.explanation, "cluster 1x1x1 -> 2x1x1")) << r.reason();
  r = exec.update_incremental(g2);
  EXPECT_EQ(r.method, conveyor::update_method::reinstantiated) << r.reason();
  EXPECT_EQ(run_and_read(exec, s, out), 2) << "the replay still runs the old cluster size";
  r = exec.update_or_reinstantiate(g1_again);
  EXPECT_TRUE(r.reinstantiated()) << r.reason();
  EXPECT_EQ(run_and_read(exec, s, out), 1);
  r = exec.update_incremental(g1); // same attributes: no instantiation needed
  EXPECT_NE(r.method, conveyor::update_method::reinstantiated) << r.reason();
  EXPECT_EQ(run_and_read(exec, s, out), 1);
  // graphed re-captures a callable whose launch attribute follows an argument: replays run what was asked.
  // (A key function makes the unsigned argument a binding: one graph, re-captured and updated when it changes.)
  conveyor::graphed run([&](const conveyor::stream& cs, unsigned c) { launch_clustered(cs, out.get(), c); },
                        conveyor::graphed_options{.warmup_calls = 0}, [](unsigned) { return 0ULL; });
  for (unsigned c : {1U, 2U, 4U, 2U}) {
    run(s, c);
    s.synchronize();
    EXPECT_EQ(out.download().at(0), static_cast<int>(c)) << run.report();
  }
}

// The cluster attributes a whole-graph update compares are read when a capture ends and kept with the graph, so that
// the update need not read the graph again. Every way a captured cluster can reach a graph must still be seen: a
// capture appended to a builder graph (capture_into), a capture whose checks are off (read at the update instead),
// a clone, and a capture_into that threw half-way (its nodes are in the graph, unread).
TEST(Diff, ClusterAttributesAreSeenWhereverACaptureAddedThem) {
  CONVEYOR_REQUIRE_GPU();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  const int n = 256;
  device_array<float> x(random_floats(n, 7011));
  device_array<int> out(1);
  conveyor::stream s;
  // A builder kernel, then a clustered launch captured into the same graph.
  auto appended = [&](unsigned c) {
    conveyor::graph g;
    g.kernel(cover(n), scale, n, 1.0F, x.get());
    (void)conveyor::capture_into(g, s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), c); });
    return g;
  };
  auto refuses = [&](const conveyor::graph& from, const conveyor::graph& to, const char* what) {
    auto exec = conveyor::instantiate(from);
    const int before = run_and_read(exec, s, out);
    const auto r = exec.update(to);
    EXPECT_EQ(r.method, conveyor::update_method::refused) << what << ": " << r.reason();
    EXPECT_EQ(r.status, conveyor::update_status::attributes_changed) << what << ": " << r.reason();
    EXPECT_EQ(run_and_read(exec, s, out), before) << what << ": a refused update changed the executable graph";
    const auto again = exec.update_incremental(to);
    EXPECT_TRUE(again.reinstantiated()) << what << ": " << again.reason();
    EXPECT_NE(run_and_read(exec, s, out), before) << what << ": the replay still runs the old cluster size";
  };
  refuses(appended(1), appended(2), "capture_into a builder graph");
  refuses(appended(2), appended(1), "capture_into a builder graph, back");
  {
    auto same = conveyor::instantiate(appended(2));
    const auto r = same.update(appended(2));
    EXPECT_EQ(r.method, conveyor::update_method::whole_graph) << "same clusters: " << r.reason();
    EXPECT_EQ(run_and_read(same, s, out), 2);
  }
  auto unchecked = [&](unsigned c) {
    conveyor::capture_options o;
    o.host_memory = conveyor::host_memory_check::off;
    o.catch_default_streams = false;
    return conveyor::capture(
        s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), c); }, o);
  };
  refuses(unchecked(1), unchecked(2), "a capture with its checks off");
  const auto clustered = [&](unsigned c) {
    return conveyor::capture(s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), c); });
  };
  refuses(clustered(1), clustered(2).clone(), "a clone");
  conveyor::graph half;
  half.kernel(cover(n), scale, n, 1.0F, x.get());
  EXPECT_THROW((void)conveyor::capture_into(half, s,
                                            [&](const conveyor::stream& cs) {
                                              launch_clustered(cs, out.get(), 2);
                                              throw std::runtime_error("captured code failed");
                                            }),
               std::runtime_error);
  ASSERT_EQ(half.node_count(), 2U) << "the nodes captured before the throw stay in the graph";
  refuses(appended(1), half, "a capture_into that threw");
  // Set through a raw node handle, then told (graph::note_raw_change): read again at the update.
  auto raw_set = [&](unsigned c) {
    conveyor::graph g = clustered(1);
    cudaLaunchAttributeValue v{};
    v.clusterDim.x = c;
    v.clusterDim.y = 1;
    v.clusterDim.z = 1;
    CONVEYOR_CHECK(cudaGraphKernelNodeSetAttribute(g.nodes().at(0).get(), cudaLaunchAttributeClusterDimension, &v));
    g.note_raw_change();
    return g;
  };
  refuses(clustered(1), raw_set(2), "an attribute set through a raw handle");
  // graphed's transform may set attributes through raw handles: each call's replay runs the cluster it set.
  unsigned tuned = 1;
  conveyor::graphed transformed(
      [&](const conveyor::stream& cs, unsigned) { cluster_blocks<<<4, 32, 0, cs.get()>>>(out.get()); },
      conveyor::graphed_options{.warmup_calls = 0,
                                .transform =
                                    [&](conveyor::graph& g) {
                                      cudaLaunchAttributeValue v{};
                                      v.clusterDim.x = tuned;
                                      v.clusterDim.y = 1;
                                      v.clusterDim.z = 1;
                                      CONVEYOR_CHECK(cudaGraphKernelNodeSetAttribute(
                                          g.nodes().at(0).get(), cudaLaunchAttributeClusterDimension, &v));
                                    }},
      [](unsigned) { return 0ULL; });
  for (unsigned c : {1U, 2U, 4U, 2U}) {
    tuned = c;
    transformed(s, c);
    s.synchronize();
    EXPECT_EQ(out.download().at(0), static_cast<int>(c)) << transformed.report();
  }
}

TEST(Diff, EveryKernelLaunchParameterIsCompared) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const auto x0 = random_floats(n, 5101);
  device_array<float> x(x0), other(n);
  sync_device();
  const conveyor::launch_config base_cfg = cover(n);

  // A kernel node, then one parameter changed.
  struct variant {
    const char* name;
    std::function<void(conveyor::graph&)> build;
    const char* expect; // text the change must contain
    bool settable;
  };
  auto plain = [&](conveyor::graph& g) { g.kernel(base_cfg, scale, n, 2.0F, x.get()); };
  auto with_attribute = [&](cudaLaunchAttributeID id, auto set) {
    return [&, id, set](conveyor::graph& g) {
      auto k = g.kernel(base_cfg, scale, n, 2.0F, x.get());
      cudaLaunchAttributeValue v{};
      set(v);
      CONVEYOR_CHECK(cudaGraphKernelNodeSetAttribute(k.get(), id, &v));
    };
  };
  int lowest = 0, highest = 0;
  CONVEYOR_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
  const std::vector<variant> variants{
      {"argument", [&](conveyor::graph& g) { g.kernel(base_cfg, scale, n, 3.0F, x.get()); }, "arguments 1", true},
      {"pointer", [&](conveyor::graph& g) { g.kernel(base_cfg, scale, n, 2.0F, other.get()); }, "arguments 2", true},
      {"function", [&](conveyor::graph& g) { g.kernel(base_cfg, add_scalar, n, 2.0F, x.get()); }, "function", true},
      {"launch shape",
       [&](conveyor::graph& g) {
         g.kernel({dim3(8), dim3(128), 0}, scale, n, 2.0F, x.get());
       },
       "launch shape", true},
      {"dynamic shared memory",
       [&](conveyor::graph& g) {
         g.kernel({base_cfg.grid, base_cfg.block, 256}, scale, n, 2.0F, x.get());
       },
       "dynamic shared memory 0 -> 256 B", true},
      {"priority", with_attribute(cudaLaunchAttributePriority, [&](auto& v) { v.priority = highest; }), "priority",
       false},
      {"memory sync domain",
       with_attribute(cudaLaunchAttributeMemSyncDomain,
                      [](auto& v) { v.memSyncDomain = cudaLaunchMemSyncDomainRemote; }),
       "memory sync domain", false},
      {"carveout",
       with_attribute(cudaLaunchAttributePreferredSharedMemoryCarveout, [](auto& v) { v.sharedMemCarveout = 50; }),
       "shared memory carveout 0% -> 50%", false},
      {"cooperative", with_attribute(cudaLaunchAttributeCooperative, [](auto& v) { v.cooperative = 1; }), "cooperative",
       false},
  };
  conveyor::stream s;
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    conveyor::graph a, a_again, b;
    plain(a);
    plain(a_again);
    v.build(b);
    EXPECT_TRUE(conveyor::diff(a, a_again).identical()) << what_of(conveyor::diff(a, a_again));
    const auto d = conveyor::diff(a, b);
    ASSERT_EQ(d.changed.size(), 1U) << what_of(d);
    EXPECT_TRUE(contains(d.changed[0].what, v.expect)) << d.changed[0].what;
    EXPECT_EQ(d.changed[0].settable, v.settable) << d.changed[0].what;
    EXPECT_TRUE(d.changed[0].comparable);
    // Whatever the change, update_incremental brings the executable graph to b: the scale runs as b says.
    x.upload(x0);
    auto exec = conveyor::instantiate(a);
    const auto r = exec.update_incremental(b);
    EXPECT_TRUE(static_cast<bool>(r)) << r.reason();
    EXPECT_EQ(r.method == conveyor::update_method::per_node, v.settable) << r.reason();
    exec.launch(s);
    s.synchronize();
    const bool writes_other = std::string(v.name) == "pointer";
    const bool adds = std::string(v.name) == "function";
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i)
      want[i] = adds ? x0[i] + 2.0F : x0[i] * (std::string(v.name) == "argument" ? 3.0F : 2.0F);
    if (!writes_other) EXPECT_TRUE(all_near(x.download(), want));
  }
}

TEST(Diff, EdgeTypesAreComparedAsTopology) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> x(random_floats(n, 5201));
  sync_device();
  conveyor::graph g1, g2;
  auto a1 = g1.kernel(cover(n), scale, n, 2.0F, x.get());
  g1.kernel({a1}, cover(n), add_scalar, n, 1.0F, x.get());
  auto a2 = g2.kernel(cover(n), scale, n, 2.0F, x.get());
  auto b2 = g2.kernel(cover(n), add_scalar, n, 1.0F, x.get());
  cudaGraphEdgeData edge{};
  edge.from_port = cudaGraphKernelNodePortProgrammatic;
  edge.type = cudaGraphDependencyTypeProgrammatic;
  const cudaGraphNode_t from = a2.get(), to = b2.get();
  CONVEYOR_CHECK(cudaGraphAddDependencies(g2.get(), &from, &to, &edge, 1));
  const auto d = conveyor::diff(g1, g2);
  EXPECT_FALSE(d.same_topology);
  EXPECT_TRUE(contains(d.topology_reason, "dependency types differ")) << d.topology_reason;
}

namespace {

// Twelve branches (u[k] = x[k] + a + k), a join of two of them into ab, and a join of ab with the last branch into
// z, depending on two more branches: dependencies far back in creation order (beyond the few nodes just before a
// node, which the read tries first), in the order given.
struct far_joins {
  static constexpr int n = 512;
  static constexpr int branches = 12;
  std::vector<std::unique_ptr<device_array<float>>> x, u;
  device_array<float> ab{std::vector<float>(n, 0.0F)}, z{std::vector<float>(n, 0.0F)};

  far_joins() {
    for (int k = 0; k < branches; ++k) {
      x.push_back(std::make_unique<device_array<float>>(random_floats(n, 5300 + k)));
      u.push_back(std::make_unique<device_array<float>>(std::vector<float>(n, 0.0F)));
    }
    sync_device();
  }

  // The graph, and its branch nodes. `first`: the first join's dependencies, in order, and the branches it adds;
  // `second`: the second join's other dependencies, in order.
  std::pair<conveyor::graph, std::vector<conveyor::node>> build(float a, std::vector<int> first,
                                                                std::vector<int> second) const {
    conveyor::graph g;
    std::vector<conveyor::node> branch;
    for (int k = 0; k < branches; ++k)
      branch.push_back(g.kernel(cover(n), copy_plus, n, at(x, k), a + float(k), at(u, k)));
    auto pick = [&](const std::vector<int>& ks) {
      std::vector<conveyor::node> out;
      for (int k : ks) out.push_back(branch[static_cast<std::size_t>(k)]);
      return out;
    };
    const int lo = std::min(first[0], first[1]), hi = std::max(first[0], first[1]);
    auto join = g.kernel(pick(first), cover(n), add_vectors, n, at(u, lo), at(u, hi), ab.get());
    auto deps = pick(second);
    deps.push_back(join);
    (void)g.kernel(deps, cover(n), add_vectors, n, ab.get(), at(u, branches - 1), z.get());
    return {std::move(g), std::move(branch)};
  }

  // z as the graph built with `a` and a first join of branches `lo` and `hi` computes it.
  [[nodiscard]] std::vector<float> want(float a, int lo, int hi) const {
    const auto x0 = x[static_cast<std::size_t>(lo)]->download(), x1 = x[static_cast<std::size_t>(hi)]->download();
    const auto xl = x.back()->download();
    std::vector<float> out(n);
    for (int i = 0; i < n; ++i)
      out[i] = ((x0[i] + (a + float(lo))) + (x1[i] + (a + float(hi)))) + (xl[i] + (a + float(branches - 1)));
    return out;
  }

  [[nodiscard]] std::vector<float> run(const conveyor::graph_exec& exec, const conveyor::stream& s) const {
    exec.launch(s);
    s.synchronize();
    return z.download();
  }

private:
  static float* at(const std::vector<std::unique_ptr<device_array<float>>>& v, int k) {
    return v[static_cast<std::size_t>(k)]->get();
  }
};

} // namespace

// The same DAG with its far dependencies added in another order is the same topology, and updated node by node;
// one dependency moved to another branch far back is a topology change. Exports list edges by (from, to).
TEST(Diff, DependenciesFarBackAreComparedWhateverOrderTheyWereAddedIn) {
  CONVEYOR_REQUIRE_GPU();
  const far_joins f;
  constexpr int last = far_joins::branches - 1;
  const auto g1 = f.build(2.0F, {0, 5}, {last, 3});
  const auto g2 = f.build(3.0F, {5, 0}, {3, last});
  const auto g3 = f.build(2.0F, {0, 6}, {last, 3});
  const auto same = conveyor::diff(g1.first, g2.first);
  EXPECT_TRUE(same.same_topology) << what_of(same);
  EXPECT_EQ(same.lines().size(), static_cast<std::size_t>(far_joins::branches)) << what_of(same); // each branch
  const auto moved = conveyor::diff(g1.first, g3.first);
  EXPECT_FALSE(moved.same_topology);
  EXPECT_TRUE(contains(moved.topology_reason, "dependencies differ")) << moved.topology_reason;

  const auto d = conveyor::describe(g1.first);
  const std::vector<std::pair<std::size_t, std::size_t>> want_edges{{0, 12}, {3, 13}, {5, 12}, {11, 13}, {12, 13}};
  EXPECT_EQ(d.edges, want_edges);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g1.first);
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(2.0F, 0, 5)));
  const auto r = exec.update_incremental(g2.first, false);
  ASSERT_EQ(r.method, conveyor::update_method::per_node) << r.reason();
  EXPECT_EQ(r.nodes_changed, static_cast<std::size_t>(far_joins::branches)) << r.reason();
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(3.0F, 0, 5)));
}

// cudaGraphExecUpdate pairs nodes through their dependencies, not by creation order: it applies a graph whose first
// join depends on branch 6 instead of 5 by running that branch on the node that ran branch 5. The replays are the
// new graph's; what goes by position afterwards (a per-node setter given a node of that graph, update_incremental's
// comparison) is refused or done as a whole, never applied to the wrong node.
TEST(Update, AGraphCudaPairsThroughItsDependenciesIsNotMatchedByPosition) {
  CONVEYOR_REQUIRE_GPU();
  const far_joins f;
  constexpr int last = far_joins::branches - 1;
  const auto g1 = f.build(2.0F, {0, 5}, {last, 3});
  const auto g3 = f.build(2.0F, {0, 6}, {last, 3});
  const auto g4 = f.build(4.0F, {0, 6}, {last, 3});
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1.first);
  const auto r = exec.update(g3.first);
  std::printf("update to a graph paired through its dependencies: %s\n", r.reason().c_str());
  if (!r) GTEST_SKIP() << "this driver refuses the update (" << r.reason() << "): nothing is paired otherwise";
  EXPECT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(2.0F, 0, 6)));

  // Branch 6 of g3 is not run by the executable graph's node 6: refused, nothing changed.
  try {
    exec.set_kernel_args(g3.second[6], copy_plus, far_joins::n, f.x[6]->get(), 100.0F, f.u[6]->get());
    ADD_FAILURE() << "a node of a graph CUDA paired otherwise was set by position";
  } catch (const std::logic_error& e) {
    EXPECT_TRUE(contains(e.what(), "creation order")) << e.what();
  }
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(2.0F, 0, 6)));
  // Nor is branch 6 of the graph it was instantiated from: the executable graph's node 6 may run other work now.
  try {
    exec.set_kernel_args(g1.second[6], copy_plus, far_joins::n, f.x[6]->get(), 100.0F, f.u[6]->get());
    ADD_FAILURE() << "a node of the replaced source was set after CUDA paired the nodes otherwise";
  } catch (const std::logic_error& e) {
    EXPECT_TRUE(contains(e.what(), "instantiated from")) << e.what();
  }
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(2.0F, 0, 6)));

  // update_incremental cannot compare by position: the whole-graph update applies it.
  const auto inc = exec.update_incremental(g4.first, false);
  EXPECT_EQ(inc.method, conveyor::update_method::whole_graph) << inc.reason();
  EXPECT_TRUE(contains(inc.reason(), "creation order")) << inc.reason();
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(4.0F, 0, 6)));

  // Back to the graph it was made from: by position again, and a node of it is set where it runs.
  const auto back = exec.update(g1.first);
  ASSERT_EQ(back.method, conveyor::update_method::whole_graph) << back.reason();
  exec.set_kernel_args(g1.second[5], copy_plus, far_joins::n, f.x[5]->get(), 7.0F, f.u[5]->get());
  std::vector<float> want = f.want(2.0F, 0, 5);
  const auto x5 = f.x[5]->download();
  const auto x0 = f.x[0]->download(), xl = f.x.back()->download();
  for (int i = 0; i < far_joins::n; ++i) want[i] = ((x0[i] + 2.0F) + (x5[i] + 7.0F)) + (xl[i] + (2.0F + float(last)));
  EXPECT_TRUE(all_near(f.run(exec, s), want));
}

// The cluster guard compares attributes by position: for a graph CUDA would pair otherwise (the same branch
// clustered at the same position, but the join depending on another branch) it cannot vouch for the update, which
// is refused; update_or_reinstantiate instantiates it, and the replay is the new graph's.
TEST(Update, AGraphCudaPairsOtherwiseIsRefusedWhereTheGuardsCompareByPosition) {
  CONVEYOR_REQUIRE_GPU();
  const far_joins f;
  constexpr int last = far_joins::branches - 1;
  auto g1 = f.build(2.0F, {0, 5}, {last, 3});
  auto g3 = f.build(2.0F, {0, 6}, {last, 3});
  cudaLaunchAttributeValue v{};
  v.clusterDim.x = 2;
  v.clusterDim.y = 1;
  v.clusterDim.z = 1;
  for (auto* g : {&g1, &g3}) {
    CONVEYOR_CHECK(cudaGraphKernelNodeSetAttribute(g->second[5].get(), cudaLaunchAttributeClusterDimension, &v));
    g->first.note_raw_change();
  }
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1.first);
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(2.0F, 0, 5)));
  const auto r = exec.update(g3.first);
  EXPECT_EQ(r.method, conveyor::update_method::refused) << r.reason();
  EXPECT_EQ(r.status, conveyor::update_status::attributes_changed) << r.reason();
  EXPECT_TRUE(contains(r.reason(), "creation order")) << r.reason();
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(2.0F, 0, 5))); // unchanged
  const auto again = exec.update_or_reinstantiate(g3.first);
  EXPECT_EQ(again.method, conveyor::update_method::reinstantiated) << again.reason();
  EXPECT_TRUE(all_near(f.run(exec, s), f.want(2.0F, 0, 6)));
  // The same graph again pairs by position: updated in place.
  const auto same = exec.update(g3.first);
  EXPECT_EQ(same.method, conveyor::update_method::whole_graph) << same.reason();
}

TEST(Diff, AllocationNodesAtOtherAddressesAreNotUpdatedInPlace) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  const auto v1 = random_floats(n, 5301), v2 = random_floats(n, 5302);
  device_array<float> src1(v1), src2(v2), out1(n), out2(n);
  sync_device();
  auto build = [&](const device_array<float>& src, device_array<float>& out) {
    conveyor::graph g;
    auto alloc = g.mem_alloc(n * sizeof(float));
    auto* tmp = static_cast<float*>(alloc.pointer);
    auto in = g.memcpy({alloc.node}, tmp, src.get(), src.bytes(), cudaMemcpyDeviceToDevice);
    auto k = g.kernel({in}, cover(n), scale, n, 3.0F, tmp);
    auto back = g.memcpy({k}, out.get(), tmp, out.bytes(), cudaMemcpyDeviceToDevice);
    g.mem_free({back}, tmp).label("release");
    return std::pair{std::move(g), alloc.pointer};
  };
  auto [g1, p1] = build(src1, out1);
  auto [g2, p2] = build(src2, out2);
  const auto d = conveyor::diff(g1, g2);
  ASSERT_TRUE(d.same_topology) << d.topology_reason;
  if (p1 != p2) {
    ASSERT_FALSE(d.changed.empty());
    EXPECT_EQ(d.changed[0].kind, conveyor::node_kind::mem_alloc) << what_of(d);
    EXPECT_TRUE(contains(d.changed[0].what, "address")) << d.changed[0].what;
    EXPECT_FALSE(d.changed[0].settable);
  }
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want1(n), want2(n);
  for (int i = 0; i < n; ++i) {
    want1[i] = v1[i] * 3.0F;
    want2[i] = v2[i] * 3.0F;
  }
  EXPECT_TRUE(all_near(out1.download(), want1));
  if (p1 != p2) {
    const auto refused = exec.update(g2);
    EXPECT_EQ(refused.method, conveyor::update_method::refused) << refused.reason();
    EXPECT_EQ(refused.status, conveyor::update_status::parameters_changed);
    EXPECT_TRUE(contains(refused.reason(), "allocation")) << refused.reason();
  }
  const auto r = exec.update_incremental(g2);
  EXPECT_TRUE(static_cast<bool>(r)) << r.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(out2.download(), want2)) << r.reason();
}

TEST(Diff, ConditionalBodiesAreComparedRecursively) {
  CONVEYOR_REQUIRE_GPU();
  if (driver_version() < 12040) GTEST_SKIP() << "conditional nodes need CUDA 12.4";
  device_array<int> out(1);
  auto build = [&](int value) {
    conveyor::graph g;
    const auto cond =
        conveyor::make_condition(g, 1, conveyor::condition_reset::each_launch); // the IF body runs at every launch
    auto c = conveyor::add_conditional(g, {}, conveyor::conditional_kind::if_then, cond);
    c.bodies[0].kernel({dim3(1), dim3(1)}, fill_int, 1, value, out.get()).label("store");
    return g;
  };
  conveyor::graph g1 = build(5), g2 = build(7);
  const auto d = conveyor::diff(g1, g2);
  ASSERT_EQ(d.changed.size(), 1U) << what_of(d);
  EXPECT_EQ(d.changed[0].kind, conveyor::node_kind::conditional);
  EXPECT_TRUE(contains(d.changed[0].what, "body 0 node 0: arguments 1")) << d.changed[0].what;
  EXPECT_FALSE(d.changed[0].settable);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1);
  EXPECT_EQ(run_and_read(exec, s, out), 5);
  const auto r = exec.update_incremental(g2);
  EXPECT_TRUE(static_cast<bool>(r)) << r.reason();
  EXPECT_NE(r.method, conveyor::update_method::per_node) << r.reason();
  EXPECT_EQ(run_and_read(exec, s, out), 7) << r.reason();
}

TEST(Diff, ChildGraphChangesAreSetThroughTheChildNode) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 300;
  device_array<int> out(n);
  auto build = [&](int value) {
    conveyor::graph body;
    body.kernel(cover(n), fill_int, n, value, out.get());
    conveyor::graph g;
    g.child(body).label("child");
    return g;
  };
  conveyor::graph g1 = build(3), g2 = build(4);
  const auto d = conveyor::diff(g1, g2);
  ASSERT_EQ(d.changed.size(), 1U) << what_of(d);
  EXPECT_EQ(d.changed[0].kind, conveyor::node_kind::child_graph);
  EXPECT_TRUE(contains(d.changed[0].what, "child node 0: arguments 1")) << d.changed[0].what;
  EXPECT_TRUE(d.changed[0].settable);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1);
  const auto r = exec.update_incremental(g2);
  EXPECT_EQ(r.method, conveyor::update_method::per_node) << r.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(out.download(), std::vector<int>(n, 4)));
}

// CUDA's whole-graph update reports new cluster dimensions applied and keeps the old ones (the test above); the same
// must not slip through a child graph or a conditional node's body (built, or captured): every update path runs the
// new cluster or refuses (and the calls that may re-instantiate do so).
TEST(Diff, ClustersInsideChildGraphsAndConditionalBodiesRunWhatTheNewGraphSays) {
  CONVEYOR_REQUIRE_GPU();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  const int driver = driver_version();
  device_array<int> out(1);
  conveyor::stream s;
  auto in_child = [&](unsigned c) {
    conveyor::graph g;
    g.child(conveyor::capture(s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), c); }));
    return g;
  };
  auto in_body = [&](unsigned c) {
    conveyor::graph g;
    const auto cond = conveyor::make_condition(g, 1, conveyor::condition_reset::each_launch);
    auto node = conveyor::add_conditional(g, {}, conveyor::conditional_kind::if_then, cond);
    (void)conveyor::capture_into(node.bodies[0], s,
                                 [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), c); });
    return g;
  };
  auto captured_body = [&](unsigned c) {
    return conveyor::capture(s, [&](const conveyor::stream& cs) {
      const auto cond = conveyor::capture_condition(cs, 1, conveyor::condition_reset::each_launch);
      (void)conveyor::capture_conditional(cs, conveyor::conditional_kind::if_then, cond,
                                          [&](const conveyor::stream& body) { launch_clustered(body, out.get(), c); });
    });
  };
  auto check = [&](const std::function<conveyor::graph(unsigned)>& build, const char* where) {
    SCOPED_TRACE(where);
    for (const auto& [from, to] : {std::pair{1U, 2U}, std::pair{2U, 1U}}) {
      auto exec = conveyor::instantiate(build(from));
      ASSERT_EQ(run_and_read(exec, s, out), static_cast<int>(from));
      auto r = exec.update(build(to));
      const int after_update = run_and_read(exec, s, out);
      if (r.method == conveyor::update_method::refused) {
        EXPECT_EQ(after_update, static_cast<int>(from)) << "a refused update changed the executable graph";
        EXPECT_EQ(r.status, conveyor::update_status::attributes_changed) << r.reason();
        EXPECT_TRUE(contains(r.explanation, "kernel 1 inside node")) << r.reason();
      } else {
        EXPECT_EQ(after_update, static_cast<int>(to)) << r.reason() << ": the replay runs the old cluster size";
      }
      r = exec.update_or_reinstantiate(build(to));
      EXPECT_TRUE(static_cast<bool>(r)) << r.reason();
      EXPECT_EQ(run_and_read(exec, s, out), static_cast<int>(to)) << r.reason();
      auto again = conveyor::instantiate(build(from));
      ASSERT_EQ(run_and_read(again, s, out), static_cast<int>(from));
      r = again.update_incremental(build(to), /*reinstantiate=*/false);
      const int after_incremental = run_and_read(again, s, out);
      if (r.method == conveyor::update_method::refused)
        EXPECT_EQ(after_incremental, static_cast<int>(from)) << "a refused update changed the executable graph";
      else EXPECT_EQ(after_incremental, static_cast<int>(to)) << r.reason() << ": the replay runs the old cluster size";
      r = again.update_incremental(build(to));
      EXPECT_TRUE(static_cast<bool>(r)) << r.reason();
      EXPECT_EQ(run_and_read(again, s, out), static_cast<int>(to)) << r.reason();
    }
  };
  check(in_child, "a child graph");
  if (driver >= 12040) {
    check(in_body, "a conditional node's body");
    check(captured_body, "a captured conditional node's body");
  }
}

// Graphs holding embedded graphs Conveyor did not make itself: a child graph added through add_node (its clusters
// are read at the update), and a conditional node added through raw CUDA, whose bodies CUDA 13.0 cannot read back
// (whole-graph updates are refused; update_or_reinstantiate instantiates).
TEST(Diff, EmbeddedGraphsAddedThroughRawCudaAreStillGuarded) {
  CONVEYOR_REQUIRE_GPU();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  const int driver = driver_version();
  device_array<int> out(1);
  conveyor::stream s;
  auto by_add_node = [&](unsigned c) {
    return child_through_add_node(
        conveyor::capture(s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), c); }));
  };
  auto raw_conditional = [&](unsigned c) {
    conveyor::graph g;
    cudaGraphConditionalHandle handle{};
    CONVEYOR_CHECK(cudaGraphConditionalHandleCreate(&handle, g.get(), 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeIf;
    params.conditional.size = 1;
    (void)g.add_node({}, params);
    int* target = out.get();
    void* args[] = {&target};
    cudaKernelNodeParams k{};
    k.func = reinterpret_cast<void*>(cluster_blocks);
    k.gridDim = dim3(4);
    k.blockDim = dim3(32);
    k.kernelParams = args;
    cudaGraphNode_t kernel = nullptr;
    CONVEYOR_CHECK(cudaGraphAddKernelNode(&kernel, params.conditional.phGraph_out[0], nullptr, 0, &k));
    cudaLaunchAttributeValue v{};
    v.clusterDim.x = c;
    v.clusterDim.y = 1;
    v.clusterDim.z = 1;
    CONVEYOR_CHECK(cudaGraphKernelNodeSetAttribute(kernel, cudaLaunchAttributeClusterDimension, &v));
    return g;
  };
  auto check = [&](const std::function<conveyor::graph(unsigned)>& build, conveyor::update_status refusal,
                   const char* where) {
    SCOPED_TRACE(where);
    auto exec = conveyor::instantiate(build(1));
    ASSERT_EQ(run_and_read(exec, s, out), 1);
    auto r = exec.update(build(2));
    EXPECT_EQ(r.method, conveyor::update_method::refused) << r.reason();
    EXPECT_EQ(r.status, refusal) << r.reason();
    EXPECT_EQ(run_and_read(exec, s, out), 1) << "a refused update changed the executable graph";
    r = exec.update_or_reinstantiate(build(2));
    EXPECT_TRUE(r.reinstantiated()) << r.reason();
    EXPECT_EQ(run_and_read(exec, s, out), 2) << r.reason();
  };
  check(by_add_node, conveyor::update_status::attributes_changed, "a child graph added with add_node");
  if (driver >= 12040) {
    check(raw_conditional, conveyor::update_status::not_supported, "a conditional node added with add_node");
    auto exec = conveyor::instantiate(raw_conditional(2));
    const auto r = exec.update(raw_conditional(2));
    EXPECT_EQ(r.method, conveyor::update_method::refused) << "bodies that cannot be read are never compared equal";
    EXPECT_TRUE(contains(r.explanation, "conditional node Conveyor did not build")) << r.reason();
  }
}

// An executable graph whose whole-graph updates had nothing to guard (no allocation nodes, no cluster attributes on
// either side: the guards are skipped) must still see clusters that a later graph brings, wherever they are: a top
// level kernel, a child graph, a conditional body, a child graph added through add_node and a capture with its checks
// off (whose clusters are read at the update). Each such update is refused, or its replay runs the new cluster size.
TEST(Diff, ClustersAfterUpdatesWithNothingToGuardAreStillSeen) {
  CONVEYOR_REQUIRE_GPU();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  device_array<int> out(1);
  conveyor::stream s;
  auto plain = [&] {
    conveyor::graph g;
    g.kernel({dim3(4), dim3(32)}, cluster_blocks, out.get());
    return g;
  };
  auto top = [&] {
    return conveyor::capture(s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), 2); });
  };
  auto in_child = [&] {
    conveyor::graph g;
    g.child(top());
    return g;
  };
  auto in_body = [&] {
    conveyor::graph g;
    const auto cond = conveyor::make_condition(g, 1, conveyor::condition_reset::each_launch);
    auto node = conveyor::add_conditional(g, {}, conveyor::conditional_kind::if_then, cond);
    (void)conveyor::capture_into(node.bodies[0], s,
                                 [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), 2); });
    return g;
  };
  auto by_add_node = [&] { return child_through_add_node(top()); };
  auto unchecked = [&] {
    conveyor::capture_options o;
    o.host_memory = conveyor::host_memory_check::off;
    o.catch_default_streams = false;
    return conveyor::capture(
        s, [&](const conveyor::stream& cs) { launch_clustered(cs, out.get(), 2); }, o);
  };
  auto check = [&](const std::function<conveyor::graph()>& clustered, const char* where) {
    SCOPED_TRACE(where);
    auto exec = conveyor::instantiate(plain());
    for (int k = 0; k < 3; ++k) { // updates with nothing to guard
      const auto r = exec.update(plain());
      ASSERT_EQ(r.method, conveyor::update_method::whole_graph) << r.reason();
      ASSERT_EQ(run_and_read(exec, s, out), 1);
    }
    const auto r = exec.update(clustered());
    const int after = run_and_read(exec, s, out);
    if (r.method == conveyor::update_method::refused) {
      EXPECT_EQ(after, 1) << "a refused update changed the executable graph";
      EXPECT_EQ(r.status, conveyor::update_status::attributes_changed) << r.reason();
    } else {
      EXPECT_EQ(after, 2) << r.reason() << ": the replay runs the old cluster size";
    }
    const auto again = exec.update_or_reinstantiate(clustered());
    EXPECT_TRUE(static_cast<bool>(again)) << again.reason();
    EXPECT_EQ(run_and_read(exec, s, out), 2) << again.reason();
    const auto back = exec.update(plain()); // and back: the guard compares against what now runs
    const int after_back = run_and_read(exec, s, out);
    if (back.method == conveyor::update_method::refused)
      EXPECT_EQ(after_back, 2) << "a refused update changed the executable graph";
    else EXPECT_EQ(after_back, 1) << back.reason() << ": the replay runs the old cluster size";
  };
  check(top, "a top-level kernel");
  check(in_child, "a child graph");
  check(by_add_node, "a child graph added with add_node");
  check(unchecked, "a capture with its checks off");
  if (driver_version() >= 12040) check(in_body, "a conditional node's body");
}

TEST(Diff, EventNodesAreComparedByEvent) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::event e1(cudaEventDisableTiming), e2(cudaEventDisableTiming);
  conveyor::graph g1, g2;
  g1.event_record(e1);
  g2.event_record(e2);
  const auto d = conveyor::diff(g1, g2);
  ASSERT_EQ(d.changed.size(), 1U) << what_of(d);
  EXPECT_EQ(d.changed[0].what, "recorded event");
  conveyor::stream s;
  auto exec = conveyor::instantiate(g1);
  const auto r = exec.update_incremental(g2);
  EXPECT_EQ(r.method, conveyor::update_method::per_node) << r.reason();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(cudaEventQuery(e2.get()), cudaSuccess) << "the updated node did not record the new event";
}
