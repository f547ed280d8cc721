#pragma once
//! \file graphed.hpp
//! The `graphed` study of `conveyor bench` (the `graphed/` group): what a conveyor::graphed call costs when its
//! arguments change, against replay, against full re-capture (rebinding off) and against eager execution. The callable
//! enqueues N tiny kernels (1 block of 32 threads) that all read one pointer and one scalar argument; node 0 also reads
//! a second pointer and a second scalar. Changing the first pair reaches all N nodes, the second pair 1 node.

#include "bench/study.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::bench {

//! One measured case.
struct rebind_row {
  std::string name;          //!< "graphed/pointer-1-node/N=1000"
  std::string what;          //!< "pointer change reaching 1 node (rebind)"
  std::size_t nodes = 0;     //!< N
  std::size_t reached = 0;   //!< nodes the change reaches (0 for replay and eager)
  double us = 0;             //!< host µs per call including the stream synchronisation, median
  double min_us = 0;         //!< fastest call
  double call_us = 0;        //!< host µs inside the call alone (patch or capture, update, launch), median
  double replay_call_us = 0; //!< the replay's call_us of the same N, same run
  double replay_us = 0;      //!< the replay median of the same N, same run
  double eager_us = 0;       //!< the eager median of the same N, same run
  std::size_t captures = 0;  //!< captures during the timed calls (0 when every change was patched)
  std::size_t rebinds = 0;   //!< calls patched without capture during the timed calls
};

//! Measures the group on the current device for each N in `sizes`, `calls` timed calls per case, the cases of one N
//! interleaved call by call (after warm-up and
//! the re-capture that verifies the mapping). Checks the final buffers against an eager run of the same calls.
//! \throws conveyor::cuda_error when a CUDA call fails; std::invalid_argument for an empty `sizes`, an N of 0 or
//!         calls below 1; std::runtime_error when a graphed result differs from the eager one.
[[nodiscard]] std::vector<rebind_row> measure_graphed_rebind(const std::vector<std::size_t>& sizes, int calls = 21);

//! A Markdown table of the rows: µs per call, host µs in the call and above replay's (per reached node for changes
//! reaching all nodes), ratio to eager. Host-only (tested without a GPU).
[[nodiscard]] std::string format_graphed_rebind(const std::vector<rebind_row>& rows);

//! What the re-capture path spends, for each N, phase by phase (host µs, medians of `calls`), when 1 of the N kernel
//! nodes changed: running the callable eagerly (with the stream synchronisation), capturing it (with the checks of
//! capture_options, and what those checks cost), then the two ways graphed applies a capture
//! (graphed_options::recapture): the default, one whole-graph update (graph_exec::update: its guards and
//! cudaGraphExecUpdate) followed by the launch until finished with the replaced definition destroyed while the GPU
//! runs; and per_node, reading the captured graph (kernel parameters, launch attributes, edges), comparing it with
//! the executable graph's own, setting the changed node (update_incremental less the read and the comparison, the
//! replaced definition destroyed there), then the launch until finished. Anchors through the Runtime API and the
//! driver alone: the same re-capture with 1 node changed and with all N changed, and the driver calls of the read.
struct recapture_cost {
  std::size_t nodes = 0;
  double eager_us = 0;
  double capture_us = 0;       //!< conveyor::capture with the default checks
  double checks_us = 0;        //!< of which the checks (capture with them minus capture without them)
  double whole_update_us = 0;  //!< graph_exec::update (the default path)
  double whole_launch_us = 0;  //!< launch, the replaced definition destroyed, until finished (the default path)
  double read_us = 0;          //!< the snapshot of the captured graph (per_node)
  double compare_us = 0;       //!< the comparison with the executable graph's snapshot (per_node)
  double update_us = 0;        //!< graph_exec::update_incremental in all: read, compare, set (per_node)
  double launch_us = 0;        //!< cudaGraphLaunch until finished (per_node)
  double raw_capture_us = 0;   //!< the Runtime API alone: cudaStreamBeginCapture … cudaStreamEndCapture
  double raw_update_us = 0;    //!< cudaGraphExecUpdate
  double raw_launch_us = 0;    //!< cudaGraphLaunch until finished, the replaced graph destroyed meanwhile
  double raw_all_nodes_us = 0; //!< the Runtime API alone, all N nodes changed: capture, update, launch until finished
  double raw_read_us = 0;      //!< the driver calls alone of a read for update_incremental (a fresh capture)
  //! The default path with the capture's checks off (no default-stream guard, no host-memory walk: the user's
  //! promise), on an executable graph of its own: capture, whole-graph update, launch until finished
  double unchecked_capture_us = 0;
  double unchecked_update_us = 0;
  double unchecked_launch_us = 0;
};
//! Measures recapture_cost on the current device. \throws conveyor::cuda_error; std::invalid_argument as above.
[[nodiscard]] std::vector<recapture_cost> measure_recapture_cost(const std::vector<std::size_t>& sizes, int calls = 11);
//! A Markdown table of them (host-only).
[[nodiscard]] std::string format_recapture_cost(const std::vector<recapture_cost>& rows);

//! Start-up with many shapes: graphed::prepare of a callable of `nodes` tiny kernels over `buckets` batch-size
//! buckets (each captured and instantiated, largest first), host ms (median of `calls` fresh callables).
struct prepare_cost {
  std::size_t buckets = 0;
  std::size_t nodes = 0;
  double prepare_ms = 0;
  //! graphed::prepare with graphed_options::warmup_calls = 0: capture, instantiation and upload of the buckets alone,
  //! the same work as raw_ms (ms)
  double no_warmup_ms = 0;
  //! As no_warmup_ms with the stream watch off (CONVEYOR_WATCH_STREAMS=0): no_warmup_ms less this is what the
  //! watch of each bucket's capture costs (ms)
  double unwatched_ms = 0;
  //! The raw Runtime API's own work for the same buckets, in the same run: each bucket captured
  //! (cudaStreamBeginCapture, the N launches, cudaStreamEndCapture), instantiated and uploaded, one after another (ms)
  double raw_ms = 0;
  //! The raw cudaGraphInstantiate of the same B captured graphs spread over 1, 2, 4 and 8 host threads (ms, wall,
  //! from the first thread's start to the last one's end): how instantiation scales over threads
  std::array<double, 4> instantiate_ms{};
  //! graphed::prepare with graphed_options::instantiate_in_background, its buckets instantiated and uploaded on 1
  //! and on 2 worker threads while the calling thread captures the next (ms, until every bucket is cached)
  std::array<double, 2> background_ms{};
  //! prepare / raw
  [[nodiscard]] double ratio() const noexcept { return raw_ms > 0 ? prepare_ms / raw_ms : 0; }
  //! prepare without warm-up calls / raw: the same work on both sides
  [[nodiscard]] double same_work_ratio() const noexcept { return raw_ms > 0 ? no_warmup_ms / raw_ms : 0; }
};
//! The thread counts of prepare_cost::instantiate_ms.
inline constexpr std::array<int, 4> instantiate_threads{1, 2, 4, 8};
//! Measures prepare_cost for each bucket count: prepare (with and without the warm-up call, unwatched, in the
//! background with 1 and 2 workers) and the raw work, one run each in turn, `calls` rounds; medians.
//! \throws conveyor::cuda_error; std::invalid_argument for no counts.
[[nodiscard]] std::vector<prepare_cost> measure_prepare_cost(const std::vector<std::size_t>& bucket_counts,
                                                             std::size_t nodes = 100, int calls = 3);
//! A Markdown table of them (host-only).
[[nodiscard]] std::string format_prepare_cost(const std::vector<prepare_cost>& rows);

//! Start-up without prepare: the first calls of a stream of mixed shapes, each call's latency (host µs from the call
//! to the end of its stream synchronisation: what the caller waits for its result), for one way of running them.
struct first_calls_row {
  std::string variant;      //!< "eager", "graphed", "graphed, instantiate_in_background"
  std::vector<double> us;   //!< each call's latency, in call order
  std::size_t eager = 0;    //!< calls run eagerly (warm-ups, hand-overs, waits for the worker; all for "eager")
  std::size_t replays = 0;  //!< calls that launched an executable graph
  std::size_t captures = 0; //!< calls that captured
  std::size_t buckets = 0;  //!< shapes in the stream
  std::size_t nodes = 0;    //!< kernels per call
};
//! Runs the same `calls` calls of a callable of `nodes` tiny kernels, whose batch size (one of `buckets` bucket
//! sizes, so that a call's key is its shape alone) is drawn at random (fixed seed) at each call, three ways:
//! eagerly; through graphed with its defaults (one warm-up, then capture, instantiate and launch in the call); and
//! with graphed_options::instantiate_in_background. Checks that the three leave the same buffers (every buffer the
//! calls add to: each call's work ran once). \throws conveyor::cuda_error; std::runtime_error when the buffers
//! differ; std::invalid_argument for 0.
[[nodiscard]] std::vector<first_calls_row> measure_first_calls(std::size_t nodes = 100, std::size_t buckets = 16,
                                                               std::size_t calls = 100);
//! Two Markdown tables of them: per variant the total, median, 90th percentile and largest latency; and the mean
//! latency of each block of ten calls (host-only).
[[nodiscard]] std::string format_first_calls(const std::vector<first_calls_row>& rows);

//! What `conveyor bench graphed` measures: its four tables' rows.
struct graphed_study_result {
  std::vector<rebind_row> rebind;           //!< measure_graphed_rebind
  std::vector<recapture_cost> recapture;    //!< measure_recapture_cost
  std::vector<prepare_cost> prepare;        //!< measure_prepare_cost
  std::vector<first_calls_row> first_calls; //!< measure_first_calls
};
//! `conveyor bench graphed`: at N = 10, 100, 1000, 10000 measure_graphed_rebind (21 calls) and
//! measure_recapture_cost (11), or with `args.quick` at N = 10, 1000, 10000 (11 and 5); then measure_prepare_cost
//! over 8, 16, 32 and 64 buckets, and measure_first_calls (100 nodes, 16 buckets, 100 calls).
[[nodiscard]] graphed_study_result measure_graphed_study(const study_args& args);
//! The four tables, one after the other (host-only).
[[nodiscard]] std::string format_graphed_study(const graphed_study_result& result);

} // namespace conveyor::bench
