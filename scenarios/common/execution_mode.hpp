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

//! "sync", "stream" or "graph".
[[nodiscard]] std::string_view to_string(execution_mode m) noexcept;
//! Inverse of to_string.
//! \throws std::invalid_argument naming the text and the valid names for any other text.
[[nodiscard]] execution_mode parse_execution_mode(std::string_view text);

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
