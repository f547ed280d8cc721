// What a capture checks of host memory when it ends (capture_checks.hpp).
#include "define/capture_checks.hpp"

#include "cuda/check.hpp"
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <pthread.h>

#include <algorithm>
#include <stdexcept>

namespace conveyor::detail {

namespace {

// The calling thread's stack, [lowest address, highest address); {0, 0} when pthread cannot say.
std::pair<std::uintptr_t, std::uintptr_t> thread_stack() noexcept {
  thread_local std::pair<std::uintptr_t, std::uintptr_t> bounds = [] {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return std::pair<std::uintptr_t, std::uintptr_t>{0, 0};
    void* base = nullptr;
    std::size_t size = 0;
    const int rc = pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
    if (rc != 0) return std::pair<std::uintptr_t, std::uintptr_t>{0, 0};
    const auto low = reinterpret_cast<std::uintptr_t>(base);
    return std::pair{low, low + size};
  }();
  return bounds;
}

std::string fix_text(bool copy) {
  return copy ? "copy from (or into) a page-locked buffer that lives as long as the graph (cudaMallocHost; hand "
                "its owner to the graph with graph::keep_alive), or pass a scalar as a kernel argument instead"
              : "give the host function data that lives as long as the graph (a heap object kept with "
                "graph::keep_alive), or add the host node with graph::host, which owns its callable";
}

[[noreturn]] void refuse_returned(const graph_state* names, cudaGraphNode_t n, std::size_t position,
                                  const host_address& use, bool copy) {
  throw std::invalid_argument(fmt::format(
      "conveyor::capture: node {} ({}) holds host address {} as its {}{}: it lies on the capturing thread's "
      "stack, in a stack frame that returned before the capture ended (a local variable or temporary of the "
      "captured code). Every replay would read or write whatever that stack slot holds then, not the value the "
      "code saw. Fix: {}",
      position, node_name(names, n), use.address, use.role,
      use.bytes != 0 ? fmt::format(" ({} B)", use.bytes) : std::string(), fix_text(copy)));
}

[[noreturn]] void refuse_in_body(const graph_state* names, cudaGraphNode_t n, std::size_t position, node_kind kind) {
  const bool memory = kind == node_kind::mem_alloc || kind == node_kind::mem_free;
  throw std::invalid_argument(fmt::format(
      "conveyor::capture_into: node {} ({}) was captured into a conditional node's body, and CUDA does not allow "
      "{} nodes there (instantiation would fail: \"a node's operation is not supported\"). {}",
      position, node_name(names, n), to_string(kind),
      memory ? "A library call captured into the body allocated its workspace (cuBLAS, cuBLASLt, cuSPARSE, CUB), or "
               "the body called cudaMallocAsync/cudaFreeAsync. Fix: give the library a preallocated workspace before "
               "capturing the body (cublasSetWorkspace; cusparse*_bufferSize, then a buffer allocated ahead; CUB's "
               "temp-storage query), and allocate outside the conditional node"
             : "Fix: move that work before or after the conditional node"));
}

// Whether `address` is pageable host memory (memory_side: host, not page-locked).
bool pageable_host(const void* address) {
  bool pageable = false;
  return memory_side(address, &pageable) == 'H' && pageable;
}

[[noreturn]] void refuse_pageable(const graph_state* names, cudaGraphNode_t n, std::size_t position,
                                  const host_address& u) {
  throw std::invalid_argument(fmt::format(
      "conveyor::capture: node {} ({}) copies {} B with pageable host memory {} as its {}: a replay reads or "
      "writes it when the copy runs, after the capturing code has moved on (a local std::vector freed when a "
      "helper returned, a buffer the program changes between calls), and CUDA copies pageable memory through a "
      "staging buffer. Fix: {}; or, when the buffer outlives the graph and holds what each replay must copy, "
      "declare it: capture_options::host_memory = host_memory_check::returned_frames (graphed: "
      "graphed_options::pageable = pageable_policy::allow)",
      position, node_name(names, n), u.bytes, u.address, u.role, fix_text(true)));
}

struct walker {
  const graph_state* names;
  graph_state* owner;
  const returned_frames& gone;
  host_memory_check check;
  bool body = false; // the graph is a conditional node's body: only kinds CUDA allows there
  // Appends the kernel nodes' cluster attributes (those inside child graphs too); null where not read.
  std::vector<kernel_attribute>* clusters = nullptr;

  // A host address node `n` holds: refused when it lies in a returned stack frame; a pageable copy side is refused
  // or recorded as the check asks.
  void check_host_address(cudaGraphNode_t n, std::size_t position, const host_address& u) const {
    if (gone.holds(u.address)) refuse_returned(names, n, position, u, u.copied);
    if (u.copied && check != host_memory_check::returned_frames) check_copy_side(n, position, u);
  }

  // A copy side in pageable host memory: refused or recorded as the check asks.
  void check_copy_side(cudaGraphNode_t n, std::size_t position, const host_address& u) const {
    if (in_allocation(u.address)) return; // a graph allocation's address: device memory, mapped when the graph runs
    if (!pageable_host(u.address)) return;
    if (check == host_memory_check::refuse_pageable) refuse_pageable(names, n, position, u);
    if (owner != nullptr)
      owner->pageable.push_back({position, node_name(names, n), u.address, u.bytes, u.role == "source"});
  }

  // The host addresses of node `n` (its kind's host_addresses), and the graph it embeds (walked with positions of
  // its own).
  void check_node(cudaGraphNode_t n, std::size_t position, const kind_traits& traits) const {
    const auto where = [&] { return fmt::format("node {} ({})", position, node_name(names, n)); };
    if (traits.host_addresses != nullptr) {
      std::vector<host_address> uses;
      check_with(traits.host_addresses(n, uses), "reading a node's host addresses", where);
      for (const host_address& u : uses) check_host_address(n, position, u);
    }
    if (traits.embedded_graph != nullptr) {
      cudaGraph_t child = nullptr;
      check_with(traits.embedded_graph(n, &child), "reading a node's embedded graph", where);
      walker{nullptr, nullptr, gone, check, false}.walk(child, 0);
    }
  }

  // The address ranges of the graph's allocation nodes seen so far (walked in creation order, an allocation comes
  // before the nodes that use it). cudaPointerGetAttributes calls such an address unregistered host memory while the
  // graph is not running: it is not pageable memory.
  mutable std::vector<std::pair<std::uintptr_t, std::size_t>> allocations{};
  bool in_allocation(const void* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    for (const auto& [base, bytes] : allocations)
      if (a >= base && a - base < bytes) return true;
    return false;
  }
  void note_allocation(cudaGraphNode_t n) const {
    cudaMemAllocNodeParams p{};
    if (cudaGraphMemAllocNodeGetParams(n, &p) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    allocations.emplace_back(reinterpret_cast<std::uintptr_t>(p.dptr), p.bytesize);
  }

  void walk(cudaGraph_t g, std::size_t first) const {
    const auto nodes = graph_nodes(g);
    for (std::size_t i = 0; i < first; ++i) // nodes before a capture_into: their allocations count too
      if (kind_of(nodes[i]) == node_kind::mem_alloc) note_allocation(nodes[i]);
    for (std::size_t i = first; i < nodes.size(); ++i) visit(nodes[i], i);
  }

  // Node `n`, at `position` of the graph captured: its allocation noted, its kind checked in a body, its host
  // addresses checked, its cluster attributes read.
  void visit(cudaGraphNode_t n, std::size_t position) const {
    const node_kind kind = kind_of(n);
    if (kind == node_kind::mem_alloc) note_allocation(n);
    const kind_traits& traits = traits_of(kind);
    if (body && !traits.allowed_in_body) refuse_in_body(names, n, position, kind);
    if (check != host_memory_check::off) check_node(n, position, traits);
    if (clusters != nullptr) read_clusters(n, position, kind);
  }

  // Node `n`'s cluster attributes, or those of the kernels inside it. A conditional node's bodies may change after
  // the capture: the graph's attributes are then unknown (read at each whole-graph update), and no more are read.
  void read_clusters(cudaGraphNode_t n, std::size_t position, node_kind kind) const {
    if (*unknown_clusters) return;
    if (kind == node_kind::kernel) {
      read_cluster_attributes(n, position, *clusters);
    } else if (kind == node_kind::conditional) {
      *unknown_clusters = true;
    } else {
      append_embedded_cluster_attributes(n, kind, owner, position, *clusters);
    }
  }
  bool* unknown_clusters = nullptr; // set with `clusters`
};

} // namespace

returned_frames frames_below(std::uintptr_t frame) noexcept {
  const auto [low, high] = thread_stack();
  if (low == 0 || frame <= low || frame > high) return {};
  return {low, frame};
}

namespace {

// Forgets the cluster attributes of `owner` (none: nothing), to be read at an update.
void forget_clusters(graph_state* owner) noexcept {
  if (owner != nullptr) owner->clusters.reset();
}

// Where the walk appends the cluster attributes of `owner`'s kernels: its list, when known so far; else null (not read).
std::vector<kernel_attribute>* clusters_of(graph_state* owner) noexcept {
  return owner != nullptr && owner->clusters ? &*owner->clusters : nullptr;
}

} // namespace

void check_captured_nodes(cudaGraph_t g, std::size_t first, const graph_state* names, graph_state* owner,
                          const returned_frames& gone, host_memory_check check) {
  const bool body = owner != nullptr && owner->conditional_body;
  if (check == host_memory_check::off && !body) return forget_clusters(owner); // not read: an update reads them
  bool unknown_clusters = false;
  try {
    walker w{names, owner, gone, check, body, clusters_of(owner)};
    w.unknown_clusters = &unknown_clusters;
    w.walk(g, first);
  } catch (...) {
    forget_clusters(owner); // read in part
    throw;
  }
  if (unknown_clusters) owner->clusters.reset();
}

} // namespace conveyor::detail
