// Host-only half of graph_files.hpp: the Markdown table (in conveyor_bench_report, tested without a GPU).
#include "bench/graph_files.hpp"

#include "bench/markdown.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

std::string format_graph_files(const graph_files_result& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : r.rows)
    rows.push_back({g.what, fmt::format("{}", g.nodes), format_bytes(static_cast<double>(g.file_bytes)),
                    g.nodes > 0 ? format_number(static_cast<double>(g.file_bytes) / static_cast<double>(g.nodes)) : "—",
                    format_number(g.save_ms), format_number(g.capture_instantiate_ms), format_number(g.load_ms),
                    format_number(g.load_instantiate_ms),
                    g.capture_instantiate_ms > 0 ? format_number(g.load_instantiate_ms / g.capture_instantiate_ms) : "—",
                    g.replay_us > 0 ? fmt::format("{} / {}", format_number(g.replay_us), format_number(g.replay_loaded_us))
                                    : "—"});
  return fmt::format(
      "Each row: medians over the repeats, host milliseconds. *Capture + instantiate*: the graph made the way the "
      "program makes it (a stream capture; for the buckets graphed::prepare, warm-up calls included) and "
      "instantiated. *Load + instantiate*: the file's bytes read (from_bytes), loaded into new buffers with every "
      "kernel from the image the file embeds (cuLibraryLoadData), and instantiated (load_buckets: instantiated and "
      "uploaded). Files hold no buffer contents. *Replay*: a launch until finished, µs, of the captured graph and of the "
      "loaded one (whose buffers and kernel library the load owns, tied to it by a CUDA user object), alternately "
      "(chains only). Module images recorded by CUPTI during the study: {} modules, {}.\n\n"
      "{}\n",
      r.image_modules, format_bytes(static_cast<double>(r.image_bytes)),
      markdown_table({"graph", "nodes", "file", "bytes per node", "save", "capture + instantiate", "load",
                      "load + instantiate", "load + inst. ÷ capture + inst.", "replay µs: captured / loaded"},
                     rows, "lrrrrrrrrr"));
}

} // namespace conveyor::bench
