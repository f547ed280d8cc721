#pragma once
//! \file exec_facts.hpp
//! What an executable graph's history says about how it is used (graph_exec::facts()): flags,
//! uploads, launches and the streams they went to. The tuning doctor reads it. A plain value.

#include "conveyor/cxx20.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor {

//! How an executable graph was instantiated and has been used so far. A plain value.
struct exec_facts {
  //! instantiated with instantiate_flags::auto_free_on_launch
  bool auto_free_on_launch = false;
  //! instantiated with instantiate_flags::device_launch
  bool device_launch = false;
  //! instantiated with instantiate_flags::use_node_priority
  bool use_node_priority = false;
  //! upload() was called, or instantiated with instantiate_flags::upload
  bool uploaded = false;
  bool launched = false; //!< launch() was called at least once
  //! the first launch came before any upload: it paid for the upload
  bool first_launch_before_upload = false;
  //! a launch went to the legacy default stream (stream handle 0 or
  bool launched_on_legacy_stream = false;
  // !< cudaStreamLegacy), which serialises it with
  // all blocking streams
  //! graph_exec::unfreed_allocations() when already read, else empty
  std::vector<std::string> unfreed_allocations;
  //! true when unfreed_allocations was read (it is complete)
  bool allocations_read = false;
  //! the CUDA error name of the last launch call that failed, or empty
  std::string launch_error;
  //! launches run node by node (graph_exec::step_through_launches)
  bool step_through = false;
  //! graphed made and launched it in one call (the first call of a shape): no upload could have
  //! been done ahead (graphed::prepare instantiates and uploads ahead).
  bool launched_at_instantiation = false;
};

} // namespace conveyor
