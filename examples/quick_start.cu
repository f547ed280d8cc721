// The README's two examples, compiled and run so that they stay true: a built graph with a dependency, a capture
// with fork and join, instantiation and replay, a per-node change, a whole-graph update and its result; a graphed
// callable.
#include <conveyor/conveyor.hpp>

#include <cstdio>

__global__ void scale(int n, float a, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
__global__ void add(int n, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

void first_graphs(float* x, float* y, int n) {
  const conveyor::launch_config cfg{dim3((n + 255) / 256), dim3(256)};
  conveyor::stream s;

  // Build a graph: two kernel nodes, the second after the first. Arguments are checked against each kernel.
  conveyor::graph g;
  conveyor::node first = g.kernel(cfg, scale, n, 2.0f, x);
  g.kernel({first}, cfg, add, n, x, y);

  // Or capture what code enqueues on a stream; fork and join make two parallel branches.
  conveyor::stream side;
  conveyor::graph captured = conveyor::capture(s, [&](const conveyor::stream& cs) {
    conveyor::fork(cs, side);
    scale<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 2.0f, x);
    scale<<<cfg.grid, cfg.block, 0, side.get()>>>(n, 3.0f, y);
    conveyor::join(cs, side);
  });

  // Instantiate once, replay many times.
  conveyor::graph_exec exec = conveyor::instantiate(g);
  for (int i = 0; i < 1000; ++i) exec.launch(s);

  // Change one node in place...
  exec.set_kernel_args(first, scale, n, 0.5f, x);
  exec.launch(s);

  // ...or apply a whole new graph of the same shape, and read how it was applied (or why not).
  conveyor::graph next;
  conveyor::node other = next.kernel(cfg, scale, n, 4.0f, x);
  next.kernel({other}, cfg, add, n, x, y);
  const conveyor::update_result result = exec.update(next);
  std::printf("%s\n", result.reason().c_str());
  exec.launch(s);
  s.synchronize();
}

void step(const conveyor::stream& s, int n, float a, float* x) { scale<<<(n + 255) / 256, 256, 0, s.get()>>>(n, a, x); }

void loop(float* x) {
  conveyor::stream s;
  conveyor::graphed run(step);                                 // the first call of a shape runs eagerly
  for (float a : {0.5f, 0.5f, 0.5f, 2.0f}) run(s, 1024, a, x); // then: capture, replay, update (a changed)
  s.synchronize();
  std::puts(run.report().c_str()); // what each call did, and why
}

int main() {
  if (!conveyor::has_device()) {
    std::puts("quick_start: no CUDA device");
    return 0;
  }
  constexpr int n = 1024;
  float* x = nullptr;
  float* y = nullptr;
  CONVEYOR_CHECK(cudaMalloc(&x, n * sizeof(float)));
  CONVEYOR_CHECK(cudaMalloc(&y, n * sizeof(float)));
  CONVEYOR_CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CONVEYOR_CHECK(cudaMemset(y, 0, n * sizeof(float)));
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  first_graphs(x, y, n);
  loop(x);
  CONVEYOR_CHECK(cudaFree(y));
  CONVEYOR_CHECK(cudaFree(x));
  return 0;
}
