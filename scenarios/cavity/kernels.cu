//! \file kernels.cu
//! The cavity's CUDA kernels: initialisation, the fused stream-collide step, and the convergence check.

#include "cavity/kernels.hpp"

#include "common/launch.hpp"
#include "common/pdl.cuh"

#include <cstdint>
#include <memory>
#include <utility>

namespace conveyor::cavity {

namespace {

constexpr int step_block = 128; // threads per block along x; one block row per lattice row (and x chunk)
constexpr int flat_block = 256;

__global__ void initialise_kernel(float* __restrict__ f, float* __restrict__ u_prev, convergence_state* state, int n,
                                  slab s) {
  const std::size_t stored = s.plane; // cells stored, halo rows included
  const std::size_t cells = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(n);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  scenarios::begin_dependent(); // overwrites what the previous block's kernels read
  for (std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < stored; c += stride) {
#pragma unroll
    for (int i = 0; i < q; ++i) f[static_cast<std::size_t>(i) * stored + c] = 0.0F; // g_i = f_i - w_i = 0
    if (c < cells) {
      u_prev[2 * c] = 0.0F;
      u_prev[2 * c + 1] = 0.0F;
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    state->max_change_bits = 0U;
    state->block = 0U;
  }
}

__global__ void __launch_bounds__(step_block)
    stream_collide_kernel(const float* __restrict__ src, float* __restrict__ dst, lattice_params p, slab s) {
  const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = s.row_begin + static_cast<int>(blockIdx.y);
  // Before the early return, so that every block waits (common/pdl.cuh): src is the previous step's output, dst
  // what the step before it still reads. Where the next step's launch is triggered is a tuning choice
  // (--pdl-trigger); the wait is in the same place whatever it is.
  if (p.pdl_trigger == 1) conveyor::device::launch_dependents();
  conveyor::device::wait_for_dependencies();
  if (p.pdl_trigger == 0) conveyor::device::launch_dependents();
  if (x >= p.n) return;
  stream_collide_cell(src, dst, p, s, x, y);
}

// The same step with one thread per cell over the slab's row-major rows in blocks of flat_block (step_layout 1).
__global__ void __launch_bounds__(flat_block)
    stream_collide_flat_kernel(const float* __restrict__ src, float* __restrict__ dst, lattice_params p, slab s) {
  const std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p.pdl_trigger == 1) conveyor::device::launch_dependents();
  conveyor::device::wait_for_dependencies(); // before the early return, as stream_collide_kernel
  if (p.pdl_trigger == 0) conveyor::device::launch_dependents();
  const std::size_t n = static_cast<std::size_t>(p.n);
  if (c >= static_cast<std::size_t>(s.rows) * n) return;
  stream_collide_cell(src, dst, p, s, static_cast<int>(c % n), s.row_begin + static_cast<int>(c / n));
}

__global__ void __launch_bounds__(flat_block)
    velocity_change_kernel(const float* __restrict__ f, float* __restrict__ u_prev, convergence_state* state, int n,
                           slab s) {
  const std::size_t cells = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(n);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  scenarios::begin_dependent(); // f is the last step's output; state was reset by the previous publish
  float local = 0.0F;
  for (std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cells; c += stride) {
    const int x = static_cast<int>(c % static_cast<std::size_t>(n));
    const int y = s.row_begin + static_cast<int>(c / static_cast<std::size_t>(n));
    const cell_moments m = moments(f, n, s, x, y);
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

__global__ void publish_change_kernel(convergence_state* state, const unsigned* peer_maxima, int peer_count,
                                      float* slots) {
  scenarios::begin_dependent(); // state holds velocity_change_kernel's maximum
  const unsigned block = state->block;
  // The other slabs' maxima (bit patterns, copied here): the maximum over all cells, as on one slab.
  unsigned bits = state->max_change_bits;
  for (int i = 0; i < peer_count; ++i) bits = max(bits, peer_maxima[i]);
  slots[block % 2U] = __uint_as_float(bits);
  state->max_change_bits = 0U;
  state->block = block + 1U;
}

unsigned flat_grid(std::size_t items) {
  const std::size_t blocks = (items + flat_block - 1) / flat_block;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

//! A kernel_call of `kernel` with `args` (converted to its parameter types, checked at compile time, and owned by
//! the call).
template <class... Params, class... Args>
kernel_call make_call(std::string_view name, dim3 grid, dim3 block, void (*kernel)(Params...), Args&&... args) {
  static_assert(conveyor::kernel_accepts<void (*)(Params...), Args...>,
                "cavity: the arguments do not match the kernel's parameters");
  auto values = std::make_shared<conveyor::kernel_args<Params...>>(std::forward<Args>(args)...);
  kernel_call c;
  c.name = name;
  c.function = reinterpret_cast<const void*>(kernel);
  c.grid = grid;
  c.block = block;
  c.arguments = values->pointers();
  c.storage = std::move(values);
  return c;
}

} // namespace

kernel_call initialise_call(float* f, float* u_prev, convergence_state* state, int n, const slab& s) {
  return make_call("initialise_kernel", dim3(flat_grid(s.plane)), dim3(flat_block), &initialise_kernel, f, u_prev,
                   state, n, s);
}

kernel_call stream_collide_call(const float* src, float* dst, const lattice_params& p, const slab& s) {
  if (p.step_layout == 1) {
    const std::size_t cells = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(p.n);
    const auto blocks = static_cast<unsigned>((cells + flat_block - 1) / flat_block);
    return make_call("stream_collide_flat_kernel", dim3(blocks), dim3(flat_block), &stream_collide_flat_kernel, src,
                     dst, p, s);
  }
  const dim3 grid(static_cast<unsigned>((p.n + step_block - 1) / step_block), static_cast<unsigned>(s.rows));
  return make_call("stream_collide_kernel", grid, dim3(step_block), &stream_collide_kernel, src, dst, p, s);
}

kernel_call velocity_change_call(const float* f, float* u_prev, convergence_state* state, int n, const slab& s) {
  const std::size_t cells = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(n);
  return make_call("velocity_change_kernel", dim3(flat_grid(cells)), dim3(flat_block), &velocity_change_kernel, f,
                   u_prev, state, n, s);
}

kernel_call publish_change_call(convergence_state* state, const unsigned* peer_maxima, int peer_count, float* slots) {
  return make_call("publish_change_kernel", dim3(1), dim3(1), &publish_change_kernel, state, peer_maxima, peer_count,
                   slots);
}

void launch(const kernel_call& c, const launch_ctx& ctx) {
  conveyor::launch_kernel(conveyor::stream::adopt(ctx.stream, conveyor::ownership::borrowed),
                          scenarios::launch_shape(ctx, c.grid, c.block), c.function, c.arguments);
  ctx.after(c.name);
}

} // namespace conveyor::cavity
