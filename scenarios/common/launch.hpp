#pragma once
//! \file launch.hpp
//! The one way the scenarios' launchers enqueue their own kernels: conveyor::launch with the launch context's
//! stream and programmatic flag (launch_ctx::programmatic, `--pdl`), the launch checked, then launch_ctx::after().
//! Header-only (a template over the kernel), usable from .cu files: no fmt.

#include "common/execution_mode.hpp"

#include <conveyor/define/kernel_args.hpp>
#include <conveyor/runtime/launch.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>
#include <utility>

namespace conveyor::scenarios {

//! The launch configuration of a kernel of `grid` x `block` threads (and `shared_bytes` of dynamic shared memory)
//! under `ctx`: programmatic when ctx.programmatic. Never throws.
[[nodiscard]] inline launch_config launch_shape(const launch_ctx& ctx, dim3 grid, dim3 block,
                                                std::size_t shared_bytes = 0) noexcept {
  launch_config cfg;
  cfg.grid = grid;
  cfg.block = block;
  cfg.shared_bytes = shared_bytes;
  cfg.programmatic = ctx.programmatic;
  return cfg;
}

//! Launches `kernel` with `args` on ctx.stream in the shape `grid` x `block` (programmatic when ctx.programmatic:
//! the kernel must then call scenarios::begin_dependent() in every block before it touches global memory, see
//! common/pdl.cuh), then calls ctx.after(`name`) (synchronises in sync mode).
//! \throws conveyor::cuda_error naming the launch when CUDA refuses it, or naming `name` when the synchronisation
//!         of sync mode reports an error.
template <class... Params, class... Args>
void launch_kernel(const launch_ctx& ctx, std::string_view name, dim3 grid, dim3 block, void (*kernel)(Params...),
                   Args&&... args) {
  conveyor::launch(ctx.stream, launch_shape(ctx, grid, block), kernel, std::forward<Args>(args)...);
  ctx.after(name);
}

} // namespace conveyor::scenarios
