// GPU tests of conveyor::graph's explicit builder: every node kind, run on real data and checked against a host
// computation; dependencies, labels, clone, and the argument checks. Each test skips without a CUDA device.

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"
#include "support/moved_from.hpp"

#include <conveyor/conveyor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using conveyor::test::all_equal;
using conveyor::test::all_near;
using conveyor::test::cover;
using conveyor::test::device_array;
using conveyor::test::pinned_array;
using conveyor::test::pitched_array;
using conveyor::test::random_floats;
using conveyor::test::random_ints;
using conveyor::test::random_scalar;
using conveyor::test::sync_device;

// ---- kernels (shared: gpu/test_kernels.cuh) ----------------------------------------------------------------------

using namespace conveyor::test::kernels;

namespace {

constexpr long long spin_cycles = 20'000'000; // ~10 ms at H200 clocks

std::vector<float> host_axpy(float a, const std::vector<float>& x, std::vector<float> y) {
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = a * x[i] + y[i];
  return y;
}

// Host node callables run on a CUDA thread: a small thread-safe record of what they saw.
struct host_log {
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::vector<std::vector<int>> snapshots;
};

} // namespace

// ---- kernel nodes -------------------------------------------------------------------------------------------------

TEST(Builder, KernelNodeWithTypedArgumentsComputesAxpy) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1000; // not a multiple of the block: the bounds check matters
  const auto x0 = random_floats(n, 101);
  const auto y0 = random_floats(n, 102);
  float a = random_scalar(103, 0.5F, 4.0F);
  const float a_used = a;
  device_array<float> x(x0), y(y0);
  sync_device();

  conveyor::graph g;
  auto k = g.kernel(cover(n), axpy, n, a, x.get(), y.get());
  a = 1000.0F; // the node holds a copy of the argument, not a reference
  EXPECT_EQ(k.kind(), conveyor::node_kind::kernel);
  EXPECT_EQ(g.node_count(), 1U);
  EXPECT_EQ(g.edge_count(), 0U);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(y.download(), host_axpy(a_used, x0, y0)));
  EXPECT_TRUE(all_equal(x.download(), x0)); // input untouched
}

TEST(Builder, KernelArgumentsAreConvertedToParameterTypes) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 777;
  const auto x0 = random_floats(n, 111);
  const auto y0 = random_floats(n, 112);
  device_array<float> x(x0), y(y0);
  sync_device();

  conveyor::graph g;
  const long count = n; // long -> int
  const int a = 3;      // int -> float: stored as 3.0f, not as the int's bit pattern
  float* xp = x.get();  // float* -> const float*
  g.kernel(cover(n), axpy, count, a, xp, y.get());

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_near(y.download(), host_axpy(3.0F, x0, y0)));
}

// ---- memcpy -------------------------------------------------------------------------------------------------------

TEST(Builder, Memcpy1DHostToDeviceDeviceToDeviceDeviceToHost) {
  CONVEYOR_REQUIRE_GPU();
  const std::size_t n = 4099;
  const auto in_values = random_floats(n, 201);
  pinned_array<float> in(n), out(n);
  in.assign(in_values);
  out.assign(random_floats(n, 202)); // stale values that a missing copy would leave behind
  device_array<float> d1(random_floats(n, 203)), d2(random_floats(n, 204));
  sync_device();

  conveyor::graph g;
  auto h2d = g.memcpy(d1.get(), in.get(), in.bytes(), cudaMemcpyHostToDevice);
  auto d2d = g.memcpy({h2d}, d2.get(), d1.get(), d1.bytes(), cudaMemcpyDeviceToDevice);
  auto d2h = g.memcpy({d2d}, out.get(), d2.get(), d2.bytes(), cudaMemcpyDeviceToHost);
  EXPECT_EQ(h2d.kind(), conveyor::node_kind::memcpy);
  EXPECT_EQ(d2d.kind(), conveyor::node_kind::memcpy);
  EXPECT_EQ(d2h.kind(), conveyor::node_kind::memcpy);
  EXPECT_EQ(g.node_count(), 3U);
  EXPECT_EQ(g.edge_count(), 2U);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(d1.download(), in_values));
  EXPECT_TRUE(all_equal(d2.download(), in_values));
  EXPECT_TRUE(all_equal(out.to_vector(), in_values));
}

TEST(Builder, Memcpy2DCopiesOnlyTheSubRectangle) {
  CONVEYOR_REQUIRE_GPU();
  // Source 70 x 40 floats; destination 100 x 50 floats. Copy a 33-wide, 21-high block from the source's origin to
  // row 5, column 4 of the destination.
  const std::size_t sw = 70, sh = 40, dw = 100, dh = 50;
  const std::size_t cw = 33, ch = 21, row0 = 5, col0 = 4;
  const auto src_values = random_floats(sw * sh, 211);
  const auto dst_values = random_floats(dw * dh, 212);
  pitched_array<float> src(sw, sh), dst(dw, dh);
  src.upload(src_values);
  dst.upload(dst_values);
  ASSERT_GE(src.pitch(), sw * sizeof(float));
  ASSERT_GE(dst.pitch(), dw * sizeof(float));

  conveyor::graph g;
  auto m = g.memcpy_2d(dst.at(row0, col0), dst.pitch(), src.get(), src.pitch(), cw * sizeof(float), ch,
                       cudaMemcpyDeviceToDevice);
  EXPECT_EQ(m.kind(), conveyor::node_kind::memcpy);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();

  auto want = dst_values;
  for (std::size_t r = 0; r < ch; ++r)
    for (std::size_t c = 0; c < cw; ++c) want[(row0 + r) * dw + (col0 + c)] = src_values[r * sw + c];
  EXPECT_TRUE(all_equal(dst.download(), want)); // inside copied, outside untouched
  EXPECT_TRUE(all_equal(src.download(), src_values));
}

TEST(Builder, Memcpy2DRejectsPitchSmallerThanRowWidth) {
  CONVEYOR_REQUIRE_GPU();
  pitched_array<float> a(64, 4), b(64, 4);
  conveyor::graph g;
  EXPECT_THROW((void)g.memcpy_2d(a.get(), 16, b.get(), b.pitch(), 64 * sizeof(float), 4), std::invalid_argument);
  EXPECT_THROW((void)g.memcpy_2d(a.get(), a.pitch(), b.get(), 16, 64 * sizeof(float), 4), std::invalid_argument);
  EXPECT_EQ(g.node_count(), 0U);
}

// ---- memset -------------------------------------------------------------------------------------------------------

namespace {

// Fills elements [offset, offset + count) of a random buffer with `value` through a memset node and checks that
// exactly those changed, bit for bit.
template <class T>
void check_memset(T value, std::size_t size, std::size_t offset, std::size_t count, unsigned seed) {
  std::vector<T> before;
  if constexpr (std::is_floating_point_v<T>) before = random_floats(size, seed);
  else before = random_ints<T>(size, seed, 0, static_cast<long long>(std::numeric_limits<T>::max()));
  device_array<T> buf(before);
  sync_device();

  conveyor::graph g;
  auto m = g.memset(buf.get() + offset, value, count);
  EXPECT_EQ(m.kind(), conveyor::node_kind::memset);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();

  auto want = before;
  for (std::size_t i = offset; i < offset + count; ++i) want[i] = value;
  auto got = buf.download();
  if constexpr (std::is_floating_point_v<T>) {
    // Compare bit patterns: the node writes the value's 4 bytes.
    std::vector<std::uint32_t> got_bits(size), want_bits(size);
    std::memcpy(got_bits.data(), got.data(), size * sizeof(T));
    std::memcpy(want_bits.data(), want.data(), size * sizeof(T));
    EXPECT_TRUE(all_equal(got_bits, want_bits));
  } else {
    EXPECT_TRUE(all_equal(got, want));
  }
}

} // namespace

TEST(Builder, MemsetFloatFourBytes) {
  CONVEYOR_REQUIRE_GPU();
  check_memset<float>(-3.375F, 3001, 17, 2900, 301);
}

TEST(Builder, MemsetUint32FourBytes) {
  CONVEYOR_REQUIRE_GPU();
  check_memset<std::uint32_t>(0xDEADBEEFU, 3001, 5, 2990, 302);
}

TEST(Builder, MemsetUint16TwoBytes) {
  CONVEYOR_REQUIRE_GPU();
  check_memset<std::uint16_t>(0xBEEF, 5003, 3, 4001, 303);
}

TEST(Builder, MemsetUint8OneByte) {
  CONVEYOR_REQUIRE_GPU();
  check_memset<std::uint8_t>(0xA5, 8191, 1, 8000, 304);
}

// 8-byte values whose halves are equal (0.0, -1) are set as twice as many 4-byte elements; 1.0 is refused with
// the reason. An allocation's typed view is its pointer.
TEST(Builder, MemsetOfEightByteValuesWithEqualHalves) {
  CONVEYOR_REQUIRE_GPU();
  const std::size_t size = 2001;
  std::vector<double> doubles(size);
  std::vector<std::int64_t> longs(size);
  const auto r = random_floats(size, 305);
  for (std::size_t i = 0; i < size; ++i) {
    doubles[i] = 1.0 + r[i];
    longs[i] = static_cast<std::int64_t>(i) * 977;
  }
  device_array<double> d(doubles);
  device_array<std::int64_t> l(longs);
  sync_device();
  conveyor::graph g;
  (void)g.memset(d.get() + 3, 0.0, 1000);
  (void)g.memset(l.get() + 5, std::int64_t{-1}, 700);
  try {
    (void)g.memset(d.get(), 1.0, 10);
    FAIL() << "a double with different halves was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("halves differ"), std::string::npos) << e.what();
  }
  const auto a = g.mem_alloc(64);
  EXPECT_EQ(static_cast<void*>(a.as<float>()), a.pointer);
  (void)g.mem_free({a.node}, a.pointer);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  const auto gd = d.download();
  const auto gl = l.download();
  for (std::size_t i = 0; i < size; ++i) {
    ASSERT_EQ(gd[i], i >= 3 && i < 1003 ? 0.0 : doubles[i]) << i;
    ASSERT_EQ(gl[i], i >= 5 && i < 705 ? std::int64_t{-1} : longs[i]) << i;
  }
}

TEST(Builder, Memset2DSetsOnlyTheSubRectangle) {
  CONVEYOR_REQUIRE_GPU();
  const std::size_t w = 90, h = 30;                   // buffer, in uint16 elements
  const std::size_t cw = 41, ch = 17, r0 = 6, c0 = 9; // block to set
  const std::uint16_t value = 0x5A3C;
  const auto before = random_ints<std::uint16_t>(w * h, 311, 0, 65535);
  pitched_array<std::uint16_t> buf(w, h);
  buf.upload(before);

  conveyor::graph g;
  auto m = g.memset_2d({}, buf.at(r0, c0), buf.pitch(), value, 2, cw, ch);
  EXPECT_EQ(m.kind(), conveyor::node_kind::memset);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();

  auto want = before;
  for (std::size_t r = 0; r < ch; ++r)
    for (std::size_t c = 0; c < cw; ++c) want[(r0 + r) * w + (c0 + c)] = value;
  EXPECT_TRUE(all_equal(buf.download(), want));
}

TEST(Builder, MemsetElementSizeThreeIsRejected) {
  CONVEYOR_REQUIRE_GPU();
  device_array<std::uint8_t> buf(300);
  conveyor::graph g;
  EXPECT_THROW((void)g.memset_2d({}, buf.get(), 0, 7, 3, 100, 1), std::invalid_argument);
  EXPECT_THROW((void)g.memset_2d({}, buf.get(), 0, 7, 8, 10, 1), std::invalid_argument);
  EXPECT_EQ(g.node_count(), 0U);
}

// ---- host nodes ---------------------------------------------------------------------------------------------------

TEST(Builder, HostNodeRunsOnEveryReplayAfterItsDependencies) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 513;
  const auto x0 = random_ints<int>(n, 401, -100000, 100000);
  device_array<int> x(x0);
  pinned_array<int> seen(n);
  seen.assign(random_ints<int>(n, 402, -5, 5));
  sync_device();

  host_log log;
  const int* seen_ptr = seen.get();
  conveyor::graph g;
  auto k = g.kernel(cover(n), increment_all, n, x.get());
  auto d2h = g.memcpy({k}, seen.get(), x.get(), x.bytes(), cudaMemcpyDeviceToHost);
  auto h = g.host({d2h}, [&log, seen_ptr, n] {
    std::vector<int> copy(seen_ptr, seen_ptr + n); // what the preceding copy delivered
    std::lock_guard lock(log.mutex);
    log.snapshots.push_back(std::move(copy));
    log.calls.fetch_add(1);
  });
  EXPECT_EQ(h.kind(), conveyor::node_kind::host);
  EXPECT_EQ(log.calls.load(), 0); // adding the node does not call it

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  const int launches = 5;
  for (int i = 0; i < launches; ++i) exec.launch(s);
  s.synchronize();

  EXPECT_EQ(log.calls.load(), launches);
  std::lock_guard lock(log.mutex);
  ASSERT_EQ(log.snapshots.size(), static_cast<std::size_t>(launches));
  for (int r = 0; r < launches; ++r) {
    auto want = x0;
    for (auto& v : want) v += r + 1; // replay r saw the data after r + 1 increments
    EXPECT_TRUE(all_equal(log.snapshots[r], want)) << "replay " << r;
  }
  auto final_want = x0;
  for (auto& v : final_want) v += launches;
  EXPECT_TRUE(all_equal(x.download(), final_want));
}

// ---- child graphs -------------------------------------------------------------------------------------------------

TEST(Builder, ChildGraphRunsBodyAndIsACopy) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1500;
  const auto x0 = random_floats(n, 501);
  device_array<float> x(x0);
  sync_device();

  conveyor::graph body;
  auto b1 = body.kernel(cover(n), scale, n, 2.0F, x.get());
  auto b2 = body.kernel({b1}, cover(n), add_scalar, n, 1.0F, x.get());

  conveyor::graph parent;
  auto c = parent.child(body);
  auto after = parent.kernel({c}, cover(n), add_scalar, n, 5.0F, x.get());
  EXPECT_EQ(c.kind(), conveyor::node_kind::child_graph);
  EXPECT_EQ(parent.node_count(), 2U);
  ASSERT_EQ(after.dependencies().size(), 1U);
  EXPECT_EQ(after.dependencies()[0], c);

  // Changing the body after insertion must not reach the parent's copy.
  body.kernel({b2}, cover(n), scale, n, 10.0F, x.get());
  EXPECT_EQ(body.node_count(), 3U);
  cudaGraph_t embedded = nullptr;
  CONVEYOR_CHECK(cudaGraphChildGraphNodeGetGraph(c.get(), &embedded));
  std::size_t embedded_nodes = 0;
  CONVEYOR_CHECK(cudaGraphGetNodes(embedded, nullptr, &embedded_nodes));
  EXPECT_EQ(embedded_nodes, 2U);

  conveyor::stream s;
  auto exec = conveyor::instantiate(parent);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = (x0[i] * 2.0F + 1.0F) + 5.0F;
  EXPECT_TRUE(all_near(x.download(), want));

  // The modified body itself does run its third node: the parent's result above is not the body's.
  x.upload(x0);
  sync_device();
  auto body_exec = conveyor::instantiate(body);
  body_exec.launch(s);
  s.synchronize();
  for (int i = 0; i < n; ++i) want[i] = (x0[i] * 2.0F + 1.0F) * 10.0F;
  EXPECT_TRUE(all_near(x.download(), want));
}

TEST(Builder, ChildGraphKeepsBodyResourcesAliveAfterBodyIsDestroyed) {
  CONVEYOR_REQUIRE_GPU();
  std::atomic<int> calls{0};
  const int n = 300;
  const auto x0 = random_floats(n, 511);
  device_array<float> x(x0);
  sync_device();

  conveyor::graph parent;
  {
    conveyor::graph body;
    auto k = body.kernel(cover(n), add_scalar, n, 1.5F, x.get());
    body.host({k}, [&calls] { calls.fetch_add(1); });
    parent.child(body);
  } // body and its std::function gone from this scope; the parent must keep the callable alive

  conveyor::stream s;
  auto exec = conveyor::instantiate(parent);
  for (int i = 0; i < 3; ++i) exec.launch(s);
  s.synchronize();
  EXPECT_EQ(calls.load(), 3);
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = ((x0[i] + 1.5F) + 1.5F) + 1.5F;
  EXPECT_TRUE(all_near(x.download(), want));
}

// ---- empty nodes --------------------------------------------------------------------------------------------------

TEST(Builder, EmptyNodeJoinsTwoBranches) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2048;
  const auto a0 = random_floats(n, 601);
  const auto b0 = random_floats(n, 602);
  device_array<float> a(a0), b(b0), out(random_floats(n, 603));
  sync_device();

  conveyor::graph g;
  auto ka = g.kernel(cover(n), spin_then_scale, n, 2.0F, a.get(), spin_cycles);
  auto kb = g.kernel(cover(n), add_scalar, n, 3.0F, b.get());
  auto join = g.empty({ka, kb});
  auto sum = g.kernel({join}, cover(n), add_vectors, n, a.get(), b.get(), out.get());
  EXPECT_EQ(join.kind(), conveyor::node_kind::empty);
  EXPECT_EQ(join.dependencies().size(), 2U);
  EXPECT_EQ(g.node_count(), 4U);
  EXPECT_EQ(g.edge_count(), 3U);
  ASSERT_EQ(sum.dependencies().size(), 1U);
  EXPECT_EQ(sum.dependencies()[0], join);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = a0[i] * 2.0F + (b0[i] + 3.0F);
  EXPECT_TRUE(all_near(out.download(), want));
}

// ---- event record / wait ------------------------------------------------------------------------------------------

TEST(Builder, EventRecordNodeOrdersAGraphWithAnEventWaitNode) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  const auto x0 = random_floats(n, 701);
  device_array<float> x(x0), y(random_floats(n, 702));
  sync_device();
  conveyor::event e(cudaEventDisableTiming);

  conveyor::graph producer;
  auto slow = producer.kernel(cover(n), spin_then_scale, n, 2.0F, x.get(), spin_cycles);
  auto rec = producer.event_record({slow}, e);
  EXPECT_EQ(rec.kind(), conveyor::node_kind::event_record);

  conveyor::graph consumer;
  auto wait = consumer.event_wait(e);
  consumer.kernel({wait}, cover(n), copy_plus, n, x.get(), 1.0F, y.get());
  EXPECT_EQ(wait.kind(), conveyor::node_kind::event_wait);

  conveyor::stream s1, s2;
  auto pexec = conveyor::instantiate(producer);
  auto cexec = conveyor::instantiate(consumer);
  pexec.launch(s1);
  cexec.launch(s2);
  s2.synchronize();
  s1.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * 2.0F + 1.0F; // read after the slow producer wrote
  EXPECT_TRUE(all_near(y.download(), want));
}

TEST(Builder, EventRecordNodeOrdersEagerWorkOnAnotherStream) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  const auto x0 = random_floats(n, 711);
  device_array<float> x(x0), y(random_floats(n, 712));
  sync_device();
  conveyor::event e(cudaEventDisableTiming);

  conveyor::graph producer;
  auto slow = producer.kernel(cover(n), spin_then_scale, n, 3.0F, x.get(), spin_cycles);
  producer.event_record({slow}, e);

  conveyor::stream s1, s2;
  auto pexec = conveyor::instantiate(producer);
  pexec.launch(s1);
  s2.wait(e);
  auto cfg = cover(n);
  copy_plus<<<cfg.grid, cfg.block, 0, s2.get()>>>(n, x.get(), -1.0F, y.get());
  conveyor::check_launch("copy_plus");
  s2.synchronize();
  s1.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * 3.0F - 1.0F;
  EXPECT_TRUE(all_near(y.download(), want));
}

TEST(Builder, EventWaitNodeWaitsForAnEagerRecord) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 4096;
  const auto x0 = random_floats(n, 721);
  device_array<float> x(x0), y(random_floats(n, 722));
  sync_device();
  conveyor::event e(cudaEventDisableTiming);

  conveyor::graph consumer;
  auto wait = consumer.event_wait(e);
  consumer.kernel({wait}, cover(n), copy_plus, n, x.get(), 0.5F, y.get());
  auto cexec = conveyor::instantiate(consumer);

  conveyor::stream s1, s2;
  auto cfg = cover(n);
  spin_then_scale<<<cfg.grid, cfg.block, 0, s1.get()>>>(n, -2.0F, x.get(), spin_cycles);
  conveyor::check_launch("spin_then_scale");
  e.record(s1);
  cexec.launch(s2);
  s2.synchronize();
  s1.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * -2.0F + 0.5F;
  EXPECT_TRUE(all_near(y.download(), want));
}

// ---- memory allocation nodes --------------------------------------------------------------------------------------

TEST(Builder, MemAllocAndMemFreeNodes) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 3000;
  const auto src1 = random_floats(n, 801);
  const auto src2 = random_floats(n, 802);
  device_array<float> src(src1), out(random_floats(n, 803));
  sync_device();

  conveyor::graph g;
  auto alloc = g.mem_alloc(n * sizeof(float));
  ASSERT_NE(alloc.pointer, nullptr);
  auto* tmp = static_cast<float*>(alloc.pointer);
  auto in = g.memcpy({alloc.node}, tmp, src.get(), src.bytes(), cudaMemcpyDeviceToDevice);
  auto k = g.kernel({in}, cover(n), scale, n, 2.0F, tmp);
  auto back = g.memcpy({k}, out.get(), tmp, out.bytes(), cudaMemcpyDeviceToDevice);
  auto fr = g.mem_free({back}, tmp);
  EXPECT_EQ(alloc.node.kind(), conveyor::node_kind::mem_alloc);
  EXPECT_EQ(fr.kind(), conveyor::node_kind::mem_free);
  EXPECT_EQ(g.node_count(), 5U);
  EXPECT_EQ(g.edge_count(), 4U);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = src1[i] * 2.0F;
  EXPECT_TRUE(all_near(out.download(), want));

  // The graph frees what it allocates, so it can run again.
  src.upload(src2);
  sync_device();
  exec.launch(s);
  s.synchronize();
  for (int i = 0; i < n; ++i) want[i] = src2[i] * 2.0F;
  EXPECT_TRUE(all_near(out.download(), want));
}

TEST(Builder, CloneOfAGraphWithAllocationNodesThrowsCudaError) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graph g;
  auto alloc = g.mem_alloc(1024);
  g.mem_free({alloc.node}, alloc.pointer);
  EXPECT_THROW((void)g.clone(), conveyor::cuda_error); // CUDA: graphs with memory nodes cannot be cloned
}

// ---- dependencies -------------------------------------------------------------------------------------------------

TEST(Builder, DependencyGivenAtInsertionOrdersTheChain) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  const auto x0 = random_floats(n, 901);
  device_array<float> x(x0);
  sync_device();

  conveyor::graph g;
  auto twice = g.kernel(cover(n), spin_then_scale, n, 2.0F, x.get(), spin_cycles / 4);
  auto plus1 = g.kernel({twice}, cover(n), add_scalar, n, 1.0F, x.get());
  EXPECT_EQ(g.node_count(), 2U);
  EXPECT_EQ(g.edge_count(), 1U);
  auto edges = g.edges();
  ASSERT_EQ(edges.size(), 1U);
  EXPECT_EQ(edges[0].first, twice);
  EXPECT_EQ(edges[0].second, plus1);
  ASSERT_EQ(plus1.dependencies().size(), 1U);
  EXPECT_EQ(plus1.dependencies()[0], twice);
  EXPECT_TRUE(twice.dependencies().empty());
  ASSERT_EQ(twice.dependents().size(), 1U);
  EXPECT_EQ(twice.dependents()[0], plus1);
  auto roots = g.root_nodes();
  ASSERT_EQ(roots.size(), 1U);
  EXPECT_EQ(roots[0], twice);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = x0[i] * 2.0F + 1.0F; // (x + 1) * 2 if the order were reversed
  EXPECT_TRUE(all_near(x.download(), want));
}

TEST(Builder, PrecedeAndSucceedSetTheOrder) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  const auto x0 = random_floats(n, 911);
  device_array<float> x(x0);
  sync_device();
  conveyor::stream s;

  // Both graphs add "plus one" first and "times two" second; only the edge's direction differs.
  {
    conveyor::graph g;
    auto plus1 = g.kernel(cover(n), add_scalar, n, 1.0F, x.get());
    auto twice = g.kernel(cover(n), scale, n, 2.0F, x.get());
    EXPECT_EQ(g.edge_count(), 0U);
    auto& same = plus1.precede(twice); // plus1 -> twice
    EXPECT_EQ(&same, &plus1);
    EXPECT_EQ(g.edge_count(), 1U);
    ASSERT_EQ(twice.dependencies().size(), 1U);
    EXPECT_EQ(twice.dependencies()[0], plus1);
    auto edges = g.edges();
    ASSERT_EQ(edges.size(), 1U);
    EXPECT_EQ(edges[0].first, plus1);
    EXPECT_EQ(edges[0].second, twice);

    auto exec = conveyor::instantiate(g);
    exec.launch(s);
    s.synchronize();
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = (x0[i] + 1.0F) * 2.0F;
    EXPECT_TRUE(all_near(x.download(), want));
  }
  x.upload(x0);
  sync_device();
  {
    conveyor::graph g;
    auto plus1 = g.kernel(cover(n), add_scalar, n, 1.0F, x.get());
    auto twice = g.kernel(cover(n), scale, n, 2.0F, x.get());
    plus1.succeed(twice); // twice -> plus1
    EXPECT_EQ(g.edge_count(), 1U);
    ASSERT_EQ(plus1.dependencies().size(), 1U);
    EXPECT_EQ(plus1.dependencies()[0], twice);
    ASSERT_EQ(twice.dependents().size(), 1U);
    EXPECT_EQ(twice.dependents()[0], plus1);
    auto roots = g.root_nodes();
    ASSERT_EQ(roots.size(), 1U);
    EXPECT_EQ(roots[0], twice);

    auto exec = conveyor::instantiate(g);
    exec.launch(s);
    s.synchronize();
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = x0[i] * 2.0F + 1.0F;
    EXPECT_TRUE(all_near(x.download(), want));
  }
}

TEST(Builder, SeveralDependenciesAtInsertionAndVariadicPrecede) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 2000;
  const auto x0 = random_floats(n, 921);
  const auto y0 = random_floats(n, 922);
  device_array<float> x(x0), y(y0), sum(random_floats(n, 923)), p(random_floats(n, 924)), q(random_floats(n, 925));
  sync_device();

  conveyor::graph g;
  auto a = g.kernel(cover(n), spin_then_scale, n, 2.0F, x.get(), spin_cycles / 4);
  auto b = g.kernel(cover(n), add_scalar, n, 3.0F, y.get());
  auto c = g.kernel({a, b}, cover(n), add_vectors, n, x.get(), y.get(), sum.get());
  // p and q are added unordered, then both placed after a with one variadic call.
  auto kp = g.kernel(cover(n), copy_plus, n, x.get(), 1.0F, p.get());
  auto kq = g.kernel(cover(n), copy_plus, n, x.get(), 2.0F, q.get());
  a.precede(kp, kq);

  EXPECT_EQ(g.node_count(), 5U);
  EXPECT_EQ(g.edge_count(), 4U);
  auto deps = c.dependencies();
  ASSERT_EQ(deps.size(), 2U);
  EXPECT_TRUE((deps[0] == a && deps[1] == b) || (deps[0] == b && deps[1] == a));
  EXPECT_EQ(a.dependents().size(), 3U);
  EXPECT_EQ(g.root_nodes().size(), 2U);

  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> want_sum(n), want_p(n), want_q(n);
  for (int i = 0; i < n; ++i) {
    want_sum[i] = x0[i] * 2.0F + (y0[i] + 3.0F);
    want_p[i] = x0[i] * 2.0F + 1.0F;
    want_q[i] = x0[i] * 2.0F + 2.0F;
  }
  EXPECT_TRUE(all_near(sum.download(), want_sum));
  EXPECT_TRUE(all_near(p.download(), want_p));
  EXPECT_TRUE(all_near(q.download(), want_q));
}

TEST(Builder, DependencyFromAnotherGraphIsRejected) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 931));
  sync_device();
  conveyor::graph g1, g2;
  auto a = g1.kernel(cover(n), scale, n, 2.0F, x.get());
  auto b = g2.kernel(cover(n), scale, n, 2.0F, x.get());

  EXPECT_THROW((void)g2.kernel({a}, cover(n), scale, n, 2.0F, x.get()), std::invalid_argument);
  EXPECT_THROW((void)g2.empty({a}), std::invalid_argument);
  EXPECT_THROW((void)g2.memset({a}, x.get(), 1.0F, n), std::invalid_argument);
  EXPECT_THROW((void)g2.host({b, a}, [] {}), std::invalid_argument);
  EXPECT_THROW(a.precede(b), std::invalid_argument);
  EXPECT_THROW(b.succeed(a), std::invalid_argument);
  EXPECT_THROW(b.precede(conveyor::node{}), std::invalid_argument);
  EXPECT_THROW((void)g2.empty({conveyor::node{}}), std::invalid_argument);
  EXPECT_EQ(g1.node_count(), 1U);
  EXPECT_EQ(g2.node_count(), 1U); // nothing was added by the refused calls
  EXPECT_EQ(g1.edge_count(), 0U);
  EXPECT_EQ(g2.edge_count(), 0U);
}

// A graph moved from (by construction or assignment) is refused by every member that uses it, and as another graph's
// child body; the graph it moved into keeps its nodes and takes more.
TEST(Builder, AMovedFromGraphIsRefusedByEveryCallThatUsesIt) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 941));
  sync_device();
  conveyor::graph g;
  const auto first = g.kernel(cover(n), scale, n, 2.0F, x.get());
  conveyor::graph taken(std::move(g));
  EXPECT_EQ(g.get(), nullptr);
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::kernel", (void)g.kernel(cover(n), scale, n, 2.0F, x.get()));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::memset", (void)g.memset(x.get(), 1.0F, n));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::memcpy",
                            (void)g.memcpy(x.get(), x.get(), x.bytes(), cudaMemcpyDeviceToDevice));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::mem_alloc", (void)g.mem_alloc(256));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::host", (void)g.host([] {}));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::empty", (void)g.empty());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::event_record", (void)g.event_record(conveyor::event{}));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::keep_alive", g.keep_alive(std::make_shared<int>(1)));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::clone", (void)g.clone());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::node_count", (void)g.node_count());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::edges", (void)g.edges());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::has_conditional", (void)g.has_conditional());
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::edge_type_between", (void)g.edge_type_between(first, first));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::child: an empty (moved-from) graph (body)", (void)taken.child(g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::child: an empty (moved-from) graph", (void)g.child(taken));
  EXPECT_EQ(taken.node_count(), 1U); // nothing was added by the refused calls
  conveyor::graph assigned;
  assigned = std::move(taken);
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::nodes", (void)taken.nodes());
  EXPECT_TRUE(assigned.owns(first));
  (void)assigned.kernel({first}, cover(n), scale, n, 0.5F, x.get());
  EXPECT_EQ(assigned.node_count(), 2U);
}

// ---- labels and clone ---------------------------------------------------------------------------------------------

TEST(Builder, LabelsArePerNode) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 64;
  device_array<float> x(random_floats(n, 941));
  sync_device();
  conveyor::graph g;
  auto a = g.kernel(cover(n), scale, n, 2.0F, x.get());
  auto b = g.empty({a});
  auto& same = a.label("double it");
  EXPECT_EQ(&same, &a);
  EXPECT_EQ(a.label(), "double it");
  EXPECT_EQ(b.label(), "");
  b.label("join");
  a.label("renamed");
  EXPECT_EQ(a.label(), "renamed");
  EXPECT_EQ(b.label(), "join");
  // A handle obtained another way (from the graph) sees the same label.
  for (const auto& node : g.nodes()) {
    if (node == a) EXPECT_EQ(node.label(), "renamed");
    if (node == b) EXPECT_EQ(node.label(), "join");
  }
  conveyor::node none;
  EXPECT_THROW(none.label("x"), std::invalid_argument);
  EXPECT_EQ(none.label(), "");
}

TEST(Builder, CloneRunsTheSameKeepsLabelsAndOutlivesTheOriginal) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1200;
  const auto x0 = random_floats(n, 951);
  device_array<float> x(x0);
  sync_device();
  std::atomic<int> calls{0};

  std::optional<conveyor::graph> copy;
  std::size_t original_nodes = 0;
  std::size_t original_edges = 0;
  {
    conveyor::graph g;
    auto twice = g.kernel(cover(n), scale, n, 2.0F, x.get());
    twice.label("twice");
    auto plus1 = g.kernel({twice}, cover(n), add_scalar, n, 1.0F, x.get()).label("plus one");
    g.host({plus1}, [&calls] { calls.fetch_add(1); }).label("count");
    original_nodes = g.node_count();
    original_edges = g.edge_count();
    copy.emplace(g.clone());
  } // the original graph and its handle are destroyed here

  EXPECT_EQ(copy->node_count(), original_nodes);
  EXPECT_EQ(copy->edge_count(), original_edges);
  std::multiset<std::string> labels;
  for (const auto& node : copy->nodes()) labels.insert(node.label());
  EXPECT_EQ(labels, (std::multiset<std::string>{"twice", "plus one", "count"}));
  for (const auto& node : copy->nodes()) {
    if (node.label() == "count") EXPECT_EQ(node.kind(), conveyor::node_kind::host);
    if (node.label() == "twice") EXPECT_TRUE(node.dependencies().empty());
    if (node.label() == "plus one") {
      ASSERT_EQ(node.dependencies().size(), 1U);
      EXPECT_EQ(node.dependencies()[0].label(), "twice");
    }
  }

  conveyor::stream s;
  auto exec = conveyor::instantiate(*copy);
  exec.launch(s);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(calls.load(), 2); // the clone shares the host callable, which outlived the original graph
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = (x0[i] * 2.0F + 1.0F) * 2.0F + 1.0F;
  EXPECT_TRUE(all_near(x.download(), want));
}

// ---- zero-size copies and memsets -------------------------------------------------------------------------------

TEST(Builder, ZeroSizeCopiesAndMemsetsBecomeEmptyNodesThatKeepTheOrder) {
  CONVEYOR_REQUIRE_GPU();
  const int n = 1024;
  const auto x0 = random_floats(n, 9101);
  device_array<float> x(x0), y(n);
  sync_device();
  conveyor::graph g;
  auto k1 = g.kernel(cover(n), spin_then_scale, n, 2.0F, x.get(), spin_cycles);
  auto c0 = g.memcpy({k1}, y.get(), x.get(), 0, cudaMemcpyDeviceToDevice).label("copy of 0 bytes");
  auto m0 = g.memset({c0}, y.get(), 0.0F, 0);
  auto c2 = g.memcpy_2d({m0}, y.get(), 64, x.get(), 64, 0, 4, cudaMemcpyDeviceToDevice);
  auto s2 = g.memset_2d({c2}, y.get(), 64, 0U, 4, 16, 0);
  g.memcpy({s2}, y.get(), x.get(), x.bytes(), cudaMemcpyDeviceToDevice); // must still wait for the slow kernel
  for (const auto& z : {c0, m0, c2, s2}) EXPECT_EQ(z.kind(), conveyor::node_kind::empty);
  EXPECT_EQ(c0.label(), "copy of 0 bytes");
  EXPECT_EQ(g.node_count(), 6U);
  EXPECT_EQ(g.edge_count(), 5U);
  conveyor::stream s;
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(y.download(), [&] {
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = x0[i] * 2.0F;
    return want;
  }()));
}

// ---- node_list: the dependency list every builder call takes ----------------------------------------------------

TEST(NodeList, KeepsOrderInlineAndOnTheHeapAndCopiesStayValid) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graph g;
  std::vector<conveyor::node> nodes;
  for (int i = 0; i < 40; ++i) nodes.push_back(g.empty());
  for (std::size_t count : {std::size_t{0}, std::size_t{3}, conveyor::node_list::inline_capacity,
                            conveyor::node_list::inline_capacity + 1, std::size_t{40}}) {
    SCOPED_TRACE(count);
    const std::vector<conveyor::node> some(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(count));
    const conveyor::node_list original(some);
    const conveyor::node_list copy = original; // must not point into `original`'s storage
    for (const auto* list : {&original, &copy}) {
      ASSERT_EQ(list->size(), count);
      EXPECT_EQ(list->empty(), count == 0);
      ASSERT_EQ(list->handles().size(), count);
      for (std::size_t i = 0; i < count; ++i) {
        EXPECT_EQ(list->handles()[i], some[i].get());
        EXPECT_EQ((*list)[i], some[i]);
        EXPECT_TRUE(g.owns((*list)[i]));
      }
    }
    if (count > 0 && count <= conveyor::node_list::inline_capacity)
      EXPECT_NE(copy.handles().data(), original.handles().data());
    // A node depending on all of them gets exactly these edges.
    auto joined = g.empty(original);
    EXPECT_EQ(joined.dependencies().size(), count);
  }
}

TEST(NodeList, EmptyHandleAndNodesOfAnotherGraphAreRejected) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::graph g, other;
  auto a = g.empty();
  auto foreign = other.empty();
  try {
    conveyor::node_list list{a, conveyor::node{}};
    FAIL() << "an empty node was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("empty node handle"), std::string::npos) << e.what();
  }
  std::vector<conveyor::node> many(12, a);
  many[11] = foreign; // one of another graph, in the heap part
  EXPECT_THROW(g.empty(many), std::invalid_argument);
  EXPECT_FALSE(g.owns(foreign));
  EXPECT_TRUE(other.owns(foreign));
}
