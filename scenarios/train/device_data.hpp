#pragma once
//! \file device_data.hpp
//! What the one-GPU trainer (trainer.cpp) and the data-parallel trainer (data_parallel.cpp) share besides the
//! network and the kernels: a data split on the device, the evaluation on the test split, reading one loss back, the
//! run's length, the epochs' orders in pinned memory and the timed chunks. Internal to the scenario.

#include "common/device_buffer.hpp"
#include "train/dataset.hpp"
#include "train/mlp.hpp"
#include "train/trainer.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace conveyor::train::detail {

//! One split on the current device: images as floats in [0, 1] (count x 784), labels as int.
struct device_split {
  device_buffer<float> x; //!< count x 784 pixels scaled to [0, 1]
  device_buffer<int> y;   //!< count labels
  int count = 0;          //!< samples
};

//! Uploads `images` and `labels` (bytes converted to floats on the device, on `s`); returns when the data is there.
//! \throws conveyor::cuda_error when an allocation, copy or launch fails.
[[nodiscard]] device_split upload_split(const idx_images& images, const idx_labels& labels, cudaStream_t s);
//! Uploads float inputs (rows x 784) and labels as they are; returns when the data is there.
//! \throws conveyor::cuda_error when an allocation or copy fails.
[[nodiscard]] device_split upload_split(std::span<const float> x, std::span<const int> labels, cudaStream_t s);

//! Fraction of `test`'s samples the parameters currently in `model` classify correctly (argmax of the logits;
//! `labels` are the host copy of test.y); eager, on `s`, which belongs to the model's device (current).
//! \throws conveyor::cuda_error / conveyor::libraries::library_error when a call fails.
[[nodiscard]] double evaluate(const mlp& model, cublas_handle& blas, const device_split& test, const idx_labels& labels,
                              cudaStream_t s);

//! history[index] copied to the host after the work on `s` (synchronises `s`).
//! \throws conveyor::cuda_error when the copy fails.
[[nodiscard]] float read_loss(const device_buffer<float>& history, std::size_t index, cudaStream_t s);

//! How long a run is: batches per epoch (the last partial), steps in all (capped by max_steps), epochs begun.
struct run_length {
  std::size_t steps_per_epoch = 0; //!< training-set size / batch, rounded up
  std::size_t steps = 0;           //!< min(epochs * steps_per_epoch, max_steps when > 0)
  int epochs = 0;                  //!< epochs the steps reach into (the last may be partial)
};

//! The length of a run of `o` over `train_count` samples. \throws std::invalid_argument when o.batch < 1.
[[nodiscard]] run_length length_of(const train_options& o, std::size_t train_count);

//! One epoch's order of the samples (epoch_permutation) in pinned memory, for an asynchronous upload. Not
//! thread-safe.
class epoch_order {
public:
  //! Pinned room for `samples` indices. \throws conveyor::cuda_error when cudaMallocHost fails.
  explicit epoch_order(std::size_t samples) : order_(samples) {}
  //! Writes epoch `epoch`'s order for `seed` and returns it; the previous upload from it must have completed.
  [[nodiscard]] const int* fill(std::uint64_t seed, int epoch);

private:
  pinned_buffer<int> order_;
};

//! The timed chunks of a run: at most `chunk_steps` steps each, never straddling an epoch, each epoch begun before
//! its first chunk. Plain C++. Not thread-safe.
class chunk_schedule {
public:
  //! The chunks of a run of `length` in chunks of `chunk_steps` (>= 1).
  chunk_schedule(const run_length& length, int chunk_steps) :
      length_(length),
      chunk_steps_(static_cast<std::size_t>(chunk_steps)) {}
  //! The next chunk's steps, 0 when the run is over; when it starts an epoch, calls begin_epoch(epoch) first.
  //! \throws what begin_epoch throws.
  template <class BeginEpoch>
  [[nodiscard]] std::size_t next(BeginEpoch&& begin_epoch) {
    if (at_ >= in_epoch_) {
      if (epoch_ + 1 >= length_.epochs) return 0;
      ++epoch_;
      begin_epoch(epoch_);
      in_epoch_ = std::min(length_.steps_per_epoch, length_.steps - done_);
      at_ = 0;
    }
    chunk_ = std::min(chunk_steps_, in_epoch_ - at_);
    return chunk_;
  }
  //! Step `k` of the current chunk as a step of its epoch (0-based).
  [[nodiscard]] std::size_t step_in_epoch(std::size_t k) const noexcept { return at_ + k; }
  //! Marks the current chunk done.
  void finish_chunk() noexcept {
    at_ += chunk_;
    done_ += chunk_;
  }
  //! The current epoch (0-based; -1 before the first chunk).
  [[nodiscard]] int epoch() const noexcept { return epoch_; }
  //! Steps of the finished chunks.
  [[nodiscard]] std::size_t done() const noexcept { return done_; }

private:
  run_length length_;
  std::size_t chunk_steps_;
  int epoch_ = -1;
  std::size_t in_epoch_ = 0; // steps of the current epoch this run takes
  std::size_t at_ = 0;       // steps of the current epoch done
  std::size_t chunk_ = 0;    // steps of the current chunk
  std::size_t done_ = 0;     // steps done in all
};

} // namespace conveyor::train::detail
