// conveyor::frame_pipeline on the GPU: pipelined results equal the unpipelined ones (depth 1) and a host computation
// bitwise, on random data, for every depth and lag set, over runs with prologue and epilogue, with a scratch buffer
// shared by the slots; results arrive in order; the step graphs have the branches the schedule says (depth 3: upload,
// compute and download independent); a second run reuses the executable graphs; misuse is refused with its reason.
// Then the filter scenario's pipelined mode: bitwise the graph mode's outputs on random frames (partial blocks) at
// depths 1 to 3, and on the shared photographs. Each test skips without a CUDA device (the photographs: without them).

#include "support/filter_images.hpp"
#include "support/gpu.hpp"
#include "gpu_test_util.hpp"
#include "test_kernels.cuh"

#include "filter/benchmark.hpp"
#include "filter/chain.hpp"
#include "filter/image_io.hpp"
#include "filter/pipelined.hpp"
#include "filter/resize.hpp"

#include <conveyor/assembly/frame_pipeline.hpp>
#include <conveyor/define/graph.hpp>
#include <conveyor/runtime/stream.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using conveyor::frame_pipeline;
using conveyor::frame_pipeline_options;
using conveyor::pipeline_lags;
using conveyor::pipeline_slot;
using conveyor::pipeline_stage;
using conveyor::pipeline_step;
using conveyor::test::pinned_array;
namespace k = conveyor::test::kernels;

constexpr int n = 1 << 18; // floats per buffer: 1 MiB, so copies and kernels take long enough to overlap

//! The host side of one item: two inputs, two outputs, page-locked.
struct item_buffers {
  pinned_array<float> in0{n}, in1{n}, out0{n}, out1{n};
  explicit item_buffers(std::mt19937& rng) {
    std::uniform_real_distribution<float> d(-100.0f, 100.0f);
    for (int i = 0; i < n; ++i) {
      in0[i] = d(rng);
      in1[i] = d(rng);
      out0[i] = out1[i] = -1.0f;
    }
  }
  //! out0 = (in0 + 0.5) + in1 and out1 = (in0 + 0.5) + 2 at element i, as the GPU computes them.
  [[nodiscard]] bool correct() const {
    for (int i = 0; i < n; ++i) {
      const float s = in0[i] + 0.5f;
      if (out0[i] != s + in1[i] || out1[i] != s + 2.0f) return false;
    }
    return true;
  }
};

//! The compute stage: scratch = in0 + 0.5 (one scratch buffer shared by every slot), then out0 = scratch + in1 and
//! out1 = scratch + 2 on two branches.
struct compute_stage {
  conveyor::test::device_array<float> scratch{static_cast<std::size_t>(n)};
  void operator()(conveyor::graph& g, const pipeline_slot& s) const {
    const conveyor::launch_config cfg{dim3((n + 255) / 256), dim3(256)};
    auto a = g.kernel(cfg, k::copy_plus, n, s.input<const float>(0), 0.5f, scratch.get());
    (void)g.kernel({a}, cfg, k::add_vectors, n, scratch.get(), s.input<const float>(1), s.output<float>(0));
    (void)g.kernel({a}, cfg, k::copy_plus, n, scratch.get(), 2.0f, s.output<float>(1));
  }
};

std::unique_ptr<frame_pipeline> make_pipeline(const compute_stage& c, const conveyor::stream& s, std::size_t depth,
                                              std::optional<pipeline_lags> lags = std::nullopt) {
  frame_pipeline_options o;
  o.depth = depth;
  o.lags = lags;
  const std::size_t bytes = n * sizeof(float);
  return std::make_unique<frame_pipeline>(
      std::vector<std::size_t>{bytes, bytes}, std::vector<std::size_t>{bytes, bytes},
      [&c](conveyor::graph& g, const pipeline_slot& sl) { c(g, sl); }, s, o);
}

std::optional<std::size_t> push(frame_pipeline& p, item_buffers& b) {
  return p.push({b.in0.get(), b.in1.get()}, {b.out0.get(), b.out1.get()});
}

class FramePipeline : public ::testing::Test {
protected:
  void SetUp() override { CONVEYOR_REQUIRE_GPU(); }
};

TEST_F(FramePipeline, EqualsUnpipelinedAndHostForEveryDepthAndLagSet) {
  std::mt19937 rng(15);
  constexpr std::size_t items = 7;
  std::vector<std::unique_ptr<item_buffers>> bufs;
  for (std::size_t i = 0; i < items; ++i) bufs.push_back(std::make_unique<item_buffers>(rng));
  compute_stage c;
  conveyor::stream s;
  // Depth 1 (no overlap) first: the reference outputs.
  std::vector<std::vector<float>> reference;
  {
    auto p = make_pipeline(c, s, 1);
    for (std::size_t i = 0; i < items; ++i) EXPECT_EQ(push(*p, *bufs[i]), std::optional<std::size_t>(i));
    EXPECT_EQ(p->drain(), 0U);
    s.synchronize();
    for (auto& b : bufs) {
      ASSERT_TRUE(b->correct()) << "depth 1 differs from the host computation";
      reference.push_back(b->out0.to_vector());
      reference.push_back(b->out1.to_vector());
    }
  }
  const struct {
    std::size_t depth;
    std::optional<pipeline_lags> lags;
  } cases[] = {{2, std::nullopt}, {3, std::nullopt}, {2, pipeline_lags{0, 0, 1}}};
  for (const auto& cs : cases) {
    for (const std::size_t run_items : {std::size_t{1}, std::size_t{2}, items}) { // shorter than, equal to, over depth
      SCOPED_TRACE("depth " + std::to_string(cs.depth) + (cs.lags ? " lags {0,0,1}" : "") + ", " +
                   std::to_string(run_items) + " items");
      for (auto& b : bufs) {
        std::fill(b->out0.get(), b->out0.get() + n, -1.0f);
        std::fill(b->out1.get(), b->out1.get() + n, -1.0f);
      }
      auto p = make_pipeline(c, s, cs.depth, cs.lags);
      std::vector<std::size_t> finished;
      for (std::size_t i = 0; i < run_items; ++i)
        if (const auto f = push(*p, *bufs[i])) finished.push_back(*f);
      EXPECT_EQ(p->in_flight(), std::min(run_items, p->depth() - 1));
      const std::size_t drained = p->drain();
      EXPECT_EQ(drained, p->depth() - 1);                                              // the epilogue
      for (std::size_t i = finished.size(); i < run_items; ++i) finished.push_back(i); // drain finishes the rest
      for (std::size_t i = 0; i < run_items; ++i) EXPECT_EQ(finished[i], i) << "results out of order";
      EXPECT_EQ(p->completed(), run_items);
      EXPECT_EQ(p->statistics().steps, run_items + p->depth() - 1);
      p->wait_for(run_items - 1);
      for (std::size_t i = 0; i < run_items; ++i) {
        EXPECT_EQ(std::memcmp(bufs[i]->out0.get(), reference[2 * i].data(), n * sizeof(float)), 0) << "item " << i;
        EXPECT_EQ(std::memcmp(bufs[i]->out1.get(), reference[2 * i + 1].data(), n * sizeof(float)), 0) << "item " << i;
      }
    }
  }
}

// One pipeline, many runs: every pushed item is delivered exactly once, in order, for runs of every length after an
// earlier run of any length (depth 3; 7 then 1 was the case that left the item undelivered).
TEST_F(FramePipeline, EveryRunLengthAfterEveryEarlierRunDeliversEveryItem) {
  std::mt19937 rng(31);
  constexpr std::size_t most = 7;
  std::vector<std::unique_ptr<item_buffers>> bufs;
  for (std::size_t i = 0; i < 2 * most; ++i) bufs.push_back(std::make_unique<item_buffers>(rng));
  compute_stage c;
  conveyor::stream s;
  for (const std::size_t depth : {std::size_t{2}, std::size_t{3}}) {
    auto p = make_pipeline(c, s, depth);
    for (std::size_t first = 1; first <= most; ++first)
      for (std::size_t second = 1; second <= most; ++second) {
        SCOPED_TRACE("depth " + std::to_string(depth) + ": a run of " + std::to_string(second) + " after a run of " +
                     std::to_string(first));
        for (const auto [run, base] : {std::pair{first, std::size_t{0}}, std::pair{second, most}}) {
          // The second run uses other buffers than the first, so a stale pointer shows.
          for (std::size_t i = 0; i < run; ++i) {
            std::fill(bufs[base + i]->out0.get(), bufs[base + i]->out0.get() + n, -1.0f);
            std::fill(bufs[base + i]->out1.get(), bufs[base + i]->out1.get() + n, -1.0f);
          }
          std::vector<std::size_t> order;
          for (std::size_t i = 0; i < run; ++i)
            if (const auto f = push(*p, *bufs[base + i])) order.push_back(*f);
          (void)p->drain();
          for (std::size_t i = order.size(); i < run; ++i) order.push_back(i);
          ASSERT_EQ(p->completed(), run);
          p->wait_for(run - 1);
          for (std::size_t i = 0; i < run; ++i) {
            EXPECT_EQ(order[i], i);
            ASSERT_TRUE(bufs[base + i]->correct()) << "item " << i << " of the run was not delivered";
          }
        }
      }
  }
}

// A refused push changes nothing, and a pipeline destroyed while an exception unwinds with items in flight waits for
// them (their host buffers outlive it) and does not crash.
TEST_F(FramePipeline, ARefusedPushChangesNothingAndAnExceptionLeavesNothingInFlight) {
  std::mt19937 rng(33);
  std::vector<std::unique_ptr<item_buffers>> bufs;
  for (int i = 0; i < 4; ++i) bufs.push_back(std::make_unique<item_buffers>(rng));
  std::vector<float> pageable(n);
  compute_stage c;
  conveyor::stream s;
  {
    auto p = make_pipeline(c, s, 3);
    (void)push(*p, *bufs[0]);
    EXPECT_THROW((void)p->push({pageable.data(), bufs[1]->in1.get()}, {bufs[1]->out0.get(), bufs[1]->out1.get()}),
                 std::invalid_argument);
    EXPECT_EQ(p->pushed(), 1U);
    (void)push(*p, *bufs[1]);
    (void)p->drain();
    p->wait_for(1);
    EXPECT_TRUE(bufs[0]->correct());
    EXPECT_TRUE(bufs[1]->correct());
  }
  try {
    auto p = make_pipeline(c, s, 3);
    (void)push(*p, *bufs[2]);
    (void)push(*p, *bufs[3]);
    throw std::runtime_error("the caller fails with two items in flight");
  } catch (const std::runtime_error&) {}
  s.synchronize();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(FramePipeline, ResultsArriveInOrderWhileStreaming) {
  std::mt19937 rng(7);
  std::vector<std::unique_ptr<item_buffers>> bufs;
  for (int i = 0; i < 9; ++i) bufs.push_back(std::make_unique<item_buffers>(rng));
  compute_stage c;
  conveyor::stream s;
  auto p = make_pipeline(c, s, 3);
  std::size_t expected = 0;
  for (auto& b : bufs) {
    if (const auto f = push(*p, *b)) {
      EXPECT_EQ(*f, expected);
      p->wait_for(*f); // item f is complete now, whatever is still in flight
      EXPECT_TRUE(bufs[*f]->correct()) << "item " << *f << " not complete after wait_for";
      ++expected;
    }
  }
  EXPECT_EQ(expected, bufs.size() - 2); // depth 3: two still in flight
  EXPECT_THROW(p->wait_for(expected), std::logic_error);
  (void)p->drain();
  p->wait_for(bufs.size() - 1);
  for (auto& b : bufs) EXPECT_TRUE(b->correct());
}

// The pipeline's contract lets a caller free an item's buffers once the item is done. A new page-locked buffer may
// then come at a freed one's address: the copy nodes must be set for the new allocation, not kept because the address
// is equal. Every item is delivered exactly once, in order, and correct, whatever addresses the allocator returns.
TEST_F(FramePipeline, BuffersFreedAndReallocatedAtTheSameAddressAreDeliveredExactlyOnce) {
  std::mt19937 rng(11);
  compute_stage c;
  conveyor::stream s;
  auto p = make_pipeline(c, s, 2);
  constexpr std::size_t items = 24;
  std::vector<std::unique_ptr<item_buffers>> live(items);
  std::set<const void*> freed;
  std::size_t reused = 0;
  std::vector<std::size_t> delivered;
  auto finish = [&](std::size_t f) {
    p->wait_for(f);
    EXPECT_TRUE(live[f]->correct()) << "item " << f;
    delivered.push_back(f);
    for (const void* q : {static_cast<const void*>(live[f]->in0.get()), static_cast<const void*>(live[f]->out0.get())})
      freed.insert(q);
    live[f].reset(); // freed as soon as its item is done (cudaFreeHost)
  };
  for (std::size_t i = 0; i < items; ++i) {
    live[i] = std::make_unique<item_buffers>(rng);
    reused += freed.count(live[i]->in0.get()) + freed.count(live[i]->out0.get());
    if (const auto f = push(*p, *live[i])) finish(*f);
  }
  const std::size_t before_drain = delivered.size();
  (void)p->drain();
  for (std::size_t f = before_drain; f < items; ++f) finish(f);
  std::vector<std::size_t> in_order(items);
  std::iota(in_order.begin(), in_order.end(), 0);
  EXPECT_EQ(delivered, in_order);
  std::printf("[ pipeline ] %zu of %zu new buffers came at a freed buffer's address; %zu copy-node sets\n", reused,
              2 * items, p->statistics().nodes_updated);
}

TEST_F(FramePipeline, StepGraphsHaveTheScheduledBranchesAndAreReused) {
  std::mt19937 rng(3);
  std::vector<std::unique_ptr<item_buffers>> bufs;
  for (int i = 0; i < 11; ++i) bufs.push_back(std::make_unique<item_buffers>(rng));
  compute_stage c;
  conveyor::stream s;
  auto p = make_pipeline(c, s, 3);
  for (auto& b : bufs) (void)push(*p, *b);
  (void)p->drain();
  s.synchronize();
  // 11 items at depth 3: two prologue shapes, three steady-state phases, two epilogue shapes.
  EXPECT_EQ(p->statistics().instantiations, 7U);
  EXPECT_EQ(p->statistics().steps, 13U);
  // Steady state (step 4: upload 4 in slot 1, compute 3 in slot 0, download 2 in slot 2): 2 uploads, 1 compute,
  // 2 downloads and no edge: three independent branches.
  const pipeline_step steady = p->schedule().step(4, 5);
  const conveyor::graph* g = p->step_graph(steady);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->node_count(), 5U);
  EXPECT_EQ(g->edge_count(), 0U);
  // Prologue step 0: the uploads only.
  const conveyor::graph* first = p->step_graph(p->schedule().step(0, 1));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->node_count(), 2U);
  // A second run of the same length makes no new executable graph.
  for (auto& b : bufs) (void)push(*p, *b);
  (void)p->drain();
  s.synchronize();
  EXPECT_EQ(p->statistics().instantiations, 7U);
  for (auto& b : bufs) EXPECT_TRUE(b->correct());

  // Depth 2 ({0, 1, 1}): compute then downloads of one item: an edge to each download.
  auto p2 = make_pipeline(c, s, 2);
  for (int i = 0; i < 4; ++i) (void)push(*p2, *bufs[static_cast<std::size_t>(i)]);
  const conveyor::graph* g2 = p2->step_graph(p2->schedule().step(3, 4));
  ASSERT_NE(g2, nullptr);
  EXPECT_EQ(g2->node_count(), 5U);
  EXPECT_EQ(g2->edge_count(), 2U);
  (void)p2->drain();
  s.synchronize();
}

TEST_F(FramePipeline, RunAloneRunsOneStage) {
  std::mt19937 rng(5);
  item_buffers b(rng);
  compute_stage c;
  conveyor::stream s;
  auto p = make_pipeline(c, s, 2);
  const std::vector<const void*> in{b.in0.get(), b.in1.get()};
  const std::vector<void*> out{b.out0.get(), b.out1.get()};
  p->run_alone(pipeline_stage::upload, 1, in, {});
  p->run_alone(pipeline_stage::compute, 1, {}, {});
  p->run_alone(pipeline_stage::download, 1, {}, out);
  s.synchronize();
  EXPECT_TRUE(b.correct());
  EXPECT_EQ(p->statistics().alone, 3U);
  EXPECT_EQ(p->statistics().steps, 0U);
}

//! Runs `f`, expecting exception E whose message holds `text`.
template <class E, class F>
void expect_refused(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "not refused: expected '" << text << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST_F(FramePipeline, RefusesMisuseWithTheReason) {
  std::mt19937 rng(9);
  item_buffers b(rng);
  compute_stage c;
  conveyor::stream s;
  auto p = make_pipeline(c, s, 3);
  std::vector<float> pageable(n);
  conveyor::test::device_array<float> device(n);
  expect_refused<std::invalid_argument>(
      [&] {
        (void)p->push({b.in0.get()}, {b.out0.get(), b.out1.get()});
      },
      "frame pipeline: push: 1 input buffer(s) given, the pipeline has 2");
  expect_refused<std::invalid_argument>(
      [&] {
        (void)p->push({b.in0.get(), nullptr}, {b.out0.get(), b.out1.get()});
      },
      "frame pipeline: push: input buffer 1 is a null pointer");
  expect_refused<std::invalid_argument>(
      [&] {
        (void)p->push({b.in0.get(), b.in1.get()}, {pageable.data(), b.out1.get()});
      },
      "output buffer 0");
  expect_refused<std::invalid_argument>(
      [&] {
        (void)p->push({b.in0.get(), b.in1.get()}, {pageable.data(), b.out1.get()});
      },
      "is pageable host memory");
  expect_refused<std::invalid_argument>(
      [&] {
        (void)p->push({device.get(), b.in1.get()}, {b.out0.get(), b.out1.get()});
      },
      "is device memory");
  EXPECT_EQ(p->pushed(), 0U) << "a refused push must not count";
  expect_refused<std::logic_error>([&] { p->wait_for(0); }, "item 0 has not been downloaded yet");
  (void)push(*p, b);
  expect_refused<std::logic_error>([&] { p->run_alone(pipeline_stage::compute, 0, {}, {}); },
                                   "run_alone: 1 item(s) in flight; call drain() first");
  expect_refused<std::invalid_argument>([&] { p->run_alone(pipeline_stage::compute, 3, {}, {}); },
                                        "slot 3 out of range (depth 3)");
  (void)p->drain();
  s.synchronize();
  EXPECT_TRUE(b.correct()) << "the refused calls disturbed the run";
  expect_refused<std::out_of_range>([&] { (void)p->slot(3); }, "slot 3 out of range");

  const std::size_t bytes = n * sizeof(float);
  const auto builder = [&c](conveyor::graph& g, const pipeline_slot& sl) { c(g, sl); };
  frame_pipeline_options o;
  o.depth = 4;
  expect_refused<std::invalid_argument>([&] { frame_pipeline q({bytes}, {bytes}, builder, s, o); },
                                        "pipeline depth must be 1, 2 or 3");
  o.depth = 3;
  o.lags = pipeline_lags{0, 1, 1};
  expect_refused<std::invalid_argument>([&] { frame_pipeline q({bytes}, {bytes}, builder, s, o); },
                                        "lags {0, 1, 1} make a depth of 2, but the depth is 3");
  expect_refused<std::invalid_argument>(
      [&] {
        frame_pipeline q({bytes, 0}, {bytes}, builder, s);
      },
      "input buffer 1 has a size of 0 bytes");
  expect_refused<std::invalid_argument>([&] { frame_pipeline q({bytes}, {}, builder, s); },
                                        "needs at least one output buffer");
  expect_refused<std::invalid_argument>(
      [&] {
        frame_pipeline q(
            {bytes}, {bytes}, [](conveyor::graph&, const pipeline_slot&) {}, s);
      },
      "the compute builder added no node for slot 0");
}

// ---- the filter scenario's pipelined mode --------------------------------------------------------------------

using namespace conveyor::filter;

//! Runs graph mode over `slots` and returns the batch hash.
std::uint64_t graph_mode_hash(filter_chain& chain, const std::vector<frame_slot>& slots) {
  for (const auto& f : slots) chain.enqueue(f, execution_mode::graph);
  chain.synchronize();
  return batch_output_hash(slots);
}

void clear_outputs(std::vector<frame_slot>& slots) {
  for (auto& f : slots) {
    std::memset(f.edges(), 0xAB, static_cast<std::size_t>(f.width()) * static_cast<std::size_t>(f.height()));
    std::memset(f.sharp(), 0xAB, 3 * static_cast<std::size_t>(f.width()) * static_cast<std::size_t>(f.height()));
  }
}

TEST_F(FramePipeline, FilterPipelinedEqualsGraphModeBitwiseOnRandomFrames) {
  constexpr int w = 97; // partial blocks in x and y
  constexpr int h = 61;
  std::mt19937 rng(2026);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<frame_slot> slots;
  for (int f = 0; f < 5; ++f) {
    image img{w, h, 3, std::vector<std::uint8_t>(static_cast<std::size_t>(w) * h * 3)};
    for (auto& px : img.pixels) px = static_cast<std::uint8_t>(byte(rng));
    slots.emplace_back(w, h);
    slots.back().load(img);
  }
  filter_chain chain(w, h, filter_params{});
  const std::uint64_t expected = graph_mode_hash(chain, slots);
  for (std::size_t depth = 1; depth <= 3; ++depth) {
    clear_outputs(slots);
    ASSERT_NE(batch_output_hash(slots), expected);
    const pipelined_report r = run_pipelined(chain, slots, {depth, 7}, {0, 1});
    EXPECT_EQ(r.output_hash, expected) << "depth " << depth << ": pipelined outputs differ from graph mode";
    EXPECT_EQ(r.depth, depth);
    EXPECT_EQ(r.frames_per_pass, 10U); // 7 frames rounded up to whole batches of 5
    EXPECT_GT(r.ms_per_frame, 0.0);
    EXPECT_EQ(r.bound_ms, std::max({r.upload_ms, r.chain_ms, r.download_ms}));
    EXPECT_EQ(r.upload_bytes, 3U * w * h);
    EXPECT_EQ(r.download_bytes, 4U * w * h);
  }
}

TEST_F(FramePipeline, FilterPipelinedEqualsGraphModeBitwiseOnPhotographs) {
  CONVEYOR_REQUIRE_IMAGES();
  std::vector<frame_slot> slots;
  for (const auto& s : conveyor::test::shared_image_list) {
    const image img = resize_bilinear(read_image(conveyor::test::shared_images() / s.file), 640, 360);
    slots.emplace_back(640, 360);
    slots.back().load(img);
  }
  filter_chain chain(640, 360, filter_params{});
  const std::uint64_t expected = graph_mode_hash(chain, slots);
  clear_outputs(slots);
  const pipelined_report r = run_pipelined(chain, slots, {3, 5}, {0, 1});
  EXPECT_EQ(r.output_hash, expected);
}

} // namespace
