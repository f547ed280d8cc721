#pragma once
//! \file conditional_device.cuh
//! Device side of conditional nodes: set the condition from a kernel. Include from .cu files only.

#include <cuda_runtime.h>

namespace conveyor {

//! Sets the condition of a conditional node from device code (`cudaGraphSetConditional`). Call it
//! from one thread only (concurrent calls race); the value counts from the end of the kernel. For a
//! WHILE node, 0 ends the loop; for a SWITCH, the value picks the body.
__device__ inline void set_condition(cudaGraphConditionalHandle handle, unsigned value) {
  cudaGraphSetConditional(handle, value);
}

} // namespace conveyor
