//! \file studies.cpp
//! The study table: a new study is one entry here, beside its own files (study.hpp says what an entry holds).

#include "bench/studies.hpp"

#include "bench/pdl.hpp"
#include "bench/graph_files.hpp"
#include "bench/capture_checks.hpp"
#include "bench/graph_memory.hpp"
#include "bench/graphed_overhead.hpp"
#include "bench/graphed.hpp"
#include "bench/profile_overhead.hpp"
#include "bench/update_growth.hpp"

namespace conveyor::bench {

namespace {

study_option quick(std::string_view help) { return {study_option::kind::quick, help}; }

study_option steps(std::string_view help, std::size_t min, std::size_t max) {
  return {study_option::kind::steps, help, min, max};
}

} // namespace

const std::vector<study>& studies() {
  static const std::vector<study> table{
      {"graphed",
       "A graphed call whose pointer or scalar arguments change (reaching 1 or all N nodes): patched in place "
       "(rebind) against replay, full re-capture and eager, N = 10..10000; where a re-capture's time goes; "
       "graphed::prepare over many shapes; the first 100 calls of a mixed-shape stream, instantiating in the call or "
       "in the background",
       {quick("N = 10, 1000, 10000 and 11 timed calls (default N = 10, 100, 1000, 10000 and 21)")},
       "",
       measured(measure_graphed_study, format_graphed_study)},
      {"pdl",
       "A chain and fork/join stages of N tiny kernels as a plain graph, with programmatic edges, relaunched from the "
       "device, and both (µs per node), N = 12..10002",
       {quick("N = 120, 10002 and 5 blocks (default N = 12, 120, 1002, 10002 and 9)")},
       ": wall µs per kernel node (a block of steps, host launches and the final synchronisation included, divided "
       "by steps × N; median of blocks alternating between the variants). Every variant's result was checked first.",
       measured(measure_faster_study, format_faster)},
      {"profile",
       "The profiler's cost on a chain, four parallel chains and an eager stream of N tiny kernels (wall time per "
       "step off and on), N = 10..10000",
       {quick("N = 100, 10000 and 4 blocks (default N = 10, 100, 1000, 10000 and 8)")},
       ": wall µs per step (launches and the stream synchronisation, median of alternating blocks of 50 steps) "
       "without and with a conveyor::profile::profiler recording.",
       measured(measure_profile_overhead_study, format_profile_overhead)},
      {"update-growth",
       "The update loop for N steps (rebuild, graph_exec::update, launch): memory, callable states alive and time "
       "per step at 10 checkpoints",
       {steps("Updates to run (10 checkpoints)", 10, 100'000'000)},
       ": each step rebuilds the graph (a kernel whose pointer alternates, a host callable holding 4 KiB), calls "
       "graph_exec::update and launches it.",
       measured(measure_update_growth_study, format_update_growth)},
      {"graphed-overhead",
       "The per-call host overhead of conveyor::graphed over a bare graph_exec::launch",
       {},
       "",
       measured(measure_graphed_overhead_study, format_graphed_overhead)},
      {"graph-memory",
       "Device memory of N executable graphs of M nodes (N = 1..100, M = 10..1000), and of N graphs allocating 64 MiB "
       "each: one shared graph memory pool against private buffers, concurrent launches and trim",
       {quick("N = 1, 10 and M = 10, 100 (default N = 1, 10, 100 and M = 10, 100, 1000)")},
       ": device memory (cudaMemGetInfo, after synchronising and trimming the graph pool) and the graph allocator's "
       "accounting (cudaDeviceGetGraphMemAttribute).",
       measured(measure_graph_memory_study, format_graph_memory)},
      {"graph-files",
       "Graphs as files: file size per node, save time, and load + instantiate against capture + instantiate for "
       "chains of 10 to 10,000 kernels, the training step and 64 buckets of a graphed callable",
       {quick("chains of 10, 1000, 10,000 kernels and 16 buckets (default 10, 100, 1000, 10,000 and 64)")},
       ": kernels load from the images embedded in the file (recorded through CUPTI from the study's start).",
       measured(measure_graph_files_study, format_graph_files)},
      {"capture-checks",
       "What each check of a capture costs (capture_options): N tiny kernels and N host-to-device copies captured "
       "with no check, the default checks, and the defaults with the stream watch, N = 10..1000",
       {quick("N = 10, 1000 and 11 repetitions (default N = 10, 100, 1000 and 41)")},
       ": µs per capture (begin, N calls, end, the graph destroyed), median of repetitions alternating the three sets "
       "of checks; \"ns added a call\" is the difference from no check, divided by N.",
       measured(measure_capture_checks_study, format_capture_checks)},
  };
  return table;
}

} // namespace conveyor::bench
