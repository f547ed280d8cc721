// conveyor::pipeline_schedule, the plain C++ behind conveyor::frame_pipeline: for every valid lag set and runs of 0
// to 12 items, simulated step by step as frame_pipeline runs them (push: step k with k + 1 items; drain: the steps
// left with n items), every item passes through upload, compute and download exactly once, in that order and in item
// order; a slot is never handed to a new item before the item it holds has been downloaded; a step's stages of
// different lags handle different items in different slots; the number of steps is n + depth - 1. Also the default
// lags, the refused lags and depths with their messages, and the exact prologue / steady state / epilogue of depth 3.

#include <conveyor/assembly/pipeline_schedule.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::all_pipeline_stages;
using conveyor::pipeline_lags;
using conveyor::pipeline_schedule;
using conveyor::pipeline_stage;
using conveyor::pipeline_step;

namespace {

constexpr std::size_t none = pipeline_step::none;

//! Every lag set the schedule accepts.
std::vector<pipeline_lags> valid_lags() { return {{0, 0, 0}, {0, 0, 1}, {0, 1, 1}, {0, 1, 2}}; }

//! The steps frame_pipeline launches for a run of n items: push k runs step(k, k + 1), drain runs the steps left
//! with pushed = n until the last item is downloaded.
std::vector<pipeline_step> simulate(const pipeline_schedule& s, std::size_t n) {
  std::vector<pipeline_step> steps;
  std::size_t downloaded = 0;
  const auto note = [&](const pipeline_step& st) {
    steps.push_back(st);
    if (st.active(pipeline_stage::download)) downloaded = st.item_of(pipeline_stage::download) + 1;
  };
  for (std::size_t k = 0; k < n; ++k) note(s.step(k, k + 1));
  for (std::size_t k = n; downloaded < n; ++k) {
    const pipeline_step st = s.step(k, n);
    EXPECT_FALSE(st.empty()) << "drain step " << k << " of a run of " << n << " does nothing";
    if (st.empty()) break;
    note(st);
  }
  return steps;
}

std::string describe(const pipeline_lags& l, std::size_t n) {
  return "lags {" + std::to_string(l[0]) + ", " + std::to_string(l[1]) + ", " + std::to_string(l[2]) + "}, " +
         std::to_string(n) + " items";
}

TEST(PipelineSchedule, DefaultLagsPerDepth) {
  EXPECT_EQ(conveyor::default_pipeline_lags(1), (pipeline_lags{0, 0, 0}));
  EXPECT_EQ(conveyor::default_pipeline_lags(2), (pipeline_lags{0, 1, 1}));
  EXPECT_EQ(conveyor::default_pipeline_lags(3), (pipeline_lags{0, 1, 2}));
  for (std::size_t d = 1; d <= 3; ++d) {
    const pipeline_schedule s(d);
    EXPECT_EQ(s.depth(), d);
    EXPECT_EQ(s.slots(), d);
  }
}

TEST(PipelineSchedule, RefusesBadDepthsAndLagsWithTheReason) {
  for (const std::size_t d : {std::size_t{0}, std::size_t{4}}) {
    try {
      (void)pipeline_schedule(d);
      ADD_FAILURE() << "depth " << d << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("must be 1, 2 or 3"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("got " + std::to_string(d)), std::string::npos) << e.what();
    }
  }
  const struct {
    pipeline_lags lags;
    const char* message;
  } bad[] = {{{1, 1, 1}, "the upload's lag must be 0, got 1"},
             {{0, 2, 2}, "the compute stage's lag must equal the upload stage's (0) or be one more, got 2"},
             {{0, 1, 0}, "the download stage's lag must equal the compute stage's (1) or be one more, got 0"},
             {{0, 0, 2}, "the download stage's lag must equal the compute stage's (0) or be one more, got 2"}};
  for (const auto& b : bad) {
    try {
      (void)pipeline_schedule(b.lags);
      ADD_FAILURE() << "lags accepted: " << b.message;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(b.message), std::string::npos) << e.what();
    }
  }
}

TEST(PipelineSchedule, Depth3PrologueSteadyStateEpilogue) {
  const pipeline_schedule s(3);
  // Five items: 7 steps. Step k: upload k, compute k - 1, download k - 2, each in slot item mod 3.
  const std::vector<pipeline_step> steps = simulate(s, 5);
  ASSERT_EQ(steps.size(), 7U);
  EXPECT_EQ(s.steps(5), 7U);
  const std::array<std::array<std::size_t, 3>, 7> items{
      {{0, none, none}, {1, 0, none}, {2, 1, 0}, {3, 2, 1}, {4, 3, 2}, {none, 4, 3}, {none, none, 4}}};
  for (std::size_t k = 0; k < steps.size(); ++k) {
    EXPECT_EQ(steps[k].item, items[k]) << "step " << k;
    for (std::size_t st = 0; st < 3; ++st)
      EXPECT_EQ(steps[k].slot[st], items[k][st] == none ? none : items[k][st] % 3) << "step " << k << " stage " << st;
  }
  // Depth 2 ({0, 1, 1}): compute and download of one item in the same step.
  const pipeline_step d2 = pipeline_schedule(2).step(4, 5);
  EXPECT_EQ(d2.item, (std::array<std::size_t, 3>{4, 3, 3}));
  EXPECT_EQ(d2.slot, (std::array<std::size_t, 3>{0, 1, 1}));
  // Depth 1: everything on one item.
  EXPECT_EQ(pipeline_schedule(1).step(4, 5).item, (std::array<std::size_t, 3>{4, 4, 4}));
  // Nothing pushed: an empty step; no items: no steps.
  EXPECT_TRUE(s.step(0, 0).empty());
  EXPECT_EQ(s.steps(0), 0U);
}

TEST(PipelineSchedule, EveryItemOnceInOrderAndNoSlotReusedWhileInFlight) {
  for (const pipeline_lags& lags : valid_lags()) {
    const pipeline_schedule s(lags);
    for (std::size_t n = 0; n <= 12; ++n) {
      const std::string what = describe(lags, n);
      const std::vector<pipeline_step> steps = simulate(s, n);
      EXPECT_EQ(steps.size(), s.steps(n)) << what;
      // step index at which each (stage, item) ran; -1: never
      std::vector<std::array<long, 3>> when(n, {-1, -1, -1});
      std::vector<std::size_t> next(3, 0); // the next item each stage must see (item order)
      for (std::size_t k = 0; k < steps.size(); ++k) {
        const pipeline_step& st = steps[k];
        for (std::size_t g = 0; g < 3; ++g) {
          const std::size_t item = st.item[g];
          if (item == none) {
            EXPECT_EQ(st.slot[g], none) << what << ", step " << k;
            continue;
          }
          ASSERT_LT(item, n) << what << ", step " << k;
          EXPECT_EQ(item, next[g]) << what << ": stage " << g << " out of item order at step " << k;
          next[g] = item + 1;
          EXPECT_EQ(when[item][g], -1) << what << ": item " << item << " twice through stage " << g;
          when[item][g] = static_cast<long>(k);
          EXPECT_EQ(st.slot[g], s.slot_of(item)) << what << ", step " << k;
          EXPECT_LT(st.slot[g], s.slots()) << what;
        }
        // Stages of different items use different slots (independent branches); equal items share their slot.
        for (std::size_t a = 0; a < 3; ++a)
          for (std::size_t b = a + 1; b < 3; ++b) {
            if (st.item[a] == none || st.item[b] == none) continue;
            EXPECT_EQ(st.item[a] == st.item[b], st.slot[a] == st.slot[b]) << what << ", step " << k;
            EXPECT_EQ(st.item[a] == st.item[b], s.lag(all_pipeline_stages[a]) == s.lag(all_pipeline_stages[b]))
                << what << ", step " << k;
          }
      }
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t g = 0; g < 3; ++g)
          ASSERT_NE(when[i][g], -1) << what << ": item " << i << " skipped stage " << g;
        EXPECT_LE(when[i][0], when[i][1]) << what << ", item " << i;
        EXPECT_LE(when[i][1], when[i][2]) << what << ", item " << i;
      }
      // A slot goes to item j only after the item it held before (j - slots) was downloaded: a later step.
      for (std::size_t j = s.slots(); j < n; ++j)
        EXPECT_GT(when[j][0], when[j - s.slots()][2]) << what << ": slot of item " << j << " reused too early";
      // Items in flight at any step never exceed the depth.
      for (std::size_t k = 0; k < steps.size(); ++k) {
        std::size_t alive = 0;
        for (std::size_t i = 0; i < n; ++i)
          if (when[i][0] <= static_cast<long>(k) && when[i][2] >= static_cast<long>(k)) ++alive;
        EXPECT_LE(alive, s.depth()) << what << ", step " << k;
      }
    }
  }
}

TEST(PipelineSchedule, StageNames) {
  EXPECT_EQ(conveyor::to_string(pipeline_stage::upload), "upload");
  EXPECT_EQ(conveyor::to_string(pipeline_stage::compute), "compute");
  EXPECT_EQ(conveyor::to_string(pipeline_stage::download), "download");
}

} // namespace
