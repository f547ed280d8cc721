#pragma once
//! \file mode_runner.hpp
//! The one way every workload runs in its modes. A workload gives its steps (`workload::enqueue` for the eager
//! modes), how to go back to its initial state (`reset`) and, for graph modes, its graph (`make_graph`, a
//! graph_step that launches one step); run_workload owns the rest, the same for train, cavity, filter and solve:
//!
//! 1. reset, warm-up (`warm_up`: untimed work that loads the kernels);
//! 2. graph modes: make_graph, timed with the synchronisation that follows as the set-up; the profiling session
//!    watches its executable graphs;
//! 3. reset again, so that every mode runs the same steps from the same state (the modes' results stay bitwise
//!    equal);
//! 4. rounds of steps (`begin_round` says how many; a train chunk, a filter pass over the frames, a cavity run, a
//!    CG solve), each timed from its prologue to the synchronisation after its last step, every step a profiled
//!    step of the mode's track (--profile, --doctor); `after_step` may end a round early (convergence);
//!    `end_round` says how many units (time steps, frames, iterations) the round did, untimed;
//! 5. the median over the timed rounds of the time per unit.
//!
//! The results table and its "speedup vs sync" column are in results_table.hpp; the --mode option in
//! mode_option.hpp. How each workload builds its graph is its own showcase: cavity adds its nodes with the explicit
//! builder, filter updates the changed nodes of its executable graph per frame, train runs its step through
//! conveyor::graphed, solve loops on the GPU in a WHILE conditional node (docs/architecture.md, "Workloads").

#include "common/execution_mode.hpp"
#include "common/graph_sink.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace conveyor::scenarios {

class profiling;

//! A graph mode's step, made once per run by workload::make_graph and launched by run_workload for every step.
//! Destroyed by run_workload at the end of the run (also when a step throws). Not thread-safe.
class graph_step {
public:
  virtual ~graph_step() = default;
  //! The round's timed prologue, before its first step; returns false when the round needs no step (a solve that
  //! has converged at its set-up). Default: nothing, true.
  //! \throws what the workload's calls throw (conveyor::cuda_error, ...).
  virtual bool prologue() { return true; }
  //! Launches step `step` (0-based within the round) on the workload's stream(s).
  //! \throws what the workload's calls throw (conveyor::cuda_error, ...).
  virtual void launch(std::size_t step) = 0;
  //! Hands its executable graphs to `sink` (graph_sink::watch: the profiling session, the graph saving); called
  //! once per sink after make_graph and its set-up timing. Default: nothing. \throws as graph_sink::watch.
  virtual void watch(graph_sink& sink) { (void)sink; }
  //! After the last round (the work synchronised): what the step keeps for the workload's result (statistics, a
  //! device-side status). Default: nothing. \throws what the workload's calls throw.
  virtual void after_rounds() {}
  //! Hands its executable graphs to the doctor (profiling::examine); called after after_rounds. Default: nothing.
  //! \throws as profiling::examine.
  virtual void examine(profiling& p) { (void)p; }
};

//! What run_workload runs. Every call comes from the thread that called run_workload; none is timed unless said.
class workload {
public:
  virtual ~workload() = default;
  //! The stream its steps are enqueued on (its first one when it has several): launch_ctx::stream.
  [[nodiscard]] virtual cudaStream_t stream() const = 0;
  //! Back to the initial state; may enqueue work (synchronize() follows).
  //! \throws what the workload's calls throw (conveyor::cuda_error, ...).
  virtual void reset() = 0;
  //! Untimed work before the graph is made and the timed rounds, e.g. one eager step that loads the kernels;
  //! `ctx` is the mode's launch context. Default: nothing. \throws as reset().
  virtual void warm_up(const launch_ctx& ctx) { (void)ctx; }
  //! Graph modes: the graph step of this mode (made, instantiated, uploaded as the workload does it: timed as the
  //! set-up). Default: nullptr, for a workload without graph modes. \throws as reset().
  [[nodiscard]] virtual std::unique_ptr<graph_step> make_graph() { return nullptr; }
  //! Waits for all of its work. \throws conveyor::cuda_error with an error the work raised.
  virtual void synchronize() = 0;
  //! Untimed preparation of round `round` (0-based); returns its number of steps, 0 when the run is over.
  //! \throws as reset().
  [[nodiscard]] virtual std::size_t begin_round(std::size_t round) = 0;
  //! Eager modes: the round's timed prologue, before its first step; returns false when the round needs no step.
  //! Default: nothing, true. \throws as reset().
  virtual bool prologue(const launch_ctx& ctx) {
    (void)ctx;
    return true;
  }
  //! Eager modes: enqueues step `step` (0-based within the round) with `ctx` (the mode's stream, whether to wait
  //! after every call, whether kernels launch programmatic). \throws as reset().
  virtual void enqueue(const launch_ctx& ctx, std::size_t step) = 0;
  //! After step `step` (outside its profiled scope, inside the round's timing); returns true to end the round.
  //! Default: false. \throws as reset().
  virtual bool after_step(std::size_t step) {
    (void)step;
    return false;
  }
  //! After the round's `steps` steps and its synchronisation (untimed): the units of work they did (time steps,
  //! frames, iterations: the time per unit is reported), at least 1 when steps > 0. Default: `steps`.
  //! \throws as reset().
  [[nodiscard]] virtual std::size_t end_round(std::size_t steps) { return steps; }
};

//! How run_workload runs one mode.
struct run_settings {
  run_mode mode;                             //!< the mode; graph modes launch workload::make_graph's step
  bool programmatic = false;                 //!< launch_ctx::programmatic of the eager steps, and "+pdl" in the label
  std::size_t warmup_rounds = 0;             //!< rounds run before the timed ones (their time is not recorded)
  scenarios::profiling* profiling = nullptr; //!< optional: every step a profiled step of track to_string(mode)
};

//! What run_workload measured.
struct mode_timing {
  run_mode mode;                   //!< the mode that ran
  bool programmatic = false;       //!< run_settings::programmatic
  std::vector<double> ms_per_unit; //!< per timed round: its wall time / its units, milliseconds
  double median_ms_per_unit = 0.0; //!< the median of ms_per_unit (0 without a timed round)
  double seconds = 0.0;            //!< wall time of the timed rounds together
  std::size_t steps = 0;           //!< steps of the timed rounds
  std::size_t units = 0;           //!< units of the timed rounds
  double setup_ms = 0.0;           //!< graph modes: make_graph and the synchronisation after it
};

//! Runs `w` in s.mode as the file comment says and returns the timings.
//! \throws std::logic_error when a graph mode's make_graph returns nullptr; what the workload's calls throw.
[[nodiscard]] mode_timing run_workload(workload& w, const run_settings& s);

} // namespace conveyor::scenarios
