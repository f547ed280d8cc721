#pragma once
//! \file launch.hpp
//! conveyor::launch: a kernel launch on a stream with typed arguments and the launch attributes of
//! launch_config (`cudaLaunchKernelExC`): priority, and programmatic dependent launch, which stream
//! capture records as programmatic edges.

#include "conveyor/define/kernel_args.hpp"
#include "conveyor/runtime/stream.hpp"

#include <source_location>
#include <utility>

namespace conveyor {

//! Launches `function` with the argument array `arguments` (as cudaLaunchKernelExC takes them) on
//! `s`, with cfg.grid, cfg.block, cfg.shared_bytes and the attributes cfg names: cfg.priority when
//! not 0 (`cudaLaunchAttributePriority`), cfg.programmatic
//! (`cudaLaunchAttributeProgrammaticStreamSerialization`: the kernel may start while the previous
//! kernel on `s` is still running; it must call conveyor::device::wait_for_dependencies() before
//! reading that kernel's results). Inside a capture the launch becomes a kernel node; a
//! programmatic launch's edges from kernel nodes become programmatic edges. Thread safety: as
//! CUDA's launches (any thread; launches on one stream are ordered by the calls' order).
//! \throws cuda_error naming the kernel (`cudaFuncGetName`) and configuration when CUDA
//!         refuses the launch.
void launch_kernel(const stream& s, const launch_config& cfg, const void* function,
                   void** arguments, std::source_location where = std::source_location::current());

//! Launches `kernel<<<cfg.grid, cfg.block, cfg.shared_bytes, s>>>(args...)` with cfg's attributes
//! (see launch_kernel). The arguments are checked against the kernel's parameters at compile time
//! and converted to their types (held for the call only: CUDA copies them at launch). Thread
//! safety: as launch_kernel.
//! \throws cuda_error when CUDA refuses the launch.
template <class... Params, class... Args>
void launch(const stream& s, const launch_config& cfg, void (*kernel)(Params...), Args&&... args) {
  auto values = make_kernel_args(kernel, std::forward<Args>(args)...);
  launch_kernel(s, cfg, reinterpret_cast<const void*>(kernel), values.pointers());
}

//! As launch(const stream&, ...), on a borrowed `cudaStream_t` (for code that holds raw streams;
//! null is the legacy default stream). Thread safety: as launch_kernel.
//! \throws cuda_error when CUDA refuses the launch.
template <class... Params, class... Args>
void launch(cudaStream_t s, const launch_config& cfg, void (*kernel)(Params...), Args&&... args) {
  const stream borrowed = stream::adopt(s, ownership::borrowed);
  launch(borrowed, cfg, kernel, std::forward<Args>(args)...);
}

} // namespace conveyor
