#pragma once
//! \file mlp.hpp
//! The multilayer perceptron 784-256-128-10 on the device: parameters, gradients, optimizer state, and the
//! forward, backward and update passes (cuBLAS for the matrix products, kernels.hpp for the rest).

#include "common/device_buffer.hpp"
#include "train/kernels.hpp"
#include "train/parameters.hpp"

#include <conveyor/libraries/cublas.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>

namespace conveyor::train {

using scenarios::device_buffer;
using scenarios::pinned_buffer;
//! The cuBLAS handle of every pass: conveyor's adapter (a fixed workspace bound with the stream, cuBLAS's default
//! modes set explicitly — host pointer mode, no TF32, no atomics), so that eager and replayed passes give the same
//! bits.
using libraries::cublas_handle;

//! Which update rule the optimizer applies.
enum class optimizer_kind { adam, sgd };

//! Name of an optimizer: "adam" or "sgd".
[[nodiscard]] std::string_view to_string(optimizer_kind k) noexcept;

//! Optimizer hyper-parameters.
struct optimizer_config {
  optimizer_kind kind = optimizer_kind::adam; //!< update rule
  float lr = 1e-3F;                           //!< learning rate, > 0
  float beta1 = 0.9F;                         //!< Adam: decay of the first moment
  float beta2 = 0.999F;                       //!< Adam: decay of the second moment
  float eps = 1e-8F;                          //!< Adam: added to the denominator
  float momentum = 0.9F;                      //!< SGD: momentum in [0, 1)
};

//! Device buffers for the per-sample values of one forward/backward pass over at most `capacity` rows.
class activations {
public:
  //! Allocates buffers for `capacity` rows.
  //! \throws std::invalid_argument when capacity < 1; conveyor::cuda_error when an allocation fails.
  explicit activations(int capacity);
  //! Maximum rows one pass may use.
  [[nodiscard]] int capacity() const noexcept { return capacity_; }

  device_buffer<float> a1;       //!< capacity x 256: ReLU output of layer 1; in backward, the mask source
  device_buffer<float> a2;       //!< capacity x 128: ReLU output of layer 2
  device_buffer<float> logits;   //!< capacity x 10
  device_buffer<float> d_logits; //!< capacity x 10: dLoss/dlogits, written by softmax_cross_entropy
  device_buffer<float> d_a1;     //!< capacity x 256: dLoss/dz1 after the ReLU mask
  device_buffer<float> d_a2;     //!< capacity x 128: dLoss/dz2 after the ReLU mask
  device_buffer<float> row_loss; //!< capacity: cross-entropy per sample

private:
  int capacity_;
};

//! The network's parameters, gradients and optimizer state on the device, each one contiguous buffer in the
//! make_parameter_layout() layout so that a single kernel updates everything.
class mlp {
public:
  //! Allocates all buffers on the current device and zeroes them (parameters included; call load()).
  //! \param gradient_tail extra floats allocated after the gradients in the same buffer (gradient_buffer()), for
  //!        values reduced together with them (data-parallel training puts its loss sum there, so that one
  //!        all-reduce carries both); the optimizer never reads them
  //! \throws std::invalid_argument when a hyper-parameter is out of range (lr <= 0, momentum outside [0, 1),
  //!         beta outside [0, 1), eps < 0); conveyor::cuda_error when allocation fails.
  mlp(const optimizer_config& opt, cudaStream_t s, std::size_t gradient_tail = 0);

  //! Uploads `p` as the parameters and zeroes the gradients and the optimizer state; synchronises `s`.
  //! \throws std::invalid_argument when `p` has the wrong sizes; conveyor::cuda_error when a copy fails.
  void load(const host_parameters& p, cudaStream_t s);
  //! Downloads the parameters (synchronises `s`). \throws conveyor::cuda_error when the copy fails.
  [[nodiscard]] host_parameters parameters(cudaStream_t s) const;
  //! Downloads the gradients of the last backward pass (synchronises `s`).
  //! \throws conveyor::cuda_error when the copy fails.
  [[nodiscard]] host_parameters gradients(cudaStream_t s) const;

  //! Forward pass over `rows` samples: act.a1 = relu(x W1ᵀ + b1), act.a2 = relu(a1 W2ᵀ + b2),
  //! act.logits = a2 W3ᵀ + b3. `blas` is (re)bound to ctx.stream.
  //! \param x rows x 784 device floats
  //! \throws std::invalid_argument when rows is outside [1, act.capacity()]; conveyor::libraries::library_error /
  //!         conveyor::cuda_error when a call fails.
  void forward(cublas_handle& blas, const float* x, int rows, activations& act, const launch_ctx& ctx) const;

  //! Backward pass over the same `rows` samples, after forward() and after act.d_logits was written: fills the
  //! gradient buffer (weights by cuBLAS, overwritten not accumulated; biases by column sums). act.d_a1 and
  //! act.d_a2 are used as scratch.
  //! \throws std::invalid_argument when rows is out of range; conveyor::libraries::library_error /
  //!         conveyor::cuda_error on failure.
  void backward(cublas_handle& blas, const float* x, int rows, activations& act, const launch_ctx& ctx);

  //! Applies the optimizer to all parameters with the current gradients. Adam's bias correction uses
  //! t = *step + 1, read on the device, so the same enqueued work serves every step.
  //! \param step device int: number of completed steps
  //! \throws conveyor::cuda_error when the launch fails.
  void update(const int* step, const launch_ctx& ctx);

  //! update() with t = *steps_done: the step counter already advanced before the optimizer runs
  //! (kernels::loss_and_advance, the fused step). SGD does not read it.
  //! \throws conveyor::cuda_error when the launch fails.
  void update_after_advance(const int* steps_done, const launch_ctx& ctx);

  //! The gradient buffer: layout.total gradients in the layout, then the gradient_tail floats. Device memory.
  [[nodiscard]] float* gradient_buffer() noexcept { return grads_.data(); }
  //! Floats in gradient_buffer(): layout.total + the gradient tail.
  [[nodiscard]] std::size_t gradient_buffer_size() const noexcept { return grads_.size(); }
  //! Device pointer to the first float of the gradient tail (gradient_buffer() + layout.total).
  [[nodiscard]] float* gradient_tail() noexcept { return grads_.data() + layout.total; }

  //! Device pointer to every parameter, in the layout (layout.total floats): for the non-finite watch.
  [[nodiscard]] const float* parameter_buffer() const noexcept { return params_.data(); }
  //! Device pointer to weights[l] (out x in, row-major).
  [[nodiscard]] const float* weights(int l) const noexcept { return params_.data() + layout.weight_offset[l]; }
  //! Device pointer to biases[l].
  [[nodiscard]] const float* biases(int l) const noexcept { return params_.data() + layout.bias_offset[l]; }

  //! The layout of parameters, gradients and optimizer state.
  static constexpr parameter_layout layout = make_parameter_layout();

private:
  //! Adam with t = *step + step_offset, or SGD (which reads no step).
  void apply_optimizer(const int* step, int step_offset, const launch_ctx& ctx);

  optimizer_config opt_;
  device_buffer<float> params_;
  device_buffer<float> grads_;
  device_buffer<float> moment1_; // Adam m, SGD velocity
  device_buffer<float> moment2_; // Adam v
};

} // namespace conveyor::train
