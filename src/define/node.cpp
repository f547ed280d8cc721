#include "conveyor/define/node.hpp"

#include "conveyor/error.hpp"
#include "cuda/compat.hpp"
#include "kinds/kind.hpp"
#include "define/edges.hpp"
#include "kinds/node_name.hpp"
#include "model/graph_state.hpp"
#include "cuda/check.hpp"

#include <fmt/format.h>

#include <span>
#include <stdexcept>
#include <vector>

namespace conveyor {

cudaGraph_t node::graph_handle() const noexcept { return owner_ != nullptr ? owner_->handle : nullptr; }

node_kind node::kind() const { return detail::kind_of(handle_); }

namespace {
void check_same_graph(const node& a, const node& b, const char* what) {
  if (!a || !b) throw std::invalid_argument(std::string("conveyor::node::") + what + ": empty node handle");
  if (detail::access::owner(a) != detail::access::owner(b))
    throw std::invalid_argument(std::string("conveyor::node::") + what + ": the nodes belong to different graphs");
}
} // namespace

namespace detail {

namespace {
// The name of an edge's end in messages: `end`'s, or "the new node" for the node about to be added (null).
std::string end_name(const graph_state* owner, cudaGraphNode_t end) {
  return end != nullptr ? node_name(owner, end) : "the new node";
}
} // namespace

void check_edge_ends(const graph_state* owner, cudaGraphNode_t from, cudaGraphNode_t to, edge_type type,
                     const char* call) {
  if (type == edge_type::full) return;
  for (cudaGraphNode_t end : {from, to}) {
    if (end == nullptr) continue; // the node about to be added: the caller checks its kind
    const node_kind kind = kind_of(end);
    if (kind != node_kind::kernel)
      throw std::invalid_argument(fmt::format(
          "{}: a {} edge from {} to {} needs kernel nodes at both ends, and {} is a {} node (CUDA allows "
          "programmatic dependent launch only between kernels; use a full edge there)",
          call, to_string(type), end_name(owner, from), end_name(owner, to), node_name(owner, end), to_string(kind)));
  }
}

void add_edge(const graph_state* owner, cudaGraphNode_t from, cudaGraphNode_t to, edge_type type, const char* call) {
  check_edge_ends(owner, from, to, type, call);
  if (type == edge_type::full) {
    check_with(add_dependencies(owner->handle, &from, &to, 1), "cudaGraphAddDependencies",
               [&] { return fmt::format("{}: edge {} -> {}", call, node_name(owner, from), node_name(owner, to)); });
    return;
  }
  const cudaGraphEdgeData data = to_edge_data(type);
  check_with(add_dependencies(owner->handle, &from, &to, &data, 1), "cudaGraphAddDependencies", [&] {
    return fmt::format("{}: {} edge {} -> {}", call, to_string(type), node_name(owner, from), node_name(owner, to));
  });
}

} // namespace detail

namespace {

//! One edge to add: from -> to of `type`.
struct edge_to_add {
  cudaGraphNode_t from = nullptr;
  cudaGraphNode_t to = nullptr;
  edge_type type = edge_type::full;
};

//! Removes the edges `added` from owner's graph again, last first (errors ignored: another error unwinds).
void remove_added(const detail::graph_state* owner, std::span<const edge_to_add> added) noexcept {
  for (auto e = added.rbegin(); e != added.rend(); ++e) {
    const cudaGraphEdgeData data = to_edge_data(e->type);
    (void)detail::cleared(detail::remove_dependencies(owner->handle, &e->from, &e->to, &data, 1));
  }
}

//! Adds `edges` to owner's graph, all or none: every end is checked first (check_edge_ends), and when CUDA refuses
//! an edge the ones added before it are removed again, so that a failed precede/succeed leaves the graph as it was.
void add_all_or_none(const detail::graph_state* owner, std::span<const edge_to_add> edges, const char* call) {
  for (const edge_to_add& e : edges) detail::check_edge_ends(owner, e.from, e.to, e.type, call);
  std::size_t added = 0;
  try {
    for (; added < edges.size(); ++added)
      detail::add_edge(owner, edges[added].from, edges[added].to, edges[added].type, call);
  } catch (...) {
    remove_added(owner, edges.first(added));
    throw;
  }
}

} // namespace

node& node::precede(std::initializer_list<node> successors, edge_type type) {
  std::vector<edge_to_add> edges;
  edges.reserve(successors.size());
  for (const node& s : successors) {
    check_same_graph(*this, s, "precede");
    edges.push_back({handle_, s.handle_, type});
  }
  add_all_or_none(owner_, edges, "conveyor::node::precede");
  return *this;
}

node& node::succeed(std::initializer_list<node> predecessors) {
  std::vector<edge_to_add> edges;
  edges.reserve(predecessors.size());
  for (const node& p : predecessors) {
    check_same_graph(*this, p, "succeed");
    edges.push_back({p.handle_, handle_, edge_type::full});
  }
  add_all_or_none(owner_, edges, "conveyor::node::succeed");
  return *this;
}

node& node::succeed(std::initializer_list<dependency> predecessors) {
  std::vector<edge_to_add> edges;
  edges.reserve(predecessors.size());
  for (const dependency& p : predecessors) {
    check_same_graph(*this, p.from, "succeed");
    edges.push_back({p.from.handle_, handle_, p.type});
  }
  add_all_or_none(owner_, edges, "conveyor::node::succeed");
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
  for (std::size_t i = 0; i < count; ++i) out.push_back(node(handles[i], owner_));
  return out;
}

std::vector<node> node::dependents() const {
  std::size_t count = 0;
  CONVEYOR_CHECK(detail::get_dependents(handle_, nullptr, &count));
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(detail::get_dependents(handle_, handles.data(), &count));
  std::vector<node> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(node(handles[i], owner_));
  return out;
}

void node_list::set_size(std::size_t count) {
  if (count > inline_capacity) {
    heap_handles_.resize(count);
    heap_owners_.resize(count);
  }
  size_ = count;
}

void node_list::store(std::size_t i, const node& n) noexcept {
  if (size_ > inline_capacity) {
    heap_handles_[i] = n.get();
    heap_owners_[i] = detail::access::owner(n);
  } else {
    inline_handles_[i] = n.get();
    inline_owners_[i] = detail::access::owner(n);
  }
}

void node_list::assign(const dependency* deps, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!deps[i].from) throw std::invalid_argument("conveyor: empty node handle in a dependency list");
  if (count > inline_capacity) heap_types_.resize(count);
  set_size(count);
  edge_type* types = count > inline_capacity ? heap_types_.data() : inline_types_.data();
  typed_ = false;
  for (std::size_t i = 0; i < count; ++i) {
    store(i, deps[i].from);
    types[i] = deps[i].type;
    typed_ = typed_ || deps[i].type != edge_type::full;
  }
}

void node_list::assign(const node* nodes, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!nodes[i]) throw std::invalid_argument("conveyor: empty node handle in a dependency list");
  set_size(count);
  typed_ = false;
  for (std::size_t i = 0; i < count; ++i) store(i, nodes[i]);
}

} // namespace conveyor
