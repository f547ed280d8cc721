// The `conveyor` program: CUDA Graph workloads, each a subcommand, each runnable in sync, stream and graph modes.
#include "commands/allreduce_command.hpp"
#include "commands/bench_command.hpp"
#include "commands/cavity.hpp"
#include "commands/doctor.hpp"
#include "commands/filter.hpp"
#include "commands/solve.hpp"
#include "commands/train.hpp"

#include "common/usage_error.hpp"

#include <conveyor/version.hpp>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <exception>

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
  // One exit-code convention for every command: 0 success (--help and --version too), 2 a usage error (an unknown
  // or malformed option, a value out of range, options that do not go together), 1 any other failure.
  const char* exit_status = "Exit status: 0 success; 2 a usage error (unknown or malformed option, value out of "
                            "range, options that do not go together); 1 any other failure (no CUDA device, unreadable "
                            "input, CUDA error, failed check).";
  app.footer(exit_status);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) sub->footer(exit_status);
  using conveyor::scenarios::exit_failure;
  using conveyor::scenarios::exit_usage;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : exit_usage;
  } catch (const conveyor::scenarios::usage_error& e) {
    fmt::print(stderr, "conveyor: error: {}\nRun with --help for more information.\n", e.what());
    return exit_usage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "conveyor: error: {}\n", e.what());
    return exit_failure;
  }
  return 0;
}
