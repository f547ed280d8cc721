// A hybrid pipeline (conveyor::pipeline): a graphed stage, an eager stage that reads a value on the host and
// decides, and a second graphed stage, all on one stream in order with no extra synchronisation.
//
// Each step: x <- x * decay + 1 (graphed); the host reads max |x| and picks a clipping bound (eager: it must wait
// for the value, which a graph cannot do) and copies it to the device; x <- clamp(x, -bound, bound) (graphed; the
// kernel reads the bound from device memory, a fixed address, so the graph never embeds a stale host value).
#include <conveyor/assembly/pipeline.hpp>
#include <conveyor/error.hpp>
#include <conveyor/runtime/device.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

__global__ void relax(int n, float decay, float* x) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = x[i] * decay + 1.0F;
}
__global__ void max_abs(int n, const float* x, float* out) { // one block: a fixed-order reduction
  __shared__ float part[256];
  float m = 0.0F;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += 256) m = fmaxf(m, fabsf(x[i]));
  part[threadIdx.x] = m;
  __syncthreads();
  for (int h = 128; h > 0; h /= 2) {
    if (static_cast<int>(threadIdx.x) < h) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + h]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}
__global__ void clamp(int n, const float* bound, float* x) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = fminf(fmaxf(x[i], -*bound), *bound);
}

} // namespace

int main() {
  if (!conveyor::has_device()) {
    std::puts("hybrid_pipeline: no CUDA device");
    return 0;
  }
  constexpr int n = 1 << 20;
  const unsigned blocks = (n + 255) / 256;
  float* x = nullptr;
  float* peak = nullptr;       // device
  float* peak_host = nullptr;  // pinned
  float* bound = nullptr;      // device
  float* bound_host = nullptr; // pinned
  CONVEYOR_CHECK(cudaMalloc(&x, n * sizeof(float)));
  CONVEYOR_CHECK(cudaMalloc(&peak, sizeof(float)));
  CONVEYOR_CHECK(cudaMalloc(&bound, sizeof(float)));
  CONVEYOR_CHECK(cudaMallocHost(&peak_host, sizeof(float)));
  CONVEYOR_CHECK(cudaMallocHost(&bound_host, sizeof(float)));
  CONVEYOR_CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CONVEYOR_CHECK(cudaDeviceSynchronize());

  conveyor::pipeline<float> step;
  step.graphed_stage("relax",
                     [&](const conveyor::stream& s, float decay) {
                       relax<<<blocks, 256, 0, s.get()>>>(n, decay, x);
                       max_abs<<<1, 256, 0, s.get()>>>(n, x, peak);
                       CONVEYOR_CHECK(cudaMemcpyAsync(peak_host, peak, sizeof(float), cudaMemcpyDeviceToHost, s.get()));
                     })
      .eager_stage("choose bound",
                   [&](const conveyor::stream& s, float) {
                     s.synchronize(); // host-dependent control flow: this stage cannot be captured
                     *bound_host = *peak_host > 5.0F ? 5.0F : 100.0F;
                     CONVEYOR_CHECK(cudaMemcpyAsync(bound, bound_host, sizeof(float), cudaMemcpyHostToDevice, s.get()));
                   })
      .graphed_stage("clamp",
                     [&](const conveyor::stream& s, float) { clamp<<<blocks, 256, 0, s.get()>>>(n, bound, x); });

  conveyor::stream s;
  for (int i = 0; i < 100; ++i) step(s, 0.9F);
  s.synchronize();
  std::vector<float> host(4);
  CONVEYOR_CHECK(cudaMemcpy(host.data(), x, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("x[0] after 100 steps: %g (the fixed point of x * 0.9 + 1 is 10, clipped to 5)\n", host[0]);
  std::printf("%s", step.report().c_str());
  CONVEYOR_CHECK(cudaFreeHost(bound_host));
  CONVEYOR_CHECK(cudaFreeHost(peak_host));
  CONVEYOR_CHECK(cudaFree(bound));
  CONVEYOR_CHECK(cudaFree(peak));
  CONVEYOR_CHECK(cudaFree(x));
  return std::fabs(host[0] - 5.0F) < 1e-5F ? 0 : 1;
}
