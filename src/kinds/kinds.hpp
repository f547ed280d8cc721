#pragma once
// Internal (kinds layer): the builder, setter and reader calls of each node kind, defined in the kind's own file
// (kinds/<kind>.cpp) beside its table entry. Raw CUDA handles in, CUDA handles or errors out; each add call throws
// cuda_error naming the CUDA call when CUDA refuses it.

#include "conveyor/define/description.hpp"
#include "conveyor/define/kernel_args.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::detail {

using node_handles = std::span<const cudaGraphNode_t>;

// ---- kernel (kinds/kernel.cpp) ----
//! A kernel node's parameters through the driver (valid for runtime and library kernels alike), or nullopt.
std::optional<CUDA_KERNEL_NODE_PARAMS> read_kernel_node(cudaGraphNode_t node);
//! The kernel's demangled name without its parameter list (cuFuncGetName / cuKernelGetName), or empty.
std::string kernel_name(const CUDA_KERNEL_NODE_PARAMS& params);
//! "ns::kernel<T>(int, float*)" from a mangled name -> "ns::kernel<T>": readable, without the parameter list (the
//! mangled name itself when it does not demangle).
std::string readable_kernel_name(const char* mangled);
std::string kernel_name(cudaGraphNode_t node);
//! (offset, size) in bytes of each parameter (cuFuncGetParamInfo / cuKernelGetParamInfo), cached per function: the
//! cached entry itself (valid for the life of the process), or null when the driver cannot tell.
const std::vector<std::pair<std::size_t, std::size_t>>* parameter_layout_ref(const CUDA_KERNEL_NODE_PARAMS& p);
//! Forgets the cached layouts (kept in memory: earlier answers stay valid): called when a library or module is
//! unloaded, after which its functions' handles may be reused for other kernels. Never throws.
void forget_parameter_layouts() noexcept;
//! One launch attribute as read from a kernel node: rc is cudaSuccess when the node holds a value.
struct kernel_attribute_read {
  cudaError_t rc = cudaErrorInvalidValue;
  cudaLaunchAttributeValue value{};
};
//! The launch attributes a comparison reads from each kernel node (kernel.cpp's list).
#if CUDART_VERSION >= 13000
inline constexpr std::size_t kernel_attribute_slots = 11;
#else
inline constexpr std::size_t kernel_attribute_slots = 10;
#endif
//! Bytes held inline up to `inline_capacity` (most kernels' argument blocks), on the heap beyond: a snapshot of
//! thousands of kernel nodes then allocates nothing per node. Zero-filled when resized.
class argument_bytes {
public:
  static constexpr std::size_t inline_capacity = 96;
  argument_bytes() = default;
  void resize(std::size_t n) {
    size_ = n;
    if (n > inline_capacity) heap_.assign(n, 0);
    else {
      heap_.clear();
      std::fill(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(n), 0);
    }
  }
  [[nodiscard]] unsigned char* data() noexcept { return size_ > inline_capacity ? heap_.data() : inline_.data(); }
  [[nodiscard]] const unsigned char* data() const noexcept {
    return size_ > inline_capacity ? heap_.data() : inline_.data();
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::vector<unsigned char> to_vector() const { return {data(), data() + size_}; }
  friend bool operator==(const argument_bytes& a, const argument_bytes& b) noexcept {
    return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data(), b.data(), a.size_) == 0);
  }

private:
  std::size_t size_ = 0;
  std::array<unsigned char, inline_capacity> inline_{};
  std::vector<unsigned char> heap_;
};

//! Everything CUDA launches a kernel node with, read once: the parameter block, the argument bytes and the launch
//! attributes. Comparisons of whole graphs read each graph's nodes once into these (walk.hpp's graph_snapshot).
//! (Fields ordered for little padding: a snapshot holds one per node, thousands written at each read.)
struct kernel_snapshot {
  CUDA_KERNEL_NODE_PARAMS params{}; //!< kernelParams and extra cleared (see has_arguments, has_extra)
  //! Bit k: the k-th attribute of kernel.cpp's list holds something other than what a node made without attributes
  //! holds (cluster-only attributes are read only from nodes with clusters). Most nodes: 0, and nothing stored.
  std::uint32_t set_attributes = 0;
  bool readable = false;      //!< the driver could read the node
  bool has_arguments = false; //!< the node holds kernelParams
  bool has_extra = false;     //!< the node passes its arguments through `extra` (not comparable)
  const std::vector<std::pair<std::size_t, std::size_t>>* layout = nullptr; //!< parameter offsets and sizes
  argument_bytes arguments; //!< the argument bytes at their offsets (when layout is known)
  std::vector<cudaLaunchAttributeValue> attribute_values; //!< one per set bit, in bit order
};
// ---- memory a node points into (kinds/buffers.cpp) ----
//! The start address of the device allocation holding `address` (cuMemGetAddressRange), or nullopt for addresses
//! outside device allocations. Never throws.
std::optional<std::uint64_t> allocation_base(std::uint64_t address) noexcept;
//! 'D' for device (or managed) memory, 'H' for host memory (pinned or pageable), 0 when CUDA cannot tell
//! (cudaPointerGetAttributes, one call); `pageable`, when given, is set to whether `p` is host memory CUDA does not
//! know (neither pinned, registered nor managed); `device`, when given, to the device owning device memory, else -1.
//! Never throws.
char memory_side(const void* p, bool* pageable = nullptr, int* device = nullptr) noexcept;
//! The device of a kernel node's context (CUDA_KERNEL_NODE_PARAMS::ctx), or -1 when the driver cannot tell.
int context_device(CUcontext ctx) noexcept;
//! Adds the allocation holding `p` to d.buffers (sorted, distinct); nothing for other addresses.
void add_buffer(node_description& d, const void* p);
//! Adds the allocations every 8-byte word of the kernel's arguments points into.
void add_kernel_buffers(node_description& d, const kernel_snapshot& s);

//! Reads `node`: one parameter read, and with `attributes` one per launch attribute (without, set_attributes stays
//! 0: for readers that need the arguments only). Never throws but for std::bad_alloc.
kernel_snapshot read_kernel_snapshot(cudaGraphNode_t node, bool attributes = true);
//! read_kernel_snapshot into `out`, a default-constructed snapshot (a graph's snapshot reads into its vector's
//! elements in place: no copy of a few hundred bytes a node).
void read_kernel_snapshot_into(cudaGraphNode_t node, kernel_snapshot& out, bool attributes = true);
//! Rebinding's fields of a kernel node read so (kinds/fields.hpp): its argument bytes, one field per parameter, and
//! what must stay fixed (function, context, launch shape); `out.patchable` stays false when the arguments are not
//! readable. Reads nothing more from the driver.
struct node_fields;
void kernel_fields(const kernel_snapshot& k, node_fields& out);
struct param_diff;
//! What differs between two kernel nodes read so (the kernel kind's compare).
param_diff compare_kernel_snapshots(const kernel_snapshot& a, const kernel_snapshot& b);
cudaGraphNode_t add_kernel(cudaGraph_t g, node_handles deps, const launch_config& cfg, const void* function,
                           void** arguments);
//! The function and launch configuration a kernel node was made with (`cudaGraphKernelNodeGetParams`).
struct kernel_setting {
  const void* function = nullptr;
  launch_config config{};
};
//! \throws cuda_error when the node is not a kernel node the runtime can read.
kernel_setting read_kernel_setting(cudaGraphNode_t node);
//! Sets a kernel node of an executable graph (`cudaGraphExecKernelNodeSetParams`); the one call through which
//! graph_exec's typed kernel setters pass. (Nodes copied from another graph pass through the kind's copy_to_exec.)
cudaError_t set_exec_kernel(cudaGraphExec_t exec, cudaGraphNode_t node, const launch_config& cfg, const void* function,
                            void** arguments) noexcept;
//! One launch attribute a kernel node holds (anything but unset or the value a node made without attributes has).
struct kernel_attribute {
  //! The node's position in creation order; for a kernel inside a child graph or a conditional node's body, the
  //! position of the top-level node holding it.
  std::size_t position = 0;
  //! 0 for a top-level kernel node; else the kernel's number (from 1) among the kernels inside the node at
  //! `position`, depth first, each graph in creation order; unreadable_bodies for a conditional node whose bodies
  //! cannot be read (one Conveyor did not build: CUDA 13.0 has no call for them).
  std::uint32_t inner = 0;
  cudaLaunchAttributeID id{};
  cudaLaunchAttributeValue value{};
};
//! True when `a` and `b` hold the same value of launch attribute `id`, field by field (the union's other bytes are
//! not CUDA's to define); IDs this version does not know, byte for byte. What diff compares. Never throws.
[[nodiscard]] bool same_attribute_value(cudaLaunchAttributeID id, const cudaLaunchAttributeValue& a,
                                        const cudaLaunchAttributeValue& b) noexcept;
//! True when `v` holds, for attribute `id`, what a kernel node made without attributes holds (all zero, but the
//! memory-sync domain map's remote domain 1): what a snapshot does not store. Agrees with same_attribute_value against
//! that default, without building it for the attributes every read meets. Never throws.
[[nodiscard]] bool attribute_holds_default(cudaLaunchAttributeID id, const cudaLaunchAttributeValue& v) noexcept;
//! kernel_attribute::inner of the marker for a conditional node whose bodies cannot be read.
inline constexpr std::uint32_t unreadable_bodies = 0xFFFFFFFFU;
//! The thread-block cluster attributes (dimensions, and with them the preferred dimensions and scheduling policy) of
//! kernel node `n`, at `position` (`inner`: kernel_attribute::inner), appended to `out`: what a whole-graph update
//! reports as applied and does not apply after the first launch (H200, driver 580). One driver read for a node
//! without clusters (cuGraphKernelNodeGetAttribute), three with. Never throws but for std::bad_alloc.
void read_cluster_attributes(cudaGraphNode_t n, std::size_t position, std::vector<kernel_attribute>& out,
                             std::uint32_t inner = 0);
//! The same, of kernel node `position` from its snapshot (read with attributes), appended to `out`.
void append_cluster_attributes(std::size_t position, const kernel_snapshot& k, std::vector<kernel_attribute>& out);
//! The first entry (position, inner) where the attributes of `a` and `b` differ, or nullopt when none does.
std::optional<kernel_attribute> first_attribute_difference(const std::vector<kernel_attribute>& a,
                                                           const std::vector<kernel_attribute>& b);

// ---- memcpy (kinds/memcpy.cpp): a copy of zero bytes adds an empty node ----
cudaGraphNode_t add_memcpy_1d(cudaGraph_t g, node_handles deps, void* dst, const void* src, std::size_t bytes,
                              cudaMemcpyKind kind);
cudaGraphNode_t add_memcpy_2d(cudaGraph_t g, node_handles deps, void* dst, std::size_t dst_pitch, const void* src,
                              std::size_t src_pitch, std::size_t width_bytes, std::size_t height, cudaMemcpyKind kind);
cudaError_t set_exec_memcpy_1d(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst, const void* src,
                               std::size_t bytes, cudaMemcpyKind kind) noexcept;

// ---- memset (kinds/memset.cpp): zero elements add an empty node ----
cudaGraphNode_t add_memset(cudaGraph_t g, node_handles deps, void* dst, std::size_t pitch, unsigned value,
                           unsigned element_size, std::size_t width, std::size_t height);
cudaError_t set_exec_memset(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst, unsigned value,
                            unsigned element_size, std::size_t count) noexcept;

// ---- host (kinds/host.cpp): the callable is a std::function<void()> the caller keeps alive ----
cudaGraphNode_t add_host(cudaGraph_t g, node_handles deps, std::function<void()>* callable);
cudaError_t set_exec_host(cudaGraphExec_t exec, cudaGraphNode_t node, std::function<void()>* callable) noexcept;
// ---- the same changes on a graph's own nodes (the step-through shadow of an executable graph) ----
//! cudaGraphKernelNodeSetParams, as set_exec_kernel on an executable graph.
cudaError_t set_graph_kernel(cudaGraphNode_t node, const launch_config& cfg, const void* function,
                             void** arguments) noexcept;
//! cudaGraphMemcpyNodeSetParams1D, as set_exec_memcpy_1d.
cudaError_t set_graph_memcpy_1d(cudaGraphNode_t node, void* dst, const void* src, std::size_t bytes,
                                cudaMemcpyKind kind) noexcept;
//! cudaGraphMemsetNodeSetParams, as set_exec_memset.
cudaError_t set_graph_memset(cudaGraphNode_t node, void* dst, unsigned value, unsigned element_size,
                             std::size_t count) noexcept;
//! cudaGraphHostNodeSetParams, as set_exec_host.
cudaError_t set_graph_host(cudaGraphNode_t node, std::function<void()>* callable) noexcept;

// ---- child graph, empty, events (kinds/child_graph.cpp, empty.cpp, event_record.cpp, event_wait.cpp) ----
cudaGraphNode_t add_child(cudaGraph_t g, node_handles deps, cudaGraph_t body);
cudaGraphNode_t add_empty(cudaGraph_t g, node_handles deps);
cudaGraphNode_t add_event_record(cudaGraph_t g, node_handles deps, cudaEvent_t e);
cudaGraphNode_t add_event_wait(cudaGraph_t g, node_handles deps, cudaEvent_t e);

// ---- memory nodes (kinds/mem_alloc.cpp, mem_free.cpp) ----
//! What an allocation node reserves.
struct allocation_params {
  void* pointer = nullptr;
  std::size_t bytes = 0;
};
//! Adds an allocation of `bytes` on `device`, reached also by the devices of `access` (may be empty), from a pool with
//! `usage` (cudaMemPoolProps::usage); returns the node and the address it reserves.
std::pair<cudaGraphNode_t, void*> add_mem_alloc(cudaGraph_t g, node_handles deps, std::size_t bytes, int device,
                                                std::span<const cudaMemAccessDesc> access = {},
                                                unsigned short usage = 0);
cudaGraphNode_t add_mem_free(cudaGraph_t g, node_handles deps, void* pointer);
//! \throws cuda_error when the node cannot be read.
allocation_params read_mem_alloc(cudaGraphNode_t node);
//! \throws cuda_error when the node cannot be read.
void* read_mem_free(cudaGraphNode_t node);

// ---- conditional (kinds/conditional.cpp) ----
//! Adds a conditional node; returns it and its body graphs (owned by CUDA for the node's lifetime).
std::pair<cudaGraphNode_t, std::vector<cudaGraph_t>> add_conditional(cudaGraph_t g, node_handles deps,
                                                                     cudaGraphConditionalHandle handle,
                                                                     cudaGraphConditionalNodeType type, unsigned size);

} // namespace conveyor::detail
