//! \file kernels.cu
//! The cavity's CUDA kernels: initialisation, the fused stream-collide step, and the convergence check.

#include "cavity/kernels.hpp"

#include "common/launch.hpp"
#include "common/pdl.cuh"

#include <cstdint>

namespace conveyor::cavity {

namespace {

constexpr int step_block = 128; // threads per block along x; one block row per lattice row (and x chunk)
constexpr int flat_block = 256;

__global__ void initialise_kernel(float* __restrict__ f, float* __restrict__ u_prev, convergence_state* state,
                                  int n) {
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  scenarios::begin_dependent(); // overwrites what the previous block's kernels read
  for (std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cells; c += stride) {
#pragma unroll
    for (int i = 0; i < q; ++i) f[static_cast<std::size_t>(i) * cells + c] = 0.0F; // g_i = f_i - w_i = 0
    u_prev[2 * c] = 0.0F;
    u_prev[2 * c + 1] = 0.0F;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    state->max_change_bits = 0U;
    state->block = 0U;
  }
}

__global__ void __launch_bounds__(step_block) stream_collide_kernel(const float* __restrict__ src,
                                                                    float* __restrict__ dst, lattice_params p) {
  const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = static_cast<int>(blockIdx.y);
  // Before the early return, so that every block waits (common/pdl.cuh): src is the previous step's output, dst
  // what the step before it still reads. Where the next step's launch is triggered is a tuning choice
  // (--pdl-trigger); the wait is in the same place whatever it is.
  if (p.pdl_trigger == 1) conveyor::device::launch_dependents();
  conveyor::device::wait_for_dependencies();
  if (p.pdl_trigger == 0) conveyor::device::launch_dependents();
  if (x >= p.n) return;
  stream_collide_cell(src, dst, p, x, y);
}

// The same step with one thread per cell over the row-major lattice in blocks of flat_block (step_layout 1).
__global__ void __launch_bounds__(flat_block) stream_collide_flat_kernel(const float* __restrict__ src,
                                                                         float* __restrict__ dst, lattice_params p) {
  const std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p.pdl_trigger == 1) conveyor::device::launch_dependents();
  conveyor::device::wait_for_dependencies(); // before the early return, as stream_collide_kernel
  if (p.pdl_trigger == 0) conveyor::device::launch_dependents();
  const std::size_t n = static_cast<std::size_t>(p.n);
  if (c >= n * n) return;
  stream_collide_cell(src, dst, p, static_cast<int>(c % n), static_cast<int>(c / n));
}

__global__ void __launch_bounds__(flat_block) velocity_change_kernel(const float* __restrict__ f,
                                                                     float* __restrict__ u_prev,
                                                                     convergence_state* state, int n) {
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  scenarios::begin_dependent(); // f is the last step's output; state was reset by the previous publish
  float local = 0.0F;
  for (std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cells; c += stride) {
    const int x = static_cast<int>(c % static_cast<std::size_t>(n));
    const int y = static_cast<int>(c / static_cast<std::size_t>(n));
    const cell_moments m = moments(f, n, x, y);
    const float dx = fabsf(m.ux - u_prev[2 * c]);
    const float dy = fabsf(m.uy - u_prev[2 * c + 1]);
    // fmaxf would drop a NaN; keep it, so that a diverged run is seen (NaN > everything in the unsigned order).
    const float d = (dx != dx || dy != dy) ? __int_as_float(0x7fc00000) : fmaxf(dx, dy);
    local = (d != d || local != local) ? __int_as_float(0x7fc00000) : fmaxf(local, d);
    u_prev[2 * c] = m.ux;
    u_prev[2 * c + 1] = m.uy;
  }
  // Block maximum, then one atomic per block. The maximum of non-negative floats (NaN encoded as 0x7fc00000) is
  // the maximum of their bit patterns as unsigned integers: order-independent, hence deterministic.
  __shared__ unsigned block_max[flat_block / 32];
  unsigned bits = __float_as_uint(local);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) bits = max(bits, __shfl_down_sync(0xffffffffU, bits, offset));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  if (lane == 0) block_max[warp] = bits;
  __syncthreads();
  if (warp == 0) {
    bits = lane < flat_block / 32 ? block_max[lane] : 0U;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) bits = max(bits, __shfl_down_sync(0xffffffffU, bits, offset));
    if (lane == 0) atomicMax(&state->max_change_bits, bits);
  }
}

__global__ void publish_change_kernel(convergence_state* state, float* slots) {
  scenarios::begin_dependent(); // state holds velocity_change_kernel's maximum
  const unsigned block = state->block;
  slots[block % 2U] = __uint_as_float(state->max_change_bits);
  state->max_change_bits = 0U;
  state->block = block + 1U;
}

unsigned flat_grid(std::size_t items) {
  const std::size_t blocks = (items + flat_block - 1) / flat_block;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

} // namespace

void launch_initialise(float* f, float* u_prev, convergence_state* state, int n, const launch_ctx& ctx) {
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  scenarios::launch_kernel(ctx, "initialise_kernel", dim3(flat_grid(cells)), dim3(flat_block), &initialise_kernel, f,
                           u_prev, state, n);
}

void launch_stream_collide(const float* src, float* dst, const lattice_params& p, const launch_ctx& ctx) {
  if (p.step_layout == 1) {
    const std::size_t cells = static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.n);
    const auto blocks = static_cast<unsigned>((cells + flat_block - 1) / flat_block);
    scenarios::launch_kernel(ctx, "stream_collide_flat_kernel", dim3(blocks), dim3(flat_block),
                             &stream_collide_flat_kernel, src, dst, p);
    return;
  }
  const dim3 grid(static_cast<unsigned>((p.n + step_block - 1) / step_block), static_cast<unsigned>(p.n));
  scenarios::launch_kernel(ctx, "stream_collide_kernel", grid, dim3(step_block), &stream_collide_kernel, src, dst, p);
}

void launch_velocity_change(const float* f, float* u_prev, convergence_state* state, int n, const launch_ctx& ctx) {
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  scenarios::launch_kernel(ctx, "velocity_change_kernel", dim3(flat_grid(cells)), dim3(flat_block),
                           &velocity_change_kernel, f, u_prev, state, n);
}

void launch_publish_change(convergence_state* state, float* slots, const launch_ctx& ctx) {
  scenarios::launch_kernel(ctx, "publish_change_kernel", dim3(1), dim3(1), &publish_change_kernel, state, slots);
}

} // namespace conveyor::cavity
