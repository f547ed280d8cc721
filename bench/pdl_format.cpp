// The `faster/` group's table (pdl.hpp): host-only.
#include "bench/pdl.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

std::string format_faster(const std::vector<faster_row>& rows) {
  std::string out = "| shape | N | steps/block | plain graph µs/node | programmatic µs/node | ratio | device relaunch "
                    "µs/node | ratio | programmatic + relaunch µs/node | ratio | edges made programmatic |\n"
                    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const auto ratio = [](double v, double base) { return base > 0 ? v / base : 0.0; };
  for (const auto& r : rows)
    out += fmt::format("| {} | {} | {} | {:.3f} | {:.3f} | {:.2f} | {:.3f} | {:.2f} | {:.3f} | {:.2f} | {} of {} |\n",
                       r.shape, r.nodes, r.steps, r.plain_us, r.programmatic_us, ratio(r.programmatic_us, r.plain_us),
                       r.relaunch_us, ratio(r.relaunch_us, r.plain_us), r.both_us, ratio(r.both_us, r.plain_us),
                       r.programmatic_edges, r.edges);
  return out;
}

} // namespace conveyor::bench
