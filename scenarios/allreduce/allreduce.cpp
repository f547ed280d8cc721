//! \file allreduce.cpp
//! `conveyor allreduce`: NCCL all-reduce (float sum), eager calls against the same calls captured into one graph,
//! on every visible GPU in one process or one process per GPU under mpirun.

#include "allreduce/allreduce.hpp"

#include "util/median.hpp"

#include "allreduce/allreduce_report.hpp"

#include "common/file_output.hpp"
#include "common/output_paths.hpp"
#include "common/usage_error.hpp"

#include <conveyor/runtime/architecture.hpp>
#include <conveyor/error.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

#if CONVEYOR_ALLREDUCE_NCCL
#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/nccl.hpp>
#if CONVEYOR_ALLREDUCE_MPI
#include <conveyor/nccl/mpi.hpp>
#endif
#endif

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::allreduce {

namespace {

using conveyor::scenarios::usage_error;

constexpr const char* no_nccl = "conveyor allreduce: this build has no NCCL (conveyor::nccl was not built: nccl.h or "
                                "libnccl not found at configure time)";

#if CONVEYOR_ALLREDUCE_NCCL

// The median of the trials (the project's one median, src/util/median.hpp); -1 for none.
double median_of_trials(std::vector<double> v) { return v.empty() ? -1 : conveyor::detail::median(std::move(v)); }

namespace nccl = conveyor::nccl;

[[noreturn]] void throw_raw(ncclResult_t r, const char* call) {
  throw std::runtime_error(
      fmt::format("conveyor allreduce: {} failed: {} ({})", call, nccl::result_name(r), ncclGetErrorString(r)));
}

//! The ranks this process drives: one (distributed) or every local GPU, with their streams and buffers, Conveyor's
//! nonblocking communicators and, for the baseline, plain blocking NCCL communicators.
struct local_ranks {
  std::vector<int> devices;
  int world = 1; // ranks in all processes
  int first_rank = 0;
  bool distributed = false;
  std::vector<nccl::communicator> comms;
  std::vector<conveyor::stream> streams;
  std::vector<const conveyor::stream*> ptrs;
  std::vector<ncclComm_t> raw;
  std::vector<float*> send;
  std::vector<float*> recv;
  std::size_t capacity = 0; // floats per buffer

  local_ranks() = default;
  local_ranks(const local_ranks&) = delete;
  local_ranks& operator=(const local_ranks&) = delete;
  ~local_ranks() {
    for (ncclComm_t c : raw)
      if (c != nullptr) (void)ncclCommDestroy(c);
    for (float* p : send) (void)cudaFree(p);
    for (float* p : recv) (void)cudaFree(p);
  }
  [[nodiscard]] int n() const { return static_cast<int>(devices.size()); }

  void allocate(std::size_t floats) {
    capacity = floats;
    const std::vector<float> ones(floats, 1.0f);
    for (const int d : devices) {
      const conveyor::device_guard on(d);
      float* s = nullptr;
      float* r = nullptr;
      CONVEYOR_CHECK(cudaMalloc(&s, floats * sizeof(float)));
      send.push_back(s);
      CONVEYOR_CHECK(cudaMalloc(&r, floats * sizeof(float)));
      recv.push_back(r);
      CONVEYOR_CHECK(cudaMemcpy(s, ones.data(), floats * sizeof(float), cudaMemcpyHostToDevice));
      streams.emplace_back();
    }
    for (const auto& s : streams) ptrs.push_back(&s);
  }

  //! One all-reduce of `count` floats on every local rank (a group when there are several).
  void enqueue(std::size_t count) const {
    nccl::group g;
    for (std::size_t i = 0; i < comms.size(); ++i)
      nccl::all_reduce(comms[i], send[i], recv[i], count, nccl::reduce_op::sum, streams[i]);
    g.end();
  }
  void enqueue_raw(std::size_t count) const {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) throw_raw(r, "ncclGroupStart");
    for (std::size_t i = 0; i < raw.size(); ++i) {
      r = ncclAllReduce(send[i], recv[i], count, ncclFloat32, ncclSum, raw[i], streams[i].get());
      if (r != ncclSuccess) throw_raw(r, "ncclAllReduce");
    }
    r = ncclGroupEnd();
    if (r != ncclSuccess) throw_raw(r, "ncclGroupEnd");
  }
  void synchronize() const { nccl::synchronize(comms, ptrs); }
  void barrier() const {
#if CONVEYOR_ALLREDUCE_MPI
    if (distributed && MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
      throw std::runtime_error("conveyor allreduce: MPI_Barrier failed");
#endif
  }
  //! Zeroes every recv buffer (so that a check sees this mode's results).
  void clear(std::size_t count) const {
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const conveyor::device_guard on(devices[i]);
      CONVEYOR_CHECK(cudaMemsetAsync(recv[i], 0, count * sizeof(float), streams[i].get()));
    }
    synchronize();
  }
  //! Every element of every recv buffer equals the number of ranks (the inputs are 1.0).
  [[nodiscard]] bool correct(std::size_t count) const {
    std::vector<float> host(count);
    for (std::size_t i = 0; i < devices.size(); ++i) {
      CONVEYOR_CHECK(cudaMemcpy(host.data(), recv[i], count * sizeof(float), cudaMemcpyDeviceToHost));
      for (const float x : host)
        if (x != static_cast<float>(world)) return false;
    }
    return true;
  }
};

//! Microseconds per call of `calls` calls of `enqueue` (timed with events on the first local stream), after the
//! others are ready.
template <class Enqueue>
double time_calls(const local_ranks& r, int calls, const conveyor::event& start, const conveyor::event& stop,
                  Enqueue&& enqueue) {
  r.barrier();
  start.record(r.streams[0]);
  for (int i = 0; i < calls; ++i) enqueue();
  stop.record(r.streams[0]);
  r.synchronize();
  return 1000.0 * static_cast<double>(conveyor::event::elapsed_ms(start, stop)) / calls;
}

void measure(local_ranks& r, const options& o, std::vector<size_row>& rows) {
  const conveyor::device_guard on(r.devices[0]);
  const conveyor::event start;
  const conveyor::event stop;
  for (size_row& row : rows) {
    const std::size_t count = row.bytes / sizeof(float);
    const int calls = row.bytes <= (std::size_t{1} << 20) ? 200 : row.bytes <= (std::size_t{16} << 20) ? 50 : 20;
    // Eager, Conveyor's nonblocking communicators.
    r.clear(count);
    for (int i = 0; i < 5; ++i) r.enqueue(count); // warm-up (the first call of a size sets up NCCL's plans)
    r.synchronize();
    std::vector<double> t;
    for (int k = 0; k < o.trials; ++k) t.push_back(time_calls(r, calls, start, stop, [&] { r.enqueue(count); }));
    row.eager_us = median_of_trials(t);
    row.correct = row.correct && r.correct(count);
    // Eager, plain blocking NCCL communicators.
    if (!r.raw.empty()) {
      r.clear(count);
      for (int i = 0; i < 5; ++i) r.enqueue_raw(count);
      r.synchronize();
      t.clear();
      for (int k = 0; k < o.trials; ++k) t.push_back(time_calls(r, calls, start, stop, [&] { r.enqueue_raw(count); }));
      row.blocking_us = median_of_trials(t);
      row.correct = row.correct && r.correct(count);
    }
    // Captured: calls_per_graph all-reduces in one graph (every local device's stream forked into the capture of
    // the first), replayed; every rank agrees first that it captures this size.
    r.clear(count);
    nccl::agree_on_capture(r.comms, r.ptrs, 0xa11ULL + row.bytes);
    {
      const conveyor::stream& origin = r.streams[0];
      const conveyor::graph g = conveyor::capture(origin, [&] {
        for (std::size_t i = 1; i < r.streams.size(); ++i) conveyor::fork(origin, r.streams[i]);
        for (int c = 0; c < o.calls_per_graph; ++c) r.enqueue(count);
        for (std::size_t i = 1; i < r.streams.size(); ++i) conveyor::join(origin, r.streams[i]);
      });
      const conveyor::graph_exec exec = conveyor::instantiate(g);
      for (int i = 0; i < 2; ++i) exec.launch(origin); // warm-up (and upload)
      r.synchronize();
      const int replays = std::max(2, calls / o.calls_per_graph);
      t.clear();
      for (int k = 0; k < o.trials; ++k)
        t.push_back(time_calls(r, replays, start, stop, [&] { exec.launch(origin); }) / o.calls_per_graph);
      row.graph_us = median_of_trials(t);
    } // graphs before communicators
    row.correct = row.correct && r.correct(count);
    if (r.first_rank == 0) std::fprintf(stderr, "  %s done\n", size_label(row.bytes).c_str());
  }
}

//! The ranks of every local GPU (or the first o.gpus), Conveyor's communicators and, for the baseline, plain
//! blocking NCCL communicators (ncclCommInitAll).
void open_local(local_ranks& r, const options& o, const nccl::comm_options& comm) {
  if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: conveyor allreduce needs a GPU");
  r.devices = o.gpus > 0 ? conveyor::first_devices(o.gpus) : conveyor::first_devices(conveyor::device_count());
  for (int d : r.devices) conveyor::check_device_architecture(d);
  r.world = r.n();
  r.comms = nccl::communicator::init_all(r.devices, comm);
  if (o.with_blocking_baseline()) {
    r.raw.assign(r.devices.size(), nullptr);
    const ncclResult_t rc = ncclCommInitAll(r.raw.data(), r.n(), r.devices.data());
    if (rc != ncclSuccess) throw_raw(rc, "ncclCommInitAll");
  }
}

#if CONVEYOR_ALLREDUCE_MPI
//! The blocking baseline's communicator over MPI_COMM_WORLD (ncclCommInitRank). Rank 0 sends the unique id with a
//! flag, so that a failure to make it ends every rank instead of leaving the others in MPI_Bcast. ncclCommInitRank
//! (blocking) has no timeout: a rank that fails before it leaves the others waiting, which is why this column is
//! off by default under --distributed (MPI_Abort ends them all).
ncclComm_t blocking_comm_over_mpi(const local_ranks& r, const nccl::mpi_session& mpi) {
  struct {
    int ok = 0;
    ncclUniqueId id{};
  } message;
  std::string id_error;
  if (mpi.rank() == 0) {
    try {
      message.id = nccl::unique_id::create().id;
      message.ok = 1;
    } catch (const std::exception& e) {
      id_error = e.what();
    }
  }
  if (MPI_Bcast(&message, sizeof message, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw std::runtime_error("conveyor allreduce: MPI_Bcast of the blocking baseline's unique id failed");
  if (message.ok == 0)
    throw std::runtime_error(mpi.rank() == 0 ? id_error : "rank 0 could not make the blocking baseline's unique id");
  const conveyor::device_guard on(r.devices[0]);
  ncclComm_t c = nullptr;
  const ncclResult_t rc = ncclCommInitRank(&c, r.world, message.id, mpi.rank());
  if (rc != ncclSuccess) throw_raw(rc, "ncclCommInitRank");
  return c;
}

//! This process's rank of an mpirun job: device = the rank on its host, Conveyor's communicator over
//! MPI_COMM_WORLD (init_with_mpi) and, for the baseline, a blocking one.
void open_distributed(local_ranks& r, const nccl::mpi_session& mpi, const options& o, const nccl::comm_options& comm) {
  if (!conveyor::has_device()) throw std::runtime_error("no CUDA device: conveyor allreduce needs a GPU");
  r.distributed = true;
  r.world = mpi.size();
  r.first_rank = mpi.rank();
  r.devices = {mpi.local_rank()};
  {
    const conveyor::device_guard on(r.devices[0]);
    r.comms.push_back(nccl::init_with_mpi(MPI_COMM_WORLD, r.devices[0], comm));
  }
  if (o.with_blocking_baseline()) r.raw.push_back(blocking_comm_over_mpi(r, mpi));
}
#endif

//! Measures every size on the opened ranks; where `print`, prints the title (stderr) and the table (stdout) and
//! writes o.json. Then checks every result.
void measure_and_report(local_ranks& r, const options& o, std::vector<size_row>& rows, bool print) {
  r.allocate(rows.back().bytes / sizeof(float));
  std::vector<std::string> gpus;
  for (const int d : r.devices) gpus.push_back(conveyor::describe_device(d));
  int version = 0;
  (void)ncclGetVersion(&version);
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  const std::string title = fmt::format(
      "conveyor allreduce: NCCL {}.{}.{} all-reduce (float sum) over {} rank(s) ({}), {} all-reduces per graph, "
      "median of {} trials; NCCL_NVLS_ENABLE={}\n{}",
      version / 10000, version / 100 % 100, version % 100, r.world,
      o.distributed ? "one process per GPU under mpirun" : "one process, every GPU", o.calls_per_graph, o.trials,
      nvls != nullptr ? nvls : "(unset)", fmt::join(gpus, "\n"));
  if (print) std::fprintf(stderr, "%s\n", title.c_str());
  measure(r, o, rows);
  if (print) {
    std::fputs(table(rows, r.world, title).c_str(), stdout);
    std::fflush(stdout);
    if (!o.json.empty()) {
      conveyor::scenarios::write_file_atomically(o.json, to_json(rows, r.world, o, gpus, version).dump(2) + "\n");
      std::fprintf(stderr, "wrote %s\n", o.json.c_str());
    }
  }
  for (const size_row& row : rows)
    if (!row.correct)
      throw std::runtime_error(
          fmt::format("conveyor allreduce: the result of the {} all-reduce is wrong", size_label(row.bytes)));
}

#if CONVEYOR_ALLREDUCE_MPI
//! --distributed: an error on one rank (an exception from NCCL, CUDA, MPI or the checks) is printed with its rank
//! and device and ends the whole job: the other ranks may be waiting for this one in a collective or an MPI call.
void run_distributed(const options& o, const nccl::comm_options& comm, std::vector<size_row>& rows) {
  // The ranks are declared before the session and the try below: an error ends the job (MPI_Abort) before the
  // communicators' destructors could wait for peers.
  local_ranks r;
  const nccl::mpi_session mpi;
  try {
    open_distributed(r, mpi, o, comm);
    measure_and_report(r, o, rows, mpi.rank() == 0);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "conveyor: error: rank {} of {} (device {}): {}\n", mpi.rank(), mpi.size(), mpi.local_rank(),
               e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1); // the other ranks may be waiting for this one: end them all
    std::abort();
  }
}
#endif

#endif // CONVEYOR_ALLREDUCE_NCCL

} // namespace

void check_options(const options& o) {
  if (o.min_bytes < 4 || o.min_bytes % 4 != 0)
    throw usage_error(fmt::format("--min-bytes: must be a multiple of 4 (a float) of at least 4, got {}", o.min_bytes));
  if (o.max_bytes < o.min_bytes || o.max_bytes > (std::size_t{1} << 30))
    throw usage_error(fmt::format("--max-bytes: must be in [--min-bytes = {}, 1073741824 (1 GiB)], got {}", o.min_bytes,
                                  o.max_bytes));
  if (!o.json.empty()) conveyor::scenarios::check_output_file("--json", o.json);
#if !CONVEYOR_ALLREDUCE_NCCL
  throw std::runtime_error(no_nccl);
#endif
#if !CONVEYOR_ALLREDUCE_MPI
  if (o.distributed)
    throw std::runtime_error("--distributed: this build has no MPI (conveyor::nccl_mpi was not built: MPI not found "
                             "at configure time)");
#endif
}

void run(const options& o) {
#if CONVEYOR_ALLREDUCE_NCCL
  std::vector<size_row> rows;
  for (const std::size_t b : sizes_of(o)) rows.push_back(size_row{b});
  nccl::comm_options comm;
  comm.timeout = std::chrono::milliseconds(o.timeout_ms);
  if (o.distributed) {
#if CONVEYOR_ALLREDUCE_MPI
    run_distributed(o, comm, rows);
    return;
#else
    throw std::runtime_error("--distributed: this build has no MPI");
#endif
  }
  local_ranks r;
  open_local(r, o, comm);
  measure_and_report(r, o, rows, true);
#else
  (void)o;
  throw std::runtime_error(no_nccl);
#endif
}

} // namespace conveyor::allreduce
