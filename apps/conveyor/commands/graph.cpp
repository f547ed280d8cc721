//! \file graph.cpp
//! `conveyor graph show | diff | replay`: graph files offline (show, diff: no GPU) and on the GPU (replay).

#include "commands/graph.hpp"

#include "common/require_gpu.hpp"
#include "common/file_output.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/profiling.hpp"
#include "common/statistics.hpp"
#include "common/usage_error.hpp"

#include <conveyor/error.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/keep/inspect.hpp>
#include <conveyor/keep/load.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using conveyor::scenarios::usage_error;

struct show_options {
  std::string file;
  std::string graph;
  std::string dot;
  std::string svg;
  std::string json;
  std::string document;
};

struct diff_options {
  std::string a;
  std::string b;
  std::string graph;
  std::string against;
  bool exit_code = false;
};

struct replay_options {
  std::string file;
  std::string graph;
  std::size_t launches = 100;
  std::uint64_t seed = 1;
  bool step_through = false;
  conveyor::scenarios::profiling_cli profile;
};

// The graph `name` of `file` (its first graph when `name` is empty). \throws usage_error naming the file's graphs.
const conveyor::named_graph& pick(const conveyor::graph_file& file, const std::string& name, const std::string& path) {
  if (file.graphs.empty()) throw std::runtime_error(fmt::format("'{}' holds no graph", path));
  if (name.empty()) return file.graphs.front();
  if (const auto* g = file.find(name)) return *g;
  std::string names;
  for (const auto& g : file.graphs) names += fmt::format("{}'{}'", names.empty() ? "" : ", ", g.name);
  throw usage_error(fmt::format("--graph '{}': '{}' has no such graph (it has {})", name, path, names));
}

void run_show(const show_options& o) {
  conveyor::scenarios::check_distinct_outputs(
      {{"--dot", o.dot}, {"--svg", o.svg}, {"--json", o.json}, {"--document", o.document}});
  for (const auto& [option, path] :
       {std::pair{"--dot", o.dot}, {"--svg", o.svg}, {"--json", o.json}, {"--document", o.document}})
    conveyor::scenarios::check_output_file(option, path);
  conveyor::scenarios::check_input_file("graph file", o.file);
  const conveyor::graph_file file = conveyor::read_graph_file(o.file);
  const conveyor::named_graph& g = pick(file, o.graph, o.file);
  fmt::print("{}", conveyor::summary(file));
  const conveyor::graph_description d = conveyor::describe(file, g.name);
  if (!o.dot.empty() || !o.svg.empty()) {
    const std::string dot = conveyor::to_dot(d, g.name);
    if (!o.dot.empty()) conveyor::scenarios::write_file_atomically(o.dot, dot);
    if (!o.svg.empty()) {
      // Graphviz reads a file: the --dot file, or a temporary one beside the SVG.
      const std::filesystem::path svg(o.svg);
      const std::filesystem::path source =
          !o.dot.empty() ? std::filesystem::path(o.dot)
                         : (svg.has_parent_path() ? svg.parent_path() : ".") / ("." + svg.filename().string() + ".dot");
      if (o.dot.empty()) conveyor::scenarios::write_file_atomically(source, dot);
      const std::string problem = conveyor::scenarios::render_svg(source, svg);
      if (o.dot.empty()) std::filesystem::remove(source);
      if (!problem.empty()) throw std::runtime_error(fmt::format("--svg '{}': {}", o.svg, problem));
    }
  }
  if (!o.json.empty()) conveyor::scenarios::write_file_atomically(o.json, conveyor::to_json(d));
  if (!o.document.empty()) conveyor::scenarios::write_file_atomically(o.document, conveyor::to_json(file));
}

int run_diff(const diff_options& o) {
  conveyor::scenarios::check_input_file("first graph file", o.a);
  conveyor::scenarios::check_input_file("second graph file", o.b);
  const conveyor::graph_file a = conveyor::read_graph_file(o.a);
  const conveyor::graph_file b = conveyor::read_graph_file(o.b);
  const conveyor::named_graph& ga = pick(a, o.graph, o.a);
  const std::string against = !o.against.empty() ? o.against : b.find(ga.name) != nullptr ? ga.name : std::string{};
  const conveyor::named_graph& gb = pick(b, against, o.b);
  const conveyor::graph_diff d = conveyor::diff(a, ga.name, b, gb.name);
  fmt::print("'{}' of {} -> '{}' of {}: {} nodes compared\n", ga.name, o.a, gb.name, o.b, d.nodes);
  if (!d.same_topology) fmt::print("topology differs: {}\n", d.topology_reason);
  for (const auto& c : d.changed)
    fmt::print("  node {} ({}): {} [{}]\n", c.position, c.name, c.what,
               c.settable    ? "per-node setter"
               : c.updatable ? "whole-graph update"
                             : "new instantiation");
  fmt::print("to apply: {}\n", conveyor::update_verdict(d));
  return o.exit_code && !d.identical() ? 3 : 0;
}

// Fills `b` with random bytes (a buffer whose contents the file does not have).
void fill_random(const conveyor::loaded_buffer& b, std::mt19937_64& rng) {
  std::vector<unsigned char> bytes(b.bytes);
  for (auto& x : bytes) x = static_cast<unsigned char>(rng());
  if (b.memory == conveyor::buffer_memory::host) std::memcpy(b.pointer, bytes.data(), bytes.size());
  else CONVEYOR_CHECK(cudaMemcpy(b.pointer, bytes.data(), bytes.size(), cudaMemcpyDefault));
}

void run_replay(const replay_options& o) {
  conveyor::scenarios::check_profiling_options(o.profile, true, "(replay runs a graph)");
  conveyor::scenarios::check_input_file("graph file", o.file);
  conveyor::graph_file file = conveyor::read_graph_file(o.file);
  const std::string name = pick(file, o.graph, o.file).name;
  conveyor::scenarios::require_gpu("`conveyor graph replay`");
  auto profiling = conveyor::scenarios::make_profiling(o.profile, "replay");
  conveyor::load_options lo;
  lo.graphs = {name};
  conveyor::loaded_graphs l = conveyor::load(std::move(file), lo);
  std::mt19937_64 rng(o.seed);
  std::size_t random = 0;
  for (const auto& b : l.buffers())
    if (b.allocated && !b.filled && b.memory != conveyor::buffer_memory::graph_allocation)
      fill_random(b, rng), ++random;
  const conveyor::stream s;
  conveyor::graph_exec e = conveyor::instantiate(l.at(name), conveyor::instantiate_flags::none, s);
  e.step_through_launches(o.step_through);
  if (profiling) profiling->watch(e, name);
  const std::size_t warmup = 3;
  std::vector<double> ms;
  conveyor::event before;
  conveyor::event after(cudaEventDefault);
  for (std::size_t i = 0; i < warmup + o.launches; ++i) {
    auto scope = profiling ? profiling->step("graph") : std::nullopt;
    CONVEYOR_CHECK(cudaEventRecord(before.get(), s.get()));
    e.launch(s);
    CONVEYOR_CHECK(cudaEventRecord(after.get(), s.get()));
    s.synchronize();
    float t = 0.0F;
    CONVEYOR_CHECK(cudaEventElapsedTime(&t, before.get(), after.get()));
    if (i >= warmup) ms.push_back(t);
  }
  if (profiling) {
    profiling->examine(e, name);
    profiling->finish();
  }
  const double median = conveyor::scenarios::median(ms);
  const double least = *std::min_element(ms.begin(), ms.end());
  const double most = *std::max_element(ms.begin(), ms.end());
  fmt::print("replayed '{}' of {}: {} launches after {} warm-up, {} buffer(s) from the saved contents, {} filled at "
             "random (seed {})\n",
             name, o.file, o.launches, warmup,
             std::count_if(l.buffers().begin(), l.buffers().end(), [](const auto& b) { return b.filled; }), random,
             o.seed);
  fmt::print("time per launch: median {:.2f} us (min {:.2f}, max {:.2f}); load {:.2f} ms (kernels {:.2f}, buffers "
             "{:.2f}, graph {:.2f})\n",
             median * 1e3, least * 1e3, most * 1e3, (l.spent().kernels + l.spent().buffers + l.spent().graphs) * 1e3,
             l.spent().kernels * 1e3, l.spent().buffers * 1e3, l.spent().graphs * 1e3);
}

} // namespace

void register_graph_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("graph", "Graph files: show, compare (no GPU needed) and replay saved graphs "
                                              "(docs/graph-files.md)");
  sub->require_subcommand(1);
  auto show = std::make_shared<show_options>();
  CLI::App* s = sub->add_subcommand("show", "Summarise a graph file; write a graph as DOT, SVG or JSON (no GPU)");
  s->add_option("file", show->file, "The graph file")->required();
  s->add_option("--graph", show->graph, "The graph to draw (default: the file's first)");
  s->add_option("--dot", show->dot, "Write the graph as Graphviz DOT to this file");
  s->add_option("--svg", show->svg, "Write the graph as SVG to this file (Graphviz `dot` on PATH)");
  s->add_option("--json", show->json, "Write the graph as JSON (the exports' form) to this file");
  s->add_option("--document", show->document, "Write the whole file as JSON (byte strings as size and hash)");
  s->callback([show] { run_show(*show); });
  auto diff = std::make_shared<diff_options>();
  CLI::App* d = sub->add_subcommand("diff", "Compare two saved graphs node by node, and say what would apply the "
                                            "difference (no GPU)");
  d->add_option("a", diff->a, "The first graph file")->required();
  d->add_option("b", diff->b, "The second graph file")->required();
  d->add_option("--graph", diff->graph, "The graph of the first file (default: its first)");
  d->add_option("--against", diff->against, "The graph of the second file (default: the same name, else its first)");
  d->add_flag("--exit-code", diff->exit_code, "Exit with status 3 when the graphs differ (0 when identical)");
  d->callback([diff] {
    const int rc = run_diff(*diff);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
  auto replay = std::make_shared<replay_options>();
  CLI::App* r = sub->add_subcommand("replay", "Load a saved graph and launch it on the GPU; print the time per "
                                              "launch");
  r->add_option("file", replay->file, "The graph file")->required();
  r->add_option("--graph", replay->graph, "The graph to replay (default: the file's first)");
  r->add_option("--launches", replay->launches, "Timed launches (after 3 warm-up launches)")
      ->check(conveyor::scenarios::integer_in(std::size_t{1}, std::size_t{10000000}))
      ->capture_default_str();
  r->add_option("--seed", replay->seed, "Seed of the random bytes in buffers the file has no contents of")
      ->capture_default_str();
  r->add_flag("--step-through", replay->step_through, "Run each launch node by node (conveyor::step_through)");
  conveyor::scenarios::add_profiling_options(*r, replay->profile, "one launch of the graph", "(any)", 3);
  r->callback([replay] { run_replay(*replay); });
}
