// The executable graph's update state on the host (src/execute/update_state.hpp): every row of the transition table
// and of each decision made over it. The GPU tests of test_update, test_lifetime, test_rebind and test_graphed check
// that graph_exec follows these rows; here the rows themselves are checked, with no GPU.
#include "execute/update_state.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace {

using namespace conveyor::detail;

constexpr std::array all_pairings{pairing::structural, pairing::positional, pairing::unchecked, pairing::unpaired};
constexpr std::array all_overlays{overlay::clean, overlay::recorded, overlay::changed};

std::string name(update_state s) {
  static const char* const pairings[] = {"structural", "positional", "unchecked", "unpaired"};
  static const char* const overlays[] = {"clean", "recorded", "changed"};
  return std::string(pairings[static_cast<int>(s.pair)]) + "/" + overlays[static_cast<int>(s.nodes)];
}

TEST(UpdateState, AnExecutableGraphStartsPairedWithItsSourceAndClean) {
  constexpr update_state fresh{};
  static_assert(fresh.pair == pairing::structural && fresh.nodes == overlay::clean);
  EXPECT_EQ(name(fresh), "structural/clean");
}

// Whatever the state, a whole-graph update leaves nothing node by node; its pairing is known only when the graph
// applied is known to have the source's structure.
TEST(UpdateState, AWholeGraphUpdateLeavesTheOverlayCleanAndThePairingUncheckedUnlessKnown) {
  for (pairing p : all_pairings)
    for (overlay o : all_overlays) {
      const update_state s{p, o};
      SCOPED_TRACE(name(s));
      EXPECT_EQ(next(s, transition::whole_graph_update, {.known_structure = true}),
                (update_state{pairing::structural, overlay::clean}));
      EXPECT_EQ(next(s, transition::whole_graph_update, {.known_structure = false}),
                (update_state{pairing::unchecked, overlay::clean}));
      // keeps_records means nothing to a whole-graph update: what was owned is released
      EXPECT_EQ(next(s, transition::whole_graph_update, {.keeps_records = true}),
                (update_state{pairing::unchecked, overlay::clean}));
    }
}

// A per-node update sets nodes by position: paired by position whatever the order of the new graph's dependencies;
// what it owns node by node (the graph applied, callables) stays recorded.
TEST(UpdateState, APerNodeUpdatePairsByPositionAndKeepsWhatItOwns) {
  for (pairing p : all_pairings)
    for (overlay o : all_overlays) {
      const update_state s{p, o};
      SCOPED_TRACE(name(s));
      EXPECT_EQ(next(s, transition::per_node_update, {}), (update_state{pairing::positional, overlay::clean}));
      EXPECT_EQ(next(s, transition::per_node_update, {.keeps_records = true}),
                (update_state{pairing::positional, overlay::recorded}));
      EXPECT_EQ(next(s, transition::per_node_update, {.known_structure = true, .keeps_records = true}),
                (update_state{pairing::structural, overlay::recorded}));
    }
}

TEST(UpdateState, ASetterMarksTheParametersChangedAndARecordNeverHidesThat) {
  for (pairing p : all_pairings) {
    SCOPED_TRACE(name({p, overlay::clean}));
    for (overlay o : all_overlays) EXPECT_EQ(next({p, o}, transition::setter), (update_state{p, overlay::changed}));
    EXPECT_EQ(next({p, overlay::clean}, transition::record), (update_state{p, overlay::recorded}));
    EXPECT_EQ(next({p, overlay::recorded}, transition::record), (update_state{p, overlay::recorded}));
    EXPECT_EQ(next({p, overlay::changed}, transition::record), (update_state{p, overlay::changed}));
  }
}

TEST(UpdateState, APairingReadSettlesOnlyAnUncheckedPairing) {
  for (overlay o : all_overlays) {
    EXPECT_EQ(next({pairing::unchecked, o}, transition::pairing_read, {.same_structure = true}),
              (update_state{pairing::structural, o}));
    EXPECT_EQ(next({pairing::unchecked, o}, transition::pairing_read, {.same_structure = false}),
              (update_state{pairing::unpaired, o}));
    for (pairing p : {pairing::structural, pairing::positional, pairing::unpaired})
      for (bool same : {true, false})
        EXPECT_EQ(next({p, o}, transition::pairing_read, {.same_structure = same}), (update_state{p, o}));
  }
}

TEST(UpdateState, AReinstantiationStartsAfresh) {
  for (pairing p : all_pairings)
    for (overlay o : all_overlays) EXPECT_EQ(next({p, o}, transition::reinstantiation), update_state{});
}

TEST(UpdateState, PositionsMeanSomethingOnlyWhenPairedAndAnUncheckedPairingIsReadFirst) {
  EXPECT_EQ(goes_by_position(pairing::structural), by_position::yes);
  EXPECT_EQ(goes_by_position(pairing::positional), by_position::yes);
  EXPECT_EQ(goes_by_position(pairing::unchecked), by_position::read_first);
  EXPECT_EQ(goes_by_position(pairing::unpaired), by_position::no);
  // CUDA's own whole-graph update pairs by position only a graph of the source's structure.
  EXPECT_TRUE(current_known_structural(pairing::structural));
  EXPECT_FALSE(current_known_structural(pairing::positional));
  EXPECT_FALSE(current_known_structural(pairing::unchecked));
  EXPECT_FALSE(current_known_structural(pairing::unpaired));
}

// ---- the guards of a whole-graph update ----------------------------------------------------------------------------

TEST(UpdateGuards, EveryCombinationOfAllocationsClustersAndPairingIsJudgedInOrder) {
  for (allocations a : {allocations::none, allocations::same, allocations::other})
    for (clusters c : {clusters::none, clusters::same, clusters::other, clusters::unreadable})
      for (bool paired : {true, false}) {
        const guard_facts f{a, c, paired};
        SCOPED_TRACE(testing::Message() << "allocations " << static_cast<int>(a) << " clusters " << static_cast<int>(c)
                                        << " paired " << paired);
        guard_verdict want = guard_verdict::apply;
        if (a == allocations::other) want = guard_verdict::other_allocations;
        else if (c == clusters::unreadable) want = guard_verdict::unreadable_bodies;
        else if (c == clusters::other) want = guard_verdict::cluster_change;
        else if (!paired && c == clusters::same) want = guard_verdict::unpaired_clusters;
        else if (!paired && a == allocations::same) want = guard_verdict::unpaired_allocations;
        EXPECT_EQ(judge_whole_update(f), want);
      }
  // Nothing compared by position: the pairing does not matter (it is not even read).
  EXPECT_EQ(judge_whole_update({allocations::none, clusters::none, false}), guard_verdict::apply);
}

// ---- update_incremental --------------------------------------------------------------------------------------------

TEST(UpdateIncremental, SettersOrAnUnpairedGraphGoStraightToAWholeGraphUpdate) {
  for (pairing p : all_pairings) {
    EXPECT_FALSE(compares({p, overlay::changed}, true));
    const auto plan = route_incremental({p, overlay::changed}, nullptr);
    EXPECT_EQ(plan.route, incremental_route::whole_graph);
    EXPECT_EQ(plan.why, incremental_why::setters_changed);
  }
  for (overlay o : {overlay::clean, overlay::recorded}) {
    EXPECT_FALSE(compares({pairing::unpaired, o}, false));
    EXPECT_TRUE(compares({pairing::structural, o}, true));
    const auto plan = route_incremental({pairing::unpaired, o}, nullptr);
    EXPECT_EQ(plan.route, incremental_route::whole_graph);
    EXPECT_EQ(plan.why, incremental_why::unpaired);
  }
}

TEST(UpdateIncremental, TheComparisonPicksTheCheapestRouteThatAppliesEveryChange) {
  const update_state s{pairing::positional, overlay::recorded};
  struct row {
    comparison_facts c;
    incremental_route route;
    incremental_why why;
  };
  const row rows[] = {
      {{.same_topology = false, .any_change = true},
       incremental_route::reinstantiate,
       incremental_why::topology_changed},
      {{}, incremental_route::nothing, incremental_why::unchanged},
      {{.any_patched = true}, incremental_route::per_node, incremental_why::settable}, // patched nodes set back
      {{.any_change = true}, incremental_route::per_node, incremental_why::settable},
      {{.any_change = true, .whole_graph_only = true}, incremental_route::whole_graph, incremental_why::not_settable},
      {{.any_change = true, .instantiation_only = true, .whole_graph_only = true},
       incremental_route::reinstantiate,
       incremental_why::instantiation_only},
  };
  for (const row& r : rows) {
    const auto plan = route_incremental(s, &r.c);
    EXPECT_EQ(plan.route, r.route) << static_cast<int>(r.why);
    EXPECT_EQ(plan.why, r.why);
  }
}

TEST(UpdateIncremental, ANewInstantiationIsTheLastResortAndNeverForAPinnedGraph) {
  EXPECT_EQ(after_failed_update(false, false), last_resort::refuse);
  EXPECT_EQ(after_failed_update(false, true), last_resort::refuse);
  EXPECT_EQ(after_failed_update(true, false), last_resort::reinstantiate);
  EXPECT_EQ(after_failed_update(true, true), last_resort::refuse_pinned);
}

// ---- update() after CUDA's topology refusal ------------------------------------------------------------------------

TEST(UpdateTopologyRefusal, TheSameDagIsSetNodeByNodeAndEveryOtherCaseKeepsCudasReason) {
  const comparison_facts same{.any_change = true};
  const comparison_facts other{.same_topology = false};
  const comparison_facts blocked{.any_change = true, .whole_graph_only = true};
  for (pairing p : all_pairings) {
    EXPECT_EQ(after_topology_refusal({p, overlay::clean}, false, nullptr), topology_refusal::keep_unpaired);
    EXPECT_EQ(after_topology_refusal({p, overlay::clean}, true, &other), topology_refusal::keep_other_topology);
    EXPECT_EQ(after_topology_refusal({p, overlay::recorded}, true, &blocked), topology_refusal::keep_not_settable);
    EXPECT_EQ(after_topology_refusal({p, overlay::clean}, true, &same), topology_refusal::set_changed);
    EXPECT_EQ(after_topology_refusal({p, overlay::recorded}, true, &same), topology_refusal::set_changed);
    // After per-node setters the executable graph runs neither graph's parameters: every settable node is set.
    EXPECT_EQ(after_topology_refusal({p, overlay::changed}, true, &same), topology_refusal::set_every_settable);
  }
}

// ---- per-node setters ----------------------------------------------------------------------------------------------

TEST(SetterTarget, ANodeLeadsToItselfByPositionOrNowhereAsThePairingAllows) {
  for (bool stepping : {false, true})
    for (pairing p : all_pairings) {
      SCOPED_TRACE(testing::Message() << name({p, overlay::clean}) << (stepping ? " stepping" : ""));
      const by_position pos = goes_by_position(p);
      const setter_target when_needed = pos == by_position::yes          ? setter_target::itself
                                        : pos == by_position::read_first ? setter_target::read_first
                                                                         : setter_target::refuse;
      // A node of the source while it is still current, or of an older graph: itself, unless stepping needs positions.
      for (node_owner o : {node_owner::source, node_owner::other})
        EXPECT_EQ(target_of(o, p, stepping), stepping ? when_needed : setter_target::itself);
      // A node of the source after an update applied another graph: only where positions pair.
      EXPECT_EQ(target_of(node_owner::replaced_source, p, stepping), when_needed);
      // A node of the graph applied: the source's node at its position.
      EXPECT_EQ(target_of(node_owner::current, p, stepping),
                when_needed == setter_target::itself ? setter_target::by_position : when_needed);
    }
}

TEST(LaunchHistory, TheFirstLaunchIsRecordedOnceAgainstTheUploadsBeforeIt) {
  EXPECT_EQ(after_launch(first_launch::not_yet, 0), first_launch::before_upload);
  EXPECT_EQ(after_launch(first_launch::not_yet, 1), first_launch::after_upload);
  EXPECT_EQ(after_launch(first_launch::not_yet, 7), first_launch::after_upload);
  for (first_launch f : {first_launch::after_upload, first_launch::before_upload, first_launch::at_instantiation})
    for (std::uint32_t uploads : {0U, 3U}) EXPECT_EQ(after_launch(f, uploads), f) << static_cast<int>(f);
}

} // namespace
