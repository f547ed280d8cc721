#pragma once
//! \file graph_saving.hpp
//! The workloads' `--save-graph FILE`, `--save-graph-contents` and `--check-saved-graph` options: the first
//! executable graph a run launches in graph mode is saved to a graph file (conveyor/keep, docs/graph-files.md) with
//! the images of its kernels (recorded through CUPTI's module-load callback from the command's start, so that
//! `conveyor graph replay` needs no registry), and optionally checked: loaded into the same buffers and into new
//! ones, each replay compared byte for byte with the original's (conveyor::check_round_trip).

#include "common/graph_sink.hpp"

#include <conveyor/keep/save.hpp>
#include <conveyor/profile/module_images.hpp>

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace conveyor::scenarios {

//! The options as given on a workload's command line.
struct graph_saving_cli {
  std::string path;      //!< --save-graph FILE; empty: none
  bool contents = false; //!< --save-graph-contents: the buffers' contents too (replay then starts from them)
  bool check = false;    //!< --check-saved-graph: load the file twice and compare with the original
};

//! Adds --save-graph, --save-graph-contents and --check-saved-graph to `sub`, storing into `o` (which must outlive
//! `sub`); `graph` names the graph saved (for the help text).
void add_graph_saving_options(CLI::App& sub, graph_saving_cli& o, std::string_view graph);

//! Checks the options before any work: the file must be writable atomically; --save-graph-contents and
//! --check-saved-graph need --save-graph; a run without a graph mode has nothing to save.
//! \throws usage_error naming the options; std::invalid_argument for the path.
void check_graph_saving_options(const graph_saving_cli& o, bool has_graph);

//! Saves the first executable graph watched (later ones are ignored), while it lives the process's one graph saving
//! (active()). Not thread-safe.
class graph_saving final : public graph_sink {
public:
  //! Starts recording module images (profile::module_images): make it before the workload's first kernel.
  //! \throws profile::profiler_error when CUPTI refuses.
  explicit graph_saving(graph_saving_cli options);
  ~graph_saving() override;
  graph_saving(const graph_saving&) = delete;
  graph_saving& operator=(const graph_saving&) = delete;
  //! Saves `exec` (the first time) as graph `name`, prints the file's size and, with --check-saved-graph, the check.
  //! \throws save_error, load_error, cuda_error; std::runtime_error when the check finds a difference.
  void watch(const graph_exec& exec, std::string name) override;
  //! The graph saving of this process, or null.
  [[nodiscard]] static graph_saving* active() noexcept;

private:
  graph_saving_cli options_;
  profile::module_images images_;
  bool saved_ = false;
};

//! A graph saving when --save-graph was given, else nullptr. \throws as graph_saving().
[[nodiscard]] std::unique_ptr<graph_saving> make_graph_saving(const graph_saving_cli& o);

} // namespace conveyor::scenarios
