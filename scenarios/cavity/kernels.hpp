#pragma once
//! \file kernels.hpp
//! The cavity's kernels (kernels.cu), prepared as kernel_call values: a kernel, its launch shape and its arguments,
//! made once and then launched on a stream (launch(), for the sync and stream modes) or added to a graph as a kernel
//! node (solver.cpp, graph mode) — the same calls either way. None synchronises, allocates or reads host memory, so
//! every one can run inside a graph. Every kernel calls scenarios::begin_dependent() in every block before it touches
//! global memory (common/pdl.cuh), so each may be launched programmatic (`--pdl`). Every reduction is a maximum
//! (order-independent), so results are bitwise reproducible in every execution mode and slab decomposition.
//!
//! Every kernel works on one slab of rows (lattice.hpp, `slab`): whole_lattice(n) on one GPU, make_slab() with
//! several (`--gpus`). A slab's fields hold `9 * s.plane` floats (its rows and halo rows), its `u_prev` 2 floats per
//! cell it computes.

#include "common/execution_mode.hpp"
#include "cavity/lattice.hpp"

#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>

#include <memory>
#include <string_view>

namespace conveyor::cavity {

using scenarios::launch_ctx;

//! Device-side state of the convergence check (one per slab).
struct convergence_state {
  unsigned max_change_bits = 0; //!< bit pattern of the running max |u - u_prev| (a non-negative float, so the
                                //!< unsigned order is the float order and NaN sorts above every number)
  unsigned block = 0;           //!< K-step blocks completed (published) so far
};

//! One kernel launch, prepared: the kernel, its launch shape and its argument values (owned, shared by copies of
//! the value, so that CUDA can read them at every launch or node creation). A plain value; thread safety: read-only
//! after creation.
struct kernel_call {
  std::string_view name;          //!< the kernel's name, for messages and sync mode's checks (a literal)
  const void* function = nullptr; //!< the __global__ function
  dim3 grid{1, 1, 1};             //!< blocks
  dim3 block{1, 1, 1};            //!< threads per block
  std::shared_ptr<void> storage;  //!< owns the argument values `arguments` points into
  void** arguments = nullptr;     //!< one pointer per kernel parameter, as cudaLaunchKernelExC / kernel nodes take
};

//! Sets slab `s`'s field `f` (9 * s.plane floats, halo rows included) to the state at rest (f_i = w_i: deviations
//! g_i = 0), its `u_prev` (2 * s.rows * n) to zero and `state` to zero.
[[nodiscard]] kernel_call initialise_call(float* f, float* u_prev, convergence_state* state, int n, const slab& s);

//! One time step of slab `s`: dst = stream_collide(src) for every cell of its rows (lattice.hpp). `src` and `dst`
//! must be distinct fields of the slab, `src`'s halo rows filled with the neighbours' rows of the same step.
[[nodiscard]] kernel_call stream_collide_call(const float* src, float* dst, const lattice_params& p, const slab& s);

//! For every cell of slab `s`: u = moments(f).velocity; state->max_change = max(state->max_change, |u - u_prev|_inf);
//! u_prev = u. Reads the current state `f` (post-collision; the velocity of the last step).
[[nodiscard]] kernel_call velocity_change_call(const float* f, float* u_prev, convergence_state* state, int n,
                                               const slab& s);

//! One thread: m = max(state->max_change, peer_maxima[0 .. peer_count - 1]) (bit patterns: the other slabs' maxima,
//! copied next to it); slots[state->block % 2] = m (as float); max_change = 0; ++block. `slots` is host memory that
//! the device can write (pinned, mapped), two floats: the host reads block b's value from slot b % 2 once the
//! block's work has completed, while the next block may already be running. `peer_maxima` may be null when
//! `peer_count` is 0.
[[nodiscard]] kernel_call publish_change_call(convergence_state* state, const unsigned* peer_maxima, int peer_count,
                                              float* slots);

//! Launches `c` on ctx.stream (programmatic when ctx.programmatic), then calls ctx.after(c.name) (sync mode waits).
//! \throws conveyor::cuda_error naming the kernel when CUDA refuses the launch, or when sync mode's wait reports an
//!         error.
void launch(const kernel_call& c, const launch_ctx& ctx);

} // namespace conveyor::cavity
