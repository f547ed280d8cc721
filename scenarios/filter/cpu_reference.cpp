//! \file cpu_reference.cpp
//! The chain in double precision, written for clarity, not speed.

#include "filter/cpu_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace conveyor::filter {
namespace {

plane like(const plane& p, int channels) {
  plane out;
  out.width = p.width;
  out.height = p.height;
  out.channels = channels;
  out.values.assign(
      static_cast<std::size_t>(p.width) * static_cast<std::size_t>(p.height) * static_cast<std::size_t>(channels), 0.0);
  return out;
}

std::size_t index(const plane& p, int x, int y, int c) {
  return (static_cast<std::size_t>(y) * static_cast<std::size_t>(p.width) + static_cast<std::size_t>(x)) *
             static_cast<std::size_t>(p.channels) +
         static_cast<std::size_t>(c);
}

// Sample at (x, y) with coordinates clamped to the image: BORDER_REPLICATE.
double at(const plane& p, int x, int y, int c = 0) {
  return p.values[index(p, std::clamp(x, 0, p.width - 1), std::clamp(y, 0, p.height - 1), c)];
}

void require_grey(const plane& p, const char* what) {
  if (p.channels != 1) throw std::invalid_argument(std::string(what) + ": needs a 1-channel plane");
}

void require_same_shape(const plane& a, const plane& b, const char* what) {
  if (a.width != b.width || a.height != b.height || a.channels != b.channels)
    throw std::invalid_argument(std::string(what) + ": planes of different shapes");
}

std::uint8_t saturate(double v) { return static_cast<std::uint8_t>(std::nearbyint(std::clamp(v, 0.0, 255.0))); }

plane blur(const plane& in, const std::vector<double>& w, int dx, int dy) {
  if (w.size() % 2 == 0) throw std::invalid_argument("blur: the kernel length must be odd");
  const int r = static_cast<int>(w.size() / 2);
  plane out = like(in, in.channels);
  for (int y = 0; y < in.height; ++y)
    for (int x = 0; x < in.width; ++x)
      for (int c = 0; c < in.channels; ++c) {
        double acc = 0.0;
        for (int k = -r; k <= r; ++k) acc += w[static_cast<std::size_t>(k + r)] * at(in, x + k * dx, y + k * dy, c);
        out.values[index(out, x, y, c)] = acc;
      }
  return out;
}

template <class A, class B>
max_difference max_abs(const std::vector<A>& a, const std::vector<B>& b) {
  if (a.size() != b.size())
    throw std::invalid_argument("max_abs_difference: lengths differ (" + std::to_string(a.size()) + " vs " +
                                std::to_string(b.size()) + ")");
  max_difference d;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double v = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (v > d.value || std::isnan(v)) {
      d.value = std::isnan(v) ? INFINITY : v;
      d.index = i;
    }
  }
  return d;
}

} // namespace

plane to_plane(const image& rgb) {
  if (!rgb.valid() || rgb.channels != 3) throw std::invalid_argument("to_plane: needs a valid RGB image");
  plane out;
  out.width = rgb.width;
  out.height = rgb.height;
  out.channels = 3;
  out.values.assign(rgb.pixels.begin(), rgb.pixels.end());
  return out;
}

plane to_grey(const plane& rgb) {
  if (rgb.channels != 3) throw std::invalid_argument("to_grey: needs a 3-channel plane");
  plane out = like(rgb, 1);
  for (std::size_t i = 0; i < out.values.size(); ++i)
    out.values[i] = 0.299 * rgb.values[3 * i] + 0.587 * rgb.values[3 * i + 1] + 0.114 * rgb.values[3 * i + 2];
  return out;
}

plane blur_rows(const plane& in, const std::vector<double>& weights) { return blur(in, weights, 1, 0); }
plane blur_columns(const plane& in, const std::vector<double>& weights) { return blur(in, weights, 0, 1); }

plane sobel_x(const plane& in) {
  require_grey(in, "sobel_x");
  plane out = like(in, 1);
  for (int y = 0; y < in.height; ++y)
    for (int x = 0; x < in.width; ++x)
      out.values[index(out, x, y, 0)] = (at(in, x + 1, y - 1) + 2.0 * at(in, x + 1, y) + at(in, x + 1, y + 1)) -
                                        (at(in, x - 1, y - 1) + 2.0 * at(in, x - 1, y) + at(in, x - 1, y + 1));
  return out;
}

plane sobel_y(const plane& in) {
  require_grey(in, "sobel_y");
  plane out = like(in, 1);
  for (int y = 0; y < in.height; ++y)
    for (int x = 0; x < in.width; ++x)
      out.values[index(out, x, y, 0)] = (at(in, x - 1, y + 1) + 2.0 * at(in, x, y + 1) + at(in, x + 1, y + 1)) -
                                        (at(in, x - 1, y - 1) + 2.0 * at(in, x, y - 1) + at(in, x + 1, y - 1));
  return out;
}

plane magnitude(const plane& gx, const plane& gy) {
  require_same_shape(gx, gy, "magnitude");
  plane out = like(gx, gx.channels);
  for (std::size_t i = 0; i < out.values.size(); ++i) out.values[i] = std::hypot(gx.values[i], gy.values[i]);
  return out;
}

image threshold(const plane& in, double t) {
  image out;
  out.width = in.width;
  out.height = in.height;
  out.channels = in.channels;
  out.pixels.resize(in.values.size());
  for (std::size_t i = 0; i < in.values.size(); ++i) out.pixels[i] = in.values[i] > t ? 255 : 0;
  return out;
}

image unsharp(const plane& in, const plane& blurred, double amount) {
  require_same_shape(in, blurred, "unsharp");
  image out;
  out.width = in.width;
  out.height = in.height;
  out.channels = in.channels;
  out.pixels.resize(in.values.size());
  for (std::size_t i = 0; i < in.values.size(); ++i)
    out.pixels[i] = saturate(in.values[i] + amount * (in.values[i] - blurred.values[i]));
  return out;
}

image to_image(const plane& in) {
  image out;
  out.width = in.width;
  out.height = in.height;
  out.channels = in.channels;
  out.pixels.resize(in.values.size());
  for (std::size_t i = 0; i < in.values.size(); ++i) out.pixels[i] = saturate(in.values[i]);
  return out;
}

chain_reference run_reference(const image& rgb, const filter_params& p) {
  validate(p);
  chain_reference r;
  r.rgb = to_plane(rgb);
  r.grey = to_grey(r.rgb);
  const std::vector<double> w = gaussian_kernel(p.sigma);
  r.blurred = blur_columns(blur_rows(r.grey, w), w);
  r.gradient_x = sobel_x(r.blurred);
  r.gradient_y = sobel_y(r.blurred);
  r.magnitude = magnitude(r.gradient_x, r.gradient_y);
  r.edges = threshold(r.magnitude, p.threshold);
  const std::vector<double> wc = gaussian_kernel(p.unsharp_sigma);
  r.colour_blurred = blur_columns(blur_rows(r.rgb, wc), wc);
  r.sharp = unsharp(r.rgb, r.colour_blurred, p.unsharp_amount);
  return r;
}

max_difference max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) { return max_abs(a, b); }
max_difference max_abs_difference(const std::vector<float>& a, const std::vector<double>& b) { return max_abs(a, b); }
max_difference max_abs_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  return max_abs(a, b);
}

std::string output_check::summary() const {
  return "sharpened max difference " + std::to_string(sharp_max_difference) +
         " grey level(s); edges: " + std::to_string(edge_flips_far) + " pixel(s) differ away from the threshold, " +
         std::to_string(edge_flips_near) + " within the margin, of " + std::to_string(pixels) +
         (ok() ? " -> OK" : " -> MISMATCH");
}

output_check check_outputs(const image& edges, const image& sharp, const chain_reference& ref, double t,
                           double margin) {
  if (edges.pixels.size() != ref.edges.pixels.size() || sharp.pixels.size() != ref.sharp.pixels.size() ||
      edges.width != ref.edges.width || edges.height != ref.edges.height)
    throw std::invalid_argument("check_outputs: the outputs' shapes differ from the reference's");
  output_check c;
  c.pixels = edges.pixels.size();
  c.sharp_max_difference = static_cast<int>(max_abs_difference(sharp.pixels, ref.sharp.pixels).value);
  for (std::size_t i = 0; i < edges.pixels.size(); ++i) {
    if (edges.pixels[i] == ref.edges.pixels[i]) continue;
    if (std::fabs(ref.magnitude.values[i] - t) <= margin) ++c.edge_flips_near;
    else ++c.edge_flips_far;
  }
  return c;
}

} // namespace conveyor::filter
