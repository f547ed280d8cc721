#pragma once
//! \file kernels.hpp
//! The chain's CUDA kernels, exposed as typed function pointers (defined in kernels.cu) so that plain C++ code can
//! launch them (cudaLaunchKernel), add them to a graph (graph::kernel) and update their nodes
//! (graph_exec::set_kernel_args), with arguments checked against the kernel at compile time.
//!
//! Layout: images are row-major, `width` x `height` pixels, channels interleaved (RGB float: 3 floats per pixel,
//! in grey levels [0, 255]). Every kernel takes one thread per pixel on the grid of launch_shape(); threads outside
//! the image return at once. No kernel allocates, synchronises or reads host memory.

#include "filter/params.hpp"

#include <conveyor/define/kernel_args.hpp>

#include <cstdint>

namespace conveyor::filter {

//! A Gaussian kernel as a kernel argument (passed by value): weights[0 .. 2 * radius] for offsets -radius..radius.
struct gaussian_taps {
  int radius = 0;                                  //!< 1 .. max_gaussian_radius
  float weights[2 * max_gaussian_radius + 1] = {}; //!< normalised to sum 1 (in double, then rounded to float)
  friend bool operator==(const gaussian_taps&, const gaussian_taps&) = default;
};

//! gaussian_kernel(sigma) as floats. \throws std::invalid_argument as gaussian_radius.
[[nodiscard]] gaussian_taps make_taps(double sigma);

//! The kernels, as typed pointers to their host launch stubs.
struct kernel_table {
  //! rgb8 (3 bytes per pixel) -> rgb (3 floats) and grey = 0.299 R + 0.587 G + 0.114 B (1 float).
  void (*rgb8_to_float)(const std::uint8_t* rgb8, float* rgb, float* grey, int width, int height);
  //! out = in correlated with taps along each row (blur_rows) or column (blur_columns), border replicated;
  //! `channels` (1 or 3) interleaved values per pixel are blurred independently.
  void (*blur_rows)(const float* in, float* out, int width, int height, int channels, gaussian_taps taps);
  void (*blur_columns)(const float* in, float* out, int width, int height, int channels, gaussian_taps taps);
  //! Sobel 3x3 derivative in x (blur [1 2 1] down, [-1 0 1] across) or y of a grey plane, border replicated.
  void (*sobel_x)(const float* in, float* out, int width, int height);
  void (*sobel_y)(const float* in, float* out, int width, int height);
  //! mag = sqrt(gx^2 + gy^2).
  void (*magnitude)(const float* gx, const float* gy, float* mag, int width, int height);
  //! edges = mag > threshold ? 255 : 0 (one byte per pixel).
  void (*threshold)(const float* mag, std::uint8_t* edges, int width, int height, float threshold);
  //! out = round-to-nearest-even(clamp(rgb + amount * (rgb - blurred), 0, 255)), 3 bytes per pixel.
  void (*unsharp)(const float* rgb, const float* blurred, std::uint8_t* out, int width, int height, float amount);
};

//! The kernel table.
[[nodiscard]] const kernel_table& kernels() noexcept;

//! The launch shape of every kernel for a width x height image: 32 x 8 threads per block, enough blocks to cover
//! the image. \throws std::invalid_argument for a non-positive size.
[[nodiscard]] launch_config launch_shape(int width, int height);

} // namespace conveyor::filter
