// The `profile/` group's table (profile_overhead.hpp): host-only.
#include "bench/profile_overhead.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

std::string format_profile_overhead(const std::vector<profile_overhead_row>& rows) {
  std::string out =
      "| shape | N | µs/step off | µs/step profiled | profiled / off | 1 step in 10 profiled / off | records/step | "
      "records/sampled step | attributed | utilisation |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows)
    out += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.3f} | {:.3f} | {:.0f} | {:.0f} | {:.1f}% | {:.1f}% |\n",
                       r.shape, r.nodes, r.off_us, r.on_us, r.ratio(), r.sampled_ratio(), r.records_per_step,
                       r.sampled_records_per_step, 100.0 * r.attributed, 100.0 * r.utilisation);
  return out;
}

} // namespace conveyor::bench
