#pragma once
//! \file programmatic.hpp
//! The programmatic pass: turns the full edges between kernel nodes into programmatic edges
//! wherever the dependent kernel is known to wait before it reads (it calls
//! conveyor::device::wait_for_dependencies() first), and says what it changed and why it left the
//! other edges alone. Programmatic dependent launch lets a kernel begin — launch its blocks, run
//! its prologue — while its predecessor finishes, removing most of the gap between dependent
//! kernels (CUDA Programming Guide, "Programmatic Dependent Launch and Synchronization";
//! docs/faster.md has the numbers).

#include "conveyor/define/edge_type.hpp"
#include "conveyor/define/graph.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace conveyor {

//! The kernels that call conveyor::device::wait_for_dependencies() in every block before they read
//! (or overwrite) anything a predecessor writes (or reads): the kernels whose incoming edges may be
//! made programmatic. Thread safety: a plain value.
class waiting_kernels {
public:
  //! Adds `kernel`. Returns *this: `waiting_kernels{}.add(scale).add(axpy)`.
  template <class... Params>
  waiting_kernels& add(void (*kernel)(Params...)) {
    return add_function(reinterpret_cast<const void*>(kernel));
  }
  //! Adds a kernel by its host function pointer (as cudaLaunchKernel takes it). Null is ignored.
  waiting_kernels& add_function(const void* function);
  //! True when `function` was added.
  [[nodiscard]] bool contains(const void* function) const noexcept;
  //! The functions added, in order.
  [[nodiscard]] std::span<const void* const> functions() const noexcept { return functions_; }

private:
  std::vector<const void*> functions_;
};

//! One edge the pass looked at. Names as in reports: the label, else "kernel 'name'". A plain
//! value.
struct programmatic_edge {
  //! "" for the top-level graph, else the path of nested graphs, e.g. "node 4 (loop) body 0"
  std::string graph;
  std::size_t from = 0;  //!< the predecessor's position in creation order within that graph
  std::size_t to = 0;    //!< the dependent's position
  std::string from_name; //!< the predecessor's name
  std::string to_name;   //!< the dependent's name
  std::string reason;    //!< for edges left alone: why, e.g. "the predecessor is a memcpy node"
};

//! What make_programmatic did. A plain value.
struct programmatic_report {
  std::vector<programmatic_edge> changed; //!< edges now of the requested type
  //! edges into kernel nodes left as they were, with the reason
  std::vector<programmatic_edge> left;
  //! edges that were programmatic or launch-completion already
  std::size_t already = 0;
  std::size_t edges = 0; //!< edges examined (every graph, nested graphs included)

  //! One line per changed edge ("made programmatic: a -> b", with " (in <graph path>)" for a nested
  //! graph) and per edge left ("left as it was: a -> b: reason"). \throws std::bad_alloc only.
  [[nodiscard]] std::vector<std::string> lines() const;
};

//! Makes every full edge a → b of `g` (and of its child graphs and conditional bodies) of type
//! `type` when a and b are kernel nodes and b's kernel is in `kernels`; every other edge into a
//! kernel node is reported with the reason it stays. Edges already programmatic are counted, not
//! changed. Run it before instantiate(); executable graphs made before are not affected.
//!
//! Correctness rests on what `kernels` promises: every block of such a kernel calls
//! conveyor::device::wait_for_dependencies() before it touches memory a predecessor writes or
//! reads. Kernels of libraries (cuBLAS, ...) cannot promise it and are never in the set. All or
//! nothing: when reading or changing an edge fails, the edges changed before are put back, and `g`
//! is left as it was. Calls: `cudaGraphNodeGetDependencies` (with edge data),
//! `cudaGraphKernelNodeGetParams`, `cudaGraphRemoveDependencies` then `cudaGraphAddDependencies`
//! per changed edge, `cudaGraphChildGraphNodeGetGraph` (child graphs are changed in place, inside
//! the child node). Conditional bodies are reached only when the conditional node was added through
//! Conveyor (add_conditional) to `g` itself or to a body Conveyor built. Thread safety: changes
//! `g`; as every builder call, one thread at a time.
//! \throws std::invalid_argument when `type` is edge_type::full or `g` is empty (moved-from);
//!         cuda_error when reading or changing the graph fails.
programmatic_report make_programmatic(graph& g, const waiting_kernels& kernels,
                                      edge_type type = edge_type::programmatic);

} // namespace conveyor
