//! \file pipelined.cpp
//! The pipelined mode and its bound, each stage timed alone.
#include "filter/pipelined.hpp"

#include "common/statistics.hpp"

#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <stdexcept>

namespace conveyor::filter {
namespace {

//! Median over the timed passes of `pass` (which enqueues `frames` frames), waiting for `s` after each; ms/frame.
double time_passes(const timing_options& o, std::size_t frames, const stream& s, const std::function<void()>& pass) {
  using clock = std::chrono::steady_clock;
  std::vector<double> ms;
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    const auto start = clock::now();
    pass();
    s.synchronize();
    const auto stop = clock::now();
    if (i >= o.warmup)
      ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count() / static_cast<double>(frames));
  }
  return scenarios::median(ms);
}

} // namespace

pipelined_report run_pipelined(filter_chain& chain, const std::vector<frame_slot>& slots, const pipelined_options& p,
                               const timing_options& o) {
  if (slots.empty()) throw std::invalid_argument("run_pipelined: no frames");
  if (o.warmup < 0 || o.repeat < 1) throw std::invalid_argument("run_pipelined: warmup >= 0 and repeat >= 1");
  if (p.min_frames < 1) throw std::invalid_argument("run_pipelined: at least one frame per pass");
  for (const auto& f : slots)
    if (f.width() != chain.width() || f.height() != chain.height())
      throw std::invalid_argument(fmt::format("run_pipelined: a frame of {}x{} on a chain for {}x{}", f.width(),
                                              f.height(), chain.width(), chain.height()));
  chain.synchronize(); // the chain's own modes use the intermediates the compute stage uses

  const std::size_t px = static_cast<std::size_t>(chain.width()) * static_cast<std::size_t>(chain.height());
  const stream s;
  frame_pipeline_options po;
  po.depth = p.depth;
  po.name = fmt::format("filter pipeline {}x{}", chain.width(), chain.height());
  frame_pipeline pipe(
      {3 * px}, {px, 3 * px},
      [&](graph& g, const pipeline_slot& slot) {
        chain.define_kernels(g, slot.input<const std::uint8_t>(0), slot.output<std::uint8_t>(0),
                             slot.output<std::uint8_t>(1));
      },
      s, po);

  const std::size_t cycles = (p.min_frames + slots.size() - 1) / slots.size();
  const std::size_t frames = cycles * slots.size();
  const auto inputs = [&](std::size_t i) { return std::array<const void*, 1>{slots[i].input()}; };
  const auto outputs = [&](std::size_t i) { return std::array<void*, 2>{slots[i].edges(), slots[i].sharp()}; };

  pipelined_report r;
  r.depth = pipe.depth();
  r.frames_per_pass = frames;
  r.upload_bytes = 3 * px;
  r.download_bytes = 4 * px;
  // Each stage alone, over the same frames: frame i of the batch in slot i mod depth.
  const auto alone = [&](pipeline_stage stage) {
    return time_passes(o, frames, s, [&] {
      for (std::size_t c = 0; c < cycles; ++c)
        for (std::size_t i = 0; i < slots.size(); ++i) {
          const auto in = inputs(i);
          const auto out = outputs(i);
          pipe.run_alone(stage, (c * slots.size() + i) % pipe.depth(), in, out);
        }
    });
  };
  r.upload_ms = alone(pipeline_stage::upload);
  r.download_ms = alone(pipeline_stage::download);
  r.chain_ms = alone(pipeline_stage::compute);
  r.bound_ms = r.chain_ms;
  if (r.upload_ms > r.bound_ms) {
    r.bound_ms = r.upload_ms;
    r.bound_by = pipeline_stage::upload;
  }
  if (r.download_ms > r.bound_ms) {
    r.bound_ms = r.download_ms;
    r.bound_by = pipeline_stage::download;
  }
  // Pipelined, last: its outputs stay in the slots.
  r.ms_per_frame = time_passes(o, frames, s, [&] {
    for (std::size_t c = 0; c < cycles; ++c)
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const auto in = inputs(i);
        const auto out = outputs(i);
        (void)pipe.push(in, out);
      }
    (void)pipe.drain();
  });
  r.frames_per_second = r.ms_per_frame > 0.0 ? 1000.0 / r.ms_per_frame : 0.0;
  r.fraction_of_bound = r.ms_per_frame > 0.0 ? r.bound_ms / r.ms_per_frame : 0.0;
  r.output_hash = batch_output_hash(slots);
  r.statistics = pipe.statistics();
  return r;
}

} // namespace conveyor::filter
