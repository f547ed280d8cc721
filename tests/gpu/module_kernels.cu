// A kernel compiled on its own into a cubin (tests/CMakeLists.txt), loaded at run time through conveyor::module by
// test_graph_file: graphs running it are saved with its image and load where the program does not have it.
extern "C" __global__ void module_saxpy(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
