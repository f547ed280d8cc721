#pragma once
//! \file kernels.hpp
//! Host-side launchers of the training kernels (defined in kernels.cu). Matrices are row-major float, one row per
//! sample. Every launcher enqueues exactly one kernel on `ctx.stream`, checks the launch and then calls
//! `ctx.after()`. None of them synchronises otherwise, none allocates, none reads host memory, so all of them can
//! be captured into a graph. Every reduction has a fixed order (no atomics): results are bitwise reproducible.
//! Every kernel calls scenarios::begin_dependent() (common/pdl.cuh) in every block before it touches global memory,
//! so an edge into any of them may be programmatic (waiting_kernel_functions(), for conveyor::make_programmatic);
//! cuBLAS's kernels make no such promise, so edges into them stay full.

#include "common/execution_mode.hpp"

#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::train {

using scenarios::launch_ctx;

namespace kernels {

//! out[i] = in[i] / 255 for i < n: pixel bytes to floats in [0, 1].
//! \throws conveyor::cuda_error when the launch (or, in sync mode, the kernel) fails.
void bytes_to_unit_float(const std::uint8_t* in, float* out, std::size_t n, const launch_ctx& ctx);

//! Gathers one batch: for row i < batch, src = perm[*batch_counter * batch + i];
//! x_out[i, :] = images[src, :] (features floats) and y_out[i] = labels[src]. A position outside [0, perm_len) or
//! a src outside [0, num_images) yields a zero row with label 0 instead of reading out of bounds (the host never
//! lets that happen).
//! \param images        num_images x features, device
//! \param labels        num_images, device
//! \param perm          perm_len sample indices, device
//! \param batch_counter device int: index of the batch within the epoch
//! \throws conveyor::cuda_error when the launch fails.
void gather_batch(const float* images, const int* labels, int num_images, int features, const int* perm, int perm_len,
                  const int* batch_counter, int batch, float* x_out, int* y_out, const launch_ctx& ctx);

//! Gathers one shard of a batch for data-parallel training: for row i < rows, src = perm[*batch_counter * batch +
//! offset + i], as gather_batch (positions past the permutation give zero rows with label 0, the padding of the
//! last batch of an epoch), and writes the real row counts computed on the device from the batch counter, so that
//! one captured step serves full and partial batches alike: counts[0] = real rows of the whole batch (min(batch,
//! perm_len - *batch_counter * batch), at least 0), counts[1] = real rows of this shard (those of its rows that
//! lie before perm_len).
//! \param offset first row of the shard within the batch; \param rows rows of the shard
//! \param counts device int[2], written by one thread
//! \throws std::invalid_argument when rows < 1 or [offset, offset + rows) is not inside [0, batch);
//!         conveyor::cuda_error when the launch fails.
void gather_shard(const float* images, const int* labels, int num_images, int features, const int* perm, int perm_len,
                  const int* batch_counter, int batch, int offset, int rows, float* x_out, int* y_out, int* counts,
                  const launch_ctx& ctx);

//! z[r, c] += bias[c], then z = max(z, 0) when `relu`; z is rows x cols, in place.
//! \throws conveyor::cuda_error when the launch fails.
void bias_activation(float* z, const float* bias, int rows, int cols, bool relu, const launch_ctx& ctx);

//! Softmax cross-entropy per row: with p = softmax(logits[r, :]), for r < real_rows
//! row_loss[r] = -log p[labels[r]] and grad[r, c] = (p[c] - [c == labels[r]]) / real_rows (gradient of the mean
//! over the real rows); rows from real_rows on are the padding of a partial batch: their loss and gradient are 0.
//! \param logits rows x classes; \param grad rows x classes; \param row_loss rows.
//! \throws std::invalid_argument when classes is outside [1, 32] or real_rows outside [1, rows];
//!         conveyor::cuda_error when the launch fails.
void softmax_cross_entropy(const float* logits, const int* labels, int rows, int real_rows, int classes, float* grad,
                           float* row_loss, const launch_ctx& ctx);

//! softmax_cross_entropy for one shard of a data-parallel batch, with the row counts read on the device
//! (gather_shard's counts): rows r < counts[1] are real, the others padding (loss and gradient 0), and the gradient
//! is that of the mean over the whole batch: grad[r, c] = (p[c] - [c == labels[r]]) / counts[0], so that the sum of
//! the shards' gradients is the gradient of the global batch. The arithmetic of a real row is softmax_cross_entropy's
//! (one device function): with one shard it gives bitwise the same values.
//! \throws std::invalid_argument when classes is outside [1, 32] or rows < 1; conveyor::cuda_error when the launch
//!         fails.
void softmax_cross_entropy_shard(const float* logits, const int* labels, int rows, const int* counts, int classes,
                                 float* grad, float* row_loss, const launch_ctx& ctx);

//! *sum_out = sum of row_loss[0..counts[1]) (the shard's real rows), in mean_loss's fixed order, by one block: the
//! shard's part of the batch loss, summed over the shards by the gradient all-reduce.
//! \throws conveyor::cuda_error when the launch fails.
void shard_loss_sum(const float* row_loss, const int* counts, float* sum_out, const launch_ctx& ctx);

//! loss_history[*step] = *loss_sum / counts[0] (the all-reduced loss sum over the batch's real rows); nothing is
//! written when *step is outside [0, history_len) or counts[0] is 0. One thread.
//! \throws conveyor::cuda_error when the launch fails.
void finish_loss(const float* loss_sum, const int* counts, const int* step, float* loss_history, int history_len,
                 const launch_ctx& ctx);

//! loss_history[*step] = mean of row_loss[0..rows), summed in a fixed order by one block; nothing is written
//! when *step is outside [0, history_len).
//! \throws conveyor::cuda_error when the launch fails.
void mean_loss(const float* row_loss, int rows, const int* step, float* loss_history, int history_len,
               const launch_ctx& ctx);

//! softmax_cross_entropy and mean_loss in one kernel (one block), then advance_step's work: the fused step's loss.
//! With t = counters[1]: row_loss[r], grad[r, :] as softmax_cross_entropy; loss_history[t] = the mean over the real
//! rows (bitwise mean_loss's: the same order), unless t lies outside [0, history_len); then ++counters[0] and
//! counters[1] = t + 1 (so the optimizer after it reads t + 1: adam_update with step_offset 0).
//! \param logits rows x classes; \param grad rows x classes; \param row_loss rows; \param counters device int[2]
//! \throws std::invalid_argument when classes is outside [1, 32] or real_rows outside [1, rows];
//!         conveyor::cuda_error when the launch fails.
void loss_and_advance(const float* logits, const int* labels, int rows, int real_rows, int classes, float* grad,
                      float* row_loss, int* counters, float* loss_history, int history_len, const launch_ctx& ctx);

//! out[c] = sum over r of m[r, c] (bias gradient), m rows x cols, each column summed sequentially by one thread.
//! \throws conveyor::cuda_error when the launch fails.
void column_sums(const float* m, int rows, int cols, float* out, const launch_ctx& ctx);

//! grad[i] = activation[i] > 0 ? grad[i] : 0 for i < n (ReLU backward, using the ReLU output as the mask).
//! \throws conveyor::cuda_error when the launch fails.
void relu_backward(float* grad, const float* activation, std::size_t n, const launch_ctx& ctx);

//! Adam (PyTorch's formulation) on n parameters, t = *step + step_offset (1 when *step counts the steps completed
//! before this one, 0 when the step already advanced it: loss_and_advance):
//! m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²; p -= lr / (1-b1^t) · m / (sqrt(v) / sqrt(1-b2^t) + eps).
//! \throws conveyor::cuda_error when the launch fails.
void adam_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr, float beta1,
                 float beta2, float eps, const int* step, int step_offset, const launch_ctx& ctx);

//! SGD with momentum (PyTorch's formulation) on n parameters: vel = momentum · vel + g; p -= lr · vel.
//! \throws conveyor::cuda_error when the launch fails.
void sgd_momentum_update(float* params, const float* grads, float* velocity, std::size_t n, float lr, float momentum,
                         const launch_ctx& ctx);

//! The last kernel of a step: ++counters[0] (batch within the epoch) and ++counters[1] (global step).
//! \throws conveyor::cuda_error when the launch fails.
void advance_step(int* counters, const launch_ctx& ctx);

//! out[r] = index of the largest logits[r, c] (the first one on ties), logits rows x classes.
//! \throws conveyor::cuda_error when the launch fails.
void argmax_rows(const float* logits, int rows, int classes, int* out, const launch_ctx& ctx);

//! The host functions of every kernel above: those that wait for their programmatic predecessors before touching
//! memory, for conveyor::waiting_kernels::add_function (the `--pdl` pass).
[[nodiscard]] std::vector<const void*> waiting_kernel_functions();

} // namespace kernels
} // namespace conveyor::train
