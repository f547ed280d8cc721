// Host-only half of graph_files.hpp: the Markdown tables (in conveyor_bench_report, tested without a GPU).
#include "bench/graph_files.hpp"

#include "bench/markdown.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

namespace {

std::string ratio_or_dash(double num, double den) { return num > 0 && den > 0 ? format_number(num / den) : "—"; }

std::vector<std::string> cost_row(const graph_file_row& g) {
  return {g.what,
          fmt::format("{}", g.nodes),
          format_bytes(static_cast<double>(g.file_bytes)),
          g.nodes > 0 ? format_number(static_cast<double>(g.file_bytes) / static_cast<double>(g.nodes)) : "—",
          format_number(g.save_ms),
          format_number(g.capture_instantiate_ms),
          format_number(g.load_instantiate_ms),
          ratio_or_dash(g.load_instantiate_ms, g.capture_instantiate_ms),
          g.registry_load_instantiate_ms > 0 ? format_number(g.registry_load_instantiate_ms) : "—",
          ratio_or_dash(g.registry_load_instantiate_ms, g.capture_instantiate_ms),
          g.replay_us > 0 ? fmt::format("{} / {}", format_number(g.replay_us), format_number(g.replay_loaded_us))
                          : "—"};
}

std::vector<std::string> phase_row(const graph_file_row& g) {
  const double instantiate = g.load_instantiate_ms - g.parse_ms - g.kernels_ms - g.buffers_ms - g.graphs_ms;
  return {g.what,
          format_number(g.parse_ms),
          format_number(g.kernels_ms),
          format_number(g.buffers_ms),
          format_number(g.graphs_ms),
          format_number(instantiate > 0 ? instantiate : 0.0),
          format_number(g.load_instantiate_ms)};
}

} // namespace

std::string format_graph_files(const graph_files_result& r) {
  std::vector<std::vector<std::string>> costs;
  std::vector<std::vector<std::string>> phases;
  for (const auto& g : r.rows) {
    costs.push_back(cost_row(g));
    if (g.parse_ms > 0) phases.push_back(phase_row(g));
  }
  return fmt::format(
      "Each row: medians over the repeats, host milliseconds. *Capture + instantiate*: the graph made the way the "
      "program makes it (a stream capture; for the buckets graphed::prepare, warm-up calls included) and "
      "instantiated. *Load + instantiate, images*: the file's bytes read (from_bytes), loaded into new buffers with "
      "every kernel from the image the file embeds (cuLibraryLoadData), and instantiated (load_buckets: instantiated "
      "and uploaded) — what another process pays. *Load + instantiate, registry*: the same with the kernels from the "
      "program's kernel_registry and its buffer passed by name — what a restart of the same program pays (— where "
      "the graph holds library kernels, which no registry names). Files hold no buffer contents. *Replay*: a launch "
      "until finished, µs, of the captured graph and of the loaded one (whose buffers and kernel library the load "
      "owns, tied to it by a CUDA user object), alternately (chains only). Module images recorded by CUPTI during "
      "the study: {} modules, {}.\n\n"
      "{}\n"
      "Where load + instantiate (images) goes, ms: from_bytes (decompress, decode, check), load's phases "
      "(loaded_graphs::spent), and the rest (instantiate).\n\n"
      "{}\n",
      r.image_modules, format_bytes(static_cast<double>(r.image_bytes)),
      markdown_table({"graph", "nodes", "file", "bytes per node", "save", "capture + instantiate",
                      "load + inst., images", "÷ capture", "load + inst., registry", "÷ capture",
                      "replay µs: captured / loaded"},
                     costs, "lrrrrrrrrrr"),
      markdown_table({"graph", "from_bytes", "kernels", "buffers", "graphs", "instantiate", "total"}, phases,
                     "lrrrrrr"));
}

} // namespace conveyor::bench
