//! \file pdl_kernels.cu
//! The `faster/` group's kernel and relaunch controller (relocatable device code).

#include "bench/pdl_kernels.hpp"
#include "bench/kernels.hpp"

#include <conveyor/define/programmatic.cuh>
#include <conveyor/execute/device_launch.cuh>

namespace conveyor::bench {

namespace device {
__global__ void add_one_waiting(float* y) {
  conveyor::device::launch_dependents();
  conveyor::device::wait_for_dependencies();
  y[threadIdx.x] += 1.0F;
}
} // namespace device

add_one_fn add_one_waiting_kernel() noexcept { return &device::add_one_waiting; }

void add_counted_relaunch(conveyor::graph& g, unsigned* count, unsigned limit, int* status) {
  (void)conveyor::device::add_relaunch(g, conveyor::device::count_to{count, limit}, status);
}

} // namespace conveyor::bench
