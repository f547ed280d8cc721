#include "conveyor/define/node.hpp"

#include "conveyor/error.hpp"
#include "cuda/compat.hpp"
#include "kinds/kind.hpp"
#include "define/edges.hpp"
#include "kinds/node_name.hpp"
#include "model/graph_state.hpp"
#include "cuda/check.hpp"

#include <fmt/format.h>

#include <stdexcept>

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
          call, to_string(type), from != nullptr ? node_name(owner, from) : "the new node",
          to != nullptr ? node_name(owner, to) : "the new node", node_name(owner, end), to_string(kind)));
  }
}

void add_edge(const graph_state* owner, cudaGraphNode_t from, cudaGraphNode_t to, edge_type type, const char* call) {
  check_edge_ends(owner, from, to, type, call);
  if (type == edge_type::full) {
    check_with(add_dependencies(owner->handle, &from, &to, 1), "cudaGraphAddDependencies", [&] {
      return fmt::format("{}: edge {} -> {}", call, node_name(owner, from), node_name(owner, to));
    });
    return;
  }
  const cudaGraphEdgeData data = to_edge_data(type);
  check_with(add_dependencies(owner->handle, &from, &to, &data, 1), "cudaGraphAddDependencies", [&] {
    return fmt::format("{}: {} edge {} -> {}", call, to_string(type), node_name(owner, from), node_name(owner, to));
  });
}

} // namespace detail

node& node::precede(std::initializer_list<node> successors, edge_type type) {
  for (const node& s : successors) {
    check_same_graph(*this, s, "precede");
    detail::add_edge(owner_, handle_, s.handle_, type, "conveyor::node::precede");
  }
  return *this;
}

node& node::succeed(std::initializer_list<node> predecessors) {
  for (const node& p : predecessors) {
    check_same_graph(*this, p, "succeed");
    detail::add_edge(owner_, p.handle_, handle_, edge_type::full, "conveyor::node::succeed");
  }
  return *this;
}

node& node::succeed(std::initializer_list<dependency> predecessors) {
  for (const dependency& p : predecessors) {
    check_same_graph(*this, p.from, "succeed");
    detail::add_edge(owner_, p.from.handle_, handle_, p.type, "conveyor::node::succeed");
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

void node_list::assign(const dependency* deps, std::size_t count) {
  std::vector<node> nodes;
  nodes.reserve(count);
  for (std::size_t i = 0; i < count; ++i) nodes.push_back(deps[i].from);
  assign(nodes.data(), count);
  edge_type* types = inline_types_.data();
  if (count > inline_capacity) {
    heap_types_.resize(count);
    types = heap_types_.data();
  }
  typed_ = false;
  for (std::size_t i = 0; i < count; ++i) {
    types[i] = deps[i].type;
    typed_ = typed_ || deps[i].type != edge_type::full;
  }
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
    owners[i] = detail::access::owner(nodes[i]);
  }
}

} // namespace conveyor
