// Host-only tests: every public call given an empty (moved-from) graph throws std::invalid_argument naming the call,
// before any CUDA call, so that no GPU is needed. A graph adopted from a null handle (no CUDA call either) is the
// graph the state is moved out of; GPU tests move real graphs (tests/gpu).
#include <conveyor/assembly/graph_cache.hpp>
#include <conveyor/debug/step.hpp>
#include <conveyor/define/capture.hpp>
#include <conveyor/define/conditional.hpp>
#include <conveyor/define/graph.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/execute/device_graph.hpp>
#include <conveyor/execute/graph_diff.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/keep/save.hpp>
#include <conveyor/observe/describe.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

#include "support/moved_from.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <utility>

namespace {

using conveyor::graph;

// `moved` is empty (its state moved into `taken`, a graph of a null handle that makes no CUDA call).
struct moved_graph : ::testing::Test {
  graph moved = graph::adopt(nullptr, conveyor::ownership::borrowed);
  graph taken{std::move(moved)};
  conveyor::stream s = conveyor::stream::adopt(nullptr);
};

using EmptyGraph = moved_graph;

TEST_F(EmptyGraph, IsEmptyAfterMoveConstructionAndMoveAssignment) {
  EXPECT_EQ(moved.get(), nullptr);
  graph other = graph::adopt(nullptr, conveyor::ownership::borrowed);
  other = std::move(taken);
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::node_count", (void)taken.node_count());
  EXPECT_REFUSES_MOVED_FROM("conveyor::describe", (void)conveyor::describe(taken));
}

TEST_F(EmptyGraph, BuilderCallsRefuseIt) {
  const conveyor::launch_config cfg{};
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::kernel", (void)moved.add_kernel({}, cfg, nullptr, nullptr));
  int value = 0;
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::memcpy", (void)moved.memcpy(&value, &value, sizeof value));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::memcpy_2d", (void)moved.memcpy_2d(&value, 4, &value, 4, 4, 1));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::memset", (void)moved.memset(&value, 0, 1));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::memset", (void)moved.memset_2d({}, &value, 4, 0, 4, 1, 1));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::mem_alloc", (void)moved.mem_alloc(64));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::mem_free", (void)moved.mem_free(&value));
  bool ran = false;
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::host", (void)moved.host([&] { ran = true; }));
  EXPECT_FALSE(ran);
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::empty", (void)moved.empty());
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeEmpty;
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::add_node", (void)moved.add_node({}, params));
  const auto e = conveyor::event::adopt(nullptr);
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::event_record", (void)moved.event_record(e));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::event_wait", (void)moved.event_wait(e));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::keep_alive", moved.keep_alive(std::make_shared<int>(1)));
}

TEST_F(EmptyGraph, ChildRefusesItAsThisGraphOrAsTheBody) {
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::child: an empty (moved-from) graph", (void)moved.child(taken));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::child: an empty (moved-from) graph (body)", (void)taken.child(moved));
}

TEST_F(EmptyGraph, StructureQueriesRefuseIt) {
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::clone", (void)moved.clone());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::node_count", (void)moved.node_count());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::edge_count", (void)moved.edge_count());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::nodes", (void)moved.nodes());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::root_nodes", (void)moved.root_nodes());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::edges", (void)moved.edges());
  const conveyor::node none;
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::edge_type_between", (void)moved.edge_type_between(none, none));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::set_edge_type",
                            moved.set_edge_type(none, none, conveyor::edge_type::programmatic));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::has_conditional", (void)moved.has_conditional());
  // The calls that do not use the graph still work.
  EXPECT_FALSE(moved.owns(none));
  moved.note_raw_change();
}

TEST_F(EmptyGraph, InstantiationRefusesIt) {
  EXPECT_REFUSES_MOVED_FROM("conveyor::instantiate", (void)conveyor::instantiate(moved));
  EXPECT_REFUSES_MOVED_FROM("conveyor::instantiate_for_device", (void)conveyor::instantiate_for_device(moved, s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::instantiate_for_device", conveyor::device_graph d(moved, s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::device_launch_violations", (void)conveyor::device_launch_violations(moved));
  EXPECT_REFUSES_MOVED_FROM("conveyor::check_device_launchable", conveyor::check_device_launchable(moved));
}

TEST_F(EmptyGraph, DiffNamesWhichGraphIsEmpty) {
  EXPECT_REFUSES_MOVED_FROM("conveyor::diff: an empty (moved-from) graph (before)", (void)conveyor::diff(moved, taken));
  EXPECT_REFUSES_MOVED_FROM("conveyor::diff: an empty (moved-from) graph (after)", (void)conveyor::diff(taken, moved));
}

TEST_F(EmptyGraph, ObservingAndDebuggingCallsRefuseIt) {
  EXPECT_REFUSES_MOVED_FROM("conveyor::describe", (void)conveyor::describe(moved));
  EXPECT_REFUSES_MOVED_FROM("conveyor::to_dot", (void)conveyor::to_dot(moved));
  EXPECT_REFUSES_MOVED_FROM("conveyor::to_json", (void)conveyor::to_json(moved));
  EXPECT_REFUSES_MOVED_FROM("conveyor::step_through", (void)conveyor::step_through(moved, s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::step_order", (void)conveyor::step_order(moved));
}

TEST_F(EmptyGraph, SaveNamesTheGraph) {
  const auto path = std::filesystem::temp_directory_path() / "conveyor-test-empty-graph.cgf";
  EXPECT_REFUSES_MOVED_FROM("conveyor::save: an empty (moved-from) graph (graph 'step')",
                            conveyor::save(path, moved, {}, "step"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_REFUSES_MOVED_FROM("graph 'bucket'", (void)conveyor::to_graph_file({{"bucket", &moved, nullptr}}));
}

TEST_F(EmptyGraph, DefinitionCallsRefuseItBeforeAnythingRuns) {
  bool called = false;
  EXPECT_REFUSES_MOVED_FROM("conveyor::capture_into", (void)conveyor::capture_into(moved, s, [&] { called = true; }));
  EXPECT_FALSE(called) << "the captured code ran";
  EXPECT_REFUSES_MOVED_FROM("conveyor::capture_into", conveyor::capture_session session(moved, s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::make_condition",
                            (void)conveyor::make_condition(moved, 0, conveyor::condition_reset::each_launch));
  EXPECT_REFUSES_MOVED_FROM(
      "conveyor::add_conditional",
      (void)conveyor::add_conditional(moved, {}, conveyor::conditional_kind::if_then, conveyor::condition{}));
  EXPECT_REFUSES_MOVED_FROM("conveyor::make_programmatic",
                            (void)conveyor::make_programmatic(moved, conveyor::waiting_kernels{}));
}

TEST_F(EmptyGraph, GraphCacheRefusesItBeforeCountingTheCall) {
  conveyor::graph_cache cache({});
  const conveyor::call_key key;
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::add", cache.add(key, std::move(moved), s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::add_saved", cache.add_saved(key, std::move(moved), s, true));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::add_and_launch", cache.add_and_launch(key, std::move(moved), s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::add_in_background", cache.add_in_background(key, std::move(moved)));
  EXPECT_EQ(cache.pending_instantiations(), 0U);
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::update_and_launch",
                            cache.update_and_launch(key, std::move(moved), s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::step", cache.step(moved, s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::audit", cache.audit(moved));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph_cache::inspect", cache.inspect(moved, nullptr, 0));
  const auto& stats = cache.statistics();
  EXPECT_EQ(stats.calls, 0U);
  EXPECT_EQ(stats.captures, 0U);
  EXPECT_EQ(stats.audits, 0U);
}

} // namespace
