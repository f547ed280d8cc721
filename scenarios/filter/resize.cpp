//! \file resize.cpp
#include "filter/resize.hpp"

#include "filter/image_io.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::filter {
namespace {

//! For each target coordinate: the first source index and the weight of the second (index + 1, clamped).
struct axis_map {
  std::vector<int> first;
  std::vector<int> second;
  std::vector<float> frac;
};

axis_map map_axis(int src, int dst) {
  axis_map m;
  m.first.resize(static_cast<std::size_t>(dst));
  m.second.resize(static_cast<std::size_t>(dst));
  m.frac.resize(static_cast<std::size_t>(dst));
  const double scale = static_cast<double>(src) / dst;
  for (int i = 0; i < dst; ++i) {
    const double s = (i + 0.5) * scale - 0.5;
    int i0 = static_cast<int>(std::floor(s));
    double f = s - i0;
    if (i0 < 0) {
      i0 = 0;
      f = 0.0;
    }
    if (i0 >= src - 1) {
      i0 = src - 1;
      f = 0.0;
    }
    const auto k = static_cast<std::size_t>(i);
    m.first[k] = i0;
    m.second[k] = std::min(i0 + 1, src - 1);
    m.frac[k] = static_cast<float>(f);
  }
  return m;
}

} // namespace

image resize_bilinear(const image& src, int width, int height) {
  if (!src.valid()) throw std::invalid_argument("resize_bilinear: invalid source image");
  if (width < 1 || height < 1 || width > max_image_side || height > max_image_side)
    throw std::invalid_argument("resize_bilinear: target size " + std::to_string(width) + "x" + std::to_string(height) +
                                " out of range");
  const axis_map mx = map_axis(src.width, width);
  const axis_map my = map_axis(src.height, height);
  const int c = src.channels;
  image out;
  out.width = width;
  out.height = height;
  out.channels = c;
  out.pixels.resize(out.samples());
  const auto at = [&](int x, int y, int ch) {
    return static_cast<float>(
        src.pixels[(static_cast<std::size_t>(y) * static_cast<std::size_t>(src.width) + static_cast<std::size_t>(x)) *
                       static_cast<std::size_t>(c) +
                   static_cast<std::size_t>(ch)]);
  };
  for (int y = 0; y < height; ++y) {
    const auto ky = static_cast<std::size_t>(y);
    const int y0 = my.first[ky];
    const int y1 = my.second[ky];
    const float fy = my.frac[ky];
    for (int x = 0; x < width; ++x) {
      const auto kx = static_cast<std::size_t>(x);
      const int x0 = mx.first[kx];
      const int x1 = mx.second[kx];
      const float fx = mx.frac[kx];
      for (int ch = 0; ch < c; ++ch) {
        const float top = at(x0, y0, ch) + fx * (at(x1, y0, ch) - at(x0, y0, ch));
        const float bottom = at(x0, y1, ch) + fx * (at(x1, y1, ch) - at(x0, y1, ch));
        const float v = top + fy * (bottom - top);
        out.pixels[(ky * static_cast<std::size_t>(width) + kx) * static_cast<std::size_t>(c) +
                   static_cast<std::size_t>(ch)] = static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0F, 255.0F)));
      }
    }
  }
  return out;
}

} // namespace conveyor::filter
