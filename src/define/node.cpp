#include "conveyor/define/node.hpp"

#include "conveyor/define/detail/graph_state.hpp"
#include "conveyor/error.hpp"
#include "detail/compat.hpp"

#include <stdexcept>

namespace conveyor {

std::string_view to_string(node_kind kind) noexcept {
  switch (kind) {
  case node_kind::kernel: return "kernel";
  case node_kind::memcpy: return "memcpy";
  case node_kind::memset: return "memset";
  case node_kind::host: return "host";
  case node_kind::child_graph: return "child_graph";
  case node_kind::empty: return "empty";
  case node_kind::event_wait: return "event_wait";
  case node_kind::event_record: return "event_record";
  case node_kind::mem_alloc: return "mem_alloc";
  case node_kind::mem_free: return "mem_free";
  case node_kind::conditional: return "conditional";
  case node_kind::other: return "other";
  }
  return "other";
}

node_kind to_node_kind(cudaGraphNodeType type) noexcept {
  switch (type) {
  case cudaGraphNodeTypeKernel: return node_kind::kernel;
  case cudaGraphNodeTypeMemcpy: return node_kind::memcpy;
  case cudaGraphNodeTypeMemset: return node_kind::memset;
  case cudaGraphNodeTypeHost: return node_kind::host;
  case cudaGraphNodeTypeGraph: return node_kind::child_graph;
  case cudaGraphNodeTypeEmpty: return node_kind::empty;
  case cudaGraphNodeTypeWaitEvent: return node_kind::event_wait;
  case cudaGraphNodeTypeEventRecord: return node_kind::event_record;
  case cudaGraphNodeTypeMemAlloc: return node_kind::mem_alloc;
  case cudaGraphNodeTypeMemFree: return node_kind::mem_free;
  case cudaGraphNodeTypeConditional: return node_kind::conditional;
  default: return node_kind::other;
  }
}

cudaGraph_t node::graph_handle() const noexcept { return owner_ != nullptr ? owner_->handle : nullptr; }

node_kind node::kind() const {
  cudaGraphNodeType type{};
  CONVEYOR_CHECK(cudaGraphNodeGetType(handle_, &type));
  return to_node_kind(type);
}

namespace {
void check_same_graph(const node& a, const node& b, const char* what) {
  if (!a || !b) throw std::invalid_argument(std::string("conveyor::node::") + what + ": empty node handle");
  if (a.owner() != b.owner())
    throw std::invalid_argument(std::string("conveyor::node::") + what + ": the nodes belong to different graphs");
}
} // namespace

node& node::precede(std::initializer_list<node> successors) {
  for (const node& s : successors) {
    check_same_graph(*this, s, "precede");
    CONVEYOR_CHECK(detail::add_dependencies(graph_handle(), &handle_, &s.handle_, 1));
  }
  return *this;
}

node& node::succeed(std::initializer_list<node> predecessors) {
  for (const node& p : predecessors) {
    check_same_graph(*this, p, "succeed");
    CONVEYOR_CHECK(detail::add_dependencies(graph_handle(), &p.handle_, &handle_, 1));
  }
  return *this;
}

node& node::label(std::string text) {
  if (!*this || owner_ == nullptr) throw std::invalid_argument("conveyor::node::label: empty node handle");
  owner_->labels[handle_] = std::move(text);
  return *this;
}

std::string node::label() const {
  if (owner_ == nullptr) return {};
  auto it = owner_->labels.find(handle_);
  return it == owner_->labels.end() ? std::string{} : it->second;
}

std::vector<node> node::dependencies() const {
  std::size_t count = 0;
  CONVEYOR_CHECK(detail::get_dependencies(handle_, nullptr, &count));
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(detail::get_dependencies(handle_, handles.data(), &count));
  std::vector<node> out;
  for (auto* h : handles) out.emplace_back(h, owner_);
  return out;
}

std::vector<node> node::dependents() const {
  std::size_t count = 0;
  CONVEYOR_CHECK(detail::get_dependents(handle_, nullptr, &count));
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(detail::get_dependents(handle_, handles.data(), &count));
  std::vector<node> out;
  for (auto* h : handles) out.emplace_back(h, owner_);
  return out;
}

void node_list::assign(const node* nodes, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!nodes[i]) throw std::invalid_argument("conveyor: empty node handle in a dependency list");
  size_ = count;
  cudaGraphNode_t* handles = inline_handles_.data();
  detail::graph_state** owners = inline_owners_.data();
  if (count > inline_capacity) {
    heap_handles_.resize(count);
    heap_owners_.resize(count);
    handles = heap_handles_.data();
    owners = heap_owners_.data();
  }
  for (std::size_t i = 0; i < count; ++i) {
    handles[i] = nodes[i].get();
    owners[i] = nodes[i].owner();
  }
}

bool node_list::all_in(const detail::graph_state* owner) const noexcept {
  for (std::size_t i = 0; i < size_; ++i)
    if ((*this)[i].owner() != owner) return false;
  return true;
}

} // namespace conveyor
