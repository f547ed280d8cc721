#include "bench/graphed_overhead.hpp"

#include "bench/kernels.hpp"
#include "bench/statistics.hpp"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

namespace conveyor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

void step(const conveyor::stream& s, float* y, float a, float b) { launch_axpb(s.get(), y, a, b); }

} // namespace

graphed_overhead_result measure_graphed_overhead(int calls, int repetitions) {
  if (calls < 1 || repetitions < 1)
    throw std::invalid_argument("measure_graphed_overhead: calls and repetitions must be at least 1");
  conveyor::stream s;
  float* y = nullptr;
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&y), chunk_bytes));
  struct freer {
    float* p;
    ~freer() { (void)cudaFree(p); }
  } free_y{y};
  CONVEYOR_CHECK(cudaMemsetAsync(y, 0, chunk_bytes, s.get()));

  // The same one-kernel step, as a bare executable graph and as a graphed callable (warm-up, capture, then replay).
  const conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) { step(cs, y, 0.5F, 1.0F); });
  conveyor::graph_exec exec = conveyor::instantiate(g);
  exec.upload(s);
  conveyor::graphed_options options;
  options.warmup_calls = 1;
  conveyor::graphed run(step, options);
  for (int i = 0; i < 3; ++i) {
    run(s, y, 0.5F, 1.0F);
    exec.launch(s);
  }
  s.synchronize();

  auto time_calls = [&](auto&& call) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < calls; ++i) call();
    const auto t1 = clock_type::now();
    s.synchronize();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
  };
  std::vector<double> bare;
  std::vector<double> graphed;
  (void)time_calls([&] { exec.launch(s); }); // warm the loop itself
  (void)time_calls([&] { run(s, y, 0.5F, 1.0F); });
  for (int r = 0; r < repetitions; ++r) {
    bare.push_back(time_calls([&] { exec.launch(s); }));
    graphed.push_back(time_calls([&] { run(s, y, 0.5F, 1.0F); }));
  }
  const auto& st = run.statistics();
  if (st.instantiations != 1 || st.captures != 1 || st.rebinds != 0)
    throw std::logic_error("measure_graphed_overhead: graphed left its replay path:\n" + run.report());
  const summary b = summarise(bare);
  const summary gr = summarise(graphed);
  return {calls, repetitions, b.median, b.min, b.max, gr.median, gr.min, gr.max};
}

graphed_overhead_result measure_graphed_overhead_study(const study_args& /*args*/) {
  return measure_graphed_overhead();
}

} // namespace conveyor::bench
