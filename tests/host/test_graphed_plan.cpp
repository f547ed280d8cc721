// Host-only tests of the assembly line's decisions through its public API: buckets, warm-up per shape, keys from
// arguments (shape, binding, static pointers, trivially copyable values by their bytes, unkeyed values).
#include <conveyor/assembly/graph_cache.hpp>
#include <conveyor/assembly/graphed.hpp>

#include <gtest/gtest.h>

#include <array>
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
}

} // namespace
