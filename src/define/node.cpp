#include "conveyor/define/node.hpp"

#include "conveyor/error.hpp"
#include "cuda/compat.hpp"
#include "kinds/kind.hpp"
#include "model/graph_state.hpp"

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
