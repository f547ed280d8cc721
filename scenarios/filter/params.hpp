#pragma once
//! \file params.hpp
//! The chain's parameters and the Gaussian kernel shared by the GPU chain, the CPU reference and the OpenCV test.
//!
//! The chain (all modes, and the CPU reference): RGB 8-bit -> float RGB in grey levels [0, 255] and grey
//! Y = 0.299 R + 0.587 G + 0.114 B; Gaussian blur of Y (rows, then columns); Sobel 3x3 gradients gx, gy of the
//! blurred Y; magnitude sqrt(gx^2 + gy^2); edges = 255 where magnitude > threshold, else 0; and, on the colour
//! image, unsharp mask sharp = RGB + amount * (RGB - Gaussian(RGB)), rounded to nearest and clamped to [0, 255].
//! Every neighbourhood replicates the border pixel (OpenCV's BORDER_REPLICATE).

#include <vector>

namespace conveyor::filter {

//! Largest Gaussian radius (taps = 2 * radius + 1) the GPU kernels accept.
inline constexpr int max_gaussian_radius = 32;
//! Smallest Gaussian sigma accepted, pixels: narrower kernels are already the identity (weights 0, 1, 0), and below
//! about 1e-154 sigma squared underflows to 0 and the weights would be NaN.
inline constexpr double min_gaussian_sigma = 0.01;
//! Largest Gaussian sigma accepted, pixels: ceil(3 sigma) <= max_gaussian_radius.
inline constexpr double max_gaussian_sigma = max_gaussian_radius / 3.0;

//! Parameters of the chain. Units: sigma in pixels; threshold in grey levels of the Sobel magnitude (the Sobel of
//! an image in [0, 255], so a full black-to-white step gives 4 * 255 = 1020).
struct filter_params {
  double sigma = 1.5;          //!< Gaussian blur of the grey image before Sobel (> 0, radius ceil(3 sigma) <= 32)
  double threshold = 100.0;    //!< edge threshold on the gradient magnitude (>= 0)
  double unsharp_sigma = 2.0;  //!< Gaussian blur of the colour image for the unsharp mask (as sigma)
  double unsharp_amount = 1.0; //!< strength of the unsharp mask (>= 0; 0 returns the input)
  friend bool operator==(const filter_params&, const filter_params&) = default;
};

//! Gaussian radius for `sigma`: ceil(3 sigma), at least 1.
//! \throws std::invalid_argument when sigma is below min_gaussian_sigma or the radius exceeds max_gaussian_radius.
[[nodiscard]] int gaussian_radius(double sigma);

//! The 2 * gaussian_radius(sigma) + 1 weights exp(-x^2 / (2 sigma^2)), x = -radius..radius, divided by their sum
//! (computed in double exactly as cv::getGaussianKernel(2 r + 1, sigma, CV_64F) does).
//! \throws std::invalid_argument as gaussian_radius.
[[nodiscard]] std::vector<double> gaussian_kernel(double sigma);

//! Checks every field's range: both sigmas as gaussian_radius; threshold and amount finite, >= 0 and finite as
//! the floats the GPU chain takes.
//! \throws std::invalid_argument naming the first field out of range and its valid range.
void validate(const filter_params& p);

} // namespace conveyor::filter
