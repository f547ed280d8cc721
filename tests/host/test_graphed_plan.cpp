// Host-only tests of the assembly line's decisions: buckets, warm-up per shape, keys from arguments.
#include <conveyor/assembly/graphed.hpp>

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using conveyor::detail::call_plan;

conveyor::detail::call_key key_of(int n, float a, const float* p) {
  conveyor::detail::call_key k;
  conveyor::detail::classify(k, n, 0, false, {});
  conveyor::detail::classify(k, a, 1, false, {});
  conveyor::detail::classify(k, p, 2, false, {});
  return k;
}

TEST(GraphedPlan, BucketsPadUpAndRejectAboveLargest) {
  conveyor::detail::graphed_core core({.buckets = {256, 64, 128}});
  EXPECT_EQ(core.bucket_for(1), 64U);
  EXPECT_EQ(core.bucket_for(64), 64U);
  EXPECT_EQ(core.bucket_for(65), 128U);
  EXPECT_EQ(core.bucket_for(256), 256U);
  EXPECT_FALSE(core.bucket_for(257).has_value());
  conveyor::detail::graphed_core none({});
  EXPECT_EQ(none.bucket_for(1000), 1000U);
}

TEST(GraphedPlan, WarmUpCountsPerShape) {
  conveyor::detail::graphed_core core({.warmup_calls = 2});
  float buffer[2];
  EXPECT_EQ(core.plan(key_of(10, 1.0F, buffer)), call_plan::eager_warmup);
  EXPECT_EQ(core.plan(key_of(20, 1.0F, buffer)), call_plan::eager_warmup);
  EXPECT_EQ(core.plan(key_of(10, 2.0F, buffer + 1)), call_plan::eager_warmup); // same shape, other binding
  EXPECT_EQ(core.plan(key_of(10, 1.0F, buffer)), call_plan::capture_new);
  EXPECT_EQ(core.plan(key_of(20, 1.0F, buffer)), call_plan::eager_warmup);
  EXPECT_EQ(core.statistics().warmups, 4U);
  EXPECT_EQ(core.statistics().calls, 5U);
}

TEST(GraphedPlan, KeysSeparateShapeFromBinding) {
  float buffer[2];
  auto a = key_of(10, 1.0F, buffer);
  EXPECT_TRUE(a.same_shape(key_of(10, 2.0F, buffer + 1)));
  EXPECT_FALSE(a.same_binding(key_of(10, 2.0F, buffer)));
  EXPECT_FALSE(a.same_binding(key_of(10, 1.0F, buffer + 1)));
  EXPECT_TRUE(a.same_binding(key_of(10, 1.0F, buffer)));
  EXPECT_FALSE(a.same_shape(key_of(11, 1.0F, buffer)));
  conveyor::detail::call_key b;
  conveyor::detail::classify(b, conveyor::batch_size{77, 128}, 0, false, {});
  ASSERT_EQ(b.count, 2U);
  EXPECT_EQ(b.args[0].role, conveyor::detail::arg_role::shape);
  EXPECT_EQ(b.args[0].bits, 128U);
  EXPECT_EQ(b.args[1].role, conveyor::detail::arg_role::binding);
  EXPECT_EQ(b.args[1].bits, 77U);
}

TEST(GraphedPlan, RejectsBadOptions) {
  EXPECT_THROW(conveyor::detail::graphed_core({.max_graphs = 0}), std::invalid_argument);
  EXPECT_THROW(conveyor::detail::graphed_core({.warmup_calls = -1}), std::invalid_argument);
  EXPECT_THROW(conveyor::detail::graphed_core({.buckets = {0, 8}}), std::invalid_argument);
}

} // namespace
