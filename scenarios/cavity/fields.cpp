//! \file fields.cpp
//! Macroscopic fields, profiles and their comparison.

#include "cavity/fields.hpp"

#include "cavity/lattice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace conveyor::cavity {

flow_field compute_fields(std::span<const float> populations, int n) {
  if (n < 1) throw std::invalid_argument("compute_fields: n must be at least 1");
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  if (populations.size() != cells * q)
    throw std::invalid_argument(
        fmt::format("compute_fields: {} populations, expected {} x {} x 9 = {}", populations.size(), n, n, cells * q));
  flow_field f;
  f.n = n;
  f.rho.resize(cells);
  f.ux.resize(cells);
  f.uy.resize(cells);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      const cell_moments m = moments(populations.data(), n, x, y);
      const std::size_t c = static_cast<std::size_t>(y) * static_cast<std::size_t>(n) + static_cast<std::size_t>(x);
      f.rho[c] = m.rho;
      f.ux[c] = m.ux;
      f.uy[c] = m.uy;
    }
  return f;
}

double total_mass(std::span<const float> populations) noexcept {
  double sum = 0.0;
  for (const float v : populations) sum += v;
  return static_cast<double>(populations.size() / q) + sum;
}

namespace {

void check_field(const flow_field& f, double lid_speed) {
  if (!(lid_speed > 0.0)) throw std::invalid_argument("lid speed must be positive");
  const std::size_t cells = static_cast<std::size_t>(f.n) * static_cast<std::size_t>(f.n);
  if (f.n < 1 || f.ux.size() != cells || f.uy.size() != cells)
    throw std::invalid_argument("flow field is empty or inconsistent");
}

//! Value of `component` on the line through the middle of the cavity, at cell index j along the line:
//! vertical line (column) when `vertical`, else horizontal (row). Interpolates between the two middle
//! columns/rows when n is even.
double on_centre_line(const flow_field& f, const std::vector<double>& component, bool vertical, int j) {
  const int n = f.n;
  auto at = [&](int across) {
    const int x = vertical ? across : j;
    const int y = vertical ? j : across;
    return component[static_cast<std::size_t>(y) * static_cast<std::size_t>(n) + static_cast<std::size_t>(x)];
  };
  if (n % 2 == 1) return at(n / 2);
  return 0.5 * (at(n / 2 - 1) + at(n / 2));
}

profile centre_profile(const flow_field& f, const std::vector<double>& component, bool vertical, double lid_speed,
                       double end_value) {
  profile p;
  p.position.reserve(static_cast<std::size_t>(f.n) + 2);
  p.value.reserve(static_cast<std::size_t>(f.n) + 2);
  p.position.push_back(0.0);
  p.value.push_back(0.0);
  for (int j = 0; j < f.n; ++j) {
    p.position.push_back((j + 0.5) / f.n);
    p.value.push_back(on_centre_line(f, component, vertical, j) / lid_speed);
  }
  p.position.push_back(1.0);
  p.value.push_back(end_value);
  return p;
}

} // namespace

profile u_vertical_centerline(const flow_field& f, double lid_speed) {
  check_field(f, lid_speed);
  return centre_profile(f, f.ux, true, lid_speed, 1.0);
}

profile v_horizontal_centerline(const flow_field& f, double lid_speed) {
  check_field(f, lid_speed);
  return centre_profile(f, f.uy, false, lid_speed, 0.0);
}

double interpolate(const profile& p, double at) {
  if (p.position.size() < 2 || p.position.size() != p.value.size())
    throw std::invalid_argument("interpolate: a profile needs at least two points and one value per position");
  if (!std::is_sorted(p.position.begin(), p.position.end()))
    throw std::invalid_argument("interpolate: profile positions are not ascending");
  if (!(at >= p.position.front() && at <= p.position.back()))
    throw std::invalid_argument(fmt::format("interpolate: position {} outside the profile's [{}, {}]", at,
                                            p.position.front(), p.position.back()));
  const auto hi = std::upper_bound(p.position.begin(), p.position.end(), at);
  if (hi == p.position.end()) return p.value.back(); // at == last position
  const std::size_t j = static_cast<std::size_t>(hi - p.position.begin());
  const double x0 = p.position[j - 1];
  const double x1 = p.position[j];
  const double t = x1 > x0 ? (at - x0) / (x1 - x0) : 0.0;
  return p.value[j - 1] + t * (p.value[j] - p.value[j - 1]);
}

profile_difference compare_profile(const profile& ours, std::span<const double> positions,
                                   std::span<const double> reference, std::span<const double> skip) {
  if (positions.size() != reference.size())
    throw std::invalid_argument(
        fmt::format("compare_profile: {} positions but {} reference values", positions.size(), reference.size()));
  profile_difference d;
  for (std::size_t k = 0; k < positions.size(); ++k) {
    const bool skipped =
        std::any_of(skip.begin(), skip.end(), [&](double s) { return std::fabs(s - positions[k]) < 1e-9; });
    if (skipped) {
      ++d.skipped;
      continue;
    }
    const double value = interpolate(ours, positions[k]);
    const double diff = std::fabs(value - reference[k]);
    if (d.compared == 0 || diff > d.max_abs || std::isnan(diff)) {
      d.max_abs = std::isnan(diff) ? INFINITY : diff;
      d.position = positions[k];
      d.ours = value;
      d.reference = reference[k];
    }
    ++d.compared;
  }
  return d;
}

std::vector<double> stream_function(const flow_field& f, double lid_speed) {
  check_field(f, lid_speed);
  const int n = f.n;
  std::vector<double> psi(f.ux.size());
  for (int x = 0; x < n; ++x) {
    double below = 0.0; // integral of u up to the bottom face of cell y
    for (int y = 0; y < n; ++y) {
      const std::size_t c = static_cast<std::size_t>(y) * static_cast<std::size_t>(n) + static_cast<std::size_t>(x);
      const double u = f.ux[c] / lid_speed / n;
      psi[c] = below + 0.5 * u;
      below += u;
    }
  }
  return psi;
}

} // namespace conveyor::cavity
