// Refused at compile time: three arguments for a kernel of four parameters (the message names both counts).
#include <conveyor/define/graph.hpp>

void axpy(int n, float a, const float* x, float* y);

int main() {
  conveyor::graph g;
  float* y = nullptr;
  g.kernel({1, 1}, axpy, 16, 2.0F, y);
}
