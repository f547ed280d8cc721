// Second link of the filter scenario's chain of trust: the GPU chain (float) equals the CPU reference (double,
// itself equal to OpenCV: tests/host/test_filter_opencv.cpp) on real images, in the sync, stream and graph modes,
// and the three modes agree bitwise. Also: the graph's fork/join structure (describe/statistics and DOT), and that
// moving to the next frame updates only the nodes whose arguments change. Each test skips without a CUDA device or
// without the shared images.
//
// Float tolerances against the double reference, in grey levels (values in [0, 255]; gradients up to ~1442):
// 2e-3 for grey and the blurs, 1e-2 for Sobel and the magnitude. A float sum of n terms of size <= 255 errs by
// about n * 2^-24 * 255 (~2e-4 for the 13-tap blur); Sobel adds 8 such values with weights summing to 8 (~2e-3 at
// worst). The tolerances are ~10x those bounds, and OpenCV's own CV_32F chain is held to the same numbers on the
// same images by the host test. 8-bit outputs: sharpened within 1 grey level; an edge pixel may differ only where
// the reference magnitude lies within 0.05 of the threshold.

#include "support/filter_images.hpp"
#include "support/gpu.hpp"

#include "filter/benchmark.hpp"
#include "filter/chain.hpp"
#include "filter/cpu_reference.hpp"
#include "filter/image_io.hpp"
#include "filter/resize.hpp"

#include <conveyor/observe/describe.hpp>
#include <conveyor/observe/export.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace conveyor::filter;
using conveyor::test::shared_images;

namespace {

constexpr double tolerance_smooth = 2e-3;
constexpr double tolerance_gradient = 1e-2;
constexpr double edge_margin = 0.05;

image load(const char* file) { return read_image(shared_images() / file); }

//! Runs one frame in `mode` on a fresh chain and returns the chain (outputs in `slot`).
void run_frame(filter_chain& chain, const frame_slot& slot, execution_mode mode) {
  chain.enqueue(slot, mode);
  chain.synchronize();
}

void expect_matches_reference(filter_chain& chain, const frame_slot& slot, const chain_reference& ref,
                              const filter_params& p) {
  const struct {
    stage s;
    const char* name;
    const plane& expected;
    double tolerance;
  } stages[] = {{stage::grey, "grey", ref.grey, tolerance_smooth},
                {stage::blurred, "blurred", ref.blurred, tolerance_smooth},
                {stage::gradient_x, "sobel x", ref.gradient_x, tolerance_gradient},
                {stage::gradient_y, "sobel y", ref.gradient_y, tolerance_gradient},
                {stage::magnitude, "magnitude", ref.magnitude, tolerance_gradient},
                {stage::colour_blurred, "colour blurred", ref.colour_blurred, tolerance_smooth}};
  for (const auto& st : stages) {
    const auto d = max_abs_difference(chain.download(st.s), st.expected.values);
    EXPECT_LE(d.value, st.tolerance) << st.name << " at sample " << d.index;
    std::printf("  %-15s GPU float vs CPU double: max |difference| %.3g grey levels\n", st.name, d.value);
  }
  const output_check c = check_outputs(slot.edges_image(), slot.sharp_image(), ref, p.threshold, edge_margin);
  EXPECT_TRUE(c.ok()) << c.summary();
}

//! Node labels and labelled edges of a DOT export (top level).
struct dot_graph {
  std::map<std::string, std::string> label_of; // DOT id -> first line of its label
  std::set<std::pair<std::string, std::string>> edges;
};

dot_graph parse_dot(const std::string& dot) {
  dot_graph g;
  const std::regex node_line(R"re(^\s*(\w+) \[label="([^"\\]*))re");
  const std::regex edge_line(R"re(^\s*(\w+) -> (\w+);)re");
  std::istringstream in(dot);
  std::string line;
  std::vector<std::pair<std::string, std::string>> raw_edges;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, node_line)) g.label_of[m[1]] = m[2];
    else if (std::regex_search(line, m, edge_line)) raw_edges.emplace_back(m[1], m[2]);
  }
  for (const auto& [a, b] : raw_edges) g.edges.insert({g.label_of[a], g.label_of[b]});
  return g;
}

class Filter : public ::testing::Test {
protected:
  void SetUp() override {
    CONVEYOR_REQUIRE_GPU();
    CONVEYOR_REQUIRE_IMAGES();
  }
};

} // namespace

TEST_F(Filter, GpuChainEqualsCpuReferenceInEveryMode) {
  // astronaut: RGB 512x512; chelsea: 451x300 (partial blocks at the right and bottom); camera: grey as RGB.
  for (const char* file : {"astronaut.png", "chelsea.png", "camera.png"}) {
    SCOPED_TRACE(file);
    const image rgb = load(file);
    const filter_params p;
    const chain_reference ref = run_reference(rgb, p);
    frame_slot slot(rgb.width, rgb.height);
    slot.load(rgb);
    std::vector<std::uint64_t> hashes;
    for (const auto mode : all_execution_modes) {
      SCOPED_TRACE(std::string(to_string(mode)));
      filter_chain chain(rgb.width, rgb.height, p);
      std::fill(slot.edges(), slot.edges() + static_cast<std::size_t>(rgb.width) * rgb.height, 7);
      run_frame(chain, slot, mode);
      expect_matches_reference(chain, slot, ref, p);
      hashes.push_back(slot.output_hash());
    }
    EXPECT_EQ(hashes[0], hashes[1]) << "sync and stream outputs differ";
    EXPECT_EQ(hashes[0], hashes[2]) << "sync and graph outputs differ";
  }
}

TEST_F(Filter, GraphHasTheForkJoinStructure) {
  const image rgb = load("coffee.png");
  frame_slot slot(rgb.width, rgb.height);
  slot.load(rgb);
  filter_chain chain(rgb.width, rgb.height, filter_params{});
  EXPECT_EQ(chain.graph(), nullptr);
  run_frame(chain, slot, execution_mode::graph);
  ASSERT_NE(chain.graph(), nullptr);
  const conveyor::graph_description d = conveyor::describe(*chain.graph());
  const conveyor::graph_statistics s = conveyor::statistics(d);
  EXPECT_EQ(s.nodes, 13U);
  EXPECT_EQ(s.by_kind.at(conveyor::node_kind::kernel), 10U);
  EXPECT_EQ(s.by_kind.at(conveyor::node_kind::memcpy), 3U);
  EXPECT_GE(s.width, 3U) << "Sobel x, Sobel y and the unsharp mask run side by side";
  EXPECT_EQ(s.depth, 8U);
  EXPECT_EQ(s.edges, 13U);

  const dot_graph g = parse_dot(conveyor::to_dot(d, "filter"));
  EXPECT_EQ(g.label_of.size(), 13U);
  EXPECT_EQ(g.edges.size(), 13U);
  const std::pair<std::string, std::string> expected[] = {
      {"upload rgb8", "rgb8 to float"},
      {"rgb8 to float", "blur rows"},        // fork: edges branch
      {"rgb8 to float", "colour blur rows"}, // fork: colour branch
      {"blur columns", "sobel x"},           // fork: Sobel x ...
      {"blur columns", "sobel y"},           // ... and Sobel y
      {"sobel x", "magnitude"},              // join
      {"sobel y", "magnitude"},              // join
      {"magnitude", "threshold"},
      {"threshold", "download edges"},
      {"unsharp mask", "download sharpened"},
  };
  for (const auto& e : expected) EXPECT_TRUE(g.edges.count(e) == 1) << "missing edge " << e.first << " -> " << e.second;
}

TEST_F(Filter, NextFrameUpdatesOnlyTheNodesWhoseArgumentsChange) {
  // Two photographs of the same size: one graph, replayed.
  const image a = load("astronaut.png");
  const image b = load("camera.png");
  ASSERT_EQ(a.width, b.width);
  ASSERT_EQ(a.height, b.height);
  frame_slot slot_a(a.width, a.height), slot_b(b.width, b.height), check(b.width, b.height);
  slot_a.load(a);
  slot_b.load(b);
  check.load(b);
  filter_chain chain(a.width, a.height, filter_params{});
  filter_chain eager(a.width, a.height, filter_params{});

  run_frame(chain, slot_a, execution_mode::graph);
  EXPECT_TRUE(chain.last_graph_update().instantiated);
  run_frame(chain, slot_b, execution_mode::graph);
  EXPECT_FALSE(chain.last_graph_update().instantiated);
  EXPECT_EQ(chain.last_graph_update().nodes_updated, 3U);
  EXPECT_EQ(chain.last_graph_update().updated,
            (std::vector<std::string_view>{"upload rgb8", "download sharpened", "download edges"}));
  run_frame(eager, check, execution_mode::stream);
  EXPECT_EQ(slot_b.output_hash(), check.output_hash()) << "the updated graph computes frame b";
  run_frame(chain, slot_b, execution_mode::graph);
  EXPECT_EQ(chain.last_graph_update().nodes_updated, 0U) << "same frame again: nothing to update";

  // New parameters: only the kernels taking them are updated (set_kernel_args).
  filter_params p;
  p.threshold = 40.0;
  chain.set_params(p);
  eager.set_params(p);
  run_frame(chain, slot_b, execution_mode::graph);
  EXPECT_EQ(chain.last_graph_update().updated, std::vector<std::string_view>{"threshold"});
  run_frame(eager, check, execution_mode::stream);
  EXPECT_EQ(slot_b.output_hash(), check.output_hash());
  p.sigma = 2.5;
  chain.set_params(p);
  eager.set_params(p);
  run_frame(chain, slot_b, execution_mode::graph);
  EXPECT_EQ(chain.last_graph_update().updated, (std::vector<std::string_view>{"blur rows", "blur columns"}));
  run_frame(eager, check, execution_mode::stream);
  EXPECT_EQ(slot_b.output_hash(), check.output_hash());
  expect_matches_reference(chain, slot_b, run_reference(b, p), p);
  EXPECT_EQ(chain.instantiations(), 1U);
}

TEST_F(Filter, BenchmarkRunsEveryModeAndLogsTheGraphUpdates) {
  std::vector<image> frames;
  std::vector<std::string> names;
  for (const char* file : {"astronaut.png", "hubble_deep_field.jpg", "chelsea.png"}) {
    frames.push_back(resize_bilinear(load(file), 320, 200));
    names.emplace_back(file);
  }
  std::vector<frame_slot> slots;
  for (const auto& f : frames) {
    slots.emplace_back(f.width, f.height);
    slots.back().load(f);
  }
  filter_chain chain(320, 200, filter_params{});
  const std::vector<execution_mode> modes(all_execution_modes.begin(), all_execution_modes.end());
  const size_report r = run_benchmark(chain, slots, names, modes, timing_options{1, 3});
  ASSERT_EQ(r.modes.size(), 3U);
  EXPECT_TRUE(r.modes_agree());
  for (const auto& m : r.modes) EXPECT_GT(m.ms_per_frame, 0.0) << to_string(m.mode);
  EXPECT_DOUBLE_EQ(r.modes[2].nodes_updated_per_frame, 3.0) << "each frame has its own host buffers";
  ASSERT_EQ(r.graph_log.size(), 3U);
  EXPECT_NE(r.graph_log[0].find("instantiated"), std::string::npos) << r.graph_log[0];
  EXPECT_NE(r.graph_log[1].find("3 node(s) updated"), std::string::npos) << r.graph_log[1];
  EXPECT_EQ(r.instantiations, 1U);
  ASSERT_TRUE(r.stats.has_value());
  EXPECT_GE(r.stats->width, 3U);
  EXPECT_NE(r.dot.find("sobel y"), std::string::npos);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const output_check c =
        check_outputs(slots[i].edges_image(), slots[i].sharp_image(), run_reference(frames[i], filter_params{}),
                      filter_params{}.threshold, edge_margin);
    EXPECT_TRUE(c.ok()) << names[i] << ": " << c.summary();
  }
}

TEST_F(Filter, RejectsAFrameOfAnotherSize) {
  filter_chain chain(64, 32, filter_params{});
  frame_slot other(32, 64);
  EXPECT_THROW(chain.enqueue(other, execution_mode::stream), std::invalid_argument);
  EXPECT_THROW(filter_chain(0, 10, filter_params{}), std::invalid_argument);
  filter_params bad;
  bad.sigma = 50.0;
  EXPECT_THROW(filter_chain(16, 16, bad), std::invalid_argument);
}
