// Host-only half of update_growth.hpp: the Markdown table (in conveyor_bench_report, tested without a GPU).
#include "bench/update_growth.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

std::string format_update_growth(const std::vector<growth_row>& rows) {
  std::string out = "| updates | resident MiB | callable states alive | build µs/step | update µs | launch µs |\n"
                    "|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows)
    out += fmt::format("| {} | {:.1f} | {} | {:.2f} | {:.2f} | {:.2f} |\n", r.steps, r.resident_mib, r.live_states,
                       r.build_us, r.update_us, r.launch_us);
  return out;
}

} // namespace conveyor::bench
