//! \file cavity.cpp
//! `conveyor cavity`: options, progress, result tables, the physics checks, outputs.

#include "commands/cavity.hpp"

#include "common/require_gpu.hpp"
#include "common/file_output.hpp"
#include "common/hash.hpp"
#include "common/mode_option.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/graph_saving.hpp"
#include "common/profiling.hpp"
#include "common/results_table.hpp"
#include "common/usage_error.hpp"

#include "cavity/fields.hpp"
#include "cavity/ghia.hpp"
#include "cavity/image.hpp"
#include "cavity/output.hpp"
#include "cavity/parameters.hpp"
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
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::scenarios::option_error;
using conveyor::scenarios::usage_error;

namespace {

using namespace conveyor::cavity;

struct cli_options {
  cavity_options run;
  conveyor::scenarios::mode_option mode; // --mode
  std::string csv;
  std::string png;
  std::string dot;
  std::string ghia;
  double bandwidth_gbs = 4300.0;              // --bandwidth: device memory bandwidth for the bound, GB/s
  conveyor::scenarios::profiling_cli profile; // --profile, --profile-steps, --doctor
  conveyor::scenarios::graph_saving_cli save; // --save-graph, --save-graph-contents, --check-saved-graph
  bool pdl_trigger_given = false;             // --pdl-trigger was on the command line (its default included)
  int gpus = 1;                               // --gpus N: slabs on devices 0..N-1
  std::vector<int> devices;     // --devices LIST: the device of each slab (may repeat); empty: from --gpus
  bool halo_copy_given = false; // --halo-copy was on the command line
};

//! The options of the command line as validate() names them.
constexpr option_names cavity_names{
    "--re", "--n", "--lid-speed", "--steps", "--tol", "--steps-per-graph", "--gpus / --devices", "--halo-copy"};

//! The slab devices the command line asks for, before any is counted: --devices as given, else 0..--gpus - 1.
std::vector<int> requested_devices(const cli_options& c) {
  if (!c.devices.empty()) return c.devices;
  std::vector<int> devices(static_cast<std::size_t>(c.gpus));
  for (int d = 0; d < c.gpus; ++d) devices[static_cast<std::size_t>(d)] = d;
  return devices;
}

//! Checks that the slab devices are visible, before any GPU work (so also where none is visible), except the
//! default, --gpus 1, which the "no CUDA device" check handles.
//! \throws std::invalid_argument naming the option when a device is not visible.
void check_devices_visible(const cli_options& c) {
  if (!c.devices.empty()) {
    const int visible = conveyor::device_count();
    const int highest = *std::max_element(c.devices.begin(), c.devices.end());
    if (highest >= visible)
      throw std::invalid_argument(fmt::format("--devices: device {} asked for, but {} CUDA device(s) are visible{}",
                                              highest, visible,
                                              visible > 0 ? fmt::format(" (0..{})", visible - 1) : std::string()));
    return;
  }
  if (c.gpus == 1) return;
  try {
    (void)conveyor::first_devices(c.gpus);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--gpus {}: {}", c.gpus, e.what()));
  }
}

//! The options together (validate(), named as on the command line) and the combinations that would be ignored.
//! Returns the checked options.
//! \throws usage_error naming the option.
checked_options check_options(const cli_options& c) {
  cavity_options o = c.run;
  o.devices = requested_devices(c);
  std::optional<checked_options> checked;
  try {
    checked.emplace(o, cavity_names);
  } catch (const invalid_options& e) {
    throw usage_error(e.what());
  }
  const bool has_graph = c.mode.selects_graph();
  if (!c.dot.empty() && !has_graph) throw option_error("--dot", "needs " + c.mode.graph_modes());
  if (!o.programmatic && c.pdl_trigger_given)
    throw option_error("--pdl-trigger", "applies to --pdl only; without it it would be ignored");
  if (o.programmatic && c.mode.is_only(execution_mode::sync))
    throw option_error("--pdl", "applies to the stream and graph modes (sync waits for every kernel); use --mode "
                                "stream, graph or all");
  conveyor::scenarios::check_profiling_options(c.profile, has_graph, c.mode.graph_modes());
  conveyor::scenarios::check_graph_saving_options(c.save, has_graph);
  const bool several = o.devices.size() > 1;
  if (c.halo_copy_given && !several)
    throw option_error("--halo-copy", "applies to several slabs (--gpus N > 1, or --devices with more than one "
                                      "entry); one slab has no halo rows");
  if (several && (!c.profile.trace.empty() || c.profile.doctor))
    throw option_error(c.profile.doctor ? "--doctor" : "--profile", "with one slab only (--gpus 1): the profiler "
                                                                    "follows one device");
  return *checked;
}

//! The output paths, then (the last check) whether the slab devices are visible.
//! \throws std::invalid_argument naming the option.
void check_outputs_and_devices(const cli_options& c) {
  conveyor::scenarios::check_output_file("--png", c.png);
  conveyor::scenarios::check_output_file("--dot", c.dot);
  conveyor::scenarios::check_output_folder("--csv", c.csv);
  conveyor::scenarios::check_distinct_outputs(
      {{"--png", c.png},
       {"--dot", c.dot},
       {"--profile", c.profile.trace},
       {"--profile (its DOT file)", conveyor::scenarios::profile_dot_path(c.profile.trace)}});
  check_devices_visible(c);
}

//! Ghia et al.'s tables: an explicit --ghia must be readable; the default is used when present. Without them, the
//! reason the comparison is skipped goes into `note`.
//! \throws ghia_error when an explicit --ghia cannot be read.
std::optional<ghia_reference> load_ghia(const cli_options& c, std::string& note) {
  if (!c.ghia.empty()) {
    conveyor::scenarios::check_input_folder("--ghia", c.ghia);
    try {
      return read_ghia_dir(c.ghia);
    } catch (const ghia_error& e) {
      throw conveyor::scenarios::input_error(fmt::format("--ghia '{}': {}", c.ghia, e.what()));
    }
  }
  if (const auto dir = default_ghia_dir()) {
    try {
      return read_ghia_dir(*dir);
    } catch (const ghia_error& e) {
      note = fmt::format("Ghia et al. comparison skipped: {}", e.what());
      return std::nullopt;
    }
  }
  note = "Ghia et al. comparison skipped: no --ghia DIR, CONVEYOR_SHARED_DATA unset and no ../shared/data/ghia1982 "
         "here";
  return std::nullopt;
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
std::string mode_label(const run_result& r) { return conveyor::scenarios::mode_label(r.mode, r.programmatic); }

//! Bytes one cell update moves: D2Q9 reads 9 float32 populations and writes 9 (the pull scheme's only traffic).
constexpr double bytes_per_cell_update = 2.0 * q * sizeof(float);

//! The run's header: the physics, the run length, the devices and the slabs.
void print_header(const cavity_options& o) {
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
}

//! The results table, the bound it compares with, and each graph mode's graph.
void print_table(const std::vector<run_result>& results, const cavity_options& o, double bandwidth_gbs) {
  // The memory-bandwidth bound: every cell update moves bytes_per_cell_update bytes at bandwidth_gbs, on each of
  // the distinct devices the slabs run on.
  const std::vector<int> distinct = distinct_devices(o.devices);
  const double bound_mlups = static_cast<double>(distinct.size()) * bandwidth_gbs * 1e9 / bytes_per_cell_update / 1e6;
  using table = conveyor::scenarios::results_table;
  table t({{"mode", 10, true},
           {"steps", 9},
           {"time (s)", 9},
           {"us/step", 11},
           {"MLUPS", 8},
           table::speedup_column(),
           {"of bound", 8},
           {"converged", 20}});
  for (const auto& r : results)
    t.add_row(r.mode, r.ms_per_step,
              {mode_label(r), fmt::format("{}", r.steps), fmt::format("{:.3f}", r.seconds),
               fmt::format("{:.3f}", 1000.0 * r.ms_per_step), fmt::format("{:.1f}", r.mlups),
               fmt::format("{:.1f}%", 100.0 * r.mlups / bound_mlups),
               o.tol > 0.0 ? (r.converged ? fmt::format("yes, step {}", r.converged_at) : "no (step cap)")
                           : "(fixed steps)"});
  fmt::print("{}", t.text());
  fmt::print("bound MLUPS {:.1f}: {:.0f} bytes per cell update (D2Q9 float32: 9 populations read, 9 written) at "
             "{:g} GB/s (--bandwidth){}\n",
             bound_mlups, bytes_per_cell_update, bandwidth_gbs,
             distinct.size() > 1 ? fmt::format(" on each of {} devices", distinct.size()) : std::string());
  for (const auto& r : results) {
    if (r.mode != execution_mode::graph) continue;
    if (o.devices.size() == 1)
      fmt::print("{}: {} time steps + convergence check per graph = {} nodes, {} edges ({} programmatic); build + "
                 "instantiate + upload {:.2f} ms\n",
                 mode_label(r), o.steps_per_graph, r.graph_nodes, r.graph_edges, r.programmatic_edges, r.setup_ms);
    else
      fmt::print("{}: {} time steps on {} slabs + convergence check per graph = {} nodes ({} memcpy), {} edges ({} "
                 "programmatic); build + instantiate + upload {:.2f} ms\n",
                 mode_label(r), o.steps_per_graph, o.devices.size(), r.graph_nodes, r.graph_copies, r.graph_edges,
                 r.programmatic_edges, r.setup_ms);
  }
}

//! Each mode's final state against the first mode's: bitwise, or the largest difference; then every state's hash.
void print_state_checks(const std::vector<run_result>& results) {
  for (std::size_t i = 1; i < results.size(); ++i) {
    const auto& a = results[0];
    const auto& b = results[i];
    if (a.steps != b.steps) {
      fmt::print("state {} vs {}: DIFFER, {} vs {} steps\n", mode_label(a), mode_label(b), a.steps, b.steps);
      continue;
    }
    const bool equal =
        a.populations.size() == b.populations.size() &&
        std::memcmp(a.populations.data(), b.populations.data(), a.populations.size() * sizeof(float)) == 0;
    double worst = 0.0;
    for (std::size_t k = 0; !equal && k < std::min(a.populations.size(), b.populations.size()); ++k)
      worst = std::max(worst, std::fabs(double{a.populations[k]} - double{b.populations[k]}));
    if (equal) fmt::print("state {} vs {}: bitwise identical after {} steps\n", mode_label(a), mode_label(b), a.steps);
    else
      fmt::print("state {} vs {}: DIFFER after {} steps, max |df| {:.3g}\n", mode_label(a), mode_label(b), a.steps,
                 worst);
  }
  for (const auto& r : results)
    fmt::print("final state {}: FNV-1a 64 {:016x} over {} float32 populations after {} steps\n", mode_label(r),
               conveyor::scenarios::fnv1a_of(std::span<const float>(r.populations)), r.populations.size(), r.steps);
}

//! Every selected mode, one after the other, with progress on stderr.
//! \throws std::runtime_error naming the options to change when a run diverges; the runs' other errors.
std::vector<run_result> run_modes(const cli_options& c, const checked_options& o,
                                  conveyor::scenarios::profiling* profiling) {
  std::vector<run_result> results;
  for (const auto& mode : c.mode.selected()) {
    progress_printer progress;
    try {
      results.push_back(run_cavity(o, mode.kind, std::ref(progress), profiling));
    } catch (const diverged& e) {
      throw std::runtime_error(fmt::format("the run diverged by step {} (velocity change {}): {}; try a lower "
                                           "--lid-speed, a lower --re or a larger --n",
                                           e.step(), e.change(), e.run()));
    }
    const auto& r = results.back();
    fmt::print(stderr, "cavity[{}] done: {} steps in {:.3f} s, change per step {:.3e}\n", mode_label(r), r.steps,
               r.seconds, r.final_change);
    if (results.size() == 1)
      for (const auto& line : r.peer_access) fmt::print("peer access: {}\n", line);
  }
  return results;
}

void print_difference(const char* what, const char* axis, const profile_difference& d) {
  fmt::print("  {}: max |ours - Ghia| = {:.4f} at {} = {:.4f} (ours {:.5f}, Ghia {:.5f}; {} points{})\n", what,
             d.max_abs, axis, d.position, d.ours, d.reference, d.compared,
             d.skipped > 0 ? fmt::format(", {} doubtful left out", d.skipped) : std::string());
}

//! The centre-line profiles against Ghia et al.'s tables, or why they are not compared.
void print_ghia(const std::optional<ghia_reference>& ghia, const std::string& note, double re, const profile& u,
                const profile& v) {
  if (!ghia) {
    fmt::print("{}\n", note);
    return;
  }
  const auto cmp = compare_with_ghia(*ghia, re, u, v);
  if (!cmp) {
    fmt::print("Ghia et al. comparison skipped: they tabulate Re 100, 400, 1000, 3200, 5000, 7500, 10000, not {:g}\n",
               re);
    return;
  }
  const auto target = ghia_target(re);
  fmt::print("Ghia, Ghia & Shin (1982), Re {:g}, profiles interpolated linearly at the tabulated points{}:\n", re,
             target ? fmt::format(" (target on >= 257x257: < {:g})", *target) : std::string());
  print_difference("u/U on x = 1/2 (Table I) ", "y", cmp->u);
  print_difference("v/U on y = 1/2 (Table II)", "x", cmp->v);
  if (cmp->v_trusted.skipped > 0)
    print_difference("v/U without the doubtful x = 0.9063 entry (SOURCES.md)", "x", cmp->v_trusted);
  if (cmp->u_trusted.skipped > 0) print_difference("u/U without doubtful entries (SOURCES.md)", "y", cmp->u_trusted);
}

//! The files of the final state, after the tables (a file system failing then loses no result), each written
//! atomically: --csv (the centre-line profiles and the Ghia comparison), --png.
void write_outputs(const cli_options& c, const cavity_options& o, const std::optional<ghia_reference>& ghia,
                   const flow_field& field, const profile& u, const profile& v) {
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
}

void run(const cli_options& c) {
  const checked_options o = check_options(c);
  std::string ghia_note;
  const std::optional<ghia_reference> ghia = load_ghia(c, ghia_note); // an explicit --ghia must be readable
  check_outputs_and_devices(c);
  conveyor::scenarios::require_gpu("`conveyor cavity`");
  print_header(*o);

  const auto saving = conveyor::scenarios::make_graph_saving(c.save); // before the first kernel
  const auto profiling = conveyor::scenarios::make_profiling(c.profile, "cavity");
  const std::vector<run_result> results = run_modes(c, o, profiling.get());
  print_table(results, *o, c.bandwidth_gbs);
  print_state_checks(results);
  std::fflush(stdout);
  for (const auto& r : results)
    if (r.mode == execution_mode::graph && !c.dot.empty()) {
      conveyor::scenarios::write_file_atomically(c.dot, r.graph_dot);
      fmt::print(stderr, "wrote the {}-step graph to {}\n", o->steps_per_graph, c.dot);
    }

  // Physics of the final state (identical in every mode when the lines above say so): the last mode's.
  const run_result& r = results.back();
  const double mass0 = total_mass(initial_populations(o->n));
  const double mass = total_mass(r.populations);
  fmt::print("mass: relative drift {:.3e} over {} steps (float64 sum of float32 populations)\n", (mass - mass0) / mass0,
             r.steps);
  const flow_field field = compute_fields(r.populations, o->n);
  const profile u = u_vertical_centerline(field, o->lid_speed);
  const profile v = v_horizontal_centerline(field, o->lid_speed);
  print_ghia(ghia, ghia_note, o->re, u, v);
  write_outputs(c, *o, ghia, field, u, v);
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
  opts->mode.add_to(*sub);
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
                  "rows (128-cell blocks per lattice row); the same arithmetic, bitwise the same states")
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
  conveyor::scenarios::add_graph_saving_options(*sub, opts->save,
                                                "the block graph (K time steps and the convergence check)");
  conveyor::scenarios::add_profiling_options(
      *sub, opts->profile,
      "one block of K = --steps-per-graph time steps and its convergence check (one graph launch "
      "in graph mode)",
      opts->mode.graph_modes());
  sub->callback([opts, sub] {
    opts->pdl_trigger_given = sub->count("--pdl-trigger") > 0;
    opts->halo_copy_given = sub->count("--halo-copy") > 0;
    run(*opts);
  });
}
