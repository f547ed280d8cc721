#pragma once
//! \file edge_type.hpp
//! conveyor::edge_type: what a dependency (edge) waits for — the whole predecessor (CUDA's
//! default), or, between kernel nodes, only its programmatic trigger or its launch (programmatic
//! dependent launch, CUDA Programming Guide "Programmatic Dependent Launch and Synchronization";
//! `cudaGraphEdgeData`). A plain value.

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <optional>
#include <string_view>

namespace conveyor {

//! The type of a dependency (edge) a → b. A programmatic or launch-completion edge lets kernel b
//! begin while kernel a is still running: b must call conveyor::device::wait_for_dependencies()
//! (`cudaGridDependencySynchronize`, conveyor/define/programmatic.cuh) before it reads what a
//! writes, and that call returns only once a has completed and flushed its memory. Both ends must
//! be kernel nodes of one device.
enum class edge_type : unsigned char {
  //! b starts after a has completed (`cudaGraphDependencyTypeDefault`, port
  //! `cudaGraphKernelNodePortDefault`).
  full,
  //! b may start once every block of a has called conveyor::device::launch_dependents()
  //! (`cudaTriggerProgrammaticLaunchCompletion`) or exited (`cudaGraphDependencyTypeProgrammatic`,
  //! port `cudaGraphKernelNodePortProgrammatic`); what stream capture makes of a launch with
  //! launch_config::programmatic.
  programmatic,
  //! b may start once every block of a has begun executing (`cudaGraphDependencyTypeProgrammatic`,
  //! port `cudaGraphKernelNodePortLaunchCompletion`).
  launch_completion,
};

//! "full", "programmatic" or "launch_completion". Never throws.
[[nodiscard]] constexpr std::string_view to_string(edge_type type) noexcept {
  switch (type) {
  case edge_type::full: return "full";
  case edge_type::programmatic: return "programmatic";
  case edge_type::launch_completion: return "launch_completion";
  }
  return "full";
}

//! The `cudaGraphEdgeData` CUDA takes for an edge of `type` (ports and dependency type). Never
//! throws.
[[nodiscard]] constexpr cudaGraphEdgeData to_edge_data(edge_type type) noexcept {
  cudaGraphEdgeData data{};
  switch (type) {
  case edge_type::full: break;
  case edge_type::programmatic:
    data.from_port = cudaGraphKernelNodePortProgrammatic;
    data.type = cudaGraphDependencyTypeProgrammatic;
    break;
  case edge_type::launch_completion:
    data.from_port = cudaGraphKernelNodePortLaunchCompletion;
    data.type = cudaGraphDependencyTypeProgrammatic;
    break;
  }
  return data;
}

//! The edge type of CUDA's edge data, or nullopt for a combination Conveyor does not name (another
//! port, a to_port other than the default). Never throws.
[[nodiscard]] constexpr std::optional<edge_type>
from_edge_data(const cudaGraphEdgeData& data) noexcept {
  if (data.to_port != 0) return std::nullopt;
  if (data.type == cudaGraphDependencyTypeDefault &&
      data.from_port == cudaGraphKernelNodePortDefault)
    return edge_type::full;
  if (data.type == cudaGraphDependencyTypeProgrammatic &&
      data.from_port == cudaGraphKernelNodePortProgrammatic)
    return edge_type::programmatic;
  if (data.type == cudaGraphDependencyTypeProgrammatic &&
      data.from_port == cudaGraphKernelNodePortLaunchCompletion)
    return edge_type::launch_completion;
  return std::nullopt;
}

} // namespace conveyor
