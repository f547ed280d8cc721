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
} // namespace device

axpb_fn axpb_kernel() noexcept { return &device::axpb; }

void launch_axpb(cudaStream_t s, float* y, float a, float b) noexcept {
  device::axpb<<<1, kernel_threads, 0, s>>>(y, a, b);
}

} // namespace conveyor::bench
