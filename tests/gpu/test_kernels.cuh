#pragma once
// The small kernels the GPU test programs share (one definition each, included by one translation unit per
// program). Each computes something a host reference can check element by element.

#include <conveyor/define/conditional_device.cuh>
#include <conveyor/define/programmatic.cuh>

#include <cooperative_groups.h>

namespace conveyor::test::kernels {

// y = a x + y
__global__ void axpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// x = a x
__global__ void scale(int n, float a, float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a;
}

// x = x + b (same signature as scale: a kernel node can be switched between the two)
__global__ void add_scalar(int n, float b, float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] + b;
}

// y = x + b
__global__ void copy_plus(int n, const float* x, float b, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + b;
}

// out = a + b (out may alias a or b)
__global__ void add_vectors(int n, const float* a, const float* b, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// out = a + b + c
__global__ void add3(int n, const float* a, const float* b, const float* c, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (a[i] + b[i]) + c[i];
}

__global__ void increment_all(int n, int* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] + 1;
}

// Busy-waits about `cycles` clock cycles, then scales x: slow enough that a consumer not ordered after it would
// read the old values.
__global__ void spin_then_scale(int n, float a, float* x, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a;
}

// Holds its stream until the host sets *open (mapped pinned memory) to non-zero, or about `max_cycles` pass (so
// that a failing test cannot hang the GPU). Work queued behind it stays queued meanwhile.
__global__ void wait_until_open(const volatile int* open, long long max_cycles) {
  const long long start = clock64();
  while (*open == 0 && clock64() - start < max_cycles) {}
}

// out[0] = the number of blocks in this block's thread-block cluster (1 without clusters).
__global__ void cluster_blocks(int* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = static_cast<int>(cooperative_groups::this_cluster().num_blocks());
}

// out[i] = value for i < n
__global__ void fill_int(int n, int value, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

// ---- conditional nodes (conveyor/define/conditional_device.cuh) ----

//! WHILE tests its condition before the first pass: start with counter < limit.
__global__ void set_below_limit(cudaGraphConditionalHandle h, const int* counter, const int* limit) {
  conveyor::set_condition(h, *counter < *limit ? 1U : 0U);
}

//! WHILE body: one step up, and go on while still below the limit.
__global__ void count_up(cudaGraphConditionalHandle h, int* counter, const int* limit) {
  const int c = ++*counter;
  conveyor::set_condition(h, c < *limit ? 1U : 0U);
}

// Programmatic dependent launch: lets its dependents launch at once, waits for its own programmatic predecessors
// (conveyor::device::wait_for_dependencies), busy-waits about `cycles`, then x = a x + b. A dependent that did not
// wait would read x before this kernel's write; each step's result depends on the one before, so the order shows.
__global__ void pdl_affine(int n, float a, float b, float* x, long long cycles) {
  conveyor::device::launch_dependents();
  conveyor::device::wait_for_dependencies();
  const long long start = clock64();
  while (clock64() - start < cycles) {}
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

// The GPU's global nanosecond timer (PTX %globaltimer).
__device__ inline unsigned long long global_ns() {
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Each block busy-waits about `cycles`, then raises *finish to the time it ended (ns, %globaltimer): *finish ends
// as the time the kernel's last block finished. For priority tests: many blocks, so that kernels contend for SMs.
__global__ void stamp_finish(long long cycles, unsigned long long* finish) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(finish, global_ns());
}

} // namespace conveyor::test::kernels

#include "support/gpu.hpp"

#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

namespace conveyor::test {

//! Holds the work queued on a stream until open(): a kernel on a stream of its own spins on mapped pinned memory,
//! and the held stream waits for an event recorded after it. The spin gives up after about 10 s, so a failing test
//! cannot hang the GPU.
class gate {
public:
  gate() {
    CONVEYOR_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flag_), sizeof(int), cudaHostAllocMapped));
    *flag_ = 1;
    CONVEYOR_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag_), flag_, 0));
  }
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;
  ~gate() {
    open();
    (void)cudaStreamSynchronize(blocker_.get());
    (void)cudaFreeHost(flag_);
  }
  //! Work enqueued on `s` after this call waits until open().
  void hold(const conveyor::stream& s) {
    *flag_ = 0;
    kernels::wait_until_open<<<1, 1, 0, blocker_.get()>>>(device_flag_, 20'000'000'000LL);
    CONVEYOR_CHECK(cudaGetLastError());
    done_.record(blocker_);
    s.wait(done_);
  }
  //! Lets the held work run.
  void open() noexcept { *static_cast<volatile int*>(flag_) = 1; }

private:
  int* flag_ = nullptr;
  int* device_flag_ = nullptr;
  conveyor::stream blocker_;
  conveyor::event done_{cudaEventDisableTiming};
};

} // namespace conveyor::test
