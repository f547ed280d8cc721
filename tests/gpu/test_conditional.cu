// GPU tests of conditional nodes (conveyor/define/conditional.hpp): WHILE, IF, IF/ELSE and SWITCH with conditions
// computed on the device from device data; bodies built with the builder and by capture_into; replays with new
// inputs; reset_each_launch; the kinds refused in bodies; clone/child refusals; describe/to_json nesting.
#include "support/gpu.hpp"
#include "support/moved_from.hpp"
#include "gpu/test_kernels.cuh"

#include <conveyor/conveyor.hpp>
#include <conveyor/define/conditional_device.cuh>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace {

using conveyor::conditional_kind;
using conveyor::test::device_array;

const conveyor::launch_config one_thread{dim3(1), dim3(1)};

// ---- kernels -----------------------------------------------------------------------------------------------------

using conveyor::test::kernels::count_up;        // WHILE body: one step up while below the limit
using conveyor::test::kernels::set_below_limit; // WHILE start: counter < limit

//! Sets the condition to the device value itself (IF: non-zero runs body 0; SWITCH: picks the body).
__global__ void set_from_value(cudaGraphConditionalHandle h, const int* value) {
  conveyor::set_condition(h, static_cast<unsigned>(*value));
}

//! Sets the condition to `value` only when *flag is non-zero (else leaves it as it is).
__global__ void set_if_flag(cudaGraphConditionalHandle h, const int* flag, unsigned value) {
  if (*flag != 0) conveyor::set_condition(h, value);
}

__global__ void store(int* out, int value) { *out = value; }

__global__ void add_one(int* out) { *out += 1; }

//! Nested IF inside a WHILE body: true when the counter is even.
__global__ void set_if_even(cudaGraphConditionalHandle h, const int* counter) {
  conveyor::set_condition(h, (*counter % 2 == 0) ? 1U : 0U);
}

// ---- helpers -----------------------------------------------------------------------------------------------------

//! Skips when the driver is older than what `kind` needs (IF/ELSE and SWITCH: CUDA 12.8).
#define REQUIRE_CONDITIONAL(kind)                                                                                      \
  do {                                                                                                                 \
    int driver_ = 0;                                                                                                   \
    CONVEYOR_CHECK(cudaDriverGetVersion(&driver_));                                                                    \
    if (driver_ < conveyor::required_cuda_version(kind))                                                               \
      GTEST_SKIP() << "the driver supports CUDA " << driver_ << "; this conditional kind needs "                       \
                   << conveyor::required_cuda_version(kind);                                                           \
  } while (0)

int read_one(const device_array<int>& a) { return a.download().at(0); }

void write_one(device_array<int>& a, int v) { a.upload(std::vector<int>{v}); }

// ---- WHILE -------------------------------------------------------------------------------------------------------

TEST(Conditional, WhileCountsUpToALimitReadFromDeviceMemory) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::while_loop);
  device_array<int> counter(1);
  device_array<int> limit(1);
  conveyor::graph g;
  const auto cond =
      conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch); // default 0, reset at each launch
  const auto zero = g.memset(counter.get(), 0, 1).label("counter = 0");
  const auto init = g.kernel({zero}, one_thread, set_below_limit, cond.handle, counter.get(), limit.get());
  auto loop = conveyor::add_conditional(g, {init}, conditional_kind::while_loop, cond);
  ASSERT_EQ(loop.bodies.size(), 1U);
  (void)loop.bodies[0].kernel(one_thread, count_up, cond.handle, counter.get(), limit.get());
  EXPECT_EQ(loop.node.kind(), conveyor::node_kind::conditional);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  for (const int n : {5, 12, 1, 0, 100}) { // replays with different device inputs
    write_one(limit, n);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(counter), n) << "limit " << n;
  }
  write_one(limit, -3); // the condition is false before the first pass: the body never runs
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(counter), 0);
}

TEST(Conditional, WhileBodyBuiltByCaptureInto) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::while_loop);
  device_array<int> counter(1);
  device_array<int> limit(1);
  device_array<int> scratch(4);
  conveyor::stream s;
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto zero = g.memset(counter.get(), 0, 1);
  const auto init = g.kernel({zero}, one_thread, set_below_limit, cond.handle, counter.get(), limit.get());
  auto loop = conveyor::add_conditional(g, {init}, conditional_kind::while_loop, cond);
  const auto frontier = conveyor::capture_into(loop.bodies[0], s, [&](const conveyor::stream& cs) {
    CONVEYOR_CHECK(cudaMemsetAsync(scratch.get(), 0, scratch.bytes(), cs.get())); // a memset node in the body
    count_up<<<1, 1, 0, cs.get()>>>(cond.handle, counter.get(), limit.get());
    conveyor::check_launch("count_up");
  });
  EXPECT_EQ(frontier.size(), 1U);
  EXPECT_EQ(loop.bodies[0].node_count(), 2U);
  auto exec = conveyor::instantiate(g);
  for (const int n : {3, 9}) {
    write_one(limit, n);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(counter), n);
  }
}

TEST(Conditional, NestedIfInsideAWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::while_loop);
  device_array<int> counter(1);
  device_array<int> limit(1);
  device_array<int> evens(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto zero = g.memset(counter.get(), 0, 1);
  const auto zero_evens = g.memset(evens.get(), 0, 1);
  const auto init = g.kernel({zero, zero_evens}, one_thread, set_below_limit, cond.handle, counter.get(), limit.get());
  auto loop = conveyor::add_conditional(g, {init}, conditional_kind::while_loop, cond);
  conveyor::graph& body = loop.bodies[0];
  const auto step = body.kernel(one_thread, count_up, cond.handle, counter.get(), limit.get());
  const auto inner = conveyor::make_condition(body, 0, conveyor::condition_reset::each_launch);
  const auto test = body.kernel({step}, one_thread, set_if_even, inner.handle, counter.get());
  auto branch = conveyor::add_conditional(body, {test}, conditional_kind::if_then, inner);
  (void)branch.bodies[0].kernel(one_thread, add_one, evens.get());

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  write_one(limit, 7); // counter 1..7: even at 2, 4, 6
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(counter), 7);
  EXPECT_EQ(read_one(evens), 3);

  const auto d = conveyor::describe(g);
  const auto stats = conveyor::statistics(d);
  EXPECT_EQ(stats.nested_nodes, 4U); // body: count_up, set_if_even, the IF node; the IF's body: add_one
}

// ---- IF, IF/ELSE, SWITCH -------------------------------------------------------------------------------------------

TEST(Conditional, IfRunsItsBodyOnlyWhenTheDeviceValueIsNonZero) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then);
  device_array<int> value(1);
  device_array<int> out(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto clear = g.memset(out.get(), -1, 1);
  const auto set = g.kernel({clear}, one_thread, set_from_value, cond.handle, value.get());
  auto branch = conveyor::add_conditional(g, {set}, conditional_kind::if_then, cond);
  ASSERT_EQ(branch.bodies.size(), 1U);
  (void)branch.bodies[0].kernel(one_thread, store, out.get(), 42);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  for (const int v : {0, 1, 0, 7}) {
    write_one(value, v);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(out), v != 0 ? 42 : -1) << "value " << v;
  }
}

TEST(Conditional, AMovedFromGraphOrBodyIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then);
  device_array<int> out(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 1, conveyor::condition_reset::each_launch);
  conveyor::graph taken(std::move(g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::make_condition",
                            (void)conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch));
  EXPECT_REFUSES_MOVED_FROM("conveyor::add_conditional",
                            (void)conveyor::add_conditional(g, {}, conditional_kind::if_then, cond));
  // The handle belongs to the graph moved into, which takes the node; a body moved away is refused in turn.
  auto branch = conveyor::add_conditional(taken, {}, conditional_kind::if_then, cond);
  ASSERT_EQ(branch.bodies.size(), 1U);
  conveyor::graph body(std::move(branch.bodies[0]));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::kernel", (void)branch.bodies[0].kernel(one_thread, store, out.get(), 42));
  EXPECT_REFUSES_MOVED_FROM("conveyor::add_conditional",
                            (void)conveyor::add_conditional(branch.bodies[0], {}, conditional_kind::if_then, cond));
  (void)body.kernel(one_thread, store, out.get(), 42);
  write_one(out, -1);
  conveyor::stream s;
  auto exec = conveyor::instantiate(taken);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(out), 42);
}

TEST(Conditional, IfBodyBuiltByCaptureInto) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then);
  device_array<int> value(1);
  device_array<int> out(1);
  conveyor::stream s;
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto clear = g.memset(out.get(), 0, 1);
  const auto set = g.kernel({clear}, one_thread, set_from_value, cond.handle, value.get());
  auto branch = conveyor::add_conditional(g, {set}, conditional_kind::if_then, cond);
  (void)conveyor::capture_into(branch.bodies[0], s, [&](const conveyor::stream& cs) {
    store<<<1, 1, 0, cs.get()>>>(out.get(), 5);
    add_one<<<1, 1, 0, cs.get()>>>(out.get());
    conveyor::check_launch("store, add_one");
  });
  auto exec = conveyor::instantiate(g);
  for (const int v : {3, 0}) {
    write_one(value, v);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(out), v != 0 ? 6 : 0);
  }
}

TEST(Conditional, IfElseRunsTheRightBody) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then_else);
  device_array<int> value(1);
  device_array<int> out(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto clear = g.memset(out.get(), -1, 1);
  const auto set = g.kernel({clear}, one_thread, set_from_value, cond.handle, value.get());
  auto branch = conveyor::add_conditional(g, {set}, conditional_kind::if_then_else, cond);
  ASSERT_EQ(branch.bodies.size(), 2U);
  (void)branch.bodies[0].kernel(one_thread, store, out.get(), 1); // then
  (void)branch.bodies[1].kernel(one_thread, store, out.get(), 2); // else

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  for (const int v : {9, 0, 1, 0}) {
    write_one(value, v);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(out), v != 0 ? 1 : 2) << "value " << v;
  }
}

TEST(Conditional, SwitchPicksOneOfThreeBodiesAndNoneOutOfRange) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::switch_case);
  device_array<int> value(1);
  device_array<int> out(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto clear = g.memset(out.get(), -1, 1);
  const auto set = g.kernel({clear}, one_thread, set_from_value, cond.handle, value.get());
  auto choice = conveyor::add_conditional(g, {set}, conditional_kind::switch_case, cond, 3);
  ASSERT_EQ(choice.bodies.size(), 3U);
  for (int c = 0; c < 3; ++c)
    (void)choice.bodies[static_cast<std::size_t>(c)].kernel(one_thread, store, out.get(), 10 + c);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  for (const int v : {2, 0, 1, 3, 7, 1}) {
    write_one(value, v);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(out), v < 3 ? 10 + v : -1) << "value " << v;
  }
}

// ---- reset_each_launch ---------------------------------------------------------------------------------------------

//! Launches an IF graph (default value 1) twice: first with a kernel setting the condition to 0, then without.
//! Returns how often the body ran in each launch.
std::vector<int> run_twice(bool reset_each_launch) {
  device_array<int> flag(1);
  device_array<int> runs(1);
  write_one(runs, 0);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(
      g, 1, reset_each_launch ? conveyor::condition_reset::each_launch : conveyor::condition_reset::never);
  EXPECT_EQ(cond.default_value, 1U);
  EXPECT_EQ(cond.reset_each_launch, reset_each_launch);
  const auto set = g.kernel(one_thread, set_if_flag, cond.handle, flag.get(), 0U);
  auto branch = conveyor::add_conditional(g, {set}, conditional_kind::if_then, cond);
  (void)branch.bodies[0].kernel(one_thread, add_one, runs.get());
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  std::vector<int> out;
  for (const int f : {1, 0}) {
    write_one(flag, f);
    const int before = read_one(runs);
    exec.launch(s);
    s.synchronize();
    out.push_back(read_one(runs) - before);
  }
  return out;
}

TEST(Conditional, ResetEachLaunchRestoresTheDefaultValue) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then);
  // Launch 1 sets 0: the body does not run. Launch 2 sets nothing: the default 1 is back, the body runs.
  EXPECT_EQ(run_twice(true), (std::vector<int>{0, 1}));
  // Without reset the 0 of launch 1 persists into launch 2.
  EXPECT_EQ(run_twice(false), (std::vector<int>{0, 0}));
}

// ---- error paths ---------------------------------------------------------------------------------------------------

TEST(ConditionalErrors, BodiesRefuseHostEventAndMemoryNodes) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::while_loop);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  auto loop = conveyor::add_conditional(g, {}, conditional_kind::while_loop, cond);
  conveyor::graph& body = loop.bodies[0];
  try {
    (void)body.host([] {});
    ADD_FAILURE() << "a host node was accepted in a conditional body";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("host nodes are not allowed in a conditional node's body"), std::string::npos) << what;
    EXPECT_NE(what.find("kernel, memcpy, memset, empty, child-graph and conditional"), std::string::npos) << what;
  }
  conveyor::event e;
  EXPECT_THROW((void)body.event_record(e), std::invalid_argument);
  EXPECT_THROW((void)body.event_wait(e), std::invalid_argument);
  EXPECT_THROW((void)body.mem_alloc(256), std::invalid_argument);
  EXPECT_EQ(body.node_count(), 0U);
  EXPECT_NO_THROW((void)body.empty());
}

TEST(ConditionalErrors, CloneAndChildAreRefused) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  auto branch = conveyor::add_conditional(g, {}, conditional_kind::if_then, cond);
  (void)branch.bodies[0].empty();
  EXPECT_TRUE(g.has_conditional());
  try {
    (void)g.clone();
    ADD_FAILURE() << "clone() of a graph with a conditional node did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("conditional"), std::string::npos) << e.what();
  }
  conveyor::graph parent;
  try {
    (void)parent.child(g);
    ADD_FAILURE() << "child() of a graph with a conditional node did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("conditional"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parent.node_count(), 0U);
  conveyor::graph plain;
  (void)plain.empty();
  EXPECT_FALSE(plain.has_conditional());
  EXPECT_NO_THROW((void)plain.clone());
}

TEST(ConditionalErrors, BadArgumentsToAddConditional) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::switch_case);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  EXPECT_THROW((void)conveyor::add_conditional(g, {}, conditional_kind::switch_case, cond, 0), std::invalid_argument);
  conveyor::graph other;
  const auto foreign = other.empty();
  EXPECT_THROW((void)conveyor::add_conditional(g, {foreign}, conditional_kind::if_then, cond), std::invalid_argument);
  EXPECT_EQ(g.node_count(), 0U);
}

// ---- export --------------------------------------------------------------------------------------------------------

TEST(ConditionalExport, DescribeAndJsonNestTheBodies) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::if_then_else);
  device_array<int> value(1);
  device_array<int> out(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto set = g.kernel(one_thread, set_from_value, cond.handle, value.get()).label("set condition");
  auto branch = conveyor::add_conditional(g, {set}, conditional_kind::if_then_else, cond);
  branch.node.label("if value");
  (void)branch.bodies[0].kernel(one_thread, store, out.get(), 1).label("then: store 1");
  const auto e1 = branch.bodies[1].kernel(one_thread, store, out.get(), 2).label("else: store 2");
  (void)branch.bodies[1].kernel({e1}, one_thread, add_one, out.get());

  const auto d = conveyor::describe(g);
  ASSERT_EQ(d.nodes.size(), 2U);
  const auto& n = d.nodes[0].kind == conveyor::node_kind::conditional ? d.nodes[0] : d.nodes[1];
  EXPECT_EQ(n.kind, conveyor::node_kind::conditional);
  EXPECT_EQ(n.label, "if value");
  ASSERT_EQ(n.bodies.size(), 2U);
  EXPECT_EQ(n.bodies[0].nodes.size(), 1U);
  EXPECT_EQ(n.bodies[0].nodes[0].label, "then: store 1");
  EXPECT_EQ(n.bodies[1].nodes.size(), 2U);
  EXPECT_EQ(n.bodies[1].edges.size(), 1U);
  EXPECT_EQ(conveyor::statistics(d).nested_nodes, 3U);

  const auto j = nlohmann::json::parse(conveyor::to_json(g));
  bool found = false;
  for (const auto& node : j.at("nodes")) {
    if (node.at("kind") != "conditional") continue;
    found = true;
    ASSERT_TRUE(node.contains("bodies"));
    ASSERT_EQ(node.at("bodies").size(), 2U);
    EXPECT_EQ(node.at("bodies")[0].at("nodes").size(), 1U);
    EXPECT_EQ(node.at("bodies")[0].at("nodes")[0].at("kind"), "kernel");
    EXPECT_EQ(node.at("bodies")[1].at("nodes").size(), 2U);
    EXPECT_EQ(node.at("bodies")[1].at("edges").size(), 1U);
  }
  EXPECT_TRUE(found) << j.dump(2);
  EXPECT_EQ(j.at("statistics").at("nested_nodes"), 3);

  const std::string dot = conveyor::to_dot(g);
  EXPECT_NE(dot.find("body 0 of if value"), std::string::npos) << dot;
  EXPECT_NE(dot.find("body 1 of if value"), std::string::npos) << dot;
}

// CUDA allows one executable graph at a time of a graph holding conditional nodes: a second instantiation is
// refused with the rule, the node and the fix, not CUDA's bare error; after the first is destroyed it succeeds.
TEST(Conditional, ASecondInstantiationNamesTheRuleTheNodeAndTheFix) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_CONDITIONAL(conditional_kind::while_loop);
  device_array<int> counter(1);
  device_array<int> limit(1);
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto zero = g.memset(counter.get(), 0, 1);
  const auto init = g.kernel({zero}, one_thread, set_below_limit, cond.handle, counter.get(), limit.get());
  auto loop = conveyor::add_conditional(g, {init}, conditional_kind::while_loop, cond);
  (void)loop.bodies[0].kernel(one_thread, count_up, cond.handle, counter.get(), limit.get());
  std::optional<conveyor::graph_exec> first(conveyor::instantiate(g));
  try {
    auto second = conveyor::instantiate(g);
    FAIL() << "CUDA accepted a second executable graph of a graph with a conditional node";
  } catch (const conveyor::cuda_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("only one executable graph at a time of a graph that holds conditional nodes"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("node 2"), std::string::npos) << what;
    EXPECT_NE(what.find("graph_exec::update"), std::string::npos) << what;
  }
  first.reset();
  write_one(limit, 4);
  auto again = conveyor::instantiate(g);
  conveyor::stream s;
  again.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(counter), 4);
}

} // namespace
