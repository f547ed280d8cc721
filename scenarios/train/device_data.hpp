#pragma once
//! \file device_data.hpp
//! What the one-GPU trainer (trainer.cpp) and the data-parallel trainer (data_parallel.cpp) share besides the
//! network and the kernels: a data split on the device, the evaluation on the test split, reading one loss back,
//! the median of the timed chunks. Internal to the scenario.

#include "train/cublas.hpp"
#include "train/dataset.hpp"
#include "train/mlp.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
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
//! \throws conveyor::cuda_error / cublas_error when a call fails.
[[nodiscard]] double evaluate(const mlp& model, cublas_handle& blas, const device_split& test,
                              const idx_labels& labels, cudaStream_t s);

//! history[index] copied to the host after the work on `s` (synchronises `s`).
//! \throws conveyor::cuda_error when the copy fails.
[[nodiscard]] float read_loss(const device_buffer<float>& history, std::size_t index, cudaStream_t s);

//! The median of `v` (0 for an empty vector; the mean of the two middle values for an even count).
[[nodiscard]] double median(std::vector<double> v);

} // namespace conveyor::train::detail
