#pragma once
//! \file fields.hpp
//! Host-side analysis of a population field: macroscopic fields, total mass, centre-line velocity profiles and
//! their linear interpolation, the stream function. Host-only (no CUDA).

#include <cstddef>
#include <span>
#include <vector>

namespace conveyor::cavity {

//! Density and velocity of every cell, row-major (index y * n + x, y upwards), lattice units.
struct flow_field {
  int n = 0;               //!< cells per side
  std::vector<double> rho; //!< density
  std::vector<double> ux;  //!< x velocity
  std::vector<double> uy;  //!< y velocity
};

//! The moments of every cell of `populations` (deviations g_i = f_i - w_i, n * n * 9 floats, layout of
//! lattice.hpp).
//! \throws std::invalid_argument when the size is not n * n * 9 or n < 1.
[[nodiscard]] flow_field compute_fields(std::span<const float> populations, int n);

//! The total mass sum over cells and i of f_i = number of cells + sum of the stored deviations g_i = f_i - w_i
//! (sum_i w_i = 1), accumulated in double. `populations` holds n * n * 9 deviations (layout of lattice.hpp).
[[nodiscard]] double total_mass(std::span<const float> populations) noexcept;

//! A velocity profile along a line through the cavity: values at ascending positions in [0, 1] (unit-square
//! coordinates), wall points included.
struct profile {
  std::vector<double> position; //!< ascending, first 0, last 1
  std::vector<double> value;    //!< same length as position
};

//! u / U along the vertical centre line x = 1/2, against y: the wall point (0, 0), the cell centres
//! y = (j + 1/2) / n (u linearly interpolated between the two columns beside x = 1/2 when n is even, the middle
//! column when n is odd), the lid point (1, 1).
//! \throws std::invalid_argument when lid_speed <= 0 or the field is empty.
[[nodiscard]] profile u_vertical_centerline(const flow_field& f, double lid_speed);

//! v / U along the horizontal centre line y = 1/2, against x, with wall points (0, 0) and (1, 0); as above.
//! \throws std::invalid_argument when lid_speed <= 0 or the field is empty.
[[nodiscard]] profile v_horizontal_centerline(const flow_field& f, double lid_speed);

//! The profile linearly interpolated at `at`.
//! \throws std::invalid_argument when the profile has fewer than two points, its positions are not ascending, or
//!         `at` lies outside [first, last] position.
[[nodiscard]] double interpolate(const profile& p, double at);

//! The largest absolute difference between a profile and reference values at reference positions.
struct profile_difference {
  double max_abs = 0.0;     //!< max over compared points of |ours - reference|
  double position = 0.0;    //!< where it occurs
  double ours = 0.0;        //!< our interpolated value there
  double reference = 0.0;   //!< the reference value there
  std::size_t compared = 0; //!< points compared
  std::size_t skipped = 0;  //!< points left out because they were listed in `skip`
};

//! Interpolates `ours` at every reference position (linearly) and returns the largest absolute difference,
//! leaving out positions equal (within 1e-9) to one in `skip`.
//! \throws std::invalid_argument when positions and reference differ in length, or as interpolate().
[[nodiscard]] profile_difference compare_profile(const profile& ours, std::span<const double> positions,
                                                 std::span<const double> reference, std::span<const double> skip = {});

//! The stream function psi / (U L) at every cell centre (row-major, y upwards): psi = integral of u dy from the
//! bottom wall (psi = 0 on the walls; the primary vortex has psi < 0, as in Ghia et al.), midpoint rule.
//! \throws std::invalid_argument when lid_speed <= 0.
[[nodiscard]] std::vector<double> stream_function(const flow_field& f, double lid_speed);

} // namespace conveyor::cavity
