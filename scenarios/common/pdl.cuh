#pragma once
//! \file pdl.cuh
//! Device side of programmatic dependent launch in the scenarios (`--pdl`): the call every scenario kernel makes
//! before it touches global memory. Include from .cu files only.
//!
//! The rule the scenarios keep, on which the correctness of every programmatic edge and of
//! launch_ctx::programmatic rests: **every block of every scenario kernel calls begin_dependent() before its first
//! read or write of global memory** (only index arithmetic and kernel parameters come before it), on every path,
//! also in blocks that then find nothing to do. Hence a kernel completes only after its programmatic predecessors
//! have completed, so completion is transitive along a chain of programmatic edges (a kernel that waits for its
//! predecessor also waits for everything before it), exactly as with full edges.

#include <conveyor/define/programmatic.cuh>

namespace conveyor::scenarios {

//! Waits until the kernels this grid depends on programmatically have completed and their writes are visible
//! (conveyor::device::wait_for_dependencies; returns at once for a launch that is not programmatic). Call it from
//! every thread of every block before the first access to global memory.
//!
//! It does not trigger the dependents' launch (conveyor::device::launch_dependents): they launch as this kernel's
//! blocks exit. Measured on the H200 with the cavity's step at 257² (`conveyor cavity --pdl --pdl-trigger`,
//! docs/faster.md): triggering as the blocks start made a step 1.39× slower than without programmatic launch (the
//! next steps' blocks sit resident, waiting, beside the running one), triggering after the wait 1.03× slower, and
//! triggering at exit 1.09× faster.
__device__ __forceinline__ void begin_dependent() noexcept { conveyor::device::wait_for_dependencies(); }

} // namespace conveyor::scenarios
