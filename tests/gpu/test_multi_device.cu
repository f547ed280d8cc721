// GPU tests of graphs whose nodes run on several devices: builder nodes added inside a device_guard run on
// that device, peer copies join them, capture forks onto a stream of another device and joins back; describe, DOT
// and JSON name each node's device. The peer-access helper and the device-count checks. Tests that need two devices
// skip with the reason on a machine with one; the one-device tests check the device field everywhere.

#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"

#include <conveyor/conveyor.hpp>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using conveyor::test::all_near;
using conveyor::test::cover;
using conveyor::test::pinned_array;
using conveyor::test::random_floats;
using namespace conveyor::test::kernels;

namespace {

// `count` floats of device memory on `device` (allocated with it current; freed likewise).
class buffer_on {
public:
  buffer_on(int device, std::size_t count) : device_(device), count_(count) {
    const conveyor::device_guard on(device);
    CONVEYOR_CHECK(cudaMalloc(&data_, count * sizeof(float)));
  }
  buffer_on(const buffer_on&) = delete;
  buffer_on& operator=(const buffer_on&) = delete;
  ~buffer_on() {
    const conveyor::device_guard on(device_);
    (void)cudaFree(data_);
  }
  [[nodiscard]] float* get() const noexcept { return data_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(float); }
  void upload(const std::vector<float>& host) const {
    CONVEYOR_CHECK(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }

private:
  int device_;
  std::size_t count_;
  float* data_ = nullptr;
};

// The host reference of every multi-device test: y = (a * x) + b, in double precision.
std::vector<float> reference(const std::vector<float>& x, float a, float b) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = static_cast<float>(static_cast<double>(a) * x[i] + static_cast<double>(b));
  return out;
}

const conveyor::node_description* find_kind(const conveyor::graph_description& d, conveyor::node_kind kind,
                                            int device) {
  for (const auto& n : d.nodes)
    if (n.kind == kind && n.device == device) return &n;
  return nullptr;
}

} // namespace

// ---- the peer-access helper and device counts ---------------------------------------------------------------------

TEST(DeviceArchitecture, EveryVisibleDeviceRunsThisBuildAndAnotherBuildIsRefusedWithTheFix) {
  CONVEYOR_REQUIRE_GPU();
  for (int d = 0; d < conveyor::device_count(); ++d) EXPECT_NO_THROW(conveyor::check_device_architecture(d)) << d;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  // A build for a lower major's machine code only (no PTX) cannot run here: the message names the fix.
  const std::string other = std::to_string((prop.major - 1) * 10) + "-real";
  const std::string why = conveyor::architecture_mismatch(other, prop.major, prop.minor);
  EXPECT_NE(why.find("-DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(prop.major) + std::to_string(prop.minor)),
            std::string::npos)
      << why;
  EXPECT_THROW(conveyor::check_device_architecture(conveyor::device_count()), conveyor::cuda_error);
}

TEST(PeerAccess, SameDeviceIsTrivialAndBadOrdinalsAreRefused) {
  CONVEYOR_REQUIRE_GPU();
  const conveyor::peer_access self = conveyor::enable_peer_access(0, 0);
  EXPECT_TRUE(self.possible);
  EXPECT_TRUE(self.enabled);
  EXPECT_EQ(self.reason, "same device");
  const int count = conveyor::device_count();
  try {
    (void)conveyor::enable_peer_access(0, count);
    FAIL() << "an ordinal past the device count was accepted";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(count) + " device(s) are visible"), std::string::npos)
        << e.what();
  }
  const std::vector<int> twice{0, 0};
  EXPECT_THROW((void)conveyor::enable_peer_access(twice), std::invalid_argument);
}

TEST(PeerAccess, FirstDevicesChecksTheCount) {
  CONVEYOR_REQUIRE_GPU();
  const int count = conveyor::device_count();
  EXPECT_EQ(conveyor::first_devices(1), std::vector<int>{0});
  EXPECT_EQ(static_cast<int>(conveyor::first_devices(count).size()), count);
  try {
    (void)conveyor::first_devices(count + 1);
    FAIL() << "more devices than visible were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(count) + " CUDA device(s) are visible"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)conveyor::first_devices(0), std::invalid_argument);
}

TEST(PeerAccess, EnablesEveryPairTheTopologyAllows) {
  CONVEYOR_REQUIRE_GPUS(2);
  const std::vector<int> devices{0, 1};
  const auto first = conveyor::enable_peer_access(devices);
  ASSERT_EQ(first.size(), 2U);
  for (const auto& p : first) {
    int can = 0;
    CONVEYOR_CHECK(cudaDeviceCanAccessPeer(&can, p.device, p.peer));
    EXPECT_EQ(p.possible, can != 0) << p.device << " -> " << p.peer << ": " << p.reason;
    EXPECT_EQ(p.enabled, can != 0) << p.reason;
  }
  for (const auto& p : conveyor::enable_peer_access(devices))
    if (p.possible) EXPECT_EQ(p.reason, "already enabled");
}

// ---- one device: every node says where it runs --------------------------------------------------------------------

TEST(MultiDevice, DescribeNamesTheDeviceOfEveryNodeOnOneGpu) {
  CONVEYOR_REQUIRE_GPU();
  const int device = conveyor::device_count() - 1; // the last device: not the default 0 where there are several
  const conveyor::device_guard on(device);
  constexpr int n = 1000;
  buffer_on x(device, n);
  pinned_array<float> out(n);
  conveyor::graph g;
  auto set = g.memset(x.get(), 0.0F, n);
  auto add = g.kernel({set}, cover(n), add_scalar, n, 2.5F, x.get());
  auto copy = g.memcpy({add}, out.get(), x.get(), x.bytes(), cudaMemcpyDeviceToHost);
  (void)g.host({copy}, [] {});
  const conveyor::graph_description d = conveyor::describe(g);
  ASSERT_EQ(d.nodes.size(), 4U);
  EXPECT_EQ(d.nodes[0].device, device);
  EXPECT_EQ(d.nodes[1].device, device);
  EXPECT_EQ(d.nodes[2].device, device); // DtoH: the source's device
  EXPECT_EQ(d.nodes[2].source_device, -1);
  EXPECT_EQ(d.nodes[3].device, -1); // a host node runs on no device
  EXPECT_EQ(d.devices(), std::vector<int>{device});
  EXPECT_EQ(conveyor::to_dot(d).find("cluster_ndevice_"), std::string::npos) << "one device: no device clusters";
  const auto j = nlohmann::json::parse(conveyor::to_json(d));
  EXPECT_EQ(j.at("devices"), nlohmann::json::array({device}));
  EXPECT_EQ(j.at("nodes").at(1).at("device"), device);
  EXPECT_FALSE(j.at("nodes").at(3).contains("device"));
  conveyor::stream s;
  const auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(out[0], 2.5F);
  EXPECT_EQ(out[n - 1], 2.5F);
}

// ---- two devices --------------------------------------------------------------------------------------------------

TEST(MultiDevice, BuilderNodesRunOnTheDeviceOfTheirScopeJoinedByAPeerCopy) {
  CONVEYOR_REQUIRE_GPUS(2);
  const std::vector<int> devices{0, 1};
  for (const auto& p : conveyor::enable_peer_access(devices))
    RecordProperty("peer_" + std::to_string(p.device), p.reason);
  constexpr int n = 1 << 16;
  const std::vector<float> x_host = random_floats(n, 1601);
  const float a = 1.75F;
  const float b = -0.5F;
  buffer_on x0(0, n);
  buffer_on x1(1, n);
  pinned_array<float> out(n);
  x0.upload(x_host);
  conveyor::graph g;
  conveyor::node scaled;
  {
    const conveyor::device_guard on(0);
    scaled = g.kernel(cover(n), scale, n, a, x0.get()).label("scale on device 0");
  }
  auto peer = g.memcpy({scaled}, x1.get(), x0.get(), x0.bytes()).label("halo 0 -> 1"); // cudaMemcpyDefault
  conveyor::node added;
  {
    const conveyor::device_guard on(1);
    added = g.kernel({peer}, cover(n), add_scalar, n, b, x1.get()).label("add on device 1");
  }
  (void)g.memcpy({added}, out.get(), x1.get(), x1.bytes()).label("result to host");

  const conveyor::graph_description d = conveyor::describe(g);
  ASSERT_EQ(d.nodes.size(), 4U);
  EXPECT_EQ(d.nodes[0].device, 0);
  EXPECT_EQ(d.nodes[1].device, 1);
  EXPECT_EQ(d.nodes[1].source_device, 0);
  EXPECT_EQ(d.nodes[2].device, 1);
  EXPECT_EQ(d.nodes[3].device, 1);
  EXPECT_EQ(d.devices(), (std::vector<int>{0, 1}));
  const std::string dot = conveyor::to_dot(d, "two_devices");
  EXPECT_NE(dot.find("subgraph cluster_ndevice_0"), std::string::npos) << dot;
  EXPECT_NE(dot.find("subgraph cluster_ndevice_1"), std::string::npos) << dot;
  EXPECT_NE(dot.find("peer copy device 0 -> device 1"), std::string::npos) << dot;
  const auto j = nlohmann::json::parse(conveyor::to_json(d));
  EXPECT_EQ(j.at("devices"), nlohmann::json::array({0, 1}));
  EXPECT_EQ(j.at("nodes").at(1).at("source_device"), 0);

  conveyor::stream s; // on device 0: one stream launches the whole multi-device graph
  const auto exec = conveyor::instantiate(g);
  exec.upload(s);
  for (int launch = 0; launch < 2; ++launch) {
    x0.upload(x_host); // each launch scales x0 in place: start again from x
    exec.launch(s);
    s.synchronize();
    EXPECT_TRUE(all_near(out.to_vector(), reference(x_host, a, b), 1e-6F)) << "launch " << launch;
  }
}

TEST(MultiDevice, CaptureForksOntoAStreamOfAnotherDeviceAndJoinsBack) {
  CONVEYOR_REQUIRE_GPUS(2);
  const std::vector<int> devices{0, 1};
  (void)conveyor::enable_peer_access(devices);
  constexpr int n = 50'000;
  const std::vector<float> x_host = random_floats(n, 1602);
  const float a = -2.25F;
  const float b = 3.0F;
  buffer_on x0(0, n);
  buffer_on x1(1, n);
  pinned_array<float> out(n);
  conveyor::stream s0; // device 0 (current)
  std::optional<conveyor::stream> s1_holder;
  {
    const conveyor::device_guard on(1);
    s1_holder.emplace();
  }
  const conveyor::stream& s1 = *s1_holder;
  ASSERT_EQ(s0.device(), 0);
  ASSERT_EQ(s1.device(), 1);
  // The same body runs eagerly and under capture: fork/join are cross-stream dependencies outside a capture.
  auto body = [&](const conveyor::stream& origin) {
    scale<<<(n + 255) / 256, 256, 0, origin.get()>>>(n, a, x0.get());
    CONVEYOR_CHECK(cudaGetLastError());
    conveyor::fork(origin, s1);
    {
      const conveyor::device_guard on(1);
      CONVEYOR_CHECK(cudaMemcpyAsync(x1.get(), x0.get(), x0.bytes(), cudaMemcpyDefault, s1.get()));
      add_scalar<<<(n + 255) / 256, 256, 0, s1.get()>>>(n, b, x1.get());
      CONVEYOR_CHECK(cudaGetLastError());
    }
    conveyor::join(origin, s1);
    CONVEYOR_CHECK(cudaMemcpyAsync(out.get(), x1.get(), x1.bytes(), cudaMemcpyDefault, origin.get()));
  };
  const std::vector<float> want = reference(x_host, a, b);

  x0.upload(x_host);
  body(s0);
  s0.synchronize();
  EXPECT_TRUE(all_near(out.to_vector(), want, 1e-6F)) << "eager";

  conveyor::graph g = conveyor::capture(s0, body);
  const conveyor::graph_description d = conveyor::describe(g);
  EXPECT_EQ(d.devices(), (std::vector<int>{0, 1}));
  ASSERT_NE(find_kind(d, conveyor::node_kind::kernel, 0), nullptr) << "the scale kernel runs on device 0";
  ASSERT_NE(find_kind(d, conveyor::node_kind::kernel, 1), nullptr) << "the add kernel runs on device 1";
  const auto* peer = find_kind(d, conveyor::node_kind::memcpy, 1);
  ASSERT_NE(peer, nullptr);
  EXPECT_TRUE(peer->source_device == 0 || peer->source_device == -1);
  const auto exec = conveyor::instantiate(g);
  for (int launch = 0; launch < 3; ++launch) {
    std::fill(out.get(), out.get() + n, 0.0F);
    x0.upload(x_host);
    exec.launch(s0);
    s0.synchronize();
    EXPECT_TRUE(all_near(out.to_vector(), want, 1e-6F)) << "graph launch " << launch;
  }
}

TEST(MultiDevice, AnUnjoinedStreamOfAnotherDeviceIsJoinedAndReported) {
  CONVEYOR_REQUIRE_GPUS(2);
  conveyor::stream s0;
  std::optional<conveyor::stream> s1;
  {
    const conveyor::device_guard on(1);
    s1.emplace();
  }
  conveyor::capture_session session(s0);
  conveyor::fork(s0, *s1);
  try {
    (void)session.finish();
    FAIL() << "a capture with an unjoined stream of another device ended without error";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureUnjoined) << e.what();
  }
  // Both streams are usable again: neither is capturing, and eager work runs on each.
  EXPECT_FALSE(s0.is_capturing());
  EXPECT_FALSE(s1->is_capturing());
  s0.synchronize();
  s1->synchronize();
}
