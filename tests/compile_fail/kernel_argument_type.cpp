// Refused at compile time: argument 2 is a double* where the kernel takes a const float* (tests/CMakeLists.txt checks
// that the message names position 2, double* and const float*, in at most 20 lines).
#include <conveyor/define/graph.hpp>

void axpy(int n, float a, const float* x, float* y);

int main() {
  conveyor::graph g;
  double* x = nullptr;
  float* y = nullptr;
  g.kernel({1, 1}, axpy, 16, 2.0F, x, y);
}
