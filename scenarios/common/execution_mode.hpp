#pragma once
//! \file execution_mode.hpp
//! The three execution modes every scenario runs in, and how a scenario's code enqueues work in each.

#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <string>
#include <string_view>

namespace conveyor::scenarios {

//! How a workload's GPU work reaches the GPU.
enum class execution_mode {
  sync,   //!< cudaStreamSynchronize after every kernel (and library call)
  stream, //!< everything asynchronous on the stream(s)
  graph,  //!< the work captured or built into a graph once, instantiated and uploaded, then launched
};

//! All modes, in the order `--mode all` runs them (sync first: the others are compared with it).
inline constexpr std::array<execution_mode, 3> all_execution_modes{execution_mode::sync, execution_mode::stream,
                                                                   execution_mode::graph};

//! "sync", "stream" or "graph": the one spelling of the modes, on the command line, in tables and profile tracks.
[[nodiscard]] std::string_view to_string(execution_mode m) noexcept;
//! Inverse of to_string.
//! \throws std::invalid_argument naming the text and the valid names for any other text.
[[nodiscard]] execution_mode parse_execution_mode(std::string_view text);

//! One mode a workload runs in: how its steps reach the GPU (`kind`) and, for a workload with several graph modes,
//! which of its graphs (`graph`, e.g. "while" in "graph-while"; empty for a workload with one graph and for the
//! eager modes). Converts implicitly from an execution_mode. A plain value; `graph` must refer to a string that
//! outlives it (a literal).
struct run_mode {
  execution_mode kind = execution_mode::sync; //!< sync, stream or graph
  std::string_view graph;                     //!< graph modes: which graph, when the workload has several

  constexpr run_mode() noexcept = default;
  //! The mode `k` (a workload's one graph when k is graph). Implicit: an execution_mode is a run mode.
  constexpr run_mode(execution_mode k) noexcept : kind(k) {} // NOLINT(google-explicit-constructor)
  //! The graph mode `k` of the workload's graph named `g`.
  constexpr run_mode(execution_mode k, std::string_view g) noexcept : kind(k), graph(g) {}
  //! Equal kinds and graph names.
  friend constexpr bool operator==(const run_mode&, const run_mode&) noexcept = default;
};

//! The three modes of a workload with one graph, in the order `--mode all` runs them.
inline constexpr std::array<run_mode, 3> standard_modes{
    run_mode(execution_mode::sync), run_mode(execution_mode::stream), run_mode(execution_mode::graph)};

//! True for the graph modes (the steps are graph launches). Never throws.
[[nodiscard]] constexpr bool is_graph(const run_mode& m) noexcept { return m.kind == execution_mode::graph; }

//! The mode's name: to_string(m.kind), followed by "-" and m.graph when a graph is named ("graph-while").
//! \throws std::bad_alloc only.
[[nodiscard]] std::string to_string(const run_mode& m);

//! Where and how to enqueue: the stream, whether to wait for each kernel or library call right after it is
//! enqueued (the `sync` execution mode), and whether the scenario's own kernels are launched with programmatic
//! dependent launch (`--pdl`; common/launch.hpp).
struct launch_ctx {
  cudaStream_t stream = nullptr; //!< stream every call goes to
  bool sync_each = false;        //!< true: cudaStreamSynchronize after every call
  //! true: the scenario's own kernels (those that call scenarios::begin_dependent() first, common/pdl.cuh) are
  //! launched with launch_config::programmatic (`cudaLaunchAttributeProgrammaticStreamSerialization`): on a stream
  //! each may start while the kernel before it finishes, and stream capture records a programmatic edge from the
  //! kernel before it. Library calls (cuBLAS, cuSPARSE) are not affected.
  bool programmatic = false;

  //! To be called after each enqueued kernel or library call; synchronises when `sync_each`.
  //! \throws conveyor::cuda_error naming `what` when the synchronisation reports an error.
  void after(std::string_view what) const {
    if (sync_each) check(cudaStreamSynchronize(stream), std::string("cudaStreamSynchronize after ").append(what));
  }
};

} // namespace conveyor::scenarios
