#include "conveyor/define/programmatic.hpp"

#include "cuda/check.hpp"
#include "cuda/compat.hpp"
#include "define/edges.hpp"
#include "define/programmatic_plan.hpp"
#include "kinds/kind.hpp"
#include "kinds/walk.hpp"
#include "kinds/node_name.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace conveyor {

waiting_kernels& waiting_kernels::add_function(const void* function) {
  if (function != nullptr && !contains(function)) functions_.push_back(function);
  return *this;
}

bool waiting_kernels::contains(const void* function) const noexcept {
  return std::find(functions_.begin(), functions_.end(), function) != functions_.end();
}

std::vector<std::string> programmatic_report::lines() const {
  std::vector<std::string> out;
  auto where = [](const programmatic_edge& e) { return e.graph.empty() ? std::string{} : " (in " + e.graph + ")"; };
  for (const auto& e : changed)
    out.push_back(fmt::format("made programmatic: {} -> {}{}", e.from_name, e.to_name, where(e)));
  for (const auto& e : left)
    out.push_back(fmt::format("left as it was: {} -> {}{}: {}", e.from_name, e.to_name, where(e), e.reason));
  return out;
}

namespace detail {

programmatic_plan plan_programmatic(const std::vector<plan_node>& nodes, const std::vector<plan_edge>& edges) {
  programmatic_plan out;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const plan_edge& e = edges[i];
    const plan_node& from = nodes.at(e.from);
    const plan_node& to = nodes.at(e.to);
    if (to.kind != node_kind::kernel) continue; // only kernels can be reached by programmatic edges
    if (!e.type) {
      out.left.emplace_back(i, "its ports are not ones Conveyor names");
      continue;
    }
    if (*e.type != edge_type::full) {
      ++out.already;
      continue;
    }
    if (from.kind != node_kind::kernel) {
      out.left.emplace_back(
          i, fmt::format("the predecessor is a {} node (programmatic edges join kernels only)", to_string(from.kind)));
      continue;
    }
    if (!to.waits) {
      out.left.emplace_back(i, fmt::format("{} is not in the waiting set (it does not promise to call "
                                           "wait_for_dependencies before it reads)",
                                           to.name));
      continue;
    }
    out.change.push_back(i);
  }
  return out;
}

namespace {

struct pass {
  const waiting_kernels& kernels;
  edge_type type;
  programmatic_report& report;

  //! One edge the pass changed, to put back when a later change fails.
  struct change {
    cudaGraph_t graph;
    cudaGraphNode_t from;
    cudaGraphNode_t to;
    cudaGraphEdgeData before;
  };
  std::vector<change> changes;

  //! Puts every changed edge back as it was, last first (errors ignored: this runs while another error unwinds).
  void undo() noexcept {
    const cudaGraphEdgeData now = to_edge_data(type);
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
      if (cleared(remove_dependencies(it->graph, &it->from, &it->to, &now, 1)) != cudaSuccess) continue;
      (void)cleared(add_dependencies(it->graph, &it->from, &it->to, &it->before, 1));
    }
    changes.clear();
  }

  bool waits(cudaGraphNode_t n) const {
    cudaKernelNodeParams p{};
    if (cudaGraphKernelNodeGetParams(n, &p) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return kernels.contains(p.func); // the host function the node was added or launched with
  }

  void run(cudaGraph_t g, const graph_state* owner, const std::string& path) {
    const auto nodes = graph_nodes(g);
    std::unordered_map<cudaGraphNode_t, std::size_t> index;
    std::vector<plan_node> plan_nodes(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      index.emplace(nodes[i], i);
      plan_nodes[i].kind = kind_of(nodes[i]);
      plan_nodes[i].name = node_name(owner, nodes[i]);
      if (plan_nodes[i].kind == node_kind::kernel) plan_nodes[i].waits = waits(nodes[i]);
    }
    std::vector<plan_edge> edges;
    std::vector<cudaGraphEdgeData> data_of;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::size_t count = 0;
      CONVEYOR_CHECK(get_dependencies(nodes[i], nullptr, nullptr, &count));
      std::vector<cudaGraphNode_t> deps(count);
      std::vector<cudaGraphEdgeData> data(count);
      if (count > 0) CONVEYOR_CHECK(get_dependencies(nodes[i], deps.data(), data.data(), &count));
      for (std::size_t k = 0; k < count; ++k) {
        edges.push_back({index.at(deps[k]), i, from_edge_data(data[k])});
        data_of.push_back(data[k]);
      }
    }
    report.edges += edges.size();
    const programmatic_plan plan = plan_programmatic(plan_nodes, edges);
    report.already += plan.already;
    auto describe_edge = [&](std::size_t e) {
      return programmatic_edge{
          path, edges[e].from, edges[e].to, plan_nodes[edges[e].from].name, plan_nodes[edges[e].to].name, {}};
    };
    for (std::size_t e : plan.change) {
      const cudaGraphNode_t a = nodes[edges[e].from];
      const cudaGraphNode_t b = nodes[edges[e].to];
      CONVEYOR_CHECK(remove_dependencies(g, &a, &b, &data_of[e], 1));
      const cudaGraphEdgeData data = to_edge_data(type);
      const cudaError_t rc = add_dependencies(g, &a, &b, &data, 1);
      if (rc != cudaSuccess) {
        (void)cleared(add_dependencies(g, &a, &b, &data_of[e], 1)); // put the full edge back
        check_with(rc, "cudaGraphAddDependencies", [&] {
          return fmt::format("conveyor::make_programmatic: {} edge {} -> {}", to_string(type),
                             plan_nodes[edges[e].from].name, plan_nodes[edges[e].to].name);
        });
      }
      changes.push_back({g, a, b, data_of[e]});
      report.changed.push_back(describe_edge(e));
    }
    for (const auto& [e, reason] : plan.left) {
      auto d = describe_edge(e);
      d.reason = reason;
      report.left.push_back(std::move(d));
    }
    // Nested graphs: child graphs (CUDA's embedded copy, changed in place) and conditional bodies Conveyor built.
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const std::string here = fmt::format("{}node {} ({})", path.empty() ? "" : path + " / ", i, plan_nodes[i].name);
      if (plan_nodes[i].kind == node_kind::child_graph) {
        cudaGraph_t body = nullptr;
        CONVEYOR_CHECK(cudaGraphChildGraphNodeGetGraph(nodes[i], &body));
        const graph_state* body_owner = nullptr;
        if (owner != nullptr)
          if (auto it = owner->child_bodies.find(nodes[i]); it != owner->child_bodies.end())
            body_owner = it->second.get();
        run(body, body_owner, here + " body");
      } else if (plan_nodes[i].kind == node_kind::conditional && owner != nullptr) {
        if (auto it = owner->conditionals.find(nodes[i]); it != owner->conditionals.end())
          for (std::size_t b = 0; b < it->second.bodies.size(); ++b)
            run(it->second.bodies[b]->handle, it->second.bodies[b].get(), fmt::format("{} body {}", here, b));
      }
    }
  }
};

} // namespace
} // namespace detail

programmatic_report make_programmatic(graph& g, const waiting_kernels& kernels, edge_type type) {
  if (type == edge_type::full)
    throw std::invalid_argument("conveyor::make_programmatic: the type to make must be programmatic or "
                                "launch_completion, not full");
  programmatic_report report;
  detail::pass p{kernels, type, report, {}};
  try {
    p.run(g.get(), detail::access::state(g).get(), "");
  } catch (...) {
    p.undo(); // all or nothing: the graph is left as it was
    throw;
  }
  return report;
}

} // namespace conveyor
