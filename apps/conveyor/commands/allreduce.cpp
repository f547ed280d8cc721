//! \file allreduce.cpp
//! `conveyor allreduce`: the options of the all-reduce workload (scenarios/allreduce).

#include "allreduce.hpp"

#include "allreduce/allreduce.hpp"

#include "common/numeric_options.hpp"

#include <cstddef>
#include <memory>

void register_allreduce_command(CLI::App& app) {
  using conveyor::scenarios::integer_in;
  auto options = std::make_shared<conveyor::allreduce::options>();
  CLI::App* cmd = app.add_subcommand("allreduce", "NCCL all-reduce on every GPU: eager calls against the same calls "
                                                  "captured into a graph (microseconds per call, bandwidth)");
  cmd->add_option("--min-bytes", options->min_bytes, "Smallest size in bytes, a multiple of 4")
      ->check(integer_in(std::size_t{4}, std::size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--max-bytes", options->max_bytes, "Largest size in bytes (64 MiB by default)")
      ->check(integer_in(std::size_t{4}, std::size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--factor", options->factor, "Each size is the previous one times this")
      ->check(integer_in(std::size_t{2}, std::size_t{1024}))
      ->capture_default_str();
  auto* gpus = cmd->add_option("--gpus", options->gpus, "Use the first N GPUs (default: every visible GPU)")
                   ->check(integer_in(1, 1024));
  cmd->add_option("--calls-per-graph", options->calls_per_graph, "All-reduces captured into one graph")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  cmd->add_option("--trials", options->trials, "Timed trials per size and mode (the median is reported)")
      ->check(integer_in(1, 100))
      ->capture_default_str();
  cmd->add_option("--timeout-ms", options->timeout_ms,
                  "The communicators' timeout, ms: a wait longer than this aborts them with an error")
      ->check(integer_in(100LL, 3600000LL))
      ->capture_default_str();
  cmd->add_option("--json", options->json, "Also write the rows to this JSON file (schema conveyor-allreduce/1)");
  auto* with_blocking = cmd->add_flag("--blocking-baseline", options->blocking_baseline,
                                      "Also under --distributed, measure the plain blocking NCCL communicators' eager "
                                      "column (off by default there: a blocking ncclCommInitRank has no timeout, so "
                                      "a rank that fails can leave the others waiting until MPI_Abort ends them)");
  cmd->add_flag("--no-blocking-baseline", options->no_blocking_baseline,
                "Leave out the plain blocking NCCL communicators' eager column (one process)")
      ->excludes(with_blocking);
  cmd->add_flag("--distributed", options->distributed,
                "One process per GPU under mpirun (device = the rank on its host), instead of one process driving "
                "every GPU")
      ->excludes(gpus);
  cmd->callback([options] {
    conveyor::allreduce::check_options(*options);
    conveyor::allreduce::run(*options);
  });
}
