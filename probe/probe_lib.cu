// The issue's case through Conveyor: capture into a conditional body that forks onto a stream capturing another graph.
#include <conveyor/conveyor.hpp>
#include <cstdio>
__global__ void put(int* out, int v) { *out = v; }
int main() {
  int* d = nullptr;
  cudaMalloc(&d, 16);
  conveyor::stream s1, s2;
  try {
    conveyor::graph outer = conveyor::capture(s2, [&](const conveyor::stream& cs) {
      put<<<1, 1, 0, cs.get()>>>(d, 1);
      conveyor::graph g;
      auto cond = conveyor::make_condition(g);
      auto c = conveyor::add_conditional(g, {}, conveyor::conditional_kind::if_then, cond);
      conveyor::capture_into(c.bodies[0], s1, [&](const conveyor::stream& bs) {
        put<<<1, 1, 0, bs.get()>>>(d, 2);
        std::puts("forking onto s2");
        std::fflush(stdout);
        conveyor::fork(bs, s2);
        put<<<1, 1, 0, s2.get()>>>(d + 1, 3);
        conveyor::join(bs, s2);
      });
      std::puts("capture_into returned");
    });
    std::puts("outer capture returned");
  } catch (const std::exception& e) {
    std::printf("threw: %s\n", e.what());
  }
  std::printf("s1 capturing %d, s2 capturing %d\n", (int)s1.is_capturing(), (int)s2.is_capturing());
  put<<<1, 1, 0, s1.get()>>>(d, 7);
  put<<<1, 1, 0, s2.get()>>>(d, 8);
  std::printf("streams usable: %s %s\n", cudaGetErrorName(cudaStreamSynchronize(s1.get())),
              cudaGetErrorName(cudaStreamSynchronize(s2.get())));
  return 0;
}
