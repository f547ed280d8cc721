#pragma once
//! \file image.hpp
//! RGB images: the PNG writer (libpng) and the cavity picture (velocity magnitude with streamlines). Host-only.

#include "cavity/fields.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace conveyor::cavity {

//! An 8-bit RGB image, rows top to bottom, pixels left to right, 3 bytes each.
struct rgb_image {
  int width = 0;                    //!< pixels per row
  int height = 0;                   //!< rows
  std::vector<std::uint8_t> pixels; //!< width * height * 3 bytes

  //! Makes a black image of the given size.
  //! \throws std::invalid_argument when a dimension is below 1 or above 65535.
  rgb_image(int w, int h);
  //! An empty 0 x 0 image.
  rgb_image() = default;
};

//! Writes `image` as an 8-bit RGB PNG, atomically (scenarios::write_png: libpng's simplified write API).
//! \throws std::invalid_argument when the pixel count does not match width x height; scenarios::file_error (a
//!         std::runtime_error) naming the file and the reason when it cannot be written.
void write_png(const std::filesystem::path& file, const rgb_image& image);

//! The perceptually uniform "viridis" colour map at t in [0, 1] (clamped), as RGB bytes.
[[nodiscard]] std::array<std::uint8_t, 3> viridis(double t) noexcept;

//! Ghia et al.'s stream-function contour levels, psi / (U L): negative for the primary vortex, tiny positive ones
//! for the corner vortices.
[[nodiscard]] const std::vector<double>& streamline_levels();

//! The cavity as a picture: velocity magnitude |u| / U in viridis (0 dark blue, >= 1 yellow), lid at the top, with
//! streamlines (contours of the stream function at streamline_levels(): white for the primary vortex, black for the
//! corner vortices). Each cell covers ceil(min_size / n) pixels per side; fields are interpolated bilinearly.
//! \throws std::invalid_argument when lid_speed <= 0, the field is empty, or min_size < 1.
[[nodiscard]] rgb_image render_cavity(const flow_field& f, double lid_speed, int min_size = 512);

} // namespace conveyor::cavity
