//! \file train.cpp
//! `conveyor train`: options, progress display, result table; the data-parallel runs (--gpus N, --distributed) and
//! their checks.

#include "commands/train.hpp"

#include "common/require_gpu.hpp"
#include "common/file_output.hpp"
#include "common/mode_option.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/graph_saving.hpp"
#include "common/profiling.hpp"
#include "common/results_table.hpp"
#include "common/usage_error.hpp"

#include "train/dataset.hpp"
#include "train/trainer.hpp"
#ifdef CONVEYOR_TRAIN_DATA_PARALLEL
#include "train/data_parallel.hpp"

#include <conveyor/nccl/communicator.hpp>
#include <nccl.h>
#endif
#ifdef CONVEYOR_TRAIN_DISTRIBUTED
#include <conveyor/nccl/mpi.hpp>
#endif

#include <conveyor/runtime/device.hpp>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::scenarios::option_error;
using conveyor::scenarios::usage_error;

namespace {

using namespace conveyor::train;

struct cli_options {
  conveyor::scenarios::mode_option mode; // --mode
  int epochs = 10;
  int batch = 128;
  double lr = 1e-3;
  std::string optimizer = "adam";
  std::string step = "fused"; // --step
  bool step_given = false;    // --step on the command line (the one-GPU run only)
  double momentum = 0.9;
  std::uint64_t seed = 42;
  std::string data = default_data_dir;
  std::string dot;
  std::size_t max_steps = 0;
  int chunk = 50;
  bool momentum_given = false;                // --momentum on the command line (it applies to --optimizer sgd only)
  bool pdl = false;                           // --pdl
  bool debug_nonfinite = false;               // --debug-nonfinite
  conveyor::scenarios::profiling_cli profile; // --profile, --profile-steps, --doctor
  conveyor::scenarios::graph_saving_cli save; // --save-graph, --save-graph-contents, --check-saved-graph
  int gpus = 1;                               // --gpus: data-parallel over this many GPUs of this process
  bool distributed = false;                   // --distributed: data-parallel, one process per GPU (mpirun)
  int nccl_timeout_ms = 60000;                // --nccl-timeout-ms
  int world_size = 0;                         // --world-size: MPI processes expected with --distributed (0: any)
  bool nccl_timeout_given = false;
};

//! Steps of the one-GPU reference a data-parallel run is compared with (fewer when the run is shorter).
constexpr std::size_t reference_steps = 100;
//! Largest relative loss difference allowed between N GPUs and one GPU over those steps.
constexpr double reference_tolerance = 1e-5;
//! Test accuracy the default 10-epoch run reaches on one GPU (docs/train.md), required of N GPUs too.
constexpr double accuracy_target = 0.88;

//! The option names of the checks of train_options (check_options).
constexpr option_names train_names{"--epochs", "--batch", "--max-steps"};

//! Progress on stderr: a bar redrawn in place on a terminal, otherwise one line per epoch.
class progress_printer {
public:
  progress_printer() : tty_(isatty(fileno(stderr)) != 0) {}

  void operator()(const train_progress& p) const {
    const double fraction = static_cast<double>(p.step) / static_cast<double>(p.total_steps);
    if (tty_) {
      constexpr int width = 30;
      const int filled = static_cast<int>(fraction * width);
      fmt::print(stderr, "\r{:>6} [{}{}] {:3.0f}%  epoch {}/{}  step {}/{}  loss {:.4f} ", to_string(p.mode),
                 std::string(static_cast<std::size_t>(filled), '#'),
                 std::string(static_cast<std::size_t>(width - filled), '.'), 100.0 * fraction, p.epoch + 1, p.epochs,
                 p.step, p.total_steps, p.loss);
      if (p.step == p.total_steps) fmt::print(stderr, "\n");
      std::fflush(stderr);
    } else if (p.step == p.total_steps || p.step % p.steps_per_epoch == 0) {
      fmt::print(stderr, "train[{}] epoch {}/{} step {}/{} loss {:.4f}\n", to_string(p.mode), p.epoch + 1, p.epochs,
                 p.step, p.total_steps, p.loss);
    }
  }

private:
  bool tty_;
};

//! Largest relative difference between two loss sequences (0 when bitwise equal), and where.
std::pair<double, std::size_t> max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  std::size_t at = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double scale = std::max({std::fabs(double{a[i]}), std::fabs(double{b[i]}), 1e-30});
    const double d = std::fabs(double{a[i]} - double{b[i]}) / scale;
    if (d > worst || std::isnan(d)) {
      worst = std::isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  return {worst, at};
}

//! "graph", or "graph+pdl" for graph mode with --pdl.
std::string mode_label(const train_result& r) { return conveyor::scenarios::mode_label(r.mode, r.programmatic); }

//! The devices, the results table, the captured step's shape and programmatic report, the losses compared.
void print_table(const std::vector<train_result>& results, const std::vector<std::string>& devices) {
  using table = conveyor::scenarios::results_table;
  for (const auto& d : devices) fmt::print("{}\n", d);
  table t(
      {{"mode", 9, true}, {"ms/step (median)", 16}, {"steps/s", 9}, table::speedup_column(), {"test accuracy", 13}});
  for (const auto& r : results)
    t.add_row(r.mode, r.ms_per_step,
              {mode_label(r), fmt::format("{:.4f}", r.ms_per_step), fmt::format("{:.1f}", r.steps_per_second),
               fmt::format("{:.2f}%", 100.0 * r.test_accuracy)});
  fmt::print("{}", t.text());
  for (const auto& r : results) {
    if (r.mode == execution_mode::graph && r.devices.empty())
      fmt::print("{}: one captured step = {} nodes, {} edges\n", mode_label(r), r.graph_nodes, r.graph_edges);
    else if (r.mode == execution_mode::graph)
      fmt::print("{}: one captured step = {} nodes, {} edges on {} device(s) of this process, NCCL all-reduce "
                 "inside; the same graph serves every batch, the partial last one included\n",
                 mode_label(r), r.graph_nodes, r.graph_edges, r.local_replicas);
    if (r.programmatic) {
      fmt::print("{}: make_programmatic made {} edge(s) programmatic, left {} full ({} programmatic already); cuBLAS's "
                 "kernels cannot wait for a predecessor, so edges into them stay full:\n",
                 mode_label(r), r.programmatic_changed, r.programmatic_left, r.programmatic_edges_before);
      for (const auto& line : r.programmatic_lines) fmt::print("  {}\n", line);
    }
  }
  for (std::size_t i = 1; i < results.size(); ++i) {
    const auto [diff, at] = max_relative_difference(results[0].losses, results[i].losses);
    if (diff == 0.0)
      fmt::print("losses {} vs {}: bitwise identical over {} steps\n", mode_label(results[0]), mode_label(results[i]),
                 results[i].losses.size());
    else
      fmt::print("losses {} vs {}: DIFFER, max relative difference {:.3g} at step {}\n", mode_label(results[0]),
                 mode_label(results[i]), diff, at);
  }
}

//! The modes --mode names, after every check of the options that needs neither data, MPI nor a GPU: combinations
//! that would be ignored, output files, with --gpus N a batch of at least N rows. How many devices are visible is
//! checked later, after the data (run_multi_gpu, run_distributed): every check that needs no GPU comes first.
//! \throws usage_error naming the option; std::invalid_argument for an output path.
//! --debug-nonfinite steps graph mode alone, on one GPU. \throws usage_error naming the option.
void check_debug_nonfinite(const cli_options& o, bool data_parallel) {
  if (!o.debug_nonfinite) return;
  if (!o.mode.is_only(execution_mode::graph))
    throw option_error("--debug-nonfinite", fmt::format("runs graph mode node by node: give --mode graph (with --mode "
                                                        "{} the other modes would run unwatched)",
                                                        o.mode.text));
  if (data_parallel)
    throw option_error("--debug-nonfinite", "applies to the one-GPU run; with --gpus N or --distributed it would be "
                                            "ignored");
}

//! Options of the one-GPU run refused with --gpus N or --distributed, and those flags where the build lacks NCCL or
//! MPI. \throws usage_error naming the option.
void check_data_parallel_flags(const cli_options& o, bool data_parallel) {
  const char* data_parallel_flag = o.distributed ? "--distributed" : "--gpus";
  if (data_parallel && o.pdl)
    throw option_error("--pdl",
                       fmt::format("applies to the one-GPU run; with {} it would be ignored", data_parallel_flag));
  if (data_parallel && o.step_given && o.step != "unfused")
    throw option_error("--step", fmt::format("{} applies to the one-GPU run: data-parallel steps ({}) run the "
                                             "unfused kernels",
                                             o.step, data_parallel_flag));
  if (data_parallel && (!o.profile.trace.empty() || o.profile.doctor))
    throw option_error(o.profile.doctor ? "--doctor" : "--profile",
                       fmt::format("applies to the one-GPU run; with {} it would be ignored", data_parallel_flag));
  if (o.world_size > 0 && !o.distributed) throw option_error("--world-size", "applies to --distributed only");
  if (o.nccl_timeout_given && !data_parallel)
    throw option_error("--nccl-timeout-ms", "applies to --gpus N (N > 1) and --distributed only");
#ifndef CONVEYOR_TRAIN_DATA_PARALLEL
  if (data_parallel)
    throw option_error(data_parallel_flag, "this build has no NCCL (conveyor::nccl was not built: nccl.h and libnccl "
                                           "were not found beside the CUDA toolkit or in NCCL_HOME)");
#endif
#ifndef CONVEYOR_TRAIN_DISTRIBUTED
  if (o.distributed)
    throw option_error("--distributed", "this build has no MPI (conveyor::nccl_mpi was not built); use --gpus N for "
                                        "several GPUs in one process");
#endif
}

std::vector<execution_mode> check_cli(const cli_options& o) {
  const bool has_graph = o.mode.selects_graph();
  const bool data_parallel = o.gpus > 1 || o.distributed;
  check_debug_nonfinite(o, data_parallel);
  if (!o.dot.empty() && !has_graph) throw option_error("--dot", "needs " + o.mode.graph_modes());
  if (o.pdl && !has_graph)
    throw option_error("--pdl", fmt::format("applies to graph mode (programmatic edges in the captured step); with "
                                            "--mode {} it would be ignored: use --mode graph or all",
                                            o.mode.text));
  if (o.momentum_given && o.optimizer != "sgd")
    throw option_error(
        "--momentum",
        fmt::format("applies to --optimizer sgd only; with --optimizer {} it would be ignored", o.optimizer));
  check_data_parallel_flags(o, data_parallel);
  conveyor::scenarios::check_output_file("--dot", o.dot);
  conveyor::scenarios::check_profiling_options(o.profile, has_graph, o.mode.graph_modes());
  conveyor::scenarios::check_graph_saving_options(o.save, has_graph);
  conveyor::scenarios::check_distinct_outputs(
      {{"--dot", o.dot}, {"--profile (its DOT file)", conveyor::scenarios::profile_dot_path(o.profile.trace)}});
  if (o.gpus > 1 && o.batch < o.gpus)
    throw option_error("--batch", fmt::format("batch size {} is smaller than the {} GPUs it is split over (--gpus {}): "
                                              "every GPU needs at least one row of each batch",
                                              o.batch, o.gpus, o.gpus));
  std::vector<execution_mode> modes;
  for (const auto& m : o.mode.selected()) modes.push_back(m.kind);
  return modes;
}

train_options make_options(const cli_options& o) {
  train_options options;
  options.epochs = o.epochs;
  options.batch = o.batch;
  options.optimizer.kind = o.optimizer == "sgd" ? optimizer_kind::sgd : optimizer_kind::adam;
  options.optimizer.lr = static_cast<float>(o.lr);
  options.optimizer.momentum = static_cast<float>(o.momentum);
  options.seed = o.seed;
  options.max_steps = o.max_steps;
  options.chunk_steps = o.chunk;
  options.on_progress = progress_printer{};
  options.programmatic = o.pdl;
  // Data-parallel steps (--gpus N, --distributed) run the unfused kernels (data_parallel.cpp).
  options.step = o.gpus > 1 || o.distributed ? step_kind::unfused : parse_step_kind(o.step);
  options.debug_nonfinite = o.debug_nonfinite;
  return options;
}

void print_header(const cli_options& o, const train_options& options, std::size_t spe) {
  fmt::print("Fashion-MNIST MLP 784-256-128-10: {} step, {} lr {:g}{}, batch {}, {} epoch(s) x {} steps{}, seed {}\n",
             to_string(options.step), to_string(options.optimizer.kind), o.lr,
             options.optimizer.kind == optimizer_kind::sgd ? fmt::format(" momentum {:g}", o.momentum) : "", o.batch,
             o.epochs, spe, o.max_steps > 0 ? fmt::format(" (capped at {} steps)", o.max_steps) : "", o.seed);
  std::fflush(stdout);
}

//! Writes the graph mode's captured step to --dot, after the table (so that a file system failing now does not lose
//! the results), atomically (no half file is left).
void write_dot(const cli_options& o, const std::vector<train_result>& results) {
  for (const auto& r : results) {
    if (r.mode != execution_mode::graph || o.dot.empty()) continue;
    std::fflush(stdout);
    conveyor::scenarios::write_file_atomically(o.dot, r.graph_dot);
    fmt::print(stderr, "wrote the captured step graph to {}\n", o.dot);
  }
}

void run_one_gpu(const cli_options& o, const std::vector<execution_mode>& modes) {
  train_options options = make_options(o);
  const dataset data = load_fashion_mnist(o.data); // file errors first: they need no GPU to report
  check_options(options, data, train_names);       // and every other input check
  conveyor::scenarios::require_gpu("`conveyor train`");
  print_header(o, options, steps_per_epoch(data.train_images.count, o.batch));

  const auto saving = conveyor::scenarios::make_graph_saving(o.save); // before the first kernel
  const auto profiling = conveyor::scenarios::make_profiling(o.profile, "train");
  options.profiling = profiling.get();
  std::vector<train_result> results;
  for (const auto mode : modes) results.push_back(run_training(options, data, mode));
  print_table(results, {"device: " + conveyor::describe_device(0)});
  for (const auto& r : results)
    if (r.mode == execution_mode::graph) fmt::print("\n{}", r.graphed_report);
  if (o.debug_nonfinite)
    fmt::print("\ndebug-nonfinite: no watched buffer (loss history, row losses, logits, activations, gradients, "
               "parameters) held a NaN or an infinity after any node of {} step(s) run node by node\n",
               results.empty() ? 0 : results.front().steps);
  write_dot(o, results);
  if (profiling) profiling->finish();
}

#ifdef CONVEYOR_TRAIN_DATA_PARALLEL

namespace nccl = conveyor::nccl;

//! "2.28.3", from the NCCL library loaded (ncclGetVersion).
std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  return v >= 10000 ? fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
                    : fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
}

//! "global batch 128 = 64 + 64 rows".
std::string split_text(int batch, int world_size) {
  std::string parts;
  for (int k = 0; k < world_size; ++k) {
    if (world_size > 8 && k == 4) {
      parts += " + ...";
      k = world_size - 2;
      continue;
    }
    parts += fmt::format("{}{}", k == 0 ? "" : " + ", shard_of(batch, k, world_size).rows);
  }
  return fmt::format("global batch {} = {} rows", batch, parts);
}

//! The one-GPU run (run_training, stream mode: the modes are bitwise identical there) of the first
//! min(reference_steps, steps) steps with the same global batch, on the current device.
train_result run_reference(const train_options& options, const dataset& data, std::size_t steps) {
  train_options ref = options;
  ref.max_steps = std::min(reference_steps, steps);
  ref.on_progress = nullptr;
  return run_training(ref, data, execution_mode::stream);
}

//! Byte-wise equality of two float vectors (so that -0 against +0 or NaN payloads count as differences).
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

//! Check: the modes give bitwise equal losses and final parameters. Prints a line per failing pair, or one "pass".
bool check_modes_bitwise(const std::vector<train_result>& results) {
  bool ok = true;
  const train_result& first = results.front();
  const int n = first.world_size;
  for (std::size_t i = 1; i < results.size(); ++i) {
    const bool same =
        bitwise_equal(first.losses, results[i].losses) && first.parameters_hash == results[i].parameters_hash;
    if (!same) {
      ok = false;
      fmt::print("check: {} vs {} on {} GPUs: NOT bitwise identical (losses or final parameters): FAIL\n",
                 mode_label(first), mode_label(results[i]), n);
    }
  }
  if (results.size() > 1 && ok)
    fmt::print("check: the {} modes give bitwise identical losses and final parameters on {} GPUs: pass\n",
               results.size(), n);
  return ok;
}

//! Check: every replica ended bitwise equal to replica 0 in every mode (and across processes, `ranks_identical`,
//! when known).
bool check_replicas(const std::vector<train_result>& results, std::optional<bool> ranks_identical) {
  bool replicas = true;
  for (const auto& r : results) replicas = replicas && r.replicas_identical;
  if (ranks_identical) replicas = replicas && *ranks_identical;
  fmt::print("check: parameters and losses bitwise identical on all {} GPUs after every mode{}: {}\n",
             results.front().world_size, ranks_identical ? " (hashes compared across the ranks)" : "",
             replicas ? "pass" : "FAIL");
  return replicas;
}

//! Check: every mode's losses within reference_tolerance of the one-GPU run's over its steps.
bool check_against_one_gpu(const cli_options& o, const std::vector<train_result>& results,
                           const train_result& reference) {
  double worst = 0.0;
  std::size_t at = 0;
  const train_result* worst_run = &results.front();
  for (const auto& r : results) {
    const std::size_t k = std::min(reference.losses.size(), r.losses.size());
    const std::vector<float> head(r.losses.begin(), r.losses.begin() + static_cast<std::ptrdiff_t>(k));
    const auto [d, where] = max_relative_difference(reference.losses, head);
    if (d > worst || std::isnan(d)) {
      worst = d;
      at = where;
      worst_run = &r;
    }
  }
  const bool pass = worst <= reference_tolerance;
  fmt::print("check: losses on {} GPUs vs 1 GPU (same global batch {}, first {} steps): max relative difference "
             "{:.3g}{} (limit {:g}): {}\n",
             results.front().world_size, o.batch, reference.losses.size(), worst,
             worst > 0.0 ? fmt::format(" at step {} ({})", at, mode_label(*worst_run)) : std::string(" (bitwise)"),
             reference_tolerance, pass ? "pass" : "FAIL");
  return pass;
}

//! Check, for the default 10-epoch recipe only: every mode's test accuracy at least accuracy_target.
bool check_accuracy(const cli_options& o, const std::vector<train_result>& results) {
  if (!(o.epochs >= 10 && o.max_steps == 0 && o.batch == 128 && o.optimizer == "adam" && o.lr == 1e-3)) return true;
  double lowest = 1.0;
  for (const auto& r : results) lowest = std::min(lowest, r.test_accuracy);
  const bool pass = lowest >= accuracy_target;
  fmt::print("check: test accuracy after {} epochs on {} GPUs at least {:.0f}%: lowest {:.2f}%: {}\n", o.epochs,
             results.front().world_size, 100.0 * accuracy_target, 100.0 * lowest, pass ? "pass" : "FAIL");
  return pass;
}

//! Prints the checks of a data-parallel run (after the table) and returns whether all passed: the modes bitwise
//! equal (losses and parameters), the replicas identical (`ranks_identical`: across processes, when known), the
//! losses within reference_tolerance of the one-GPU run (`reference`, when run), the accuracy target for the
//! default 10-epoch run.
bool report_data_parallel(const cli_options& o, const std::vector<train_result>& results, const train_result* reference,
                          std::optional<bool> ranks_identical) {
  bool ok = check_modes_bitwise(results);
  ok = check_replicas(results, ranks_identical) && ok;
  if (reference != nullptr) ok = check_against_one_gpu(o, results, *reference) && ok;
  ok = check_accuracy(o, results) && ok;
  fmt::print("data-parallel checks: {}\n", ok ? "pass" : "FAIL");
  return ok;
}

//! --gpus N (N > 1): one process, N devices, one NCCL communicator per device (communicator::init_all). The data
//! and every check that needs no GPU first; last (where one GPU says "no CUDA device") that N devices are visible,
//! refused as cavity does: "--gpus 3: 3 GPU(s) asked for, but 2 CUDA device(s) are visible ...".
void run_multi_gpu(const cli_options& o, const std::vector<execution_mode>& modes) {
  const train_options options = make_options(o);
  const dataset data = load_fashion_mnist(o.data);
  check_data_parallel_options(options, data, o.gpus, train_names);
  std::vector<int> devices;
  try {
    devices = conveyor::first_devices(o.gpus); // counts the devices; starts no GPU work
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--gpus {}: {}", o.gpus, e.what()));
  }
  print_header(o, options, steps_per_epoch(data.train_images.count, o.batch));
  fmt::print("data-parallel on {} GPUs in one process (NCCL {}, timeout {} ms): {}\n", o.gpus, nccl_version(),
             o.nccl_timeout_ms, split_text(o.batch, o.gpus));
  std::fflush(stdout);

  std::vector<train_result> results;
  std::optional<train_result> reference;
  {
    const std::vector<nccl::communicator> comms =
        nccl::communicator::init_all(devices, nccl::comm_options{std::chrono::milliseconds(o.nccl_timeout_ms)});
    for (const auto mode : modes) results.push_back(run_data_parallel(options, data, mode, comms));
  } // the communicators are finalised before the reference runs
  {
    const conveyor::device_guard on(devices.front());
    reference = run_reference(options, data, results.front().steps);
  }
  std::vector<std::string> lines;
  for (const int d : devices) lines.push_back(fmt::format("device {}: {}", d, conveyor::describe_device(d)));
  print_table(results, lines);
  const bool ok = report_data_parallel(o, results, &*reference, std::nullopt);
  write_dot(o, results);
  if (!ok) throw std::runtime_error("data-parallel checks failed (see above)");
}

#endif // CONVEYOR_TRAIN_DATA_PARALLEL

#ifdef CONVEYOR_TRAIN_DISTRIBUTED

//! A refusal every rank of a --distributed job agreed on (agree_on_checks): thrown on every rank, so that each leaves
//! MPI alike (MPI_Finalize, no MPI_Abort) and main prints its message ("conveyor: error: rank R of N: ...").
class agreed_stop : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! Runs `check` on this rank, then agrees with every rank of MPI_COMM_WORLD (MPI_Allreduce of the number of ranks
//! that failed) on whether all passed. When one failed, every rank throws agreed_stop: a failing rank with its own
//! message ("rank R of N: <what>"), the others saying that they stop for it. So checks whose result can differ
//! between ranks (a host without the data or a GPU) stop every rank alike instead of leaving some waiting in a later
//! collective for a rank that has gone.
//! \throws agreed_stop as above; std::runtime_error when the MPI_Allreduce fails.
template <class Check>
void agree_on_checks(int rank, int world, Check&& check) {
  std::string error;
  try {
    check();
  } catch (const std::exception& e) {
    error = *e.what() != '\0' ? e.what() : "unknown error";
  } catch (...) {
    error = "unknown error";
  }
  int failed = error.empty() ? 0 : 1;
  if (MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Allreduce of the checks' results failed");
  if (failed == 0) return;
  if (!error.empty()) throw agreed_stop(fmt::format("rank {} of {}: {}", rank, world, error));
  throw agreed_stop(fmt::format("rank {} of {}: stopped: {} of the {} rank(s) failed a check (see their messages)",
                                rank, world, failed, world));
}

//! This host's name (gethostname), or "unknown host".
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown host";
  return name;
}

//! --distributed: one process per GPU under mpirun (device = the rank among the processes of its host), one NCCL
//! communicator over all of them (init_with_mpi). MPI starts first; then, agreed over MPI on every rank
//! (agree_on_checks), the checks that need no GPU (--world-size, a batch of at least one row per rank, the data) and
//! then the GPU (one for this rank's local rank): a rank that fails one prints its refusal with its rank and every
//! rank stops alike (exit 1), none left waiting for another. Past those checks an error on one rank (CUDA, MPI,
//! NCCL, a step) is printed with its rank, host and device and ends the whole job (MPI_Abort): the other ranks may
//! be waiting in a collective for it. Only rank 0 prints the run; every rank takes part in the checks (the
//! parameters' hashes are compared across ranks) and exits with the same status.
void run_distributed(const cli_options& o, const std::vector<execution_mode>& modes) {
  const nccl::mpi_session mpi;
  const int rank = mpi.rank();
  const int world = mpi.size();
  const bool lead = rank == 0;
  int device = -1; // none yet
  // Outside the try: on an error the communicator is left to MPI_Abort (its finalisation would wait for the peers).
  std::optional<nccl::communicator> comm;
  bool ok = true;
  try {
    train_options options = make_options(o);
    if (!lead) options.on_progress = nullptr;
    std::optional<dataset> data;
    agree_on_checks(rank, world, [&] {
      if (o.world_size > 0) nccl::check_world_size(MPI_COMM_WORLD, o.world_size);
      if (o.batch < world)
        throw usage_error(fmt::format("--batch: batch size {} is smaller than the {} MPI ranks it is split over: "
                                      "every rank needs at least one row of each batch",
                                      o.batch, world));
      data.emplace(load_fashion_mnist(o.data));
      check_data_parallel_options(options, *data, world, train_names);
    });
    const int local = mpi.local_rank();
    agree_on_checks(rank, world, [&] {
      const int visible = conveyor::device_count();
      if (visible == 0) throw std::runtime_error("no CUDA device: `conveyor train` needs a GPU");
      if (local >= visible)
        throw std::invalid_argument(fmt::format("this rank's device is its local rank, {}, but host '{}' sees {} CUDA "
                                                "device(s) (0..{}): start at most {} process(es) per host",
                                                local, host_name(), visible, visible - 1, visible));
    });
    // The rank's device current before anything else touches CUDA, so that no rank makes a context on another's.
    device = local;
    CONVEYOR_CHECK(cudaSetDevice(device));
    // Refuses, on every rank alike, two ranks on one device.
    comm.emplace(
        nccl::init_with_mpi(MPI_COMM_WORLD, device, nccl::comm_options{std::chrono::milliseconds(o.nccl_timeout_ms)}));
    if (lead) {
      print_header(o, options, steps_per_epoch(data->train_images.count, o.batch));
      fmt::print("data-parallel over {} MPI ranks, one GPU each (NCCL {}, timeout {} ms): {}\n", world, nccl_version(),
                 o.nccl_timeout_ms, split_text(o.batch, world));
      std::fflush(stdout);
    }
    std::vector<train_result> results;
    for (const auto mode : modes) results.push_back(run_data_parallel(options, *data, mode, std::span(&*comm, 1)));
    std::optional<train_result> reference;
    if (lead && world > 1) reference = run_reference(options, *data, results.front().steps);
    // Every rank's final parameters against every other's: the smallest and largest hash of each mode.
    std::vector<std::uint64_t> low, high;
    for (const auto& r : results) low.push_back(r.parameters_hash);
    high = low;
    const int count = static_cast<int>(low.size());
    if (MPI_Allreduce(MPI_IN_PLACE, low.data(), count, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Allreduce(MPI_IN_PLACE, high.data(), count, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Allreduce of the parameters' hashes failed");
    if (lead) {
      print_table(results,
                  {fmt::format("rank 0 of {}: device {}: {}", world, device, conveyor::describe_device(device))});
      ok = report_data_parallel(o, results, reference ? &*reference : nullptr, low == high);
      write_dot(o, results);
    }
    int ok_flag = ok ? 1 : 0;
    if (MPI_Bcast(&ok_flag, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Bcast of the checks' result failed");
    ok = ok_flag != 0;
  } catch (const agreed_stop&) {
    throw; // every rank throws it alike: no rank is left waiting
  } catch (...) {
    std::string what = "unknown error";
    try {
      throw;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {}
    std::fflush(stdout);
    fmt::print(stderr, "conveyor: error: rank {} of {} (host {}, {}): {}\n", rank, world, host_name(),
               device >= 0 ? fmt::format("device {}", device) : std::string("no device yet"), what);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1); // the other ranks may be waiting for this one: end them all
    std::abort();
  }
  if (!ok)
    throw std::runtime_error(
        lead ? fmt::format("rank 0 of {}: data-parallel checks failed (see above)", world)
             : fmt::format("rank {} of {}: data-parallel checks failed (see rank 0's output)", rank, world));
}

#endif // CONVEYOR_TRAIN_DISTRIBUTED

void run(const cli_options& o) {
  const std::vector<execution_mode> modes = check_cli(o);
  conveyor::scenarios::check_input_folder("--data", o.data);
#ifdef CONVEYOR_TRAIN_DISTRIBUTED
  if (o.distributed) return run_distributed(o, modes);
#endif
#ifdef CONVEYOR_TRAIN_DATA_PARALLEL
  if (o.gpus > 1) return run_multi_gpu(o, modes);
#endif
  run_one_gpu(o, modes);
}

} // namespace

void register_train_command(CLI::App& app) {
  auto opts = std::make_shared<cli_options>();
  CLI::App* sub = app.add_subcommand(
      "train",
      "Train a 784-256-128-10 perceptron on Fashion-MNIST (cuBLASLt or cuBLAS + own kernels) in sync, stream and graph "
      "modes; report ms/step, speedup and test accuracy");
  opts->mode.add_to(*sub);
  using conveyor::scenarios::integer_in;
  using conveyor::scenarios::real_in;
  sub->add_option("--epochs", opts->epochs, "Passes over the training set")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  sub->add_option("--batch", opts->batch, "Samples per step (the last batch of an epoch may be partial)")
      ->check(integer_in(1, 60000))
      ->capture_default_str();
  // Both are used as floats: a value that is 0, 1 or infinite once rounded to float is refused.
  sub->add_option("--lr", opts->lr, "Learning rate (> 0, a float)")
      ->check(real_in(conveyor::scenarios::positive_float()))
      ->capture_default_str();
  sub->add_option("--optimizer", opts->optimizer, "Update rule")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  sub->add_option("--momentum", opts->momentum, "SGD momentum, in [0, 1) (--optimizer sgd only)")
      ->check(real_in({0.0, 1.0, false, true, true}))
      ->capture_default_str();
  sub->add_option("--seed", opts->seed, "Seed of the weights and the per-epoch shuffles")
      ->check(integer_in(std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max()))
      ->capture_default_str();
  sub->add_option("--data", opts->data, "Folder holding the four Fashion-MNIST IDX .gz files")->capture_default_str();
  sub->add_option("--dot", opts->dot, "Write the captured training step graph (Graphviz DOT) to this file");
  sub->add_option("--max-steps", opts->max_steps, "Stop after this many steps in total (quick runs)")
      ->check(integer_in(std::size_t{1}, std::size_t{1} << 40));
  sub->add_option("--step", opts->step,
                  "Kernels of a step, the same in every mode: fused (cuBLASLt products with bias, ReLU and bias "
                  "gradients in their epilogues; loss, mean and counters in one kernel: 18 graph nodes) or unfused "
                  "(cuBLAS GEMMs and separate element-wise kernels: 26; what --gpus and --distributed run)")
      ->check(CLI::IsMember({"fused", "unfused"}))
      ->capture_default_str();
  sub->add_flag(
      "--pdl", opts->pdl,
      "Graph mode: programmatic dependent launch on every edge into our own kernels (they wait for their "
      "predecessors first), cuBLAS or cuBLASLt product -> our kernel included; edges into the libraries' kernels "
      "stay full. Prints the "
      "pass's report; losses stay bitwise identical");
  sub->add_flag("--debug-nonfinite", opts->debug_nonfinite,
                "With --mode graph: run every step node by node (each node its own launch and synchronisation), "
                "watching the losses, logits, activations, gradients and parameters after each node, and stop at the "
                "first node after which one holds a NaN or an infinity, naming it (docs/debugging.md). Slow");
  sub->add_option("--chunk", opts->chunk, "Steps per timed chunk (the median over chunks is reported)")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  conveyor::scenarios::add_graph_saving_options(*sub, opts->save, "the training step");
  conveyor::scenarios::add_profiling_options(*sub, opts->profile, "one training step (one graph launch in graph mode)",
                                             opts->mode.graph_modes());
  CLI::Option* gpus =
      sub->add_option("--gpus", opts->gpus,
                      "Data-parallel training over this many GPUs of this process (devices 0..N-1, NCCL); the global "
                      "batch (--batch) is split across them. With N > 1 the run is also compared with one GPU")
          ->check(integer_in(1, 1024))
          ->capture_default_str();
  CLI::Option* distributed =
      sub->add_flag("--distributed", opts->distributed,
                    "Data-parallel training with one process per GPU: start with `mpirun -np N conveyor train "
                    "--distributed`; each process uses the GPU of its rank on its host; only rank 0 prints");
  gpus->excludes(distributed);
  sub->add_option("--world-size", opts->world_size,
                  "With --distributed: the number of MPI processes expected (refused on every rank when the job has "
                  "another; guards against processes started without mpirun, each alone)")
      ->check(integer_in(1, 1024));
  sub->add_option("--nccl-timeout-ms", opts->nccl_timeout_ms,
                  "With --gpus N > 1 or --distributed: longest wait for NCCL (initialisation, a step's collectives); "
                  "past it the communicators are aborted and the run ends in an error naming the rank and device "
                  "instead of hanging")
      ->check(integer_in(100, 3600000))
      ->capture_default_str();
  sub->callback([opts, sub] {
    opts->momentum_given = sub->count("--momentum") > 0;
    opts->step_given = sub->count("--step") > 0;
    opts->nccl_timeout_given = sub->count("--nccl-timeout-ms") > 0;
    run(*opts);
  });
}
