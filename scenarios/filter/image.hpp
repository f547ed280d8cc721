#pragma once
//! \file image.hpp
//! conveyor::filter::image: an 8-bit image in host memory (grey or interleaved RGB).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conveyor::filter {

//! An 8-bit image in host memory: `height` rows of `width` pixels, each `channels` bytes (1: grey, 3: R, G, B),
//! rows packed without padding. pixels.size() == width * height * channels.
struct image {
  int width = 0;                    //!< pixels per row
  int height = 0;                   //!< rows
  int channels = 0;                 //!< 1 (grey) or 3 (RGB, interleaved)
  std::vector<std::uint8_t> pixels; //!< row-major samples

  //! Number of samples, width * height * channels.
  [[nodiscard]] std::size_t samples() const noexcept {
    return static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * static_cast<std::size_t>(channels);
  }
  //! True when the fields are consistent: positive sizes, 1 or 3 channels, pixels.size() == samples().
  [[nodiscard]] bool valid() const noexcept {
    return width > 0 && height > 0 && (channels == 1 || channels == 3) && pixels.size() == samples();
  }
  friend bool operator==(const image&, const image&) = default;
};

} // namespace conveyor::filter
