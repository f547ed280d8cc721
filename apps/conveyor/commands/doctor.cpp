//! \file doctor.cpp
//! `conveyor doctor`: the tuning doctor on the four workloads in graph mode, small and fast.

#include "commands/doctor.hpp"

#include "cavity/parameters.hpp"
#include "cavity/solver.hpp"
#include "common/require_gpu.hpp"
#include "common/output_paths.hpp"
#include "common/profiling.hpp"
#include "common/usage_error.hpp"
#include "filter/benchmark.hpp"
#include "filter/chain.hpp"
#include "filter/image.hpp"
#include "solve/cg_solver.hpp"
#include "solve/problem.hpp"
#include "train/dataset.hpp"
#include "train/trainer.hpp"

#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr std::array<const char*, 4> workloads{"train", "cavity", "filter", "solve"};
constexpr std::size_t doctor_steps = 20;       // profiled steps (launches) per graph mode
constexpr std::size_t doctor_warmup_steps = 3; // before them

struct cli_options {
  std::string workload = "all";
  std::string profile_dir;
  std::string data = conveyor::train::default_data_dir;
  bool data_given = false; // --data on the command line
  bool verbose = false;    // --verbose: findings in full
};

//! A session for `workload`: the doctor, a profile of its graph modes, the trace written into --profile-dir when given.
conveyor::scenarios::profiling session(const std::string& workload, const cli_options& o, std::size_t warmup) {
  conveyor::scenarios::profiling_settings s;
  s.workload = workload;
  if (!o.profile_dir.empty()) s.trace = std::filesystem::path(o.profile_dir) / (workload + ".json");
  s.verbose = o.verbose;
  s.doctor = true;
  s.steps = doctor_steps;
  s.warmup_steps = warmup;
  s.print_report = false;
  s.graph_tracks_only = true;
  return conveyor::scenarios::profiling(std::move(s));
}

//! A 640 x 480 RGB test frame: a colour gradient with a few sharp-edged shapes (the edges the Sobel branch finds).
conveyor::filter::image synthetic_frame(int width, int height) {
  conveyor::filter::image img;
  img.width = width;
  img.height = height;
  img.channels = 3;
  img.pixels.resize(img.samples());
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const std::size_t pixel =
          static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x);
      std::uint8_t* p = &img.pixels[3 * pixel];
      p[0] = static_cast<std::uint8_t>(255 * x / width);
      p[1] = static_cast<std::uint8_t>(255 * y / height);
      p[2] = 96;
      const int dx = x - width / 3;
      const int dy = y - height / 2;
      if (dx * dx + dy * dy < (height / 5) * (height / 5)) p[0] = p[1] = p[2] = 240; // a disc
      if (x > width / 2 && x < width * 5 / 6 && y > height / 4 && y < height * 3 / 4) {
        p[0] = 20; // a rectangle
        p[1] = 40;
        p[2] = 200;
      }
    }
  return img;
}

void doctor_train(const conveyor::train::dataset& data, const cli_options& cli) {
  using namespace conveyor::train;
  fmt::print("\n== train: graph mode with --pdl, 200 training steps of batch 128 (Fashion-MNIST MLP) ==\n");
  std::fflush(stdout);
  auto p = session("train", cli, doctor_warmup_steps);
  train_options o;
  o.epochs = 1;
  o.max_steps = 200;
  o.programmatic = true; // the workload's best configuration: --pdl
  o.profiling = &p;
  (void)run_training(o, data, execution_mode::graph);
  p.finish();
}

void doctor_cavity(const cli_options& cli) {
  using namespace conveyor::cavity;
  cavity_options o;
  o.n = 128;
  o.re = 100.0;
  o.steps_per_graph = 100;
  o.steps = 30 * 100;
  o.tol = 0.0;
  o.programmatic = true; // the workload's best configuration: --pdl
  const checked_options checked(o);
  fmt::print("\n== cavity: graph mode with --pdl, {}, 30 graph launches of 100 time steps ==\n", describe(o));
  std::fflush(stdout);
  auto p = session("cavity", cli, doctor_warmup_steps);
  (void)run_cavity(checked, execution_mode::graph, {}, &p);
  p.finish();
}

void doctor_filter(const cli_options& cli) {
  using namespace conveyor::filter;
  constexpr int width = 640;
  constexpr int height = 480;
  fmt::print("\n== filter: graph mode, 4 generated {}x{} frames (one pinned slot each), 1 + 6 passes ==\n", width,
             height);
  std::fflush(stdout);
  auto p = session("filter", cli, doctor_warmup_steps);
  const image frame = synthetic_frame(width, height);
  std::vector<frame_slot> slots;
  std::vector<std::string> names;
  slots.reserve(4);
  for (int i = 0; i < 4; ++i) {
    slots.emplace_back(width, height);
    slots.back().load(frame);
    names.push_back(fmt::format("frame {}", i + 1));
  }
  filter_chain chain(width, height, filter_params{});
  (void)run_benchmark(chain, slots, names, {execution_mode::graph}, timing_options{1, 6}, &p);
  p.finish();
}

void doctor_solve(const cli_options& cli) {
  using namespace conveyor::solve;
  constexpr int grid = 128;
  fmt::print("\n== solve: graph-per-iteration and graph-while with --pdl, Jacobi-preconditioned CG on 2D Poisson "
             "{0}x{0}, tol 1e-8 ==\n",
             grid);
  std::fflush(stdout);
  const csr_matrix a = poisson_2d(grid);
  const std::vector<double> b = make_rhs(static_cast<std::size_t>(a.rows), rhs_kind::ones);
  cg_solver solver(a, b);
  // No warm-up steps: the solver's constructor ran every kernel once, and graph-while has one step per solve.
  auto p = session("solve", cli, 0);
  solve_options o;
  o.programmatic = true; // the workload's best configuration: --pdl
  o.profiling = &p;
  (void)solver.solve(solve_mode::graph_per_iteration, o);
  (void)solver.solve(solve_mode::graph_while, o);
  p.finish();
}

void run(const cli_options& o) {
  const bool all = o.workload == "all";
  const auto selected = [&](const char* w) { return all || o.workload == w; };
  conveyor::scenarios::check_output_folder("--profile-dir", o.profile_dir);
  // The data set first (no GPU needed to report it); with --workload all a missing one skips train.
  std::optional<conveyor::train::dataset> data;
  std::string train_skipped;
  if (o.data_given && !selected("train"))
    throw conveyor::scenarios::option_error("--data", "is read by the train workload only (--workload train or all)");
  if (selected("train")) {
    try {
      data = conveyor::train::load_fashion_mnist(o.data);
    } catch (const std::exception& e) {
      if (!all || o.data_given) throw; // a folder named on the command line must hold the data
      train_skipped = e.what();
    }
  }
  conveyor::scenarios::require_gpu("`conveyor doctor`");
  if (!o.profile_dir.empty()) std::filesystem::create_directories(o.profile_dir);
  fmt::print("tuning doctor: {} in graph mode, small settings; up to {} profiled launches per graph\ndevice: {}\n",
             all ? std::string("train, cavity, filter, solve") : o.workload, doctor_steps,
             conveyor::describe_device(0));
  if (selected("train")) {
    if (data) doctor_train(*data, o);
    else fmt::print("\n== train: skipped: {} (give --data DIR) ==\n", train_skipped);
  }
  if (selected("cavity")) doctor_cavity(o);
  if (selected("filter")) doctor_filter(o);
  if (selected("solve")) doctor_solve(o);
  if (!o.profile_dir.empty())
    fmt::print("\ntraces: {}/WORKLOAD.json (open them in https://ui.perfetto.dev), graphs coloured by time: "
               "WORKLOAD.dot / .svg\n",
               o.profile_dir);
}

} // namespace

void register_doctor_command(CLI::App& app) {
  auto opts = std::make_shared<cli_options>();
  CLI::App* sub = app.add_subcommand(
      "doctor", "Run the tuning doctor on the workloads in graph mode with small settings (train 200 steps, cavity "
                "128x128, filter 640x480 frames, solve Poisson 128x128; train, cavity and solve with --pdl, their best "
                "configuration) and print each one's findings and fixes");
  std::vector<std::string> choices(workloads.begin(), workloads.end());
  choices.emplace_back("all");
  sub->add_option("--workload", opts->workload, "Workload to examine")
      ->check(CLI::IsMember(choices))
      ->capture_default_str();
  sub->add_option("--profile-dir", opts->profile_dir,
                  "Also write each workload's profile into DIR (created): WORKLOAD.json (Perfetto), WORKLOAD.dot "
                  "and .svg (the graph coloured by time)");
  sub->add_flag("--verbose", opts->verbose,
                "Print each finding in full (every node's full name, the whole evidence) instead of three short lines");
  auto* data = sub->add_option("--data", opts->data, "Folder holding the four Fashion-MNIST IDX .gz files (train)")
                   ->capture_default_str();
  sub->callback([opts, data] {
    opts->data_given = data->count() > 0;
    run(*opts);
  });
}
