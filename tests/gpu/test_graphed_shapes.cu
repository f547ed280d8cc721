// GPU tests of shapes that churn in conveyor::graphed: two batch_size dimensions, each padded by its own rule (rows by
// buckets, columns to a multiple of 64 with a limit), bitwise equal to the exact-size eager run, sizes no rule pads
// run eagerly with the reason, prepare captures the combinations of the bucket lists; the churn guard runs a callable
// that keeps capturing new shapes eagerly (results equal to eager all along), then resumes graphing once the shape
// settles, with the numbers in the statistics and report(). Each test skips without a CUDA device.
#include "gpu/gpu_test_util.hpp"
#include "support/gpu.hpp"

#include <conveyor/conveyor.hpp>

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace {

using conveyor::batch_size;
using conveyor::test::all_equal;
using conveyor::test::device_array;
using conveyor::test::random_floats;

constexpr std::size_t max_rows = 40;
constexpr std::size_t max_cols = 320;

// out[r][c] = 2 in[r][c] + r - c for r < rows, c < cols (row pitch max_cols); the grid covers the padded sizes.
__global__ void affine_2d(unsigned rows, unsigned cols, const float* in, float* out) {
  const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols)
    out[r * max_cols + c] = 2.0F * in[r * max_cols + c] + static_cast<float>(r) - static_cast<float>(c);
}

// out[i] = 3 i + n for i < n.
__global__ void fill_affine(int n, int* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 3 * i + n;
}

// The callable: launched over the padded sizes, masked by the real ones.
void step_2d(const conveyor::stream& s, batch_size rows, batch_size cols, const float* in, float* out) {
  const dim3 block(16, 16);
  const dim3 grid(static_cast<unsigned>((cols.padded + 15) / 16), static_cast<unsigned>((rows.padded + 15) / 16));
  affine_2d<<<grid, block, 0, s.get()>>>(static_cast<unsigned>(rows.real), static_cast<unsigned>(cols.real), in, out);
  conveyor::check_launch("affine_2d");
}

conveyor::graphed_options two_dimensions() {
  conveyor::graphed_options o;
  o.warmup_calls = 0;
  o.dimensions = {{0, conveyor::padding_rule{.buckets = {8, 16, 32}}},
                  {1, conveyor::padding_rule{.multiple = 64, .limit = 256}}};
  return o;
}

bool has_reason(const std::deque<std::string>& reasons, const std::string& part) {
  for (const auto& r : reasons)
    if (r.find(part) != std::string::npos) return true;
  return false;
}

TEST(GraphedShapes, TwoDimensionsPadByTheirOwnRulesAndMatchEager) {
  CONVEYOR_REQUIRE_GPU();
  const auto input = random_floats(max_rows * max_cols, 2701);
  device_array<float> in(input);
  device_array<float> out(max_rows * max_cols);
  device_array<float> want(max_rows * max_cols);
  conveyor::stream s;
  conveyor::graphed step(step_2d, two_dimensions());
  const std::vector<std::pair<std::size_t, std::size_t>> calls{{5, 100}, {7, 100}, {20, 60}, {5, 100},
                                                               {3, 300}, {40, 10}, {16, 128}};
  for (const auto& [rows, cols] : calls) {
    CONVEYOR_CHECK(cudaMemsetAsync(out.get(), 0x7F, out.bytes(), s.get())); // a finite sentinel
    CONVEYOR_CHECK(cudaMemsetAsync(want.get(), 0x7F, want.bytes(), s.get()));
    step(s, batch_size{rows}, batch_size{cols}, in.get(), out.get());
    step_2d(s, batch_size{rows, rows}, batch_size{cols, cols}, in.get(), want.get()); // eager, exact sizes
    s.synchronize();
    EXPECT_TRUE(all_equal(out.download(), want.download())) << rows << " x " << cols;
  }
  const auto& st = step.statistics();
  EXPECT_EQ(st.instantiations, 3U) << step.report(); // (8, 128), (32, 64), (16, 128); real sizes update in place
  EXPECT_EQ(st.eager_fallbacks, 2U) << step.report();
  EXPECT_TRUE(has_reason(step.reasons(), "argument 1: size 300 above the limit 256: ran eagerly")) << step.report();
  EXPECT_TRUE(has_reason(step.reasons(), "argument 0: size 40 above the largest bucket 32: ran eagerly"))
      << step.report();
  EXPECT_EQ(st.whole_graph_updates, 2U) << step.report(); // (7, 100) and (5, 100) again: another real size
  EXPECT_EQ(step.cached_graphs(), 3U);
}

TEST(GraphedShapes, PrepareCapturesEveryCombinationOfTheBucketLists) {
  CONVEYOR_REQUIRE_GPU();
  const auto input = random_floats(max_rows * max_cols, 2702);
  device_array<float> in(input);
  device_array<float> out(max_rows * max_cols);
  device_array<float> want(max_rows * max_cols);
  conveyor::stream s;
  conveyor::graphed step(step_2d, two_dimensions());
  step.prepare(s, batch_size{1}, batch_size{100}, in.get(), out.get()); // rows 32, 16, 8 × columns 128
  s.synchronize();
  EXPECT_EQ(step.cached_graphs(), 3U);
  EXPECT_EQ(step.statistics().instantiations, 3U);
  EXPECT_EQ(step.statistics().calls, 0U);
  CONVEYOR_CHECK(cudaMemsetAsync(out.get(), 0x7F, out.bytes(), s.get()));
  CONVEYOR_CHECK(cudaMemsetAsync(want.get(), 0x7F, want.bytes(), s.get()));
  step(s, batch_size{16}, batch_size{128}, in.get(), out.get()); // a prepared shape and binding: replayed
  step_2d(s, batch_size{16, 16}, batch_size{128, 128}, in.get(), want.get());
  s.synchronize();
  EXPECT_TRUE(all_equal(out.download(), want.download()));
  EXPECT_EQ(step.statistics().replays, 1U);
  EXPECT_EQ(step.statistics().captures, 3U);
}

TEST(GraphedShapes, ChurnGuardRunsEagerlyThenResumesOnceTheShapeSettles) {
  CONVEYOR_REQUIRE_GPU();
  constexpr int width = 64;
  device_array<int> out(width);
  device_array<int> want(width);
  conveyor::stream s;
  const auto fill = [](const conveyor::stream& cs, int n, int* dst) {
    fill_affine<<<1, width, 0, cs.get()>>>(n, dst);
    conveyor::check_launch("fill_affine");
  };
  conveyor::graphed_options o;
  o.warmup_calls = 0;
  o.churn = {.max_records = 3, .window = 20, .settle_calls = 3};
  conveyor::graphed step(fill, o);
  const std::vector<int> sizes{1, 2, 3, 4, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6};
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    CONVEYOR_CHECK(cudaMemsetAsync(out.get(), 0xFF, out.bytes(), s.get()));
    CONVEYOR_CHECK(cudaMemsetAsync(want.get(), 0xFF, want.bytes(), s.get()));
    step(s, sizes[k], out.get());
    fill(s, sizes[k], want.get());
    s.synchronize();
    EXPECT_TRUE(all_equal(out.download(), want.download())) << "call " << k + 1;
  }
  const auto& st = step.statistics();
  EXPECT_EQ(st.calls, 14U);
  EXPECT_EQ(st.guard_trips, 1U) << step.report();
  EXPECT_EQ(st.guarded_calls, 5U) << step.report(); // calls 4 to 8
  EXPECT_EQ(st.guard_resumes, 1U) << step.report(); // at call 9
  EXPECT_FALSE(st.guard_engaged);
  EXPECT_EQ(st.captures, 4U) << step.report(); // shapes 1, 2, 3, then 6 once settled
  EXPECT_EQ(st.replays, 9U) << step.report();  // 4 first launches and 5 replays of shape 6
  const std::string report = step.report("fill");
  EXPECT_NE(report.find("engaged 1 time(s), 5 call(s) run eagerly, resumed 1 time(s); graphing now"), std::string::npos)
      << report;
  EXPECT_TRUE(has_reason(step.reasons(), "churn guard: 4 captures and re-captures in the last 20 calls")) << report;
}

} // namespace
