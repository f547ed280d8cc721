#pragma once
// Test support: a graph file built by hand (no GPU) holding every node kind a file can hold — kernels with typed
// and scanned relocations, a condition relocation and launch attributes, 1D and 2D copies, a memset, a host node,
// a child graph, an empty node, event record and wait nodes, an allocation and its free, WHILE and IF/ELSE
// conditional nodes with bodies, programmatic edges — and a graphed key: the seed of the format's host tests, the
// fuzzing and the command-line checks (tests/cli/make_graph_files.cpp).

#include <conveyor/keep/graph_file.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace conveyor::test {

inline std::vector<unsigned char> argument_bytes(std::initializer_list<std::uint64_t> words) {
  std::vector<unsigned char> out(words.size() * 8);
  std::size_t i = 0;
  for (std::uint64_t w : words) std::memcpy(out.data() + 8 * i++, &w, 8);
  return out;
}

inline saved_node kernel_node(std::uint32_t kernel, std::vector<unsigned char> arguments,
                              std::vector<saved_relocation> relocations, std::vector<saved_dependency> deps,
                              std::string label = {}) {
  saved_node n;
  n.kind = node_kind::kernel;
  n.label = std::move(label);
  n.dependencies = std::move(deps);
  saved_kernel_node k;
  k.kernel = kernel;
  k.grid = {4, 1, 1};
  k.block = {128, 1, 1};
  k.arguments = std::move(arguments);
  k.relocations = std::move(relocations);
  n.parameters = std::move(k);
  return n;
}

inline saved_node simple_node(node_kind kind, saved_parameters p, std::vector<saved_dependency> deps,
                              std::string label = {}) {
  saved_node n;
  n.kind = kind;
  n.label = std::move(label);
  n.dependencies = std::move(deps);
  n.parameters = std::move(p);
  return n;
}

//! The sample: graph "step" (every kind) and graph "bucket" (a small graph with a graphed key). `scale` changes the
//! first kernel's scalar argument (for diffs); `grid` its grid.
inline graph_file sample_graph_file(std::uint64_t scale = 3, std::uint32_t grid = 4) {
  graph_file f;
  f.producer = {"0.test", 13000, 13000, "NVIDIA H200", 90};
  f.images.push_back({image_format::cubin, "module 'sample.cubin'", std::vector<unsigned char>(64, 0x7f)});
  // axpy(float a, const float* x, float* y, int n) laid out as 4 parameters of 8, 8, 8, 8 bytes for simplicity.
  f.kernels.push_back(
      {"_Z4axpyfPKfPfi",
       0,
       {{0, 8}, {8, 8}, {16, 8}, {24, 8}},
       {parameter_class::value, parameter_class::pointer, parameter_class::pointer, parameter_class::value}});
  f.kernels.push_back({"_Z4stepPv", std::nullopt, {{0, 8}}, {parameter_class::opaque}});
  f.kernels.push_back(
      {"_Z3setyj", std::nullopt, {{0, 8}, {8, 8}}, {parameter_class::condition, parameter_class::value}});
  f.buffers.push_back({"x", buffer_memory::device, 4096, 0, true, std::vector<unsigned char>(4096, 1)});
  f.buffers.push_back({"y", buffer_memory::device, 4096, 0, true, std::nullopt});
  f.buffers.push_back({"buffer0", buffer_memory::pinned_host, 1024, -1, false, std::nullopt});
  f.buffers.push_back({"allocation0", buffer_memory::graph_allocation, 2048, 0, false, std::nullopt});
  f.events = {"ready"};
  f.host_functions = {"log_step"};

  saved_graph g;
  g.captured = true;
  g.conditions.push_back({1, true});
  g.conditions.push_back({0, false});
  auto& n = g.nodes;
  saved_kernel_node axpy;
  n.push_back(kernel_node(0, argument_bytes({scale, 0, 0, 1024}),
                          {{8, relocation_target::buffer, 0, 0, true}, {16, relocation_target::buffer, 1, 64, true}},
                          {}, "axpy"));
  std::get<saved_kernel_node>(n.back().parameters).grid = {grid, 1, 1};
  std::get<saved_kernel_node>(n.back().parameters).attributes.push_back({cudaLaunchAttributePriority, {-2}, {}, 0.0});
  n.push_back(kernel_node(1, argument_bytes({0}), {{0, relocation_target::buffer, 3, 128, false}}, {{0, 1, 0, 1}}));
  n.push_back(simple_node(
      node_kind::memcpy,
      saved_memcpy_node{{{2, 0}, 1024, 1024, 1, {0, 0, 0}}, {{0, 0}, 1024, 1024, 1, {0, 0, 0}}, {1024, 1, 1}, 4},
      {{1, 0, 0, 0}}, "upload"));
  n.push_back(
      simple_node(node_kind::memcpy,
                  saved_memcpy_node{{{0, 0}, 256, 64, 8, {0, 0, 0}}, {{1, 0}, 512, 64, 8, {0, 0, 0}}, {64, 8, 1}, 3},
                  {{2, 0, 0, 0}}));
  n.push_back(simple_node(node_kind::memset, saved_memset_node{{1, 0}, 0, 0xab, 1, 256, 1}, {{3, 0, 0, 0}}));
  n.push_back(simple_node(node_kind::host, saved_reference{0}, {{4, 0, 0, 0}}, "log_step"));
  saved_node child = simple_node(node_kind::child_graph, std::monostate{}, {{5, 0, 0, 0}}, "inner");
  saved_graph body;
  body.nodes.push_back(
      kernel_node(0, argument_bytes({7, 0, 0, 16}),
                  {{8, relocation_target::buffer, 0, 8, true}, {16, relocation_target::buffer, 1, 8, true}}, {}));
  body.nodes.push_back(simple_node(node_kind::empty, std::monostate{}, {{0, 0, 0, 0}}));
  child.bodies.push_back(body);
  n.push_back(std::move(child));
  n.push_back(simple_node(node_kind::empty, std::monostate{}, {{6, 0, 0, 0}}));
  n.push_back(simple_node(node_kind::event_record, saved_reference{0}, {{7, 0, 0, 0}}, "ready"));
  n.push_back(simple_node(node_kind::event_wait, saved_reference{0}, {{8, 0, 0, 0}}));
  n.push_back(simple_node(node_kind::mem_alloc, saved_mem_alloc_node{3, 0, {}, 0}, {{9, 0, 0, 0}}));
  n.push_back(kernel_node(2, argument_bytes({0, 5}), {{0, relocation_target::condition, 0, 0, true}}, {{10, 0, 0, 0}}));
  saved_node loop = simple_node(node_kind::conditional, saved_conditional_node{1, 1, 0}, {{11, 0, 0, 0}}, "loop");
  saved_graph loop_body;
  loop_body.nodes.push_back(
      kernel_node(2, argument_bytes({0, 1}), {{0, relocation_target::condition, 0, 0, true}}, {}));
  loop.bodies.push_back(loop_body);
  n.push_back(std::move(loop));
  saved_node branch = simple_node(node_kind::conditional, saved_conditional_node{0, 2, 1}, {{12, 0, 0, 0}});
  saved_graph then_body;
  then_body.nodes.push_back(simple_node(node_kind::memset, saved_memset_node{{3, 0}, 0, 1, 4, 16, 1}, {}));
  saved_graph else_body;
  else_body.nodes.push_back(simple_node(node_kind::empty, std::monostate{}, {}));
  branch.bodies = {then_body, else_body};
  n.push_back(std::move(branch));
  n.push_back(simple_node(node_kind::mem_free, saved_mem_free_node{{3, 0}}, {{13, 0, 0, 0}}));
  f.graphs.push_back({"step", g, std::nullopt});

  saved_graph small;
  small.nodes.push_back(
      kernel_node(0, argument_bytes({2, 0, 0, 256}),
                  {{8, relocation_target::buffer, 0, 0, true}, {16, relocation_target::buffer, 1, 0, true}}, {}));
  saved_key key;
  key.entries.push_back({0, 8, 1, 0, 0, {0, 0}});
  key.entries.push_back({256, 4, 0, 1, 1, {}});
  f.graphs.push_back({"bucket", small, key});
  return f;
}

} // namespace conveyor::test
