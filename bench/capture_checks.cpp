// The `capture-checks` study: what each check of a capture costs (capture_checks.hpp).
#include "bench/capture_checks.hpp"

#include "bench/kernels.hpp"
#include "bench/statistics.hpp"
#include "define/stream_watch.hpp" // stream_watch_unavailable: the first watch, timed

#include <conveyor/define/capture.hpp>
#include <conveyor/error.hpp>
#include <conveyor/runtime/stream.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>
#include <vector>

namespace conveyor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

// The three sets of checks, in the order of the row's columns.
std::array<capture_options, 3> check_sets() {
  capture_options none;
  none.catch_default_streams = false;
  none.host_memory = host_memory_check::off;
  none.watch_streams = stream_watch::off;
  capture_options defaults;
  defaults.watch_streams = stream_watch::off;
  capture_options watched;
  watched.watch_streams = stream_watch::on;
  return {none, defaults, watched};
}

// Buffers for N calls: a chunk of device memory per kernel or copy, and a page-locked host source for the copies.
struct buffers {
  float* device = nullptr;
  float* host = nullptr;
  explicit buffers(std::size_t n) {
    CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), n * chunk_bytes));
    CONVEYOR_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), n * chunk_bytes));
  }
  buffers(const buffers&) = delete;
  buffers& operator=(const buffers&) = delete;
  ~buffers() {
    (void)cudaFree(device);
    (void)cudaFreeHost(host);
  }
};

// µs of one capture of `n` kernels (or copies) on `s` (begin, calls, end; the graph destroyed) under `options`.
double capture_us(const stream& s, const buffers& b, std::size_t n, bool copies, const capture_options& options) {
  const auto t0 = clock_type::now();
  {
    graph g = capture(
        s,
        [&](const stream& cs) {
          for (std::size_t i = 0; i < n; ++i) {
            float* chunk = b.device + i * kernel_threads;
            if (copies)
              (void)cudaMemcpyAsync(chunk, b.host + i * kernel_threads, chunk_bytes, cudaMemcpyHostToDevice, cs.get());
            else launch_axpb(cs.get(), chunk, 1.0001F, 0.5F);
          }
          CONVEYOR_CHECK(cudaGetLastError());
        },
        options);
  }
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

capture_checks_row measure_row(const stream& s, const buffers& b, std::size_t n, bool copies, int reps, bool watch) {
  const auto sets = check_sets();
  const std::size_t used = watch ? sets.size() : sets.size() - 1;
  std::array<std::vector<double>, 3> times;
  for (std::size_t k = 0; k < used; ++k) (void)capture_us(s, b, n, copies, sets[k]); // warm-up
  for (int r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < used; ++k) times[k].push_back(capture_us(s, b, n, copies, sets[k]));
  capture_checks_row row;
  row.calls = copies ? "copies" : "kernels";
  row.count = n;
  row.none_us = median(times[0]);
  row.defaults_us = median(times[1]);
  row.watched_us = watch ? median(times[2]) : 0;
  return row;
}

} // namespace

capture_checks_study measure_capture_checks(const std::vector<std::size_t>& sizes, int reps) {
  if (sizes.empty()) throw std::invalid_argument("measure_capture_checks: no sizes");
  if (reps < 1) throw std::invalid_argument("measure_capture_checks: reps must be >= 1");
  for (std::size_t n : sizes)
    if (n == 0) throw std::invalid_argument("measure_capture_checks: N must be at least 1");
  capture_checks_study out;
  const auto t0 = clock_type::now();
  out.watch_unavailable = detail::stream_watch_unavailable();
  out.first_watch_us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
  const buffers b(*std::max_element(sizes.begin(), sizes.end()));
  const stream s;
  for (const bool copies : {false, true})
    for (std::size_t n : sizes) out.rows.push_back(measure_row(s, b, n, copies, reps, out.watch_unavailable.empty()));
  return out;
}

capture_checks_study measure_capture_checks_study(const study_args& args) {
  return args.quick ? measure_capture_checks({10, 1000}, 11) : measure_capture_checks({10, 100, 1000}, 41);
}

} // namespace conveyor::bench
