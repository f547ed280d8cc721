//! \file benchmark.cpp
#include "filter/benchmark.hpp"

#include "common/profiling.hpp"

#include <conveyor/observe/export.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace conveyor::filter {
namespace {

std::string join_labels(const std::vector<std::string_view>& labels) {
  std::string out;
  for (const auto l : labels) {
    if (!out.empty()) out += ", ";
    out += l;
  }
  return out;
}

} // namespace

bool size_report::modes_agree() const noexcept {
  return std::all_of(modes.begin(), modes.end(),
                     [&](const mode_timing& m) { return m.output_hash == modes.front().output_hash; });
}

std::uint64_t batch_output_hash(const std::vector<frame_slot>& slots) noexcept {
  std::uint64_t h = 0;
  for (const auto& s : slots) h = h * 1099511628211ULL ^ s.output_hash();
  return h;
}

double median(std::vector<double> values) noexcept {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string frame_graph_name(int width, int height) { return fmt::format("filter frame {}x{}", width, height); }

size_report run_benchmark(filter_chain& chain, const std::vector<frame_slot>& slots,
                          const std::vector<std::string>& names, const std::vector<execution_mode>& modes,
                          const timing_options& o, scenarios::profiling* profiling) {
  if (slots.empty()) throw std::invalid_argument("run_benchmark: no frames");
  if (names.size() != slots.size()) throw std::invalid_argument("run_benchmark: one name per frame is needed");
  if (o.warmup < 0 || o.repeat < 1) throw std::invalid_argument("run_benchmark: warmup >= 0 and repeat >= 1");
  size_report report;
  report.width = chain.width();
  report.height = chain.height();
  report.frames = slots.size();
  using clock = std::chrono::steady_clock;
  for (const auto mode : modes) {
    std::vector<double> ms;
    std::size_t updated = 0;
    for (int pass = 0; pass < o.warmup + o.repeat; ++pass) {
      const bool timed = pass >= o.warmup;
      const bool log = mode == execution_mode::graph && pass == 0;
      const auto start = clock::now();
      for (std::size_t i = 0; i < slots.size(); ++i) {
        {
          const auto profiled = scenarios::profile_step(profiling, mode); // one frame
          chain.enqueue(slots[i], mode);
        }
        if (mode != execution_mode::graph) continue;
        const graph_update_report& u = chain.last_graph_update();
        if (u.instantiated && profiling != nullptr)
          profiling->watch(*chain.executable(), frame_graph_name(chain.width(), chain.height()));
        if (timed) updated += u.nodes_updated;
        if (log)
          report.graph_log.push_back(
              u.instantiated ? names[i] + ": graph built and instantiated"
                             : names[i] + ": " + std::to_string(u.nodes_updated) + " node(s) updated" +
                                   (u.updated.empty() ? std::string() : " (" + join_labels(u.updated) + ")"));
      }
      chain.synchronize();
      const auto stop = clock::now();
      if (timed)
        ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count() /
                     static_cast<double>(slots.size()));
    }
    mode_timing t;
    t.mode = mode;
    t.ms_per_frame = median(ms);
    t.frames_per_second = t.ms_per_frame > 0.0 ? 1000.0 / t.ms_per_frame : 0.0;
    t.nodes_updated_per_frame =
        static_cast<double>(updated) / static_cast<double>(slots.size() * static_cast<std::size_t>(o.repeat));
    t.output_hash = batch_output_hash(slots);
    report.modes.push_back(t);
    if (mode == execution_mode::graph && profiling != nullptr && chain.executable() != nullptr)
      profiling->examine(*chain.executable(), frame_graph_name(chain.width(), chain.height()));
  }
  report.instantiations = chain.instantiations();
  if (const conveyor::graph* g = chain.graph()) {
    const conveyor::graph_description d = conveyor::describe(*g);
    report.stats = conveyor::statistics(d);
    report.dot = conveyor::to_dot(d, "filter");
  }
  return report;
}

} // namespace conveyor::filter
