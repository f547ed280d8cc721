#pragma once
// Internal (kinds layer): what each node kind knows about graph files (conveyor/keep/graph_file.hpp) — how to save a
// node (its parameters as the file's values: addresses as buffers, kernels, events and host functions as entries of
// the file's tables), how to add it back to a graph at load, and, with no GPU, how to describe and compare two saved
// nodes. The saver and loader (src/keep/save.cpp, load.cpp) implement the interfaces below: they own the file's
// tables and what a node refers to; the kind knows its own fields. docs/graph-files.md.

#include "conveyor/define/description.hpp"
#include "conveyor/keep/graph_file.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace conveyor::detail {

struct graph_state;
struct kernel_snapshot;
struct conditional_info;
struct param_diff;

//! What a kind's save facet asks of the saver (src/keep/save.cpp). Each call throws the saver's refusal (naming the
//! node) when the value cannot be saved with a stated meaning.
class keep_saver {
public:
  virtual ~keep_saver() = default;
  //! `p`, an address the node reads or writes `bytes` bytes through (0: unknown), as a buffer and offset: a buffer the
  //! program named, an allocation node's range, or the device, pinned or managed allocation holding it. `role`
  //! names the field in a refusal ("memcpy source").
  virtual saved_address address(const void* p, std::uint64_t bytes, std::string_view role) = 0;
  //! The kernel's table entry, the argument bytes and their relocations (typed parameters, or scanned words).
  virtual void kernel(const kernel_snapshot& k, saved_kernel_node& out) = 0;
  //! The event's entry in the file's table (named by the node's label, else "event<k>").
  virtual std::uint32_t event(cudaEvent_t e) = 0;
  //! The host function's entry, named by the node's label (unlabelled host nodes are refused).
  virtual std::uint32_t host_function() = 0;
  //! A nested graph (a child graph's copy, a conditional body) saved with its nodes; `state` is its model, or null.
  virtual saved_graph graph(cudaGraph_t g, const graph_state* state) = 0;
  //! The buffer of an allocation node's range (buffer_memory::graph_allocation).
  virtual std::uint32_t allocation(const void* p, std::uint64_t bytes, int device) = 0;
  //! The condition's entry in the top-level graph's table.
  virtual std::uint32_t condition(const conditional_info& c) = 0;
  //! Refuses the node: throws the saver's refusal naming the node, `reason` and the `fix`.
  [[noreturn]] void refuse(std::string_view reason, std::string_view fix) {
    raise(reason, fix);
    std::abort(); // raise throws
  }

protected:
  //! Throws the refusal (save_error) naming the node being saved.
  virtual void raise(std::string_view reason, std::string_view fix) = 0;
};

//! What a kind's load facet asks of the loader (src/keep/load.cpp). Each call throws the loader's refusal (naming
//! the node) when the file's value cannot be made.
class keep_loader {
public:
  virtual ~keep_loader() = default;
  //! The address a saved address stands for at load (a buffer passed or allocated, a graph allocation made).
  virtual void* address(const saved_address& a) = 0;
  //! The driver's kernel node parameters of `k` (function resolved, arguments relocated into `arguments`, whose
  //! storage lives until the node is added).
  virtual CUDA_KERNEL_NODE_PARAMS kernel(const saved_kernel_node& k, std::vector<unsigned char>& arguments,
                                         std::vector<void*>& pointers) = 0;
  //! The event of entry `index` (passed by name, or made for the load).
  virtual cudaEvent_t event(std::uint32_t index) = 0;
  //! The callable of host-function entry `index` (the registry's, kept alive by the loaded graph).
  virtual std::function<void()>* host_function(std::uint32_t index) = 0;
  //! A graph built from `g` (a child graph's body: the node copies it).
  virtual cudaGraph_t child_graph(const saved_graph& g) = 0;
  //! The condition handle of entry `index` (made on the graph being loaded).
  virtual cudaGraphConditionalHandle condition(std::uint32_t index) = 0;
  //! Called after a conditional node is added: records it and fills its bodies from `n.bodies`.
  virtual void conditional_added(cudaGraphNode_t node, const saved_node& n, const std::vector<cudaGraph_t>& bodies) = 0;
  //! The size an allocation node of `buffer` reserves (the file's size).
  virtual std::uint64_t allocation_bytes(std::uint32_t buffer) = 0;
  //! Called after an allocation node of `buffer` returned `pointer`.
  virtual void allocated(std::uint32_t buffer, void* pointer) = 0;
};

//! Two saved files whose nodes are compared or described (offline: no GPU).
struct saved_context {
  const graph_file* before = nullptr;
  const graph_file* after = nullptr;
};

//! The index of `T` among saved_parameters' alternatives (keep_facets::payload).
template <class T, class... Ts>
constexpr std::size_t alternative_index(std::type_identity<std::variant<Ts...>>) noexcept {
  constexpr bool same[] = {std::is_same_v<T, Ts>...};
  for (std::size_t i = 0; i < sizeof...(Ts); ++i)
    if (same[i]) return i;
  return sizeof...(Ts);
}
template <class T>
inline constexpr std::size_t payload_index = alternative_index<T>(std::type_identity<saved_parameters>{});
static_assert(payload_index<std::monostate> == 0 && payload_index<saved_conditional_node> == 7);

//! One kind's facets for graph files (kind_traits::keep). Null save: the kind is refused at save with `refusal`.
struct keep_facets {
  //! Reads node `n` (of the graph whose model is `owner`, or null) into `out`'s parameters and bodies.
  void (*save)(cudaGraphNode_t n, const graph_state* owner, keep_saver& s, saved_node& out) = nullptr;
  //! Adds a node with `n`'s parameters to `g`, after `deps` (full dependencies; the loader adds the others);
  //! CUDA's errors are thrown as cuda_error.
  cudaGraphNode_t (*load)(const saved_node& n, cudaGraph_t g, std::span<const cudaGraphNode_t> deps,
                          keep_loader& l) = nullptr;
  //! Fills the kind's fields of `d` from saved node `n` of `file` (offline describe).
  void (*describe)(const saved_node& n, const graph_file& file, node_description& d) = nullptr;
  //! What differs between saved nodes `a` (of ctx.before) and `b` (of ctx.after), as diff says it for live graphs.
  param_diff (*compare)(const saved_node& a, const saved_node& b, const saved_context& ctx) = nullptr;
  //! Why the kind is refused at save, and the fix (save null).
  std::string_view refusal{};
  std::string_view fix{};
  //! Which alternative of saved_parameters holds the kind's parameters in a file (payload_index); meaningless when
  //! save is null.
  std::size_t payload = 0;
};

//! "buffer 'x' +64", or "null": an address for messages and diffs.
[[nodiscard]] std::string saved_address_text(const saved_address& a, const graph_file& file);

} // namespace conveyor::detail
