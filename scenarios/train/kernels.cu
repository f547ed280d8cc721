//! \file kernels.cu
//! The training kernels: everything except the matrix products (which cuBLAS does).

#include "train/kernels.hpp"

#include "common/pdl.cuh"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace conveyor::train::kernels {
namespace {

constexpr int block_size = 256;
constexpr int max_classes = 32;

//! Blocks for a grid-stride loop over n elements.
unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + block_size - 1) / block_size;
  return static_cast<unsigned>(std::clamp<std::size_t>(b, 1, 4096));
}

void launched(const char* name, const launch_ctx& ctx) {
  check_launch(name);
  ctx.after(name);
}

__global__ void bytes_to_unit_float_kernel(const std::uint8_t* in, float* out, std::size_t n) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<float>(in[i]) / 255.0F;
}

//! Rows [0, rows) of x_out / y_out from the sample positions first, first + 1, ... of `perm`; a position outside
//! [0, perm_len) or a sample outside [0, num_images) gives a zero row with label 0. grid.x covers the features of a
//! row; grid.y strides over the rows.
__device__ __forceinline__ void gather_rows(const float* images, const int* labels, int num_images, int features,
                                            const int* perm, int perm_len, long long first, int rows, float* x_out,
                                            int* y_out) {
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  for (int row = static_cast<int>(blockIdx.y); row < rows; row += static_cast<int>(gridDim.y)) {
    const long long pos = first + row;
    int src = -1;
    if (pos >= 0 && pos < perm_len) {
      src = perm[pos];
      if (src < 0 || src >= num_images) src = -1;
    }
    if (col < features)
      x_out[static_cast<std::size_t>(row) * features + col] =
          src >= 0 ? images[static_cast<std::size_t>(src) * features + col] : 0.0F;
    if (col == 0) y_out[row] = src >= 0 ? labels[src] : 0;
  }
}

__global__ void gather_batch_kernel(const float* images, const int* labels, int num_images, int features,
                                    const int* perm, int perm_len, const int* batch_counter, int batch, float* x_out,
                                    int* y_out) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const long long first = static_cast<long long>(*batch_counter) * batch;
  gather_rows(images, labels, num_images, features, perm, perm_len, first, batch, x_out, y_out);
}

//! Real rows from `first` on, at most `rows`, of a permutation of perm_len samples (0 when first is past the end).
__device__ __forceinline__ int real_rows_from(long long first, int rows, int perm_len) {
  const long long left = static_cast<long long>(perm_len) - first;
  return left <= 0 ? 0 : static_cast<int>(left < rows ? left : rows);
}

__global__ void gather_shard_kernel(const float* images, const int* labels, int num_images, int features,
                                    const int* perm, int perm_len, const int* batch_counter, int batch, int offset,
                                    int rows, float* x_out, int* y_out, int* counts) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const long long batch_first = static_cast<long long>(*batch_counter) * batch;
  gather_rows(images, labels, num_images, features, perm, perm_len, batch_first + offset, rows, x_out, y_out);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    counts[0] = real_rows_from(batch_first, batch, perm_len);
    counts[1] = real_rows_from(batch_first + offset, rows, perm_len);
  }
}

__global__ void bias_activation_kernel(float* z, const float* bias, int rows, int cols, bool relu) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float v = z[i] + bias[i % static_cast<std::size_t>(cols)];
    z[i] = relu ? fmaxf(v, 0.0F) : v;
  }
}

//! One real row of the softmax cross-entropy: g[c] = (p[c] - [c == y]) * inv_rows, returns -log p[y].
__device__ __forceinline__ float softmax_cross_entropy_row(const float* z, int y, int classes, float inv_rows,
                                                           float* g) {
  float zmax = z[0];
  for (int c = 1; c < classes; ++c) zmax = fmaxf(zmax, z[c]);
  float e[max_classes];
  float sum = 0.0F;
  for (int c = 0; c < classes; ++c) {
    e[c] = expf(z[c] - zmax);
    sum += e[c];
  }
  for (int c = 0; c < classes; ++c) g[c] = (e[c] / sum - (c == y ? 1.0F : 0.0F)) * inv_rows;
  // -log p_y = log(sum) - (z_y - zmax)
  const float zy = (y >= 0 && y < classes) ? z[y] : zmax;
  return logf(sum) - (zy - zmax);
}

__global__ void softmax_cross_entropy_kernel(const float* logits, const int* labels, int rows, int real_rows,
                                             int classes, float* grad, float* row_loss) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= rows) return;
  const float* z = logits + static_cast<std::size_t>(r) * classes;
  float* g = grad + static_cast<std::size_t>(r) * classes;
  if (r >= real_rows) { // padding row of a partial batch: no loss, no gradient
    for (int c = 0; c < classes; ++c) g[c] = 0.0F;
    row_loss[r] = 0.0F;
    return;
  }
  const float inv_rows = 1.0F / static_cast<float>(real_rows);
  row_loss[r] = softmax_cross_entropy_row(z, labels[r], classes, inv_rows, g);
}

// counts[0]: real rows of the whole (global) batch, the gradient's denominator; counts[1]: real rows of this shard.
__global__ void softmax_cross_entropy_shard_kernel(const float* logits, const int* labels, int rows, const int* counts,
                                                   int classes, float* grad, float* row_loss) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= rows) return;
  const int global_real = counts[0];
  const int real_rows = counts[1];
  const float* z = logits + static_cast<std::size_t>(r) * classes;
  float* g = grad + static_cast<std::size_t>(r) * classes;
  if (r >= real_rows || global_real < 1) { // padding row: no loss, no gradient
    for (int c = 0; c < classes; ++c) g[c] = 0.0F;
    row_loss[r] = 0.0F;
    return;
  }
  const float inv_rows = 1.0F / static_cast<float>(global_real);
  row_loss[r] = softmax_cross_entropy_row(z, labels[r], classes, inv_rows, g);
}

//! The sum over the block's threads of each thread's `s`, by a fixed tree; valid in thread 0. `partial` is
//! block_size floats of shared memory.
__device__ __forceinline__ float block_total(float s, float* partial) {
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = block_size / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  return partial[0];
}

//! Sum of v[0..n) in a fixed order by one block of block_size threads: thread t adds v[t], v[t + block_size], ...,
//! then block_total's tree. The result is valid in thread 0.
__device__ __forceinline__ float block_sum(const float* v, int n, float* partial) {
  float s = 0.0F;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += block_size) s += v[i];
  return block_total(s, partial);
}

__global__ void mean_loss_kernel(const float* row_loss, int rows, const int* step, float* loss_history,
                                 int history_len) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ float partial[block_size];
  const float sum = block_sum(row_loss, rows, partial);
  if (threadIdx.x == 0) {
    const int t = *step;
    if (t >= 0 && t < history_len) loss_history[t] = sum / static_cast<float>(rows);
  }
}

__global__ void shard_loss_sum_kernel(const float* row_loss, const int* counts, float* sum_out) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ float partial[block_size];
  const float sum = block_sum(row_loss, counts[1], partial);
  if (threadIdx.x == 0) *sum_out = sum;
}

__global__ void finish_loss_kernel(const float* loss_sum, const int* counts, const int* step, float* loss_history,
                                   int history_len) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const int t = *step;
  const int global_real = counts[0];
  if (t >= 0 && t < history_len && global_real > 0) loss_history[t] = *loss_sum / static_cast<float>(global_real);
}

//! softmax_cross_entropy and mean_loss in one block, then the step counters advanced: thread t takes rows t,
//! t + block_size, ... (mean_loss's order), so the mean is bitwise mean_loss's.
__global__ void loss_and_advance_kernel(const float* logits, const int* labels, int rows, int real_rows, int classes,
                                        float* grad, float* row_loss, int* counters, float* loss_history,
                                        int history_len) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  __shared__ float partial[block_size];
  const float inv_rows = 1.0F / static_cast<float>(real_rows);
  float s = 0.0F;
  for (int r = static_cast<int>(threadIdx.x); r < rows; r += block_size) {
    float* g = grad + static_cast<std::size_t>(r) * classes;
    float loss = 0.0F;
    if (r < real_rows) {
      loss = softmax_cross_entropy_row(logits + static_cast<std::size_t>(r) * classes, labels[r], classes, inv_rows, g);
      s += loss;
    } else { // padding row of a partial batch: no loss, no gradient
      for (int c = 0; c < classes; ++c) g[c] = 0.0F;
    }
    row_loss[r] = loss;
  }
  const float sum = block_total(s, partial);
  if (threadIdx.x == 0) {
    const int t = counters[1];
    if (t >= 0 && t < history_len) loss_history[t] = sum / static_cast<float>(real_rows);
    counters[0] += 1;
    counters[1] = t + 1;
  }
}

__global__ void column_sums_kernel(const float* m, int rows, int cols, float* out) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= cols) return;
  float s = 0.0F;
  for (int r = 0; r < rows; ++r) s += m[static_cast<std::size_t>(r) * cols + c];
  out[c] = s;
}

__global__ void relu_backward_kernel(float* grad, const float* activation, std::size_t n) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    if (!(activation[i] > 0.0F)) grad[i] = 0.0F;
}

__global__ void adam_update_kernel(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                                   float beta1, float beta2, float eps, const int* step, int step_offset) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const float t = static_cast<float>(*step + step_offset);
  const float bias_correction1 = 1.0F - powf(beta1, t);
  const float bias_correction2 = 1.0F - powf(beta2, t);
  const float step_size = lr / bias_correction1;
  const float inv_sqrt_bc2 = rsqrtf(bias_correction2);
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float g = grads[i];
    const float mi = beta1 * m[i] + (1.0F - beta1) * g;
    const float vi = beta2 * v[i] + (1.0F - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -= step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
}

__global__ void sgd_momentum_update_kernel(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                                           float momentum) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float vel = momentum * velocity[i] + grads[i];
    velocity[i] = vel;
    params[i] -= lr * vel;
  }
}

__global__ void advance_step_kernel(int* counters) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  counters[0] += 1;
  counters[1] += 1;
}

__global__ void argmax_rows_kernel(const float* logits, int rows, int classes, int* out) {
  scenarios::begin_dependent(); // before any global memory access (common/pdl.cuh)
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= rows) return;
  const float* z = logits + static_cast<std::size_t>(r) * classes;
  int best = 0;
  for (int c = 1; c < classes; ++c)
    if (z[c] > z[best]) best = c;
  out[r] = best;
}

unsigned blocks_for_rows(int rows) { return static_cast<unsigned>((std::max(rows, 1) + block_size - 1) / block_size); }

} // namespace

void bytes_to_unit_float(const std::uint8_t* in, float* out, std::size_t n, const launch_ctx& ctx) {
  if (n == 0) return;
  bytes_to_unit_float_kernel<<<blocks_for(n), block_size, 0, ctx.stream>>>(in, out, n);
  launched("bytes_to_unit_float_kernel", ctx);
}

void gather_batch(const float* images, const int* labels, int num_images, int features, const int* perm, int perm_len,
                  const int* batch_counter, int batch, float* x_out, int* y_out, const launch_ctx& ctx) {
  const dim3 grid(static_cast<unsigned>((features + block_size - 1) / block_size),
                  static_cast<unsigned>(std::clamp(batch, 1, 65535)));
  gather_batch_kernel<<<grid, block_size, 0, ctx.stream>>>(images, labels, num_images, features, perm, perm_len,
                                                           batch_counter, batch, x_out, y_out);
  launched("gather_batch_kernel", ctx);
}

void gather_shard(const float* images, const int* labels, int num_images, int features, const int* perm, int perm_len,
                  const int* batch_counter, int batch, int offset, int rows, float* x_out, int* y_out, int* counts,
                  const launch_ctx& ctx) {
  if (rows < 1 || offset < 0 || offset > batch - rows)
    throw std::invalid_argument("gather_shard: the shard [offset, offset + rows) must lie inside [0, batch) and "
                                "hold at least one row");
  const dim3 grid(static_cast<unsigned>((features + block_size - 1) / block_size),
                  static_cast<unsigned>(std::clamp(rows, 1, 65535)));
  gather_shard_kernel<<<grid, block_size, 0, ctx.stream>>>(images, labels, num_images, features, perm, perm_len,
                                                           batch_counter, batch, offset, rows, x_out, y_out, counts);
  launched("gather_shard_kernel", ctx);
}

void bias_activation(float* z, const float* bias, int rows, int cols, bool relu, const launch_ctx& ctx) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  bias_activation_kernel<<<blocks_for(n), block_size, 0, ctx.stream>>>(z, bias, rows, cols, relu);
  launched("bias_activation_kernel", ctx);
}

void softmax_cross_entropy(const float* logits, const int* labels, int rows, int real_rows, int classes, float* grad,
                           float* row_loss, const launch_ctx& ctx) {
  if (classes < 1 || classes > max_classes)
    throw std::invalid_argument("softmax_cross_entropy: classes must lie in [1, 32]");
  if (real_rows < 1 || real_rows > rows)
    throw std::invalid_argument("softmax_cross_entropy: real_rows must lie in [1, rows]");
  softmax_cross_entropy_kernel<<<blocks_for_rows(rows), block_size, 0, ctx.stream>>>(logits, labels, rows, real_rows,
                                                                                     classes, grad, row_loss);
  launched("softmax_cross_entropy_kernel", ctx);
}

void softmax_cross_entropy_shard(const float* logits, const int* labels, int rows, const int* counts, int classes,
                                 float* grad, float* row_loss, const launch_ctx& ctx) {
  if (classes < 1 || classes > max_classes)
    throw std::invalid_argument("softmax_cross_entropy_shard: classes must lie in [1, 32]");
  if (rows < 1) throw std::invalid_argument("softmax_cross_entropy_shard: rows must be at least 1");
  softmax_cross_entropy_shard_kernel<<<blocks_for_rows(rows), block_size, 0, ctx.stream>>>(logits, labels, rows, counts,
                                                                                           classes, grad, row_loss);
  launched("softmax_cross_entropy_shard_kernel", ctx);
}

void shard_loss_sum(const float* row_loss, const int* counts, float* sum_out, const launch_ctx& ctx) {
  shard_loss_sum_kernel<<<1, block_size, 0, ctx.stream>>>(row_loss, counts, sum_out);
  launched("shard_loss_sum_kernel", ctx);
}

void finish_loss(const float* loss_sum, const int* counts, const int* step, float* loss_history, int history_len,
                 const launch_ctx& ctx) {
  finish_loss_kernel<<<1, 1, 0, ctx.stream>>>(loss_sum, counts, step, loss_history, history_len);
  launched("finish_loss_kernel", ctx);
}

void mean_loss(const float* row_loss, int rows, const int* step, float* loss_history, int history_len,
               const launch_ctx& ctx) {
  mean_loss_kernel<<<1, block_size, 0, ctx.stream>>>(row_loss, rows, step, loss_history, history_len);
  launched("mean_loss_kernel", ctx);
}

void loss_and_advance(const float* logits, const int* labels, int rows, int real_rows, int classes, float* grad,
                      float* row_loss, int* counters, float* loss_history, int history_len, const launch_ctx& ctx) {
  if (classes < 1 || classes > max_classes)
    throw std::invalid_argument("loss_and_advance: classes must lie in [1, 32]");
  if (real_rows < 1 || real_rows > rows)
    throw std::invalid_argument("loss_and_advance: real_rows must lie in [1, rows]");
  loss_and_advance_kernel<<<1, block_size, 0, ctx.stream>>>(logits, labels, rows, real_rows, classes, grad, row_loss,
                                                            counters, loss_history, history_len);
  launched("loss_and_advance_kernel", ctx);
}

void column_sums(const float* m, int rows, int cols, float* out, const launch_ctx& ctx) {
  column_sums_kernel<<<blocks_for_rows(cols), block_size, 0, ctx.stream>>>(m, rows, cols, out);
  launched("column_sums_kernel", ctx);
}

void relu_backward(float* grad, const float* activation, std::size_t n, const launch_ctx& ctx) {
  relu_backward_kernel<<<blocks_for(n), block_size, 0, ctx.stream>>>(grad, activation, n);
  launched("relu_backward_kernel", ctx);
}

void adam_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr, float beta1,
                 float beta2, float eps, const int* step, int step_offset, const launch_ctx& ctx) {
  adam_update_kernel<<<blocks_for(n), block_size, 0, ctx.stream>>>(params, grads, m, v, n, lr, beta1, beta2, eps, step,
                                                                   step_offset);
  launched("adam_update_kernel", ctx);
}

void sgd_momentum_update(float* params, const float* grads, float* velocity, std::size_t n, float lr, float momentum,
                         const launch_ctx& ctx) {
  sgd_momentum_update_kernel<<<blocks_for(n), block_size, 0, ctx.stream>>>(params, grads, velocity, n, lr, momentum);
  launched("sgd_momentum_update_kernel", ctx);
}

void advance_step(int* counters, const launch_ctx& ctx) {
  advance_step_kernel<<<1, 1, 0, ctx.stream>>>(counters);
  launched("advance_step_kernel", ctx);
}

void argmax_rows(const float* logits, int rows, int classes, int* out, const launch_ctx& ctx) {
  argmax_rows_kernel<<<blocks_for_rows(rows), block_size, 0, ctx.stream>>>(logits, rows, classes, out);
  launched("argmax_rows_kernel", ctx);
}

std::vector<const void*> waiting_kernel_functions() {
  return {reinterpret_cast<const void*>(&bytes_to_unit_float_kernel),
          reinterpret_cast<const void*>(&gather_batch_kernel),
          reinterpret_cast<const void*>(&bias_activation_kernel),
          reinterpret_cast<const void*>(&softmax_cross_entropy_kernel),
          reinterpret_cast<const void*>(&mean_loss_kernel),
          reinterpret_cast<const void*>(&column_sums_kernel),
          reinterpret_cast<const void*>(&relu_backward_kernel),
          reinterpret_cast<const void*>(&adam_update_kernel),
          reinterpret_cast<const void*>(&sgd_momentum_update_kernel),
          reinterpret_cast<const void*>(&advance_step_kernel),
          reinterpret_cast<const void*>(&argmax_rows_kernel),
          reinterpret_cast<const void*>(&gather_shard_kernel),
          reinterpret_cast<const void*>(&softmax_cross_entropy_shard_kernel),
          reinterpret_cast<const void*>(&shard_loss_sum_kernel),
          reinterpret_cast<const void*>(&finish_loss_kernel),
          reinterpret_cast<const void*>(&loss_and_advance_kernel)};
}

} // namespace conveyor::train::kernels
