#pragma once
//! \file programmatic.cuh
//! Device side of programmatic dependent launch (CUDA Programming Guide, "Programmatic Dependent
//! Launch and Synchronization"; PTX `griddepcontrol`): for kernels reached by a programmatic or
//! launch-completion edge (edge_type), or launched with launch_config::programmatic. Include in
//! CUDA sources only.

namespace conveyor::device {

//! Blocks the calling thread until every kernel this grid depends on programmatically has completed
//! and its memory operations are visible (`cudaGridDependencySynchronize`, PTX
//! `griddepcontrol.wait`). Call it before the first read of a predecessor's results (and before the
//! first write a predecessor may still read); work before it (index arithmetic, loading constants,
//! reading inputs no predecessor writes) overlaps the predecessor's tail. Returns at once when the
//! grid has no programmatic predecessor. On devices below compute capability 9.0, where launches
//! are never programmatic, it does nothing.
__device__ __forceinline__ void wait_for_dependencies() noexcept {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

//! Signals that the calling block has done what dependents may overlap with: once every block of
//! the grid has called it (or exited), kernels reached by a programmatic edge may begin
//! (`cudaTriggerProgrammaticLaunchCompletion`, PTX `griddepcontrol.launch_dependents`). It does not
//! make this block's writes visible to them: they still see those only after their
//! wait_for_dependencies(). Calling it is optional; without it dependents may begin when the grid's
//! blocks exit. Does nothing below compute capability 9.0.
__device__ __forceinline__ void launch_dependents() noexcept {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

} // namespace conveyor::device
