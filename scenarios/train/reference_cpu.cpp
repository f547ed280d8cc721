//! \file reference_cpu.cpp
//! Double-precision reference forward/backward.

#include "train/reference_cpu.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace conveyor::train {

namespace {

//! Layer activations: a[0] = input, a[l+1] = output of layer l (after ReLU for hidden layers; logits for the last).
using activations = std::array<std::vector<double>, num_layers + 1>;

//! The inputs' shapes and labels. \throws std::invalid_argument naming what is wrong.
void check_inputs(const host_parameters& p, std::span<const float> x, std::span<const int> labels) {
  const std::size_t rows = labels.size();
  if (rows == 0) throw std::invalid_argument("reference_step: empty batch");
  if (x.size() != rows * static_cast<std::size_t>(layer_widths[0]))
    throw std::invalid_argument("reference_step: x must hold rows x 784 values");
  for (int l = 0; l < num_layers; ++l) {
    const auto in = static_cast<std::size_t>(layer_widths[l]);
    const auto out = static_cast<std::size_t>(layer_widths[l + 1]);
    if (p.weights[l].size() != out * in || p.biases[l].size() != out)
      throw std::invalid_argument("reference_step: parameters have the wrong sizes");
  }
  for (const int y : labels)
    if (y < 0 || y >= num_classes) throw std::invalid_argument("reference_step: label out of range");
}

//! The forward pass over `rows` samples.
activations forward(const host_parameters& p, std::span<const float> x, std::size_t rows) {
  activations a;
  a[0].assign(x.begin(), x.end());
  for (int l = 0; l < num_layers; ++l) {
    const auto in = static_cast<std::size_t>(layer_widths[l]);
    const auto out = static_cast<std::size_t>(layer_widths[l + 1]);
    a[l + 1].assign(rows * out, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        double z = p.biases[l][o];
        for (std::size_t i = 0; i < in; ++i) z += a[l][r * in + i] * static_cast<double>(p.weights[l][o * in + i]);
        a[l + 1][r * out + o] = (l + 1 < num_layers) ? std::max(z, 0.0) : z;
      }
  }
  return a;
}

//! Softmax cross-entropy of the logits: the mean loss into g.loss; returns its gradient with respect to the logits.
std::vector<double> softmax_cross_entropy(const activations& a, std::span<const int> labels, reference_gradients& g) {
  const std::size_t rows = labels.size();
  const auto classes = static_cast<std::size_t>(num_classes);
  std::vector<double> delta(rows * classes);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* z = &a[num_layers][r * classes];
    const double zmax = *std::max_element(z, z + classes);
    double sum = 0.0;
    for (std::size_t c = 0; c < classes; ++c) sum += std::exp(z[c] - zmax);
    const auto y = static_cast<std::size_t>(labels[r]);
    g.loss += std::log(sum) - (z[y] - zmax);
    for (std::size_t c = 0; c < classes; ++c)
      delta[r * classes + c] = (std::exp(z[c] - zmax) / sum - (c == y ? 1.0 : 0.0)) / static_cast<double>(rows);
  }
  g.loss /= static_cast<double>(rows);
  return delta;
}

//! Layer l's gradients into g from `delta` (dLoss/dz of its output); returns dLoss/dz of layer l - 1's output (after
//! the ReLU mask), empty for the first layer.
std::vector<double> backward_layer(const host_parameters& p, const activations& a, int l,
                                   const std::vector<double>& delta, std::size_t rows, reference_gradients& g) {
  const auto in = static_cast<std::size_t>(layer_widths[l]);
  const auto out = static_cast<std::size_t>(layer_widths[l + 1]);
  g.weights[l].assign(out * in, 0.0);
  g.biases[l].assign(out, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      const double d = delta[r * out + o];
      g.biases[l][o] += d;
      for (std::size_t i = 0; i < in; ++i) g.weights[l][o * in + i] += d * a[l][r * in + i];
    }
  if (l == 0) return {};
  std::vector<double> below(rows * in, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < in; ++i) {
      if (!(a[l][r * in + i] > 0.0)) continue; // ReLU derivative: 1 where the output is positive
      double s = 0.0;
      for (std::size_t o = 0; o < out; ++o) s += delta[r * out + o] * static_cast<double>(p.weights[l][o * in + i]);
      below[r * in + i] = s;
    }
  return below;
}

} // namespace

reference_gradients reference_step(const host_parameters& p, std::span<const float> x, std::span<const int> labels) {
  check_inputs(p, x, labels);
  const std::size_t rows = labels.size();
  const activations a = forward(p, x, rows);
  reference_gradients g;
  std::vector<double> delta = softmax_cross_entropy(a, labels, g);
  for (int l = num_layers - 1; l >= 0; --l) delta = backward_layer(p, a, l, delta, rows, g);
  return g;
}

} // namespace conveyor::train
