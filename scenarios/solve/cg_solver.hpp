#pragma once
//! \file cg_solver.hpp
//! Jacobi-preconditioned conjugate gradients on the GPU in the scenarios' run modes (common/execution_mode.hpp),
//! all running the same kernels through the mode runner (common/mode_runner.hpp): sync, stream, and three graph
//! modes — graph-per-iteration, graph-while (the whole loop in one graph launch, a WHILE conditional node whose
//! condition a kernel sets from the residual: the scenarios' showcase of conditional nodes) and graph-relaunch (the
//! iteration as a device graph whose last kernel tail-launches it again while the check kernel's flag says so). With
//! solve_options::programmatic (`--pdl`) the graph modes' edges into the CG kernels become programmatic
//! (conveyor::make_programmatic).

#include "common/device_buffer.hpp"
#include "common/execution_mode.hpp"
#include "solve/cg_kernels.hpp"
#include "solve/csr.hpp"
#include "solve/spmv.hpp"

#include <conveyor/define/graph.hpp>
#include <conveyor/runtime/stream.hpp>

#include <array>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::scenarios {
class profiling;
} // namespace conveyor::scenarios

namespace conveyor::solve {

using scenarios::device_buffer;
using scenarios::pinned_buffer;

//! How the host drives the CG loop: the solver's run modes, each a scenarios::run_mode (as_run_mode), which gives
//! its name.
enum class solve_mode {
  sync,                //!< every kernel followed by cudaStreamSynchronize; the host checks the residual each iteration
  stream,              //!< kernels enqueued asynchronously; one read-back of the residual per iteration
  graph_per_iteration, //!< one iteration captured as a graph, launched per iteration; one read-back per iteration
  graph_while,         //!< one graph launch: set-up, then a WHILE node looping on the GPU; no host sync inside
  //! set-up kernels and one read-back, then one launch of a device graph (one iteration, the check, and a
  //! controller kernel that tail-launches the graph again while cg_scalars::proceed is set): the loop runs on the
  //! GPU without a conditional node (conveyor::device::add_relaunch)
  graph_relaunch,
};

//! All modes, in the order `--mode all` runs them.
inline constexpr std::array<solve_mode, 5> all_solve_modes{solve_mode::sync, solve_mode::stream,
                                                           solve_mode::graph_per_iteration, solve_mode::graph_while,
                                                           solve_mode::graph_relaunch};

//! True for the modes that launch graphs (graph-per-iteration, graph-while, graph-relaunch): those `--pdl` applies
//! to.
[[nodiscard]] constexpr bool is_graph_mode(solve_mode mode) noexcept {
  return mode == solve_mode::graph_per_iteration || mode == solve_mode::graph_while ||
         mode == solve_mode::graph_relaunch;
}

//! The run mode `mode` is: sync, stream, or graph with the graph named "per-iteration", "while" or "relaunch".
[[nodiscard]] scenarios::run_mode as_run_mode(solve_mode mode) noexcept;
//! The mode's name (to_string of its run mode): "sync", "stream", "graph-per-iteration", "graph-while",
//! "graph-relaunch". \throws std::bad_alloc only.
[[nodiscard]] std::string to_string(solve_mode mode);
//! Parses a command-line name.
//! \throws std::invalid_argument for an unknown name.
[[nodiscard]] solve_mode parse_solve_mode(std::string_view text);

//! Stopping rule: stop when ‖r‖/‖b‖ ≤ tol (r the recursively updated residual) or after max_iter iterations.
struct solve_options {
  double tol = 1e-8; //!< relative residual to reach (> 0)
  int max_iter = 0;  //!< iteration cap; 0 means 10·n
  //! Optional (--profile / --doctor): the profiled step of track to_string(mode) is one CG iteration with its
  //! residual read-back in sync, stream and graph-per-iteration (one graph launch there), and the whole solve in
  //! graph-while (its one launch); the graph modes watch their executable graph ("CG iteration", "CG while loop")
  //! and hand it to the doctor after the solve.
  scenarios::profiling* profiling = nullptr;
  //! How the host reads the scalars (residual, continue flag) after each iteration in the sync, stream and
  //! graph-per-iteration modes: `mapped` (the check kernel also writes them to pinned host memory: no copy), or
  //! `copy` (a cudaMemcpyAsync after the iteration, which the tuning doctor points at: docs/observe.md). The numbers
  //! are the same either way.
  enum class readback { mapped, copy } read_back = readback::mapped;
  //! `--pdl`: in the graph modes, make_programmatic turns every edge from a kernel into a CG kernel (all of which
  //! wait for their predecessors first: cg_kernels.hpp) into a programmatic edge, the WHILE body's included; edges
  //! into cuSPARSE's kernels and into non-kernel nodes stay full. Ignored by sync and stream. The arithmetic is
  //! unchanged: the iterates stay bitwise identical.
  bool programmatic = false;
};

//! What one solve produced.
struct solve_result {
  solve_mode mode = solve_mode::sync;
  int iterations = 0;          //!< CG iterations run
  bool converged = false;      //!< the solver's residual reached tol
  bool breakdown = false;      //!< pᵀAp was not positive: the matrix is not SPD (or accuracy was lost)
  double solver_residual = 0;  //!< ‖r‖/‖b‖ of the recursively updated residual at the end (device value)
  double true_residual = 0;    //!< ‖b − Ax‖/‖b‖ recomputed on the host from the downloaded x (long double)
  double setup_ms = 0;         //!< capture, instantiate and upload (graph modes); 0 otherwise
  double solve_ms = 0;         //!< wall-clock from the first launch to the result read back on the host
  double us_per_iteration = 0; //!< solve_ms·1000 / max(iterations, 1)
  std::size_t graph_nodes = 0; //!< nodes of the graph launched (graph modes; nested body nodes included)
  std::vector<double> x;       //!< the solution
  bool programmatic = false;   //!< make_programmatic ran on the graph (--pdl in a graph mode)
  std::size_t programmatic_changed = 0; //!< edges it made programmatic
  std::size_t programmatic_left = 0;    //!< edges into kernel nodes it left full (into cuSPARSE, from non-kernels)
  std::vector<std::string> programmatic_lines; //!< its report, one line per edge (programmatic_report::lines)
};

class cg_run;

//! A CG solver for one SPD matrix and right-hand side, resident on the current device. Not thread-safe.
class cg_solver {
public:
  //! Copies `a` and `b` (the host copy serves the independent residual check), uploads them, allocates the
  //! vectors, sets up cuSPARSE and runs every kernel once (so that lazy module loading is not timed).
  //! \throws std::invalid_argument when `a` is not square, b has the wrong size, or a diagonal entry is not
  //!         positive; conveyor::cuda_error / conveyor::libraries::library_error when a CUDA or cuSPARSE call fails.
  cg_solver(const csr_matrix& a, std::span<const double> b);
  cg_solver(const cg_solver&) = delete;
  cg_solver& operator=(const cg_solver&) = delete;
  ~cg_solver();

  //! Solves A x = b from x = 0 in `mode`.
  //! \throws std::invalid_argument for tol ≤ 0 or max_iter < 0; conveyor::cuda_error /
  //!         conveyor::libraries::library_error when a call fails (capture and instantiation errors included).
  [[nodiscard]] solve_result solve(solve_mode mode, const solve_options& options);

  //! The graph-while graph for `options` (not instantiated): the set-up kernels, the check kernel that sets the
  //! condition, and the WHILE node whose body is one CG iteration plus the check kernel; with options.programmatic
  //! its edges into CG kernels made programmatic (body included). Export it with to_dot.
  //! \throws conveyor::cuda_error when capture or the conditional node fails (CUDA < 12.4).
  [[nodiscard]] conveyor::graph make_while_graph(const solve_options& options);

  //! The graph-relaunch graph for `options` (not instantiated): one CG iteration, the check kernel (which clears
  //! cg_scalars::proceed to stop), and the relaunch controller (add_cg_relaunch); with options.programmatic its
  //! edges into CG kernels made programmatic. `status` is device memory for a failed relaunch's CUDA error.
  //! \throws conveyor::cuda_error when capture fails.
  [[nodiscard]] conveyor::graph make_relaunch_graph(const solve_options& options, int* status);

  //! Number of unknowns.
  [[nodiscard]] int size() const noexcept { return n_; }

private:
  friend class cg_run; // one solve as a workload of the mode runner (cg_solver.cpp)
  using step = std::function<void(cudaStream_t)>;
  [[nodiscard]] std::vector<step> setup_steps() const;
  [[nodiscard]] std::vector<step> iteration_steps() const;
  [[nodiscard]] step check_step(const solve_options& o, cudaGraphConditionalHandle handle, bool set) const;
  [[nodiscard]] cg_scalars read_scalars() const;
  [[nodiscard]] int max_iterations(const solve_options& o) const;
  void run_eager(const std::vector<step>& steps, bool sync_each) const;
  solve_result finish(solve_mode mode, const solve_options& o, double solve_ms);
  //! make_programmatic on `g` with the CG kernels when o.programmatic; the report goes into `out`.
  void apply_programmatic(conveyor::graph& g, const solve_options& o, solve_result* out) const;

  int n_ = 0;
  csr_matrix host_a_;
  std::vector<double> host_b_;
  conveyor::stream stream_;
  device_csr a_;
  device_buffer<double> b_, inv_diag_, x_, r_, z_, p_, ap_, partials_;
  device_buffer<cg_scalars> scalars_;
  pinned_buffer<cg_scalars> host_scalars_{1}; // per-iteration read-back target
  cg_device_state st_;
  spmv_operator spmv_;
};

} // namespace conveyor::solve
