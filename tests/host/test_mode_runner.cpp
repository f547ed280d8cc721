// Host-only tests of what every workload shares to run in its modes (scenarios/common): the mode runner's phases
// and timing on a workload that records its calls (no GPU), the results table and its speedup column, the --mode
// option, the median and FNV-1a.
#include "common/hash.hpp"
#include "common/mode_option.hpp"
#include "common/mode_runner.hpp"
#include "common/results_table.hpp"
#include "common/statistics.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace conveyor::scenarios;

//! A workload of `rounds` rounds of `steps` steps that records every call the runner makes, in order.
class recording_workload final : public workload {
public:
  recording_workload(std::size_t rounds, std::size_t steps) : rounds_(rounds), steps_(steps) {}

  //! A graph step recording its calls into the workload's log.
  class step final : public graph_step {
  public:
    explicit step(recording_workload& w) : w_(w) {}
    bool prologue() override {
      w_.log.push_back("graph prologue");
      return true;
    }
    void launch(std::size_t k) override { w_.log.push_back("launch " + std::to_string(k)); }
    void after_rounds() override { w_.log.push_back("after rounds"); }

  private:
    recording_workload& w_;
  };

  [[nodiscard]] cudaStream_t stream() const override { return nullptr; }
  void reset() override { log.emplace_back("reset"); }
  void warm_up(const launch_ctx& ctx) override {
    log.push_back(std::string("warm up") + (ctx.sync_each ? " sync" : "") + (ctx.programmatic ? " pdl" : ""));
  }
  [[nodiscard]] std::unique_ptr<graph_step> make_graph() override {
    log.emplace_back("make graph");
    return std::make_unique<step>(*this);
  }
  void synchronize() override { log.emplace_back("synchronize"); }
  [[nodiscard]] std::size_t begin_round(std::size_t round) override {
    log.push_back("round " + std::to_string(round));
    return round < rounds_ ? steps_ : 0;
  }
  bool prologue(const launch_ctx&) override {
    log.emplace_back("prologue");
    return go;
  }
  void enqueue(const launch_ctx& ctx, std::size_t k) override {
    log.push_back("enqueue " + std::to_string(k) + (ctx.sync_each ? " sync" : ""));
  }
  bool after_step(std::size_t k) override { return stop_after > 0 && k + 1 == stop_after; }
  [[nodiscard]] std::size_t end_round(std::size_t steps) override {
    log.push_back("end round " + std::to_string(steps));
    return 2 * steps; // two units per step
  }

  std::vector<std::string> log;
  bool go = true;             // what the eager prologue returns
  std::size_t stop_after = 0; // > 0: after_step ends the round after this many steps

private:
  std::size_t rounds_;
  std::size_t steps_;
};

TEST(ModeRunner, EagerModeResetsWarmsUpResetsAgainThenRunsTheRounds) {
  recording_workload w(2, 3);
  run_settings s;
  s.mode = execution_mode::sync;
  const mode_timing t = run_workload(w, s);
  const std::vector<std::string> expected{
      "reset",          "warm up sync",   "synchronize",    "reset",       "synchronize", "round 0", "prologue",
      "enqueue 0 sync", "enqueue 1 sync", "enqueue 2 sync", "synchronize", "end round 3", "round 1", "prologue",
      "enqueue 0 sync", "enqueue 1 sync", "enqueue 2 sync", "synchronize", "end round 3", "round 2"};
  EXPECT_EQ(w.log, expected);
  EXPECT_EQ(t.ms_per_unit.size(), 2U);
  EXPECT_EQ(t.steps, 6U);
  EXPECT_EQ(t.units, 12U);
  EXPECT_GE(t.seconds, 0.0);
  EXPECT_EQ(t.setup_ms, 0.0);
}

TEST(ModeRunner, GraphModeMakesTheGraphOnceThenLaunchesIt) {
  recording_workload w(1, 2);
  run_settings s;
  s.mode = execution_mode::graph;
  s.programmatic = true;
  const mode_timing t = run_workload(w, s);
  const std::vector<std::string> expected{"reset",    "warm up pdl", "make graph",  "synchronize",    "synchronize",
                                          "reset",    "synchronize", "round 0",     "graph prologue", "launch 0",
                                          "launch 1", "synchronize", "end round 2", "round 1",        "after rounds"};
  EXPECT_EQ(w.log, expected);
  EXPECT_TRUE(t.programmatic);
  EXPECT_GE(t.setup_ms, 0.0);
}

TEST(ModeRunner, WarmupRoundsAreRunButNotTimed) {
  recording_workload w(5, 1);
  run_settings s;
  s.mode = execution_mode::stream;
  s.warmup_rounds = 2;
  const mode_timing t = run_workload(w, s);
  EXPECT_EQ(t.ms_per_unit.size(), 3U);
  EXPECT_EQ(t.steps, 3U);
}

TEST(ModeRunner, AfterStepEndsTheRoundAndAFalsePrologueRunsNoStep) {
  recording_workload w(1, 100);
  w.stop_after = 4;
  run_settings s;
  s.mode = execution_mode::stream;
  EXPECT_EQ(run_workload(w, s).steps, 4U);
  recording_workload idle(1, 100);
  idle.go = false;
  const mode_timing t = run_workload(idle, s);
  EXPECT_EQ(t.steps, 0U);
  EXPECT_EQ(t.ms_per_unit, std::vector<double>{0.0}); // a round without units: no time per unit
}

TEST(ModeRunner, GraphModeWithoutAGraphIsRefused) {
  struct eager_only final : workload {
    [[nodiscard]] cudaStream_t stream() const override { return nullptr; }
    void reset() override {}
    void synchronize() override {}
    [[nodiscard]] std::size_t begin_round(std::size_t) override { return 0; }
    void enqueue(const launch_ctx&, std::size_t) override {}
  } w;
  run_settings s;
  s.mode = execution_mode::graph;
  EXPECT_THROW((void)run_workload(w, s), std::logic_error);
}

TEST(RunMode, NamesSpellTheKindThenTheGraph) {
  EXPECT_EQ(to_string(run_mode(execution_mode::sync)), "sync");
  EXPECT_EQ(to_string(run_mode(execution_mode::graph)), "graph");
  EXPECT_EQ(to_string(run_mode(execution_mode::graph, "while")), "graph-while");
  EXPECT_TRUE(is_graph(run_mode(execution_mode::graph, "relaunch")));
  EXPECT_FALSE(is_graph(run_mode(execution_mode::stream)));
  EXPECT_EQ(mode_label(execution_mode::graph, true), "graph+pdl");
  EXPECT_EQ(mode_label(execution_mode::stream, false), "stream");
}

TEST(ResultsTable, AlignsCellsAndComputesTheSpeedupAgainstSyncPerGroup) {
  results_table t({{"mode", 6, true}, {"ms", 5}, results_table::speedup_column()});
  t.add_row(execution_mode::sync, 4.0, {"sync", "4.0"});
  t.add_row(execution_mode::graph, 1.0, {"graph", "1.0"}, "  !");
  t.new_group();
  t.add_row(execution_mode::graph, 2.0, {"graph", "2.0"});
  EXPECT_EQ(t.text(), "mode   |    ms | speedup vs sync\n"
                      "-------+-------+----------------\n"
                      "sync   |   4.0 |           1.00x\n"
                      "graph  |   1.0 |           4.00x  !\n"
                      "graph  |   2.0 |             n/a\n");
  EXPECT_THROW(t.add_row(execution_mode::sync, 1.0, {"too few"}), std::invalid_argument);
  EXPECT_EQ(speedup_vs_sync(3.0, 0.0), "n/a");
  EXPECT_EQ(speedup_vs_sync(std::nullopt, 1.0), "n/a");
}

TEST(ModeOption, OffersTheWorkloadsModesAndAll) {
  mode_option standard;
  CLI::App app;
  standard.add_to(app);
  app.parse(std::vector<std::string>{"graph", "--mode"}); // CLI11 takes the arguments in reverse
  EXPECT_EQ(standard.selected(), std::vector<run_mode>{run_mode(execution_mode::graph)});
  EXPECT_TRUE(standard.selects_graph());
  EXPECT_EQ(standard.graph_modes(), "--mode graph or --mode all");
  EXPECT_THROW(app.parse(std::vector<std::string>{"graph-while", "--mode"}), CLI::ValidationError);

  mode_option solver{{run_mode(execution_mode::sync), run_mode(execution_mode::stream),
                      run_mode(execution_mode::graph, "per-iteration"), run_mode(execution_mode::graph, "while")}};
  EXPECT_EQ(solver.selected().size(), 4U); // "all"
  EXPECT_EQ(solver.graph_modes(), "--mode graph-per-iteration, graph-while or all");
  solver.text = "sync";
  EXPECT_FALSE(solver.selects_graph());
  EXPECT_TRUE(solver.is_only(execution_mode::sync));
  solver.text = "graph";
  EXPECT_THROW((void)solver.selected(), std::invalid_argument);
}

TEST(Median, OfOddEvenAndNoValues) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({}), 0.0);
}

TEST(Hash, Fnv1aOfKnownBytesAndOfValuesInMemoryOrder) {
  EXPECT_EQ(fnv1a({}), fnv1a_basis);
  const std::array<std::byte, 1> a{std::byte{'a'}};
  EXPECT_EQ(fnv1a(a), 0xaf63dc4c8601ec8cULL); // the published FNV-1a 64 of "a"
  const std::vector<float> v{1.0F, -0.0F};
  std::array<std::byte, 8> bytes{};
  std::memcpy(bytes.data(), v.data(), bytes.size());
  EXPECT_EQ(fnv1a_of(std::span<const float>(v)), fnv1a(bytes));
  EXPECT_NE(fnv1a_of(std::span<const float>(v)), fnv1a_of(std::span<const float>(std::vector<float>{1.0F, 0.0F})));
}

} // namespace
