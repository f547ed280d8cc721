// The graph debugger on one real fault per mode (docs/debugging.md shows what it prints on an H200):
//   example_debugging launch       a kernel whose launch CUDA refuses, inside a graph: step_through names it
//   example_debugging nan          a node that produces a NaN: the first non-finite value, its node and index
//   example_debugging audit        a patched argument the callable branches on: graphed's audit names the call
//   example_debugging determinism  a node that reads the clock: check_determinism names it
//   example_debugging oob          an out-of-bounds write (sticky): the node named, in this fresh process
// Each mode runs in its own process: a sticky error ends every later CUDA call of the process.
#include <conveyor/conveyor.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void scale(int n, float a, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
__global__ void rsqrt_all(int n, float* x) { // NaN where x < 0
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = rsqrtf(x[i]);
}
__global__ void shift(int n, float b, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] -= b;
}
__global__ void gather(int n, const int* index, const float* x, float* y) { // no bounds check on index
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[index[i]];
}
__global__ void negate(int n, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = -x[i];
}
__global__ void stamp(long long* t) { *t = clock64(); }

const int n = 1 << 16;
const conveyor::launch_config cfg{dim3((n + 255) / 256), dim3(256)};

float* device_floats(float value) {
  float* p = nullptr;
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)));
  const std::vector<float> host(n, value);
  CONVEYOR_CHECK(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

int launch_fault() {
  float* x = device_floats(1.0F);
  conveyor::graph g;
  auto a = g.kernel(cfg, scale, n, 2.0F, x).label("scale x");
  // A node CUDA accepts when it is added and refuses when it runs: `shift` may use 100 KiB of dynamic shared memory
  // while the node is added, and the allowance is taken back before the graph runs.
  conveyor::launch_config big = cfg;
  big.shared_bytes = 100U << 10;
  cudaFuncAttributes attributes{};
  CONVEYOR_CHECK(cudaFuncGetAttributes(&attributes, shift));
  CONVEYOR_CHECK(cudaFuncSetAttribute(shift, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10));
  (void)g.kernel({a}, big, shift, n, 1.0F, x).label("shift x");
  CONVEYOR_CHECK(
      cudaFuncSetAttribute(shift, cudaFuncAttributeMaxDynamicSharedMemorySize, attributes.maxDynamicSharedSizeBytes));
  conveyor::stream s;
  try {
    (void)conveyor::step_through(g, s);
  } catch (const conveyor::step_failure& e) {
    std::printf("%s\n", e.what());
    return 0;
  }
  return 1;
}

int nan_fault() {
  float* x = device_floats(0.5F);
  conveyor::graph g;
  auto a = g.kernel(cfg, scale, n, 2.0F, x).label("x *= 2");
  auto b = g.kernel({a}, cfg, shift, n, 1.25F, x).label("x -= 1.25");
  auto c = g.kernel({b}, cfg, rsqrt_all, n, x).label("x = 1/sqrt(x)");
  (void)g.kernel({c}, cfg, scale, n, 3.0F, x).label("x *= 3");
  conveyor::step_options o;
  o.nonfinite = {{"x", x, conveyor::element_type::f32, n}};
  conveyor::stream s;
  try {
    (void)conveyor::step_through(g, s, o);
  } catch (const conveyor::nonfinite_error& e) {
    std::printf("%s\n", e.what());
    return 0;
  }
  return 1;
}

// The callable negates first when `a` is negative; declaring `a` patchable (a promise it only flows into node
// fields) is wrong, and the audit finds it at the first call where a patched replay runs the other branch.
void step_fn(const conveyor::stream& s, float a, float* x) {
  if (a < 0) negate<<<cfg.grid, cfg.block, 0, s.get()>>>(n, x);
  scale<<<cfg.grid, cfg.block, 0, s.get()>>>(n, a < 0 ? -a : a, x);
}

int audit_fault() {
  float* x = device_floats(1.0F);
  conveyor::graphed_options o;
  o.rebind = conveyor::rebind_policy::patch;
  o.audit_every = 1;
  conveyor::graphed step(step_fn, o);
  conveyor::stream s;
  try {
    for (float a : {2.0F, 2.0F, 3.0F, -1.0F}) step(s, a, x);
  } catch (const conveyor::audit_error& e) {
    std::printf("%s\n", e.what());
    return 0;
  }
  return 1;
}

int determinism_fault() {
  float* x = device_floats(1.5F);
  long long* t = nullptr;
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&t), sizeof *t));
  conveyor::graph g;
  auto a = g.kernel(cfg, scale, n, 2.0F, x).label("x *= 2");
  (void)g.kernel({a}, conveyor::launch_config{dim3(1), dim3(1)}, stamp, t).label("stamp the clock");
  auto exec = conveyor::instantiate(g);
  conveyor::stream s;
  const auto r = conveyor::check_determinism(
      exec, s, {{"x", x, conveyor::element_type::f32, n}, {"t", t, conveyor::element_type::f64, 1}}, true);
  for (const auto& d : r.differing)
    std::printf("buffer '%s' differs between two runs from the same inputs: %zu element(s), the first at index %zu\n",
                d.name.c_str(), d.differing, d.first_index);
  if (r.first_node) std::printf("first node after which they differ: %s\n", r.first_node->text().c_str());
  return r.deterministic() ? 1 : 0;
}

int oob_fault() {
  float* x = device_floats(1.0F);
  float* y = device_floats(0.0F);
  int* index = nullptr;
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&index), n * sizeof(int)));
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[i] = (i * 7) % n;
  host[n - 1] = 1 << 28; // one index far outside x
  CONVEYOR_CHECK(cudaMemcpy(index, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  conveyor::graph g;
  auto a = g.kernel(cfg, scale, n, 2.0F, x).label("x *= 2");
  (void)g.kernel({a}, cfg, gather, n, static_cast<const int*>(index), static_cast<const float*>(x), y)
      .label("y = x[index]");
  conveyor::stream s;
  try {
    (void)conveyor::step_through(g, s);
  } catch (const conveyor::step_failure& e) {
    std::printf("%s\n", e.what());
    return 0;
  }
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!conveyor::has_device()) {
    std::printf("debugging: no CUDA device\n");
    return 0;
  }
  if (mode == "launch") return launch_fault();
  if (mode == "nan") return nan_fault();
  if (mode == "audit") return audit_fault();
  if (mode == "determinism") return determinism_fault();
  if (mode == "oob") return oob_fault();
  std::fprintf(stderr, "usage: example_debugging launch|nan|audit|determinism|oob\n");
  return 2;
}
