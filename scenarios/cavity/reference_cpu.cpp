//! \file reference_cpu.cpp
//! The CPU reference of the cavity time step.

#include "cavity/reference_cpu.hpp"

#include <stdexcept>
#include <utility>

namespace conveyor::cavity {

std::vector<float> initial_populations(int n) {
  if (n < 1) throw std::invalid_argument("initial_populations: n must be at least 1");
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  return std::vector<float>(cells * q, 0.0F); // g_i = f_i - w_i = 0
}

cpu_lattice::cpu_lattice(const lattice_params& p) : params_(p) {
  if (p.n < 3) throw std::invalid_argument("cpu_lattice: n must be at least 3");
  current_ = initial_populations(p.n);
  next_.resize(current_.size());
}

void cpu_lattice::step(std::int64_t count) {
  for (std::int64_t s = 0; s < count; ++s) {
    for (int y = 0; y < params_.n; ++y)
      for (int x = 0; x < params_.n; ++x) stream_collide_cell(current_.data(), next_.data(), params_, x, y);
    std::swap(current_, next_);
    ++steps_;
  }
}

} // namespace conveyor::cavity
