//! \file graph_saving.cpp
//! --save-graph: the first graph a workload launches, saved with its kernels' images; --check-saved-graph.

#include "common/graph_saving.hpp"

#include "common/output_paths.hpp"
#include "common/usage_error.hpp"

#include <conveyor/keep/graph_file.hpp>
#include <conveyor/keep/round_trip.hpp>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace conveyor::scenarios {

namespace {
graph_saving* active_saving = nullptr;
} // namespace

void add_graph_saving_options(CLI::App& sub, graph_saving_cli& o, std::string_view graph) {
  sub.add_option("--save-graph", o.path,
                 fmt::format("Save {} (the first graph the run launches) to this graph file, with its kernels' "
                             "images (open it with `conveyor graph show | diff | replay`)",
                             graph));
  sub.add_flag("--save-graph-contents", o.contents,
               "Save the graph's buffers' contents too (replay then starts from them; the file grows by their size)");
  sub.add_flag("--check-saved-graph", o.check,
               "Load the saved file into the same buffers and into new ones and check that each replay computes "
               "what the original does, byte for byte");
}

void check_graph_saving_options(const graph_saving_cli& o, bool has_graph) {
  if (o.path.empty() && (o.contents || o.check))
    throw usage_error(fmt::format("{}: applies with --save-graph only",
                                  o.contents ? "--save-graph-contents" : "--check-saved-graph"));
  if (o.path.empty()) return;
  if (!has_graph) throw usage_error("--save-graph: needs a graph mode (--mode graph or all): no graph runs otherwise");
  check_output_file("--save-graph", o.path);
}

graph_saving::graph_saving(graph_saving_cli options) : options_(std::move(options)) { active_saving = this; }

graph_saving::~graph_saving() {
  if (active_saving == this) active_saving = nullptr;
}

graph_saving* graph_saving::active() noexcept { return active_saving; }

void graph_saving::watch(const graph_exec& exec, std::string name) {
  if (saved_) return;
  saved_ = true;
  save_options o;
  o.images = {&images_};
  o.contents = options_.contents;
  const auto t0 = std::chrono::steady_clock::now();
  const graph_file file = to_graph_file({{name, nullptr, &exec}}, o);
  write_graph_file(options_.path, file);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::size_t nodes = file.graphs.front().graph.nodes.size();
  fmt::print("saved graph '{}' ({} nodes, {} kernels, {} embedded images, {} buffers) to {}: {} bytes in {:.1f} ms\n",
             name, nodes, file.kernels.size(), file.images.size(), file.buffers.size(), options_.path,
             std::filesystem::file_size(options_.path), ms);
  if (!options_.check) return;
  cudaStream_t s = nullptr;
  CONVEYOR_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const round_trip_report r = check_round_trip({name, nullptr, &exec}, o, s);
  (void)cudaStreamDestroy(s);
  if (!r.bitwise_equal())
    throw std::runtime_error(fmt::format("--check-saved-graph: the loaded graph computed something else: {} byte(s) "
                                         "differ in the same buffers, {} in new buffers (first: {})",
                                         r.differ_same, r.differ_other, r.first_difference));
  fmt::print("saved graph check: {} buffers ({} bytes) compared after one launch each: the file loaded into the same "
             "buffers and into new ones computes what the original does, bit for bit\n",
             r.buffers, r.bytes);
}

std::unique_ptr<graph_saving> make_graph_saving(const graph_saving_cli& o) {
  return o.path.empty() ? nullptr : std::make_unique<graph_saving>(o);
}

} // namespace conveyor::scenarios
