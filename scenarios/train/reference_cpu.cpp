//! \file reference_cpu.cpp
//! Double-precision reference forward/backward.

#include "train/reference_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace conveyor::train {

reference_gradients reference_step(const host_parameters& p, std::span<const float> x, std::span<const int> labels) {
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

  // a[0] = input, a[l+1] = output of layer l (after ReLU for hidden layers; logits for the last).
  std::array<std::vector<double>, num_layers + 1> a;
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

  // Softmax cross-entropy and its gradient with respect to the logits.
  reference_gradients g;
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

  // Backward: delta holds dLoss/dz of layer l's output.
  for (int l = num_layers - 1; l >= 0; --l) {
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
    if (l > 0) {
      std::vector<double> below(rows * in, 0.0);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t i = 0; i < in; ++i) {
          if (!(a[l][r * in + i] > 0.0)) continue; // ReLU derivative: 1 where the output is positive
          double s = 0.0;
          for (std::size_t o = 0; o < out; ++o) s += delta[r * out + o] * static_cast<double>(p.weights[l][o * in + i]);
          below[r * in + i] = s;
        }
      delta = std::move(below);
    }
  }
  return g;
}

} // namespace conveyor::train
