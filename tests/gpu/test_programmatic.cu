// GPU tests of programmatic dependent launch and node priorities: each edge type through build, capture, describe,
// export, diff, update and the programmatic pass, with results checked against a host computation in double
// precision; the refusals; a high-priority branch finishing first under contention. Each test skips without a
// CUDA device.

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"
#include "support/moved_from.hpp"

#include <conveyor/conveyor.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::edge_type;
using conveyor::test::all_near;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::random_floats;
using conveyor::test::sync_device;

using namespace conveyor::test::kernels;

namespace {

constexpr long long step_cycles = 20'000; // about 10 µs: long enough that an early reader would see old values

// The coefficients of step k of a chain: x = a_k x + b_k.
float coefficient_a(int k) { return 1.0F + 0.01F * static_cast<float>(k % 7); }
float coefficient_b(int k) { return 0.25F * static_cast<float>((k % 5) - 2); }

// The chain's result on the host, in double precision.
std::vector<float> host_chain(std::vector<float> x, int steps) {
  for (auto& v : x) {
    double d = v;
    for (int k = 0; k < steps; ++k) d = static_cast<double>(coefficient_a(k)) * d + coefficient_b(k);
    v = static_cast<float>(d);
  }
  return x;
}

// A chain of `steps` pdl_affine kernel nodes on x, each edge of type `type`.
conveyor::graph build_chain(int n, float* x, int steps, edge_type type) {
  conveyor::graph g;
  conveyor::node previous;
  for (int k = 0; k < steps; ++k) {
    const auto cfg = cover(static_cast<std::size_t>(n), 128);
    if (!previous) previous = g.kernel(cfg, pdl_affine, n, coefficient_a(k), coefficient_b(k), x, step_cycles);
    else
      previous = g.kernel({conveyor::dependency(previous, type)}, cfg, pdl_affine, n, coefficient_a(k),
                          coefficient_b(k), x, step_cycles);
    previous.label("step " + std::to_string(k));
  }
  return g;
}

std::vector<float> run(const conveyor::graph& g, device_array<float>& x, const std::vector<float>& x0,
                       int launches = 1) {
  x.upload(x0);
  sync_device();
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  for (int i = 0; i < launches; ++i) exec.launch(s);
  s.synchronize();
  return x.download();
}

std::size_t count_type(const conveyor::graph_description& d, edge_type type) {
  std::size_t n = 0;
  for (std::size_t e = 0; e < d.edges.size(); ++e) n += d.edge_type_of(e) == type ? 1 : 0;
  return n;
}

} // namespace

// ---- build ----------------------------------------------------------------------------------------------------

class EdgeTypes : public ::testing::TestWithParam<edge_type> {};

TEST_P(EdgeTypes, BuiltChainComputesTheHostResultAndDescribesItsEdges) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 3000;
  const int steps = 12;
  const auto x0 = random_floats(n, 701);
  device_array<float> x(x0);
  auto g = build_chain(n, x.get(), steps, GetParam());
  EXPECT_EQ(g.edge_count(), static_cast<std::size_t>(steps - 1));
  const auto nodes = g.nodes();
  EXPECT_EQ(g.edge_type_between(nodes[0], nodes[1]), GetParam());
  EXPECT_EQ(g.edge_type_between(nodes[1], nodes[0]), std::nullopt);

  const auto d = conveyor::describe(g);
  ASSERT_EQ(d.edge_types.size(), d.edges.size());
  EXPECT_EQ(count_type(d, GetParam()), static_cast<std::size_t>(steps - 1));

  const std::string dot = conveyor::to_dot(d);
  const auto json = nlohmann::json::parse(conveyor::to_json(d));
  ASSERT_EQ(json["edge_types"].size(), static_cast<std::size_t>(steps - 1));
  EXPECT_EQ(json["edge_types"][0].get<std::string>(), std::string(conveyor::to_string(GetParam())));
  if (GetParam() == edge_type::full) EXPECT_EQ(dot.find("programmatic"), std::string::npos);
  else
    EXPECT_NE(
        dot.find(GetParam() == edge_type::programmatic ? "label=\"programmatic\"" : "label=\"launch completion\""),
        std::string::npos)
        << dot;

  // Three launches: each runs the chain's steps again on the last one's result.
  const auto got = run(g, x, x0, 3);
  EXPECT_TRUE(all_near(got, host_chain(host_chain(host_chain(x0, steps), steps), steps), 1e-5F));
}

INSTANTIATE_TEST_SUITE_P(Programmatic, EdgeTypes,
                         ::testing::Values(edge_type::full, edge_type::programmatic, edge_type::launch_completion),
                         [](const auto& info) { return std::string(conveyor::to_string(info.param)); });

TEST(Programmatic, PrecedeSucceedAndSetEdgeTypeChangeOneEdgeEach) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> x(random_floats(n, 702));
  conveyor::graph g;
  auto a = g.kernel(cover(n), pdl_affine, n, 1.0F, 1.0F, x.get(), 0LL);
  auto b = g.kernel(cover(n), pdl_affine, n, 1.0F, 1.0F, x.get(), 0LL);
  auto c = g.kernel(cover(n), pdl_affine, n, 1.0F, 1.0F, x.get(), 0LL);
  auto d = g.kernel(cover(n), pdl_affine, n, 1.0F, 1.0F, x.get(), 0LL);
  a.precede(b, edge_type::programmatic);
  c.succeed({conveyor::launch_completion(b), a});
  d.succeed({conveyor::programmatic(c)});
  EXPECT_EQ(g.edge_type_between(a, b), edge_type::programmatic);
  EXPECT_EQ(g.edge_type_between(b, c), edge_type::launch_completion);
  EXPECT_EQ(g.edge_type_between(a, c), edge_type::full);
  EXPECT_EQ(g.edge_type_between(c, d), edge_type::programmatic);

  g.set_edge_type(a, b, edge_type::full);
  EXPECT_EQ(g.edge_type_between(a, b), edge_type::full);
  g.set_edge_type(a, c, edge_type::launch_completion);
  EXPECT_EQ(g.edge_type_between(a, c), edge_type::launch_completion);
  g.set_edge_type(c, d, edge_type::programmatic); // unchanged: nothing to do
  EXPECT_EQ(g.edge_count(), 4U);
  EXPECT_THROW(g.set_edge_type(d, a, edge_type::programmatic), std::invalid_argument); // no such edge
}

TEST(Programmatic, AMovedFromGraphIsRefusedByThePassAndTheEdgeCalls) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> x(random_floats(n, 712));
  conveyor::graph g;
  auto a = g.kernel(cover(n), pdl_affine, n, 1.0F, 1.0F, x.get(), 0LL);
  auto b = g.kernel({a}, cover(n), pdl_affine, n, 1.0F, 1.0F, x.get(), 0LL);
  conveyor::graph taken(std::move(g));
  const auto kernels = conveyor::waiting_kernels{}.add(pdl_affine);
  EXPECT_REFUSES_MOVED_FROM("conveyor::make_programmatic", (void)conveyor::make_programmatic(g, kernels));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::set_edge_type", g.set_edge_type(a, b, edge_type::programmatic));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::edge_type_between", (void)g.edge_type_between(a, b));
  EXPECT_EQ(taken.edge_type_between(a, b), edge_type::full); // nothing changed
  const auto report = conveyor::make_programmatic(taken, kernels);
  EXPECT_EQ(report.changed.size(), 1U);
  EXPECT_EQ(taken.edge_type_between(a, b), edge_type::programmatic);
}

TEST(Programmatic, BuilderRefusesTypedEdgesThatDoNotJoinKernelsAndSaysWhich) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 256;
  device_array<float> x(random_floats(n, 703));
  device_array<float> y(n);
  conveyor::graph g;
  auto copy = g.memcpy(y.get(), x.get(), n * sizeof(float), cudaMemcpyDeviceToDevice).label("copy");
  auto k = g.kernel(cover(n), pdl_affine, n, 1.0F, 0.0F, x.get(), 0LL).label("k");
  // A kernel after a memcpy through a programmatic dependency.
  try {
    (void)g.kernel({conveyor::programmatic(copy)}, cover(n), pdl_affine, n, 1.0F, 0.0F, y.get(), 0LL);
    ADD_FAILURE() << "a programmatic edge from a memcpy node was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("copy"), std::string::npos) << what;
    EXPECT_NE(what.find("memcpy"), std::string::npos) << what;
  }
  // A memset after a kernel through a programmatic dependency.
  EXPECT_THROW((void)g.memset({conveyor::programmatic(k)}, y.get(), 0.0F, n), std::invalid_argument);
  EXPECT_THROW(k.precede(copy, edge_type::programmatic), std::invalid_argument);
  EXPECT_THROW(g.set_edge_type(copy, k, edge_type::programmatic), std::invalid_argument); // no edge either
  // Nothing was left behind by the refusals.
  EXPECT_EQ(g.node_count(), 2U);
  EXPECT_EQ(g.edge_count(), 0U);
  // launch_config::programmatic in the builder: kernel dependencies become programmatic, others stay full.
  conveyor::launch_config cfg = cover(n);
  cfg.programmatic = true;
  auto after = g.kernel({copy, k}, cfg, pdl_affine, n, 1.0F, 0.0F, y.get(), 0LL);
  EXPECT_EQ(g.edge_type_between(copy, after), edge_type::full);
  EXPECT_EQ(g.edge_type_between(k, after), edge_type::programmatic);
}

// ---- capture --------------------------------------------------------------------------------------------------

TEST(Programmatic, CapturedProgrammaticLaunchesBecomeProgrammaticEdgesAndComputeTheSame) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 5000;
  const int steps = 10;
  const auto x0 = random_floats(n, 704);
  device_array<float> x(x0);
  device_array<float> y(n);
  conveyor::stream s;
  auto g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    conveyor::launch_config cfg = cover(n, 128);
    for (int k = 0; k < steps; ++k) {
      cfg.programmatic = k > 0;
      conveyor::launch(cs, cfg, pdl_affine, n, coefficient_a(k), coefficient_b(k), x.get(), step_cycles);
    }
    // A copy after the chain, then a programmatic kernel after the copy: that edge stays full.
    CONVEYOR_CHECK(cudaMemcpyAsync(y.get(), x.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, cs.get()));
    conveyor::launch(cs, cfg, pdl_affine, n, 2.0F, 0.0F, y.get(), 0LL);
  });
  const auto d = conveyor::describe(g);
  EXPECT_EQ(count_type(d, edge_type::programmatic), static_cast<std::size_t>(steps - 1));
  EXPECT_EQ(count_type(d, edge_type::full), 2U);
  const auto got = run(g, x, x0);
  const auto want = host_chain(x0, steps);
  EXPECT_TRUE(all_near(got, want, 1e-5F));
  std::vector<float> doubled(want);
  for (auto& v : doubled) v *= 2.0F;
  EXPECT_TRUE(all_near(y.download(), doubled, 1e-5F));

  // The same launches outside a capture: programmatic stream launches give the same values.
  x.upload(x0);
  sync_device();
  conveyor::launch_config cfg = cover(n, 128);
  for (int k = 0; k < steps; ++k) {
    cfg.programmatic = k > 0;
    conveyor::launch(s, cfg, pdl_affine, n, coefficient_a(k), coefficient_b(k), x.get(), step_cycles);
  }
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), want, 1e-5F));
}

TEST(Programmatic, CaptureIntoRefusesTypedDependenciesWithTheWayToDoIt) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 705));
  conveyor::graph g;
  auto k = g.kernel(cover(n), pdl_affine, n, 1.0F, 0.0F, x.get(), 0LL);
  conveyor::stream s;
  try {
    (void)conveyor::capture_into(g, s, [&](const conveyor::stream&) {}, {conveyor::programmatic(k)});
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("launch_config::programmatic"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(s.is_capturing());
}

// ---- diff and update ----------------------------------------------------------------------------------------------

TEST(Programmatic, DiffSeesEdgeTypesAndUpdateHandlesThem) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2000;
  const int steps = 6;
  const auto x0 = random_floats(n, 706);
  device_array<float> x(x0);
  auto full = build_chain(n, x.get(), steps, edge_type::full);
  auto pdl = build_chain(n, x.get(), steps, edge_type::programmatic);
  auto pdl_again = build_chain(n, x.get(), steps, edge_type::programmatic);

  const auto d = conveyor::diff(full, pdl);
  EXPECT_FALSE(d.same_topology);
  EXPECT_NE(d.topology_reason.find("dependency types"), std::string::npos) << d.topology_reason;
  EXPECT_TRUE(conveyor::diff(pdl, pdl_again).identical());

  x.upload(x0);
  sync_device();
  conveyor::stream s;
  auto exec = conveyor::instantiate(full);
  // A whole-graph update cannot change edge types: refused with the reason; the fallback re-instantiates.
  const auto refused = exec.update(pdl);
  EXPECT_EQ(refused.method, conveyor::update_method::refused) << refused.explanation;
  EXPECT_EQ(refused.status, conveyor::update_status::topology_changed) << refused.explanation;
  const auto applied = exec.update_or_reinstantiate(pdl);
  EXPECT_TRUE(applied.reinstantiated()) << applied.explanation;
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), host_chain(x0, steps), 1e-5F));

  // Same edge types, other arguments: an incremental update sets the changed nodes and keeps the edges.
  x.upload(x0);
  sync_device();
  auto pdl_other = build_chain(n, x.get(), steps, edge_type::programmatic);
  const auto incremental = exec.update_incremental(pdl_other);
  EXPECT_TRUE(static_cast<bool>(incremental)) << incremental.explanation;
  EXPECT_FALSE(incremental.reinstantiated()) << incremental.explanation;
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(x.download(), host_chain(x0, steps), 1e-5F));
}

// ---- the programmatic pass ------------------------------------------------------------------------------------

TEST(Programmatic, PassChangesOnlyEdgesIntoWaitingKernelsAndKeepsTheResult) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4000;
  const auto x0 = random_floats(n, 707);
  const auto y0 = random_floats(n, 708);
  device_array<float> x(x0);
  device_array<float> y(y0);
  device_array<float> z(n);
  conveyor::graph g;
  const auto cfg = cover(n, 128);
  auto k0 = g.kernel(cfg, pdl_affine, n, 1.5F, 0.5F, x.get(), step_cycles).label("k0");
  auto k1 = g.kernel({k0}, cfg, pdl_affine, n, 0.5F, 1.0F, x.get(), step_cycles).label("k1");
  auto s1 = g.kernel({k1}, cfg, scale, n, 3.0F, x.get()).label("not waiting");
  auto copy = g.memcpy({s1}, z.get(), x.get(), n * sizeof(float), cudaMemcpyDeviceToDevice).label("copy");
  auto k2 = g.kernel({copy}, cfg, pdl_affine, n, 2.0F, 0.0F, z.get(), step_cycles).label("k2");
  auto k3 = g.kernel({k2}, cfg, add_vectors, n, z.get(), y.get(), z.get()).label("sum");
  (void)k3;

  const auto reference = [&] {
    std::vector<double> out(n);
    for (int i = 0; i < n; ++i) {
      double v = x0[i];
      v = 1.5 * v + 0.5;
      v = 0.5 * v + 1.0;
      v = 3.0 * v;
      out[i] = 2.0 * v + static_cast<double>(y0[i]);
    }
    return std::vector<float>(out.begin(), out.end());
  }();

  const auto report = conveyor::make_programmatic(g, conveyor::waiting_kernels{}.add(pdl_affine));
  ASSERT_EQ(report.changed.size(), 1U); // k0 -> k1 only
  EXPECT_EQ(report.changed[0].from_name, "k0");
  EXPECT_EQ(report.changed[0].to_name, "k1");
  EXPECT_EQ(g.edge_type_between(k0, k1), edge_type::programmatic);
  EXPECT_EQ(g.edge_type_between(k1, s1), edge_type::full);
  EXPECT_EQ(g.edge_type_between(copy, k2), edge_type::full);
  // Left: k1 -> "not waiting" (not in the set), copy -> k2 (a memcpy), k2 -> sum (not in the set).
  ASSERT_EQ(report.left.size(), 3U);
  std::string reasons;
  for (const auto& line : report.lines()) reasons += line + "\n";
  EXPECT_NE(reasons.find("memcpy"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("not in the waiting set"), std::string::npos) << reasons;
  EXPECT_EQ(report.edges, 5U);

  // Again: nothing more to change, the changed edge counted as programmatic already.
  const auto second = conveyor::make_programmatic(g, conveyor::waiting_kernels{}.add(pdl_affine));
  EXPECT_TRUE(second.changed.empty());
  EXPECT_EQ(second.already, 1U);

  x.upload(x0);
  sync_device();
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(z.download(), reference, 1e-5F));
  EXPECT_THROW((void)conveyor::make_programmatic(g, {}, edge_type::full), std::invalid_argument);
}

TEST(Programmatic, PassReachesChildGraphs) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000;
  const int steps = 5;
  const auto x0 = random_floats(n, 709);
  device_array<float> x(x0);
  auto body = build_chain(n, x.get(), steps, edge_type::full);
  conveyor::graph g;
  auto child = g.child(body);
  auto after = g.kernel({child}, cover(n, 128), pdl_affine, n, 1.0F, 1.0F, x.get(), 0LL);
  (void)after;
  const auto report = conveyor::make_programmatic(g, conveyor::waiting_kernels{}.add(pdl_affine));
  EXPECT_EQ(report.changed.size(), static_cast<std::size_t>(steps - 1));
  for (const auto& e : report.changed) EXPECT_NE(e.graph.find("body"), std::string::npos) << e.graph;
  const auto d = conveyor::describe(g);
  ASSERT_EQ(d.nodes[0].bodies.size(), 1U);
  EXPECT_EQ(count_type(d.nodes[0].bodies[0], edge_type::programmatic), static_cast<std::size_t>(steps - 1));
  auto want = host_chain(x0, steps);
  for (auto& v : want) v += 1.0F;
  EXPECT_TRUE(all_near(run(g, x, x0), want, 1e-5F));
}

// ---- priorities -----------------------------------------------------------------------------------------------

TEST(Priority, BuilderAndLaunchRecordThePriorityAttribute) {
  CONVEYOR_REQUIRE_GPU();
  int least = 0;
  int greatest = 0;
  CONVEYOR_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  if (least == greatest) GTEST_SKIP() << "the device has one stream priority";
  const int n = 128;
  device_array<float> x(random_floats(n, 710));
  conveyor::graph g;
  conveyor::launch_config cfg = cover(n);
  cfg.priority = greatest;
  auto k = g.kernel(cfg, scale, n, 2.0F, x.get());
  (void)k;
  const auto d = conveyor::describe(g);
  const std::string expected = "priority " + std::to_string(greatest);
  ASSERT_EQ(d.nodes.size(), 1U);
  EXPECT_NE(std::find(d.nodes[0].attributes.begin(), d.nodes[0].attributes.end(), expected),
            d.nodes[0].attributes.end());

  conveyor::stream s;
  auto captured =
      conveyor::capture(s, [&](const conveyor::stream& cs) { conveyor::launch(cs, cfg, scale, n, 2.0F, x.get()); });
  const auto dc = conveyor::describe(captured);
  ASSERT_EQ(dc.nodes.size(), 1U);
  EXPECT_NE(std::find(dc.nodes[0].attributes.begin(), dc.nodes[0].attributes.end(), expected),
            dc.nodes[0].attributes.end());
}

namespace {

// The stream priority range, and a grid that keeps every SM busy for about 8 waves of blocks (5 µs a block: each
// kernel alone takes tens of microseconds), for the contention tests below.
struct contention {
  int least = 0;       // the lowest priority (cudaDeviceGetStreamPriorityRange)
  int greatest = 0;    // the highest
  unsigned blocks = 0; // blocks per kernel
};

contention priority_contention() {
  contention c;
  CONVEYOR_CHECK(cudaDeviceGetStreamPriorityRange(&c.least, &c.greatest));
  int device = 0;
  int sms = 0;
  CONVEYOR_CHECK(cudaGetDevice(&device));
  CONVEYOR_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  c.blocks = static_cast<unsigned>(sms) * 16U * 8U;
  return c;
}

// Launches `exec` `runs` times on `s`; the number of runs in which the high-priority kernel (finish[1]) finished
// before the low-priority one (finish[0]).
int runs_with_high_first(const conveyor::graph_exec& exec, const conveyor::stream& s,
                         device_array<unsigned long long>& finish, int runs) {
  int high_first = 0;
  for (int r = 0; r < runs; ++r) {
    CONVEYOR_CHECK(cudaMemsetAsync(finish.get(), 0, 2 * sizeof(unsigned long long), s.get()));
    exec.launch(s);
    s.synchronize();
    const auto t = finish.download();
    EXPECT_GT(t[0], 0U);
    EXPECT_GT(t[1], 0U);
    high_first += t[1] < t[0] ? 1 : 0;
  }
  return high_first;
}

} // namespace

// Two root kernels contend for every SM: the low-priority one is added first, the high-priority one second. With
// use_node_priority the high-priority kernel's blocks are scheduled first as SMs free up, so it finishes first.
TEST(Priority, HighPriorityBranchFinishesFirstUnderContention) {
  CONVEYOR_REQUIRE_GPU();
  const contention c = priority_contention();
  if (c.least == c.greatest) GTEST_SKIP() << "the device has one stream priority";
  device_array<unsigned long long> finish(2);
  conveyor::graph g;
  conveyor::launch_config low{dim3(c.blocks), dim3(128)};
  low.priority = c.least;
  conveyor::launch_config high = low;
  high.priority = c.greatest;
  g.kernel(low, stamp_finish, 10'000LL, finish.get() + 0).label("low");
  g.kernel(high, stamp_finish, 10'000LL, finish.get() + 1).label("high");
  auto exec = conveyor::instantiate(g, conveyor::instantiate_flags::use_node_priority);
  conveyor::stream s;
  EXPECT_EQ(runs_with_high_first(exec, s, finish, 5), 5);
}

// The same contention, captured: the high-priority kernel is launched (plain <<<>>>) on a stream created with the
// greatest priority and forked into the capture; CUDA copies each stream's priority into its kernel nodes.
TEST(Priority, CapturedBranchTakesItsStreamsPriorityAndFinishesFirst) {
  CONVEYOR_REQUIRE_GPU();
  const contention c = priority_contention();
  if (c.least == c.greatest) GTEST_SKIP() << "the device has one stream priority";
  device_array<unsigned long long> finish(2);
  conveyor::stream origin(cudaStreamNonBlocking, c.least);
  conveyor::stream urgent(cudaStreamNonBlocking, c.greatest);
  auto g = conveyor::capture(origin, [&](const conveyor::stream& s) {
    conveyor::fork(s, urgent);
    stamp_finish<<<c.blocks, 128, 0, s.get()>>>(10'000LL, finish.get() + 0);
    stamp_finish<<<c.blocks, 128, 0, urgent.get()>>>(10'000LL, finish.get() + 1);
    conveyor::join(s, urgent);
  });
  const auto d = conveyor::describe(g);
  ASSERT_EQ(d.nodes.size(), 2U);
  const std::string urgent_attribute = "priority " + std::to_string(c.greatest);
  EXPECT_NE(std::find(d.nodes[1].attributes.begin(), d.nodes[1].attributes.end(), urgent_attribute),
            d.nodes[1].attributes.end())
      << "captured on a stream of priority " << c.greatest;
  auto exec = conveyor::instantiate(g, conveyor::instantiate_flags::use_node_priority);
  EXPECT_EQ(runs_with_high_first(exec, origin, finish, 5), 5);
}
