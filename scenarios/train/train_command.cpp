//! \file train_command.cpp
//! `conveyor train`: options, progress display, result table.

#include "train/train_command.hpp"

#include "common/file_output.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/profiling.hpp"

#include "train/dataset.hpp"
#include "train/trainer.hpp"

#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace conveyor::train;

struct cli_options {
  std::string mode = "all";
  int epochs = 10;
  int batch = 128;
  double lr = 1e-3;
  std::string optimizer = "adam";
  double momentum = 0.9;
  std::uint64_t seed = 42;
  std::string data = default_data_dir;
  std::string dot;
  std::size_t max_steps = 0;
  int chunk = 50;
  bool momentum_given = false; // --momentum on the command line (it applies to --optimizer sgd only)
  bool pdl = false;            // --pdl
  conveyor::scenarios::profiling_cli profile; // --profile, --profile-steps, --doctor
};

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
                 std::string(static_cast<std::size_t>(width - filled), '.'), 100.0 * fraction, p.epoch + 1,
                 p.epochs, p.step, p.total_steps, p.loss);
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
std::string mode_label(const train_result& r) {
  return r.programmatic ? fmt::format("{}+pdl", to_string(r.mode)) : std::string(to_string(r.mode));
}

void print_table(const std::vector<train_result>& results, const std::string& device) {
  const train_result* sync = nullptr;
  for (const auto& r : results)
    if (r.mode == execution_mode::sync) sync = &r;
  fmt::print("device: {}\n", device);
  fmt::print("{:<9} | {:>16} | {:>9} | {:>15} | {:>13}\n", "mode", "ms/step (median)", "steps/s", "speedup vs sync",
             "test accuracy");
  fmt::print("{:-<9}-+-{:-<16}-+-{:-<9}-+-{:-<15}-+-{:-<13}\n", "", "", "", "", "");
  for (const auto& r : results) {
    const std::string speedup =
        sync != nullptr && r.ms_per_step > 0.0 ? fmt::format("{:.2f}x", sync->ms_per_step / r.ms_per_step) : "n/a";
    fmt::print("{:<9} | {:>16.4f} | {:>9.1f} | {:>15} | {:>12.2f}%\n", mode_label(r), r.ms_per_step,
               r.steps_per_second, speedup, 100.0 * r.test_accuracy);
  }
  for (const auto& r : results) {
    if (r.mode == execution_mode::graph)
      fmt::print("{}: one captured step = {} nodes, {} edges\n", mode_label(r), r.graph_nodes, r.graph_edges);
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
      fmt::print("losses {} vs {}: bitwise identical over {} steps\n", mode_label(results[0]),
                 mode_label(results[i]), results[i].losses.size());
    else
      fmt::print("losses {} vs {}: DIFFER, max relative difference {:.3g} at step {}\n", mode_label(results[0]),
                 mode_label(results[i]), diff, at);
  }
}

void run(const cli_options& o) {
  const bool all = o.mode == "all";
  std::vector<execution_mode> modes;
  if (all)
    modes.assign(all_execution_modes.begin(), all_execution_modes.end());
  else
    modes.push_back(parse_execution_mode(o.mode));
  const bool has_graph = std::find(modes.begin(), modes.end(), execution_mode::graph) != modes.end();
  if (!o.dot.empty() && !has_graph) throw CLI::ValidationError("--dot", "needs --mode graph or --mode all");
  if (o.pdl && !has_graph)
    throw CLI::ValidationError("--pdl", fmt::format("applies to graph mode (programmatic edges in the captured step); "
                                                    "with --mode {} it would be ignored: use --mode graph or all",
                                                    o.mode));
  if (o.momentum_given && o.optimizer != "sgd")
    throw CLI::ValidationError("--momentum", fmt::format("applies to --optimizer sgd only; with --optimizer {} it "
                                                         "would be ignored",
                                                         o.optimizer));
  conveyor::scenarios::check_output_file("--dot", o.dot);
  conveyor::scenarios::check_profiling_options(o.profile, has_graph, "--mode graph or --mode all");
  conveyor::scenarios::check_distinct_outputs(
      {{"--dot", o.dot}, {"--profile (its DOT file)", conveyor::scenarios::profile_dot_path(o.profile.trace)}});

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

  const dataset data = load_fashion_mnist(o.data); // file errors first: they need no GPU to report
  check_options(options, data);                     // and every other input check
  if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: `conveyor train` needs a GPU");
  const std::size_t spe = steps_per_epoch(data.train_images.count, o.batch);
  fmt::print("Fashion-MNIST MLP 784-256-128-10: {} lr {:g}{}, batch {}, {} epoch(s) x {} steps{}, seed {}\n",
             to_string(options.optimizer.kind), o.lr,
             options.optimizer.kind == optimizer_kind::sgd ? fmt::format(" momentum {:g}", o.momentum) : "",
             o.batch, o.epochs, spe, o.max_steps > 0 ? fmt::format(" (capped at {} steps)", o.max_steps) : "",
             o.seed);
  std::fflush(stdout);

  const auto profiling = conveyor::scenarios::make_profiling(o.profile, "train");
  options.profiling = profiling.get();
  std::vector<train_result> results;
  for (const auto mode : modes) results.push_back(run_training(options, data, mode));
  print_table(results, conveyor::describe_device(0));
  for (const auto& r : results)
    if (r.mode == execution_mode::graph) fmt::print("\n{}", r.graphed_report);
  // After the table, so that a file system failing now does not lose the results; atomically, so that no half
  // file is left.
  for (const auto& r : results) {
    if (r.mode != execution_mode::graph || o.dot.empty()) continue;
    std::fflush(stdout);
    conveyor::scenarios::write_file_atomically(o.dot, r.graph_dot);
    fmt::print(stderr, "wrote the captured step graph to {}\n", o.dot);
  }
  if (profiling) profiling->finish();
}

} // namespace

void register_train_command(CLI::App& app) {
  auto opts = std::make_shared<cli_options>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train a 784-256-128-10 perceptron on Fashion-MNIST (cuBLAS + own kernels) in sync, stream and graph "
               "modes; report ms/step, speedup and test accuracy");
  sub->add_option("--mode", opts->mode, "Execution mode")
      ->check(CLI::IsMember({"sync", "stream", "graph", "all"}))
      ->capture_default_str();
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
  sub->add_option("--data", opts->data, "Folder holding the four Fashion-MNIST IDX .gz files")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  sub->add_option("--dot", opts->dot, "Write the captured training step graph (Graphviz DOT) to this file");
  sub->add_option("--max-steps", opts->max_steps, "Stop after this many steps in total (quick runs)")
      ->check(integer_in(std::size_t{1}, std::size_t{1} << 40));
  sub->add_flag("--pdl", opts->pdl,
                "Graph mode: programmatic dependent launch on every edge into our own kernels (they wait for their "
                "predecessors first), cuBLAS GEMM -> our kernel included; edges into cuBLAS stay full. Prints the "
                "pass's report; losses stay bitwise identical");
  sub->add_option("--chunk", opts->chunk, "Steps per timed chunk (the median over chunks is reported)")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  conveyor::scenarios::add_profiling_options(*sub, opts->profile, "one training step (one graph launch in graph mode)",
                                             "--mode graph or --mode all");
  sub->callback([opts, sub] {
    opts->momentum_given = sub->count("--momentum") > 0;
    run(*opts);
  });
}
