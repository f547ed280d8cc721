#pragma once
//! \file graph_sink.hpp
//! Where a workload's graph step hands the executable graphs it launches: the profiling session (profiling.hpp) and
//! the graph saving of --save-graph (graph_saving.hpp).

#include <string>

namespace conveyor {
class graph_exec;
} // namespace conveyor

namespace conveyor::scenarios {

//! Takes the executable graphs a workload's graph step launches, each with its name. Not thread-safe.
class graph_sink {
public:
  virtual ~graph_sink() = default;
  //! `exec`, named `name`, right after it was instantiated (again after a re-instantiation), before its timed
  //! launches. \throws what the sink's work throws.
  virtual void watch(const graph_exec& exec, std::string name) = 0;
};

} // namespace conveyor::scenarios
