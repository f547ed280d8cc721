//! \file solve.cpp
//! `conveyor solve`: options, problem set-up, result table.

#include "commands/solve.hpp"

#include "common/require_gpu.hpp"
#include "common/file_output.hpp"
#include "common/mode_option.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/graph_saving.hpp"
#include "common/profiling.hpp"
#include "common/results_table.hpp"
#include "common/usage_error.hpp"

#include "solve/cg_solver.hpp"
#include "solve/matrix_market.hpp"
#include "solve/problem.hpp"

#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::scenarios::option_error;

namespace {

using namespace conveyor::solve;

//! The solver's modes as the --mode option offers them, in --mode all order.
std::vector<conveyor::scenarios::run_mode> solver_modes() {
  std::vector<conveyor::scenarios::run_mode> modes;
  for (const solve_mode m : all_solve_modes) modes.push_back(as_run_mode(m));
  return modes;
}

//! The solver's mode that is the run mode `m`.
//! \throws std::invalid_argument for a run mode the solver does not have.
solve_mode solver_mode(const conveyor::scenarios::run_mode& m) {
  for (const solve_mode s : all_solve_modes)
    if (as_run_mode(s) == m) return s;
  throw std::invalid_argument("conveyor solve: no mode " + conveyor::scenarios::to_string(m));
}

struct cli_options {
  std::string matrix;
  int poisson = 0;
  int poisson3d = 0;
  std::string rhs = "ones";
  std::uint64_t seed = 1;
  double tol = 1e-8;
  int max_iter = 0;
  conveyor::scenarios::mode_option mode{solver_modes()}; // --mode
  std::string dot;
  bool seed_given = false;                    // --seed on the command line (it applies to --rhs random only)
  conveyor::scenarios::profiling_cli profile; // --profile, --profile-steps, --doctor
  conveyor::scenarios::graph_saving_cli save; // --save-graph, --save-graph-contents, --check-saved-graph
  std::string readback = "mapped";            // --readback
  bool pdl = false;                           // --pdl
};

struct problem {
  std::string name;
  csr_matrix a;
};

//! Refuses a generated problem whose CSR matrix (about 16 bytes per nonzero with the solver's vectors and the
//! host copies) would not fit in this machine's memory, before generating it.
//! \throws usage_error naming the option, the estimate and the memory found.
void check_fits(const char* option, double unknowns, double nonzeros_per_row) {
  const double bytes = unknowns * (nonzeros_per_row * 12.0 + 8.0 * 10.0);
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (physical > 0 && bytes > 0.5 * physical)
    throw option_error(option, fmt::format("{:g} unknowns need about {:.1f} GiB of host memory for the matrix and "
                                           "vectors, more than half of this machine's {:.1f} GiB",
                                           unknowns, bytes / (1ULL << 30), physical / (1ULL << 30)));
}

problem load_problem(const cli_options& o) {
  const int given = (o.matrix.empty() ? 0 : 1) + (o.poisson > 0 ? 1 : 0) + (o.poisson3d > 0 ? 1 : 0);
  if (given != 1) throw option_error("--matrix/--poisson/--poisson3d", "give exactly one of them");
  if (o.poisson > 0) check_fits("--poisson", static_cast<double>(o.poisson) * o.poisson, 5.0);
  if (o.poisson3d > 0) check_fits("--poisson3d", static_cast<double>(o.poisson3d) * o.poisson3d * o.poisson3d, 7.0);
  if (o.poisson > 0) return {fmt::format("poisson2d {0}x{0}", o.poisson), poisson_2d(o.poisson)};
  if (o.poisson3d > 0) return {fmt::format("poisson3d {0}x{0}x{0}", o.poisson3d), poisson_3d(o.poisson3d)};
  conveyor::scenarios::check_input_file("--matrix", o.matrix);
  const coo_matrix m = read_matrix_market(o.matrix);
  require_symmetric(m);
  return {std::filesystem::path(o.matrix).filename().string(), to_csr(m)};
}

//! Every check of the system that CG's set-up would make, here before the GPU is needed: a square matrix with
//! entries, and a diagonal entry in every row that is finite and > 0 (an SPD matrix has one; the Jacobi
//! preconditioner divides by it).
//! \throws std::invalid_argument naming the problem, the matrix and the first offending row (1-based).
void check_system(const problem& p) {
  const csr_matrix& a = p.a;
  if (a.rows != a.cols)
    throw std::invalid_argument(
        fmt::format("{}: the matrix is {} x {}; CG needs a square matrix", p.name, a.rows, a.cols));
  if (a.rows < 1 || a.nnz() == 0)
    throw std::invalid_argument(fmt::format("{}: the matrix ({} x {}) has no entries: it is empty, not symmetric "
                                            "positive definite",
                                            p.name, a.rows, a.cols));
  for (int i = 0; i < a.rows; ++i) {
    const auto first = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(i)];
    const auto last = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(i) + 1];
    const auto it = std::lower_bound(first, last, i);
    if (it == last || *it != i)
      throw std::invalid_argument(fmt::format("{}: row {} has no diagonal entry; a symmetric positive definite matrix "
                                              "has a positive diagonal (and the Jacobi preconditioner divides by it)",
                                              p.name, i + 1));
    const double d = a.values[static_cast<std::size_t>(it - a.col_idx.begin())];
    if (!(d > 0.0) || !std::isfinite(d))
      throw std::invalid_argument(fmt::format("{}: row {} has diagonal entry {:g}; {}", p.name, i + 1, d,
                                              d == 0.0 ? "a zero diagonal entry cannot be in a symmetric positive "
                                                         "definite matrix (and the Jacobi preconditioner divides by it)"
                                                       : "every diagonal entry of a symmetric positive definite "
                                                         "matrix is > 0"));
  }
}

//! "graph-while", or "graph-while+pdl" when the programmatic pass ran on its graph.
std::string mode_label(const solve_result& r) {
  return conveyor::scenarios::mode_label(as_run_mode(r.mode), r.programmatic);
}

//! Whether the modes took the same iterations (within one) and gave bitwise the same solution.
void print_agreement(const std::vector<solve_result>& results) {
  const auto [lo, hi] = std::minmax_element(results.begin(), results.end(),
                                            [](const auto& a, const auto& b) { return a.iterations < b.iterations; });
  if (hi->iterations - lo->iterations <= 1)
    fmt::print("iterations agree across modes ({}{})\n", lo->iterations,
               hi->iterations != lo->iterations ? fmt::format("..{}", hi->iterations) : "");
  else
    fmt::print("iterations DIFFER across modes: {} ({}) .. {} ({})\n", lo->iterations, mode_label(*lo), hi->iterations,
               mode_label(*hi));
  bool bitwise = true;
  for (const auto& r : results) bitwise = bitwise && r.x == results.front().x;
  fmt::print("solutions {} across modes\n", bitwise ? "bitwise identical" : "DIFFER bitwise");
}

//! What the programmatic pass did in each graph mode, and its edges (the same kernels in every mode: one listing).
void print_programmatic(const std::vector<solve_result>& results) {
  for (const auto& r : results)
    if (r.programmatic)
      fmt::print("{}: make_programmatic made {} edge(s) programmatic, left {} full (edges into cuSPARSE's kernels or "
                 "from non-kernel nodes){}\n",
                 mode_label(r), r.programmatic_changed, r.programmatic_left, r.programmatic_lines.empty() ? "" : ":");
  for (const auto& r : results)
    if (r.programmatic) {
      for (const auto& line : r.programmatic_lines) fmt::print("  {}\n", line);
      break;
    }
}

void print_table(const std::vector<solve_result>& results, double tol) {
  // (mode names up to 19 characters; "graph-relaunch+pdl" is 18)
  using table = conveyor::scenarios::results_table;
  table t({{"mode", 19, true},
           {"iters", 7},
           {"solver rel.res", 14},
           {"true rel.res", 14},
           {"setup ms", 9},
           {"solve ms", 10},
           {"us/iter", 9},
           table::speedup_column(),
           {"nodes", 5}});
  for (const auto& r : results)
    t.add_row(as_run_mode(r.mode), r.us_per_iteration,
              {mode_label(r), fmt::format("{}", r.iterations), fmt::format("{:.3e}", r.solver_residual),
               fmt::format("{:.3e}", r.true_residual), fmt::format("{:.3f}", r.setup_ms),
               fmt::format("{:.3f}", r.solve_ms), fmt::format("{:.2f}", r.us_per_iteration),
               r.graph_nodes > 0 ? fmt::format("{}", r.graph_nodes) : "-"},
              r.converged ? "" : (r.breakdown ? "  BREAKDOWN" : "  NOT CONVERGED"));
  fmt::print("{}", t.text());
  if (results.size() > 1) print_agreement(results);
  print_programmatic(results);
  fmt::print("speedup vs sync = sync's us/iter / the mode's us/iter; tol {:g}\n", tol);
}

//! Every check of the options that needs neither the matrix nor a GPU.
//! \throws usage_error naming the option; std::invalid_argument for an output path.
void check_cli(const cli_options& o, rhs_kind rhs) {
  if (o.seed_given && rhs != rhs_kind::random)
    throw option_error("--seed", fmt::format("applies to --rhs random only; with --rhs {} it would be ignored", o.rhs));
  const bool has_graph = o.mode.selects_graph();
  conveyor::scenarios::check_profiling_options(o.profile, has_graph, o.mode.graph_modes());
  conveyor::scenarios::check_graph_saving_options(o.save, has_graph);
  if (o.pdl && !has_graph)
    throw option_error("--pdl", fmt::format("applies to the graph modes (programmatic edges); with --mode {} it would "
                                            "be ignored: use {}",
                                            o.mode.text, o.mode.graph_modes()));
  conveyor::scenarios::check_output_file("--dot", o.dot);
  conveyor::scenarios::check_distinct_outputs(
      {{"--dot", o.dot}, {"--profile (its DOT file)", conveyor::scenarios::profile_dot_path(o.profile.trace)}});
}

void run(const cli_options& o) {
  const rhs_kind rhs = parse_rhs_kind(o.rhs);
  check_cli(o, rhs);
  // Every input check before the GPU is needed: a bad matrix is reported on any machine.
  const problem p = load_problem(o);
  check_system(p);
  conveyor::scenarios::require_gpu("`conveyor solve`");

  const auto saving = conveyor::scenarios::make_graph_saving(o.save); // before the first kernel
  const auto b = make_rhs(static_cast<std::size_t>(p.a.rows), rhs, o.seed);
  solve_options options{o.tol, o.max_iter};
  cg_solver solver(p.a, b);
  const auto profiling = conveyor::scenarios::make_profiling(o.profile, "solve");
  options.profiling = profiling.get();
  options.read_back = o.readback == "copy" ? solve_options::readback::copy : solve_options::readback::mapped;
  options.programmatic = o.pdl;
  const long long max_iter = o.max_iter > 0 ? o.max_iter : std::min(10LL * p.a.rows, 2'000'000'000LL); // as CG caps it
  fmt::print("problem: {}: {} x {}, {} nonzeros; rhs {}{}; Jacobi-preconditioned CG, double; tol {:g}; max-iter {}; "
             "read-back {}\n",
             p.name, p.a.rows, p.a.cols, p.a.nnz(), o.rhs,
             rhs == rhs_kind::random ? fmt::format(" (seed {})", o.seed) : "", o.tol, max_iter, o.readback);
  fmt::print("device: {}\n", conveyor::describe_device(0));
  std::fflush(stdout);

  std::vector<solve_result> results;
  for (const auto& m : o.mode.selected()) results.push_back(solver.solve(solver_mode(m), options));
  print_table(results, o.tol);
  for (auto& r : results) {
    r.x.clear();
    r.x.shrink_to_fit();
  }

  if (!o.dot.empty()) {
    const std::string dot = conveyor::to_dot(solver.make_while_graph(options), "cg_graph_while");
    std::fflush(stdout);
    conveyor::scenarios::write_file_atomically(o.dot, dot);
    fmt::print(stderr, "wrote the graph-while graph to {}\n", o.dot);
  }
  if (profiling) profiling->finish();

  std::string failed;
  for (const auto& r : results)
    if (!r.converged)
      failed += fmt::format("{}{} ({} after {} iterations, relative residual {:.3e})", failed.empty() ? "" : ", ",
                            to_string(r.mode), r.breakdown ? "breakdown: the matrix is not SPD" : "not converged",
                            r.iterations, r.solver_residual);
  if (!failed.empty())
    throw std::runtime_error(fmt::format("{}: CG did not reach tol {:g}: {}", p.name, o.tol, failed));
}

} // namespace

void register_solve_command(CLI::App& app) {
  auto opts = std::make_shared<cli_options>();
  CLI::App* sub = app.add_subcommand(
      "solve", "Solve A x = b (A sparse SPD) by Jacobi-preconditioned conjugate gradients on the GPU in sync, stream, "
               "graph-per-iteration, graph-while (one launch, WHILE conditional node) and graph-relaunch (a device "
               "graph tail-launching itself) modes");
  auto* matrix = sub->add_option("--matrix", opts->matrix, "Matrix Market file (real/integer, symmetric or general)");
  using conveyor::scenarios::integer_in;
  using conveyor::scenarios::real_in;
  auto* poisson = sub->add_option("--poisson", opts->poisson, "2D Poisson matrix, 5-point, on an N x N grid")
                      ->check(integer_in(1, 20000));
  auto* poisson3d = sub->add_option("--poisson3d", opts->poisson3d, "3D Poisson matrix, 7-point, on an N x N x N grid")
                        ->check(integer_in(1, 600));
  matrix->excludes(poisson, poisson3d);
  poisson->excludes(poisson3d);
  sub->add_option("--rhs", opts->rhs, "Right-hand side")
      ->check(CLI::IsMember({"ones", "random"}))
      ->capture_default_str();
  sub->add_option("--seed", opts->seed, "Seed of --rhs random (only with it)")
      ->check(integer_in(std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max()))
      ->capture_default_str();
  sub->add_option("--tol", opts->tol, "Relative residual ||r||/||b|| to reach, in (0, 1)")
      ->check(real_in({0.0, 1.0, true, true, false}))
      ->capture_default_str();
  sub->add_option("--max-iter", opts->max_iter, "Iteration cap (0: 10 x unknowns, at most 2e9)")
      ->check(integer_in(0, 2'000'000'000))
      ->capture_default_str();
  opts->mode.add_to(*sub);
  sub->add_flag("--pdl", opts->pdl,
                "Programmatic dependent launch in the graph modes: edges into the CG kernels (which wait for their "
                "predecessors first) become programmatic, the WHILE body's and the relaunch loop's included; edges "
                "into cuSPARSE stay full. Prints the pass's report");
  sub->add_option("--readback", opts->readback,
                  "How the host reads the residual after each iteration (sync, stream, graph-per-iteration): mapped "
                  "(the check kernel writes it to pinned host memory) or copy (a cudaMemcpyAsync per iteration)")
      ->check(CLI::IsMember({"mapped", "copy"}))
      ->capture_default_str();
  sub->add_option("--dot", opts->dot, "Write the graph-while graph (WHILE body nested) as Graphviz DOT to this file");
  conveyor::scenarios::add_graph_saving_options(
      *sub, opts->save, "the CG graph of the first graph mode run (graph-while: the WHILE graph)");
  conveyor::scenarios::add_profiling_options(
      *sub, opts->profile,
      "one CG iteration with its residual read-back (one graph launch in graph-per-iteration), and in graph-while "
      "the whole solve (its one launch; not bounded by --profile-steps)",
      opts->mode.graph_modes(),
      0); // no warm-up steps: the solver's constructor ran every kernel once, and graph-while has one step a solve
  sub->callback([opts, sub] {
    opts->seed_given = sub->count("--seed") > 0;
    run(*opts);
  });
}
