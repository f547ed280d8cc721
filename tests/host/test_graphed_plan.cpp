// Host-only tests of the assembly line's decisions through its public API: buckets, warm-up per shape, keys from
// arguments (shape, binding, static pointers, trivially copyable values by their bytes, unkeyed values).
#include <conveyor/assembly/graph_cache.hpp>
#include <conveyor/assembly/graphed.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using conveyor::argument_kind;
using conveyor::argument_role;
using conveyor::call_key;
using conveyor::call_plan;

template <class... Args>
call_key key_of(const Args&... args) {
  call_key k;
  const conveyor::keying how{};
  std::size_t position = 0;
  (conveyor::key_argument(k, args, position++, how), ...);
  return k;
}

TEST(GraphedPlan, BucketsPadUpAndRejectAboveLargest) {
  conveyor::graph_cache cache({.buckets = {256, 64, 128}});
  EXPECT_EQ(cache.bucket_for(1), 64U);
  EXPECT_EQ(cache.bucket_for(64), 64U);
  EXPECT_EQ(cache.bucket_for(65), 128U);
  EXPECT_EQ(cache.bucket_for(256), 256U);
  EXPECT_FALSE(cache.bucket_for(257).has_value());
  conveyor::graph_cache none({});
  EXPECT_EQ(none.bucket_for(1000), 1000U);
}

TEST(GraphedPlan, WarmUpCountsPerShape) {
  conveyor::graph_cache cache({.warmup_calls = 2});
  float buffer[2];
  const float* p = buffer;
  EXPECT_EQ(cache.plan(key_of(10, 1.0F, p)), call_plan::eager_warmup);
  EXPECT_EQ(cache.plan(key_of(20, 1.0F, p)), call_plan::eager_warmup);
  EXPECT_EQ(cache.plan(key_of(10, 2.0F, p + 1)), call_plan::eager_warmup); // same shape, other binding
  EXPECT_EQ(cache.plan(key_of(10, 1.0F, p)), call_plan::capture_new);
  EXPECT_EQ(cache.plan(key_of(20, 1.0F, p)), call_plan::eager_warmup);
  EXPECT_EQ(cache.statistics().warmups, 4U);
  EXPECT_EQ(cache.statistics().calls, 5U);
}

// instantiate_in_background: the capture of a new shape, after its warm-ups, is planned as a hand-over to the worker
// thread (the call then runs eagerly); without the option, as capture_new.
TEST(GraphedPlan, BackgroundInstantiationPlansACaptureForTheWorkerThread) {
  conveyor::graph_cache cache({.warmup_calls = 1, .instantiate_in_background = true});
  float buffer[1];
  const float* p = buffer;
  EXPECT_EQ(cache.plan(key_of(10, p)), call_plan::eager_warmup);
  EXPECT_EQ(cache.plan(key_of(10, p)), call_plan::capture_background);
  EXPECT_EQ(cache.plan(key_of(20, p)), call_plan::eager_warmup);
  EXPECT_EQ(cache.statistics().background_instantiations, 0U);
  EXPECT_EQ(cache.statistics().eager_while_instantiating, 0U);
  conveyor::graph_cache inline_cache({.warmup_calls = 0});
  EXPECT_EQ(inline_cache.plan(key_of(10, p)), call_plan::capture_new);
}

TEST(GraphedPlan, KeysSeparateShapeFromBinding) {
  float buffer[2];
  const float* p = buffer;
  auto a = key_of(10, 1.0F, p);
  EXPECT_TRUE(a.same_shape(key_of(10, 2.0F, p + 1)));
  EXPECT_FALSE(a.same_binding(key_of(10, 2.0F, p)));
  EXPECT_FALSE(a.same_binding(key_of(10, 1.0F, p + 1)));
  EXPECT_TRUE(a.same_binding(key_of(10, 1.0F, p)));
  EXPECT_FALSE(a.same_shape(key_of(11, 1.0F, p)));
  EXPECT_EQ(key_of(10, 2.0F, p).changes_from(a), "argument 1 scalar changed from 1 to 2");
  const auto b = key_of(conveyor::batch_size{77, 128});
  ASSERT_EQ(b.size(), 2U);
  EXPECT_EQ(b[0].role, argument_role::shape);
  EXPECT_EQ(b[0].kind, argument_kind::padded_size);
  EXPECT_EQ(b[0].bits, 128U);
  EXPECT_EQ(b[1].role, argument_role::binding);
  EXPECT_EQ(b[1].kind, argument_kind::real_size);
  EXPECT_EQ(b[1].bits, 77U);
  EXPECT_EQ(b.shape_text(), "0=128");
}

// A struct holding two device pointers, swapped between calls: its bytes are part of the binding.
struct two_buffers {
  float* in;
  float* out;
};

TEST(GraphedPlan, TriviallyCopyableValuesAreKeyedByTheirBytes) {
  float storage[4];
  const two_buffers forward{storage, storage + 2};
  const two_buffers swapped{storage + 2, storage};
  const auto a = key_of(16, forward);
  ASSERT_EQ(a.size(), 2U);
  EXPECT_EQ(a[1].kind, argument_kind::bytes);
  EXPECT_EQ(a[1].role, argument_role::binding);
  EXPECT_EQ(a[1].size, sizeof(two_buffers));
  const auto b = key_of(16, swapped);
  EXPECT_TRUE(a.same_shape(b));
  EXPECT_FALSE(a.same_binding(b)) << "a swapped struct of pointers must not replay the old pointers";
  EXPECT_TRUE(a.same_binding(key_of(16, two_buffers{storage, storage + 2})));
  EXPECT_EQ(b.changes_from(a), "argument 1 value changed (16 bytes)");
  // A span and an array: trivially copyable too.
  const std::span<float> s1(storage, 2);
  const std::span<float> s2(storage + 1, 2);
  EXPECT_FALSE(key_of(s1).same_binding(key_of(s2)));
  EXPECT_FALSE(key_of(std::array<int, 3>{1, 2, 3}).same_binding(key_of(std::array<int, 3>{1, 2, 4})));
}

TEST(GraphedPlan, UnkeyedArgumentsAreSkippedAndOthersMustBeKeyable) {
  const std::vector<int> host_only{1, 2, 3};
  const auto k = key_of(5, conveyor::unkeyed{host_only});
  EXPECT_EQ(k.size(), 1U);
  static_assert(conveyor::keyable_argument<two_buffers>);
  static_assert(conveyor::keyable_argument<conveyor::unkeyed<std::string>>);
  static_assert(!conveyor::keyable_argument<std::string>, "std::string cannot be compared by bytes");
  static_assert(!conveyor::keyable_argument<std::vector<float>>);
  // With a key function (Lenient), a type graphed cannot compare is skipped rather than refused.
  call_key lenient;
  conveyor::key_argument<true>(lenient, std::string("ignored"), 0, conveyor::keying{true, nullptr});
  EXPECT_EQ(lenient.size(), 0U);
}

TEST(GraphedPlan, StaticPointersAreMarkedAndReplayNeedsAMatch) {
  conveyor::graph_cache cache({.warmup_calls = 0, .static_arguments = {0}});
  float buffer[2];
  const std::vector<std::size_t> statics{0};
  auto key = [&](const float* p) {
    call_key k;
    conveyor::key_argument(k, p, 0, conveyor::keying{false, &statics});
    return k;
  };
  EXPECT_EQ(key(buffer)[0].role, argument_role::static_pointer);
  EXPECT_EQ(cache.plan(key(buffer)), call_plan::capture_new);
  EXPECT_THROW(cache.replay(conveyor::stream::adopt(nullptr)), std::logic_error) << "no graph was matched";
}

TEST(GraphedPlan, KeyCapacityIsEnforced) {
  call_key k;
  for (std::size_t i = 0; i < call_key::capacity; ++i) k.add(i, argument_role::shape, argument_kind::integer, i);
  EXPECT_THROW(k.add(0, argument_role::shape, argument_kind::integer, 16), std::invalid_argument);
}

TEST(GraphedPlan, RejectsBadOptions) {
  EXPECT_THROW(conveyor::graph_cache({.max_graphs = 0}), std::invalid_argument);
  EXPECT_THROW(conveyor::graph_cache({.warmup_calls = -1}), std::invalid_argument);
  EXPECT_THROW(conveyor::graph_cache({.buckets = {0, 8}}), std::invalid_argument);
  using rule = conveyor::padding_rule;
  EXPECT_THROW(conveyor::graph_cache({.dimensions = {{0, rule{.buckets = {8}, .multiple = 4}}}}),
               std::invalid_argument); // two kinds of padding in one rule
  EXPECT_THROW(conveyor::graph_cache({.dimensions = {{0, rule{.multiple = 4, .power_of_two = true}}}}),
               std::invalid_argument);
  EXPECT_THROW(conveyor::graph_cache({.dimensions = {{0, rule{.buckets = {0}}}}}), std::invalid_argument);
  EXPECT_THROW(conveyor::graph_cache({.dimensions = {{1, rule{.multiple = 4}}, {1, rule{.multiple = 8}}}}),
               std::invalid_argument); // one argument, two rules
  EXPECT_THROW(conveyor::graph_cache({.churn = {.max_records = 5, .window = 5}}), std::invalid_argument);
  EXPECT_THROW(conveyor::graph_cache({.churn = {.max_records = 2, .window = 10, .settle_calls = 0}}),
               std::invalid_argument);
  EXPECT_NO_THROW(conveyor::graph_cache({.churn = {.max_records = 0, .window = 0, .settle_calls = 0}})); // off
}

// Each batch_size dimension pads by its own rule: batch by buckets, sequence length by a multiple with a limit,
// a third by powers of two; an argument without a rule pads by `buckets`.
TEST(GraphedPlan, EachDimensionPadsByItsOwnRule) {
  using rule = conveyor::padding_rule;
  conveyor::graph_cache cache({.buckets = {100, 50},
                               .dimensions = {{0, rule{.buckets = {32, 8, 16}}},
                                              {1, rule{.multiple = 128, .limit = 1024}},
                                              {3, rule{.power_of_two = true, .limit = 64}}}});
  EXPECT_EQ(cache.bucket_for(0, 1), 8U);
  EXPECT_EQ(cache.bucket_for(0, 9), 16U);
  EXPECT_EQ(cache.bucket_for(0, 32), 32U);
  EXPECT_FALSE(cache.bucket_for(0, 33).has_value());
  EXPECT_EQ(cache.bucket_for(1, 1), 128U);
  EXPECT_EQ(cache.bucket_for(1, 128), 128U);
  EXPECT_EQ(cache.bucket_for(1, 129), 256U);
  EXPECT_EQ(cache.bucket_for(1, 1024), 1024U);
  EXPECT_FALSE(cache.bucket_for(1, 1025).has_value()); // pads to 1152, above the limit
  EXPECT_EQ(cache.bucket_for(2, 7), 50U);              // no rule of its own: `buckets`
  EXPECT_FALSE(cache.bucket_for(2, 101).has_value());
  EXPECT_EQ(cache.bucket_for(3, 0), 1U);
  EXPECT_EQ(cache.bucket_for(3, 33), 64U);
  EXPECT_FALSE(cache.bucket_for(3, 65).has_value());
  EXPECT_EQ(cache.bucket_for(33), 50U); // the one-argument form: `buckets`
  conveyor::graph_cache free_sizes({.dimensions = {{0, rule{}}}});
  EXPECT_EQ(free_sizes.bucket_for(0, 12345), 12345U); // a rule without padding: every size its own shape
}

// prepare's shapes: every combination of the dimensions' bucket lists, largest first (the last dimension fastest); an
// argument padded by a multiple keeps its own size, padded; arguments without a rule share `buckets`.
TEST(GraphedPlan, PrepareShapesCombineTheBucketListsLargestFirst) {
  using rule = conveyor::padding_rule;
  conveyor::graph_cache cache(
      {.buckets = {2, 4}, .dimensions = {{0, rule{.buckets = {8, 16, 32}}}, {1, rule{.multiple = 128}}}});
  const auto shapes = cache.prepare_shapes({{0, 10}, {1, 200}, {2, 3}, {4, 1}});
  const std::vector<std::vector<std::size_t>> expected{{32, 256, 4, 4}, {32, 256, 2, 2}, {16, 256, 4, 4},
                                                       {16, 256, 2, 2}, {8, 256, 4, 4},  {8, 256, 2, 2}};
  EXPECT_EQ(shapes, expected);
  conveyor::graph_cache none({.dimensions = {{0, rule{.multiple = 64}}}});
  EXPECT_TRUE(none.prepare_shapes({{0, 10}}).empty()) << "no bucket list: nothing to enumerate";
  conveyor::graph_cache limited({.dimensions = {{0, rule{.buckets = {8, 16, 32}, .limit = 16}}}});
  EXPECT_EQ(limited.prepare_shapes({{0, 1}}), (std::vector<std::vector<std::size_t>>{{16}, {8}}));
}

// The churn guard: more records (captures, re-captures) than its cap within its window run the call eagerly, and so
// does every call until `settle_calls` steady calls in a row; then graphing resumes with a fresh count.
TEST(GraphedPlan, ChurnGuardRunsEagerlyUntilTheArgumentsSettle) {
  conveyor::graph_cache cache({.warmup_calls = 0, .churn = {.max_records = 3, .window = 20, .settle_calls = 3}});
  float buffer[2];
  const float* p = buffer;
  EXPECT_EQ(cache.plan(key_of(1, p)), call_plan::capture_new);
  EXPECT_EQ(cache.plan(key_of(2, p)), call_plan::capture_new);
  EXPECT_EQ(cache.plan(key_of(3, p)), call_plan::capture_new);
  EXPECT_FALSE(cache.statistics().guard_engaged);
  EXPECT_EQ(cache.plan(key_of(4, p)), call_plan::eager_guarded); // a fourth record within 20 calls
  EXPECT_TRUE(cache.statistics().guard_engaged);
  EXPECT_EQ(cache.statistics().guard_trips, 1U);
  EXPECT_EQ(cache.plan(key_of(5, p)), call_plan::eager_guarded);     // another shape: not steady
  EXPECT_EQ(cache.plan(key_of(6, p)), call_plan::eager_guarded);     // another again
  EXPECT_EQ(cache.plan(key_of(6, p)), call_plan::eager_guarded);     // steady 1
  EXPECT_EQ(cache.plan(key_of(6, p + 1)), call_plan::eager_guarded); // another binding: not steady
  EXPECT_EQ(cache.plan(key_of(6, p + 1)), call_plan::eager_guarded); // steady 1
  EXPECT_EQ(cache.plan(key_of(6, p + 1)), call_plan::eager_guarded); // steady 2
  EXPECT_EQ(cache.plan(key_of(6, p + 1)), call_plan::capture_new);   // steady 3: graphing again
  const auto& s = cache.statistics();
  EXPECT_FALSE(s.guard_engaged);
  EXPECT_EQ(s.guard_resumes, 1U);
  EXPECT_EQ(s.guarded_calls, 7U);
  EXPECT_EQ(s.calls, 11U);
  EXPECT_EQ(s.churn_max_records, 3U);
  EXPECT_EQ(s.churn_window, 20U);
  // A fresh count after resuming: three more records before the guard engages again.
  EXPECT_EQ(cache.plan(key_of(7, p)), call_plan::capture_new);
  EXPECT_EQ(cache.plan(key_of(8, p)), call_plan::capture_new);
  EXPECT_EQ(cache.plan(key_of(9, p)), call_plan::eager_guarded);
  EXPECT_EQ(cache.statistics().guard_trips, 2U);
  const std::string report = cache.report("step");
  EXPECT_NE(report.find("churn guard (cap 3 records in 20 calls): engaged 2 time(s), 8 call(s) run eagerly, resumed "
                        "1 time(s); running eagerly now"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("churn guard: 4 captures and re-captures in the last 20 calls, more than 3"), std::string::npos)
      << report;
  EXPECT_NE(report.find("churn guard: 3 steady calls in a row: graphing again"), std::string::npos) << report;
}

// Records outside the window do not count: a new shape every 10 calls (9 warm-ups, then a capture) never engages a
// guard of 2 records in 20 calls, and engages one of 1 record in 20 at the second capture.
TEST(GraphedPlan, ChurnGuardCountsOnlyTheWindow) {
  float buffer[1];
  const float* p = buffer;
  conveyor::graph_cache loose({.warmup_calls = 9, .churn = {.max_records = 2, .window = 20, .settle_calls = 1}});
  for (int shape = 0; shape < 10; ++shape) {
    for (int k = 0; k < 9; ++k) EXPECT_EQ(loose.plan(key_of(shape, p)), call_plan::eager_warmup);
    EXPECT_EQ(loose.plan(key_of(shape, p)), call_plan::capture_new) << "shape " << shape;
  }
  EXPECT_EQ(loose.statistics().guard_trips, 0U);
  conveyor::graph_cache tight({.warmup_calls = 9, .churn = {.max_records = 1, .window = 20, .settle_calls = 1}});
  for (int k = 0; k < 9; ++k) (void)tight.plan(key_of(0, p));
  EXPECT_EQ(tight.plan(key_of(0, p)), call_plan::capture_new);
  for (int k = 0; k < 9; ++k) (void)tight.plan(key_of(1, p));
  EXPECT_EQ(tight.plan(key_of(1, p)), call_plan::eager_guarded);
  EXPECT_EQ(tight.statistics().guard_trips, 1U);
}

} // namespace

// CONVEYOR_AUDIT_EVERY turns the audit on for a whole program; a value that is not a count is refused by name. (Death
// tests in the "threadsafe" style: the child re-runs the program, so the variable is read afresh there.)
TEST(GraphedAuditEnv, TheVariableSetsTheDefaultAndABadValueIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("CONVEYOR_AUDIT_EVERY", "5", 1);
        std::exit(conveyor::graphed_options{}.audit_every == 5 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("CONVEYOR_AUDIT_EVERY", "every", 1);
        try {
          (void)conveyor::graphed_options{};
        } catch (const std::invalid_argument& e) {
          std::fputs(e.what(), stderr);
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3), "CONVEYOR_AUDIT_EVERY='every': expected a whole number of calls");
  EXPECT_EQ(conveyor::detail::audit_every_env(), 0U); // this process: unset
}
