#pragma once
//! \file reference_cpu.hpp
//! A CPU implementation of the cavity's time step: the same per-cell code (lattice.hpp) and memory layout as the
//! CUDA kernel, single-threaded, for tests on small lattices.

#include "cavity/lattice.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace conveyor::cavity {

//! The initial state: every cell at rest with unit density, f_i = w_i (the equilibrium of rho 1, u 0), stored as
//! deviations g_i = f_i - w_i = 0.
//! \throws std::invalid_argument when n < 1.
[[nodiscard]] std::vector<float> initial_populations(int n);

//! Two population fields on the host, stepped with stream_collide_cell.
class cpu_lattice {
public:
  //! Starts from initial_populations(p.n).
  //! \throws std::invalid_argument when p.n < 3 (a cell needs neighbours on both sides to be meaningful).
  explicit cpu_lattice(const lattice_params& p);

  //! Advances `count` time steps.
  void step(std::int64_t count = 1);
  //! The current post-collision populations (deviations g_i = f_i - w_i), n * n * 9 floats, layout of lattice.hpp.
  [[nodiscard]] std::span<const float> populations() const noexcept { return current_; }
  //! Time steps taken so far.
  [[nodiscard]] std::int64_t steps() const noexcept { return steps_; }
  //! The parameters it steps with.
  [[nodiscard]] const lattice_params& params() const noexcept { return params_; }

private:
  lattice_params params_;
  std::vector<float> current_;
  std::vector<float> next_;
  std::int64_t steps_ = 0;
};

} // namespace conveyor::cavity
