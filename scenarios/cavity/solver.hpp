#pragma once
//! \file solver.hpp
//! The lid-driven cavity on the GPU in three execution modes that launch the same kernels (kernels.hpp) and differ
//! only in how:
//!
//! - `sync`: every kernel launched, then waited for (cudaStreamSynchronize);
//! - `stream`: every kernel launched asynchronously on one stream;
//! - `graph`: one block of K time steps plus the convergence check, built once into a CUDA graph with the explicit
//!   builder (the scenarios' showcase of it), instantiated and uploaded once, then launched once per block.
//!
//! Several slabs (cavity_options::devices, `--gpus`): the lattice is split into horizontal slabs of rows, one per
//! listed device (devices may repeat), each with a halo row on each side that has a neighbour. A block is then, for
//! every step, every slab's step kernel on its device, followed by the halo copies (each slab's boundary rows into
//! its neighbours' halo rows; peer copies between devices); then every slab's velocity-change kernel, the other
//! slabs' maxima copied next to the first slab's and reset there, and one publish kernel on the first slab's device.
//! The block is one list of tasks with their dependencies, made once (block_plan.hpp): the eager modes enqueue it on
//! one stream per slab, with events for the dependencies between streams (and each block begins after the previous
//! one on every stream, as a graph launch does); graph mode adds it to ONE graph, each node on its slab's device,
//! launched from the first slab's stream. The per-cell arithmetic is the same in every decomposition (lattice.hpp),
//! so the final state is bitwise the one-slab state, and every run stops after the same number of steps. One slab
//! (the default) is the same list: a chain of K steps and the two check kernels on one stream.
//!
//! With cavity_options::programmatic (`--pdl`) the stream and graph modes launch the kernels with programmatic
//! dependent launch: each kernel may start while the one before it finishes and waits (begin_dependent, in every
//! block, before touching the populations) for it to complete; in graph mode every edge between two kernels of one
//! slab is programmatic (the chain's K + 1 edges on one slab; edges from copies stay full, and no programmatic edge
//! joins two devices). The arithmetic is the same, so the states stay bitwise equal to sync mode's.
//!
//! A block is K time steps (K even: step k reads array k % 2 and writes the other, so every block starts and ends
//! with the state in the first array), then the convergence check: one kernel takes the maximum over cells of the
//! velocity change since the previous block, a one-thread kernel publishes it into pinned host memory (slot
//! block % 2) and resets the maximum. The host reads block b's value only after launching block b + 1 (it waits
//! on an event recorded after block b), so the check never stalls the GPU; every mode uses the same rule, so all
//! modes stop after the same number of steps and end bitwise equal.

#include "common/execution_mode.hpp"
#include "cavity/parameters.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::scenarios {
class profiling;
} // namespace conveyor::scenarios

namespace conveyor::cavity {

//! The execution modes (scenarios/common): sync, stream, graph (one graph per block of K steps).
using scenarios::all_execution_modes;
using scenarios::execution_mode;
using scenarios::parse_execution_mode;
using scenarios::to_string;

//! Reported after every convergence check (outside nothing: keep the callback cheap, it runs in the timed loop).
struct run_progress {
  execution_mode mode = execution_mode::sync; //!< the mode running
  std::int64_t step = 0;                      //!< time steps completed at the checked block's end
  std::int64_t max_steps = 0;                 //!< the run's cap
  double change = 0.0;                        //!< velocity change per step of the checked block, / U
};

//! What one run produced.
struct run_result {
  execution_mode mode = execution_mode::sync; //!< the mode that ran
  std::int64_t steps = 0;                     //!< time steps run (a multiple of K)
  bool converged = false;                     //!< a block's change fell below tol
  std::int64_t converged_at = 0;              //!< steps at the end of that block (the run goes on one more block)
  double final_change = 0.0;                  //!< velocity change per step of the last block: max |u - u_prev| / (K U)
  double seconds = 0.0;                       //!< wall-clock time of the timed loop (all blocks, the checks included)
  double ms_per_step = 0.0;                   //!< seconds * 1000 / steps
  double mlups = 0.0;                         //!< million lattice-cell updates per second: n^2 * steps / seconds / 1e6
  double setup_ms = 0.0;                //!< graph mode: build + instantiate + upload, milliseconds (not timed above)
  std::size_t graph_nodes = 0;          //!< graph mode: nodes of the block graph (K + 2 on one slab)
  std::size_t graph_edges = 0;          //!< graph mode: its edges
  std::size_t programmatic_edges = 0;   //!< graph mode: how many of them are programmatic (with --pdl: every edge
                                        //!< between two kernels of one slab, K + 1 on one slab; else 0)
  std::size_t graph_copies = 0;         //!< graph mode: memcpy nodes (halo rows and the slabs' maxima; 0 on one slab)
  std::vector<int> devices;             //!< the device of each slab, bottom slab first
  std::vector<std::string> peer_access; //!< with several devices: one line per ordered pair, "device 0 -> 1: enabled"
                                        //!< or why direct access is not possible (copies then go through the host)
  bool programmatic = false;            //!< the kernels were launched programmatic (--pdl in stream or graph mode)
  std::string graph_dot;                //!< graph mode: the block graph as Graphviz DOT (conveyor::to_dot)
  std::vector<float> populations;       //!< the final state (deviations g_i = f_i - w_i), n * n * 9 floats, lattice.hpp
};

//! The run diverged: a block's velocity change is not finite. what() says when and for which run, and what to
//! change. Thread safety: an immutable value once thrown.
class diverged : public std::runtime_error {
public:
  //! The run `run` (describe()) diverged by time step `step` with the change `change`.
  diverged(std::int64_t step, double change, const std::string& run);
  //! Time steps run at the end of the block that diverged.
  [[nodiscard]] std::int64_t step() const noexcept { return step_; }
  //! Its velocity change per step / U (not finite).
  [[nodiscard]] double change() const noexcept { return change_; }
  //! The run, as describe() gives it.
  [[nodiscard]] const std::string& run() const noexcept { return run_; }

private:
  std::int64_t step_;
  double change_;
  std::string run_;
};

//! Runs the cavity described by `o` from rest in `mode` through the scenarios' mode runner (common/mode_runner.hpp;
//! one timed round of blocks): allocates the fields, runs one untimed warm-up block (it loads the kernels; graph mode
//! then builds its graph with the explicit builder, one node per task of the block plan), resets to rest, then runs
//! blocks of K = o->steps_per_graph steps until a block's change falls below o->tol (when o->tol > 0) or
//! max_steps(*o) steps have run, and downloads the final state. A cavity_options given here is validated first.
//! With several distinct devices it first enables peer access between every pair (conveyor::enable_peer_access;
//! run_result::peer_access says what it found). The calling thread's current device is restored on return.
//! `profiling` (optional, --profile / --doctor): every block (K time steps and the check: one graph launch in graph
//! mode) is a profiled step of track to_string(mode); graph mode watches its executable graph ("cavity K steps")
//! and hands it to the doctor after the run. One slab only.
//! \throws invalid_options as validate(); std::invalid_argument when a device of o->devices is not visible, or
//!         with `profiling` and several slabs; diverged when the run diverges; conveyor::cuda_error when a CUDA call
//!         fails (no device, out of memory, ...).
[[nodiscard]] run_result run_cavity(const checked_options& o, execution_mode mode,
                                    const std::function<void(const run_progress&)>& on_progress = {},
                                    scenarios::profiling* profiling = nullptr);

} // namespace conveyor::cavity
