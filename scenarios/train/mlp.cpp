//! \file mlp.cpp
//! Forward, backward and update of the perceptron. Matrix products map row-major matrices onto cuBLAS's
//! column-major convention: a row-major R x C matrix is, to cuBLAS, a column-major C x R matrix with leading
//! dimension C (its transpose).

#include "train/mlp.hpp"

#include <stdexcept>
#include <string>

namespace conveyor::train {

std::string_view to_string(optimizer_kind k) noexcept { return k == optimizer_kind::adam ? "adam" : "sgd"; }

namespace {

constexpr float one = 1.0F;
constexpr float zero = 0.0F;

//! Z[rows x out] = X[rows x in] · Wᵀ, W out x in. Column-major: Zᵀ(out x rows) = W(out x in) · Xᵀ(in x rows),
//! where W is op(T) of the column-major in x out view of W.
void gemm_x_wt(cublasHandle_t h, const float* x, const float* w, float* z, int rows, int in, int out,
               const launch_ctx& ctx) {
  libraries::check_cublas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, w, in, x, in, &zero, z, out),
                          "cublasSgemm (forward X·Wᵀ)");
  ctx.after("cublasSgemm (forward X·Wᵀ)");
}

//! dW[out x in] = dZᵀ · X with dZ rows x out, X rows x in. Column-major: dWᵀ(in x out) = Xᵀ(in x rows) · dZ(rows
//! x out), where dZ is op(T) of the column-major out x rows view of dZ.
void gemm_dzt_x(cublasHandle_t h, const float* dz, const float* x, float* dw, int rows, int in, int out,
                const launch_ctx& ctx) {
  libraries::check_cublas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, &one, x, in, dz, out, &zero, dw, in),
                          "cublasSgemm (weight gradient dZᵀ·X)");
  ctx.after("cublasSgemm (weight gradient dZᵀ·X)");
}

//! dX[rows x in] = dZ[rows x out] · W[out x in]. Column-major: dXᵀ(in x rows) = Wᵀ(in x out) · dZᵀ(out x rows).
void gemm_dz_w(cublasHandle_t h, const float* dz, const float* w, float* dx, int rows, int in, int out,
               const launch_ctx& ctx) {
  libraries::check_cublas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, &one, w, in, dz, out, &zero, dx, in),
                          "cublasSgemm (input gradient dZ·W)");
  ctx.after("cublasSgemm (input gradient dZ·W)");
}

void check_rows(int rows, const activations& act) {
  if (rows < 1 || rows > act.capacity())
    throw std::invalid_argument("mlp: rows " + std::to_string(rows) + " outside [1, " + std::to_string(act.capacity()) +
                                "]");
}

} // namespace

activations::activations(int capacity) : capacity_(capacity) {
  if (capacity < 1) throw std::invalid_argument("activations: capacity must be at least 1");
  const auto rows = static_cast<std::size_t>(capacity);
  a1 = device_buffer<float>(rows * layer_widths[1]);
  a2 = device_buffer<float>(rows * layer_widths[2]);
  logits = device_buffer<float>(rows * layer_widths[3]);
  d_logits = device_buffer<float>(rows * layer_widths[3]);
  d_a1 = device_buffer<float>(rows * layer_widths[1]);
  d_a2 = device_buffer<float>(rows * layer_widths[2]);
  row_loss = device_buffer<float>(rows);
}

mlp::mlp(const optimizer_config& opt, cudaStream_t s, std::size_t gradient_tail) :
    opt_(opt),
    params_(layout.total),
    grads_(layout.total + gradient_tail),
    moment1_(layout.total),
    moment2_(layout.total) {
  if (!(opt.lr > 0.0F)) throw std::invalid_argument("mlp: learning rate must be > 0");
  if (!(opt.momentum >= 0.0F && opt.momentum < 1.0F)) throw std::invalid_argument("mlp: momentum must be in [0, 1)");
  if (!(opt.beta1 >= 0.0F && opt.beta1 < 1.0F) || !(opt.beta2 >= 0.0F && opt.beta2 < 1.0F))
    throw std::invalid_argument("mlp: Adam betas must be in [0, 1)");
  if (!(opt.eps >= 0.0F)) throw std::invalid_argument("mlp: Adam eps must be >= 0");
  params_.zero_async(s);
  grads_.zero_async(s);
  moment1_.zero_async(s);
  moment2_.zero_async(s);
  CONVEYOR_CHECK(cudaStreamSynchronize(s));
}

void mlp::load(const host_parameters& p, cudaStream_t s) {
  const std::vector<float> flat = pack(p);
  grads_.zero_async(s);
  moment1_.zero_async(s);
  moment2_.zero_async(s);
  params_.upload(flat, s); // synchronises s
}

host_parameters mlp::parameters(cudaStream_t s) const { return unpack(params_.download(layout.total, s)); }

host_parameters mlp::gradients(cudaStream_t s) const { return unpack(grads_.download(layout.total, s)); }

void mlp::forward(cublas_handle& blas, const float* x, int rows, activations& act, const launch_ctx& ctx) const {
  check_rows(rows, act);
  blas.bind(conveyor::stream::adopt(ctx.stream)); // cublasSetStream, cublasSetWorkspace; kept with a capture
  const cublasHandle_t h = blas.get();
  const float* in = x;
  float* outs[num_layers] = {act.a1.data(), act.a2.data(), act.logits.data()};
  for (int l = 0; l < num_layers; ++l) {
    gemm_x_wt(h, in, weights(l), outs[l], rows, layer_widths[l], layer_widths[l + 1], ctx);
    kernels::bias_activation(outs[l], biases(l), rows, layer_widths[l + 1], /*relu=*/l + 1 < num_layers, ctx);
    in = outs[l];
  }
}

void mlp::backward(cublas_handle& blas, const float* x, int rows, activations& act, const launch_ctx& ctx) {
  check_rows(rows, act);
  blas.bind(conveyor::stream::adopt(ctx.stream)); // cublasSetStream, cublasSetWorkspace; kept with a capture
  const cublasHandle_t h = blas.get();
  // inputs[l]: the activation layer l reads; deltas[l]: dLoss/dz of layer l's output (rows x out).
  const float* inputs[num_layers] = {x, act.a1.data(), act.a2.data()};
  float* deltas[num_layers] = {act.d_a1.data(), act.d_a2.data(), act.d_logits.data()};
  for (int l = num_layers - 1; l >= 0; --l) {
    const int in = layer_widths[l];
    const int out = layer_widths[l + 1];
    gemm_dzt_x(h, deltas[l], inputs[l], grads_.data() + layout.weight_offset[l], rows, in, out, ctx);
    kernels::column_sums(deltas[l], rows, out, grads_.data() + layout.bias_offset[l], ctx);
    if (l > 0) {
      // dLoss/da of the layer below, then the ReLU mask turns it into dLoss/dz.
      gemm_dz_w(h, deltas[l], weights(l), deltas[l - 1], rows, in, out, ctx);
      kernels::relu_backward(deltas[l - 1], inputs[l], static_cast<std::size_t>(rows) * in, ctx);
    }
  }
}

void mlp::update(const int* step, const launch_ctx& ctx) { apply_optimizer(step, 1, ctx); }

void mlp::update_after_advance(const int* steps_done, const launch_ctx& ctx) { apply_optimizer(steps_done, 0, ctx); }

void mlp::apply_optimizer(const int* step, int step_offset, const launch_ctx& ctx) {
  if (opt_.kind == optimizer_kind::adam)
    kernels::adam_update(params_.data(), grads_.data(), moment1_.data(), moment2_.data(), layout.total, opt_.lr,
                         opt_.beta1, opt_.beta2, opt_.eps, step, step_offset, ctx);
  else
    kernels::sgd_momentum_update(params_.data(), grads_.data(), moment1_.data(), layout.total, opt_.lr, opt_.momentum,
                                 ctx);
}

} // namespace conveyor::train
