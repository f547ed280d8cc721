//! \file device_data.cpp
//! Data splits on the device, evaluation, loss read-back and the median (device_data.hpp).

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

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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
