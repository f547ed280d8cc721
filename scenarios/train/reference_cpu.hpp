#pragma once
//! \file reference_cpu.hpp
//! A plain double-precision CPU implementation of the perceptron's forward and backward pass for one batch,
//! independent of the GPU code (it shares only the host parameter struct), to check the GPU gradients.

#include "train/parameters.hpp"

#include <array>
#include <span>
#include <vector>

namespace conveyor::train {

//! Loss and gradients computed in double precision.
struct reference_gradients {
  double loss = 0.0;                                   //!< mean softmax cross-entropy over the batch
  std::array<std::vector<double>, num_layers> weights; //!< dLoss/dW[l], out x in, row-major
  std::array<std::vector<double>, num_layers> biases;  //!< dLoss/db[l], out
};

//! Forward (z = a·Wᵀ + b, ReLU on the hidden layers, softmax cross-entropy averaged over the batch) and backward
//! for `labels.size()` samples, in double precision, with textbook loops.
//! \param x      rows x 784 inputs
//! \param labels rows labels in [0, 10)
//! \throws std::invalid_argument when the sizes disagree, rows is 0 or a label is out of range.
[[nodiscard]] reference_gradients reference_step(const host_parameters& p, std::span<const float> x,
                                                 std::span<const int> labels);

} // namespace conveyor::train
