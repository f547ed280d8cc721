// Host-only half of graphed_overhead.hpp: the Markdown table (in conveyor_bench_report, tested without a GPU).
#include "bench/graphed_overhead.hpp"

#include "bench/markdown.hpp"

#include <fmt/format.h>

#include <vector>

namespace conveyor::bench {

std::string format_graphed_overhead(const graphed_overhead_result& r) {
  const std::vector<std::string> header{"replay through", "host µs per call", "min", "max"};
  const std::vector<std::vector<std::string>> rows{
      {"`graph_exec::launch`", format_number(r.bare_us), format_number(r.bare_min_us), format_number(r.bare_max_us)},
      {"`graphed::operator()`", format_number(r.graphed_us), format_number(r.graphed_min_us),
       format_number(r.graphed_max_us)},
  };
  return fmt::format("### graphed: per-call overhead over a bare launch\n\n{} calls per repetition, {} repetitions "
                     "(interleaved), medians.\n\n{}\nOverhead of `graphed`: **{} µs per call** (median difference).\n",
                     r.calls, r.repetitions, markdown_table(header, rows, "lrrr"), format_number(r.overhead_us()));
}

} // namespace conveyor::bench
