//! \file cavity.cpp
//! `conveyor cavity`: options, progress, result tables, outputs.

#include "commands/cavity.hpp"

#include "common/file_output.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/profiling.hpp"

#include "cavity/fields.hpp"
#include "cavity/ghia.hpp"
#include "cavity/image.hpp"
#include "cavity/output.hpp"
#include "cavity/parameters.hpp"
#include "common/usage_error.hpp"
#include "cavity/reference_cpu.hpp"
#include "cavity/solver.hpp"

#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::scenarios::usage_error;

namespace {

using namespace conveyor::cavity;

struct cli_options {
  cavity_options run;
  std::string mode = "all";
  std::string csv;
  std::string png;
  std::string dot;
  std::string ghia;
  double bandwidth_gbs = 4300.0; // --bandwidth: device memory bandwidth for the bound, GB/s
  conveyor::scenarios::profiling_cli profile; // --profile, --profile-steps, --doctor
  bool pdl_trigger_given = false; // --pdl-trigger was on the command line (its default included)
  int gpus = 1;                    // --gpus N: slabs on devices 0..N-1
  std::vector<int> devices;        // --devices LIST: the device of each slab (may repeat); empty: from --gpus
  bool halo_copy_given = false;    // --halo-copy was on the command line
};

//! The slab devices of the command line: --devices as given, else 0..--gpus - 1 (conveyor::first_devices). Checked
//! against the visible devices before any GPU work (so also where none is visible), except the default, --gpus 1,
//! which the "no CUDA device" check handles.
//! \throws std::invalid_argument naming the option when a device is not visible.
std::vector<int> slab_devices(const cli_options& c) {
  if (!c.devices.empty()) {
    const int visible = conveyor::device_count();
    const int highest = *std::max_element(c.devices.begin(), c.devices.end());
    if (highest >= visible)
      throw std::invalid_argument(fmt::format("--devices: device {} asked for, but {} CUDA device(s) are visible{}",
                                              highest, visible,
                                              visible > 0 ? fmt::format(" (0..{})", visible - 1) : std::string()));
    return c.devices;
  }
  if (c.gpus == 1) return {0};
  try {
    return conveyor::first_devices(c.gpus);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--gpus {}: {}", c.gpus, e.what()));
  }
}

//! FNV-1a (64 bits) of the bytes of `values`: one number that says whether two runs' final states are bitwise equal.
std::uint64_t fnv1a(const std::vector<float>& values) noexcept {
  std::uint64_t h = 14695981039346656037ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size() * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ULL;
  }
  return h;
}

//! Progress on stderr, at most one line every two seconds per mode, plus the last check.
class progress_printer {
public:
  void operator()(const run_progress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (p.step != p.max_steps && now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    fmt::print(stderr, "cavity[{}] step {}/{}  change per step {:.3e}\n", to_string(p.mode), p.step, p.max_steps,
               p.change);
  }

private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

//! "graph", or "graph+pdl" when the run was programmatic.
std::string mode_label(const run_result& r) {
  return r.programmatic ? fmt::format("{}+pdl", to_string(r.mode)) : std::string(to_string(r.mode));
}

//! Bytes one cell update moves: D2Q9 reads 9 float32 populations and writes 9 (the pull scheme's only traffic).
constexpr double bytes_per_cell_update = 2.0 * q * sizeof(float);

void print_table(const std::vector<run_result>& results, const cavity_options& o, double bandwidth_gbs) {
  const run_result* sync = nullptr;
  for (const auto& r : results)
    if (r.mode == execution_mode::sync) sync = &r;
  // The memory-bandwidth bound: every cell update moves bytes_per_cell_update bytes at bandwidth_gbs, on each of
  // the distinct devices the slabs run on.
  const std::vector<int> distinct = distinct_devices(o.devices);
  const double bound_mlups = static_cast<double>(distinct.size()) * bandwidth_gbs * 1e9 / bytes_per_cell_update / 1e6;
  fmt::print("{:<10} | {:>9} | {:>9} | {:>11} | {:>8} | {:>15} | {:>8} | {:>20}\n", "mode", "steps", "time (s)",
             "us/step", "MLUPS", "speedup vs sync", "of bound", "converged");
  fmt::print("{:-<10}-+-{:-<9}-+-{:-<9}-+-{:-<11}-+-{:-<8}-+-{:-<15}-+-{:-<8}-+-{:-<20}\n", "", "", "", "", "", "", "",
             "");
  for (const auto& r : results) {
    const std::string speedup =
        sync != nullptr && r.ms_per_step > 0.0 ? fmt::format("{:.2f}x", sync->ms_per_step / r.ms_per_step) : "n/a";
    const std::string converged =
        o.tol > 0.0 ? (r.converged ? fmt::format("yes, step {}", r.converged_at) : "no (step cap)") : "(fixed steps)";
    fmt::print("{:<10} | {:>9} | {:>9.3f} | {:>11.3f} | {:>8.1f} | {:>15} | {:>7.1f}% | {:>20}\n", mode_label(r),
               r.steps, r.seconds, 1000.0 * r.ms_per_step, r.mlups, speedup, 100.0 * r.mlups / bound_mlups,
               converged);
  }
  fmt::print("bound MLUPS {:.1f}: {:.0f} bytes per cell update (D2Q9 float32: 9 populations read, 9 written) at "
             "{:g} GB/s (--bandwidth){}\n",
             bound_mlups, bytes_per_cell_update, bandwidth_gbs,
             distinct.size() > 1 ? fmt::format(" on each of {} devices", distinct.size()) : std::string());
  for (const auto& r : results)
    if (r.mode == execution_mode::graph) {
      if (o.devices.size() == 1)
        fmt::print("{}: {} time steps + convergence check per graph = {} nodes, {} edges ({} programmatic); build + "
                   "instantiate + upload {:.2f} ms\n",
                   mode_label(r), o.steps_per_graph, r.graph_nodes, r.graph_edges, r.programmatic_edges,
                   r.setup_ms);
      else
        fmt::print("{}: {} time steps on {} slabs + convergence check per graph = {} nodes ({} memcpy), {} edges ({} "
                   "programmatic); build + instantiate + upload {:.2f} ms\n",
                   mode_label(r), o.steps_per_graph, o.devices.size(), r.graph_nodes, r.graph_copies, r.graph_edges,
                   r.programmatic_edges, r.setup_ms);
    }
  for (std::size_t i = 1; i < results.size(); ++i) {
    const auto& a = results[0];
    const auto& b = results[i];
    if (a.steps != b.steps) {
      fmt::print("state {} vs {}: DIFFER, {} vs {} steps\n", mode_label(a), mode_label(b), a.steps, b.steps);
      continue;
    }
    const bool equal = a.populations.size() == b.populations.size() &&
                       std::memcmp(a.populations.data(), b.populations.data(), a.populations.size() * sizeof(float)) == 0;
    double worst = 0.0;
    for (std::size_t k = 0; !equal && k < std::min(a.populations.size(), b.populations.size()); ++k)
      worst = std::max(worst, std::fabs(double{a.populations[k]} - double{b.populations[k]}));
    if (equal)
      fmt::print("state {} vs {}: bitwise identical after {} steps\n", mode_label(a), mode_label(b), a.steps);
    else
      fmt::print("state {} vs {}: DIFFER after {} steps, max |df| {:.3g}\n", mode_label(a), mode_label(b), a.steps,
                 worst);
  }
}

void print_difference(const char* what, const char* axis, const profile_difference& d) {
  fmt::print("  {}: max |ours - Ghia| = {:.4f} at {} = {:.4f} (ours {:.5f}, Ghia {:.5f}; {} points{})\n", what,
             d.max_abs, axis, d.position, d.ours, d.reference, d.compared,
             d.skipped > 0 ? fmt::format(", {} doubtful left out", d.skipped) : std::string());
}

void run(const cli_options& c) {
  cavity_options o = c.run;
  validate(o);
  std::vector<execution_mode> modes;
  if (c.mode == "all")
    modes.assign(all_execution_modes.begin(), all_execution_modes.end());
  else
    modes.push_back(parse_execution_mode(c.mode));
  const bool has_graph = std::find(modes.begin(), modes.end(), execution_mode::graph) != modes.end();
  if (!c.dot.empty() && !has_graph) throw usage_error("--dot needs --mode graph or --mode all");
  if (!o.programmatic && c.pdl_trigger_given)
    throw usage_error("--pdl-trigger: applies to --pdl only; without it it would be ignored");
  if (o.programmatic && c.mode == "sync")
    throw usage_error("--pdl: applies to the stream and graph modes (sync waits for every kernel); use "
                                "--mode stream, graph or all");
  conveyor::scenarios::check_profiling_options(c.profile, has_graph, "--mode graph or --mode all");
  const bool several = !c.devices.empty() ? c.devices.size() > 1 : c.gpus > 1;
  if (c.halo_copy_given && !several)
    throw usage_error("--halo-copy: applies to several slabs (--gpus N > 1, or --devices with more than one "
                                "entry); one slab has no halo rows");
  if (several && (!c.profile.trace.empty() || c.profile.doctor))
    throw usage_error(fmt::format("{}: with one slab only (--gpus 1): the profiler follows one device",
                                            c.profile.doctor ? "--doctor" : "--profile"));

  // Reference data: an explicit --ghia must be readable; the default is used when present.
  std::optional<ghia_reference> ghia;
  std::string ghia_note;
  if (!c.ghia.empty()) {
    ghia = read_ghia_dir(c.ghia);
  } else if (const auto dir = default_ghia_dir()) {
    try {
      ghia = read_ghia_dir(*dir);
    } catch (const ghia_error& e) {
      ghia_note = fmt::format("Ghia et al. comparison skipped: {}", e.what());
    }
  } else {
    ghia_note = "Ghia et al. comparison skipped: no --ghia DIR, CONVEYOR_SHARED_DATA unset and no "
                "../shared/data/ghia1982 here";
  }

  conveyor::scenarios::check_output_file("--png", c.png);
  conveyor::scenarios::check_output_file("--dot", c.dot);
  conveyor::scenarios::check_output_folder("--csv", c.csv);
  conveyor::scenarios::check_distinct_outputs(
      {{"--png", c.png}, {"--dot", c.dot}, {"--profile", c.profile.trace},
       {"--profile (its DOT file)", conveyor::scenarios::profile_dot_path(c.profile.trace)}});
  o.devices = slab_devices(c); // the last check: how many devices are visible
  validate(o);
  if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: `conveyor cavity` needs a GPU");
  fmt::print("lid-driven cavity, D2Q9 TRT lattice Boltzmann: {}\n", describe(o));
  fmt::print("up to {} steps ({:.0f} convective times n/U), {} steps per graph / convergence check, stop when the "
             "velocity change per step / U < {:g}\n",
             max_steps(o), static_cast<double>(max_steps(o)) / derive(o).convective_time, o.steps_per_graph, o.tol);
  const std::vector<int> distinct = distinct_devices(o.devices);
  for (const int d : distinct)
    fmt::print("device{}: {}\n", distinct.size() > 1 ? fmt::format(" {}", d) : std::string(),
               conveyor::describe_device(d));
  if (o.devices.size() > 1) {
    std::string rows;
    for (int s = 0; s < static_cast<int>(o.devices.size()); ++s) {
      const auto [begin, end] = slab_rows(o.n, static_cast<int>(o.devices.size()), s);
      rows += fmt::format("{}rows [{}, {}) on device {}", s > 0 ? ", " : "", begin, end,
                          o.devices[static_cast<std::size_t>(s)]);
    }
    fmt::print("slabs: {}: {}; halo rows exchanged after every step ({})\n", o.devices.size(), rows,
               o.halo_copy == "1d" ? "--halo-copy 1d: one copy per crossing population, 3 per halo row"
                                   : "--halo-copy 2d: one strided copy of 5 population rows per halo row");
  }
  std::fflush(stdout);

  const auto profiling = conveyor::scenarios::make_profiling(c.profile, "cavity");
  std::vector<run_result> results;
  for (const auto mode : modes) {
    progress_printer progress;
    results.push_back(run_cavity(o, mode, std::ref(progress), profiling.get()));
    const auto& r = results.back();
    fmt::print(stderr, "cavity[{}] done: {} steps in {:.3f} s, change per step {:.3e}\n", mode_label(r), r.steps,
               r.seconds, r.final_change);
    if (results.size() == 1)
      for (const auto& line : r.peer_access) fmt::print("peer access: {}\n", line);
  }
  print_table(results, o, c.bandwidth_gbs);
  for (const auto& r : results)
    fmt::print("final state {}: FNV-1a 64 {:016x} over {} float32 populations after {} steps\n", mode_label(r),
               fnv1a(r.populations), r.populations.size(), r.steps);
  std::fflush(stdout);
  // Files after the table, so that a file system failing now does not lose the results; all written atomically.
  for (const auto& r : results)
    if (r.mode == execution_mode::graph && !c.dot.empty()) {
      conveyor::scenarios::write_file_atomically(c.dot, r.graph_dot);
      fmt::print(stderr, "wrote the {}-step graph to {}\n", o.steps_per_graph, c.dot);
    }

  // Physics of the final state (identical in every mode when the line above says so): the last mode's.
  const run_result& r = results.back();
  const double mass0 = total_mass(initial_populations(o.n));
  const double mass = total_mass(r.populations);
  fmt::print("mass: relative drift {:.3e} over {} steps (float64 sum of float32 populations)\n",
             (mass - mass0) / mass0, r.steps);
  const flow_field field = compute_fields(r.populations, o.n);
  const profile u = u_vertical_centerline(field, o.lid_speed);
  const profile v = v_horizontal_centerline(field, o.lid_speed);

  if (ghia) {
    if (const auto cmp = compare_with_ghia(*ghia, o.re, u, v)) {
      const auto target = ghia_target(o.re);
      fmt::print("Ghia, Ghia & Shin (1982), Re {:g}, profiles interpolated linearly at the tabulated points{}:\n",
                 o.re, target ? fmt::format(" (target on >= 257x257: < {:g})", *target) : std::string());
      print_difference("u/U on x = 1/2 (Table I) ", "y", cmp->u);
      print_difference("v/U on y = 1/2 (Table II)", "x", cmp->v);
      if (cmp->v_trusted.skipped > 0)
        print_difference("v/U without the doubtful x = 0.9063 entry (SOURCES.md)", "x", cmp->v_trusted);
      if (cmp->u_trusted.skipped > 0)
        print_difference("u/U without doubtful entries (SOURCES.md)", "y", cmp->u_trusted);
    } else {
      fmt::print("Ghia et al. comparison skipped: they tabulate Re 100, 400, 1000, 3200, 5000, 7500, 10000, not "
                 "{:g}\n",
                 o.re);
    }
  } else {
    fmt::print("{}\n", ghia_note);
  }

  if (!c.csv.empty()) {
    const std::filesystem::path dir(c.csv);
    std::filesystem::create_directories(dir);
    const std::string stem = fmt::format("cavity_re{:g}_n{}", o.re, o.n);
    write_profile_csv(dir / (stem + "_u.csv"), u, "y", "u_over_U");
    write_profile_csv(dir / (stem + "_v.csv"), v, "x", "v_over_U");
    if (ghia && ghia->u.column(o.re) != nullptr && ghia->v.column(o.re) != nullptr)
      write_ghia_csv(dir / (stem + "_ghia.csv"), *ghia, o.re, u, v);
    fmt::print(stderr, "wrote the centre-line profiles to {}/{}_*.csv\n", dir.string(), stem);
  }
  if (!c.png.empty()) {
    write_png(c.png, render_cavity(field, o.lid_speed));
    fmt::print(stderr, "wrote the velocity magnitude with streamlines to {}\n", c.png);
  }
  if (profiling) profiling->finish();
}

} // namespace

void register_cavity_command(CLI::App& app) {
  auto opts = std::make_shared<cli_options>();
  CLI::App* sub = app.add_subcommand(
      "cavity", "2D lid-driven cavity, D2Q9 lattice Boltzmann (TRT), in sync, stream and graph modes; report MLUPS, "
                "speedup and the difference from Ghia et al. (1982)");
  using conveyor::scenarios::integer_in;
  using conveyor::scenarios::real_in;
  // Each option's own range here; validate() then checks them together (Re against n and the lid speed, ...).
  sub->add_option("--re", opts->run.re, "Reynolds number U n / nu (at most 10 n)")
      ->check(real_in({0.0, max_cell_reynolds * max_cells, true, false, false}))
      ->capture_default_str();
  sub->add_option("--n", opts->run.n, "Lattice cells per side")
      ->check(integer_in(min_cells, max_cells))
      ->capture_default_str();
  sub->add_option("--lid-speed", opts->run.lid_speed, "Lid velocity, lattice units (cells per step; Ma = U sqrt 3)")
      ->check(real_in({min_lid_speed, max_lid_speed, false, false, true})) // a float on the GPU
      ->capture_default_str();
  sub->add_option("--steps", opts->run.steps,
                  "Most time steps (a multiple of --steps-per-graph); 0: 250 convective times n / U")
      ->check(integer_in(std::int64_t{0}, max_run_steps))
      ->capture_default_str();
  sub->add_option("--tol", opts->run.tol,
                  "Stop when the max velocity change per step / U falls below this; 0: run exactly --steps")
      ->check(real_in({0.0, 1.0, false, false, false}))
      ->capture_default_str();
  sub->add_option("--steps-per-graph", opts->run.steps_per_graph,
                  "K: time steps per graph and per convergence check (even)")
      ->check(integer_in(2, max_steps_per_graph))
      ->capture_default_str();
  sub->add_option("--mode", opts->mode, "Execution mode")
      ->check(CLI::IsMember({"sync", "stream", "graph", "all"}))
      ->capture_default_str();
  sub->add_flag("--pdl", opts->run.programmatic,
                "Programmatic dependent launch in the stream and graph modes: each kernel may start while the one "
                "before it finishes (and waits for it before touching the populations); states stay bitwise equal");
  sub->add_option("--pdl-trigger", opts->run.pdl_trigger,
                  "With --pdl: where the step kernel lets the next step launch: exit (when its blocks exit), "
                  "after-wait (after its own wait for the previous step) or early (as its blocks start)")
      ->check(CLI::IsMember({"exit", "after-wait", "early"}))
      ->capture_default_str();
  sub->add_option("--step-layout", opts->run.step_layout,
                  "How the step kernel covers the lattice: flat (256 consecutive cells a block, no idle block) or "
                  "rows (128-cell blocks per lattice row, as before); the same arithmetic, bitwise the same states")
      ->check(CLI::IsMember({"flat", "rows"}))
      ->capture_default_str();
  CLI::Option* gpus =
      sub->add_option("--gpus", opts->gpus,
                      "Split the lattice into N horizontal slabs of rows on devices 0..N-1, halo rows exchanged by "
                      "peer copies after every step (one graph per block across the devices); bitwise the same "
                      "results as one GPU")
          ->check(integer_in(1, max_slabs))
          ->capture_default_str();
  sub->add_option("--devices", opts->devices,
                  "The device of each slab, bottom slab first, comma-separated; may repeat (0,0: two slabs on one "
                  "GPU, the multi-GPU code on one device)")
      ->delimiter(',')
      ->check(integer_in(0, 1023))
      ->excludes(gpus);
  sub->add_option("--halo-copy", opts->run.halo_copy,
                  "With several slabs: how a halo row is copied: 2d (one strided copy of the 5 population rows from "
                  "the first to the last that cross the boundary) or 1d (one copy per crossing population, 3)")
      ->check(CLI::IsMember({"2d", "1d"}))
      ->capture_default_str();
  sub->add_option("--bandwidth", opts->bandwidth_gbs,
                  "Device memory bandwidth in GB/s for the bound printed beside MLUPS (72 bytes per cell update); "
                  "default: the H200's measured copy bandwidth")
      ->check(real_in({1.0, 1e6, false, false, false}))
      ->capture_default_str();
  sub->add_option("--csv", opts->csv, "Write the centre-line profiles (and the Ghia comparison) as CSV into DIR");
  sub->add_option("--png", opts->png, "Write the velocity magnitude with streamlines as PNG to FILE");
  sub->add_option("--dot", opts->dot, "Write the K-step graph (Graphviz DOT) to FILE");
  sub->add_option("--ghia", opts->ghia,
                  "Folder of Ghia et al.'s CSV tables (default: $CONVEYOR_SHARED_DATA/ghia1982, else "
                  "../shared/data/ghia1982 when present)");
  conveyor::scenarios::add_profiling_options(
      *sub, opts->profile, "one block of K = --steps-per-graph time steps and its convergence check (one graph launch "
                           "in graph mode)",
      "--mode graph or --mode all");
  sub->callback([opts, sub] {
    opts->pdl_trigger_given = sub->count("--pdl-trigger") > 0;
    opts->halo_copy_given = sub->count("--halo-copy") > 0;
    run(*opts);
  });
}
