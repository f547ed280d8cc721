#pragma once
//! \file fused_passes.hpp
//! The perceptron's forward and backward passes as eight cuBLASLt matrix products whose epilogues do the element-wise
//! work (cuBLASLt's `cublasLtEpilogue_t`, the recipe of NVIDIA Apex's fused dense layers):
//! - forward, layers 1 and 2: CUBLASLT_EPILOGUE_RELU_AUX_BIAS (bias, ReLU, and the ReLU mask kept as a bit mask);
//!   layer 3: CUBLASLT_EPILOGUE_BIAS;
//! - backward, each layer's weight gradient: CUBLASLT_EPILOGUE_BGRADB (the bias gradient, the sum of dLoss/dz over the
//!   rows, from the same product);
//! - backward, the gradient into layers 2 and 1: CUBLASLT_EPILOGUE_DRELU (the ReLU mask of the forward pass applied).
//!
//! This replaces mlp::forward's three GEMMs and three bias kernels and mlp::backward's five GEMMs, three column sums
//! and two ReLU kernels (16 launches) by eight cuBLASLt calls (15 kernels on an H100: seven are epilogue kernels).
//! Every product runs in FP32 (CUBLAS_COMPUTE_32F, no TF32); the algorithm of each is chosen once, at construction
//! (before any capture), so eager and replayed steps run the same kernels and give the same bits.

#include "train/mlp.hpp"

#include <conveyor/libraries/cublaslt.hpp>

#include <array>
#include <cstdint>
#include <memory>

namespace conveyor::train {

//! The eight planned products of one step over a fixed row count, bound to one model's parameters and gradients and
//! one set of activations (their addresses sit in the products' descriptors). Thread safety: one thread at a time.
class fused_passes {
public:
  //! Plans the products of a step over `rows` samples: descriptors, layouts and each algorithm
  //! (`cublasLtMatmulAlgoGetHeuristic`), and the two ReLU masks (rows x 256 and rows x 128 bits).
  //! `model` and `act` must outlive this object and keep their buffers.
  //! \throws std::invalid_argument when rows is outside [1, act.capacity()]; std::logic_error when a buffer is not
  //!         aligned to 256 bytes (cuBLASLt's default assumption); conveyor::libraries::library_error when cuBLASLt
  //!         refuses a descriptor or finds no algorithm; conveyor::cuda_error when an allocation fails.
  fused_passes(mlp& model, activations& act, int rows);
  fused_passes(const fused_passes&) = delete;
  fused_passes& operator=(const fused_passes&) = delete;
  //! Destroys the descriptors. Never throws.
  ~fused_passes();

  //! Forward pass over the planned rows of `x` (rows x 784 device floats, 256-byte aligned): act.a1, act.a2 and
  //! act.logits as mlp::forward defines them, and the ReLU masks. Three cublasLtMatmul calls on ctx.stream.
  //! \throws std::logic_error when x is not 256-byte aligned; conveyor::libraries::library_error when a call fails.
  void forward(const float* x, const launch_ctx& ctx) const;

  //! Backward pass after forward() and after act.d_logits was written: the gradient buffer as mlp::backward fills it
  //! (weights and biases overwritten), act.d_a2 and act.d_a1 as scratch. Five cublasLtMatmul calls on ctx.stream.
  //! \throws std::logic_error when x is not 256-byte aligned; conveyor::libraries::library_error when a call fails.
  void backward(const float* x, const launch_ctx& ctx) const;

  //! Rows every pass covers.
  [[nodiscard]] int rows() const noexcept { return rows_; }

  struct product; //!< one planned cublasLtMatmul (fused_passes.cpp)

private:
  int rows_;
  mlp& model_;
  activations& act_;
  libraries::cublaslt_handle lt_;
  std::array<device_buffer<std::uint8_t>, num_layers - 1> masks_; //!< ReLU masks of layers 1 and 2, one bit a value
  std::array<std::unique_ptr<product>, num_layers> forward_;
  std::array<std::unique_ptr<product>, num_layers> weight_grad_;
  std::array<std::unique_ptr<product>, num_layers - 1> input_grad_; //!< into layer l + 1's input, l = 0, 1
};

} // namespace conveyor::train
