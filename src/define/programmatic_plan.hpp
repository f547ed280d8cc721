#pragma once
// Internal (define layer): the decision of the programmatic pass, as plain C++ over one graph's nodes and edges, so
// that it is tested without a GPU (tests/host/test_programmatic_plan.cpp). programmatic.cpp reads a CUDA graph into
// these values, asks, and applies the answer.

#include "conveyor/define/edge_type.hpp"
#include "conveyor/define/node_kind.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::detail {

struct plan_node {
  node_kind kind = node_kind::other;
  bool waits = false; //!< a kernel node whose function is in the waiting set
  std::string name;   //!< for reasons
};

struct plan_edge {
  std::size_t from = 0;
  std::size_t to = 0;
  std::optional<edge_type> type = edge_type::full; //!< nullopt: ports Conveyor does not name
};

struct programmatic_plan {
  std::vector<std::size_t> change;                       //!< indices into the edges: make them programmatic
  std::vector<std::pair<std::size_t, std::string>> left; //!< edges into kernel nodes left alone, with the reason
  std::size_t already = 0;                               //!< edges not full already
};

//! Which edges become programmatic: full edges between two kernel nodes whose dependent waits. Edges into other
//! kinds are not reported (they cannot be programmatic); edges into kernel nodes that stay are, with the reason.
//! \throws std::out_of_range when an edge names a node that does not exist.
programmatic_plan plan_programmatic(const std::vector<plan_node>& nodes, const std::vector<plan_edge>& edges);

} // namespace conveyor::detail
