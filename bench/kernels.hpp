#pragma once
//! \file kernels.hpp
//! The benchmark's kernel: `y[i] = a * y[i] + b` over one block of kernel_threads threads (one 1 KiB chunk of
//! floats): as small as a kernel gets, so that launch costs dominate. Declared for host compilers; defined in
//! kernels.cu.

#include <cuda_runtime_api.h>

#include <cstddef>

namespace conveyor::bench {

//! Threads in the kernel's single block; also the floats of one chunk it updates.
inline constexpr unsigned kernel_threads = 256;
//! Bytes of one chunk: kernel_threads floats.
inline constexpr std::size_t chunk_bytes = kernel_threads * sizeof(float);

//! Type of the kernel `axpb(float* y, float a, float b)`.
using axpb_fn = void (*)(float*, float, float);

//! The kernel's host-side handle, for graph kernel nodes (conveyor::graph::kernel, cudaKernelNodeParams::func).
[[nodiscard]] axpb_fn axpb_kernel() noexcept;

//! Enqueues `axpb<<<1, kernel_threads, 0, s>>>(y, a, b)`. Does not check for launch errors: callers check
//! cudaGetLastError once after a batch of launches (conveyor::check_launch) so that timings hold launches only.
void launch_axpb(cudaStream_t s, float* y, float a, float b) noexcept;

//! Floats of the `all` buffer of launch_rebind_tiny (indices wrap).
inline constexpr int rebind_all_floats = 256;
//! Floats of the `one` buffer of launch_rebind_tiny (indices wrap).
inline constexpr int rebind_one_floats = 8;

//! Enqueues the graphed/ group's tiny kernel, 1 block of 32 threads: thread 0 adds `a` to all[i mod 256] and `b` to
//! one[i mod 8]. No launch-error check (as launch_axpb).
void launch_rebind_tiny(cudaStream_t s, float* all, float a, float* one, float b, int i) noexcept;

} // namespace conveyor::bench
