//! \file device_data.cpp
//! Data splits on the device, evaluation, loss read-back, the run's length and the epochs' orders
//! (device_data.hpp).

#include "train/device_data.hpp"

#include "train/kernels.hpp"

#include <algorithm>
#include <cstdint>

namespace conveyor::train::detail {

device_split upload_split(const idx_images& images, const idx_labels& labels, cudaStream_t s) {
  device_split d;
  d.count = static_cast<int>(images.count);
  {
    device_buffer<std::uint8_t> bytes(images.pixels.size());
    bytes.upload(images.pixels, s);
    d.x = device_buffer<float>(images.pixels.size());
    kernels::bytes_to_unit_float(bytes.data(), d.x.data(), images.pixels.size(), launch_ctx{s, false});
    CONVEYOR_CHECK(cudaStreamSynchronize(s)); // before `bytes` is freed
  }
  const std::vector<int> y(labels.values.begin(), labels.values.end());
  d.y = device_buffer<int>(y.size());
  d.y.upload(y, s);
  return d;
}

device_split upload_split(std::span<const float> x, std::span<const int> labels, cudaStream_t s) {
  device_split d;
  d.count = static_cast<int>(labels.size());
  d.x = device_buffer<float>(x.size());
  d.x.upload(x, s);
  d.y = device_buffer<int>(labels.size());
  d.y.upload(labels, s);
  return d;
}

run_length length_of(const train_options& o, std::size_t train_count) {
  run_length r;
  r.steps_per_epoch = steps_per_epoch(train_count, o.batch);
  r.steps = r.steps_per_epoch * static_cast<std::size_t>(o.epochs);
  if (o.max_steps > 0) r.steps = std::min(r.steps, o.max_steps);
  r.epochs = static_cast<int>((r.steps + r.steps_per_epoch - 1) / r.steps_per_epoch);
  return r;
}

const int* epoch_order::fill(std::uint64_t seed, int epoch) {
  const std::vector<int> perm = epoch_permutation(seed, epoch, order_.size());
  std::copy(perm.begin(), perm.end(), order_.data());
  return order_.data();
}

double evaluate(const mlp& model, cublas_handle& blas, const device_split& test, const idx_labels& labels,
                cudaStream_t s) {
  constexpr int eval_rows = 10000;
  const int capacity = std::min(test.count, eval_rows);
  activations act(capacity);
  device_buffer<int> predictions(static_cast<std::size_t>(test.count));
  const launch_ctx ctx{s, false};
  for (int start = 0; start < test.count; start += capacity) {
    const int rows = std::min(capacity, test.count - start);
    model.forward(blas, test.x.data() + static_cast<std::size_t>(start) * input_features, rows, act, ctx);
    kernels::argmax_rows(act.logits.data(), rows, num_classes, predictions.data() + start, ctx);
  }
  const std::vector<int> predicted = predictions.download(predictions.size(), s);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == labels.values[i] ? 1 : 0;
  return static_cast<double>(correct) / static_cast<double>(predicted.size());
}

float read_loss(const device_buffer<float>& history, std::size_t index, cudaStream_t s) {
  float loss = 0.0F;
  CONVEYOR_CHECK(cudaMemcpyAsync(&loss, history.data() + index, sizeof(float), cudaMemcpyDeviceToHost, s));
  CONVEYOR_CHECK(cudaStreamSynchronize(s));
  return loss;
}

} // namespace conveyor::train::detail
