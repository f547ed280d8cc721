// The `conveyor` program: CUDA Graph workloads, each a subcommand, each runnable in sync, stream and graph modes.
#include "bench/allreduce.hpp"
#include "bench/bench_command.hpp"
#include "cavity/cavity_command.hpp"
#include "doctor_command.hpp"
#include "filter/filter_command.hpp"
#include "solve/solve_command.hpp"
#include "train/train_command.hpp"

#include <conveyor/version.hpp>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <exception>

int main(int argc, char** argv) {
  CLI::App app{"Conveyor: CUDA Graph workloads in three execution modes (sync, stream, graph)"};
  // Needs no GPU (as --help, `bench --list` and `bench --from-json`); the workloads stop with "no CUDA device".
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "conveyor: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
