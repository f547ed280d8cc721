// Host-only tests of rebinding's logic (src/assembly/rebind.hpp) over synthetic graph images: candidate scan,
// verification at a re-capture, coincidences dropped, transformed values and host-only uses sent to re-capture,
// offsets inside an allocation, structs of pointers, declared policies, and the patch plan.
#include "assembly/rebind.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

using conveyor::argument_kind;
using conveyor::argument_role;
using conveyor::binding_state;
using conveyor::call_key;
using conveyor::rebind_policy;
using conveyor::detail::graph_image;
using conveyor::detail::node_image;
using conveyor::detail::rebinder;
using conveyor::detail::recapture_facts;

// Every argument declared rebind_policy::learn: only flows into node fields (graphed's default is recapture).
conveyor::detail::rebind_settings learning() { return {rebind_policy::learn, {}, 1}; }

// A kernel node whose parameters are 8-byte words (pointers, sizes) and 4-byte words (floats, ints).
struct param {
  std::uint64_t value;
  std::uint32_t width;
};

node_image kernel(std::vector<param> params, std::uint32_t grid = 1) {
  node_image n;
  n.kind = conveyor::node_kind::kernel;
  n.patchable = true;
  std::uint32_t offset = 0;
  for (const auto& p : params) {
    offset = (offset + p.width - 1) / p.width * p.width;
    n.bytes.resize(offset + p.width);
    std::memcpy(n.bytes.data() + offset, &p.value, p.width);
    n.fields.emplace_back(offset, p.width);
    offset += p.width;
  }
  n.fixed.assign(reinterpret_cast<const unsigned char*>(&grid), reinterpret_cast<const unsigned char*>(&grid) + 4);
  return n;
}

node_image host_node() {
  node_image n;
  n.kind = conveyor::node_kind::host;
  return n;
}

std::uint64_t float_bits(float f) {
  std::uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  return b;
}

call_key pointer_key(std::vector<std::uint64_t> pointers) {
  call_key k;
  for (std::size_t i = 0; i < pointers.size(); ++i)
    k.add(pointers[i], argument_role::binding, argument_kind::pointer, i);
  return k;
}

std::uint64_t word(const node_image& n, std::size_t field) {
  std::uint64_t v = 0;
  std::memcpy(&v, n.bytes.data() + n.fields[field].first, n.fields[field].second);
  return v;
}

// Allocations: [0x10000, +1 MiB) and [0x900000, +1 MiB), [0x2000000, +1 MiB).
std::optional<std::pair<std::uint64_t, std::uint64_t>> ranges(std::uint64_t p) {
  for (std::uint64_t base : {0x10000ULL, 0x900000ULL, 0x2000000ULL})
    if (p >= base && p < base + (1U << 20)) return std::make_pair(base, std::uint64_t{1} << 20);
  return std::nullopt;
}

const recapture_facts clean{};

TEST(Rebind, PointerIsVerifiedByAReCaptureThenPatchedAtItsOneNode) {
  const std::uint64_t a = 0x10000, b = 0x900000, c = 0x2000000, other = 0x5555;
  graph_image g{{kernel({{other, 8}, {7, 4}}), kernel({{a, 8}, {7, 4}}), kernel({{other, 8}})}};
  rebinder rb(learning());
  rb.start(g, pointer_key({a}), ranges);
  std::string why;
  EXPECT_FALSE(rb.can_patch(pointer_key({a}), pointer_key({b}), &why));
  EXPECT_NE(why.find("not verified"), std::string::npos) << why;
  // The re-capture with b: node 1 moved exactly as predicted.
  graph_image g2{{kernel({{other, 8}, {7, 4}}), kernel({{b, 8}, {7, 4}}), kernel({{other, 8}})}};
  const std::string note = rb.learn(g2, pointer_key({b}), clean, ranges);
  EXPECT_NE(note.find("argument 0 verified (1 node field(s))"), std::string::npos) << note;
  ASSERT_TRUE(rb.can_patch(pointer_key({b}), pointer_key({c}), &why)) << why;
  const auto& touched = rb.patch(pointer_key({b}), pointer_key({c}));
  ASSERT_EQ(touched, std::vector<std::size_t>{1});
  EXPECT_EQ(word(rb.image().nodes[1], 0), c);
  EXPECT_EQ(word(rb.image().nodes[1], 1), 7U); // the other parameter kept
  EXPECT_EQ(word(rb.image().nodes[0], 0), other);
  const auto map = rb.bindings([](std::size_t i) { return "n" + std::to_string(i); });
  ASSERT_EQ(map.size(), 1U);
  EXPECT_EQ(map[0].state, binding_state::patched);
  ASSERT_EQ(map[0].sites.size(), 1U);
  EXPECT_EQ(map[0].sites[0].node, 1U);
  EXPECT_EQ(map[0].sites[0].field, "kernel parameter 0");
  EXPECT_TRUE(map[0].sites[0].verified);
  EXPECT_EQ(rb.node_bindings(1), std::vector<std::string>{"argument 0 -> kernel parameter 0"});
}

TEST(Rebind, UndeclaredArgumentsAreNeverPatchedEvenWhenARecaptureWouldExplainThem) {
  // graphed's default (rebind_policy::recapture for every argument): a callable may branch on any argument, so a
  // change that a re-capture explains exactly still re-captures the next time, and the map says how to declare it.
  const std::uint64_t a = 0x10000, b = 0x900000, c = 0x2000000;
  auto graph_for = [](std::uint64_t p) { return graph_image{{kernel({{p, 8}, {7, 4}})}}; };
  rebinder rb(conveyor::detail::rebind_settings{});
  rb.start(graph_for(a), pointer_key({a}), ranges);
  (void)rb.learn(graph_for(b), pointer_key({b}), clean, ranges);
  std::string why;
  EXPECT_FALSE(rb.can_patch(pointer_key({b}), pointer_key({c}), &why));
  const auto map = rb.bindings({});
  ASSERT_EQ(map.size(), 1U);
  EXPECT_EQ(map[0].state, binding_state::recaptured);
  EXPECT_NE(map[0].reason.find("the default"), std::string::npos) << map[0].reason;
  EXPECT_NE(map[0].reason.find("rebind_policy::learn"), std::string::npos) << map[0].reason;
  // Declared for argument 0 only: that one is learnt.
  conveyor::detail::rebind_settings one{};
  one.per_argument = {{0, rebind_policy::learn}};
  rebinder rd(one);
  rd.start(graph_for(a), pointer_key({a}), ranges);
  (void)rd.learn(graph_for(b), pointer_key({b}), clean, ranges);
  EXPECT_TRUE(rd.can_patch(pointer_key({b}), pointer_key({c}), &why)) << why;
}

TEST(Rebind, OffsetPointersInsideTheArgumentsAllocationMoveWithIt) {
  const std::uint64_t a = 0x10000, b = 0x900000, c = 0x2000000;
  auto graph_for = [](std::uint64_t p) {
    return graph_image{{kernel({{p, 8}}), kernel({{p + 4096, 8}}), kernel({{p + 65536, 8}, {p + 8, 8}})}};
  };
  rebinder rb(learning());
  rb.start(graph_for(a), pointer_key({a}), ranges);
  (void)rb.learn(graph_for(b), pointer_key({b}), clean, ranges);
  ASSERT_TRUE(rb.can_patch(pointer_key({b}), pointer_key({c})));
  const auto touched = rb.patch(pointer_key({b}), pointer_key({c}));
  EXPECT_EQ(touched, (std::vector<std::size_t>{0, 1, 2}));
  const graph_image want = graph_for(c);
  for (std::size_t n = 0; n < 3; ++n) EXPECT_EQ(rb.image().nodes[n].bytes, want.nodes[n].bytes) << "node " << n;
  EXPECT_EQ(rb.node_bindings(1), std::vector<std::string>{"argument 0 +4096 B -> kernel parameter 0"});
}

TEST(Rebind, ACoincidentalScalarIsDroppedAndOnlyTheRealSiteIsPatched) {
  // a = 2.0f is passed to node 0; node 1 holds the constant 2.0f by coincidence.
  auto key_for = [](float a) {
    call_key k;
    k.add(float_bits(a), argument_role::binding, argument_kind::floating, 0, 4);
    return k;
  };
  auto graph_for = [](float a) { return graph_image{{kernel({{float_bits(a), 4}}), kernel({{float_bits(2.0F), 4}})}}; };
  rebinder rb(learning());
  rb.start(graph_for(2.0F), key_for(2.0F), ranges);
  EXPECT_EQ(rb.bindings({})[0].sites.size(), 2U); // both are candidates
  (void)rb.learn(graph_for(3.0F), key_for(3.0F), clean, ranges);
  const auto map = rb.bindings({});
  ASSERT_EQ(map[0].sites.size(), 1U);
  EXPECT_EQ(map[0].sites[0].node, 0U);
  ASSERT_TRUE(rb.can_patch(key_for(3.0F), key_for(0.5F)));
  EXPECT_EQ(rb.patch(key_for(3.0F), key_for(0.5F)), std::vector<std::size_t>{0});
  EXPECT_EQ(rb.image().nodes[0].bytes, graph_for(0.5F).nodes[0].bytes);
  EXPECT_EQ(rb.image().nodes[1].bytes, graph_for(0.5F).nodes[1].bytes); // still 2.0f
}

TEST(Rebind, ATransformedValueSendsTheArgumentToReCapture) {
  auto key_for = [](float a) {
    call_key k;
    k.add(float_bits(a), argument_role::binding, argument_kind::floating, 0, 4);
    return k;
  };
  // The callable passes a to node 0 and 2a to node 1: node 1 changes in a way no argument explains.
  auto graph_for = [](float a) {
    return graph_image{{kernel({{float_bits(a), 4}}), kernel({{float_bits(2 * a), 4}})}};
  };
  rebinder rb(learning());
  rb.start(graph_for(1.5F), key_for(1.5F), ranges);
  const std::string note = rb.learn(graph_for(2.5F), key_for(2.5F), clean, ranges);
  EXPECT_NE(note.find("argument 0 re-captures from now on"), std::string::npos) << note;
  EXPECT_NE(note.find("node 1 kernel parameter 0"), std::string::npos) << note;
  std::string why;
  EXPECT_FALSE(rb.can_patch(key_for(2.5F), key_for(4.0F), &why));
  EXPECT_NE(why.find("argument 0 re-captures"), std::string::npos) << why;
  EXPECT_EQ(rb.bindings({})[0].state, binding_state::recaptured);
}

TEST(Rebind, AValueTheCallableChangesBeforeLaunchingIsNotPatched) {
  // The pointer the callable launches with is derived from the argument outside its allocation (a lookup): the
  // candidate does not follow, and the change is unexplained.
  const std::uint64_t a = 0x10000, b = 0x900000;
  rebinder rb(learning());
  rb.start(graph_image{{kernel({{a, 8}})}}, pointer_key({a}), ranges);
  const std::string note = rb.learn(graph_image{{kernel({{0x2000010, 8}})}}, pointer_key({b}), clean, ranges);
  EXPECT_NE(note.find("re-captures from now on"), std::string::npos) << note;
  EXPECT_FALSE(rb.can_patch(pointer_key({b}), pointer_key({a})));
}

TEST(Rebind, AnArgumentNoNodeHoldsReCaptures) {
  // Used on the host only (say, written into memory the graph reads): the graph does not change with it.
  const std::uint64_t a = 0x10000, b = 0x900000;
  const graph_image g{{kernel({{0x5555, 8}})}};
  rebinder rb(learning());
  rb.start(g, pointer_key({a}), ranges);
  const std::string note = rb.learn(g, pointer_key({b}), clean, ranges);
  EXPECT_NE(note.find("no node field holds it"), std::string::npos) << note;
  EXPECT_FALSE(rb.can_patch(pointer_key({b}), pointer_key({a})));
}

TEST(Rebind, AChangeInANodeRebindCannotPatchIsNotVerified) {
  const std::uint64_t a = 0x10000, b = 0x900000;
  rebinder rb(learning());
  rb.start(graph_image{{kernel({{a, 8}}), host_node()}}, pointer_key({a}), ranges);
  recapture_facts facts;
  facts.other_nodes_changed = {1};
  const std::string note = rb.learn(graph_image{{kernel({{b, 8}}), host_node()}}, pointer_key({b}), facts, ranges);
  EXPECT_NE(note.find("node 1 (host) changed"), std::string::npos) << note;
  EXPECT_FALSE(rb.can_patch(pointer_key({b}), pointer_key({a})));
}

TEST(Rebind, ALaunchShapeThatFollowsTheArgumentIsUnexplained) {
  call_key k1, k2;
  k1.add(100, argument_role::binding, argument_kind::real_size, 0);
  k2.add(200, argument_role::binding, argument_kind::real_size, 0);
  rebinder rb(learning());
  rb.start(graph_image{{kernel({{100, 4}}, 1)}}, k1, ranges);
  const std::string note = rb.learn(graph_image{{kernel({{200, 4}}, 2)}}, k2, clean, ranges);
  EXPECT_NE(note.find("launch shape"), std::string::npos) << note;
  EXPECT_FALSE(rb.can_patch(k2, k1));
}

TEST(Rebind, ASizeArgumentIsPatchedAsThe32BitParameterTheKernelTakes) {
  call_key k1, k2, k3;
  k1.add(1000, argument_role::binding, argument_kind::real_size, 0);
  k2.add(1500, argument_role::binding, argument_kind::real_size, 0);
  k3.add(999, argument_role::binding, argument_kind::real_size, 0);
  auto graph_for = [](std::uint64_t n) { return graph_image{{kernel({{n, 4}, {0x5555, 8}})}}; };
  rebinder rb(learning());
  rb.start(graph_for(1000), k1, ranges);
  (void)rb.learn(graph_for(1500), k2, clean, ranges);
  ASSERT_TRUE(rb.can_patch(k2, k3));
  (void)rb.patch(k2, k3);
  EXPECT_EQ(rb.image().nodes[0].bytes, graph_for(999).nodes[0].bytes);
}

TEST(Rebind, SwappedPointersInsideAStructArePatchedWordByWord) {
  struct pair_of_pointers {
    std::uint64_t in, out;
  };
  auto key_for = [](std::uint64_t in, std::uint64_t out) {
    call_key k;
    const pair_of_pointers v{in, out};
    k.add_bytes(&v, sizeof v, argument_role::binding, 0);
    return k;
  };
  const std::uint64_t a = 0x10000, b = 0x900000;
  auto graph_for = [](std::uint64_t in, std::uint64_t out) {
    return graph_image{{kernel({{in, 8}, {out, 8}}), kernel({{out, 8}})}};
  };
  rebinder rb(learning());
  rb.start(graph_for(a, b), key_for(a, b), ranges);
  (void)rb.learn(graph_for(b, a), key_for(b, a), clean, ranges);
  ASSERT_TRUE(rb.can_patch(key_for(b, a), key_for(a, b)));
  EXPECT_EQ(rb.patch(key_for(b, a), key_for(a, b)), (std::vector<std::size_t>{0, 1}));
  for (std::size_t n = 0; n < 2; ++n) EXPECT_EQ(rb.image().nodes[n].bytes, graph_for(a, b).nodes[n].bytes);
}

TEST(Rebind, ArgumentsThatAlwaysChangeTogetherUnexplainedGiveUpAfterThreeTries) {
  const std::uint64_t a = 0x10000, b = 0x900000;
  rebinder rb(learning());
  std::uint64_t x = a, y = b;
  // Node 1 holds a value no argument explains (outside every allocation) that changes at every call.
  rb.start(graph_image{{kernel({{x, 8}, {y + 1, 8}}), kernel({{0x7000000, 8}})}}, pointer_key({x, y}), ranges);
  for (std::uint64_t round = 1; round <= 3; ++round) {
    std::swap(x, y);
    EXPECT_FALSE(rb.can_patch(pointer_key({y, x}), pointer_key({x, y})));
    (void)rb.learn(graph_image{{kernel({{x, 8}, {y + 1, 8}}), kernel({{0x7000000 + round, 8}})}}, pointer_key({x, y}),
                   clean, ranges);
  }
  const auto map = rb.bindings({});
  EXPECT_EQ(map[0].state, binding_state::recaptured) << map[0].reason;
  EXPECT_EQ(map[1].state, binding_state::recaptured) << map[1].reason;
}

TEST(Rebind, DeclaredPoliciesSkipVerificationOrLearning) {
  const std::uint64_t a = 0x10000, b = 0x900000;
  conveyor::detail::rebind_settings patch_first = learning();
  patch_first.per_argument = {{0, rebind_policy::patch}, {1, rebind_policy::recapture}};
  rebinder rb(patch_first);
  rb.start(graph_image{{kernel({{a, 8}}), kernel({{b, 8}})}}, pointer_key({a, b}), ranges);
  EXPECT_TRUE(rb.can_patch(pointer_key({a, b}), pointer_key({b, b}))); // trusted without a re-capture
  std::string why;
  EXPECT_FALSE(rb.can_patch(pointer_key({a, b}), pointer_key({a, a}), &why));
  EXPECT_NE(why.find("declared rebind_policy::recapture"), std::string::npos) << why;
  const auto map = rb.bindings({});
  EXPECT_EQ(map[0].state, binding_state::patched);
  EXPECT_EQ(map[1].state, binding_state::recaptured);
}

TEST(Rebind, MoreVerificationsWaitForMoreReCaptures) {
  const std::uint64_t p[] = {0x10000, 0x900000, 0x2000000};
  conveyor::detail::rebind_settings twice = learning();
  twice.verifications = 2;
  rebinder rb(twice);
  rb.start(graph_image{{kernel({{p[0], 8}})}}, pointer_key({p[0]}), ranges);
  (void)rb.learn(graph_image{{kernel({{p[1], 8}})}}, pointer_key({p[1]}), clean, ranges);
  EXPECT_FALSE(rb.can_patch(pointer_key({p[1]}), pointer_key({p[2]})));
  (void)rb.learn(graph_image{{kernel({{p[2], 8}})}}, pointer_key({p[2]}), clean, ranges);
  EXPECT_TRUE(rb.can_patch(pointer_key({p[2]}), pointer_key({p[0]})));
}

TEST(Rebind, ReCapturesThatTeachNothingOnlyRefreshTheImageAndCheckTheSites) {
  // Argument 0 is verified; argument 1 is sent to re-capture (the callable transforms it).
  const std::uint64_t a = 0x10000, b = 0x900000, c = 0x2000000;
  auto graph_for = [](std::uint64_t p, std::uint64_t q) {
    return graph_image{{kernel({{p, 8}}), kernel({{q + 0x5000000, 8}})}}; // outside q's allocation
  };
  rebinder rb(learning());
  rb.start(graph_for(a, b), pointer_key({a, b}), ranges);
  (void)rb.learn(graph_for(b, b), pointer_key({b, b}), clean, ranges); // 0 verified
  (void)rb.learn(graph_for(b, c), pointer_key({b, c}), clean, ranges); // 1 transformed: re-captures
  EXPECT_FALSE(rb.can_learn(pointer_key({b, c}), pointer_key({b, a})));
  EXPECT_TRUE(rb.can_learn(pointer_key({b, c}), pointer_key({a, a})));
  // A re-capture for argument 1 alone: the caller skips learning; the image is refreshed before the next patch.
  rb.mark_stale();
  EXPECT_EQ(rb.refresh(graph_for(b, a), pointer_key({b, a}), ranges), "");
  ASSERT_TRUE(rb.can_patch(pointer_key({b, a}), pointer_key({c, a})));
  EXPECT_EQ(rb.patch(pointer_key({b, a}), pointer_key({c, a})), std::vector<std::size_t>{0});
  EXPECT_EQ(rb.image().nodes[0].bytes, graph_for(c, a).nodes[0].bytes);
  EXPECT_EQ(rb.image().nodes[1].bytes, graph_for(c, a).nodes[1].bytes);
  // A re-capture after which argument 0's site no longer holds it: argument 0 re-captures too.
  rb.mark_stale();
  const std::string note =
      rb.refresh(graph_image{{kernel({{0x7777, 8}}), kernel({{b + 0x5000000, 8}})}}, pointer_key({c, b}), ranges);
  EXPECT_NE(note.find("argument 0 re-captures from now on"), std::string::npos) << note;
  EXPECT_FALSE(rb.can_patch(pointer_key({c, b}), pointer_key({a, b})));
}

TEST(Rebind, AnArgumentThatWasZeroIsLookedForAfterItsFirstChange) {
  // A null pointer (or a 0.0 scalar) is everywhere: not looked for at first. Its first change is not verified (and
  // not given up); the one after verifies it.
  const std::uint64_t a = 0x10000, b = 0x900000, c = 0x2000000;
  auto graph_for = [](std::uint64_t p) { return graph_image{{kernel({{p, 8}, {0, 8}})}}; };
  rebinder rb(learning());
  rb.start(graph_for(0), pointer_key({0}), ranges);
  const std::string first = rb.learn(graph_for(a), pointer_key({a}), clean, ranges);
  EXPECT_NE(first.find("were 0 before"), std::string::npos) << first;
  EXPECT_EQ(rb.bindings({})[0].state, binding_state::learning);
  EXPECT_FALSE(rb.can_patch(pointer_key({a}), pointer_key({b})));
  const std::string second = rb.learn(graph_for(b), pointer_key({b}), clean, ranges);
  EXPECT_NE(second.find("argument 0 verified"), std::string::npos) << second;
  ASSERT_TRUE(rb.can_patch(pointer_key({b}), pointer_key({c})));
  EXPECT_EQ(rb.patch(pointer_key({b}), pointer_key({c})), std::vector<std::size_t>{0});
  EXPECT_EQ(rb.image().nodes[0].bytes, graph_for(c).nodes[0].bytes); // the null parameter stays null
}

TEST(Rebind, ATopologyChangeStartsLearningAgain) {
  const std::uint64_t a = 0x10000, b = 0x900000;
  rebinder rb(learning());
  rb.start(graph_image{{kernel({{a, 8}})}}, pointer_key({a}), ranges);
  (void)rb.learn(graph_image{{kernel({{b, 8}})}}, pointer_key({b}), clean, ranges);
  ASSERT_TRUE(rb.can_patch(pointer_key({b}), pointer_key({a})));
  const std::string note = rb.learn(graph_image{{kernel({{a, 8}}), kernel({{a, 8}})}}, pointer_key({a}), clean, ranges);
  EXPECT_NE(note.find("learnt again"), std::string::npos) << note;
  EXPECT_FALSE(rb.can_patch(pointer_key({a}), pointer_key({b})));
}

// ---- holes found in review ------------------------------------------------------------------------------------

// Allocations in two 4 GiB windows (addresses whose upper 32 bits are not 0, as real device addresses are):
// [0x7f0000000000, +1 MiB), [0x7f0010000000, +1 MiB) and [0x7e0000000000, +1 MiB).
std::optional<std::pair<std::uint64_t, std::uint64_t>> far_ranges(std::uint64_t p) {
  for (std::uint64_t base : {0x7f0000000000ULL, 0x7f0010000000ULL, 0x7e0000000000ULL})
    if (p >= base && p < base + (1U << 20)) return std::make_pair(base, std::uint64_t{1} << 20);
  return std::nullopt;
}

template <class T>
call_key struct_key(const T& value, std::size_t position = 0) {
  call_key k;
  k.add_bytes(&value, sizeof value, argument_role::binding, position);
  return k;
}

TEST(Rebind, AFieldThatStartsHoldingAVerifiedArgumentIsVerifiedAgainBeforeItIsPatched) {
  // The callable passes b to node 1, or a when b is null: a is verified at node 0 only; once b becomes null node 1
  // holds a too, and a patch of node 0 alone would leave node 1 at a's old value.
  const std::uint64_t a1 = 0x10000, a2 = 0x2000000, a3 = 0x900040, b = 0x900000;
  auto graph_for = [](std::uint64_t p, std::uint64_t q) {
    return graph_image{{kernel({{p, 8}}), kernel({{q != 0 ? q : p, 8}})}};
  };
  rebinder rb(learning());
  rb.start(graph_for(a1, b), pointer_key({a1, b}), ranges);
  (void)rb.learn(graph_for(a2, b), pointer_key({a2, b}), clean, ranges); // a verified at node 0
  const std::string note = rb.learn(graph_for(a2, 0), pointer_key({a2, 0}), clean, ranges);
  EXPECT_NE(note.find("argument 1 re-captures from now on"), std::string::npos) << note;
  std::string why;
  EXPECT_FALSE(rb.can_patch(pointer_key({a2, 0}), pointer_key({a3, 0}), &why)) << "node 1 would keep a's old value";
  EXPECT_EQ(rb.bindings({})[0].state, binding_state::learning) << rb.bindings({})[0].reason;
  // The re-capture confirms node 1; from then on both nodes are patched.
  const std::string again = rb.learn(graph_for(a3, 0), pointer_key({a3, 0}), clean, ranges);
  EXPECT_NE(again.find("argument 0 verified (2 node field(s))"), std::string::npos) << again;
  ASSERT_TRUE(rb.can_patch(pointer_key({a3, 0}), pointer_key({a1, 0}), &why)) << why;
  EXPECT_EQ(rb.patch(pointer_key({a3, 0}), pointer_key({a1, 0})), (std::vector<std::size_t>{0, 1}));
  for (std::size_t n = 0; n < 2; ++n) EXPECT_EQ(rb.image().nodes[n].bytes, graph_for(a1, 0).nodes[n].bytes) << n;
}

TEST(Rebind, AFieldThatStartsHoldingAVerifiedArgumentInUnlearntReCapturesIsFoundByRefresh) {
  // As above, but b already re-captures for good (transformed), so its re-captures are not learnt from: the image is
  // refreshed before the next patch.
  const std::uint64_t a1 = 0x10000, a2 = 0x2000000, a3 = 0x900040, b1 = 0x900000, b2 = 0x900100;
  auto graph_for = [](std::uint64_t p, std::uint64_t q) {
    return graph_image{{kernel({{p, 8}}), kernel({{q != 0 ? q + 0x5000000 : p, 8}})}};
  };
  rebinder rb(learning());
  rb.start(graph_for(a1, b1), pointer_key({a1, b1}), ranges);
  (void)rb.learn(graph_for(a2, b1), pointer_key({a2, b1}), clean, ranges); // a verified
  (void)rb.learn(graph_for(a2, b2), pointer_key({a2, b2}), clean, ranges); // b transformed: re-captures
  ASSERT_FALSE(rb.can_learn(pointer_key({a2, b2}), pointer_key({a2, 0})));
  rb.mark_stale();
  const std::string note = rb.refresh(graph_for(a2, 0), pointer_key({a2, 0}), ranges);
  std::string why;
  EXPECT_FALSE(rb.can_patch(pointer_key({a2, 0}), pointer_key({a3, 0}), &why)) << note;
}

TEST(Rebind, AnIntegerAndAWordOfAnotherArgumentInOneFieldAreAmbiguous) {
  // Argument 0, a 64-bit integer, fills a 64-bit parameter whose upper half equals word 1 of argument 1 (a struct
  // of two 32-bit values), and both changed together: either could own bytes 4..7, so neither may be patched.
  struct two_words {
    std::uint32_t x, y;
  };
  auto key_for = [](std::uint64_t n, std::uint32_t y) {
    call_key k;
    k.add(n, argument_role::binding, argument_kind::integer, 0, 8);
    const two_words w{7, y};
    k.add_bytes(&w, sizeof w, argument_role::binding, 1);
    return k;
  };
  auto graph_for = [](std::uint64_t n) { return graph_image{{kernel({{n, 8}})}}; };
  rebinder rb(learning());
  rb.start(graph_for(0x5000003E8ULL), key_for(0x5000003E8ULL, 5), ranges);
  (void)rb.learn(graph_for(0x6000005DCULL), key_for(0x6000005DCULL, 6), clean, ranges);
  // Argument 1 alone changes: a patch would write 9 into the upper half of argument 0's parameter.
  std::string why;
  EXPECT_FALSE(rb.can_patch(key_for(0x6000005DCULL, 6), key_for(0x6000005DCULL, 9), &why));
  EXPECT_NE(why.find("in the same bytes"), std::string::npos) << why;
}

TEST(Rebind, TwoWordsOfOneStructClaimingTheSameFieldAreAmbiguous) {
  // A {begin, end} pair inside one allocation, passed as (begin + 64, end): while its length stays the same, begin
  // and end both explain both parameters; a patch that changes the length would write one word over the other.
  struct range_of {
    std::uint64_t begin, end;
  };
  auto graph_for = [](std::uint64_t b, std::uint64_t e) { return graph_image{{kernel({{b + 64, 8}, {e, 8}})}}; };
  const std::uint64_t b1 = 0x10000, b2 = 0x900000, b3 = 0x2000000;
  rebinder rb(learning());
  rb.start(graph_for(b1, b1 + 4096), struct_key(range_of{b1, b1 + 4096}), ranges);
  (void)rb.learn(graph_for(b2, b2 + 4096), struct_key(range_of{b2, b2 + 4096}), clean, ranges);
  const auto from = struct_key(range_of{b2, b2 + 4096});
  const auto to = struct_key(range_of{b3, b3 + 8192});
  if (rb.can_patch(from, to)) {
    (void)rb.patch(from, to);
    EXPECT_EQ(rb.image().nodes[0].bytes, graph_for(b3, b3 + 8192).nodes[0].bytes) << "a word patched over the other";
  }
  EXPECT_EQ(rb.bindings({})[0].state, binding_state::recaptured) << rb.bindings({})[0].reason;
  EXPECT_NE(rb.bindings({})[0].reason.find("in the same bytes"), std::string::npos) << rb.bindings({})[0].reason;
}

TEST(Rebind, AScalarWhoseTypeChangesIsNotPatchedWithTheOldWidth) {
  // A generic callable called with a float, then with a double at the same position (same shape): the float's
  // 4-byte word must not be patched with the double's low bytes.
  auto float_key = [](float a) {
    call_key k;
    k.add(float_bits(a), argument_role::binding, argument_kind::floating, 0, 4);
    return k;
  };
  auto double_key = [](double a) {
    call_key k;
    std::uint64_t bits = 0;
    std::memcpy(&bits, &a, 8);
    k.add(bits, argument_role::binding, argument_kind::floating, 0, 8);
    return k;
  };
  auto graph_for = [](float a) { return graph_image{{kernel({{float_bits(a), 4}})}}; };
  rebinder rb(learning());
  rb.start(graph_for(2.0F), float_key(2.0F), ranges);
  (void)rb.learn(graph_for(3.0F), float_key(3.0F), clean, ranges);
  ASSERT_TRUE(rb.can_patch(float_key(3.0F), float_key(5.0F)));
  std::string why;
  EXPECT_FALSE(rb.can_patch(float_key(3.0F), double_key(5.0), &why));
  // A struct of another size at the same position likewise.
  struct small {
    std::uint32_t a, b;
  };
  struct large {
    std::uint32_t a, b, c, d;
  };
  auto graph_of = [](std::uint32_t a) { return graph_image{{kernel({{a, 4}, {0x5555, 4}})}}; };
  rebinder rs(learning());
  rs.start(graph_of(11), struct_key(small{11, 1}), ranges);
  (void)rs.learn(graph_of(12), struct_key(small{12, 1}), clean, ranges);
  ASSERT_TRUE(rs.can_patch(struct_key(small{12, 1}), struct_key(small{13, 1})));
  EXPECT_FALSE(rs.can_patch(struct_key(small{12, 1}), struct_key(large{13, 1, 2, 3})));
}

TEST(Rebind, ADeclaredPointerIsNotPatchedIntoAFieldAnotherArgumentHolds) {
  // The same pointer passed twice (in place) at the first call; argument 0 is declared patch, argument 1 is not.
  const std::uint64_t p = 0x10000, q = 0x900000, r = 0x2000000;
  auto graph_for = [](std::uint64_t in, std::uint64_t out) {
    return graph_image{{kernel({{in, 8}}), kernel({{out, 8}})}};
  };
  conveyor::detail::rebind_settings declared = learning();
  declared.per_argument = {{0, rebind_policy::patch}};
  rebinder rb(declared);
  rb.start(graph_for(p, p), pointer_key({p, p}), ranges);
  if (rb.can_patch(pointer_key({p, p}), pointer_key({q, p}))) {
    (void)rb.patch(pointer_key({p, p}), pointer_key({q, p}));
    EXPECT_EQ(rb.image().nodes[1].bytes, graph_for(q, p).nodes[1].bytes) << "argument 1's node patched with argument 0";
  } else {
    EXPECT_NE(rb.bindings({})[0].reason.find("declared rebind_policy::patch"), std::string::npos);
    // Settled by one re-capture; then patched, into its own node only.
    (void)rb.learn(graph_for(q, p), pointer_key({q, p}), clean, ranges);
    ASSERT_TRUE(rb.can_patch(pointer_key({q, p}), pointer_key({r, p})));
    EXPECT_EQ(rb.patch(pointer_key({q, p}), pointer_key({r, p})), std::vector<std::size_t>{0});
    EXPECT_EQ(rb.image().nodes[1].bytes, graph_for(r, p).nodes[1].bytes);
  }
  // A static pointer inside the declared pointer's allocation: its field is not the declared argument's.
  call_key k1, k2;
  k1.add(p, argument_role::binding, argument_kind::pointer, 0);
  k1.add(p + 0x8000, argument_role::static_pointer, argument_kind::pointer, 1);
  k2.add(q, argument_role::binding, argument_kind::pointer, 0);
  k2.add(p + 0x8000, argument_role::static_pointer, argument_kind::pointer, 1);
  rebinder rs(declared);
  rs.start(graph_for(p, p + 0x8000), k1, ranges);
  call_key k3;
  k3.add(r, argument_role::binding, argument_kind::pointer, 0);
  k3.add(p + 0x8000, argument_role::static_pointer, argument_kind::pointer, 1);
  if (rs.can_patch(k1, k2)) {
    (void)rs.patch(k1, k2);
    EXPECT_EQ(rs.image().nodes[1].bytes, graph_for(q, p + 0x8000).nodes[1].bytes) << "the static pointer was patched";
  } else {
    (void)rs.learn(graph_for(q, p + 0x8000), k2, clean, ranges);
    ASSERT_TRUE(rs.can_patch(k2, k3));
    EXPECT_EQ(rs.patch(k2, k3), std::vector<std::size_t>{0});
  }
}

TEST(Rebind, TheHalvesOfAPointerInsideAStructAreNotLookedForInOtherPointers) {
  // A declared struct holding a pointer: its upper 32 bits equal the upper 32 bits of every pointer in the same
  // 4 GiB window (node 1's, which no argument holds); moving it to another window must not rewrite those.
  struct holder {
    std::uint64_t p;
  };
  const std::uint64_t p1 = 0x7f0000001000, p2 = 0x7e0000001000, weights = 0x7f0010000000;
  auto graph_for = [&](std::uint64_t p) { return graph_image{{kernel({{p, 8}}), kernel({{weights, 8}})}}; };
  conveyor::detail::rebind_settings declared = learning();
  declared.per_argument = {{0, rebind_policy::patch}};
  rebinder rb(declared);
  rb.start(graph_for(p1), struct_key(holder{p1}), far_ranges);
  ASSERT_TRUE(rb.can_patch(struct_key(holder{p1}), struct_key(holder{p2})));
  (void)rb.patch(struct_key(holder{p1}), struct_key(holder{p2}));
  EXPECT_EQ(rb.image().nodes[0].bytes, graph_for(p2).nodes[0].bytes);
  EXPECT_EQ(rb.image().nodes[1].bytes, graph_for(p2).nodes[1].bytes) << "node 1's pointer rewritten";
  // Learnt (automatic): two pointers of a struct moving to another window together are not called transformed.
  struct two {
    std::uint64_t in, out;
  };
  const std::uint64_t q1 = 0x7f0010000100, q2 = 0x7e0000080000;
  auto graph_of = [](std::uint64_t in, std::uint64_t out) { return graph_image{{kernel({{in, 8}, {out, 8}})}}; };
  rebinder ra(learning());
  ra.start(graph_of(p1, q1), struct_key(two{p1, q1}), far_ranges);
  const std::string note = ra.learn(graph_of(p2, q2), struct_key(two{p2, q2}), clean, far_ranges);
  EXPECT_EQ(ra.bindings({})[0].state, binding_state::patched) << note;
  // in moves back to the first window, out stays: out's upper half is out's, not in's.
  if (ra.can_patch(struct_key(two{p2, q2}), struct_key(two{p1, q2}))) {
    (void)ra.patch(struct_key(two{p2, q2}), struct_key(two{p1, q2}));
    EXPECT_EQ(ra.image().nodes[0].bytes, graph_of(p1, q2).nodes[0].bytes);
  }
}

TEST(Rebind, ChangesOfAnArgumentThatReCapturesAreNotBlamedOnAnother) {
  // Argument 1 is declared recapture (the callable negates it); argument 0 is a plain pointer. When both change in
  // one re-capture, node 1's change is argument 1's: argument 0 must not be sent to re-capture for it.
  auto key_for = [](std::uint64_t p, float lr) {
    call_key k;
    k.add(p, argument_role::binding, argument_kind::pointer, 0);
    k.add(float_bits(lr), argument_role::binding, argument_kind::floating, 1, 4);
    return k;
  };
  auto graph_for = [](std::uint64_t p, float lr) {
    return graph_image{{kernel({{p, 8}}), kernel({{float_bits(-lr), 4}})}};
  };
  conveyor::detail::rebind_settings settings = learning();
  settings.per_argument = {{1, rebind_policy::recapture}};
  rebinder rb(settings);
  const std::uint64_t a = 0x10000, b = 0x900000, c = 0x2000000;
  rb.start(graph_for(a, 0.1F), key_for(a, 0.1F), ranges);
  const std::string note = rb.learn(graph_for(b, 0.2F), key_for(b, 0.2F), clean, ranges);
  EXPECT_EQ(note.find("argument 0 re-captures"), std::string::npos) << note;
  EXPECT_NE(rb.bindings({})[0].state, binding_state::recaptured) << rb.bindings({})[0].reason;
  // Alone, it is verified.
  (void)rb.learn(graph_for(c, 0.2F), key_for(c, 0.2F), clean, ranges);
  EXPECT_TRUE(rb.can_patch(key_for(c, 0.2F), key_for(a, 0.2F)));
  // The same after re-captures of argument 1 alone that were not learnt from (the image is stale).
  rebinder rs(settings);
  rs.start(graph_for(a, 0.1F), key_for(a, 0.1F), ranges);
  ASSERT_FALSE(rs.can_learn(key_for(a, 0.1F), key_for(a, 0.3F)));
  rs.mark_stale();
  const std::string later = rs.learn(graph_for(b, 0.4F), key_for(b, 0.4F), clean, ranges);
  EXPECT_NE(rs.bindings({})[0].state, binding_state::recaptured) << later;
}

TEST(Rebind, TwoPointersInOneAllocationMovingApartTogetherAreNotCalledTransformed) {
  // in and out start inside one allocation (each a candidate of the other at an offset) and both move, to
  // different allocations, in one re-capture: each field follows its own argument exactly.
  const std::uint64_t in1 = 0x10000, out1 = 0x11000, in2 = 0x900000, out2 = 0x2000000, in3 = 0x900800;
  auto graph_for = [](std::uint64_t in, std::uint64_t out) {
    return graph_image{{kernel({{in, 8}, {out, 8}}), kernel({{out, 8}})}};
  };
  rebinder rb(learning());
  rb.start(graph_for(in1, out1), pointer_key({in1, out1}), ranges);
  const std::string note = rb.learn(graph_for(in2, out2), pointer_key({in2, out2}), clean, ranges);
  EXPECT_EQ(note.find("transforms"), std::string::npos) << note;
  const auto map = rb.bindings({});
  EXPECT_EQ(map[0].state, binding_state::patched) << map[0].reason;
  EXPECT_EQ(map[1].state, binding_state::patched) << map[1].reason;
  ASSERT_TRUE(rb.can_patch(pointer_key({in2, out2}), pointer_key({in3, out2})));
  EXPECT_EQ(rb.patch(pointer_key({in2, out2}), pointer_key({in3, out2})), std::vector<std::size_t>{0});
  for (std::size_t n = 0; n < 2; ++n) EXPECT_EQ(rb.image().nodes[n].bytes, graph_for(in3, out2).nodes[n].bytes) << n;
}

TEST(Rebind, ADeclaredRealSizeIsNotPatchedIntoThePaddedSizesFields) {
  // rebind_policy::patch for every argument, and a batch_size captured full (real == padded == 128): node 0 masks by
  // the real size, node 1 loops over the padded one. A partial batch must not write 96 into node 1.
  auto key_for = [](std::uint64_t real) {
    call_key k;
    k.add(128, argument_role::shape, argument_kind::padded_size, 0);
    k.add(real, argument_role::binding, argument_kind::real_size, 0);
    return k;
  };
  auto graph_for = [](std::uint64_t real) { return graph_image{{kernel({{real, 4}}), kernel({{128, 4}})}}; };
  conveyor::detail::rebind_settings all_declared = learning();
  all_declared.policy = rebind_policy::patch;
  rebinder rb(all_declared);
  rb.start(graph_for(128), key_for(128), ranges);
  if (rb.can_patch(key_for(128), key_for(96))) {
    (void)rb.patch(key_for(128), key_for(96));
    EXPECT_EQ(rb.image().nodes[1].bytes, graph_for(96).nodes[1].bytes) << "the padded size was patched";
  } else {
    (void)rb.learn(graph_for(96), key_for(96), clean, ranges);
    ASSERT_TRUE(rb.can_patch(key_for(96), key_for(77)));
    EXPECT_EQ(rb.patch(key_for(96), key_for(77)), std::vector<std::size_t>{0});
  }
}

} // namespace
