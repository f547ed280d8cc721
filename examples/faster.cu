// docs/faster.md's examples, compiled so that they stay true: programmatic edges built, changed and captured, the
// programmatic pass, node priorities, and the results checked against the host.
#include <conveyor/conveyor.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

__global__ void step(int n, float* x, float a) {
  conveyor::device::launch_dependents(); // optional: let the next kernel launch now
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  conveyor::device::wait_for_dependencies(); // before the first read of x
  if (i < n) x[i] = a * x[i];
}

int run(float* x, int n) {
  conveyor::stream s;
  const conveyor::launch_config cfg{dim3((n + 255) / 256), dim3(256)};

  // Built: a programmatic dependency at insertion, a launch-completion edge added later, then changed.
  conveyor::graph g;
  auto a = g.kernel(cfg, step, n, x, 2.0f).label("x2");
  auto b = g.kernel({conveyor::programmatic(a)}, cfg, step, n, x, 3.0f).label("x3");
  auto c = g.kernel(cfg, step, n, x, 4.0f).label("x4");
  b.precede(c, conveyor::edge_type::launch_completion);
  g.set_edge_type(b, c, conveyor::edge_type::programmatic);
  std::printf("%s", conveyor::to_dot(g, "built").c_str()); // programmatic edges dashed

  // Captured: launches with launch_config::programmatic become programmatic edges.
  conveyor::launch_config pdl = cfg;
  pdl.programmatic = true;
  conveyor::graph captured = conveyor::capture(s, [&](const conveyor::stream& cs) {
    conveyor::launch(cs, cfg, step, n, x, 0.5f);
    conveyor::launch(cs, pdl, step, n, x, 0.25f);
  });

  // The pass: every edge into a kernel that waits becomes programmatic (none left to change here).
  const auto report = conveyor::make_programmatic(captured, conveyor::waiting_kernels{}.add(step));
  for (const auto& line : report.lines()) std::printf("%s\n", line.c_str());

  // Priorities: an urgent kernel node, honoured with use_node_priority.
  int least = 0, greatest = 0;
  CONVEYOR_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  conveyor::launch_config urgent = cfg;
  urgent.priority = greatest;
  (void)g.kernel({c}, urgent, step, n, x, 1.0f).label("urgent");

  auto exec = conveyor::instantiate(g, conveyor::instantiate_flags::use_node_priority);
  auto again = conveyor::instantiate(captured);
  exec.launch(s);  // x *= 24
  again.launch(s); // x *= 0.125
  s.synchronize();
  std::vector<float> host(static_cast<std::size_t>(n));
  CONVEYOR_CHECK(cudaMemcpy(host.data(), x, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i)
    if (std::fabs(host[static_cast<std::size_t>(i)] - 3.0f * static_cast<float>(i)) > 1e-4f * (1.0f + i)) {
      std::printf("faster: element %d is %g, not %g\n", i, host[static_cast<std::size_t>(i)], 3.0 * i);
      return 1;
    }
  std::puts("faster: results as on the host");
  return 0;
}

int main() {
  if (!conveyor::has_device()) {
    std::puts("faster: no CUDA device");
    return 0;
  }
  const int n = 1 << 16;
  std::vector<float> init(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) init[static_cast<std::size_t>(i)] = static_cast<float>(i);
  float* x = nullptr;
  CONVEYOR_CHECK(cudaMalloc(&x, init.size() * sizeof(float)));
  CONVEYOR_CHECK(cudaMemcpy(x, init.data(), init.size() * sizeof(float), cudaMemcpyHostToDevice));
  const int rc = run(x, n);
  CONVEYOR_CHECK(cudaFree(x));
  return rc;
}
