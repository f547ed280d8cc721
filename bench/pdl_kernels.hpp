#pragma once
//! \file pdl_kernels.hpp
//! The `faster/` group's device code (pdl_kernels.cu, compiled as relocatable device code: device-side graph
//! launch needs the device runtime), declared for host compilers.

#include <conveyor/define/graph.hpp>

namespace conveyor::bench {

//! `y[threadIdx.x] += 1` after conveyor::device::wait_for_dependencies() (and an early launch_dependents()): the
//! benchmark's kernel that may be reached by programmatic edges. One block of kernel_threads threads.
using add_one_fn = void (*)(float*);
[[nodiscard]] add_one_fn add_one_waiting_kernel() noexcept;

//! Makes `g` a device relaunch loop of `limit` iterations per host launch (conveyor::device::add_relaunch with
//! count_to on `count`, device memory holding 0; `status` receives a failed relaunch's error).
//! \throws conveyor::cuda_error when CUDA refuses the controller node.
void add_counted_relaunch(conveyor::graph& g, unsigned* count, unsigned limit, int* status);

} // namespace conveyor::bench
