//! \file bench.cpp
//! `conveyor bench`: the subcommands suite, list, render and one per study of the study table; their options,
//! output checks and writes.

#include "bench.hpp"

#include "bench/environment.hpp"
#include "bench/report_json.hpp"
#include "bench/report_markdown.hpp"
#include "bench/saved_report.hpp"
#include "bench/studies.hpp"
#include "bench/suite.hpp"

#include "common/file_output.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/usage_error.hpp"

#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

using namespace conveyor::bench;
using conveyor::scenarios::integer_in;

//! Writes `text` to `path` atomically (a temporary file in the same folder, then rename: a failed run leaves the
//! previous file, never a half one) and says so on stderr; does nothing for an empty path. The path was checked
//! before the run, so that a bad one fails in a second, not after minutes.
void write_output(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  conveyor::scenarios::write_file_atomically(path, text);
  fmt::print(stderr, "wrote {}\n", path);
}

CLI::Option* add_markdown_option(CLI::App& cmd, std::string& path) {
  return cmd.add_option("--markdown", path, "Write the Markdown report to this file (also printed on stdout)");
}

CLI::Option* add_device_option(CLI::App& cmd, int& device) {
  return cmd.add_option("--device", device, "CUDA device ordinal")->check(integer_in(0, 1023))->capture_default_str();
}

// ---- suite and list ----------------------------------------------------------------------------------------------

//! The options of `suite` beyond the suite's own: its output files.
struct suite_command_options {
  suite_options suite;
  std::string json;
  std::string markdown;
  std::string gbench_json;
};

void add_selection_options(CLI::App& cmd, suite_options& o) {
  cmd.add_flag("--quick", o.quick, "Fewer sizes (N = 1, 100, 10000) and 3 short repetitions: under a minute");
  cmd.add_option("--filter", o.filter,
                 "Only the benchmarks whose name (group/topology/variant/api/N[/changed]) matches this regular "
                 "expression, e.g. '^launch/chain/'");
}

void add_plan_options(CLI::App& cmd, suite_options& o) {
  using conveyor::scenarios::real_in;
  cmd.add_option("--repetitions", o.repetitions, "Repetitions of every benchmark (default 10; --quick: 3)")
      ->check(integer_in(1, 1000));
  cmd.add_option("--target-ms", o.target_ms, "Timed work per repetition, milliseconds (default 50; --quick: 10)")
      ->check(real_in({0.1, 100000.0, false, false, false}));
  cmd.add_option("--rotation-sets", o.rotation_sets,
                 "Buffer sets the iterations of a repetition rotate through (graph modes: one executable graph each; "
                 "default 1)")
      ->check(integer_in(1, 64));
  cmd.add_option("--min-pairs", o.min_pairs,
                 "Least Conveyor/raw pairs per repetition of the paired benchmarks, rounded up to an even number so "
                 "that each order runs equally often (default 8; --quick: 4)")
      ->check(integer_in(1, 10000));
}

void run_suite_command(const suite_command_options& o) {
  conveyor::scenarios::check_output_file("--json", o.json);
  conveyor::scenarios::check_output_file("--markdown", o.markdown);
  conveyor::scenarios::check_output_file("--gbench-json", o.gbench_json);
  conveyor::scenarios::check_distinct_outputs(
      {{"--json", o.json}, {"--markdown", o.markdown}, {"--gbench-json", o.gbench_json}});
  const suite_run run = run_suite(o.suite, !o.gbench_json.empty());
  const bench_report& report = run.report;
  const nlohmann::json j = to_json(report);
  if (const auto problems = schema_problems(j); !problems.empty())
    throw std::logic_error(fmt::format("conveyor bench: the report breaks its own schema: {}", problems.front()));
  const std::string markdown = to_markdown(report);
  write_output(o.json, j.dump(2) + "\n");
  write_output(o.markdown, markdown);
  write_output(o.gbench_json, run.gbench_json);
  std::fflush(stderr);
  fmt::print("{}", markdown);
  std::fflush(stdout);
  fmt::print(stderr, "conveyor bench: {} benchmarks in {:.1f} s\n", report.results.size(), report.settings.elapsed_s);
  const auto failed = std::count_if(report.results.begin(), report.results.end(),
                                    [](const result_record& r) { return !r.error.empty(); });
  if (failed > 0)
    throw std::runtime_error(
        fmt::format("{} of {} benchmarks failed (listed under Failures in the report)", failed, report.results.size()));
}

void add_suite_command(CLI::App& bench) {
  auto o = std::make_shared<suite_command_options>();
  CLI::App* cmd = bench.add_subcommand(
      "suite", "Launch, build, update and memory costs of the three execution modes (sync, stream, graph), Conveyor "
               "against the raw CUDA API, on Google Benchmark; print a Markdown report");
  add_selection_options(*cmd, o->suite);
  cmd->add_option("--json", o->json, "Write the results as JSON (schema conveyor-bench/1) to this file");
  add_markdown_option(*cmd, o->markdown);
  add_plan_options(*cmd, o->suite);
  cmd->add_option("--gbench-json", o->gbench_json, "Also write Google Benchmark's own JSON output to this file");
  add_device_option(*cmd, o->suite.device);
  cmd->callback([o] { run_suite_command(*o); });
}

void add_list_command(CLI::App& bench) {
  auto o = std::make_shared<suite_options>();
  CLI::App* cmd = bench.add_subcommand("list", "List the names of the benchmarks `suite` would run (needs no GPU)");
  add_selection_options(*cmd, *o);
  cmd->callback([o] { list_suite(*o); });
}

// ---- render ------------------------------------------------------------------------------------------------------

struct render_options {
  std::string report;
  std::string markdown;
};

void run_render_command(const render_options& o) {
  conveyor::scenarios::check_output_file("--markdown", o.markdown);
  std::error_code ec;
  if (!o.markdown.empty() && std::filesystem::equivalent(o.report, o.markdown, ec))
    throw std::runtime_error(fmt::format("--markdown '{}' is the report itself: it would be overwritten", o.markdown));
  const std::string markdown = render_saved_report(o.report);
  write_output(o.markdown, markdown);
  fmt::print("{}", markdown);
}

void add_render_command(CLI::App& bench) {
  auto o = std::make_shared<render_options>();
  CLI::App* cmd = bench.add_subcommand(
      "render", "Write the Markdown report of a saved `suite --json` file (needs no GPU; with --markdown, to a file)");
  cmd->add_option("report", o->report, "The JSON report (schema conveyor-bench/1)")->required();
  add_markdown_option(*cmd, o->markdown);
  cmd->callback([o] { run_render_command(*o); });
}

// ---- the studies -------------------------------------------------------------------------------------------------

struct study_command_options {
  study_args args;
  std::string markdown;
  int device = 0;
};

void add_study_option(CLI::App& cmd, const study_option& option, study_args& args) {
  switch (option.what) {
  case study_option::kind::quick: cmd.add_flag("--quick", args.quick, std::string(option.help)); break;
  case study_option::kind::steps:
    cmd.add_option("--steps", args.steps, std::string(option.help))
        ->required()
        ->check(integer_in(option.min, option.max));
    break;
  }
}

void run_study_command(const study& s, const study_command_options& o) {
  conveyor::scenarios::check_output_file("--markdown", o.markdown);
  use_device(o.device, study_command(s, o.args));
  const std::string text = study_report(s, o.args, conveyor::describe_device(o.device), s.measure(o.args));
  write_output(o.markdown, text);
  fmt::print("{}", text);
}

void add_study_command(CLI::App& bench, const study& s) {
  auto o = std::make_shared<study_command_options>();
  CLI::App* cmd = bench.add_subcommand(std::string(s.name), std::string(s.help));
  for (const study_option& option : s.options) add_study_option(*cmd, option, o->args);
  add_markdown_option(*cmd, o->markdown);
  add_device_option(*cmd, o->device);
  cmd->callback([&s, o] { run_study_command(s, *o); });
}

} // namespace

void register_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Measure what graphs cost and save: the Google Benchmark suite (launch, build, update and memory "
               "costs of the three execution modes, Conveyor against the raw CUDA API) and the studies");
  add_suite_command(*bench);
  add_list_command(*bench);
  add_render_command(*bench);
  for (const study& s : studies()) add_study_command(*bench, s);
  // Each subcommand's help ends as `conveyor bench --help` does (the program sets that footer after registration).
  for (CLI::App* sub : bench->get_subcommands([](CLI::App*) { return true; }))
    sub->footer([bench] { return bench->get_footer(); });
  bench->require_subcommand(0, 1);
  bench->callback([bench] {
    if (!bench->get_subcommands().empty()) return;
    std::string names;
    for (CLI::App* sub : bench->get_subcommands([](CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    throw conveyor::scenarios::usage_error(
        fmt::format("`conveyor bench` needs a subcommand: {} (`conveyor bench --help` says what each does)", names));
  });
}
