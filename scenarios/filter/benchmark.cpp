//! \file benchmark.cpp
//! The chain over a batch of frames in each mode, through the mode runner (common/mode_runner.hpp).

#include "filter/benchmark.hpp"

#include "common/hash.hpp"
#include "common/mode_runner.hpp"
#include "common/profiling.hpp"

#include <conveyor/observe/export.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
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
  for (const auto& s : slots) h = h * scenarios::fnv1a_prime ^ s.output_hash();
  return h;
}

std::string frame_graph_name(int width, int height) { return fmt::format("filter frame {}x{}", width, height); }

namespace {

class frames_run;

//! Graph mode's step: the chain's graph, built and instantiated at the first frame, then per frame only the nodes
//! whose arguments changed updated before the launch (filter_chain::enqueue in graph mode: the scenarios' showcase
//! of per-node updates).
class per_node_update_step final : public scenarios::graph_step {
public:
  explicit per_node_update_step(frames_run& run) : run_(run) {}
  void launch(std::size_t frame) override;
  void watch(scenarios::graph_sink& p) override;
  void examine(scenarios::profiling& p) override;

private:
  frames_run& run_;
};

//! One mode over a batch of frames as a workload of the mode runner: a round is a pass over every frame, waited for
//! at its end; the first `warmup` passes are untimed (graph mode instantiates in the first). Graph mode logs what
//! each frame of the first pass did to the graph and counts the nodes updated in the timed passes.
class frames_run final : public scenarios::workload {
public:
  frames_run(filter_chain& chain, const std::vector<frame_slot>& slots, const std::vector<std::string>& names,
             execution_mode mode, const timing_options& o, size_report& report) :
      chain_(chain),
      slots_(slots),
      names_(names),
      mode_(mode),
      passes_(static_cast<std::size_t>(o.warmup + o.repeat)),
      warmup_(static_cast<std::size_t>(o.warmup)),
      report_(report) {}

  [[nodiscard]] cudaStream_t stream() const override { return nullptr; } // the chain's own streams
  void reset() override {}
  [[nodiscard]] std::unique_ptr<scenarios::graph_step> make_graph() override {
    return std::make_unique<per_node_update_step>(*this);
  }
  void synchronize() override { chain_.synchronize(); }
  [[nodiscard]] std::size_t begin_round(std::size_t pass) override {
    pass_ = pass;
    return pass < passes_ ? slots_.size() : 0;
  }
  void enqueue(const scenarios::launch_ctx&, std::size_t frame) override { chain_.enqueue(slots_[frame], mode_); }
  //! Graph mode: what the frame did to the graph (outside the frame's profiled step).
  bool after_step(std::size_t frame) override;
  [[nodiscard]] std::size_t end_round(std::size_t) override { return slots_.size(); }

  //! Nodes updated per timed frame, on average (graph mode).
  [[nodiscard]] double nodes_updated_per_frame() const noexcept {
    const std::size_t timed = slots_.size() * (passes_ - warmup_);
    return timed > 0 ? static_cast<double>(updated_) / static_cast<double>(timed) : 0.0;
  }
  [[nodiscard]] filter_chain& chain() noexcept { return chain_; }
  [[nodiscard]] const std::vector<frame_slot>& slots() const noexcept { return slots_; }
  //! Where the graph of the chain is watched once instantiated (graph mode with --profile, --doctor or
  //! --save-graph).
  void watch_with(scenarios::graph_sink* p) { sinks_.push_back(p); }

private:
  filter_chain& chain_;
  const std::vector<frame_slot>& slots_;
  const std::vector<std::string>& names_;
  execution_mode mode_;
  std::size_t passes_;
  std::size_t warmup_;
  size_report& report_;
  std::size_t pass_ = 0;
  std::size_t updated_ = 0;
  std::vector<scenarios::graph_sink*> sinks_;
};

void per_node_update_step::launch(std::size_t frame) {
  run_.chain().enqueue(run_.slots()[frame], execution_mode::graph);
}

void per_node_update_step::watch(scenarios::graph_sink& p) { run_.watch_with(&p); }

void per_node_update_step::examine(scenarios::profiling& p) {
  const filter_chain& chain = run_.chain();
  if (chain.executable() != nullptr) p.examine(*chain.executable(), frame_graph_name(chain.width(), chain.height()));
}

bool frames_run::after_step(std::size_t frame) {
  if (mode_ != execution_mode::graph) return false;
  const graph_update_report& u = chain_.last_graph_update();
  if (u.instantiated)
    for (scenarios::graph_sink* sink : sinks_)
      sink->watch(*chain_.executable(), frame_graph_name(chain_.width(), chain_.height()));
  if (pass_ >= warmup_) updated_ += u.nodes_updated;
  if (pass_ == 0)
    report_.graph_log.push_back(u.instantiated
                                    ? names_[frame] + ": graph built and instantiated"
                                    : names_[frame] + ": " + std::to_string(u.nodes_updated) + " node(s) updated" +
                                          (u.updated.empty() ? std::string() : " (" + join_labels(u.updated) + ")"));
  return false;
}

} // namespace

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
  for (const auto mode : modes) {
    frames_run run(chain, slots, names, mode, o, report);
    scenarios::run_settings settings;
    settings.mode = mode;
    settings.warmup_rounds = static_cast<std::size_t>(o.warmup);
    settings.profiling = profiling;
    const scenarios::mode_timing timing = scenarios::run_workload(run, settings);
    mode_timing t;
    t.mode = mode;
    t.ms_per_frame = timing.median_ms_per_unit;
    t.frames_per_second = t.ms_per_frame > 0.0 ? 1000.0 / t.ms_per_frame : 0.0;
    t.nodes_updated_per_frame = run.nodes_updated_per_frame();
    t.output_hash = batch_output_hash(slots);
    report.modes.push_back(t);
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
