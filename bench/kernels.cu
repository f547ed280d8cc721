//! \file kernels.cu
//! The benchmark's kernel.

#include "bench/kernels.hpp"

namespace conveyor::bench {

namespace device {
//! y[i] = a * y[i] + b for the block's threads: one chunk of kernel_threads floats.
__global__ void axpb(float* y, float a, float b) {
  const unsigned i = threadIdx.x;
  y[i] = a * y[i] + b;
}

//! Thread 0: all[i mod rebind_all_floats] += a; one[i mod rebind_one_floats] += b.
__global__ void rebind_tiny(float* all, float a, float* one, float b, int i) {
  if (threadIdx.x == 0) {
    all[i & (rebind_all_floats - 1)] += a;
    one[i & (rebind_one_floats - 1)] += b;
  }
}
} // namespace device

axpb_fn axpb_kernel() noexcept { return &device::axpb; }

void launch_axpb(cudaStream_t s, float* y, float a, float b) noexcept {
  device::axpb<<<1, kernel_threads, 0, s>>>(y, a, b);
}

void launch_rebind_tiny(cudaStream_t s, float* all, float a, float* one, float b, int i) noexcept {
  device::rebind_tiny<<<1, 32, 0, s>>>(all, a, one, b, i);
}

} // namespace conveyor::bench
