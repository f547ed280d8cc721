// Refused at compile time: set_kernel_args with an int* where the kernel takes a float* (position 1 named).
#include <conveyor/execute/graph_exec.hpp>

void scale(int n, float* x);

void change(conveyor::graph_exec& e, const conveyor::node& n, int* x) { e.set_kernel_args(n, scale, 16, x); }
