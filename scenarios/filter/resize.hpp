#pragma once
//! \file resize.hpp
//! A small bilinear resize on the host, to bring real photographs to the benchmark sizes.

#include "filter/image.hpp"

namespace conveyor::filter {

//! Resizes `src` (grey or RGB) to width x height by bilinear interpolation with pixel centres aligned
//! (source x = (x + 0.5) * src.width / width - 0.5, clamped to the image), the convention of cv::resize with
//! INTER_LINEAR; samples are rounded to nearest. No anti-aliasing: for strong downscaling prefer an area filter.
//! \throws std::invalid_argument when `src` is not valid() or a target side is not in [1, max_image_side].
[[nodiscard]] image resize_bilinear(const image& src, int width, int height);

} // namespace conveyor::filter
