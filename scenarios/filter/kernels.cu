//! \file kernels.cu
//! The chain's kernels: one thread per pixel, global memory through the read-only cache; simple, not tiled.

#include "filter/kernels.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::filter {
namespace {

__device__ __forceinline__ bool pixel(int width, int height, int& x, int& y) {
  x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  y = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  return x < width && y < height;
}

__device__ __forceinline__ std::size_t at(int x, int y, int width) {
  return static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x);
}

__device__ __forceinline__ int clamp_to(int v, int n) { return min(max(v, 0), n - 1); }

__device__ __forceinline__ std::uint8_t to_byte(float v) {
  return static_cast<std::uint8_t>(min(max(__float2int_rn(v), 0), 255));
}

__global__ void rgb8_to_float_kernel(const std::uint8_t* __restrict__ rgb8, float* __restrict__ rgb,
                                     float* __restrict__ grey, int width, int height) {
  int x = 0, y = 0;
  if (!pixel(width, height, x, y)) return;
  const std::size_t i = at(x, y, width);
  const float r = rgb8[3 * i];
  const float g = rgb8[3 * i + 1];
  const float b = rgb8[3 * i + 2];
  rgb[3 * i] = r;
  rgb[3 * i + 1] = g;
  rgb[3 * i + 2] = b;
  grey[i] = 0.299F * r + 0.587F * g + 0.114F * b;
}

// dx, dy: the direction of the blur (1, 0: along rows; 0, 1: along columns).
__device__ __forceinline__ void blur_pixel(const float* __restrict__ in, float* __restrict__ out, int width, int height,
                                           int channels, const gaussian_taps& taps, int dx, int dy) {
  int x = 0, y = 0;
  if (!pixel(width, height, x, y)) return;
  for (int c = 0; c < channels; ++c) {
    float acc = 0.0F;
    for (int k = -taps.radius; k <= taps.radius; ++k) {
      const int xx = clamp_to(x + k * dx, width);
      const int yy = clamp_to(y + k * dy, height);
      acc += taps.weights[k + taps.radius] * in[at(xx, yy, width) * channels + c];
    }
    out[at(x, y, width) * channels + c] = acc;
  }
}

__global__ void blur_rows_kernel(const float* __restrict__ in, float* __restrict__ out, int width, int height,
                                 int channels, gaussian_taps taps) {
  blur_pixel(in, out, width, height, channels, taps, 1, 0);
}

__global__ void blur_columns_kernel(const float* __restrict__ in, float* __restrict__ out, int width, int height,
                                    int channels, gaussian_taps taps) {
  blur_pixel(in, out, width, height, channels, taps, 0, 1);
}

__global__ void sobel_x_kernel(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
  int x = 0, y = 0;
  if (!pixel(width, height, x, y)) return;
  const int xm = clamp_to(x - 1, width), xp = clamp_to(x + 1, width);
  const int ym = clamp_to(y - 1, height), yp = clamp_to(y + 1, height);
  const float right = in[at(xp, ym, width)] + 2.0F * in[at(xp, y, width)] + in[at(xp, yp, width)];
  const float left = in[at(xm, ym, width)] + 2.0F * in[at(xm, y, width)] + in[at(xm, yp, width)];
  out[at(x, y, width)] = right - left;
}

__global__ void sobel_y_kernel(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
  int x = 0, y = 0;
  if (!pixel(width, height, x, y)) return;
  const int xm = clamp_to(x - 1, width), xp = clamp_to(x + 1, width);
  const int ym = clamp_to(y - 1, height), yp = clamp_to(y + 1, height);
  const float down = in[at(xm, yp, width)] + 2.0F * in[at(x, yp, width)] + in[at(xp, yp, width)];
  const float up = in[at(xm, ym, width)] + 2.0F * in[at(x, ym, width)] + in[at(xp, ym, width)];
  out[at(x, y, width)] = down - up;
}

__global__ void magnitude_kernel(const float* __restrict__ gx, const float* __restrict__ gy, float* __restrict__ mag,
                                 int width, int height) {
  int x = 0, y = 0;
  if (!pixel(width, height, x, y)) return;
  const std::size_t i = at(x, y, width);
  mag[i] = sqrtf(gx[i] * gx[i] + gy[i] * gy[i]);
}

__global__ void threshold_kernel(const float* __restrict__ mag, std::uint8_t* __restrict__ edges, int width, int height,
                                 float threshold) {
  int x = 0, y = 0;
  if (!pixel(width, height, x, y)) return;
  const std::size_t i = at(x, y, width);
  edges[i] = mag[i] > threshold ? 255 : 0;
}

__global__ void unsharp_kernel(const float* __restrict__ rgb, const float* __restrict__ blurred,
                               std::uint8_t* __restrict__ out, int width, int height, float amount) {
  int x = 0, y = 0;
  if (!pixel(width, height, x, y)) return;
  const std::size_t i = 3 * at(x, y, width);
  for (int c = 0; c < 3; ++c) {
    const float v = rgb[i + c];
    out[i + c] = to_byte(v + amount * (v - blurred[i + c]));
  }
}

} // namespace

gaussian_taps make_taps(double sigma) {
  const std::vector<double> w = gaussian_kernel(sigma);
  gaussian_taps t;
  t.radius = static_cast<int>(w.size() / 2);
  for (std::size_t i = 0; i < w.size(); ++i) t.weights[i] = static_cast<float>(w[i]);
  return t;
}

const kernel_table& kernels() noexcept {
  static const kernel_table table{
      rgb8_to_float_kernel, blur_rows_kernel, blur_columns_kernel, sobel_x_kernel,
      sobel_y_kernel,       magnitude_kernel, threshold_kernel,    unsharp_kernel,
  };
  return table;
}

launch_config launch_shape(int width, int height) {
  if (width <= 0 || height <= 0)
    throw std::invalid_argument("launch_shape: image size must be positive, got " + std::to_string(width) + "x" +
                                std::to_string(height));
  const dim3 block(32, 8, 1);
  const dim3 grid((static_cast<unsigned>(width) + block.x - 1) / block.x,
                  (static_cast<unsigned>(height) + block.y - 1) / block.y, 1);
  return {grid, block, 0};
}

} // namespace conveyor::filter
