#pragma once
//! \file update_growth.hpp
//! The `update-growth` study of `conveyor bench`: an update loop run for many steps. Each step rebuilds the graph
//! definition (a kernel whose pointer alternates, and a host callable holding 4 KiB of state), updates the
//! executable graph as a whole (graph_exec::update) and launches it. Reports resident memory, callable states alive
//! and host time per step at checkpoints, so that growth in memory or time shows: both should stay flat.

#include "bench/study.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::bench {

//! One checkpoint of the loop.
struct growth_row {
  std::size_t steps = 0;   //!< updates done so far
  double resident_mib = 0; //!< resident memory of the process (/proc/self/statm), MiB
  long live_states = 0;    //!< host-callable states alive (each 4 KiB), after the launches finished
  double build_us = 0;     //!< host µs per step building the definition, mean over the chunk
  double update_us = 0;    //!< host µs per graph_exec::update, mean over the chunk
  double launch_us = 0;    //!< host µs per graph_exec::launch, mean over the chunk
};

//! Runs `steps` updates on the current device, with a checkpoint after every `steps / checkpoints` steps (the
//! stream is synchronised there, outside the timing). Also checks the host callables ran once per launch.
//! \throws conveyor::cuda_error when a CUDA call fails; std::invalid_argument for steps or checkpoints below 1;
//!         std::runtime_error when an update is refused or the callables did not all run.
[[nodiscard]] std::vector<growth_row> measure_update_growth(std::size_t steps, std::size_t checkpoints = 10);

//! `conveyor bench update-growth --steps N`: measure_update_growth(N) with 10 checkpoints.
[[nodiscard]] std::vector<growth_row> measure_update_growth_study(const study_args& args);

//! A Markdown table of the rows (host-only, tested without a GPU).
[[nodiscard]] std::string format_update_growth(const std::vector<growth_row>& rows);

} // namespace conveyor::bench
