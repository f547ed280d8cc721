//! \file cg_kernels.cu
//! CG kernels: fused vector updates with deterministic block reductions, one-block finishers, and the check
//! kernel that drives the WHILE conditional node.

#include "solve/cg_kernels.hpp"

#include "common/pdl.cuh"

#include <conveyor/define/conditional_device.cuh>
#include <conveyor/error.hpp>

#include <algorithm>
#include <vector>

namespace conveyor::solve {

namespace {

constexpr int block = cg_block_size;

// Sum of `v` over the block, in a fixed tree order; the result is valid in thread 0. `shared` has `block` slots.
// Ends with a barrier so the shared array can be reused right away.
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = block / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// Sum of partials[0 .. count) by one block, in a fixed order.
__device__ double sum_partials(const double* partials, int count, double* shared) {
  double v = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += block) v += partials[i];
  return block_sum(v, shared);
}

__global__ void __launch_bounds__(block) cg_init(int n, const double* b, const double* inv_diag, double* x, double* r,
                                                 double* z, double* p, double* partials) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ double shared[block];
  double rz = 0.0;
  double rr = 0.0;
  for (int i = blockIdx.x * block + threadIdx.x; i < n; i += gridDim.x * block) {
    const double bi = b[i];
    const double zi = inv_diag[i] * bi;
    x[i] = 0.0;
    r[i] = bi;
    z[i] = zi;
    p[i] = zi;
    rz += bi * zi;
    rr += bi * bi;
  }
  rz = block_sum(rz, shared);
  rr = block_sum(rr, shared);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = rz;
    partials[gridDim.x + blockIdx.x] = rr;
  }
}

__global__ void __launch_bounds__(block) cg_init_finish(int blocks, const double* partials, cg_scalars* s) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ double shared[block];
  const double rz = sum_partials(partials, blocks, shared);
  const double rr = sum_partials(partials + blocks, blocks, shared);
  if (threadIdx.x == 0) {
    s->rho = rz;
    s->rr = rr;
    s->bb = rr;
    s->pap = 0.0;
    s->alpha = 0.0;
    s->beta = 0.0;
    s->iterations = 0;
    s->breakdown = 0;
  }
}

__global__ void __launch_bounds__(block) cg_dot_p_ap(int n, const double* p, const double* ap, double* partials) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ double shared[block];
  double sum = 0.0;
  for (int i = blockIdx.x * block + threadIdx.x; i < n; i += gridDim.x * block) sum += p[i] * ap[i];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(block) cg_alpha(int blocks, const double* partials, cg_scalars* s) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ double shared[block];
  const double pap = sum_partials(partials, blocks, shared);
  if (threadIdx.x == 0) {
    s->pap = pap;
    if (pap > 0.0 && isfinite(pap)) {
      s->alpha = s->rho / pap;
    } else {
      s->alpha = 0.0; // leaves x and r unchanged; the check kernel stops the loop
      s->breakdown = 1;
    }
  }
}

__global__ void __launch_bounds__(block)
    cg_update_x_r_z(int n, const double* inv_diag, const double* p, const double* ap, const cg_scalars* s, double* x,
                    double* r, double* z, double* partials) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ double shared[block];
  const double alpha = s->alpha;
  double rz = 0.0;
  double rr = 0.0;
  for (int i = blockIdx.x * block + threadIdx.x; i < n; i += gridDim.x * block) {
    x[i] += alpha * p[i];
    const double ri = r[i] - alpha * ap[i];
    const double zi = inv_diag[i] * ri;
    r[i] = ri;
    z[i] = zi;
    rz += ri * zi;
    rr += ri * ri;
  }
  rz = block_sum(rz, shared);
  rr = block_sum(rr, shared);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = rz;
    partials[gridDim.x + blockIdx.x] = rr;
  }
}

__global__ void __launch_bounds__(block) cg_beta(int blocks, const double* partials, cg_scalars* s) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ double shared[block];
  const double rz = sum_partials(partials, blocks, shared);
  const double rr = sum_partials(partials + blocks, blocks, shared);
  if (threadIdx.x == 0 && s->breakdown == 0) {
    s->beta = rz / s->rho;
    s->rho = rz;
    s->rr = rr;
    s->iterations += 1;
  }
}

__global__ void __launch_bounds__(block) cg_update_p(int n, const double* z, const cg_scalars* s, double* p) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const double beta = s->beta;
  for (int i = blockIdx.x * block + threadIdx.x; i < n; i += gridDim.x * block) p[i] = z[i] + beta * p[i];
}

__global__ void cg_check(cg_scalars* s, cg_scalars* mirror, double tol, int max_iter, cudaGraphConditionalHandle handle,
                         int set_condition) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const double rel_res = s->bb > 0.0 ? sqrt(s->rr / s->bb) : 0.0;
  // NaN compares false, so a NaN residual stops the loop as well.
  const int proceed = (s->breakdown == 0 && rel_res > tol && s->iterations < max_iter) ? 1 : 0;
  s->rel_res = rel_res;
  s->proceed = proceed;
  if (mirror != nullptr) { // zero-copy read-back: visible to the host once the stream is synchronised
    *mirror = *s;
    __threadfence_system();
  }
  if (set_condition != 0) conveyor::set_condition(handle, static_cast<unsigned>(proceed));
}

} // namespace

std::vector<const void*> waiting_kernel_functions() {
  return {reinterpret_cast<const void*>(&cg_init),         reinterpret_cast<const void*>(&cg_init_finish),
          reinterpret_cast<const void*>(&cg_dot_p_ap),     reinterpret_cast<const void*>(&cg_alpha),
          reinterpret_cast<const void*>(&cg_update_x_r_z), reinterpret_cast<const void*>(&cg_beta),
          reinterpret_cast<const void*>(&cg_update_p),     reinterpret_cast<const void*>(&cg_check)};
}

int reduction_blocks(int n) noexcept { return std::clamp((n + block - 1) / block, 1, 1024); }

void enqueue_init(const cg_device_state& st, cudaStream_t s) {
  cg_init<<<st.blocks, block, 0, s>>>(st.n, st.b, st.inv_diag, st.x, st.r, st.z, st.p, st.partials);
  check_launch("cg_init<<<>>>");
}

void enqueue_init_finish(const cg_device_state& st, cudaStream_t s) {
  cg_init_finish<<<1, block, 0, s>>>(st.blocks, st.partials, st.scalars);
  check_launch("cg_init_finish<<<>>>");
}

void enqueue_dot_p_ap(const cg_device_state& st, cudaStream_t s) {
  cg_dot_p_ap<<<st.blocks, block, 0, s>>>(st.n, st.p, st.ap, st.partials);
  check_launch("cg_dot_p_ap<<<>>>");
}

void enqueue_alpha(const cg_device_state& st, cudaStream_t s) {
  cg_alpha<<<1, block, 0, s>>>(st.blocks, st.partials, st.scalars);
  check_launch("cg_alpha<<<>>>");
}

void enqueue_update_x_r_z(const cg_device_state& st, cudaStream_t s) {
  cg_update_x_r_z<<<st.blocks, block, 0, s>>>(st.n, st.inv_diag, st.p, st.ap, st.scalars, st.x, st.r, st.z,
                                              st.partials);
  check_launch("cg_update_x_r_z<<<>>>");
}

void enqueue_beta(const cg_device_state& st, cudaStream_t s) {
  cg_beta<<<1, block, 0, s>>>(st.blocks, st.partials, st.scalars);
  check_launch("cg_beta<<<>>>");
}

void enqueue_update_p(const cg_device_state& st, cudaStream_t s) {
  cg_update_p<<<st.blocks, block, 0, s>>>(st.n, st.z, st.scalars, st.p);
  check_launch("cg_update_p<<<>>>");
}

void enqueue_check(const cg_device_state& st, double tol, int max_iter, cudaGraphConditionalHandle handle,
                   bool set_condition, cudaStream_t s) {
  cg_check<<<1, 1, 0, s>>>(st.scalars, st.mirror, tol, max_iter, handle, set_condition ? 1 : 0);
  check_launch("cg_check<<<>>>");
}

} // namespace conveyor::solve
