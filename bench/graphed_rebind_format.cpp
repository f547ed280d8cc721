// Host-only half of graphed_rebind.hpp: the Markdown table (in conveyor_bench_report, tested without a GPU).
#include "bench/graphed_rebind.hpp"

#include "bench/report.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

std::string format_graphed_rebind(const std::vector<rebind_row>& rows) {
  const std::vector<std::string> header{"case",         "N",           "what",      "µs/call (with sync)", "min µs",
                                        "host µs in call", "above replay µs", "per reached node µs", "÷ eager",
                                        "captures",     "rebinds"};
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    const double above = r.call_us - r.replay_call_us;
    const bool is_reference = r.reached == 0;
    body.push_back({fmt::format("`{}`", r.name), fmt::format("{}", r.nodes), r.what, format_number(r.us),
                    format_number(r.min_us), format_number(r.call_us), is_reference ? "" : format_number(above),
                    r.reached > 1 ? format_number(above / static_cast<double>(r.reached)) : "",
                    r.eager_us > 0 ? fmt::format("{:.3f}", r.us / r.eager_us) : "", fmt::format("{}", r.captures),
                    fmt::format("{}", r.rebinds)});
  }
  return fmt::format("### graphed/: changed arguments — rebind vs re-capture vs eager\n\nMedians over the timed "
                     "calls. \"µs/call\" includes `cudaStreamSynchronize` (the GPU's work); \"host µs in call\" is "
                     "the call alone (key, patch or capture and update, launch) and \"above replay\" compares it with "
                     "the replay's. \"÷ eager\" (µs/call) below 1 is faster than running the callable eagerly.\n\n{}",
                     markdown_table(header, body, "lrlrrrrrrrr"));
}

std::string format_recapture_cost(const std::vector<recapture_cost>& rows) {
  const std::vector<std::string> header{"N", "capture µs", "update_incremental µs (1 node changed)",
                                        "update µs per node"};
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows)
    body.push_back({fmt::format("{}", r.nodes), format_number(r.capture_us), format_number(r.update_us),
                    format_number(r.update_us / static_cast<double>(r.nodes))});
  return fmt::format("### graphed/: what a re-capture costs\n\nHost µs, medians: capturing the N-kernel callable, "
                     "and `graph_exec::update_incremental` of the captured graph when 1 of its N nodes changed (reads "
                     "the new graph once: kernel parameters, launch attributes, edges).\n\n{}",
                     markdown_table(header, body, "rrrr"));
}

} // namespace conveyor::bench
