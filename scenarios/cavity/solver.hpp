#pragma once
//! \file solver.hpp
//! The lid-driven cavity on the GPU in three execution modes that launch the same kernels (kernels.hpp) and differ
//! only in how:
//!
//! - `sync`: every kernel launched, then waited for (cudaStreamSynchronize);
//! - `stream`: every kernel launched asynchronously on one stream;
//! - `graph`: one block of K time steps plus the convergence check, captured once into a CUDA graph, instantiated
//!   and uploaded once, then launched once per block.
//!
//! With cavity_options::programmatic (`--pdl`) the stream and graph modes launch the kernels with programmatic
//! dependent launch: each kernel may start while the one before it finishes and waits (begin_dependent, in every
//! block, before touching the populations) for it to complete; in graph mode the captured chain's K + 1 edges are
//! programmatic. The arithmetic is the same, so the states stay bitwise equal to sync mode's.
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
  std::int64_t steps = 0;          //!< time steps run (a multiple of K)
  bool converged = false;          //!< a block's change fell below tol
  std::int64_t converged_at = 0;   //!< steps at the end of that block (the run goes on one more block)
  double final_change = 0.0;       //!< velocity change per step of the last block: max |u - u_prev| / (K U)
  double seconds = 0.0;            //!< wall-clock time of the timed loop (all blocks, the checks included)
  double ms_per_step = 0.0;        //!< seconds * 1000 / steps
  double mlups = 0.0;              //!< million lattice-cell updates per second: n^2 * steps / seconds / 1e6
  double setup_ms = 0.0;           //!< graph mode: capture + instantiate + upload, milliseconds (not timed above)
  std::size_t graph_nodes = 0;     //!< graph mode: nodes of the block graph (K + 2)
  std::size_t graph_edges = 0;     //!< graph mode: its edges
  std::size_t programmatic_edges = 0; //!< graph mode: how many of them are programmatic (K + 1 with --pdl, else 0)
  bool programmatic = false;       //!< the kernels were launched programmatic (--pdl in stream or graph mode)
  std::string graph_dot;           //!< graph mode: the block graph as Graphviz DOT (conveyor::to_dot)
  std::vector<float> populations;  //!< the final state (deviations g_i = f_i - w_i), n * n * 9 floats, lattice.hpp
};

//! Runs the cavity described by `o` from rest in `mode`: validates `o`, allocates the fields, runs one untimed
//! warm-up block (it loads the kernels; graph mode captures after it), resets to rest, then runs blocks of
//! K = o.steps_per_graph steps until a block's change falls below o.tol (when o.tol > 0) or max_steps(o) steps have
//! run, and downloads the final state.
//! `profiling` (optional, --profile / --doctor): every block (K time steps and the check: one graph launch in graph
//! mode) is a profiled step of track to_string(mode); graph mode watches its executable graph ("cavity K steps")
//! and hands it to the doctor after the run.
//! \throws std::invalid_argument as validate(); std::runtime_error when the run diverges (the velocity change is
//!         not finite); conveyor::cuda_error when a CUDA call fails (no device, out of memory, ...).
[[nodiscard]] run_result run_cavity(const cavity_options& o, execution_mode mode,
                                    const std::function<void(const run_progress&)>& on_progress = {},
                                    scenarios::profiling* profiling = nullptr);

} // namespace conveyor::cavity
