// Plain C++ (no nvcc) against Conveyor's headers: a graph described without a GPU.
#include <conveyor/conveyor.hpp>

#include <string>

std::string describe_builder() {
  conveyor::graph_description d;
  d.nodes.push_back(conveyor::node_description{});
  d.nodes[0].kind = conveyor::node_kind::empty;
  d.nodes[0].label = "start";
  return conveyor::to_json(d, -1);
}
