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

  //! A graph's nodes with their kinds, names and whether they wait (the plan's view), by position.
  std::vector<plan_node> plan_nodes_of(const std::vector<cudaGraphNode_t>& nodes, const graph_state* owner) const {
    std::vector<plan_node> out(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      out[i].kind = kind_of(nodes[i]);
      out[i].name = node_name(owner, nodes[i]);
      if (out[i].kind == node_kind::kernel) out[i].waits = waits(nodes[i]);
    }
    return out;
  }

  //! Every edge of the graph whose nodes are `nodes`, node by node in the order the driver lists them, with its data.
  struct edge_list {
    std::vector<plan_edge> edges;
    std::vector<cudaGraphEdgeData> data;
  };
  static edge_list edges_of(const std::vector<cudaGraphNode_t>& nodes) {
    std::unordered_map<cudaGraphNode_t, std::size_t> index;
    for (std::size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i], i);
    edge_list out;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::size_t count = 0;
      CONVEYOR_CHECK(get_dependencies(nodes[i], nullptr, nullptr, &count));
      std::vector<cudaGraphNode_t> deps(count);
      std::vector<cudaGraphEdgeData> data(count);
      if (count > 0) CONVEYOR_CHECK(get_dependencies(nodes[i], deps.data(), data.data(), &count));
      for (std::size_t k = 0; k < count; ++k) {
        out.edges.push_back({index.at(deps[k]), i, from_edge_data(data[k])});
        out.data.push_back(data[k]);
      }
    }
    return out;
  }

  //! Changes edge `a` -> `b` of `g` from `before` to the pass's type, recorded for undo. \throws cuda_error when
  //! CUDA refuses (the edge put back as it was).
  void change_edge(cudaGraph_t g, cudaGraphNode_t a, cudaGraphNode_t b, const cudaGraphEdgeData& before,
                   const plan_node& from, const plan_node& to) {
    CONVEYOR_CHECK(remove_dependencies(g, &a, &b, &before, 1));
    const cudaGraphEdgeData data = to_edge_data(type);
    const cudaError_t rc = add_dependencies(g, &a, &b, &data, 1);
    if (rc != cudaSuccess) {
      (void)cleared(add_dependencies(g, &a, &b, &before, 1)); // put the full edge back
      check_with(rc, "cudaGraphAddDependencies", [&] {
        return fmt::format("conveyor::make_programmatic: {} edge {} -> {}", to_string(type), from.name, to.name);
      });
    }
    changes.push_back({g, a, b, before});
  }

  //! The nested graphs of `nodes` (the graph at `path`, whose state is `owner`): child graphs (CUDA's embedded copy,
  //! changed in place, named through the graph Conveyor copied) and conditional bodies Conveyor built.
  void run_embedded(const std::vector<cudaGraphNode_t>& nodes, const std::vector<plan_node>& plan_nodes,
                    const graph_state* owner, const std::string& path) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const bool child = plan_nodes[i].kind == node_kind::child_graph;
      (void)for_each_embedded(nodes[i], plan_nodes[i].kind, owner, [&](const embedded_graph& e) {
        const std::string here = fmt::format("{}node {} ({})", path.empty() ? "" : path + " / ", i, plan_nodes[i].name);
        if (child) run(e.handle, e.copied_from, here + " body");
        else run(e.handle, e.state, fmt::format("{} body {}", here, e.body));
      });
    }
  }

  void run(cudaGraph_t g, const graph_state* owner, const std::string& path) {
    const auto nodes = graph_nodes(g);
    const std::vector<plan_node> plan_nodes = plan_nodes_of(nodes, owner);
    const edge_list found = edges_of(nodes);
    const std::vector<plan_edge>& edges = found.edges;
    report.edges += edges.size();
    const programmatic_plan plan = plan_programmatic(plan_nodes, edges);
    report.already += plan.already;
    auto describe_edge = [&](std::size_t e) {
      return programmatic_edge{
          path, edges[e].from, edges[e].to, plan_nodes[edges[e].from].name, plan_nodes[edges[e].to].name, {}};
    };
    for (std::size_t e : plan.change) {
      change_edge(g, nodes[edges[e].from], nodes[edges[e].to], found.data[e], plan_nodes[edges[e].from],
                  plan_nodes[edges[e].to]);
      report.changed.push_back(describe_edge(e));
    }
    for (const auto& [e, reason] : plan.left) {
      auto d = describe_edge(e);
      d.reason = reason;
      report.left.push_back(std::move(d));
    }
    run_embedded(nodes, plan_nodes, owner, path);
  }
};

} // namespace
} // namespace detail

programmatic_report make_programmatic(graph& g, const waiting_kernels& kernels, edge_type type) {
  const auto& state = detail::nonempty_state(g, "conveyor::make_programmatic");
  if (type == edge_type::full)
    throw std::invalid_argument("conveyor::make_programmatic: the type to make must be programmatic or "
                                "launch_completion, not full");
  programmatic_report report;
  detail::pass p{kernels, type, report, {}};
  try {
    p.run(state->handle, state.get(), "");
  } catch (...) {
    p.undo(); // all or nothing: the graph is left as it was
    throw;
  }
  return report;
}

} // namespace conveyor
