// Host-only tests of `conveyor bench`'s reports: the JSON schema, the Markdown tables and number formats, the plan,
// and the summary of Google Benchmark runs, all on hand-made records (no GPU needed).
#include "bench/capture_checks.hpp"
#include "bench/collect.hpp"
#include "bench/graph_files.hpp"
#include "bench/graph_memory.hpp"
#include "bench/graphed_overhead.hpp"
#include "bench/graphed.hpp"
#include "bench/markdown.hpp"
#include "bench/plan.hpp"
#include "bench/profile_overhead.hpp"
#include "bench/report.hpp"
#include "bench/report_json.hpp"
#include "bench/report_markdown.hpp"
#include "bench/saved_report.hpp"
#include "bench/statistics.hpp"
#include "bench/study.hpp"
#include "bench/update_growth.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace conveyor::bench;
using nlohmann::json;

result_record make(bench_id id, std::map<std::string, summary> metrics, std::string error = {}) {
  result_record r;
  r.name = bench_name(id);
  r.id = std::move(id);
  r.iterations = 100;
  r.repetitions = error.empty() ? 5 : 0;
  r.metrics = std::move(metrics);
  r.error = std::move(error);
  return r;
}

bench_report sample_report() {
  bench_report report;
  environment& e = report.env;
  e.gpu_name = "NVIDIA Test GPU";
  e.compute_major = 9;
  e.compute_minor = 0;
  e.sm_count = 132;
  e.memory_bytes = 150ULL << 30;
  e.l2_bytes = 50ULL << 20;
  e.pci_bus_id = "0000:19:00.0";
  e.driver_version = 13000;
  e.runtime_version = 13000;
  e.driver_release = "580.00.00";
  e.peak_sm_mhz = 1980;
  e.peak_memory_mhz = 3201;
  e.clocks_start = {true, 345, 3201, 1980, 3201, 31, 1};
  e.clocks_end = {true, 1980, 3201, 1980, 3201, 40, 0};
  e.clocks_during = {12, 1755, 1980};
  e.host_name = "host";
  e.host_cpus = 16;
  e.cpu_scaling = "disabled";
  e.conveyor_version = "0.1.0";
  e.started_utc = "2026-01-01T00:00:00Z";
  run_settings& s = report.settings;
  s.quick = true;
  s.repetitions = 3;
  s.target_ms = 10.0;
  s.sizes = {1, 10, 100};
  s.rotation_sets = 4;
  s.min_pairs = 4;
  s.interleaved = true;
  s.elapsed_s = 42.0;

  auto& r = report.results;
  r.push_back(make({"launch", "chain", "sync", "cuda", 100, 0},
                   {{"wall_us_per_kernel", {9.0, 8.9, 9.2}}, {"host_us_per_call", {2.5, 2.4, 2.6}}}));
  r.push_back(make({"launch", "chain", "stream", "cuda", 100, 0},
                   {{"wall_us_per_kernel", {3.6, 3.5, 3.7}}, {"host_us_per_call", {2.2, 2.1, 2.3}}}));
  r.push_back(make({"launch", "chain", "graph", "conveyor", 100, 0}, {{"wall_us_per_kernel", {0.75, 0.74, 0.77}},
                                                                      {"host_us_per_call", {4.0, 3.9, 4.4}},
                                                                      {"iteration_us", {75.0, 74.0, 77.0}}}));
  r.push_back(make({"launch", "chain", "graph", "raw", 100, 0},
                   {{"wall_us_per_kernel", {0.78, 0.76, 0.8}}, {"host_us_per_call", {4.0, 3.8, 4.1}}}));
  r.push_back(make({"launch", "fork_join", "sync", "cuda", 100, 0}, {}, "cudaErrorLaunchFailure | boom"));
  r.push_back(make({"build", "chain", "explicit", "conveyor", 100, 0},
                   {{"us_per_node", {5.5, 5.0, 6.0}}, {"build_us_per_node", {1.2, 1.1, 1.3}}}));
  r.push_back(make({"paired", "chain", "replay", "conveyor_vs_raw", 100, 0},
                   {{"conveyor_wall_us_per_kernel", {0.76, 0.75, 0.8}},
                    {"raw_wall_us_per_kernel", {0.75, 0.74, 0.79}},
                    {"wall_ratio", {1.0042, 0.9951, 1.0123}},
                    {"host_ratio", {1.01, 0.98, 1.03}}}));
  r.push_back(make({"paired", "fork_join", "explicit", "conveyor_vs_raw", 100, 0},
                   {{"conveyor_us_per_node", {3.1, 3.0, 3.3}},
                    {"raw_us_per_node", {3.0, 2.9, 3.2}},
                    {"ratio", {1.021, 1.0, 1.05}},
                    {"build_ratio", {1.05, 1.01, 1.1}},
                    {"instantiate_ratio", {0.998, 0.97, 1.02}}}));
  r.push_back(make(
      {"paired", "chain", "setters", "conveyor_vs_raw", 100, 10},
      {{"conveyor_update_us", {4.0, 3.9, 4.2}}, {"raw_update_us", {4.1, 4.0, 4.3}}, {"ratio", {0.976, 0.95, 1.0}}}));
  r.push_back(make({"first_launch", "chain", "upload", "conveyor", 100, 0},
                   {{"upload_us", {40.0, 39.0, 41.0}}, {"first_launch_wall_us", {90.0, 88.0, 95.0}}}));
  r.push_back(make({"update", "chain", "setters", "conveyor", 100, 10},
                   {{"update_us", {6.0, 5.5, 7.0}}, {"launch_after_wall_us", {80.0, 79.0, 85.0}}}));
  r.push_back(make({"update", "chain", "whole", "raw", 100, 100}, {{"update_us", {30.0, 29.0, 33.0}}}));
  r.push_back(make({"memory", "chain", "instantiate_upload", "conveyor", 100, 0},
                   {{"bytes_per_graph", {1536.0, 1024.0, 2048.0}},
                    {"bytes_per_node", {15.36, 10.24, 20.48}},
                    {"copies", {100.0, 100.0, 100.0}}}));
  return report;
}

// Lines of `text` that begin with '|', split into blocks of consecutive table lines.
std::vector<std::vector<std::string>> table_blocks(const std::string& text) {
  std::vector<std::vector<std::string>> blocks;
  std::istringstream in(text);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    const bool table_line = !line.empty() && line.front() == '|';
    if (table_line && !in_table) blocks.emplace_back();
    if (table_line) blocks.back().push_back(line);
    in_table = table_line;
  }
  return blocks;
}

std::size_t unescaped_pipes(const std::string& line) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < line.size(); ++i)
    if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++count;
  return count;
}

// `text` with every run of spaces shortened to one, so that padded table rows can be matched.
std::string squeeze(const std::string& text) {
  std::string out;
  for (const char ch : text)
    if (ch != ' ' || out.empty() || out.back() != ' ') out += ch;
  return out;
}

std::size_t code_points(const std::string& text) {
  std::size_t n = 0;
  for (const char ch : text)
    if ((static_cast<unsigned char>(ch) & 0xC0U) != 0x80U) ++n;
  return n;
}

// ---- Markdown tables and number formats ------------------------------------------------------------------------

TEST(MarkdownTable, PadsAndAlignsColumns) {
  const std::string table = markdown_table({"N", "name"}, {{"1", "a"}, {"100", "bcd"}}, "rl");
  EXPECT_EQ(table, "|   N | name |\n"
                   "| --: | :--- |\n"
                   "|   1 | a    |\n"
                   "| 100 | bcd  |\n");
}

TEST(MarkdownTable, EscapesPipesAndCountsUtf8AsOneColumn) {
  const std::string table = markdown_table({"µs", "x"}, {{"a|b", "line\nbreak"}, {"9.01 [8.95–9.20]", "—"}}, "rr");
  EXPECT_NE(table.find("a\\|b"), std::string::npos);
  EXPECT_NE(table.find("line break"), std::string::npos);
  std::istringstream in(table);
  std::string line;
  std::set<std::size_t> widths;
  while (std::getline(in, line)) {
    EXPECT_EQ(unescaped_pipes(line), 3U) << line;
    widths.insert(code_points(line)); // the escaped cell is padded as written
  }
  EXPECT_EQ(widths.size(), 1U) << table; // every line equally wide on screen
}

TEST(MarkdownTable, RejectsMismatchedShapes) {
  EXPECT_THROW((void)markdown_table({"a", "b"}, {{"1"}}, "rr"), std::invalid_argument);
  EXPECT_THROW((void)markdown_table({"a", "b"}, {}, "r"), std::invalid_argument);
  EXPECT_THROW((void)markdown_table({"a"}, {}, "c"), std::invalid_argument);
  EXPECT_THROW((void)markdown_table({}, {}, ""), std::invalid_argument);
}

TEST(Format, NumbersKeepThreeSignificantPlacesOrSo) {
  EXPECT_EQ(format_number(0.0), "0");
  EXPECT_EQ(format_number(0.7564), "0.756");
  EXPECT_EQ(format_number(3.14159), "3.14");
  EXPECT_EQ(format_number(12.345), "12.3");
  EXPECT_EQ(format_number(123.4), "123");
  EXPECT_EQ(format_number(12345.6), "12346");
  EXPECT_EQ(format_number(-2.5), "-2.50");
  EXPECT_EQ(format_number(std::numeric_limits<double>::quiet_NaN()), "—");
  EXPECT_EQ(format_number(std::numeric_limits<double>::infinity()), "—");
}

TEST(GraphMemory, TablesGivePerGraphPerNodeAndWhatTheSharedPoolSaves) {
  conveyor::bench::graph_memory_result r;
  r.executables = {{10, 100, 4.0 * 1048576}, {1, 10, 0}};
  r.pools = {{10, 64u << 20, 640.0 * 1048576, 64.0 * 1048576, 64.0 * 1048576, 640.0 * 1048576, 0}};
  const std::string md = conveyor::bench::format_graph_memory(r);
  EXPECT_NE(md.find("4.0 MiB | 409.6 KiB |  4.1 KiB |"), std::string::npos) << md; // total, per graph, per node
  EXPECT_NE(md.find("0 B |       0 B |      0 B |"), std::string::npos) << md;
  EXPECT_NE(md.find("640.0 MiB |             64.0 MiB |"), std::string::npos) << md;
  EXPECT_NE(md.find(" 10.0 |\n"), std::string::npos) << md; // private ÷ shared, the last column
  EXPECT_NE(md.find("### Graph allocations: one shared pool against private buffers"), std::string::npos) << md;
}

TEST(GraphedOverhead, TableShowsBothRowsAndTheDifference) {
  conveyor::bench::graphed_overhead_result r{1000, 21, 1.25, 1.2, 1.9, 1.5, 1.4, 2.5};
  EXPECT_DOUBLE_EQ(r.overhead_us(), 0.25);
  const std::string md = conveyor::bench::format_graphed_overhead(r);
  EXPECT_NE(md.find("1000 calls per repetition, 21 repetitions"), std::string::npos) << md;
  EXPECT_NE(md.find("| `graph_exec::launch`"), std::string::npos) << md;
  EXPECT_NE(md.find("| `graphed::operator()`"), std::string::npos) << md;
  EXPECT_NE(md.find("**0.250 µs per call**"), std::string::npos) << md;
  EXPECT_NE(md.find("1.25"), std::string::npos) << md;
}

TEST(Format, GraphedRebindTableGivesAboveReplayPerNodeAndRatioToEager) {
  conveyor::bench::rebind_row eager;
  eager.name = "graphed/eager/N=1000";
  eager.what = "eager";
  eager.nodes = 1000;
  eager.us = 4000;
  eager.eager_us = 4000;
  conveyor::bench::rebind_row all = eager;
  all.name = "graphed/pointer-all-nodes/N=1000";
  all.reached = 1000;
  all.us = 1300;
  all.call_us = 300;       // in the call
  all.replay_call_us = 50; // replay's
  all.rebinds = 21;
  const std::string md = conveyor::bench::format_graphed_rebind({eager, all});
  EXPECT_NE(md.find("| `graphed/pointer-all-nodes/N=1000`"), std::string::npos) << md;
  EXPECT_NE(md.find(" 250 | "), std::string::npos) << md;   // above replay: 300 - 50
  EXPECT_NE(md.find(" 0.250 | "), std::string::npos) << md; // per reached node
  EXPECT_NE(md.find(" 0.325 | "), std::string::npos) << md; // 1300 / 4000
  EXPECT_NE(md.find(" 1.000 | "), std::string::npos) << md; // eager against itself
  conveyor::bench::recapture_cost phases;
  phases.nodes = 10000;
  phases.eager_us = 32000;
  phases.capture_us = 9500;
  phases.checks_us = 120;
  phases.read_us = 4000;
  phases.compare_us = 1000;
  phases.update_us = 5600;
  phases.launch_us = 10900;
  phases.whole_update_us = 1900;
  phases.whole_launch_us = 10600;
  phases.raw_capture_us = 9000;
  phases.raw_update_us = 1500;
  phases.raw_launch_us = 10700;
  phases.raw_all_nodes_us = 24800;
  phases.raw_read_us = 5300;
  phases.unchecked_capture_us = 9280;
  phases.unchecked_update_us = 2000;
  phases.unchecked_launch_us = 10600;
  const std::string cost = conveyor::bench::format_recapture_cost({phases});
  EXPECT_NE(cost.find("| 10000 |"), std::string::npos) << cost;
  EXPECT_NE(cost.find(" 32000 |"), std::string::npos) << cost;
  EXPECT_NE(cost.find(" 600 |"), std::string::npos) << cost;   // set: update less read and compare
  EXPECT_NE(cost.find(" 0.812 |"), std::string::npos) << cost; // per node: (9500 + 5600 + 10900) / 32000 = 0.8125
  EXPECT_NE(cost.find(" 0.688 |"), std::string::npos) << cost; // default: (9500 + 1900 + 10600) / 32000 = 0.6875
  EXPECT_NE(cost.find(" 0.662 |"), std::string::npos) << cost; // raw: (9000 + 1500 + 10700) / 32000 = 0.6625
  EXPECT_NE(cost.find(" 1.038 |"), std::string::npos) << cost; // default ÷ raw: 22000 / 21200 = 1.0377
  EXPECT_NE(cost.find(" 9280 / 2000 / 10600 |"), std::string::npos) << cost; // checks off: the three phases
  EXPECT_NE(cost.find(" 1.032 |"), std::string::npos) << cost; // checks off ÷ raw: 21880 / 21200 = 1.0321
  EXPECT_NE(cost.find(" 0.775 |"), std::string::npos) << cost; // raw, all nodes changed: 24800 / 32000
  EXPECT_NE(cost.find(" 0.400 |"), std::string::npos) << cost; // Conveyor's read a node: 4000 / 10000
  EXPECT_NE(cost.find(" 0.530 |"), std::string::npos) << cost; // the driver's calls a node: 5300 / 10000
  conveyor::bench::prepare_cost p;
  p.buckets = 32;
  p.nodes = 100;
  p.prepare_ms = 64.0;
  p.raw_ms = 51.2;
  p.no_warmup_ms = 52.736;
  p.unwatched_ms = 47.5;
  p.instantiate_ms = {40.0, 21.0, 12.0, 10.0};
  p.background_ms = {30.72, 23.04};
  const std::string prep = conveyor::bench::format_prepare_cost({p});
  EXPECT_NE(prep.find(" 0.45 |"), std::string::npos) << prep; // best in the background / raw: 23.04 / 51.2
  EXPECT_NE(prep.find("|      32 |"), std::string::npos) << prep;
  EXPECT_NE(prep.find(" 2.00 |"), std::string::npos) << prep; // ms per bucket
  EXPECT_NE(prep.find(" 1.25 |"), std::string::npos) << prep; // prepare / raw: 64 / 51.2
  EXPECT_NE(prep.find(" 4.00 |"), std::string::npos) << prep; // 1 thread / 8: 40 / 10
  EXPECT_NE(prep.find(" 1.03 |"), std::string::npos) << prep; // no warm-up / raw: 52.736 / 51.2
  EXPECT_NE(prep.find(" 47.5 |"), std::string::npos) << prep; // unwatched
}

// The first-calls tables: total, median, 90th percentile and largest per variant; block means of ten calls.
TEST(Format, FirstCallsTablesGiveQuantilesAndBlockMeans) {
  conveyor::bench::first_calls_row eager, graphed;
  eager.variant = "eager";
  graphed.variant = "graphed";
  for (int i = 1; i <= 20; ++i) {
    eager.us.push_back(300.0);                        // 20 calls of 300 µs: 6 ms
    graphed.us.push_back(i <= 10 ? 100.0 * i : 25.0); // 100, 200, ..., 1000, then ten of 25
  }
  eager.eager = 20;
  graphed.eager = 3;
  graphed.replays = 17;
  graphed.captures = 2;
  eager.nodes = graphed.nodes = 100;
  eager.buckets = graphed.buckets = 4;
  const std::string t = conveyor::bench::format_first_calls({eager, graphed});
  EXPECT_NE(t.find("the first 20 calls"), std::string::npos) << t;
  EXPECT_NE(t.find("| eager   |     6.00 |"), std::string::npos) << t;
  // graphed: total 5500 + 250 = 5750 µs; sorted: ten of 25, then 100..1000: median (rank 10) 25, 90th (rank 18) 800
  EXPECT_NE(t.find("| graphed |     5.75 |      25.0 |"), std::string::npos) << t;
  EXPECT_NE(t.find(" 800 |"), std::string::npos) << t;
  EXPECT_NE(t.find(" 1000 |"), std::string::npos) << t;
  // block means: calls 1–10 of graphed 550, calls 11–20 25
  EXPECT_NE(t.find("|  1–10 |   300 |     550 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 11–20 |   300 |    25.0 |"), std::string::npos) << t;
  EXPECT_TRUE(conveyor::bench::format_first_calls({}).empty());
}

TEST(Format, ProfileOverheadTableGivesBothRatios) {
  conveyor::bench::profile_overhead_row r;
  r.shape = "graph chain";
  r.nodes = 1000;
  r.off_us = 800;
  r.on_us = 1000;
  r.sampled_us = 820;
  r.records_per_step = 1000;
  r.sampled_records_per_step = 1000;
  r.attributed = 1.0;
  r.utilisation = 0.9;
  const std::string md = conveyor::bench::format_profile_overhead({r});
  EXPECT_NE(md.find("| graph chain | 1000 | 800.0 | 1000.0 | 1.250 | 1.025 | 1000 | 1000 | 100.0% | 90.0% |"),
            std::string::npos)
      << md;
}

TEST(Format, SummaryIsMedianThenRange) { EXPECT_EQ(format_summary({9.01, 8.95, 9.2}), "9.01 [8.95–9.20]"); }

TEST(Format, BytesNearZeroAreZero) {
  EXPECT_EQ(format_bytes(-0.3), "0 B");
  EXPECT_EQ(format_bytes(-2048.0), "-2.0 KiB");
}

TEST(Format, BytesUseBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(12.0 * 1024 * 1024), "12.0 MiB");
  EXPECT_EQ(format_bytes(2.0 * 1024 * 1024 * 1024), "2.0 GiB");
  EXPECT_EQ(format_bytes(-2048), "-2.0 KiB");
}

TEST(Names, CarryEveryFieldOfTheId) {
  EXPECT_EQ(bench_name({"launch", "chain", "graph", "conveyor", 1000, 0}), "launch/chain/graph/conveyor/1000");
  EXPECT_EQ(bench_name({"update", "chain", "setters", "raw", 1000, 100}), "update/chain/setters/raw/1000/100");
  EXPECT_EQ(bench_name({"paired", "chain", "setters", "conveyor_vs_raw", 100, 10}),
            "paired/chain/setters/conveyor_vs_raw/100/10");
  EXPECT_EQ(bench_name({"paired", "chain", "replay", "conveyor_vs_raw", 100, 0}),
            "paired/chain/replay/conveyor_vs_raw/100");
  EXPECT_EQ(metric_unit("wall_us_per_kernel"), "us");
  EXPECT_EQ(metric_unit("update_us"), "us");
  EXPECT_EQ(metric_unit("bytes_per_graph"), "bytes");
  EXPECT_EQ(metric_unit("overhead_ratio"), "ratio");
  EXPECT_EQ(metric_unit("copies"), "count");
  EXPECT_EQ(metric_unit("business_usage"), "count"); // whole words only
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
}

// ---- JSON ------------------------------------------------------------------------------------------------------

TEST(Json, FollowsTheSchema) {
  const json j = to_json(sample_report());
  EXPECT_TRUE(schema_problems(j).empty()) << schema_problems(j).front();
  EXPECT_EQ(j.at("schema"), "conveyor-bench/1");
  EXPECT_EQ(j.at("environment").at("gpu").at("name"), "NVIDIA Test GPU");
  EXPECT_EQ(j.at("environment").at("gpu").at("compute_capability"), "9.0");
  EXPECT_EQ(j.at("environment").at("driver").at("cuda_version"), "13.0");
  EXPECT_EQ(j.at("environment").at("driver").at("release"), "580.00.00");
  EXPECT_EQ(j.at("environment").at("clocks").at("start").at("sm_mhz"), 345);
  EXPECT_EQ(j.at("environment").at("clocks").at("during").at("sm_min_mhz"), 1755);
  EXPECT_EQ(j.at("settings").at("sizes"), json({1, 10, 100}));
  const json& results = j.at("results");
  ASSERT_EQ(results.size(), sample_report().results.size());
  const json& first = results.at(0);
  EXPECT_EQ(first.at("name"), "launch/chain/sync/cuda/100");
  EXPECT_EQ(first.at("group"), "launch");
  EXPECT_EQ(first.at("nodes"), 100);
  EXPECT_TRUE(first.at("error").is_null());
  const json& wall = first.at("metrics").at("wall_us_per_kernel");
  EXPECT_EQ(wall.at("unit"), "us");
  EXPECT_DOUBLE_EQ(wall.at("median").get<double>(), 9.0);
  EXPECT_DOUBLE_EQ(wall.at("min").get<double>(), 8.9);
  EXPECT_DOUBLE_EQ(wall.at("max").get<double>(), 9.2);
  EXPECT_EQ(results.at(2).at("metrics").at("iteration_us").at("unit"), "us");
  EXPECT_EQ(results.at(4).at("error"), "cudaErrorLaunchFailure | boom");
  EXPECT_TRUE(results.at(4).at("metrics").empty());
}

TEST(Json, WithoutNvmlClocksAreNull) {
  bench_report r = sample_report();
  r.env.clocks_start = {};
  r.env.driver_release.clear();
  const json j = to_json(r);
  EXPECT_TRUE(j.at("environment").at("clocks").at("start").is_null());
  EXPECT_TRUE(j.at("environment").at("driver").at("release").is_null());
  EXPECT_TRUE(schema_problems(j).empty());
}

TEST(Json, RoundTrips) {
  const bench_report r = sample_report();
  EXPECT_EQ(report_from_json(to_json(r)), r);
  EXPECT_EQ(report_from_json(json::parse(to_json(r).dump(2))), r);
}

TEST(Json, ReadsReportsWrittenBeforePairedBenchmarks) {
  // Reports saved before min_pairs existed (docs/figures/bench/*.json) still conform and read with 0.
  json j = to_json(sample_report());
  j["settings"].erase("min_pairs");
  EXPECT_TRUE(schema_problems(j).empty());
  EXPECT_EQ(report_from_json(j).settings.min_pairs, 0U);
  EXPECT_EQ(to_markdown(report_from_json(j)).find("pairs per paired repetition"), std::string::npos);
}

TEST(Json, LeavesOutMetricsThatAreNotFinite) {
  bench_report r = sample_report();
  r.results.at(0).metrics["broken_us"] = {std::nan(""), 1.0, 2.0};
  const json j = to_json(r);
  EXPECT_FALSE(j.at("results").at(0).at("metrics").contains("broken_us"));
  EXPECT_TRUE(schema_problems(j).empty());
}

TEST(Json, SchemaProblemsAreFound) {
  const json good = to_json(sample_report());
  auto broken = [&](auto&& edit) {
    json j = good;
    edit(j);
    return schema_problems(j);
  };
  EXPECT_FALSE(broken([](json& j) { j["schema"] = "conveyor-bench/0"; }).empty());
  EXPECT_FALSE(broken([](json& j) { j.erase("environment"); }).empty());
  EXPECT_FALSE(broken([](json& j) { j["environment"]["gpu"].erase("name"); }).empty());
  EXPECT_FALSE(broken([](json& j) { j["settings"]["repetitions"] = "five"; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["settings"]["min_pairs"] = -1; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["settings"]["repetitions"] = 1ULL << 40; }).empty()); // read into an int
  EXPECT_FALSE(broken([](json& j) { j["environment"]["host"]["cpus"] = 1ULL << 40; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["environment"]["gpu"]["compute_capability"] = "abc"; }).empty());
  // A name must match the fields it is made of, and no more nodes change than the graph holds.
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["name"] = "launch/chain/sync/cuda/101"; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["topology"] = "fork_join"; }).empty());
  EXPECT_FALSE(broken([](json& j) {
                 for (json& r : j["results"])
                   if (r["group"] == "update") {
                     r["changed"] = 1000;
                     r["name"] = "update/chain/setters/conveyor/100/1000";
                   }
               }).empty());
  EXPECT_FALSE(broken([](json& j) { j["settings"]["sizes"] = json::array({1, -2}); }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["group"] = "warp"; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["api"] = "opencl"; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][1]["name"] = j["results"][0]["name"]; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["metrics"]["wall_us_per_kernel"]["min"] = 10.0; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["metrics"]["wall_us_per_kernel"]["unit"] = "bytes"; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["metrics"]["wall_us_per_kernel"]["median"] = nullptr; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["metrics"] = json::object(); }).empty());
  EXPECT_FALSE(broken([](json& j) { j["results"][0]["error"] = 3; }).empty());
  EXPECT_FALSE(broken([](json& j) { j["environment"]["clocks"]["start"]["sm_mhz"] = -1; }).empty());
  EXPECT_FALSE(schema_problems(json::array()).empty());
  EXPECT_THROW((void)report_from_json(json::object()), std::invalid_argument);
}

// A saved report is read back only when it holds what a GPU and a run can report.
TEST(Json, SchemaRefusesWhatNoGpuOrRunReports) {
  const json good = to_json(sample_report());
  ASSERT_TRUE(schema_problems(good).empty());
  // All the problems found once `edit` is applied, one per line.
  auto problems = [&](auto&& edit) {
    json j = good;
    edit(j);
    std::string all;
    for (const auto& p : schema_problems(j)) all += p + "\n";
    if (!all.empty()) {
      EXPECT_THROW((void)report_from_json(j), std::invalid_argument) << all;
    }
    return all;
  };
  auto result_of = [](json& j, const std::string& group) -> json& {
    for (json& r : j["results"])
      if (r["group"] == group) return r;
    throw std::logic_error("no result of group " + group);
  };
  auto expect_problem = [&](auto&& edit, const std::string& text) {
    const std::string all = problems(edit);
    EXPECT_NE(all.find(text), std::string::npos) << "expected '" << text << "' among:\n" << all;
  };
  // Clocks: 2^40 MHz would not even fit the unsigned they are read into.
  expect_problem([](json& j) { j["environment"]["clocks"]["peak_sm_mhz"] = 1ULL << 40; },
                 "$.environment.clocks.peak_sm_mhz: must be a clock in MHz, an integer in [0, 100000]");
  expect_problem([](json& j) { j["environment"]["clocks"]["start"]["memory_mhz"] = 100001; },
                 "$.environment.clocks.start.memory_mhz: must be a clock in MHz");
  expect_problem([](json& j) { j["environment"]["clocks"]["during"]["sm_min_mhz"] = 1990; },
                 "$.environment.clocks.during: sm_min_mhz 1990 is above sm_max_mhz 1980");
  expect_problem([](json& j) { j["environment"]["clocks"]["end"]["temperature_c"] = 1LL << 40; },
                 "$.environment.clocks.end.temperature_c: must be a temperature in °C, an integer in [-1, 200]");
  expect_problem([](json& j) { j["environment"]["clocks"]["end"]["temperature_c"] = -2; }, "temperature_c");
  EXPECT_EQ(problems([](json& j) { j["environment"]["clocks"]["end"]["temperature_c"] = -1; }), ""); // unknown
  EXPECT_EQ(problems([](json& j) { j["environment"]["clocks"]["peak_sm_mhz"] = 100000; }), "");
  // Compute capability: 1 or 2 digits each side of one dot; sscanf's int overflow is gone.
  for (const char* cc : {"99999999999.1", "9", "9.", ".0", " 9.0", "9.0 ", "-1.0", "9.0.1", "9,0", "123.0"})
    expect_problem([&](json& j) { j["environment"]["gpu"]["compute_capability"] = cc; },
                   fmt::format("$.environment.gpu.compute_capability: '{}' is not major.minor", cc));
  EXPECT_EQ(problems([](json& j) { j["environment"]["gpu"]["compute_capability"] = "12.1"; }), "");
  // Control characters: a GPU name with a line break would end its Markdown list item.
  expect_problem([](json& j) { j["environment"]["gpu"]["name"] = "NVIDIA\nH200"; },
                 "$.environment.gpu.name: must be a string without control characters");
  expect_problem([](json& j) { j["environment"]["host"]["name"] = "a\tb"; }, "$.environment.host.name: must be");
  expect_problem([](json& j) { j["environment"]["driver"]["release"] = "580\r"; }, "$.environment.driver.release");
  expect_problem([](json& j) { j["environment"]["started_utc"] = std::string("2026\x7f"); },
                 "$.environment.started_utc");
  expect_problem([](json& j) { j["settings"]["filter"] = "a\nb"; }, "$.settings.filter");
  EXPECT_EQ(problems([](json& j) { j["results"][4]["error"] = "line one\nline two\tindented"; }), "");
  expect_problem([](json& j) { j["results"][4]["error"] = std::string("bell \x07"); }, "$.results[4].error: must be");
  // Topology, variant and metric names are plain words (they make names, headings and cells).
  expect_problem(
      [](json& j) {
        j["results"][0]["topology"] = "chain\n# heading";
        j["results"][0]["name"] = "launch/chain\n# heading/sync/cuda/100";
      },
      "$.results[0].topology: must be a word of letters, digits, '_' and '-'");
  expect_problem([](json& j) { j["results"][0]["variant"] = "a|b"; }, "$.results[0].variant: must be a word");
  expect_problem(
      [](json& j) { j["results"][0]["metrics"]["x y_us"] = j["results"][0]["metrics"]["wall_us_per_kernel"]; },
      "$.results[0].metrics: the name 'x y_us' is not a word");
  // Negative values: times, ratios, counts and settings cannot be; bytes (a memory difference) can.
  expect_problem(
      [](json& j) {
        j["results"][0]["metrics"]["wall_us_per_kernel"] = {
            {"unit", "us"}, {"median", -1.0}, {"min", -2.0}, {"max", 0.5}};
      },
      "$.results[0].metrics.wall_us_per_kernel.min: -2 is negative; a time cannot be");
  expect_problem([&](json& j) { result_of(j, "paired")["metrics"]["wall_ratio"]["min"] = -0.5; },
                 "is negative; a ratio cannot be");
  expect_problem([&](json& j) { result_of(j, "memory")["metrics"]["copies"]["min"] = -1.0; },
                 "is negative; a count cannot be");
  EXPECT_EQ(problems([&](json& j) { result_of(j, "memory")["metrics"]["bytes_per_graph"]["min"] = -512.0; }), "");
  expect_problem([](json& j) { j["settings"]["target_ms"] = -10.0; },
                 "$.settings.target_ms: must be a finite number > 0");
  expect_problem([](json& j) { j["settings"]["target_ms"] = 0.0; },
                 "$.settings.target_ms: must be a finite number > 0");
  expect_problem([](json& j) { j["settings"]["elapsed_s"] = -1.0; },
                 "$.settings.elapsed_s: must be a finite number >= 0");
  // Counts read into std::int64_t must fit it.
  expect_problem([](json& j) { j["results"][0]["iterations"] = 1ULL << 63; },
                 "$.results[0].iterations: must be a non-negative integer of at most 9223372036854775807");
}

TEST(MarkdownText, EscapesWhatMarkdownOrHtmlWouldActOn) {
  EXPECT_EQ(markdown_text("a_b*c\\d`e<f>g|h~i&j[k]l\nm\tn"), "a\\_b\\*c\\\\d\\`e\\<f\\>g\\|h\\~i\\&j\\[k\\]l m n");
  EXPECT_EQ(markdown_text("NVIDIA H200 (0000:19:00.0)"), "NVIDIA H200 (0000:19:00.0)"); // nothing to escape
  EXPECT_EQ(markdown_code("^launch/chain/"), "`^launch/chain/`");
  EXPECT_EQ(markdown_code("a`b|c"), "``a`b|c``"); // one more backtick than the longest run inside
  EXPECT_EQ(markdown_code("``x"), "``` ``x ```"); // padded where it starts or ends with a backtick
  EXPECT_EQ(markdown_code("a\nb"), "`a b`");
}

TEST(MarkdownTable, EscapesABackslashBeforeAPipeAndControlCharacters) {
  const std::string table = markdown_table({"x", "y"}, {{"a\\|b", "tab\there\x01"}}, "ll");
  EXPECT_NE(table.find("| a\\\\\\|b "), std::string::npos) << table; // a\\\|b: backslash, then the pipe, escaped
  EXPECT_NE(table.find("| tab here  "), std::string::npos) << table;
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    std::size_t pipes = 0; // cell separators: pipes after an even number of backslashes
    for (std::size_t i = 0; i < line.size(); ++i) {
      std::size_t backslashes = 0;
      while (backslashes < i && line[i - 1 - backslashes] == '\\') ++backslashes;
      if (line[i] == '|' && backslashes % 2 == 0) ++pipes;
    }
    EXPECT_EQ(pipes, 3U) << line;
  }
}

TEST(MarkdownReport, EscapesTheReportsTextSoThatEachItemStaysOneLine) {
  bench_report report = sample_report();
  report.env.gpu_name = "Test\nGPU <b>x</b> | y_z";
  report.env.host_name = "h[1](http://x)";
  report.settings.filter = "^a`b|c";
  report.results.at(4).error = "first line\nsecond <i>line</i>";
  const std::string md = to_markdown(report);
  EXPECT_NE(md.find("- **GPU**: Test GPU \\<b\\>x\\</b\\> \\| y\\_z (sm_90, 132 SMs"), std::string::npos) << md;
  EXPECT_NE(md.find("- **Host**: h\\[1\\](http://x), 16 CPUs"), std::string::npos) << md;
  EXPECT_NE(md.find(", filter ``^a`b|c``;"), std::string::npos) << md;
  EXPECT_NE(md.find("- `launch/fork_join/sync/cuda/100`: first line second \\<i\\>line\\</i\\>\n"), std::string::npos)
      << md;
  EXPECT_EQ(md.find("<b>"), std::string::npos) << md;
  EXPECT_EQ(md.find("\nGPU"), std::string::npos) << md;
}

// ---- Markdown report -----------------------------------------------------------------------------------------------

TEST(MarkdownReport, ShowsMachineAndEverySection) {
  const std::string md = to_markdown(sample_report());
  EXPECT_NE(md.find("# Conveyor benchmarks"), std::string::npos);
  EXPECT_NE(md.find("NVIDIA Test GPU (sm_90, 132 SMs"), std::string::npos);
  EXPECT_NE(md.find("CUDA 13.0 (release 580.00.00)"), std::string::npos);
  EXPECT_NE(md.find("SM 1755–1980 MHz over 12 samples"), std::string::npos);
  EXPECT_NE(md.find("- **Command**: `conveyor bench suite --quick`\n"), std::string::npos) << md;
  for (const char* heading :
       {"## 1. Launch cost per kernel", "### chain: wall time per kernel (µs)", "### chain: host time per launch call",
        "## 2. Graph replay: Conveyor against the raw CUDA Runtime API", "### Replay, paired", "## 3. Build costs",
        "### Build + instantiate, paired", "### Per-node setters, paired", "### First launch of a new executable graph",
        "## 4. Update costs", "## 5. Device memory", "## Failures"})
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
}

TEST(MarkdownReport, CellsHoldMedianAndRangeAndRatiosOfMedians) {
  const std::string md = squeeze(to_markdown(sample_report()));
  // Launch, chain: sync, stream, graph, then sync/graph = 9.0/0.75 and stream/graph = 3.6/0.75.
  EXPECT_NE(md.find("| 100 | 9.00 [8.90–9.20] | 3.60 [3.50–3.70] | 0.750 [0.740–0.770] | 12.0x | 4.8x |"),
            std::string::npos)
      << md;
  // Replay: Conveyor 0.75 against raw 0.78 µs per kernel.
  EXPECT_NE(md.find(format_summary({0.78, 0.76, 0.8})), std::string::npos);
  EXPECT_NE(md.find("| 0.962 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.000 |"), std::string::npos) << md; // host: 4.0 / 4.0
  // Paired: both sides, then the ratios with three decimals.
  EXPECT_NE(md.find("| chain | 100 | 0.760 [0.750–0.800] | 0.750 [0.740–0.790] | 1.004 [0.995–1.012] | "
                    "1.010 [0.980–1.030] |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| fork/join (width 4) | explicit | 100 | 3.10 [3.00–3.30] | 3.00 [2.90–3.20] | "
                    "1.021 [1.000–1.050] | 1.050 [1.010–1.100] | 0.998 [0.970–1.020] |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("at least 4 pairs per paired repetition"), std::string::npos) << md;
  EXPECT_NE(md.find("| 100 | 10 (10%) | 4.00 [3.90–4.20] | 4.10 [4.00–4.30] | 0.976 [0.950–1.000] |"),
            std::string::npos)
      << md;
  // Update rows are labelled by how many nodes change.
  EXPECT_NE(md.find("| 100 | 10 (10%) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 100 | 100 (all) |"), std::string::npos) << md;
  // Memory: bytes with units.
  EXPECT_NE(md.find("1.5 KiB [1.0 KiB–2.0 KiB]"), std::string::npos) << md;
  // Failures name the benchmark and keep the message (pipes escaped).
  EXPECT_NE(md.find("- `launch/fork_join/sync/cuda/100`: cudaErrorLaunchFailure \\| boom"), std::string::npos) << md;
}

TEST(MarkdownReport, MissingResultsShowADash) {
  const std::string md = squeeze(to_markdown(sample_report()));
  // fork/join: sync failed, stream and graph never ran.
  EXPECT_NE(md.find("| 100 | — | — | — | — | — |"), std::string::npos) << md;
}

TEST(MarkdownReport, EveryTableHasOneColumnCountAndAnAlignmentRow) {
  const auto blocks = table_blocks(to_markdown(sample_report()));
  ASSERT_GE(blocks.size(), 8U);
  for (const auto& block : blocks) {
    ASSERT_GE(block.size(), 3U) << block.front(); // header, alignment, at least one row
    const std::size_t pipes = unescaped_pipes(block.front());
    for (const auto& line : block) EXPECT_EQ(unescaped_pipes(line), pipes) << line;
    EXPECT_EQ(block[1].find_first_not_of("|-: "), std::string::npos) << block[1];
  }
}

TEST(MarkdownReport, EmptyReportHasOnlyTheHeader) {
  bench_report r = sample_report();
  r.results.clear();
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("# Conveyor benchmarks"), std::string::npos);
  EXPECT_EQ(md.find("## 1."), std::string::npos);
  EXPECT_TRUE(table_blocks(md).empty());
}

// ---- plan -----------------------------------------------------------------------------------------------------------

TEST(Plan, NamesAreUniqueAndMatchTheIds) {
  for (const plan_options& options : {full_plan(), quick_plan()}) {
    const auto cases = plan_cases(options);
    std::set<std::string> names;
    for (const auto& c : cases) {
      EXPECT_TRUE(names.insert(c.name).second) << c.name;
      EXPECT_EQ(c.name, bench_name(c.id));
      EXPECT_GE(c.iterations, 1);
      EXPECT_GE(c.warmup, 0);
      if (c.id.group == "launch" && c.id.variant == "graph")
        EXPECT_GE(c.warmup, static_cast<std::int64_t>(options.rotation_sets)) << c.name;
      if (c.id.group == "paired") { // both orders equally often, and enough pairs for a median
        EXPECT_EQ(c.iterations % 2, 0) << c.name;
        EXPECT_GE(c.iterations, static_cast<std::int64_t>(options.min_pairs)) << c.name;
      }
    }
  }
}

TEST(Plan, CoversEveryMeasurement) {
  const auto cases = plan_cases(full_plan());
  std::set<std::string> names;
  for (const auto& c : cases) names.insert(c.name);
  for (std::size_t n : {1, 10, 100, 1000, 10000})
    for (const char* t : {"chain", "fork_join"}) {
      for (const char* v : {"sync/cuda", "stream/cuda", "graph/conveyor", "graph/raw"})
        EXPECT_TRUE(names.contains(fmt::format("launch/{}/{}/{}", t, v, n)));
      for (const char* v : {"capture/conveyor", "capture/raw", "explicit/conveyor", "explicit/raw"})
        EXPECT_TRUE(names.contains(fmt::format("build/{}/{}/{}", t, v, n)));
      for (const char* v : {"replay", "capture", "explicit"})
        EXPECT_TRUE(names.contains(fmt::format("paired/{}/{}/conveyor_vs_raw/{}", t, v, n)));
      EXPECT_TRUE(names.contains(fmt::format("first_launch/{}/upload/conveyor/{}", t, n)));
      EXPECT_TRUE(names.contains(fmt::format("memory/{}/instantiate_upload/conveyor/{}", t, n)));
    }
  EXPECT_TRUE(names.contains("update/chain/setters/conveyor/1000/1"));
  EXPECT_TRUE(names.contains("update/chain/whole/raw/1000/100"));
  EXPECT_TRUE(names.contains("update/chain/reinstantiate/raw/10000/10000"));
  EXPECT_TRUE(names.contains("paired/chain/setters/conveyor_vs_raw/1000/1"));
  EXPECT_TRUE(names.contains("paired/chain/setters/conveyor_vs_raw/10000/1000"));
  EXPECT_TRUE(names.contains("paired/chain/setters/conveyor_vs_raw/10/10"));
}

TEST(Plan, ChangedCountsAndIndices) {
  EXPECT_EQ(changed_counts(1), (std::vector<std::size_t>{1}));
  EXPECT_EQ(changed_counts(10), (std::vector<std::size_t>{1, 10}));
  EXPECT_EQ(changed_counts(100), (std::vector<std::size_t>{1, 10, 100}));
  EXPECT_EQ(changed_indices(100, 10), (std::vector<std::size_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}));
  EXPECT_EQ(changed_indices(5, 5), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(changed_indices(5, 9).size(), 5U);
  EXPECT_EQ(topology_width("chain", 100), 1U);
  EXPECT_EQ(topology_width("fork_join", 100), 4U);
  EXPECT_EQ(topology_width("fork_join", 2), 2U);
  EXPECT_EQ(memory_copies(1), 500U);
  EXPECT_EQ(memory_copies(300), 67U);
  EXPECT_EQ(memory_copies(10000), 2U);
}

TEST(Plan, EstimatedRunTimesFitTheirBudgets) {
  // Upper-side estimates (about 1.3 times the H200): the full run must take under 5 minutes (390 s estimated), --quick
  // under 1 (78 s); the bounds leave room for a few more cases.
  const auto full = full_plan();
  const auto quick = quick_plan();
  EXPECT_LT(estimate_run_seconds(plan_cases(full), full.repetitions), 340.0);
  EXPECT_LT(estimate_run_seconds(plan_cases(quick), quick.repetitions), 50.0);
}

TEST(Plan, RejectsBadOptions) {
  plan_options o = quick_plan();
  o.sizes.clear();
  EXPECT_THROW((void)plan_cases(o), std::invalid_argument);
  o = quick_plan();
  o.sizes.push_back(0);
  EXPECT_THROW((void)plan_cases(o), std::invalid_argument);
  o = quick_plan();
  o.target_ms = 0.0;
  EXPECT_THROW((void)plan_cases(o), std::invalid_argument);
  o = quick_plan();
  o.min_pairs = 0;
  EXPECT_THROW((void)plan_cases(o), std::invalid_argument);
}

// ---- Google Benchmark runs to records ------------------------------------------------------------------------------

gbench_run iteration_run(const std::string& name, double seconds_total, std::int64_t iterations, double counter,
                         std::int64_t repetitions = 3) {
  gbench_run r;
  r.run_name.function_name = name;
  r.run_type = gbench_run::RT_Iteration;
  r.iterations = iterations;
  r.repetitions = repetitions;
  r.time_unit = benchmark::kMicrosecond;
  r.real_accumulated_time = seconds_total;
  r.counters["wall_us_per_kernel"] = counter;
  return r;
}

gbench_run aggregate_run(const std::string& name, const std::string& statistic, double us, double counter,
                         benchmark::StatisticUnit unit = benchmark::kTime) {
  gbench_run r;
  r.run_name.function_name = name;
  r.run_type = gbench_run::RT_Aggregate;
  r.aggregate_name = statistic;
  r.aggregate_unit = unit;
  r.iterations = 1;
  r.repetitions = 3;
  r.time_unit = benchmark::kMicrosecond;
  r.real_accumulated_time = us * 1e-6;
  r.counters["wall_us_per_kernel"] = counter;
  return r;
}

TEST(Collect, UsesTheMedianMinAndMaxAggregates) {
  const std::string name = "launch/chain/graph/conveyor/100";
  std::vector<gbench_run> runs{iteration_run(name, 0.010, 100, 1.0),
                               iteration_run(name, 0.011, 100, 1.1),
                               iteration_run(name, 0.012, 100, 1.2),
                               aggregate_run(name, "mean", 110.0, 1.1),
                               aggregate_run(name, "median", 110.0, 1.1),
                               aggregate_run(name, "stddev", 10.0, 0.1),
                               aggregate_run(name, "cv", 0.09, 0.09, benchmark::kPercentage),
                               aggregate_run(name, "min", 100.0, 1.0),
                               aggregate_run(name, "max", 120.0, 1.2)};
  const std::map<std::string, bench_id> ids{{name, {"launch", "chain", "graph", "conveyor", 100, 0}}};
  const auto records = summarise_runs(runs, ids);
  ASSERT_EQ(records.size(), 1U);
  const result_record& r = records.front();
  EXPECT_EQ(r.name, name);
  EXPECT_EQ(r.id, ids.at(name));
  EXPECT_EQ(r.repetitions, 3);
  EXPECT_EQ(r.iterations, 100);
  EXPECT_TRUE(r.error.empty());
  EXPECT_NEAR(r.metrics.at("iteration_us").median, 110.0, 1e-9);
  EXPECT_NEAR(r.metrics.at("iteration_us").min, 100.0, 1e-9);
  EXPECT_NEAR(r.metrics.at("iteration_us").max, 120.0, 1e-9);
  EXPECT_EQ(r.metrics.at("wall_us_per_kernel"), (summary{1.1, 1.0, 1.2}));
}

TEST(Collect, FallsBackToTheRepetitionsWithoutAggregates) {
  const std::string name = "memory/chain/instantiate_upload/conveyor/10";
  const auto records = summarise_runs({iteration_run(name, 0.002, 1, 7.0, 1)}, {});
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records.front().id.group, "memory"); // unknown names keep their group
  EXPECT_EQ(records.front().metrics.at("wall_us_per_kernel"), (summary{7.0, 7.0, 7.0}));
  EXPECT_NEAR(records.front().metrics.at("iteration_us").median, 2000.0, 1e-9);

  const auto two = summarise_runs({iteration_run(name, 0.002, 1, 7.0, 2), iteration_run(name, 0.004, 1, 9.0, 2)}, {});
  EXPECT_EQ(two.front().metrics.at("wall_us_per_kernel"), (summary{8.0, 7.0, 9.0}));
}

TEST(Collect, KeepsTheFirstErrorAndTheOrderOfBenchmarks) {
  gbench_run failed = iteration_run("b", 0.0, 0, 0.0);
  failed.error_occurred = true;
  failed.error_message = "cuda_error: cudaErrorIllegalAddress";
  failed.counters.clear();
  const auto records = summarise_runs({iteration_run("a", 0.001, 10, 1.0, 1), failed, failed}, {});
  ASSERT_EQ(records.size(), 2U);
  EXPECT_EQ(records[0].name, "a");
  EXPECT_TRUE(records[0].error.empty());
  EXPECT_EQ(records[1].name, "b");
  EXPECT_EQ(records[1].error, "cuda_error: cudaErrorIllegalAddress");
  EXPECT_TRUE(records[1].metrics.empty());
  EXPECT_EQ(records[1].repetitions, 0);
}

TEST(Collect, StatisticsMinAndMax) {
  EXPECT_DOUBLE_EQ(statistic_min({3.0, 1.0, 2.0}), 1.0);
  EXPECT_DOUBLE_EQ(statistic_max({3.0, 1.0, 2.0}), 3.0);
  EXPECT_DOUBLE_EQ(statistic_min({}), 0.0);
}

} // namespace

TEST(Statistics, MedianIsTheMiddleOrTheMeanOfTheTwoMiddles) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(median({7.0}), 7.0);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(Statistics, SummariseGivesMedianMinAndMax) {
  EXPECT_EQ(summarise({5.0, 1.0, 3.0, 9.0}), (summary{4.0, 1.0, 9.0}));
  const summary none = summarise({});
  EXPECT_TRUE(std::isnan(none.median) && std::isnan(none.min) && std::isnan(none.max));
}

// ---- studies -------------------------------------------------------------------------------------------------------

TEST(Study, CommandLineNamesTheStudyAndItsOwnOptions) {
  const study pdl{"pdl", "help", {{study_option::kind::quick, "fewer"}}, ": caption", nullptr};
  EXPECT_EQ(study_command(pdl, {true, 0}), "conveyor bench pdl --quick");
  EXPECT_EQ(study_command(pdl, {false, 0}), "conveyor bench pdl");
  const study growth{"update-growth", "help", {{study_option::kind::steps, "steps", 10, 100}}, "", nullptr};
  EXPECT_EQ(study_command(growth, {false, 1000}), "conveyor bench update-growth --steps 1000");
  const study plain{"graphed-overhead", "help", {}, "", nullptr};
  EXPECT_EQ(study_command(plain, {true, 7}), "conveyor bench graphed-overhead");
}

TEST(Study, ReportIsTheDeviceThenTheCommandWithItsCaptionThenTheBody) {
  const study pdl{"pdl", "help", {{study_option::kind::quick, "fewer"}}, ": wall µs per node.", nullptr};
  EXPECT_EQ(study_report(pdl, {true, 0}, "GPU 0: H200", "| a |\n"),
            "GPU 0: H200\n\n`conveyor bench pdl --quick`: wall µs per node.\n\n| a |\n");
}

TEST(Study, MeasuredFormatsWhatItMeasured) {
  const auto run = measured([](const study_args& a) { return static_cast<int>(a.steps) * 2; },
                            [](int v) { return fmt::format("<{}>", v); });
  EXPECT_EQ(run({false, 21}), "<42>");
}

TEST(Format, UpdateGrowthTableHasOneRowPerCheckpoint) {
  const std::string table =
      format_update_growth({{100, 290.6, 1, 3.2, 5.82, 14.2}, {200, 290.6, 1, 2.75, 5.39, 15.45}});
  EXPECT_EQ(table, "| updates | resident MiB | callable states alive | build µs/step | update µs | launch µs |\n"
                   "|---:|---:|---:|---:|---:|---:|\n"
                   "| 100 | 290.6 | 1 | 3.20 | 5.82 | 14.20 |\n"
                   "| 200 | 290.6 | 1 | 2.75 | 5.39 | 15.45 |\n");
}

// ---- saved reports -------------------------------------------------------------------------------------------------

namespace {

std::string saved(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("conveyor-test-saved-" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string render_error(const std::string& path) {
  try {
    (void)render_saved_report(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST(SavedReport, RendersWhatToJsonWrote) {
  const bench_report report = sample_report();
  const std::string path = saved("report.json", to_json(report).dump(2));
  EXPECT_EQ(render_saved_report(path), to_markdown(report));
  std::filesystem::remove(path);
}

TEST(SavedReport, NamesTheFileAndTheProblem) {
  EXPECT_EQ(render_error("/dev/zero"), "report '/dev/zero': not a regular file (a device or a pipe)");
  const std::string folder = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(render_error(folder), fmt::format("report '{}': is a folder, not a JSON file", folder));
  const std::string nul = saved("nul.json", std::string("{\0}", 3));
  EXPECT_EQ(render_error(nul), fmt::format("report '{}': not JSON: a NUL byte at offset 1", nul));
  const std::string broken = saved("broken.json", "{\"schema\": 1}");
  EXPECT_NE(render_error(broken).find(fmt::format("report '{}': does not follow the schema: $.schema", broken)),
            std::string::npos)
      << render_error(broken);
  for (const auto& p : {nul, broken}) std::filesystem::remove(p);
}

TEST(GraphFilesTable, RatiosAndPhasesComeFromTheRow) {
  graph_files_result r;
  graph_file_row chain;
  chain.what = "chain of 10 kernels";
  chain.nodes = 10;
  chain.file_bytes = 1850;
  chain.capture_instantiate_ms = 0.5;
  chain.load_instantiate_ms = 2.0;
  chain.registry_load_instantiate_ms = 0.25;
  chain.parse_ms = 0.125;
  chain.kernels_ms = 1.5;
  chain.buffers_ms = 0.0625;
  chain.graphs_ms = 0.0625;
  chain.replay_us = 3.0;
  chain.replay_loaded_us = 3.5;
  graph_file_row train = chain;
  train.what = "train step";
  train.registry_load_instantiate_ms = 0.0;
  train.parse_ms = 0.0; // no phases measured: no row in the second table
  r.rows = {chain, train};
  const std::string t = format_graph_files(r);
  // bytes per node 185; load ÷ capture 4; registry ÷ capture 0.5; instantiate = 2 - 0.125 - 1.5 - 0.0625 * 2 = 0.25.
  EXPECT_NE(t.find(" 185 |"), std::string::npos) << t;
  EXPECT_NE(t.find(" 4.00 |"), std::string::npos) << t;
  EXPECT_NE(t.find(" 0.500 |"), std::string::npos) << t;
  EXPECT_NE(t.find(" 3.00 / 3.50 |"), std::string::npos) << t;
  const auto phases = t.find("| from_bytes");
  ASSERT_NE(phases, std::string::npos) << t;
  const std::string second = t.substr(phases);
  EXPECT_NE(second.find(" 0.250 |"), std::string::npos) << second;
  EXPECT_EQ(second.find("train step"), std::string::npos) << second;
  EXPECT_NE(t.substr(0, phases).find("train step"), std::string::npos) << t;
}

// The capture-checks study's table: the ns a check adds per call come from the row; without the stream watch its
// columns are left out and the reason given.
TEST(CaptureChecksTable, AddedCostPerCallComesFromTheRow) {
  using conveyor::bench::capture_checks_row;
  using conveyor::bench::capture_checks_study;
  using conveyor::bench::format_capture_checks;
  capture_checks_study study;
  study.first_watch_us = 41234.0;
  capture_checks_row row;
  row.calls = "copies";
  row.count = 100;
  row.none_us = 50.0;
  row.defaults_us = 60.0; // 10 µs over 100 copies: 100 ns each
  row.watched_us = 72.5;  // 225 ns each
  study.rows = {row};
  const std::string t = format_capture_checks(study);
  EXPECT_NE(t.find("41234 µs"), std::string::npos) << t;
  EXPECT_NE(t.find("| copies | 100 | 50.0 | 60.0 | 100 | 72.5 | 225 |"), std::string::npos) << t;
  study.watch_unavailable = "cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
  const std::string without = format_capture_checks(study);
  EXPECT_NE(without.find("cannot run here (cuptiSubscribe"), std::string::npos) << without;
  EXPECT_NE(without.find("| copies | 100 | 50.0 | 60.0 | 100 |\n"), std::string::npos) << without;
}
