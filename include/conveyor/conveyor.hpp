#pragma once
//! \file conveyor.hpp
//! Umbrella header: everything in Conveyor's public API.
//!
//! - runtime: stream, event, device selection            (conveyor/runtime/)
//! - define:  graph and its builder, node, capture       (conveyor/define/)
//! - execute: instantiate, graph_exec, update            (conveyor/execute/)
//! - observe: describe, statistics, DOT/JSON export      (conveyor/observe/)
//! - debug:   step-through replay, non-finite values     (conveyor/debug/)
//! - assembly line: graphed callables, hybrid pipelines  (conveyor/assembly/)

//! \namespace conveyor Conveyor's public API: graphs and their builder (`graph`,
//!            `node`), capture (`capture`, `capture_into`, `fork`, `join`), executable graphs
//!            (`instantiate`, `graph_exec`, `update`), exports (`describe`, `to_dot`, `to_json`),
//!            the assembly line (`graphed`), graph files (`save`, `load`), and the runtime
//!            (`stream`, `event`). Functions declared in namespace conveyor::detail are the
//!            library's own.

#include "conveyor/error.hpp"
#include "conveyor/runtime/architecture.hpp"
#include "conveyor/runtime/device.hpp"
#include "conveyor/runtime/event.hpp"
#include "conveyor/runtime/graph_memory.hpp"
#include "conveyor/runtime/launch.hpp"
#include "conveyor/runtime/stream.hpp"
#include "conveyor/define/capture.hpp"
#include "conveyor/define/capture_nodes.hpp"
#include "conveyor/define/conditional.hpp"
#include "conveyor/define/description.hpp"
#include "conveyor/define/edge_type.hpp"
#include "conveyor/define/graph.hpp"
#include "conveyor/define/kernel_args.hpp"
#include "conveyor/define/node.hpp"
#include "conveyor/define/node_kind.hpp"
#include "conveyor/define/programmatic.hpp"
#include "conveyor/execute/device_graph.hpp"
#include "conveyor/execute/graph_diff.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/execute/instantiate_flags.hpp"
#include "conveyor/execute/update_result.hpp"
#include "conveyor/observe/describe.hpp"
#include "conveyor/observe/export.hpp"
#include "conveyor/debug/step.hpp"
#include "conveyor/assembly/graph_cache.hpp"
#include "conveyor/assembly/graphed.hpp"
#include "conveyor/assembly/graphed_types.hpp"
#include "conveyor/assembly/pipeline.hpp"
#include "conveyor/assembly/pipeline_schedule.hpp"
#include "conveyor/assembly/frame_pipeline.hpp"
#ifdef __CUDACC__
#include "conveyor/define/conditional_device.cuh" // conveyor::set_condition, for device code
// conveyor::device::wait_for_dependencies, launch_dependents
#include "conveyor/define/programmatic.cuh"
#endif
