// A consumer's program: uses Conveyor's public API from a CUDA source (a kernel, capture, graphed, export) and from
// plain C++ (builder.cpp). Built by tests/consumer/check.sh against the installed package and as a subdirectory.
#include <conveyor/conveyor.hpp>
#include <conveyor/version.hpp>

#include <cstdio>
#include <string>

std::string describe_builder(); // builder.cpp

__global__ void scale(int n, float a, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

int main() {
  std::printf("conveyor %s (headers %s)\n", conveyor::version(), CONVEYOR_VERSION_STRING);
  std::printf("%s\n", describe_builder().c_str());
  if (!conveyor::has_device()) {
    std::printf("no CUDA device: built and linked, not run\n");
    return 0;
  }
  float* x = nullptr;
  CONVEYOR_CHECK(cudaMalloc(&x, 256 * sizeof(float)));
  CONVEYOR_CHECK(cudaMemset(x, 0, 256 * sizeof(float)));
  conveyor::stream s;
  conveyor::graphed step(
      [](const conveyor::stream& cs, float a, float* p) { scale<<<1, 256, 0, cs.get()>>>(256, a, p); });
  for (float a : {1.0F, 2.0F, 3.0F}) step(s, a, x);
  s.synchronize();
  CONVEYOR_CHECK(cudaFree(x));
  std::printf("%s", step.report().c_str());
  return 0;
}
