#pragma once
//! \file pipelined.hpp
//! The pipelined mode of `conveyor filter` (--pipeline DEPTH): the chain's kernels as the compute stage of a
//! conveyor::frame_pipeline, so that one graph launch per step holds the upload of frame k, the chain of frame k - 1
//! and the downloads of frame k - 2 (depth 3), and the bound it is held to: the slowest of the upload, the chain and
//! the downloads, each measured alone in the same run.

#include "filter/benchmark.hpp"
#include "filter/chain.hpp"

#include <conveyor/assembly/frame_pipeline.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conveyor::filter {

//! What the pipelined mode runs.
struct pipelined_options {
  std::size_t depth = 3;       //!< frames in flight, 1 (no overlap) to 3
  std::size_t min_frames = 60; //!< each pass streams the batch as often as needed to hold at least this many frames
};

//! The pipelined mode's result for one frame size. Times are per frame, medians over the timed passes.
struct pipelined_report {
  std::size_t depth = 0;
  std::size_t frames_per_pass = 0; //!< the batch times the cycles streamed in one pass (drained once at the end)
  double ms_per_frame = 0.0;       //!< pipelined: pass wall time / frames_per_pass, milliseconds
  double frames_per_second = 0.0;  //!< 1000 / ms_per_frame
  double upload_ms = 0.0;          //!< the upload stage alone (host to device bytes), milliseconds per frame
  double chain_ms = 0.0;           //!< the chain's kernels alone (compute stage), milliseconds per frame
  double download_ms = 0.0;        //!< the download stage alone (device to host bytes), milliseconds per frame
  std::size_t upload_bytes = 0;    //!< host to device bytes per frame
  std::size_t download_bytes = 0;  //!< device to host bytes per frame
  double bound_ms = 0.0;           //!< max(upload_ms, chain_ms, download_ms)
  pipeline_stage bound_by = pipeline_stage::compute; //!< the stage that sets the bound
  //! frames/s as a fraction of the bound's frames/s: bound_ms / ms_per_frame (1: at the bound).
  double fraction_of_bound = 0.0;
  std::uint64_t output_hash = 0;        //!< batch_output_hash of the frames after the last pipelined pass
  frame_pipeline_statistics statistics; //!< of the pipeline: steps, instantiations, copy nodes updated
};

//! Runs the pipelined mode over `slots` (all of the chain's size): a pipeline of `p.depth` with the chain's kernels
//! (filter_chain::define_kernels) as the compute stage and each frame's pinned buffers as its host buffers; then for
//! each of upload alone, chain alone, download alone and pipelined: `o.warmup` untimed passes and `o.repeat` timed
//! ones, each pass streaming the batch ceil(p.min_frames / frames) times and waiting once at the end. The pipelined
//! passes come last: afterwards the slots hold their outputs (bitwise those of the other modes).
//! \throws std::invalid_argument for empty slots, a bad depth or options; conveyor::cuda_error when a CUDA call
//!         fails.
[[nodiscard]] pipelined_report run_pipelined(filter_chain& chain, const std::vector<frame_slot>& slots,
                                             const pipelined_options& p, const timing_options& o);

} // namespace conveyor::filter
