#pragma once
//! \file kernels.hpp
//! Host-side launchers of the cavity kernels (kernels.cu). Each enqueues exactly one kernel on `ctx.stream` through
//! scenarios::launch_kernel (common/launch.hpp: checked, programmatic when `ctx.programmatic`) and calls
//! `ctx.after()`; none synchronises otherwise, allocates or reads host memory, so every one can be captured into a
//! graph. Every kernel calls scenarios::begin_dependent() in every block before it touches global memory
//! (common/pdl.cuh), so each may be launched programmatic (`--pdl`). Every reduction is a maximum (order-independent), so
//! results are bitwise reproducible in every execution mode.

#include "common/execution_mode.hpp"
#include "cavity/lattice.hpp"

#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

namespace conveyor::cavity {

using scenarios::launch_ctx;

//! Device-side state of the convergence check.
struct convergence_state {
  unsigned max_change_bits = 0; //!< bit pattern of the running max |u - u_prev| (a non-negative float, so the
                                //!< unsigned order is the float order and NaN sorts above every number)
  unsigned block = 0;           //!< K-step blocks completed (published) so far
};

//! Sets `f` (n * n * 9) to the state at rest (f_i = w_i: deviations g_i = 0), `u_prev` (2 * n * n) to zero and `state` to zero.
//! \throws conveyor::cuda_error when the launch fails.
void launch_initialise(float* f, float* u_prev, convergence_state* state, int n, const launch_ctx& ctx);

//! One time step: dst = stream_collide(src) for every cell (lattice.hpp). `src` and `dst` must be distinct.
//! \throws conveyor::cuda_error when the launch fails.
void launch_stream_collide(const float* src, float* dst, const lattice_params& p, const launch_ctx& ctx);

//! For every cell: u = moments(f).velocity; state->max_change = max(state->max_change, |u - u_prev|_inf);
//! u_prev = u. Reads the current state `f` (post-collision; the velocity of the last step).
//! \throws conveyor::cuda_error when the launch fails.
void launch_velocity_change(const float* f, float* u_prev, convergence_state* state, int n, const launch_ctx& ctx);

//! One thread: slots[state->block % 2] = max_change (as float); max_change = 0; ++block. `slots` is host memory
//! that the device can write (pinned, mapped), two floats: the host reads block b's value from slot b % 2 once
//! the block's work has completed, while the next block may already be running.
//! \throws conveyor::cuda_error when the launch fails.
void launch_publish_change(convergence_state* state, float* slots, const launch_ctx& ctx);

} // namespace conveyor::cavity
