#include "bench/update_growth.hpp"

#include "bench/kernels.hpp"

#include <conveyor/define/graph.hpp>
#include <conveyor/execute/graph_exec.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

namespace conveyor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

std::atomic<long> live{0};

// 4 KiB of state a host callable owns, counted while alive.
struct callable_state {
  std::vector<float> values = std::vector<float>(1024, 1.0F);
  callable_state() { live.fetch_add(1); }
  callable_state(const callable_state&) = delete;
  callable_state& operator=(const callable_state&) = delete;
  ~callable_state() { live.fetch_sub(1); }
};

__attribute__((noinline)) void touch(float* out, const callable_state& st) { *out = st.values[7]; }

double resident_mib() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double us(clock_type::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

} // namespace

std::vector<growth_row> measure_update_growth(std::size_t steps, std::size_t checkpoints) {
  if (steps < 1 || checkpoints < 1 || checkpoints > steps)
    throw std::invalid_argument("measure_update_growth: need 1 <= checkpoints <= steps");
  conveyor::stream s;
  float* buffers = nullptr;
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&buffers), 2 * chunk_bytes));
  struct freer {
    float* p;
    ~freer() { (void)cudaFree(p); }
  } free_buffers{buffers};
  CONVEYOR_CHECK(cudaMemsetAsync(buffers, 0, 2 * chunk_bytes, s.get()));
  float sink = 0.0F;
  std::atomic<long> runs{0};
  auto build = [&](std::size_t step) {
    conveyor::graph g;
    float* y = buffers + (step % 2) * (chunk_bytes / sizeof(float));
    auto k = g.kernel({dim3(1), dim3(kernel_threads), 0}, axpb_kernel(), y, 1.0F, 0.0F);
    auto st = std::make_shared<callable_state>();
    g.host({k}, [st, &sink, &runs] {
      touch(&sink, *st);
      runs.fetch_add(1, std::memory_order_relaxed);
    });
    return g;
  };
  auto exec = conveyor::instantiate(build(0));
  std::vector<growth_row> rows;
  const std::size_t chunk = steps / checkpoints;
  std::size_t done = 0;
  while (done < steps) {
    const std::size_t todo = std::min(chunk, steps - done);
    clock_type::duration build_time{}, update_time{}, launch_time{};
    for (std::size_t i = 0; i < todo; ++i) {
      const auto t0 = clock_type::now();
      conveyor::graph g = build(done + i + 1);
      const auto t1 = clock_type::now();
      const auto r = exec.update(g);
      const auto t2 = clock_type::now();
      if (!r) throw std::runtime_error("update refused: " + r.reason());
      exec.launch(s);
      const auto t3 = clock_type::now();
      build_time += t1 - t0;
      update_time += t2 - t1;
      launch_time += t3 - t2;
    }
    done += todo;
    s.synchronize();
    // Let CUDA hand back the released states (asynchronously, from its own thread), then count them.
    for (int i = 0; i < 1000 && (conveyor::reclaim_resources(), live.load() > 1); ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    const auto n = static_cast<double>(todo);
    rows.push_back({done, resident_mib(), live.load(), us(build_time) / n, us(update_time) / n, us(launch_time) / n});
  }
  if (runs.load() != static_cast<long>(steps))
    throw std::runtime_error(fmt::format("host callables ran {} times for {} launches", runs.load(), steps));
  return rows;
}

std::vector<growth_row> measure_update_growth_study(const study_args& args) {
  return measure_update_growth(args.steps);
}

} // namespace conveyor::bench
