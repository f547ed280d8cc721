// MPI tests of the NCCL layer (issue 16): one process per GPU, started by tests/mpi/run_mpi.sh as
//   mpirun --allow-run-as-root --oversubscribe -np 2 test_nccl_mpi <case>
// Cases:
//   all_reduce        init_with_mpi, an all-reduce (float sum) eager and captured into a graph, against the CPU;
//   early_exit        rank 1 exits (std::_Exit) after the communicator works; rank 0's next all-reduce must end in
//                     nccl_error within its timeout (5 s), not hang;
//   capture_mismatch  rank 0 will run eagerly, rank 1 capture: agree_on_capture throws on both ranks;
//   duplicate_device  both ranks ask for device 0: init_with_mpi refuses on both, naming both ranks;
//   world_size        check_world_size(MPI_COMM_WORLD, 3) in a job of 2 refuses naming both sizes (needs no GPU).
// Exit status: 0 when the case behaved as expected on this rank, 1 when not, 77 (CTest's SKIP_RETURN_CODE) when the
// case needs more CUDA devices than are visible ("needs 2 CUDA devices, N visible").
#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/nccl.hpp>
#include <conveyor/nccl/mpi.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/stream.hpp>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr int skip_code = 77;
using conveyor::nccl::nccl_error;

//! Seeded values of rank r in [-1, 1] (every rank can make every other rank's, for the CPU reference).
std::vector<float> values_of(int rank, std::size_t count) {
  std::mt19937 gen(4242u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<float> v(count);
  for (auto& x : v) x = static_cast<float>(dist(gen));
  return v;
}

//! A float buffer on the current device.
struct device_floats {
  float* p = nullptr;
  std::size_t n = 0;
  explicit device_floats(std::size_t count) : n(count) { CONVEYOR_CHECK(cudaMalloc(&p, count * sizeof(float))); }
  device_floats(const device_floats&) = delete;
  device_floats& operator=(const device_floats&) = delete;
  ~device_floats() { (void)cudaFree(p); }
  void upload(const std::vector<float>& v) const {
    CONVEYOR_CHECK(cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  [[nodiscard]] std::vector<float> download() const {
    std::vector<float> v(n);
    CONVEYOR_CHECK(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }
};

//! Largest error of `got` against the double sum of every rank's values, relative to the sum of magnitudes.
double worst_relative_error(const std::vector<float>& got, int nranks) {
  std::vector<std::vector<float>> all;
  for (int r = 0; r < nranks; ++r) all.push_back(values_of(r, got.size()));
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double sum = 0;
    double scale = 0;
    for (const auto& v : all) {
      sum += v[i];
      scale += std::abs(static_cast<double>(v[i]));
    }
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - sum) / std::max(scale, 1e-30));
  }
  return worst;
}

int case_all_reduce(const conveyor::nccl::mpi_session& mpi) {
  const int device = mpi.local_rank();
  CONVEYOR_CHECK(cudaSetDevice(device));
  conveyor::nccl::comm_options options;
  options.timeout = std::chrono::seconds(30);
  const conveyor::nccl::communicator comm = conveyor::nccl::init_with_mpi(MPI_COMM_WORLD, device, options);
  const conveyor::stream s;
  const std::size_t count = (1u << 20) + 3;
  device_floats send(count);
  device_floats recv(count);
  send.upload(values_of(mpi.rank(), count));
  const double tolerance = 4.0 * comm.size() * 1.1920929e-7;
  int failures = 0;
  // Eager.
  conveyor::nccl::all_reduce(comm, send.p, recv.p, count, conveyor::nccl::reduce_op::sum, s);
  comm.synchronize(s);
  const double eager = worst_relative_error(recv.download(), comm.size());
  // Captured, after every rank agreed to capture the same thing.
  conveyor::nccl::agree_on_capture(comm, s, 0xa11ULL);
  {
    CONVEYOR_CHECK(cudaMemset(recv.p, 0, count * sizeof(float)));
    CONVEYOR_CHECK(cudaDeviceSynchronize());
    const conveyor::graph g = conveyor::capture(
        s, [&] { conveyor::nccl::all_reduce(comm, send.p, recv.p, count, conveyor::nccl::reduce_op::sum, s); });
    const conveyor::graph_exec exec = conveyor::instantiate(g);
    exec.launch(s);
    exec.launch(s);
    comm.synchronize(s);
  } // the graphs go before the communicator
  const double captured = worst_relative_error(recv.download(), comm.size());
  for (const auto& [what, err] : {std::pair{"eager", eager}, std::pair{"captured", captured}}) {
    const bool ok = err <= tolerance;
    std::printf("rank %d (device %d): %s all-reduce of %zu floats over %d ranks: worst relative error %.3g "
                "(tolerance %.3g): %s\n",
                mpi.rank(), device, what, count, comm.size(), err, tolerance, ok ? "ok" : "WRONG");
    failures += ok ? 0 : 1;
  }
  return failures == 0 ? 0 : 1;
}

int case_early_exit(const conveyor::nccl::mpi_session& mpi) {
  const int device = mpi.local_rank();
  CONVEYOR_CHECK(cudaSetDevice(device));
  conveyor::nccl::comm_options options;
  options.timeout = std::chrono::seconds(5);
  conveyor::nccl::communicator comm = conveyor::nccl::init_with_mpi(MPI_COMM_WORLD, device, options);
  const conveyor::stream s;
  const std::size_t count = 1u << 16;
  device_floats buf(count);
  buf.upload(values_of(mpi.rank(), count));
  // The communicator works (and the ranks are connected) ...
  conveyor::nccl::all_reduce(comm, buf.p, buf.p, count, conveyor::nccl::reduce_op::sum, s);
  comm.synchronize(s);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mpi.rank() != 0) {
    // ... then rank 1 dies without a word (no MPI_Finalize, no NCCL clean-up).
    std::printf("rank %d: exiting now\n", mpi.rank());
    std::fflush(stdout);
    std::_Exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  int rc = 1;
  try {
    conveyor::nccl::all_reduce(comm, buf.p, buf.p, count, conveyor::nccl::reduce_op::sum, s);
    comm.synchronize(s);
    std::printf("rank 0: WRONG: the all-reduce finished although rank 1 is gone\n");
  } catch (const nccl_error& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool in_time = seconds < 5.0 + 10.0;
    std::printf("rank 0: nccl_error after %.2f s (%s; rank %d, device %d, timed out: %s, aborted: %s): %s\n", seconds,
                in_time ? "within the 5 s timeout and the abort" : "TOO LATE", e.rank(), e.device(),
                e.timed_out() ? "yes" : "no", e.aborted() ? "yes" : "no", e.what());
    rc = in_time && e.rank() == 0 && e.aborted() ? 0 : 1;
  }
  std::fflush(stdout);
  // The peer is gone: no MPI_Finalize (it could wait for rank 1), no NCCL finalisation.
  std::_Exit(rc);
}

int case_capture_mismatch(const conveyor::nccl::mpi_session& mpi) {
  const int device = mpi.local_rank();
  CONVEYOR_CHECK(cudaSetDevice(device));
  conveyor::nccl::comm_options options;
  options.timeout = std::chrono::seconds(20);
  const conveyor::nccl::communicator comm = conveyor::nccl::init_with_mpi(MPI_COMM_WORLD, device, options);
  const conveyor::stream s;
  const std::uint64_t tag = mpi.rank() == 0 ? 0 : 0x1234;
  try {
    conveyor::nccl::agree_on_capture(comm, s, tag);
    std::printf("rank %d: WRONG: agree_on_capture accepted tag %#llx although the ranks differ\n", mpi.rank(),
                static_cast<unsigned long long>(tag));
    return 1;
  } catch (const nccl_error& e) {
    const bool ok = std::string_view(e.what()).find("capture decision differs between ranks") != std::string::npos;
    std::printf("rank %d: %s: %s\n", mpi.rank(), ok ? "refused as expected" : "WRONG error", e.what());
    if (!ok) return 1;
  }
  // Still usable: the ranks now agree.
  conveyor::nccl::agree_on_capture(comm, s, 0x1234);
  std::printf("rank %d: the next agreement (both 0x1234) passed\n", mpi.rank());
  return 0;
}

int case_duplicate_device(const conveyor::nccl::mpi_session& mpi) {
  try {
    const auto comm = conveyor::nccl::init_with_mpi(MPI_COMM_WORLD, 0);
    std::printf("rank %d: WRONG: two ranks were given device 0 of one host\n", mpi.rank());
    return 1;
  } catch (const nccl_error& e) {
    const bool ok =
        std::string_view(e.what()).find("ranks 0 and 1 both use CUDA device 0 on host") != std::string::npos;
    std::printf("rank %d: %s: %s\n", mpi.rank(), ok ? "refused as expected" : "WRONG error", e.what());
    return ok ? 0 : 1;
  }
}

int case_world_size(const conveyor::nccl::mpi_session& mpi) {
  conveyor::nccl::check_world_size(MPI_COMM_WORLD, mpi.size()); // the right size passes
  try {
    conveyor::nccl::check_world_size(MPI_COMM_WORLD, 3);
    std::printf("rank %d: WRONG: a world of %d accepted as 3\n", mpi.rank(), mpi.size());
    return 1;
  } catch (const std::invalid_argument& e) {
    const std::string expected = fmt::format("expected 3 MPI processes, but this job has {}", mpi.size());
    const bool ok = std::string_view(e.what()).find(expected) != std::string::npos;
    std::printf("rank %d: %s: %s\n", mpi.rank(), ok ? "refused as expected" : "WRONG error", e.what());
    return ok ? 0 : 1;
  }
}

} // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  if (which.empty()) {
    // Run without a case (e.g. by a script that runs every test program): nothing to do, no MPI started.
    std::printf("test_nccl_mpi: give a case (all_reduce, early_exit, capture_mismatch, duplicate_device, world_size) "
                "and run it under mpirun -np 2, as tests/mpi/run_mpi.sh does; nothing to do\n");
    return 0;
  }
  try {
    conveyor::nccl::mpi_session mpi(&argc, &argv);
    struct entry {
      std::string_view name;
      int gpus;
      int (*run)(const conveyor::nccl::mpi_session&);
    };
    const entry cases[] = {{"all_reduce", 2, case_all_reduce},
                           {"early_exit", 2, case_early_exit},
                           {"capture_mismatch", 2, case_capture_mismatch},
                           {"duplicate_device", 1, case_duplicate_device},
                           {"world_size", 0, case_world_size}};
    for (const entry& c : cases) {
      if (c.name != which) continue;
      const int visible = conveyor::device_count();
      const int needed = c.gpus; // the two ranks run on one host, each on its own GPU
      if (visible < needed) {
        std::printf("rank %d: SKIP: needs %d CUDA devices, %d visible (case %s)\n", mpi.rank(), needed, visible,
                    which.c_str());
        std::fflush(stdout);
        return skip_code;
      }
      const int rc = c.run(mpi);
      std::fflush(stdout);
      return rc;
    }
    std::fprintf(stderr,
                 "test_nccl_mpi: unknown case '%s' (all_reduce, early_exit, capture_mismatch, "
                 "duplicate_device, world_size)\n",
                 which.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::printf("test_nccl_mpi %s: unexpected error: %s\n", which.c_str(), e.what());
    std::fflush(stdout);
    return 1;
  }
}
