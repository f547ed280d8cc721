#pragma once
//! \file pdl.hpp
//! The `pdl` study of `conveyor bench` (the `faster/` group): what programmatic dependent launch and device-side
//! relaunch save against a plain graph. Shapes: a chain of N tiny kernels each updating the same chunk (every edge a
//! real data dependency), and fork/join stages (one kernel, four parallel kernels, one join: 6 nodes a stage).
//! Variants, timed in alternating blocks of one run:
//! - plain graph: full edges, the host launches the executable graph once per step;
//! - programmatic: the same graph after conveyor::make_programmatic (every edge between the benchmark's waiting
//!   kernels programmatic), launched the same way;
//! - device relaunch: the plain graph with a controller kernel that tail-launches the graph from the device until it
//!   has run the block's steps (conveyor::device::add_relaunch with count_to), launched once per block from the host;
//! - programmatic + relaunch: both.
//! Each variant's result is checked (every kernel adds 1 to its chunk: exact in float) before it is timed.

#include "bench/study.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::bench {

//! One shape and size: wall µs per node of each variant (median over blocks).
struct faster_row {
  std::string shape;                  //!< "chain" or "fork/join"
  std::size_t nodes = 0;              //!< kernel nodes per step (N), without the relaunch controller
  std::size_t steps = 0;              //!< steps per timed block
  double plain_us = 0;                //!< plain graph, µs per node
  double programmatic_us = 0;         //!< programmatic edges, µs per node
  double relaunch_us = 0;             //!< device relaunch, µs per node
  double both_us = 0;                 //!< programmatic edges and device relaunch, µs per node
  std::size_t programmatic_edges = 0; //!< edges make_programmatic changed
  std::size_t edges = 0;              //!< edges of the graph
};

//! Measures both shapes at each N of `sizes` (`blocks` alternating blocks per variant).
//! \throws std::invalid_argument for empty sizes or an N below 6 for fork/join or below 1; std::runtime_error when a
//!         variant's result is wrong (the message names it); conveyor::cuda_error.
[[nodiscard]] std::vector<faster_row> measure_faster(const std::vector<std::size_t>& sizes, int blocks = 7);

//! `conveyor bench pdl`: measure_faster at N = 12, 120, 1002, 10002 with 9 blocks, or with `args.quick` at
//! N = 120, 10002 with 5.
[[nodiscard]] std::vector<faster_row> measure_faster_study(const study_args& args);

//! A Markdown table of the rows, with each variant's ratio to the plain graph (host-only, tested without a GPU).
[[nodiscard]] std::string format_faster(const std::vector<faster_row>& rows);

} // namespace conveyor::bench
