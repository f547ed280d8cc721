#pragma once
//! \file device_launch.cuh
//! Device-side graph launch, device side: launch a device graph from a kernel (fire-and-forget,
//! tail, sibling), the graph the kernel runs in (current_graph), kernel node updates from a kernel
//! (CUDA 12.4+), and the relaunch loop: a graph whose last kernel tail-launches the graph again
//! while a device-side condition holds (add_relaunch).
//!
//! Include from .cu files compiled with relocatable device code and linked with the device runtime:
//! nvcc `-rdc=true ... -lcudadevrt`; in CMake
//! `set_target_properties(t PROPERTIES CUDA_SEPARABLE_COMPILATION ON)` on the target whose sources
//! include it (CMake then device-links it with cudadevrt). `cudaGraphLaunch` and the kernel node
//! update calls are functions of the device runtime library, which only relocatable device code can
//! call. The host side (device_graph, the rules, make_device_updatable) is in
//! conveyor/execute/device_graph.hpp.

#include "conveyor/define/graph.hpp"
#include "conveyor/define/node.hpp"
#include "conveyor/execute/device_graph.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#if defined(__CUDACC__) && !defined(__CUDACC_RDC__) && !defined(__CUDACC_EWP__)
#error                                                                                             \
    "conveyor/execute/device_launch.cuh: device-side graph launch needs relocatable device code linked with the device runtime: compile with nvcc -rdc=true and link -lcudadevrt (CMake: set_target_properties(<target> PROPERTIES CUDA_SEPARABLE_COMPILATION ON))"
#endif

namespace conveyor::device {

//! How a kernel launches a device graph (CUDA Programming Guide, "Device Launch"; each is a named
//! stream of the device runtime).
enum class launch_mode {
  //! `cudaStreamGraphFireAndForget`: starts at once, runs beside the launching graph, as its child:
  //! the launching graph's launch completes only once it has. At most 120 per execution of the
  //! launching graph.
  fire_and_forget,
  //! `cudaStreamGraphTailLaunch`: runs after the launching graph and all it started have completed,
  //! in the order enqueued. At most 255 pending; a graph may have one tail launch of itself pending
  //! at a time.
  tail,
  //! `cudaStreamGraphFireAndForgetAsSibling`: starts at once as a child of the launching graph's
  //! parent, so the launching graph's tail launches do not wait for it.
  sibling,
};

//! Launches the device graph `g` from device code (`cudaGraphLaunch` with the named stream of
//! `mode`) and returns CUDA's result: cudaSuccess, or an error when the graph was not instantiated
//! for device launch or uploaded, is still running from an earlier device launch, or a limit (120
//! fire-and-forget, 255 pending tail launches) is reached. Per thread: call it from one thread of a
//! kernel that runs in a graph (a kernel launched with <<<>>> on a stream may not launch graphs).
//! Asynchronous; never blocks.
__device__ inline cudaError_t launch_graph(device_graph_ref g,
                                           launch_mode mode = launch_mode::fire_and_forget) {
  cudaStream_t s = cudaStreamGraphFireAndForget;
  if (mode == launch_mode::tail) s = cudaStreamGraphTailLaunch;
  if (mode == launch_mode::sibling) s = cudaStreamGraphFireAndForgetAsSibling;
  return cudaGraphLaunch(g.exec, s);
}

//! launch_graph(g, launch_mode::tail): `g` runs once the calling graph and everything it started
//! have completed.
__device__ inline cudaError_t tail_launch(device_graph_ref g) {
  return launch_graph(g, launch_mode::tail);
}

//! The device graph the calling kernel runs in (`cudaGetCurrentGraphExec`), or a null ref (exec ==
//! nullptr) when the kernel is not a node of a graph instantiated for device launch.
__device__ inline device_graph_ref current_graph() {
  return device_graph_ref{cudaGetCurrentGraphExec()};
}

//! Tail-launches the graph the calling kernel runs in again (one pending at a time): the step of a
//! relaunch loop. Returns cudaErrorInvalidValue when the kernel is not in a device graph, else
//! CUDA's result.
__device__ inline cudaError_t relaunch() {
  const device_graph_ref self = current_graph();
  if (self.exec == nullptr) return cudaErrorInvalidValue;
  return tail_launch(self);
}

// ---- kernel node updates from the device (CUDA 12.4+; nodes made with
// conveyor::make_device_updatable) ----------

//! Writes `size` bytes at `value` into the kernel parameters of `n` at byte `offset`
//! (conveyor::kernel_param_offset gives a parameter's offset) for its following launches
//! (`cudaGraphKernelNodeSetParam`). The calling kernel must run on the node's device. A host-side
//! change of the node, at its next upload or launch, replaces it.
__device__ inline cudaError_t set_param(device_node n, std::size_t offset, const void* value,
                                        std::size_t size) {
  return cudaGraphKernelNodeSetParam(n.handle, offset, value, size);
}
//! Typed form of set_param: writes `value` (sizeof(T) bytes) at `offset`.
template <class T>
__device__ inline cudaError_t set_param(device_node n, std::size_t offset, const T& value) {
  return cudaGraphKernelNodeSetParam(n.handle, offset, &value, sizeof(T));
}
//! Enables or disables the kernel node `n` (a disabled node does nothing) for its following
//! launches (`cudaGraphKernelNodeSetEnabled`).
__device__ inline cudaError_t set_enabled(device_node n, bool enabled) {
  return cudaGraphKernelNodeSetEnabled(n.handle, enabled);
}
//! Sets the grid (blocks in x, y, z) of the kernel node `n` for its following launches
//! (`cudaGraphKernelNodeSetGridDim`).
__device__ inline cudaError_t set_grid_dim(device_node n, dim3 grid) {
  return cudaGraphKernelNodeSetGridDim(n.handle, grid);
}
//! Applies `count` updates at once (`cudaGraphKernelNodeUpdatesApply`); each names its node
//! (`.node`, a device_node's handle), what it changes (`.field`) and the value.
__device__ inline cudaError_t apply_updates(const cudaGraphKernelNodeUpdate* updates,
                                            std::size_t count) {
  return cudaGraphKernelNodeUpdatesApply(updates, count);
}

// ---- the relaunch loop
// -------------------------------------------------------------------------------------------

//! A relaunch-loop condition that counts: each evaluation adds one to `*count` and continues while
//! the count is below `limit`; at the limit it sets `*count` back to 0 (so that the next host
//! launch of the loop runs `limit` iterations again) and stops. The loop body runs exactly `limit`
//! times per host launch (at least once: the first run is the launch itself). `count` is device
//! memory (or pinned mapped host memory) holding 0 before the first launch. A plain value, passed
//! to the loop's kernel by value.
struct count_to {
  unsigned* count = nullptr; //!< iterations done in the current loop (device memory)
  unsigned limit = 1;        //!< iterations per host launch
  //! True while the loop should run again (called by one thread, after the body).
  __device__ bool operator()() const {
    const unsigned done = *count + 1;
    if (done < limit) {
      *count = done;
      return true;
    }
    *count = 0;
    return false;
  }
};

//! A relaunch-loop condition read from device memory: continue while `*flag` is non-zero (the body
//! sets it, e.g. to 0 once converged). A plain value, passed to the loop's kernel by value.
struct while_nonzero {
  const int* flag = nullptr; //!< the loop continues while *flag != 0 (device memory)
  //! True while the loop should run again (called by one thread, after the body).
  __device__ bool operator()() const { return *flag != 0; }
};

//! The loop's last kernel: evaluates `keep_going()` and, while true, tail-launches the graph it
//! runs in again (relaunch). A failed relaunch stores CUDA's error in `*status` (when not null) and
//! ends the loop. Launched with one thread by add_relaunch.
template <class Condition>
__global__ void relaunch_while(Condition keep_going, int* status) {
  if (keep_going()) {
    const cudaError_t rc = relaunch();
    if (rc != cudaSuccess && status != nullptr) *status = static_cast<int>(rc);
  }
}

//! Makes `g` a relaunch loop: adds, after every node without dependents, one single-thread kernel
//! node (relaunch_while) that evaluates `keep_going` (a trivially copyable device functor such as
//! count_to or while_nonzero) and tail-launches the graph again while it returns true. Instantiate
//! the result with conveyor::instantiate_for_device and launch it from the host
//! (device_graph::launch): the stream's following work waits for the whole loop. `status`, when not
//! null, is device memory receiving CUDA's error if a relaunch fails (left unchanged on success).
//! Thread safety: as the graph's other changes (one thread).
//! \returns the controller node.
//! \throws cuda_error when CUDA refuses the node; std::invalid_argument for an empty
//!         (moved-from) graph (graph::nodes).
template <class Condition>
node add_relaunch(graph& g, Condition keep_going, int* status = nullptr) {
  std::vector<node> sinks;
  for (const node& n : g.nodes())
    if (n.dependents().empty()) sinks.push_back(n);
  return g
      .kernel(node_list(sinks), launch_config{dim3(1), dim3(1)}, &relaunch_while<Condition>,
              keep_going, status)
      .label("relaunch while");
}

} // namespace conveyor::device
