// The README's usage example, compiled so that it stays true: an explicit graph, a capture, replay, a per-node
// update, DOT export, and a graphed callable with buckets.
#include <conveyor/conveyor.hpp>

#include <cstdio>
#include <string>

__global__ void scale(int n, float a, float* x) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] *= a;
}
__global__ void add(int n, const float* x, float* y) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += x[i];
}

void example(float* x, float* y, int n) {
  conveyor::stream s; // non-blocking stream
  const conveyor::launch_config cfg{dim3((n + 255) / 256), dim3(256)};

  // Define explicitly: argument types are checked against each kernel at compile time.
  conveyor::graph g;
  auto a = g.kernel(cfg, scale, n, 2.0f, x).label("scale x");
  auto b = g.kernel({a}, cfg, add, n, x, y).label("y += x"); // depends on a
  (void)b;

  // ...or capture what a function enqueues (exception-safe).
  conveyor::graph captured = conveyor::capture(s, [&](const conveyor::stream& cs) {
    scale<<<cfg.grid, cfg.block, 0, cs.get()>>>(n, 2.0f, x);
  });
  (void)captured;

  conveyor::graph_exec exec = conveyor::instantiate(g);
  exec.upload(s);
  for (int i = 0; i < 1000; ++i) exec.launch(s); // replay
  exec.set_kernel_args(a, scale, n, 0.5f, x);     // change one node in place
  exec.launch(s);
  s.synchronize();

  std::string dot = conveyor::to_dot(g); // Graphviz, with labels and launch shapes
  std::printf("%s", dot.c_str());
}

// The assembly line: capture once per shape, replay, update in place what changed.
void step(const conveyor::stream& s, conveyor::batch_size n, float a, float* x) {
  scale<<<static_cast<unsigned>((n.padded + 255) / 256), 256, 0, s.get()>>>(static_cast<int>(n.real), a, x);
}
void train_loop(float* x) {
  conveyor::stream s;
  conveyor::graphed run(step, {.warmup_calls = 1, .buckets = {128, 256}});
  for (std::size_t n : {200, 256, 130}) run(s, conveyor::batch_size{n}, 0.5f, x); // all use the 256 graph
  s.synchronize();
  std::puts(run.report().c_str()); // replays, in-place updates and why ("argument 0 real size changed ...")
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
  example(x, y, n);
  train_loop(x);
  CONVEYOR_CHECK(cudaFree(y));
  CONVEYOR_CHECK(cudaFree(x));
  return 0;
}
