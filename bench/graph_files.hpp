#pragma once
//! \file graph_files.hpp
//! The `graph-files` study of `conveyor bench`: graphs as files (docs/graph-files.md). File size per node, save
//! time, and load + instantiate against capture + instantiate, for chains of N tiny kernels (N = 10 .. 10,000), the
//! training step (train's step: cuBLAS GEMMs and the scenario's kernels) and the 64 buckets of a graphed callable
//! of 100 kernels (graphed::prepare against load_buckets). Kernels resolve from the images the file embeds
//! (recorded by profile::module_images from the study's start), as in a process that never had them.

#include "bench/study.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::bench {

//! One measured graph: medians over the repeats, milliseconds.
struct graph_file_row {
  std::string what;                    //!< "chain of 1000 kernels", "train step", "64 buckets of 100 kernels"
  std::size_t nodes = 0;               //!< nodes saved (all buckets together for graphed)
  std::size_t file_bytes = 0;          //!< the file's size (no buffer contents)
  double capture_instantiate_ms = 0.0; //!< capture + instantiate (graphed: prepare, with its warm-up calls)
  double save_ms = 0.0;                //!< to_graph_file + to_bytes
  double load_instantiate_ms = 0.0;    //!< from_bytes + load + instantiate (graphed: load_buckets, with upload)
  double load_ms = 0.0;                //!< of which from_bytes + load (the graphs built, before instantiation)
  double parse_ms = 0.0;               //!< of which from_bytes (decompress, decode, check)
  double kernels_ms = 0.0;             //!< of which load's kernel resolution (images loaded: cuLibraryLoadData)
  double buffers_ms = 0.0;             //!< of which load's buffer allocation
  double graphs_ms = 0.0;              //!< of which load's graph building (nodes and dependencies added)
  //! from_bytes + load + instantiate as a restart of the same program does it: kernels from the program's registry
  //! (no image loaded), buffers passed by name; 0 where the graph holds library kernels (no registry can name them)
  double registry_load_instantiate_ms = 0.0;
  double replay_us = 0.0;        //!< chains: a launch of the captured graph until finished, µs (median)
  double replay_loaded_us = 0.0; //!< the same for the loaded graph (its own buffers, owned by the load)
};

//! What the study measured.
struct graph_files_result {
  std::vector<graph_file_row> rows;
  std::size_t image_modules = 0; //!< modules CUPTI recorded
  std::size_t image_bytes = 0;   //!< their bytes
};

//! `conveyor bench graph-files [--quick]`: chains of 10, 100, 1000, 10,000 kernels (quick: 10, 1000, 10,000), the
//! train step (batch 128, a random data set), 64 buckets of 100 kernels (quick: 16). Medians of 11 repeats (5 for
//! 10,000 nodes and for the buckets).
[[nodiscard]] graph_files_result measure_graph_files_study(const study_args& args);

//! The Markdown table (host-only, tested without a GPU).
[[nodiscard]] std::string format_graph_files(const graph_files_result& r);

} // namespace conveyor::bench
