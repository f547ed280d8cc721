//! \file image.cpp
//! PNG output and the cavity picture.

#include "cavity/image.hpp"

#include "common/file_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace conveyor::cavity {

rgb_image::rgb_image(int w, int h) : width(w), height(h) {
  if (w < 1 || h < 1 || w > 65535 || h > 65535)
    throw std::invalid_argument(fmt::format("image size {} x {} outside [1, 65535]", w, h));
  pixels.assign(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3, 0);
}

void write_png(const std::filesystem::path& file, const rgb_image& image) {
  if (image.width < 1 || image.height < 1 ||
      image.pixels.size() != static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3)
    throw std::invalid_argument(
        fmt::format("write_png: {} bytes for a {} x {} RGB image", image.pixels.size(), image.width, image.height));
  scenarios::write_png(file, image.width, image.height, 3, image.pixels);
}

std::array<std::uint8_t, 3> viridis(double t) noexcept {
  // Viridis sampled at t = 0, 1/8, ..., 1 (matplotlib's table), interpolated linearly.
  static constexpr double table[9][3] = {{68, 1, 84},    {71, 44, 122}, {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                                         {39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37}};
  if (!(t > 0.0)) t = 0.0; // NaN too
  t = std::min(t, 1.0) * 8.0;
  const int k = std::min(static_cast<int>(t), 7);
  const double a = t - k;
  std::array<std::uint8_t, 3> rgb{};
  for (int c = 0; c < 3; ++c)
    rgb[static_cast<std::size_t>(c)] =
        static_cast<std::uint8_t>(std::lround(table[k][c] + a * (table[k + 1][c] - table[k][c])));
  return rgb;
}

const std::vector<double>& streamline_levels() {
  // Ghia, Ghia & Shin (1982), Table III's contour values for psi.
  static const std::vector<double> levels{-0.1175, -0.115, -0.11,  -0.1,  -0.09, -0.07,  -0.05, -0.03,
                                          -0.01,   -1e-4,  -1e-5,  -1e-7, 1e-8,  1e-7,   1e-6,  1e-5,
                                          5e-5,    1e-4,   2.5e-4, 5e-4,  1e-3,  1.5e-3, 3e-3};
  return levels;
}

namespace {

//! Bilinear sample of a cell-centred n x n field at unit-square position (px, py), clamped at the outer cells.
double sample(const std::vector<double>& field, int n, double px, double py) {
  const double fx = std::clamp(px * n - 0.5, 0.0, static_cast<double>(n - 1));
  const double fy = std::clamp(py * n - 0.5, 0.0, static_cast<double>(n - 1));
  const int x0 = std::min(static_cast<int>(fx), n - 1);
  const int y0 = std::min(static_cast<int>(fy), n - 1);
  const int x1 = std::min(x0 + 1, n - 1);
  const int y1 = std::min(y0 + 1, n - 1);
  const double ax = fx - x0;
  const double ay = fy - y0;
  auto at = [&](int x, int y) {
    return field[static_cast<std::size_t>(y) * static_cast<std::size_t>(n) + static_cast<std::size_t>(x)];
  };
  return (1 - ay) * ((1 - ax) * at(x0, y0) + ax * at(x1, y0)) + ay * ((1 - ax) * at(x0, y1) + ax * at(x1, y1));
}

} // namespace

rgb_image render_cavity(const flow_field& f, double lid_speed, int min_size) {
  if (min_size < 1) throw std::invalid_argument("render_cavity: min_size must be at least 1");
  const std::vector<double> psi = stream_function(f, lid_speed); // checks the field and lid speed
  const int n = f.n;
  std::vector<double> speed(psi.size());
  for (std::size_t c = 0; c < speed.size(); ++c) speed[c] = std::hypot(f.ux[c], f.uy[c]) / lid_speed;

  const int scale = std::max(1, (min_size + n - 1) / n);
  const int size = n * scale;
  rgb_image img(size, size);
  const std::vector<double>& levels = streamline_levels();
  // Contour band of every pixel: the number of levels below psi there.
  std::vector<int> band(static_cast<std::size_t>(size) * static_cast<std::size_t>(size));
  std::vector<double> psi_px(band.size());
  for (int row = 0; row < size; ++row) {
    const double py = 1.0 - (row + 0.5) / size; // row 0 is the top (lid)
    for (int col = 0; col < size; ++col) {
      const double px = (col + 0.5) / size;
      const std::size_t p =
          static_cast<std::size_t>(row) * static_cast<std::size_t>(size) + static_cast<std::size_t>(col);
      const double s = sample(psi, n, px, py);
      psi_px[p] = s;
      band[p] = static_cast<int>(std::upper_bound(levels.begin(), levels.end(), s) - levels.begin());
      const auto rgb = viridis(sample(speed, n, px, py));
      std::copy(rgb.begin(), rgb.end(), img.pixels.begin() + static_cast<std::ptrdiff_t>(3 * p));
    }
  }
  // A pixel lies on a streamline when its band differs from its right or lower neighbour's.
  for (int row = 0; row < size; ++row)
    for (int col = 0; col < size; ++col) {
      const std::size_t p =
          static_cast<std::size_t>(row) * static_cast<std::size_t>(size) + static_cast<std::size_t>(col);
      const bool right = col + 1 < size && band[p + 1] != band[p];
      const bool down = row + 1 < size && band[p + static_cast<std::size_t>(size)] != band[p];
      if (!right && !down) continue;
      const std::uint8_t shade = psi_px[p] < 0.0 ? 255 : 0;
      std::fill_n(img.pixels.begin() + static_cast<std::ptrdiff_t>(3 * p), 3, shade);
    }
  return img;
}

} // namespace conveyor::cavity
