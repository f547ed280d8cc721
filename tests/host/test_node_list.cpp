// Host-only tests of node_list, the dependency list every builder call takes (no CUDA call is made: node handles
// are only carried, never dereferenced).
#include <conveyor/define/node.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace {

cudaGraphNode_t fake_handle(std::uintptr_t i) { return reinterpret_cast<cudaGraphNode_t>(0x1000 + 16 * i); }
conveyor::detail::graph_state* fake_owner(std::uintptr_t i) {
  return reinterpret_cast<conveyor::detail::graph_state*>(0x9000 + 64 * i);
}

std::vector<conveyor::node> make_nodes(std::size_t count, std::uintptr_t owner = 1) {
  std::vector<conveyor::node> nodes;
  for (std::size_t i = 0; i < count; ++i) nodes.emplace_back(fake_handle(i), fake_owner(owner));
  return nodes;
}

void expect_same(const conveyor::node_list& list, const std::vector<conveyor::node>& nodes) {
  ASSERT_EQ(list.size(), nodes.size());
  const auto handles = list.handles();
  ASSERT_EQ(handles.size(), nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(handles[i], nodes[i].get()) << i;
    EXPECT_EQ(list[i].get(), nodes[i].get()) << i;
    EXPECT_EQ(list[i].owner(), nodes[i].owner()) << i;
  }
}

TEST(NodeList, BracedListVectorAndSpanKeepOrder) {
  const auto nodes = make_nodes(3);
  expect_same(conveyor::node_list{nodes[0], nodes[1], nodes[2]}, nodes);
  expect_same(conveyor::node_list(nodes), nodes);
  expect_same(conveyor::node_list(std::span<const conveyor::node>(nodes)), nodes);
  EXPECT_TRUE(conveyor::node_list{}.empty());
  EXPECT_EQ(conveyor::node_list{}.handles().size(), 0U);
}

TEST(NodeList, MoreThanTheInlineCapacityGoesToTheHeapAndCopiesStayValid) {
  for (std::size_t count : {conveyor::node_list::inline_capacity, conveyor::node_list::inline_capacity + 1,
                            std::size_t{40}}) {
    const auto nodes = make_nodes(count);
    const conveyor::node_list original(nodes);
    expect_same(original, nodes);
    const conveyor::node_list copy = original; // must not point into `original`'s storage
    expect_same(copy, nodes);
    if (count <= conveyor::node_list::inline_capacity) {
      EXPECT_NE(copy.handles().data(), original.handles().data());
    }
  }
}

TEST(NodeList, AllInChecksEveryOwner) {
  auto nodes = make_nodes(12, 1);
  EXPECT_TRUE(conveyor::node_list(nodes).all_in(fake_owner(1)));
  EXPECT_FALSE(conveyor::node_list(nodes).all_in(fake_owner(2)));
  nodes[11] = conveyor::node(fake_handle(11), fake_owner(2)); // one of another graph, on the heap part
  EXPECT_FALSE(conveyor::node_list(nodes).all_in(fake_owner(1)));
  EXPECT_TRUE(conveyor::node_list{}.all_in(fake_owner(1)));
}

TEST(NodeList, EmptyNodeIsRejected) {
  auto nodes = make_nodes(2);
  nodes.emplace_back(); // an empty handle
  try {
    conveyor::node_list list(nodes);
    FAIL() << "an empty node was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("empty node handle"), std::string::npos) << e.what();
  }
}

} // namespace
