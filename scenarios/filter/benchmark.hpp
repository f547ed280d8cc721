#pragma once
//! \file benchmark.hpp
//! Timing of the chain over a batch of frames of one size, in each execution mode.

#include "filter/chain.hpp"

#include <conveyor/observe/describe.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conveyor::scenarios {
class profiling;
} // namespace conveyor::scenarios

namespace conveyor::filter {

//! Warm-up and timed passes over the batch.
struct timing_options {
  int warmup = 1;  //!< untimed passes first (they include graph instantiation), >= 0
  int repeat = 10; //!< timed passes; the median is reported, >= 1
};

//! One mode's result over a batch. A pass enqueues every frame (upload, chain, download) and then waits for all of
//! them; its time per frame is the pass's wall time divided by the frames; file I/O is not included.
struct mode_timing {
  execution_mode mode = execution_mode::sync;
  double ms_per_frame = 0.0;            //!< median over the timed passes, milliseconds
  double frames_per_second = 0.0;       //!< 1000 / ms_per_frame
  double nodes_updated_per_frame = 0.0; //!< graph mode: mean over the timed frames of the nodes updated
  std::uint64_t output_hash = 0;        //!< hash of every frame's outputs after the last pass
};

//! The results for one frame size.
struct size_report {
  int width = 0;
  int height = 0;
  std::size_t frames = 0;
  std::vector<mode_timing> modes;
  std::vector<std::string> graph_log;              //!< graph mode, first pass: what each frame did to the graph
  std::size_t instantiations = 0;                  //!< graph instantiations for this size (1 with graph mode)
  std::optional<conveyor::graph_statistics> stats; //!< of the graph, with graph mode
  std::string dot;                                 //!< the graph as Graphviz DOT, with graph mode
  //! True when every mode produced bitwise-identical outputs.
  [[nodiscard]] bool modes_agree() const noexcept;
};

//! One hash of every frame's outputs (frame_slot::output_hash, combined in order): equal hashes mean bitwise-equal
//! outputs of the whole batch.
[[nodiscard]] std::uint64_t batch_output_hash(const std::vector<frame_slot>& slots) noexcept;

//! Runs `modes` in order over `slots` (all of the chain's size; `names` labels them in the graph log) through the
//! scenarios' mode runner (common/mode_runner.hpp): for each mode `o.warmup` untimed passes then `o.repeat` timed
//! ones, a pass being a round. Afterwards the slots hold the last mode's outputs.
//! `profiling` (optional, --profile / --doctor): every frame is a profiled step of track to_string(mode); graph
//! mode watches the chain's executable graph (named as frame_graph_name) and hands it to the doctor after the run.
//! \throws std::invalid_argument for empty slots, mismatched names or bad options; conveyor::cuda_error when a
//!         CUDA call fails.
[[nodiscard]] size_report run_benchmark(filter_chain& chain, const std::vector<frame_slot>& slots,
                                        const std::vector<std::string>& names, const std::vector<execution_mode>& modes,
                                        const timing_options& o, scenarios::profiling* profiling = nullptr);

//! The name the profile and the doctor give the graph of `width` x `height` frames: "filter frame WxH".
[[nodiscard]] std::string frame_graph_name(int width, int height);

} // namespace conveyor::filter
