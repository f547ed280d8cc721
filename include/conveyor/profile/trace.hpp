#pragma once
//! \file trace.hpp
//! What the profiler collects, as plain values: GPU activity records (CUPTI Activity API: kernels,
//! copies, memsets), the host API calls that enqueued them, the steps the user marked and the
//! executable graphs it was told about. The analysis (report.hpp) and the exports read only these
//! values, so they are testable without a GPU.

#include "conveyor/define/description.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::profile {

//! What a GPU activity record measured.
enum class activity_kind : std::uint8_t {
  kernel, //!< a kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
  memcpy, //!< a copy (CUPTI_ACTIVITY_KIND_MEMCPY)
  memset, //!< a memset (CUPTI_ACTIVITY_KIND_MEMSET)
};

//! "kernel", "memcpy" or "memset".
[[nodiscard]] const char* to_string(activity_kind k) noexcept;

//! One piece of GPU work as CUPTI recorded it. Timestamps are CUPTI's (ns, one clock for host and
//! GPU: `cuptiGetTimestamp`). A plain value.
struct activity {
  activity_kind kind = activity_kind::kernel; //!< what ran
  std::uint64_t start_ns = 0;                 //!< GPU start, ns
  std::uint64_t end_ns = 0;                   //!< GPU end, ns (>= start_ns)
  std::uint32_t device = 0;                   //!< CUDA device ordinal
  //! CUPTI stream id (graph nodes run on streams of the graph's own)
  std::uint32_t stream = 0;
  //! CUPTI correlation id of the API call that enqueued it; 0 for
  std::uint32_t correlation = 0;
  // !< work a conditional node's body ran (CUPTI gives
  // none)
  //! CUPTI id of the executable graph that ran it (graphId); 0: eager
  std::uint32_t exec_id = 0;
  //! CUPTI id of the executable graph's node (graphNodeId); 0: eager
  std::uint64_t node_id = 0;
  //! kernel: the function's (demangled) name; else "memcpy HtoD" etc.
  std::string name;
  std::array<unsigned, 3> grid{0, 0, 0};  //!< kernel: blocks per grid
  std::array<unsigned, 3> block{0, 0, 0}; //!< kernel: threads per block
  std::uint64_t bytes = 0;                //!< memcpy/memset: bytes moved or set
  //! memcpy: "HtoD", "DtoH", "DtoD", "HtoH", "PtoP" or "other"
  std::string copy_kind;
  //! id of the step (step_info::id) whose API call enqueued it; 0: none
  std::uint64_t step = 0;
};

//! A host API call that enqueued GPU work (a kernel launch, copy, memset or graph launch), as CUPTI
//! recorded it. A plain value.
struct host_call {
  std::uint32_t correlation = 0; //!< matches activity::correlation
  std::uint64_t start_ns = 0;    //!< host start, ns (CUPTI clock)
  std::uint64_t end_ns = 0;      //!< host end, ns
  std::string name;              //!< e.g. "cudaGraphLaunch", "cudaLaunchKernel", "cuLaunchKernel"
  std::uint64_t step = 0;        //!< step_info::id it was called in; 0: none
  bool graph_launch = false;     //!< true for cudaGraphLaunch / cuGraphLaunch
};

//! A step the user marked (profiler::step): the GPU work enqueued by the calling thread between its
//! begin and end. Steps of one `track` are one way of running the same work ("sync", "stream",
//! "graph"). A plain value.
struct step_info {
  std::uint64_t id = 0;            //!< 1, 2, ... in the order steps began
  std::string track;               //!< e.g. the execution mode
  std::uint64_t host_begin_ns = 0; //!< host time the step began (CUPTI clock)
  std::uint64_t host_end_ns = 0;   //!< host time it ended
};

//! An executable graph the profiler was told about (profiler::watch): its CUPTI id, a name, and the
//! description of the graph it runs (describe(const graph_exec&)), whose nodes the activity records
//! are attributed to. A plain value.
struct watched_graph {
  //! CUPTI id of the executable graph (`cuptiGetGraphExecId`)
  std::uint32_t exec_id = 0;
  std::string name;        //!< the user's name for it
  graph_description graph; //!< its nodes, edges and nested bodies
  //! instantiated before the process's first profiler started (CUPTI
  bool instantiated_before_profiling = false;
  // !< initialised): CUPTI then misses WHILE iterations
  // after the first !< (measured: CUDA 13.0, H200);
  // analyze() notes it
};

//! Everything a profiler collected. A plain value; analyze() (report.hpp) turns it into a report.
struct trace {
  std::vector<activity> activities;  //!< GPU work, in the order CUPTI delivered it
  std::vector<host_call> host_calls; //!< host calls that enqueued work
  std::vector<step_info> steps;      //!< marked steps, by id
  std::vector<watched_graph> graphs; //!< executable graphs with descriptions
  //! records dropped (CUPTI's buffers full, or beyond profiler_options::max_records): the report
  //! says so
  std::uint64_t dropped_records = 0;
  std::string device_name; //!< e.g. "NVIDIA H200"
  //! Graph launches ran step by step (CONVEYOR_STEP_THROUGH was set: conveyor::step_through): each
  //! node was a graph of its own, so the report's numbers are a debugging run's, and its records
  //! belong to no watched graph.
  bool step_through = false;
};

} // namespace conveyor::profile
