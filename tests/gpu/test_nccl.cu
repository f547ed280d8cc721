// GPU tests of the NCCL layer with one process driving every visible GPU (communicator::init_all; one GPU
// is a communicator of one rank, which NCCL supports, so a single GPU runs these too): all-reduce, broadcast,
// reduce-scatter, all-gather and send/recv eager and captured into graphs, against double-precision CPU references
// on seeded random data; the checks before NCCL (wrong-device stream, ranks out of range, null buffers, invalidated
// or mixed captures); a rank that never joins ending in nccl_error within the timeout, also while a graph that
// captured the communicator is alive; an exception leaving a group open aborting instead of hanging; agree_on_capture.
#include "support/gpu.hpp"

#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/nccl.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/stream.hpp>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using conveyor::nccl::communicator;
using conveyor::nccl::nccl_error;
using conveyor::nccl::reduce_op;
using conveyor::test::device_array;

std::vector<int> visible_devices() {
  std::vector<int> d(static_cast<std::size_t>(conveyor::device_count()));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

//! One communicator and one stream per visible device (rank r on device r).
struct ranks {
  std::vector<int> devices;
  std::vector<communicator> comms;
  std::vector<conveyor::stream> streams;
  std::vector<const conveyor::stream*> stream_ptrs;

  explicit ranks(std::chrono::milliseconds timeout = std::chrono::seconds(30)) : devices(visible_devices()) {
    conveyor::nccl::comm_options options;
    options.timeout = timeout;
    comms = communicator::init_all(devices, options);
    for (const int d : devices) {
      const conveyor::device_guard on(d);
      streams.emplace_back();
    }
    for (const auto& s : streams) stream_ptrs.push_back(&s);
  }
  [[nodiscard]] int n() const { return static_cast<int>(devices.size()); }
  void synchronize() const { conveyor::nccl::synchronize(comms, stream_ptrs); }
};

//! One device array per rank, each on its rank's device.
template <class T>
struct per_rank {
  std::vector<std::unique_ptr<device_array<T>>> arrays;
  per_rank(const ranks& r, std::size_t count) {
    for (const int d : r.devices) {
      const conveyor::device_guard on(d);
      arrays.push_back(std::make_unique<device_array<T>>(count));
    }
  }
  T* operator[](int rank) const { return arrays[static_cast<std::size_t>(rank)]->get(); }
  void upload(int rank, const std::vector<T>& host) const {
    const conveyor::device_guard on(rank); // rank r is on device r
    arrays[static_cast<std::size_t>(rank)]->upload(host);
  }
  [[nodiscard]] std::vector<T> download(int rank) const { return arrays[static_cast<std::size_t>(rank)]->download(); }
};

//! Seeded random values: floats in [-1, 1], integers in a range whose sums and products stay exact.
template <class T>
std::vector<T> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(count);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (auto& x : v) x = static_cast<T>(dist(gen));
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    std::uniform_int_distribution<int> dist(0, 255);
    for (auto& x : v) x = static_cast<T>(dist(gen));
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    std::uniform_int_distribution<std::int64_t> dist(-9, 9); // products over 8 ranks stay exact
    for (auto& x : v) x = static_cast<T>(dist(gen));
  } else {
    std::uniform_int_distribution<std::int64_t> dist(-1000, 1000);
    for (auto& x : v) x = static_cast<T>(dist(gen));
  }
  return v;
}

double combine(double a, double b, reduce_op op) {
  switch (op) {
  case reduce_op::sum:
  case reduce_op::avg: return a + b;
  case reduce_op::prod: return a * b;
  case reduce_op::max: return std::max(a, b);
  case reduce_op::min: return std::min(a, b);
  }
  return 0;
}

//! The reduction of inputs[r][offset + i] over r, in double; and the sum of magnitudes (the error scale of a sum).
struct reference {
  std::vector<double> value;
  std::vector<double> scale;
};
template <class T>
reference reduce_on_cpu(const std::vector<std::vector<T>>& inputs, std::size_t offset, std::size_t count,
                        reduce_op op) {
  reference ref{std::vector<double>(count), std::vector<double>(count, 0.0)};
  for (std::size_t i = 0; i < count; ++i) {
    double acc = static_cast<double>(inputs[0][offset + i]);
    double scale = std::abs(acc);
    for (std::size_t r = 1; r < inputs.size(); ++r) {
      const double x = static_cast<double>(inputs[r][offset + i]);
      acc = combine(acc, x, op);
      scale += std::abs(x);
    }
    if (op == reduce_op::avg) acc /= static_cast<double>(inputs.size());
    ref.value[i] = acc;
    ref.scale[i] = op == reduce_op::prod ? std::abs(acc) : scale;
  }
  return ref;
}

//! Largest relative error of `got` against `ref` (relative to the error scale; exact for integers) and whether the
//! reference has values away from zero (so that a result of zeros cannot pass).
template <class T>
void expect_close(const std::vector<T>& got, const reference& ref, int nranks, const std::string& what) {
  ASSERT_EQ(got.size(), ref.value.size()) << what;
  double worst = 0;
  std::size_t worst_at = 0;
  double largest = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - ref.value[i]) / std::max(ref.scale[i], 1e-30);
    if (err > worst) {
      worst = err;
      worst_at = i;
    }
    largest = std::max(largest, std::abs(ref.value[i]));
  }
  const double tolerance =
      std::is_floating_point_v<T> ? 4.0 * nranks * static_cast<double>(std::numeric_limits<T>::epsilon()) : 0.0;
  EXPECT_GT(largest, 0.1) << what << ": the reference is all (near) zero";
  EXPECT_LE(worst, tolerance) << what << ": element " << worst_at << " is " << static_cast<double>(got[worst_at])
                              << ", the CPU says " << ref.value[worst_at];
}

template <class T>
void all_reduce_matches_cpu(const ranks& r, std::size_t count, reduce_op op, bool in_place, const std::string& what) {
  std::vector<std::vector<T>> inputs;
  per_rank<T> send(r, count);
  per_rank<T> recv(r, count);
  for (int k = 0; k < r.n(); ++k) {
    inputs.push_back(random_values<T>(count, 1000u + static_cast<std::uint32_t>(k)));
    send.upload(k, inputs.back());
  }
  {
    conveyor::nccl::group g;
    for (int k = 0; k < r.n(); ++k)
      conveyor::nccl::all_reduce(r.comms[static_cast<std::size_t>(k)], send[k], in_place ? send[k] : recv[k], count, op,
                                 r.streams[static_cast<std::size_t>(k)]);
    g.end();
  }
  r.synchronize();
  const reference ref = reduce_on_cpu(inputs, 0, count, op);
  for (int k = 0; k < r.n(); ++k)
    expect_close(in_place ? send.download(k) : recv.download(k), ref, r.n(), what + " rank " + std::to_string(k));
}

TEST(Nccl, AllReduceEagerMatchesCpu) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  all_reduce_matches_cpu<float>(r, (1u << 20) + 7, reduce_op::sum, false, "float sum");
  all_reduce_matches_cpu<float>(r, 1000, reduce_op::avg, true, "float avg in place");
  all_reduce_matches_cpu<double>(r, 4099, reduce_op::max, false, "double max");
  all_reduce_matches_cpu<double>(r, 4099, reduce_op::min, true, "double min in place");
  all_reduce_matches_cpu<std::int32_t>(r, 12345, reduce_op::sum, false, "int32 sum");
  all_reduce_matches_cpu<std::int64_t>(r, 333, reduce_op::prod, false, "int64 prod");
}

TEST(Nccl, BroadcastFromTheLastRankMatchesItsData) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  const std::size_t count = 100003;
  const int root = r.n() - 1;
  per_rank<std::int64_t> send(r, count);
  per_rank<std::int64_t> recv(r, count);
  std::vector<std::vector<std::int64_t>> inputs;
  for (int k = 0; k < r.n(); ++k) {
    inputs.push_back(random_values<std::int64_t>(count, 77u + static_cast<std::uint32_t>(k)));
    send.upload(k, inputs.back());
  }
  {
    conveyor::nccl::group g;
    for (int k = 0; k < r.n(); ++k)
      conveyor::nccl::broadcast(r.comms[static_cast<std::size_t>(k)], k == root ? send[k] : nullptr, recv[k], count,
                                root, r.streams[static_cast<std::size_t>(k)]);
    g.end();
  }
  r.synchronize();
  for (int k = 0; k < r.n(); ++k) EXPECT_EQ(recv.download(k), inputs[static_cast<std::size_t>(root)]) << "rank " << k;
  // In place (send == recv) from rank 0.
  {
    conveyor::nccl::group g;
    for (int k = 0; k < r.n(); ++k)
      conveyor::nccl::broadcast(r.comms[static_cast<std::size_t>(k)], send[k], send[k], count, 0,
                                r.streams[static_cast<std::size_t>(k)]);
    g.end();
  }
  r.synchronize();
  for (int k = 0; k < r.n(); ++k) EXPECT_EQ(send.download(k), inputs[0]) << "in place, rank " << k;
}

TEST(Nccl, ReduceScatterMatchesCpu) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  const std::size_t recv_count = 65537;
  const std::size_t total = recv_count * static_cast<std::size_t>(r.n());
  per_rank<float> send(r, total);
  per_rank<float> recv(r, recv_count);
  std::vector<std::vector<float>> inputs;
  for (int k = 0; k < r.n(); ++k) {
    inputs.push_back(random_values<float>(total, 500u + static_cast<std::uint32_t>(k)));
    send.upload(k, inputs.back());
  }
  {
    conveyor::nccl::group g;
    for (int k = 0; k < r.n(); ++k)
      conveyor::nccl::reduce_scatter(r.comms[static_cast<std::size_t>(k)], send[k], recv[k], recv_count, reduce_op::sum,
                                     r.streams[static_cast<std::size_t>(k)]);
    g.end();
  }
  r.synchronize();
  for (int k = 0; k < r.n(); ++k)
    expect_close(recv.download(k),
                 reduce_on_cpu(inputs, static_cast<std::size_t>(k) * recv_count, recv_count, reduce_op::sum), r.n(),
                 "reduce-scatter rank " + std::to_string(k));
}

TEST(Nccl, AllGatherMatchesEveryRanksData) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  const std::size_t send_count = 40001;
  const std::size_t total = send_count * static_cast<std::size_t>(r.n());
  per_rank<std::uint8_t> send(r, send_count);
  per_rank<std::uint8_t> recv(r, total);
  std::vector<std::uint8_t> expected;
  for (int k = 0; k < r.n(); ++k) {
    const auto v = random_values<std::uint8_t>(send_count, 900u + static_cast<std::uint32_t>(k));
    send.upload(k, v);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  {
    conveyor::nccl::group g;
    for (int k = 0; k < r.n(); ++k)
      conveyor::nccl::all_gather(r.comms[static_cast<std::size_t>(k)], send[k], recv[k], send_count,
                                 r.streams[static_cast<std::size_t>(k)]);
    g.end();
  }
  r.synchronize();
  for (int k = 0; k < r.n(); ++k) EXPECT_EQ(recv.download(k), expected) << "rank " << k;
}

TEST(Nccl, SendRecvRingMatchesTheLeftNeighbour) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  const std::size_t count = 10007;
  per_rank<std::int32_t> out(r, count);
  per_rank<std::int32_t> in(r, count);
  std::vector<std::vector<std::int32_t>> inputs;
  for (int k = 0; k < r.n(); ++k) {
    inputs.push_back(random_values<std::int32_t>(count, 31u + static_cast<std::uint32_t>(k)));
    out.upload(k, inputs.back());
  }
  {
    conveyor::nccl::group g;
    for (int k = 0; k < r.n(); ++k) {
      const auto& comm = r.comms[static_cast<std::size_t>(k)];
      const auto& s = r.streams[static_cast<std::size_t>(k)];
      conveyor::nccl::send(comm, out[k], count, (k + 1) % r.n(), s);
      conveyor::nccl::recv(comm, in[k], count, (k + r.n() - 1) % r.n(), s);
    }
    g.end();
  }
  r.synchronize();
  for (int k = 0; k < r.n(); ++k)
    EXPECT_EQ(in.download(k), inputs[static_cast<std::size_t>((k + r.n() - 1) % r.n())]) << "rank " << k;
}

// ---- captured into graphs -------------------------------------------------------------------------------------------

//! Enqueues an out-of-place all-reduce (sum) on every rank in one group.
void enqueue_all_reduce(const ranks& r, const per_rank<float>& send, const per_rank<float>& recv, std::size_t count) {
  conveyor::nccl::group g;
  for (int k = 0; k < r.n(); ++k)
    conveyor::nccl::all_reduce(r.comms[static_cast<std::size_t>(k)], send[k], recv[k], count, reduce_op::sum,
                               r.streams[static_cast<std::size_t>(k)]);
  g.end();
}

std::vector<std::vector<float>> upload_random(const ranks& r, const per_rank<float>& send, std::size_t count,
                                              std::uint32_t seed) {
  std::vector<std::vector<float>> inputs;
  for (int k = 0; k < r.n(); ++k) {
    inputs.push_back(random_values<float>(count, seed + static_cast<std::uint32_t>(k)));
    send.upload(k, inputs.back());
  }
  return inputs;
}

TEST(Nccl, AllReduceCapturedIntoOneGraphAcrossDevicesMatchesCpuOnEveryReplay) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  const std::size_t count = 300007;
  per_rank<float> send(r, count);
  per_rank<float> recv(r, count);
  auto inputs = upload_random(r, send, count, 11);
  // Eager once (NCCL connects the ranks on first use), then every rank agrees to capture.
  enqueue_all_reduce(r, send, recv, count);
  r.synchronize();
  conveyor::nccl::agree_on_capture(r.comms, r.stream_ptrs, 0x5eed);
  const conveyor::stream& origin = r.streams[0];
  conveyor::graph g = conveyor::capture(origin, [&] {
    for (int k = 1; k < r.n(); ++k) conveyor::fork(origin, r.streams[static_cast<std::size_t>(k)]);
    enqueue_all_reduce(r, send, recv, count);
    for (int k = 1; k < r.n(); ++k) conveyor::join(origin, r.streams[static_cast<std::size_t>(k)]);
  });
  conveyor::graph_exec exec = conveyor::instantiate(g);
  for (std::uint32_t replay = 0; replay < 3; ++replay) {
    if (replay > 0) inputs = upload_random(r, send, count, 100 + replay);
    for (int k = 0; k < r.n(); ++k) {
      const conveyor::device_guard on(k);
      CONVEYOR_CHECK(cudaMemset(recv[k], 0, count * sizeof(float)));
      CONVEYOR_CHECK(cudaDeviceSynchronize());
    }
    exec.launch(origin);
    r.comms[0].synchronize(origin);
    const reference ref = reduce_on_cpu(inputs, 0, count, reduce_op::sum);
    for (int k = 0; k < r.n(); ++k)
      expect_close(recv.download(k), ref, r.n(), "replay " + std::to_string(replay) + " rank " + std::to_string(k));
  }
}

TEST(Nccl, AllReduceCapturedIntoOneGraphPerDeviceMatchesCpu) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  const std::size_t count = 4096 * 33;
  per_rank<float> send(r, count);
  per_rank<float> recv(r, count);
  const auto inputs = upload_random(r, send, count, 21);
  enqueue_all_reduce(r, send, recv, count);
  r.synchronize();
  std::vector<conveyor::graph_exec> execs;
  {
    std::vector<std::unique_ptr<conveyor::capture_session>> sessions;
    for (const auto& s : r.streams) sessions.push_back(std::make_unique<conveyor::capture_session>(s));
    enqueue_all_reduce(r, send, recv, count);
    for (auto& session : sessions) execs.push_back(conveyor::instantiate(session->finish()));
  }
  for (int k = 0; k < r.n(); ++k) {
    const conveyor::device_guard on(k);
    CONVEYOR_CHECK(cudaMemset(recv[k], 0, count * sizeof(float)));
    CONVEYOR_CHECK(cudaDeviceSynchronize());
  }
  // One launching thread per device: NCCL warns that one thread launching the graphs of several communicators in
  // turn can deadlock.
  std::vector<std::thread> launchers;
  for (int k = 0; k < r.n(); ++k)
    launchers.emplace_back([&, k] {
      CONVEYOR_CHECK(cudaSetDevice(k));
      execs[static_cast<std::size_t>(k)].launch(r.streams[static_cast<std::size_t>(k)]);
    });
  for (auto& t : launchers) t.join();
  r.synchronize();
  const reference ref = reduce_on_cpu(inputs, 0, count, reduce_op::sum);
  for (int k = 0; k < r.n(); ++k) expect_close(recv.download(k), ref, r.n(), "rank " + std::to_string(k));
}

// ---- checks before NCCL ----------------------------------------------------------------------------------------------

TEST(Nccl, BadRootsPeersAndNullBuffersAreRefusedAndTheCommunicatorStaysUsable) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  const auto& comm = r.comms[0];
  const auto& s = r.streams[0];
  per_rank<float> buf(r, 16);
  try {
    conveyor::nccl::broadcast(comm, buf[0], buf[0], 16, r.n(), s);
    FAIL() << "root out of range";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.device(), 0);
    EXPECT_FALSE(e.aborted());
    EXPECT_NE(std::string(e.what()).find("root " + std::to_string(r.n()) + " is out of range: the communicator has " +
                                         std::to_string(r.n()) + " rank(s)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(conveyor::nccl::send(comm, buf[0], 16, -1, s), nccl_error);
  try {
    conveyor::nccl::all_reduce(comm, static_cast<const float*>(nullptr), buf[0], 16, reduce_op::sum, s);
    FAIL() << "null send buffer";
  } catch (const nccl_error& e) {
    EXPECT_NE(std::string(e.what()).find("the send buffer is null with a count of 16 elements"), std::string::npos);
  }
  EXPECT_TRUE(comm.valid());
  // Nothing was enqueued: a correct all-reduce on every rank still works.
  all_reduce_matches_cpu<float>(r, 5000, reduce_op::sum, false, "after refusals");
}

TEST(Nccl, AStreamOfAnotherDeviceIsRefusedNamingRankAndDevice) {
  CONVEYOR_REQUIRE_GPUS(2);
  const ranks r;
  per_rank<float> buf(r, 64);
  try {
    conveyor::nccl::all_reduce(r.comms[0], buf[0], buf[0], 64, reduce_op::sum, r.streams[1]);
    FAIL() << "rank 0's collective on device 1's stream";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.device(), 0);
    EXPECT_EQ(e.result(), ncclInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("the stream belongs to device 1, the communicator to device 0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(r.comms[0].valid());
  all_reduce_matches_cpu<float>(r, 5000, reduce_op::sum, false, "after the refusal");
}

TEST(Nccl, AnInvalidatedCaptureIsRefusedBeforeNccl) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  per_rank<float> buf(r, 64);
  {
    conveyor::capture_session session(r.streams[0], conveyor::capture_mode::global);
    void* p = nullptr;
    EXPECT_NE(cudaMalloc(&p, 64), cudaSuccess); // illegal in a global-mode capture: invalidates it
    (void)cudaGetLastError();
    try {
      conveyor::nccl::all_reduce(r.comms[0], buf[0], buf[0], 64, reduce_op::sum, r.streams[0]);
      FAIL() << "an all-reduce into an invalidated capture";
    } catch (const nccl_error& e) {
      EXPECT_NE(std::string(e.what()).find("capture was already invalidated"), std::string::npos) << e.what();
    }
  } // the session discards the broken capture
  EXPECT_TRUE(r.comms[0].valid());
  all_reduce_matches_cpu<float>(r, 5000, reduce_op::sum, false, "after the refusal");
}

TEST(Nccl, SynchronizeRefusesAStreamBeingCaptured) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  conveyor::capture_session session(r.streams[0]);
  try {
    r.comms[0].synchronize(r.streams[0]);
    FAIL() << "synchronize inside a capture";
  } catch (const nccl_error& e) {
    EXPECT_NE(std::string(e.what()).find("the stream is being captured"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(r.comms[0].valid());
}

TEST(Nccl, AGroupCapturedOnOneRankAndNotOnAnotherIsRefused) {
  CONVEYOR_REQUIRE_GPUS(2);
  const ranks r;
  per_rank<float> buf(r, 64);
  conveyor::capture_session session(r.streams[1]); // rank 1 captures, rank 0 does not
  {
    conveyor::nccl::group g;
    conveyor::nccl::all_reduce(r.comms[0], buf[0], buf[0], 64, reduce_op::sum, r.streams[0]);
    try {
      conveyor::nccl::all_reduce(r.comms[1], buf[1], buf[1], 64, reduce_op::sum, r.streams[1]);
      FAIL() << "rank 1 captures while rank 0 runs eagerly";
    } catch (const nccl_error& e) {
      EXPECT_EQ(e.rank(), 1);
      EXPECT_EQ(e.device(), 1);
      EXPECT_NE(std::string(e.what()).find("in one group rank 1's stream (device 1) is being captured and rank 0's "
                                           "(device 0) is not"),
                std::string::npos)
          << e.what();
    }
    // The group fails: rank 0's all-reduce would wait for rank 1 for ever, so its communicator is aborted.
    try {
      g.end();
      FAIL() << "the group ended without error";
    } catch (const nccl_error& e) {
      EXPECT_TRUE(e.aborted());
      EXPECT_NE(std::string(e.what()).find("a call in the group failed or was refused"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(r.comms[0].aborted());
  EXPECT_FALSE(r.comms[1].aborted()); // its call was refused before NCCL: nothing of it is in the group
}

// ---- errors never hang -------------------------------------------------------------------------------------------

TEST(Nccl, ARankThatNeverJoinsEndsInAnErrorWithinTheTimeout) {
  CONVEYOR_REQUIRE_GPUS(2);
  const ranks r(std::chrono::seconds(3));
  const std::size_t count = 1 << 16;
  per_rank<float> buf(r, count);
  // Every rank once (NCCL connects the ranks on first use), then only rank 0: its kernel waits for rank 1 for ever.
  all_reduce_matches_cpu<float>(r, count, reduce_op::sum, true, "warm-up");
  const auto start = std::chrono::steady_clock::now();
  try {
    conveyor::nccl::all_reduce(r.comms[0], buf[0], buf[0], count, reduce_op::sum, r.streams[0]);
    r.comms[0].synchronize(r.streams[0]);
    FAIL() << "synchronize returned although rank 1 never joined";
  } catch (const nccl_error& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(e.timed_out()) << e.what();
    EXPECT_TRUE(e.aborted());
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.device(), 0);
    EXPECT_EQ(e.call(), "conveyor::nccl::communicator::synchronize") << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0 (device 0): all work on the stream did not finish within 3000 ms; a "
                                         "peer may have failed or not called the same collectives"),
              std::string::npos)
        << e.what();
    EXPECT_GE(seconds, 2.9);
    EXPECT_LT(seconds, 10.0) << "the abort took too long";
  }
  EXPECT_TRUE(r.comms[0].aborted());
  EXPECT_THROW(r.comms[0].check(), nccl_error);
  // The stream works again (the abort stopped NCCL's kernel).
  EXPECT_EQ(cudaStreamQuery(r.streams[0].get()), cudaSuccess);
}

//! Polls `s` until its work is done, up to `limit`; true when done.
bool stream_drains(const conveyor::stream& s, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (cudaStreamQuery(s.get()) == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool done = cudaStreamQuery(s.get()) == cudaSuccess;
  (void)cudaGetLastError();
  return done;
}

TEST(Nccl, ATimeoutWhileAGraphHoldsTheCommunicatorThrowsAndEverythingEndsAfterTheGraph) {
  CONVEYOR_REQUIRE_GPUS(2);
  const auto begin = std::chrono::steady_clock::now();
  {
    const ranks r(std::chrono::seconds(3));
    const std::size_t count = 1 << 16;
    per_rank<float> buf(r, count);
    all_reduce_matches_cpu<float>(r, count, reduce_op::sum, true, "warm-up");
    {
      // Only rank 0's all-reduce, captured and launched: its kernel waits for rank 1 for ever, and the graph (which
      // NCCL 2.26+ makes ncclCommAbort wait for) is alive while synchronize times out.
      const conveyor::graph g = conveyor::capture(r.streams[0], [&] {
        conveyor::nccl::all_reduce(r.comms[0], buf[0], buf[0], count, reduce_op::sum, r.streams[0]);
      });
      const conveyor::graph_exec exec = conveyor::instantiate(g);
      exec.launch(r.streams[0]);
      const auto start = std::chrono::steady_clock::now();
      try {
        r.comms[0].synchronize(r.streams[0]);
        FAIL() << "synchronize returned although rank 1 never joined";
      } catch (const nccl_error& e) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_TRUE(e.timed_out()) << e.what();
        EXPECT_TRUE(e.aborted());
        EXPECT_EQ(e.rank(), 0);
        EXPECT_EQ(e.device(), 0);
        EXPECT_GE(seconds, 2.9);
        EXPECT_LT(seconds, 10.0) << "the abort waited for the graph";
      }
      EXPECT_TRUE(r.comms[0].aborted());
      EXPECT_TRUE(stream_drains(r.streams[0], std::chrono::seconds(5))) << "the abort did not stop NCCL's kernel";
    } // the graph and its executable first: the background abort can end now
  }   // then the buffers and communicators (the destructor waits for the abort, up to the 3 s timeout)
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_LT(total, 20.0) << "the communicators' release after the graph took too long";
}

TEST(Nccl, AnExceptionLeavingAGroupOpenAbortsItsCommunicatorsInsteadOfHanging) {
  CONVEYOR_REQUIRE_GPUS(2);
  const ranks r(std::chrono::seconds(3));
  const std::size_t count = 1 << 16;
  per_rank<float> buf(r, count);
  all_reduce_matches_cpu<float>(r, count, reduce_op::sum, true, "warm-up");
  const auto start = std::chrono::steady_clock::now();
  try {
    conveyor::nccl::group g;
    conveyor::nccl::all_reduce(r.comms[0], buf[0], buf[0], count, reduce_op::sum, r.streams[0]);
    throw std::runtime_error("user code failed before rank 1's call");
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "user code failed before rank 1's call"); // the user's exception, not the group's
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);
  EXPECT_TRUE(r.comms[0].aborted()) << "rank 0's collective launched alone and its communicator was not aborted";
  EXPECT_FALSE(r.comms[1].aborted()); // it was not used in the group
  EXPECT_TRUE(stream_drains(r.streams[0], std::chrono::seconds(5))) << "rank 0's lone collective still runs";
}

TEST(Nccl, AFailedGroupNamesEveryRankAndDevice) {
  CONVEYOR_REQUIRE_GPUS(2);
  const ranks r(std::chrono::seconds(3));
  const std::size_t count = 1 << 16;
  per_rank<float> buf(r, count);
  float* null = nullptr;
  try {
    conveyor::nccl::group g;
    conveyor::nccl::all_reduce(r.comms[0], buf[0], buf[0], count, reduce_op::sum, r.streams[0]);
    conveyor::nccl::all_reduce(r.comms[1], buf[1], buf[1], count, reduce_op::sum, r.streams[1]);
    EXPECT_THROW(conveyor::nccl::all_reduce(r.comms[1], null, null, count, reduce_op::sum, r.streams[1]), nccl_error);
    g.end();
    FAIL() << "a group with a refused call ended without error";
  } catch (const nccl_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 (device 0), rank 1 (device 1)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(r.comms[0].aborted());
  EXPECT_TRUE(r.comms[1].aborted());
}

TEST(Nccl, AgreeOnCaptureAcceptsOneDecisionAndRefusesACapture) {
  CONVEYOR_REQUIRE_GPU();
  const ranks r;
  conveyor::nccl::agree_on_capture(r.comms, r.stream_ptrs, 0);
  conveyor::nccl::agree_on_capture(r.comms, r.stream_ptrs, 0xfeedbeefcafeULL);
  conveyor::capture_session session(r.streams[0]);
  try {
    conveyor::nccl::agree_on_capture(r.comms[0], r.streams[0], 1);
    FAIL() << "agree_on_capture inside a capture";
  } catch (const nccl_error& e) {
    EXPECT_NE(std::string(e.what()).find("called inside a capture"), std::string::npos) << e.what();
  }
}

TEST(Nccl, AgreeOnCaptureThrowsOnEveryRankWhenDecisionsDiffer) {
  CONVEYOR_REQUIRE_GPUS(2);
  const ranks r;
  // One thread per rank, as one process per rank would: rank 0 runs eagerly (tag 0), the others capture.
  auto run = [&](auto tag_of) {
    std::vector<std::optional<std::string>> errors(static_cast<std::size_t>(r.n()));
    std::vector<std::thread> threads;
    for (int k = 0; k < r.n(); ++k)
      threads.emplace_back([&, k] {
        try {
          conveyor::nccl::agree_on_capture(r.comms[static_cast<std::size_t>(k)], r.streams[static_cast<std::size_t>(k)],
                                           tag_of(k));
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(k)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    return errors;
  };
  const auto differ = run([](int k) { return k == 0 ? std::uint64_t{0} : std::uint64_t{0xabc}; });
  for (int k = 0; k < r.n(); ++k) {
    ASSERT_TRUE(differ[static_cast<std::size_t>(k)].has_value()) << "rank " << k << " did not throw";
    const std::string& m = *differ[static_cast<std::size_t>(k)];
    EXPECT_NE(m.find("capture decision differs between ranks"), std::string::npos) << m;
    EXPECT_NE(m.find("range from 0 (run eagerly) to 0xabc (capture)"), std::string::npos) << m;
    EXPECT_NE(m.find("rank " + std::to_string(k) + " (device " + std::to_string(k) + ")"), std::string::npos) << m;
  }
  // A mismatch is an error, not a broken communicator: the next agreement succeeds on every rank.
  const auto agree = run([](int) { return std::uint64_t{0xabc}; });
  for (int k = 0; k < r.n(); ++k)
    EXPECT_FALSE(agree[static_cast<std::size_t>(k)].has_value()) << *agree[static_cast<std::size_t>(k)];
  for (const auto& c : r.comms) EXPECT_TRUE(c.valid());
}

} // namespace
