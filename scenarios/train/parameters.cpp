//! \file parameters.cpp
//! He initialisation and packing of the parameters.

#include "train/parameters.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>

namespace conveyor::train {

host_parameters host_parameters::zeros() {
  host_parameters p;
  for (int l = 0; l < num_layers; ++l) {
    const auto in = static_cast<std::size_t>(layer_widths[l]);
    const auto out = static_cast<std::size_t>(layer_widths[l + 1]);
    p.weights[l].assign(out * in, 0.0F);
    p.biases[l].assign(out, 0.0F);
  }
  return p;
}

host_parameters he_init(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Uniform in (0, 1]: 53 random bits, never 0 so that log() is finite.
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53; };
  host_parameters p = host_parameters::zeros();
  for (int l = 0; l < num_layers; ++l) {
    const double stddev = std::sqrt(2.0 / layer_widths[l]);
    auto& w = p.weights[l];
    for (std::size_t i = 0; i < w.size(); i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform()));
      const double theta = 2.0 * std::numbers::pi * uniform();
      w[i] = static_cast<float>(stddev * r * std::cos(theta));
      if (i + 1 < w.size()) w[i + 1] = static_cast<float>(stddev * r * std::sin(theta));
    }
  }
  return p;
}

std::vector<float> pack(const host_parameters& p) {
  constexpr parameter_layout layout = make_parameter_layout();
  std::vector<float> flat(layout.total, 0.0F);
  for (int l = 0; l < num_layers; ++l) {
    const auto in = static_cast<std::size_t>(layer_widths[l]);
    const auto out = static_cast<std::size_t>(layer_widths[l + 1]);
    if (p.weights[l].size() != out * in || p.biases[l].size() != out)
      throw std::invalid_argument("pack: parameters of layer " + std::to_string(l) + " have the wrong size");
    const auto w0 = flat.begin() + static_cast<std::ptrdiff_t>(layout.weight_offset[l]);
    const auto b0 = flat.begin() + static_cast<std::ptrdiff_t>(layout.bias_offset[l]);
    std::copy(p.weights[l].begin(), p.weights[l].end(), w0);
    std::copy(p.biases[l].begin(), p.biases[l].end(), b0);
  }
  return flat;
}

host_parameters unpack(const std::vector<float>& flat) {
  constexpr parameter_layout layout = make_parameter_layout();
  if (flat.size() != layout.total) throw std::invalid_argument("unpack: buffer does not match the parameter layout");
  host_parameters p = host_parameters::zeros();
  for (int l = 0; l < num_layers; ++l) {
    const auto w0 = flat.begin() + static_cast<std::ptrdiff_t>(layout.weight_offset[l]);
    const auto b0 = flat.begin() + static_cast<std::ptrdiff_t>(layout.bias_offset[l]);
    std::copy(w0, w0 + static_cast<std::ptrdiff_t>(p.weights[l].size()), p.weights[l].begin());
    std::copy(b0, b0 + static_cast<std::ptrdiff_t>(p.biases[l].size()), p.biases[l].begin());
  }
  return p;
}

} // namespace conveyor::train
