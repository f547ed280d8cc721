// Host-only tests of the graph debugger's text (conveyor/debug/step.hpp): a node's one line, the failure messages
// (sticky errors say so and how to go on), marking the failing node in a description and its exports, and the
// sticky-error hint of cuda_error.
#include <conveyor/debug/step.hpp>
#include <conveyor/error.hpp>
#include <conveyor/observe/export.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace {

conveyor::step_node kernel_step() {
  conveyor::step_node s;
  s.order = 12;
  s.path = "node 5 'loop' (conditional) > iteration 3 > node 1 'spmv' (kernel)";
  s.position = {5, 0, 1};
  s.kind = conveyor::node_kind::kernel;
  s.label = "spmv";
  s.kernel_name = "csr_spmv";
  s.grid = {64, 1, 1};
  s.block = {256, 1, 1};
  s.shared_bytes = 1024;
  s.arguments = "0: 0x7f0000001000 (8 B), 1: 0x100 (4 B)";
  s.dependencies = {"node 0 'alpha' (kernel)"};
  return s;
}

TEST(StepText, ANodeIsOneLineWithItsShapeArgumentsAndDependencies) {
  const std::string t = kernel_step().text();
  EXPECT_EQ(t, "step 12: node 5 'loop' (conditional) > iteration 3 > node 1 'spmv' (kernel) (kernel csr_spmv, grid "
               "64x1x1 block 256x1x1, 1024 B dynamic shared memory, arguments 0: 0x7f0000001000 (8 B), 1: 0x100 "
               "(4 B)), after node 0 'alpha' (kernel)");
  conveyor::step_node root;
  root.path = "node 0 'upload' (memcpy)";
  root.kind = conveyor::node_kind::memcpy;
  EXPECT_EQ(root.text(), "step 0: node 0 'upload' (memcpy), no dependencies in its graph");
}

TEST(StepText, AStickyFailureSaysSoAndHowToFindTheFault) {
  const conveyor::step_failure sticky(kernel_step(), cudaErrorIllegalAddress, "cudaStreamSynchronize");
  EXPECT_TRUE(sticky.sticky());
  const std::string what = sticky.what();
  EXPECT_NE(what.find("cudaStreamSynchronize failed with cudaErrorIllegalAddress"), std::string::npos) << what;
  EXPECT_NE(what.find("sticky"), std::string::npos) << what;
  EXPECT_NE(what.find("fresh process"), std::string::npos) << what;
  EXPECT_NE(what.find("compute-sanitizer --tool memcheck"), std::string::npos) << what;
  const conveyor::step_failure plain(kernel_step(), cudaErrorInvalidValue, "cudaGraphInstantiate");
  EXPECT_FALSE(plain.sticky());
  EXPECT_EQ(std::string(plain.what()).find("sticky"), std::string::npos) << plain.what();
}

TEST(StepText, TheFirstNonFiniteValueNamesNodeBufferIndexAndValues) {
  const conveyor::nonfinite_error e(kernel_step(), "loss", 7, 2.5, std::numeric_limits<double>::infinity());
  EXPECT_EQ(e.index(), 7U);
  EXPECT_NE(std::string(e.what()).find("buffer 'loss' holds inf at index 7 (it held 2.5 before that node)"),
            std::string::npos)
      << e.what();
}

// The failing node marked in a description (inside a body): DOT draws it red with the text, JSON has "fault".
TEST(StepText, MarkFaultFindsTheNodeInsideBodies) {
  conveyor::graph_description d;
  d.nodes.resize(6);
  for (std::size_t i = 0; i < d.nodes.size(); ++i) d.nodes[i].id = i;
  d.nodes[5].kind = conveyor::node_kind::conditional;
  d.nodes[5].bodies.resize(1);
  d.nodes[5].bodies[0].nodes.resize(2);
  d.nodes[5].bodies[0].nodes[1].id = 1;
  d.nodes[5].bodies[0].nodes[1].label = "spmv";
  EXPECT_TRUE(conveyor::mark_fault(d, kernel_step(), "cudaErrorIllegalAddress"));
  EXPECT_EQ(d.nodes[5].bodies[0].nodes[1].fault, "cudaErrorIllegalAddress");
  const std::string dot = conveyor::to_dot(d);
  EXPECT_NE(dot.find("FAULT: cudaErrorIllegalAddress"), std::string::npos) << dot;
  EXPECT_NE(dot.find("penwidth=3"), std::string::npos) << dot;
  EXPECT_NE(conveyor::to_json(d).find("\"fault\": \"cudaErrorIllegalAddress\""), std::string::npos);
  conveyor::step_node nowhere = kernel_step();
  nowhere.position = {5, 1, 0}; // no body 1
  EXPECT_FALSE(conveyor::mark_fault(d, nowhere, "x"));
}

TEST(StepText, AStickyCudaErrorPointsAtStepThrough) {
  const conveyor::cuda_error e(cudaErrorIllegalAddress, "cudaStreamSynchronize");
  EXPECT_NE(std::string(e.what()).find("CONVEYOR_STEP_THROUGH=1"), std::string::npos) << e.what();
}

} // namespace
