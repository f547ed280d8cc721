// A std::size_t count for an int parameter and a double for a float: accepted by default (as a kernel call converts
// them); refused with -DCONVEYOR_REFUSE_NARROWING=1, naming position 0 (std::size_t given for int).
#include <conveyor/define/graph.hpp>

#include <cstddef>

void axpy(int n, float a, const float* x, float* y);

int main() {
  conveyor::graph g;
  const std::size_t n = 16;
  const double a = 2.0;
  float* y = nullptr;
  g.kernel({1, 1}, axpy, n, a, y, y);
}
