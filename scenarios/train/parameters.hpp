#pragma once
//! \file parameters.hpp
//! Shape of the multilayer perceptron 784-256-128-10 and its parameters on the host. Host only: the CPU
//! reference uses this header without any CUDA code.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace conveyor::train {

//! Widths of the layers: input (28x28 pixels), two hidden ReLU layers, output logits (10 classes).
inline constexpr std::array<int, 4> layer_widths{784, 256, 128, 10};
//! Number of weight layers.
inline constexpr int num_layers = 3;
//! Input features per sample.
inline constexpr int input_features = layer_widths[0];
//! Output classes.
inline constexpr int num_classes = layer_widths[3];

//! Weights and biases of the network, on the host, float.
//! `weights[l]` is row-major `layer_widths[l+1]` x `layer_widths[l]` (out x in, as in PyTorch), so layer l
//! computes `z = a · Wᵀ + b`; `biases[l]` has `layer_widths[l+1]` elements. The same struct holds gradients.
struct host_parameters {
  std::array<std::vector<float>, num_layers> weights; //!< weights[l]: out x in, row-major
  std::array<std::vector<float>, num_layers> biases;  //!< biases[l]: out

  //! All vectors sized for the network and zero-filled.
  [[nodiscard]] static host_parameters zeros();
};

//! He (Kaiming) normal initialisation: weights ~ N(0, 2 / fan_in), biases 0. Draws from std::mt19937_64 seeded
//! with `seed` through a Box-Muller transform written here (not std::normal_distribution), so the same seed gives
//! the same weights with any standard library.
[[nodiscard]] host_parameters he_init(std::uint64_t seed);

//! Offsets (in floats) of each weight and bias block inside one contiguous device buffer. Every block starts at
//! a multiple of 64 floats (256 bytes); the padding is never read by the matrix products and stays 0.
struct parameter_layout {
  std::array<std::size_t, num_layers> weight_offset{}; //!< start of weights[l]
  std::array<std::size_t, num_layers> bias_offset{};   //!< start of biases[l]
  std::size_t total = 0;                               //!< floats in the whole buffer, padding included
};

//! The layout used for parameters, gradients and optimizer state alike.
[[nodiscard]] constexpr parameter_layout make_parameter_layout() noexcept {
  constexpr std::size_t align = 64;
  auto round_up = [](std::size_t n) { return (n + align - 1) / align * align; };
  parameter_layout p;
  std::size_t at = 0;
  for (int l = 0; l < num_layers; ++l) {
    const auto in = static_cast<std::size_t>(layer_widths[l]);
    const auto out = static_cast<std::size_t>(layer_widths[l + 1]);
    p.weight_offset[l] = at;
    at = round_up(at + out * in);
    p.bias_offset[l] = at;
    at = round_up(at + out);
  }
  p.total = at;
  return p;
}

//! Packs `p` into the device layout (padding zero). \throws std::invalid_argument when a vector has the wrong size.
[[nodiscard]] std::vector<float> pack(const host_parameters& p);
//! Unpacks a buffer in the device layout. \throws std::invalid_argument when `flat` is not layout.total long.
[[nodiscard]] host_parameters unpack(const std::vector<float>& flat);

} // namespace conveyor::train
