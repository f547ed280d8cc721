#pragma once
//! \file device_graph.hpp
//! Device-side graph launch, host side: the rules CUDA imposes on a graph launched from a kernel,
//! checked before instantiation with errors that name the node; `device_graph`, an executable graph
//! instantiated for device launch and uploaded, with the handle kernels take (`device_graph_ref`);
//! and device-updatable kernel nodes (`make_device_updatable`, CUDA 12.4+). The device side (launch
//! from a kernel, tail launch, relaunch loops, kernel node updates from a kernel) is in
//! conveyor/execute/device_launch.cuh, which needs relocatable device code.

#include "conveyor/define/description.hpp"
#include "conveyor/define/node_kind.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/execute/instantiate_flags.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor {

class graph;
class node;

// ---- the rules ----------------------------------------------------------------------------------

//! One rule of device graph launch that a graph breaks: where, what CUDA forbids, and how to fix
//! it. A plain value.
//!
//! The rules are CUDA's (CUDA Programming Guide, "Device Graph Launch" > "Device Graph
//! Requirements"; CUDA Runtime API, cudaGraphInstantiateWithParams): a device graph holds only
//! kernel, memcpy, memset and child-graph nodes, at least one kernel, memcpy or memset node, copies
//! only device memory and pinned (device-mapped) host memory, no CUDA arrays, and all its nodes on
//! one device; its kernels may not use CUDA dynamic parallelism.
struct device_launch_violation {
  //! The node, as a path from the top-level graph, e.g. "node 3 'log step' (host)" or
  //! "node 1 'body' (child_graph) > node 0 (mem_alloc)"; empty for a rule about the whole graph.
  std::string where;
  //! the node's kind (node_kind::other for a rule about the whole graph)
  node_kind kind = node_kind::other;
  std::string rule; //!< what CUDA forbids, in a sentence
  std::string fix;  //!< how to make the graph launchable from the device
  //! "where: rule; fix" (or "graph: rule; fix"), one line. Never throws but for std::bad_alloc.
  [[nodiscard]] std::string message() const;
};

//! The device-launch rules `d` breaks, in node order (nested graphs right after their node); empty
//! when it keeps them all. Checks what a description shows: node kinds (recursively through child
//! graphs), that the graph is not empty, and copies of pageable host memory. Pure function of `d`;
//! thread-safe; never throws but for std::bad_alloc. Host-testable: no CUDA call.
[[nodiscard]] std::vector<device_launch_violation>
device_launch_violations(const graph_description& d);

//! The device-launch rules `g` breaks: those of device_launch_violations(describe(g)), plus what
//! only the CUDA graph shows: copies involving CUDA arrays (`cudaGraphMemcpyNodeGetParams`) and
//! kernel nodes of another CUDA context (another device) than the current one
//! (`cuGraphKernelNodeGetParams`). CUDA dynamic parallelism inside a kernel cannot be seen before
//! instantiation: instantiate_for_device reports CUDA's refusal with the rule. Thread safety: reads
//! `g`; do not modify `g` from another thread meanwhile.
//! \throws cuda_error when reading the graph fails; std::invalid_argument for an empty
//!         (moved-from) graph.
[[nodiscard]] std::vector<device_launch_violation> device_launch_violations(const graph& g);

//! Thrown when a graph breaks rules of device graph launch: what() starts with "conveyor: this
//! graph cannot be launched from the device" and lists every violation, one a line. Thread safety:
//! an immutable value once thrown.
class device_launch_error : public std::invalid_argument {
public:
  //! An error listing `violations` (at least one).
  explicit device_launch_error(std::vector<device_launch_violation> violations);
  //! Every rule broken, in node order.
  [[nodiscard]] const std::vector<device_launch_violation>& violations() const noexcept {
    return violations_;
  }

private:
  std::vector<device_launch_violation> violations_;
};

//! Throws device_launch_error when `d` breaks a rule of device launch (device_launch_violations(d)
//! is not empty). Pure; thread-safe. \throws device_launch_error listing every violation.
void check_device_launchable(const graph_description& d);
//! Throws device_launch_error when `g` breaks a rule of device launch (device_launch_violations(g)
//! is not empty).
//! \throws device_launch_error listing every violation; cuda_error when reading the graph fails;
//!         std::invalid_argument for an empty (moved-from) graph.
void check_device_launchable(const graph& g);

// ---- device graphs ------------------------------------------------------------------------------

//! The handle of a device graph as kernels take it: pass it by value as a kernel argument and
//! launch it with conveyor::device::launch_graph / tail_launch
//! (conveyor/execute/device_launch.cuh). A plain, trivially copyable value of 8 bytes; valid while
//! the device_graph it came from is alive (a kernel that launches it must have finished before the
//! device_graph is destroyed). `exec` is null for "no graph".
struct device_graph_ref {
  //! the executable graph (`cudaGraphExec_t`), instantiated for device launch
  cudaGraphExec_t exec = nullptr;
};

//! An executable graph instantiated for device launch (instantiate_flags::device_launch) and
//! uploaded, so that a kernel can launch it (`cudaGraphLaunch` in device code: fire-and-forget,
//! tail or sibling launch). It can be launched from the host too (launch()). Move-only; the
//! destructor destroys it without waiting (as graph_exec's).
//!
//! CUDA's launch rules, which hold at run time and which Conveyor cannot check for you: a graph is
//! launched from the device only by a kernel that itself runs in a graph (host or device graph), by
//! one thread; a device graph may not be launched from the device while a previous launch of it is
//! still running (except a tail launch of itself, one pending at a time); a graph execution may
//! make at most 120 fire-and-forget launches and have at most 255 pending tail launches; launching
//! one device graph from the host and the device at once is undefined. Host-side updates of the
//! executable graph take effect from the device only after upload() (CUDA Programming Guide,
//! "Device Graph Launch").
//!
//! Step-through (CONVEYOR_STEP_THROUGH, graph_exec::step_through_launches) does not apply: a launch
//! from the device cannot be run node by node, so host launches of a device graph run it whole as
//! well.
//!
//! Thread safety: as graph_exec (one thread at a time per device_graph; different ones in
//! parallel).
class device_graph {
public:
  //! Checks `g` against the device-launch rules (check_device_launchable), instantiates it with
  //! instantiate_flags::device_launch | `extra` (`cudaGraphInstantiateWithParams`) and uploads it
  //! on `upload` (`cudaGraphUpload`, asynchronous: kernels launched on `upload` after this see it
  //! uploaded; synchronize before a kernel on another stream launches it).
  //! \throws device_launch_error listing every rule `g` breaks, before CUDA is asked;
  //!         std::invalid_argument when `extra` holds instantiate_flags::auto_free_on_launch (CUDA
  //!         does not allow it with device launch) or `g` is empty (moved-from); cuda_error when
  //!         CUDA refuses the graph anyway (the message names the node and, for a kernel node, says
  //!         that a kernel of a device graph may not use CUDA dynamic parallelism) or the upload
  //!         fails.
  device_graph(const graph& g, const stream& upload,
               instantiate_flags extra = instantiate_flags::none,
               std::source_location where = std::source_location::current());

  //! The CUDA handle (null for a moved-from device_graph).
  [[nodiscard]] cudaGraphExec_t get() const noexcept { return exec_.get(); }
  //! The handle to pass to kernels.
  [[nodiscard]] device_graph_ref ref() const noexcept { return device_graph_ref{exec_.get()}; }
  //! The executable graph, for what graph_exec offers (per-node setters and in-place updates: call
  //! upload() after them; describe, facts). The handle kernels hold stays valid across every
  //! update: an update that cannot be made in place (update_or_reinstantiate, update_incremental
  //! would re-instantiate) throws std::logic_error saying why, and changes nothing; make a new
  //! device_graph then. Do not assign another graph_exec to it.
  [[nodiscard]] graph_exec& exec() noexcept { return exec_; }
  //! The executable graph (read-only).
  [[nodiscard]] const graph_exec& exec() const noexcept { return exec_; }

  //! Uploads the executable graph again (`cudaGraphUpload`): needed after a host-side change
  //! (per-node setters, updates) before the next launch from the device. Asynchronous on `s`.
  //! \throws cuda_error when the upload fails.
  void upload(const stream& s, std::source_location where = std::source_location::current()) const {
    exec_.upload(s, where);
  }
  //! Launches the graph from the host on `s` (`cudaGraphLaunch`); asynchronous. The stream's work
  //! after it waits for everything the launch started from the device too: its fire-and-forget and
  //! tail launches, and theirs.
  //! \throws cuda_error when the launch fails.
  void launch(const stream& s, std::source_location where = std::source_location::current()) const {
    exec_.launch(s, where);
  }

private:
  graph_exec exec_;
};

//! Checks `g`, instantiates it for device launch and uploads it on `upload`: device_graph(g,
//! upload, extra).
//! \throws as device_graph::device_graph.
[[nodiscard]] device_graph
instantiate_for_device(const graph& g, const stream& upload,
                       instantiate_flags extra = instantiate_flags::none,
                       std::source_location where = std::source_location::current());

// ---- device-updatable kernel nodes (CUDA 12.4+) -------------------------------------------------

//! The handle of a device-updatable kernel node as kernels take it (`cudaGraphDeviceNode_t`): pass
//! it by value and change the node from device code with conveyor::device::set_param / set_enabled
//! / set_grid_dim / apply_updates (conveyor/execute/device_launch.cuh). A plain, trivially copyable
//! value; valid while the graph and its one executable graph are alive. `handle` is null for "no
//! node".
struct device_node {
  cudaGraphDeviceNode_t handle = nullptr; //!< CUDA's device-side handle of the kernel node
};

//! Makes the kernel node `kernel_node` updatable from device code
//! (`cudaGraphKernelNodeSetAttribute` with `cudaLaunchAttributeDeviceUpdatableKernelNode`) and
//! returns the handle kernels update it through. Call it on the graph before instantiating it.
//! CUDA's rules for such nodes, which follow the graph from then on: the node cannot be made
//! non-updatable again nor removed; the graph may have only one executable graph at a time, and
//! neither may be passed to a whole-graph update (graph_exec::update, update_or_reinstantiate,
//! update_incremental's whole-graph step); a device update lasts until the executable graph is
//! uploaded or launched after a host-side change of that node; a graph whose kernels update its own
//! nodes must be uploaded (graph_exec::upload) before it is launched. The updating kernel must run
//! on the node's device. Thread safety: as the graph's other changes (one thread).
//! \throws std::invalid_argument when the node is empty or not a kernel node, or when the
//!         driver is older than CUDA 12.4 (the message names the node); cuda_error when CUDA
//!         refuses the attribute.
[[nodiscard]] device_node make_device_updatable(const node& kernel_node);

//! The byte offset of parameter `index` (0-based) of the kernel `kernel_node` runs, as the
//! device-side set_param takes it (`cuFuncGetParamInfo` / `cuKernelGetParamInfo`). Thread safety:
//! reads the node.
//! \throws std::invalid_argument when the node is not a kernel node or has no parameter
//!         `index` (the message gives the parameter count); cuda_error when reading the node fails.
[[nodiscard]] std::size_t kernel_param_offset(const node& kernel_node, std::size_t index);

} // namespace conveyor
