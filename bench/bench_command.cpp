//! \file bench_command.cpp
//! `conveyor bench`: options, the Google Benchmark run, the JSON and Markdown reports.

#include "bench/bench_command.hpp"

#include "bench/benchmarks.hpp"
#include "bench/collect.hpp"
#include "bench/environment.hpp"
#include "bench/graphed_overhead.hpp"
#include "bench/graphed_rebind.hpp"
#include "bench/faster.hpp"
#include "bench/profile_overhead.hpp"
#include "bench/plan.hpp"
#include "bench/report_json.hpp"
#include "bench/report_markdown.hpp"
#include "bench/update_growth.hpp"
#include "bench/workloads.hpp"

#include "common/file_output.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"

#include <conveyor/error.hpp>
#include <conveyor/runtime/device.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace conveyor::bench;

struct cli_options {
  bool quick = false;
  std::string json;
  std::string markdown;
  std::string filter;
  std::string gbench_json;
  int repetitions = 0; // 0: the plan's default
  double target_ms = 0.0; // 0: the plan's default
  int rotation_sets = 0;  // 0: the plan's default
  int min_pairs = 0;      // 0: the plan's default
  int device = 0;
  bool list = false;
  std::string from_json; // re-render a saved run instead of measuring
  bool graphed_overhead = false;
  std::size_t update_growth = 0; // steps of the update-growth loop; 0: not run
  bool graphed_rebind = false;   // the graphed/ group only
  bool profile_overhead = false; // the profile/ group only
  bool faster = false;           // the faster/ group only (--pdl)
};


//! Writes `text` to `path` atomically (a temporary file in the same folder, then rename: a failed run leaves the
//! previous file, never a half one) and says so on stderr; does nothing for an empty path. The path was checked
//! before the run (check_outputs), so that a bad one fails in a second, not after minutes.
void write_output(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  conveyor::scenarios::write_file_atomically(path, text);
  fmt::print(stderr, "wrote {}\n", path);
}

//! Checks every output path before any work: each can be written, and no two name the same file.
//! \throws std::invalid_argument naming the option, the path and the problem.
void check_outputs(const cli_options& o) {
  conveyor::scenarios::check_output_file("--json", o.json);
  conveyor::scenarios::check_output_file("--markdown", o.markdown);
  conveyor::scenarios::check_output_file("--gbench-json", o.gbench_json);
  conveyor::scenarios::check_distinct_outputs(
      {{"--json", o.json}, {"--markdown", o.markdown}, {"--gbench-json", o.gbench_json}});
}

//! Google Benchmark's command line, built from the subcommand's options.
std::vector<std::string> gbench_arguments(const cli_options& o, int repetitions) {
  std::vector<std::string> args{"conveyor bench", fmt::format("--benchmark_repetitions={}", repetitions),
                                "--benchmark_enable_random_interleaving=true"};
  if (!o.filter.empty()) args.push_back(fmt::format("--benchmark_filter={}", o.filter));
  if (o.list) args.emplace_back("--benchmark_list_tests=true");
  return args;
}

//! The name Google Benchmark matches --benchmark_filter against.
std::string full_name(const bench_case& c) {
  return fmt::format("{}/iterations:{}/manual_time", c.name, c.iterations);
}

//! Whether `filter` selects `c` as Google Benchmark's filter would (POSIX extended regular expression searched in
//! the full name; a leading '-' negates; empty or "all" selects everything).
bool selected(const std::string& filter, const bench_case& c) {
  if (filter.empty() || filter == "all") return true;
  const bool negative = filter.front() == '-';
  const std::regex re(negative ? filter.substr(1) : filter, std::regex::extended);
  return std::regex_search(full_name(c), re) != negative;
}

//! Reads a saved JSON report, checks its schema and writes its Markdown report (no GPU needed).
//! \throws std::runtime_error naming the file when it cannot be read or does not follow the schema.
void render_saved(const cli_options& o) {
  std::error_code ec;
  if (std::filesystem::is_directory(o.from_json, ec))
    throw std::runtime_error(fmt::format("--from-json '{}': is a folder, not a JSON file", o.from_json));
  if (!o.markdown.empty() && std::filesystem::equivalent(o.from_json, o.markdown, ec))
    throw std::runtime_error(fmt::format("--markdown '{}' is the --from-json file itself: it would be overwritten",
                                         o.markdown));
  // A report is a regular file of a few hundred KiB: refuse devices and pipes (/dev/zero would be read for ever)
  // and anything above the limit before reading, and a NUL byte (nlohmann_json takes it for the end of the input).
  constexpr std::uintmax_t max_report_bytes = 64ULL << 20;
  if (std::filesystem::exists(o.from_json, ec) && !std::filesystem::is_regular_file(o.from_json, ec))
    throw std::runtime_error(fmt::format("--from-json '{}': not a regular file (a device or a pipe)", o.from_json));
  if (const auto size = std::filesystem::file_size(o.from_json, ec); !ec && size > max_report_bytes)
    throw std::runtime_error(fmt::format("--from-json '{}': {} bytes, above the {} MiB a report can have",
                                         o.from_json, size, max_report_bytes >> 20));
  std::ifstream in(o.from_json, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("--from-json: cannot read '{}'", o.from_json));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    throw std::runtime_error(fmt::format("--from-json '{}': not JSON: a NUL byte at offset {}", o.from_json, nul));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("--from-json '{}': not JSON: {}", o.from_json, e.what()));
  }
  if (const auto problems = schema_problems(j); !problems.empty())
    throw std::runtime_error(fmt::format("--from-json '{}': does not follow the schema: {}", o.from_json,
                                         problems.front()));
  std::string markdown;
  try {
    markdown = to_markdown(report_from_json(j));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("--from-json '{}': {}", o.from_json, e.what()));
  }
  write_output(o.markdown, markdown);
  fmt::print("{}", markdown);
}

//! Passes `args` to benchmark::Initialize. Google Benchmark keeps argv[0], so the strings live as long as the
//! process.
void initialise_gbench(const std::vector<std::string>& args) {
  static std::vector<std::string> storage;
  static std::vector<char*> argv;
  storage = args;
  argv.clear();
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(storage.size());
  benchmark::Initialize(&argc, argv.data());
  if (benchmark::ReportUnrecognizedArguments(argc, argv.data()))
    throw std::logic_error("conveyor bench: Google Benchmark did not recognise an argument");
}

std::string clock_line(const conveyor::bench::clock_sample& c) {
  if (!c.available) return "current clocks not available (NVML not found)";
  return fmt::format("current clocks: SM {} MHz (max {}), memory {} MHz (max {}), {} °C", c.sm_mhz, c.sm_max_mhz,
                     c.memory_mhz, c.memory_max_mhz, c.temperature_c);
}

void run(const cli_options& o) {
  check_outputs(o);
  if (!o.from_json.empty()) {
    render_saved(o);
    return;
  }
  plan_options plan = o.quick ? quick_plan() : full_plan();
  if (o.repetitions > 0) plan.repetitions = o.repetitions;
  if (o.target_ms > 0.0) plan.target_ms = o.target_ms;
  if (o.rotation_sets > 0) plan.rotation_sets = static_cast<std::size_t>(o.rotation_sets);
  if (o.min_pairs > 0) plan.min_pairs = static_cast<std::size_t>(o.min_pairs);
  const std::vector<bench_case> cases = plan_cases(plan);
  std::map<std::string, bench_id> ids;
  for (const auto& c : cases) ids.emplace(c.name, c.id);

  // The memory benchmarks run first, in a batch of their own, so that no executable graph has been destroyed
  // before they measure (the driver reuses destroyed graphs' memory); the rest follow in a second batch.
  std::vector<bench_case> memory_cases;
  std::vector<bench_case> other_cases;
  for (const auto& c : cases) (c.id.group == "memory" ? memory_cases : other_cases).push_back(c);
  try {
    (void)selected(o.filter, cases.front());
  } catch (const std::regex_error& e) {
    throw CLI::ValidationError("--filter", fmt::format("'{}' is not a regular expression: {}", o.filter, e.what()));
  }
  auto count_selected = [&](const std::vector<bench_case>& batch) {
    return std::count_if(batch.begin(), batch.end(), [&](const bench_case& c) { return selected(o.filter, c); });
  };

  // The slot outlives the registrations (they are cleared before returning).
  static context_slot slot;
  struct registrations {
    registrations() { benchmark::ClearRegisteredBenchmarks(); }
    ~registrations() {
      slot.ctx = nullptr;
      benchmark::ClearRegisteredBenchmarks();
    }
  } registered;
  initialise_gbench(gbench_arguments(o, plan.repetitions));

  if (o.graphed_overhead) {
    if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: --graphed-overhead needs a GPU");
    CONVEYOR_CHECK(cudaSetDevice(o.device));
    const std::string table = format_graphed_overhead(measure_graphed_overhead());
    write_output(o.markdown, fmt::format("{}\n\n{}", conveyor::describe_device(o.device), table));
    fmt::print("{}\n\n{}", conveyor::describe_device(o.device), table);
    return;
  }
  if (o.graphed_rebind) {
    if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: --graphed needs a GPU");
    CONVEYOR_CHECK(cudaSetDevice(o.device));
    const std::vector<std::size_t> sizes = o.quick ? std::vector<std::size_t>{10, 1000, 10000}
                                                   : std::vector<std::size_t>{10, 100, 1000, 10000};
    const std::string table = format_graphed_rebind(measure_graphed_rebind(sizes, o.quick ? 11 : 21)) + "\n" +
                              format_recapture_cost(measure_recapture_cost(sizes, o.quick ? 5 : 11)) + "\n" +
                              format_prepare_cost(measure_prepare_cost({8, 16, 32, 64}));
    const std::string text = fmt::format("{}\n\n`conveyor bench --graphed{}`\n\n{}", conveyor::describe_device(o.device),
                                         o.quick ? " --quick" : "", table);
    write_output(o.markdown, text);
    fmt::print("{}", text);
    return;
  }
  if (o.faster) {
    if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: --pdl needs a GPU");
    CONVEYOR_CHECK(cudaSetDevice(o.device));
    const std::vector<std::size_t> sizes = o.quick ? std::vector<std::size_t>{120, 10002}
                                                   : std::vector<std::size_t>{12, 120, 1002, 10002};
    const std::string table = format_faster(measure_faster(sizes, o.quick ? 5 : 9));
    const std::string text = fmt::format(
        "{}\n\n`conveyor bench --pdl{}`: wall µs per kernel node (a block of steps, host launches and the final "
        "synchronisation included, divided by steps × N; median of blocks alternating between the variants). Every "
        "variant's result was checked first.\n\n{}",
        conveyor::describe_device(o.device), o.quick ? " --quick" : "", table);
    write_output(o.markdown, text);
    fmt::print("{}", text);
    return;
  }
  if (o.profile_overhead) {
    if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: --profile needs a GPU");
    CONVEYOR_CHECK(cudaSetDevice(o.device));
    const std::vector<std::size_t> sizes = o.quick ? std::vector<std::size_t>{100, 10000}
                                                   : std::vector<std::size_t>{10, 100, 1000, 10000};
    const std::string table = format_profile_overhead(measure_profile_overhead(sizes, o.quick ? 4 : 8, 50));
    const std::string text = fmt::format("{}\n\n`conveyor bench --profile{}`: wall µs per step (launches and the "
                                         "stream synchronisation, median of alternating blocks of 50 steps) without "
                                         "and with a conveyor::profile::profiler recording.\n\n{}",
                                         conveyor::describe_device(o.device), o.quick ? " --quick" : "", table);
    write_output(o.markdown, text);
    fmt::print("{}", text);
    return;
  }
  if (o.update_growth > 0) {
    if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: --update-growth needs a GPU");
    CONVEYOR_CHECK(cudaSetDevice(o.device));
    const std::string table = format_update_growth(measure_update_growth(o.update_growth));
    const std::string text = fmt::format("{}\n\n`conveyor bench --update-growth {}`: each step rebuilds the graph (a "
                                         "kernel whose pointer alternates, a host callable holding 4 KiB), calls "
                                         "graph_exec::update and launches it.\n\n{}",
                                         conveyor::describe_device(o.device), o.update_growth, table);
    write_output(o.markdown, text);
    fmt::print("{}", text);
    return;
  }
  if (o.list) {
    if (count_selected(cases) == 0)
      throw std::runtime_error(fmt::format("--filter '{}' matches no benchmark (see --list without --filter)", o.filter));
    register_cases(cases, slot);
    benchmark::ConsoleReporter lister(benchmark::ConsoleReporter::OO_None);
    lister.SetOutputStream(&std::cout);
    lister.SetErrorStream(&std::cerr);
    (void)benchmark::RunSpecifiedBenchmarks(&lister);
    return;
  }

  // Every input check before the GPU is needed.
  if (count_selected(memory_cases) + count_selected(other_cases) == 0)
    throw std::runtime_error(fmt::format("--filter '{}' matches no benchmark (see --list)", o.filter));
  if (!conveyor::has_device())
    throw std::runtime_error("no CUDA device: `conveyor bench` measures GPU launches and needs a GPU "
                             "(`conveyor bench --list` shows what it would run)");
  if (o.device >= conveyor::device_count())
    throw std::runtime_error(fmt::format("--device {}: only {} CUDA device(s) visible", o.device,
                                         conveyor::device_count()));
  CONVEYOR_CHECK(cudaSetDevice(o.device));
  std::ostringstream gbench_text; // Google Benchmark's JSON, written with the other reports at the end

  bench_report report;
  report.env = query_environment(o.device);
  nvml_probe nvml(o.device);
  report.env.driver_release = nvml.driver_release();
  report.env.clocks_start = nvml.sample();
  report.settings.quick = o.quick;
  report.settings.repetitions = plan.repetitions;
  report.settings.target_ms = plan.target_ms;
  report.settings.sizes = plan.sizes;
  report.settings.rotation_sets = plan.rotation_sets;
  report.settings.min_pairs = plan.min_pairs;
  report.settings.filter = o.filter;
  report.settings.interleaved = true;

  fmt::print(stderr, "conveyor bench: {}\n", conveyor::describe_device(o.device));
  fmt::print(stderr, "conveyor bench: driver release {}; {}\n",
             report.env.driver_release.empty() ? "unknown (no NVML)" : report.env.driver_release,
             clock_line(report.env.clocks_start));
  fmt::print(stderr,
             "conveyor bench: {} benchmarks planned, {} repetitions each (interleaved), about {:.0f} s without "
             "--filter (rough estimate)\n",
             cases.size(), plan.repetitions, estimate_run_seconds(cases, plan.repetitions));

  const std::size_t max_nodes = *std::max_element(plan.sizes.begin(), plan.sizes.end());
  bench_context ctx(plan.rotation_sets, max_nodes, report.env.l2_bytes);
  slot.ctx = &ctx;

  collecting_reporter reporter(isatty(fileno(stderr)) != 0 ? benchmark::ConsoleReporter::OO_ColorTabular
                                                           : benchmark::ConsoleReporter::OO_Tabular);
  reporter.SetOutputStream(&std::cerr);
  reporter.SetErrorStream(&std::cerr);
  benchmark::JSONReporter gbench_reporter;
  if (!o.gbench_json.empty()) {
    gbench_reporter.SetOutputStream(&gbench_text);
    gbench_reporter.SetErrorStream(&std::cerr);
    reporter.tee = &gbench_reporter;
  }
  clock_range& during = report.env.clocks_during;
  reporter.on_report = [&] {
    const clock_sample s = nvml.sample();
    if (!s.available) return;
    during.sm_min_mhz = during.samples == 0 ? s.sm_mhz : std::min(during.sm_min_mhz, s.sm_mhz);
    during.sm_max_mhz = during.samples == 0 ? s.sm_mhz : std::max(during.sm_max_mhz, s.sm_mhz);
    ++during.samples;
  };

  const auto start = std::chrono::steady_clock::now();
  std::size_t ran = 0;
  for (const auto* batch : {&memory_cases, &other_cases}) {
    if (count_selected(*batch) == 0) continue;
    benchmark::ClearRegisteredBenchmarks();
    register_cases(*batch, slot);
    ran += benchmark::RunSpecifiedBenchmarks(&reporter);
    ctx.release_kept();
  }
  if (reporter.tee != nullptr) gbench_reporter.Finalize();
  report.settings.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  slot.ctx = nullptr;
  report.env.clocks_end = nvml.sample();
  report.env.host_name = reporter.host_name();
  report.env.host_cpus = reporter.host_cpus();
  report.env.cpu_scaling = reporter.cpu_scaling();
  if (ran == 0) throw std::runtime_error(fmt::format("--filter '{}' matches no benchmark (see --list)", o.filter));
  report.results = summarise_runs(reporter.runs(), ids);
  // Plan order (the memory batch ran first).
  std::map<std::string, std::size_t> order;
  for (std::size_t i = 0; i < cases.size(); ++i) order.emplace(cases[i].name, i);
  std::stable_sort(report.results.begin(), report.results.end(), [&](const result_record& a, const result_record& b) {
    const auto ia = order.find(a.name);
    const auto ib = order.find(b.name);
    return (ia == order.end() ? cases.size() : ia->second) < (ib == order.end() ? cases.size() : ib->second);
  });

  const nlohmann::json j = to_json(report);
  if (const auto problems = schema_problems(j); !problems.empty())
    throw std::logic_error(fmt::format("conveyor bench: the report breaks its own schema: {}", problems.front()));
  const std::string markdown = to_markdown(report);
  write_output(o.json, j.dump(2) + "\n");
  write_output(o.markdown, markdown);
  write_output(o.gbench_json, gbench_text.str());
  std::fflush(stderr);
  fmt::print("{}", markdown);
  std::fflush(stdout);
  fmt::print(stderr, "conveyor bench: {} benchmarks in {:.1f} s\n", report.results.size(), report.settings.elapsed_s);

  const auto failed = std::count_if(report.results.begin(), report.results.end(),
                                    [](const result_record& r) { return !r.error.empty(); });
  if (failed > 0)
    throw std::runtime_error(fmt::format("{} of {} benchmarks failed (listed under Failures in the report)", failed,
                                         report.results.size()));
}

} // namespace

void register_bench_command(CLI::App& app) {
  using conveyor::scenarios::integer_in;
  using conveyor::scenarios::real_in;
  auto opts = std::make_shared<cli_options>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Measure launch, build, update and memory costs of the three execution modes (sync, stream, graph), "
               "Conveyor against the raw CUDA API; print a Markdown report");
  sub->add_flag("--quick", opts->quick, "Fewer sizes (N = 1, 100, 10000) and 3 short repetitions: under a minute");
  sub->add_option("--json", opts->json, "Write the results as JSON (schema conveyor-bench/1) to this file");
  sub->add_option("--markdown", opts->markdown, "Write the Markdown report to this file (also printed on stdout)");
  sub->add_option("--filter", opts->filter,
                  "Run only the benchmarks whose name (group/topology/variant/api/N[/changed]) matches this regular "
                  "expression, e.g. '^launch/chain/'");
  sub->add_option("--repetitions", opts->repetitions, "Repetitions of every benchmark (default 10; --quick: 3)")
      ->check(integer_in(1, 1000));
  sub->add_option("--target-ms", opts->target_ms,
                  "Timed work per repetition, milliseconds (default 50; --quick: 10)")
      ->check(real_in({0.1, 100000.0, false, false, false}));
  sub->add_option("--rotation-sets", opts->rotation_sets,
                  "Buffer sets the iterations of a repetition rotate through (graph modes: one executable graph "
                  "each; default 1)")
      ->check(integer_in(1, 64));
  sub->add_option("--min-pairs", opts->min_pairs,
                  "Least Conveyor/raw pairs per repetition of the paired benchmarks, rounded up to an even number so "
                  "that each order runs equally often (default 8; --quick: 4)")
      ->check(integer_in(1, 10000));
  sub->add_option("--gbench-json", opts->gbench_json, "Also write Google Benchmark's own JSON output to this file");
  sub->add_option("--device", opts->device, "CUDA device ordinal")->check(integer_in(0, 1023))->capture_default_str();
  sub->add_option("--from-json", opts->from_json,
                  "Write the Markdown report of a saved --json file (no GPU needed; with --markdown, to a file)");
  sub->add_flag("--graphed-overhead", opts->graphed_overhead,
                "Only measure the per-call host overhead of conveyor::graphed over a bare graph_exec::launch");
  sub->add_option("--update-growth", opts->update_growth,
                  "Only run the update loop of the seed for this many steps (rebuild, graph_exec::update, launch) and "
                  "report memory, callable states alive and time per step at 10 checkpoints")
      ->check(integer_in(std::size_t{10}, std::size_t{100'000'000}));
  sub->add_flag("--graphed", opts->graphed_rebind,
                "Only run the graphed/ group: a graphed call whose pointer or scalar arguments change (reaching 1 or "
                "all N nodes), patched in place (rebind) against replay, full re-capture and eager, N = 10..10000");
  sub->add_flag("--profile", opts->profile_overhead,
                "Only run the profile/ group: the profiler's cost on a chain, four parallel chains and an eager "
                "stream of N tiny kernels (wall time per step off and on), N = 10..10000");
  sub->add_flag("--pdl", opts->faster,
                "Only run the faster/ group: a chain and fork/join stages of N tiny kernels as a plain graph, with "
                "programmatic edges, relaunched from the device, and both (µs per node), N = 12..10002");
  sub->add_flag("--list", opts->list, "List the benchmark names and exit (needs no GPU)");
  // Each of these runs something other than the measurement and uses only the options listed with it: any other
  // option would be silently ignored, so it is refused (and so is a second one of them).
  const std::vector<std::pair<const char*, std::vector<const char*>>> modes{
      {"--list", {"--quick", "--filter"}},
      {"--from-json", {"--markdown"}},
      {"--graphed-overhead", {"--markdown", "--device"}},
      {"--graphed", {"--quick", "--markdown", "--device"}},
      {"--update-growth", {"--markdown", "--device"}},
      {"--profile", {"--quick", "--markdown", "--device"}},
      {"--pdl", {"--quick", "--markdown", "--device"}},
  };
  for (const auto& [mode, used] : modes) {
    CLI::Option* mode_option = sub->get_option(mode);
    for (const CLI::Option* other : sub->get_options()) {
      const std::string name = other->get_name();
      if (name == mode || name.rfind("--", 0) != 0 || name == "--help" ||
          std::find_if(used.begin(), used.end(), [&](const char* u) { return name == u; }) != used.end())
        continue;
      mode_option->excludes(sub->get_option(name));
    }
  }
  sub->callback([opts] { run(*opts); });
}
