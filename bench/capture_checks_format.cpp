// The `capture-checks` study's table (capture_checks.hpp): host-only.
#include "bench/capture_checks.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

std::string format_capture_checks(const capture_checks_study& study) {
  const bool watched = study.watch_unavailable.empty();
  std::string out =
      watched ? fmt::format("First stream watch of the process (libcupti loaded, subscribed, let go): {:.0f} µs.\n\n",
                            study.first_watch_us)
              : fmt::format("The stream watch cannot run here ({}): its columns are left out.\n\n",
                            study.watch_unavailable);
  out += watched ? "| calls captured | N | µs, no check | µs, default checks | ns added a call | µs, defaults + "
                   "stream watch | ns added a call |\n|---|---:|---:|---:|---:|---:|---:|\n"
                 : "| calls captured | N | µs, no check | µs, default checks | ns added a call |\n"
                   "|---|---:|---:|---:|---:|\n";
  for (const auto& r : study.rows) {
    out += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.0f} |", r.calls, r.count, r.none_us, r.defaults_us,
                       r.added_ns(r.defaults_us));
    if (watched) out += fmt::format(" {:.1f} | {:.0f} |", r.watched_us, r.added_ns(r.watched_us));
    out += "\n";
  }
  return out;
}

} // namespace conveyor::bench
