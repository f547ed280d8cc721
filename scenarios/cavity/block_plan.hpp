#pragma once
//! \file block_plan.hpp
//! One block of the cavity's work (K time steps and the convergence check) on one or several slabs of rows, as a list
//! of tasks with their dependencies: made once per run, then enqueued on one stream per slab (sync and stream modes)
//! or added to one graph, each node on its slab's device (graph mode; solver.cpp). Host code only: the tasks hold
//! device addresses and prepared kernel launches but make no CUDA call, so the list can be checked without a GPU.

#include "cavity/kernels.hpp"
#include "cavity/lattice.hpp"

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace conveyor::cavity {

//! Where one slab's state lies: its geometry and its device buffers (field f[a] holds 9 * geometry.plane floats,
//! u_prev 2 floats per cell it computes, state one convergence_state). A plain value.
struct slab_fields {
  slab geometry;                      //!< rows and memory layout (lattice.hpp)
  std::array<float*, 2> f{};          //!< the two population fields, halo rows included
  float* u_prev = nullptr;            //!< the previous check's velocities of its cells
  convergence_state* state = nullptr; //!< its convergence check's state
};

//! What a task does.
enum class task_kind {
  kernel,    //!< launch `call`
  copy,      //!< copy `height` rows of `width` bytes from `src` to `dst` (a 1D copy when height is 1)
  zero_word, //!< set the 4-byte word at `dst` to 0
};

//! One task of a block: what it does, on which slab (that slab's stream in the eager modes, its device in the
//! graph), after which earlier tasks. A plain value.
struct task {
  task_kind kind = task_kind::kernel; //!< what it does
  int slab = 0;                       //!< the slab (index) whose stream / device runs it
  std::vector<int> deps;              //!< earlier tasks (indices into the plan) it must follow
  kernel_call call;                   //!< kernel: the launch
  void* dst = nullptr;                //!< copy, zero_word: destination
  const void* src = nullptr;          //!< copy: source
  std::size_t dst_pitch = 0;          //!< copy: bytes between destination rows (height > 1)
  std::size_t src_pitch = 0;          //!< copy: bytes between source rows (height > 1)
  std::size_t width = 0;              //!< copy: bytes per row
  std::size_t height = 1;             //!< copy: rows
  std::string label;                  //!< the graph node's label
  //! A task of another slab waits for this one, and it is the latest task of this slab that that task waits for:
  //! the eager modes record an event after it (an event recorded later on the same stream covers earlier tasks).
  bool waited_across = false;
};

//! The tasks of one block of `k` time steps (k even) on `slabs` (bottom slab first; one slab: the whole lattice),
//! in an order every dependency respects:
//! for each step j = 1..k (reading field (j - 1) % 2, writing field j % 2): every slab's step (after its own
//! previous step and the halo copies into it that followed that step), then at each boundary the lower slab's top
//! row into the upper slab's lower halo row and the upper slab's bottom row into the lower slab's upper halo row
//! (after the step that computed the row; on the slab that computed it), copying the populations that cross the
//! boundary (c_y = +1: 2, 5, 6 upwards; -1: 4, 7, 8 downwards): one strided copy of the planes from the first to the
//! last of them, or with `per_population_halos` one copy per population; then every slab's velocity change (after
//! its last step); for each slab above the first, its maximum copied to peer_maxima[s - 1] (on the first slab's
//! device) and then zeroed; last the publish kernel on the first slab (after its velocity change and those copies),
//! which writes the pinned `slots` (a device address). The other orders every read and write needs follow
//! transitively (docs/cavity.md, "Several GPUs"; the host test runs the tasks in random orders that respect only the
//! dependencies). `waited_across` is set. Labels: "step j (f0 -> f1)", "velocity change", "publish change" on one
//! slab; "step j slab s (f0 -> f1)", "halo after step j: row y slab s -> t (populations 2..6)", "gather change slab
//! s", "reset change slab s" on several.
//! \throws std::invalid_argument when `slabs` is empty, `k` is odd or below 2, or several slabs come without
//!         `peer_maxima`.
[[nodiscard]] std::vector<task> make_block_plan(const lattice_params& p, int k, std::span<const slab_fields> slabs,
                                                bool per_population_halos, unsigned* peer_maxima, float* slots);

} // namespace conveyor::cavity
