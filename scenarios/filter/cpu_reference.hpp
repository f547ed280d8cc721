#pragma once
//! \file cpu_reference.hpp
//! A plain CPU implementation of the chain (see params.hpp) in double precision: the reference both for the
//! OpenCV comparison (host test) and for the GPU chain (GPU test, `conveyor filter --verify`). Links no OpenCV.

#include "filter/image.hpp"
#include "filter/params.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::filter {

//! Samples in double: `height` rows of `width` pixels of `channels` interleaved values (grey levels, [0, 255]
//! for images; any range for gradients).
struct plane {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<double> values; //!< width * height * channels, row-major, interleaved
};

//! Every stage of the chain for one image.
struct chain_reference {
  plane rgb;            //!< the input as doubles (3 channels)
  plane grey;           //!< 0.299 R + 0.587 G + 0.114 B
  plane blurred;        //!< Gaussian(grey), sigma = params.sigma
  plane gradient_x;     //!< Sobel x of blurred
  plane gradient_y;     //!< Sobel y of blurred
  plane magnitude;      //!< sqrt(gx^2 + gy^2)
  plane colour_blurred; //!< Gaussian(rgb), sigma = params.unsharp_sigma
  image edges;          //!< 255 where magnitude > threshold, else 0 (1 channel)
  image sharp;          //!< round(clamp(rgb + amount * (rgb - colour_blurred))) (3 channels)
};

//! RGB image (channels == 3) to doubles. \throws std::invalid_argument for another image.
[[nodiscard]] plane to_plane(const image& rgb);
//! Y = 0.299 R + 0.587 G + 0.114 B of a 3-channel plane. \throws std::invalid_argument for another plane.
[[nodiscard]] plane to_grey(const plane& rgb);
//! Correlates each row (blur_rows) or column (blur_columns) with `weights` (odd length), replicating the border.
//! \throws std::invalid_argument when weights has even length.
[[nodiscard]] plane blur_rows(const plane& in, const std::vector<double>& weights);
[[nodiscard]] plane blur_columns(const plane& in, const std::vector<double>& weights);
//! Sobel 3x3 derivative in x ([-1 0 1] across, [1 2 1] down) or y (transposed) of a 1-channel plane, border
//! replicated, as cv::Sobel(src, dst, CV_64F, 1, 0 (or 0, 1), 3, 1, 0, BORDER_REPLICATE).
[[nodiscard]] plane sobel_x(const plane& in);
[[nodiscard]] plane sobel_y(const plane& in);
//! sqrt(gx^2 + gy^2) per sample. \throws std::invalid_argument when the shapes differ.
[[nodiscard]] plane magnitude(const plane& gx, const plane& gy);
//! 255 where value > threshold, else 0, as an 8-bit image.
[[nodiscard]] image threshold(const plane& in, double threshold);
//! round-to-nearest(clamp(x + amount * (x - blurred), 0, 255)) as an 8-bit image. \throws on shape mismatch.
[[nodiscard]] image unsharp(const plane& in, const plane& blurred, double amount);
//! A plane rounded to nearest and clamped to [0, 255] (saturate_cast<uchar>).
[[nodiscard]] image to_image(const plane& in);

//! Runs the whole chain on an RGB image. \throws std::invalid_argument for bad parameters or a non-RGB image.
[[nodiscard]] chain_reference run_reference(const image& rgb, const filter_params& p);

//! Largest |a[i] - b[i]| over two equally long sequences and the first index where it occurs (0, 0 when empty).
//! \throws std::invalid_argument when the lengths differ.
struct max_difference {
  double value = 0.0;
  std::size_t index = 0;
};
[[nodiscard]] max_difference max_abs_difference(const std::vector<double>& a, const std::vector<double>& b);
[[nodiscard]] max_difference max_abs_difference(const std::vector<float>& a, const std::vector<double>& b);
[[nodiscard]] max_difference max_abs_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b);

//! How 8-bit chain outputs compare with the reference.
struct output_check {
  int sharp_max_difference = 0;    //!< largest |sharp - reference sharp|, grey levels
  std::size_t edge_flips_near = 0; //!< edge pixels that differ where |reference magnitude - threshold| <= margin
  std::size_t edge_flips_far = 0;  //!< edge pixels that differ elsewhere (must be 0)
  std::size_t pixels = 0;          //!< pixels compared
  //! True when sharp differs by at most 1 grey level and no edge differs away from the threshold.
  [[nodiscard]] bool ok() const noexcept { return sharp_max_difference <= 1 && edge_flips_far == 0; }
  //! One readable line.
  [[nodiscard]] std::string summary() const;
};
//! Compares edges and sharpened outputs with the reference. An edge may flip only where the reference magnitude
//! lies within `margin` of the threshold (there the rounding of the computation decides).
//! \throws std::invalid_argument when the shapes differ from the reference.
[[nodiscard]] output_check check_outputs(const image& edges, const image& sharp, const chain_reference& ref,
                                         double threshold, double margin);

} // namespace conveyor::filter
