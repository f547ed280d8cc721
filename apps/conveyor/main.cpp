// The `conveyor` program: CUDA Graph workloads, each a subcommand, each runnable in sync, stream and graph modes.
#include "commands/allreduce.hpp"
#include "commands/bench.hpp"
#include "commands/cavity.hpp"
#include "commands/doctor.hpp"
#include "commands/filter.hpp"
#include "commands/graph.hpp"
#include "commands/solve.hpp"
#include "commands/train.hpp"

#include "common/usage_error.hpp"

#include <conveyor/version.hpp>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <exception>
#include <iostream>
#include <set>
#include <string>
#include <string_view>

namespace {

using conveyor::scenarios::exit_failure;
using conveyor::scenarios::exit_usage;

// "-h" or "--help" among the arguments (before a "--"): help wins over every other check.
bool asks_for_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

// Standard output written and flushed, or the error said (`--version > /dev/full`).
int flushed(int status) {
  std::cout.flush();
  if (!std::cout.fail()) return status;
  fmt::print(stderr, "conveyor: error: cannot write to standard output\n");
  return exit_failure;
}

// The subcommand of `app` named `name`, or null.
CLI::App* subcommand(CLI::App& app, std::string_view name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

// The help of the deepest subcommand named on the command line.
int print_help(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "conveyor";
  for (int i = 1; i < argc; ++i)
    if (CLI::App* sub = subcommand(*at, argv[i])) {
      at = sub;
      if (at->get_parent() != &app) path += " " + at->get_parent()->get_name();
    }
  std::cout << at->help(path);
  return flushed(0);
}

// The first argument when it is neither a command nor an option the program has: named, with what there is.
std::string unknown_first(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return {};
  const std::string a = argv[1];
  if (a == "-h" || a == "--help" || a == "--version") return {};
  std::string commands;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
  if (!a.empty() && a[0] == '-') return fmt::format("unknown option '{}' (options: --help, --version)", a);
  if (subcommand(app, a) == nullptr) return fmt::format("unknown command '{}' (commands: {})", a, commands);
  return {};
}

// Every option that names a file or folder refuses an empty value (which would otherwise read as "not given").
void refuse_empty_paths(CLI::App& app) {
  static const std::set<std::string> path_options{
      "--dot",  "--png", "--csv",      "--out",  "--profile", "--save-graph", "--markdown", "--profile-dir",
      "--json", "--svg", "--document", "--data", "--input",   "--matrix",     "--ghia"};
  const CLI::Validator non_empty(
      [](std::string& value) {
        return value.empty() ? std::string("an empty path; give a file or folder name") : std::string();
      },
      "PATH");
  for (CLI::Option* o : app.get_options())
    for (const auto& name : o->get_lnames())
      if (path_options.contains("--" + name)) o->check(non_empty);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_paths(*sub);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Conveyor: CUDA Graph workloads in three execution modes (sync, stream, graph)"};
  // Needs no GPU (as --help, `bench list` and `bench render`); the workloads stop with "no CUDA device".
  app.set_version_flag("--version", fmt::format("conveyor {} (library {}), built with CUDA runtime {}.{} for GPU "
                                                "architectures {}; Apache License 2.0",
                                                CONVEYOR_VERSION_STRING, conveyor::version(), CUDART_VERSION / 1000,
                                                CUDART_VERSION % 1000 / 10, CONVEYOR_CUDA_ARCHITECTURES));
  app.require_subcommand(1);
  register_train_command(app);
  register_cavity_command(app);
  register_solve_command(app);
  register_filter_command(app);
  register_bench_command(app);
  register_allreduce_command(app);
  register_doctor_command(app);
  register_graph_command(app);
  // One exit-code convention for every command: 0 success (--help and --version too), 2 a usage error (an unknown
  // or malformed option, a value out of range, options that do not go together), 1 any other failure.
  const char* exit_status = "Exit status: 0 success; 2 a usage error (unknown or malformed option, value out of "
                            "range, options that do not go together); 1 any other failure (no CUDA device, unreadable "
                            "input, CUDA error, failed check).";
  refuse_empty_paths(app);
  app.footer(exit_status);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) sub->footer(exit_status);
  if (const std::string unknown = unknown_first(app, argc, argv); !unknown.empty()) {
    fmt::print(stderr, "conveyor: error: {}\nRun with --help for more information.\n", unknown);
    return exit_usage;
  }
  if (asks_for_help(argc, argv)) return print_help(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) { // a command's own exit status (graph diff --exit-code)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return flushed(app.exit(e)); // --version
    // CLI11's own refusals in the program's one voice.
    fmt::print(stderr, "conveyor: error: {}\nRun with --help for more information.\n", e.what());
    return exit_usage;
  } catch (const conveyor::scenarios::usage_error& e) {
    fmt::print(stderr, "conveyor: error: {}\nRun with --help for more information.\n", e.what());
    return exit_usage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "conveyor: error: {}\n", e.what());
    return exit_failure;
  }
  return 0;
}
