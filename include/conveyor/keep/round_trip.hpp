#pragma once
//! \file round_trip.hpp
//! conveyor::check_round_trip: proves, for one graph and its buffers as they are now, that its
//! saved file loads into graphs that compute what it computes: the original launched once, then the
//! file loaded into the same buffers and into buffers load allocates (filled with the saved
//! contents), each launched once from the same state, and every buffer compared byte for byte.
//! Buffers are left as they were before the check.

#include "conveyor/define/graph.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/keep/kernel_registry.hpp"
#include "conveyor/keep/save.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace conveyor {

//! What check_round_trip compared. A plain value.
struct round_trip_report {
  //! buffers compared (graph allocations excluded: gone after a launch)
  std::size_t buffers = 0;
  std::size_t bytes = 0;        //!< bytes compared per load
  std::size_t differ_same = 0;  //!< bytes that differ, loaded into the same buffers
  std::size_t differ_other = 0; //!< bytes that differ, loaded into buffers load allocated
  std::string first_difference; //!< the first differing buffer and byte offset, or empty
  std::size_t file_bytes = 0;   //!< the file's size with contents
  //! True when both loads computed what the original did, bit for bit.
  [[nodiscard]] bool bitwise_equal() const noexcept {
    return differ_same == 0 && differ_other == 0;
  }
};

//! Saves `g` (with contents, `options` otherwise), then on `s`: launches an executable graph of `g`
//! once, restores every buffer, loads the file into the same buffers and launches it, restores,
//! loads it into new buffers and launches it, comparing every buffer with the original's after its
//! launch; restores every buffer at the end. `registry` resolves kernels the file has no image of
//! (may be null). Synchronises the device.
//! \throws save_error, load_error, cuda_error as save, load and launch do.
[[nodiscard]] round_trip_report check_round_trip(const graph_to_save& g,
                                                 const save_options& options, cudaStream_t s,
                                                 const kernel_registry* registry = nullptr);

} // namespace conveyor
