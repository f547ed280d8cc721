//! \file params.cpp
#include "filter/params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace conveyor::filter {

int gaussian_radius(double sigma) {
  if (!(sigma >= min_gaussian_sigma) || !std::isfinite(sigma))
    throw std::invalid_argument(fmt::format("Gaussian sigma must be a number in [{:g}, {:g}], got {:g}",
                                            min_gaussian_sigma, max_gaussian_sigma, sigma));
  const double r = std::ceil(3.0 * sigma);
  if (r > max_gaussian_radius)
    throw std::invalid_argument("Gaussian sigma " + std::to_string(sigma) + " needs radius " +
                                std::to_string(static_cast<long long>(r)) + ", more than the " +
                                std::to_string(max_gaussian_radius) +
                                " supported (sigma <= " + std::to_string(max_gaussian_radius / 3.0) + ")");
  return std::max(1, static_cast<int>(r));
}

std::vector<double> gaussian_kernel(double sigma) {
  const int r = gaussian_radius(sigma);
  const int n = 2 * r + 1;
  std::vector<double> w(static_cast<std::size_t>(n));
  const double scale2 = -0.5 / (sigma * sigma);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double x = i - (n - 1) * 0.5;
    w[static_cast<std::size_t>(i)] = std::exp(scale2 * x * x);
    sum += w[static_cast<std::size_t>(i)];
  }
  const double inv = 1.0 / sum;
  for (double& v : w) v *= inv;
  return w;
}

void validate(const filter_params& p) {
  (void)gaussian_radius(p.sigma);
  (void)gaussian_radius(p.unsharp_sigma);
  // Both reach the GPU as floats: a double beyond FLT_MAX would be infinity there.
  constexpr double float_max = std::numeric_limits<float>::max();
  if (!(p.threshold >= 0.0 && p.threshold <= float_max))
    throw std::invalid_argument(
        fmt::format("threshold must be in [0, {:g}] (a float), got {:g}", float_max, p.threshold));
  if (!(p.unsharp_amount >= 0.0 && p.unsharp_amount <= float_max))
    throw std::invalid_argument(
        fmt::format("unsharp amount must be in [0, {:g}] (a float), got {:g}", float_max, p.unsharp_amount));
}

} // namespace conveyor::filter
