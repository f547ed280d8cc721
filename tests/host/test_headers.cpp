// Every public header compiles in a plain C++ translation unit (g++, no nvcc): the umbrella and each one alone.
#include <conveyor/conveyor.hpp>

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/assembly/graph_cache.hpp>
#include <conveyor/assembly/graphed_types.hpp>
#include <conveyor/assembly/pipeline.hpp>
#include <conveyor/assembly/pipeline_schedule.hpp>
#include <conveyor/assembly/frame_pipeline.hpp>
#include <conveyor/define/capture.hpp>
#include <conveyor/define/capture_nodes.hpp>
#include <conveyor/define/conditional.hpp>
#include <conveyor/define/description.hpp>
#include <conveyor/define/edge_type.hpp>
#include <conveyor/define/graph.hpp>
#include <conveyor/define/kernel_args.hpp>
#include <conveyor/define/node.hpp>
#include <conveyor/define/node_kind.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/error.hpp>
#include <conveyor/libraries/cublas.hpp>
#include <conveyor/libraries/cublaslt.hpp>
#include <conveyor/libraries/cufft.hpp>
#include <conveyor/libraries/cusparse.hpp>
#include <conveyor/libraries/workspace.hpp>
#include <conveyor/execute/graph_diff.hpp>
#include <conveyor/execute/device_graph.hpp>
#include <conveyor/execute/exec_facts.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/execute/instantiate_flags.hpp>
#include <conveyor/execute/update_result.hpp>
#include <conveyor/observe/describe.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/profile/doctor.hpp>
#include <conveyor/profile/profiler.hpp>
#include <conveyor/profile/report.hpp>
#include <conveyor/profile/trace.hpp>
#include <conveyor/runtime/architecture.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/graph_memory.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/launch.hpp>
#include <conveyor/runtime/stream.hpp>

#include <gtest/gtest.h>

namespace {

// A host-only use of the templates, so that they are instantiated by g++ too.
TEST(Headers, TemplatesInstantiateInPlainCxx) {
  conveyor::pipeline<int> p;
  p.eager_stage("count", [](const conveyor::stream&, int) {});
  EXPECT_EQ(p.size(), 1U);
  EXPECT_EQ(p.statistics(0), nullptr);
  EXPECT_THROW((void)p.statistics(1), std::out_of_range);
  EXPECT_EQ(conveyor::to_string(conveyor::node_kind::child_graph), "child_graph");
}

} // namespace
