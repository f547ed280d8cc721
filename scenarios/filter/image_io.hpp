#pragma once
//! \file image_io.hpp
//! Reading PNG and JPEG files into RGB images, writing PNG files atomically (temp file + rename), and listing the
//! images of a folder. Every failure names the file and the reason.

#include "filter/image.hpp"

#include "common/file_output.hpp"

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::filter {

//! An image file could not be read or written. what() reads "FILE: REASON"; file() and reason() as
//! scenarios::file_error.
class image_error : public scenarios::file_error {
public:
  using scenarios::file_error::file_error;
};

//! Largest accepted width or height, in pixels; larger images are refused as unsupported.
inline constexpr int max_image_side = 32768;

//! Reads a PNG or JPEG file (recognised by its first bytes, not its name) as an 8-bit RGB image (channels == 3).
//! PNG: palette and grey are expanded to RGB, 16-bit samples keep their high byte, alpha is dropped, gamma and
//! colour profiles are ignored (as cv::imread does). JPEG: baseline or progressive, grey or YCbCr, decoded by
//! libjpeg with its defaults (islow DCT, fancy upsampling); any libjpeg warning (corrupt or truncated data) is an
//! error.
//! \throws image_error when the file cannot be opened, is empty, is neither PNG nor JPEG ("unsupported format"),
//!         is truncated or corrupt, uses an unsupported colour space, or is larger than max_image_side.
[[nodiscard]] image read_image(const std::filesystem::path& file);

//! Writes `img` (grey or RGB) as a PNG file. The data go to a temporary file in the same folder which is renamed
//! over `file` only when complete, so `file` is never left half-written and a failure leaves no temporary file.
//! \throws image_error when `img` is not valid() or the file cannot be written (folder missing, disk full, ...).
void write_png(const std::filesystem::path& file, const image& img);

//! Writes `content` to `file` atomically, as write_png does (temporary file in the same folder, then rename).
//! \throws image_error when the file cannot be written.
void write_file_atomically(const std::filesystem::path& file, std::string_view content);

//! The image files named by `file_or_folder`: the file itself, or the files of the folder (not recursive) whose
//! extension is .png, .jpg or .jpeg (any case), sorted by name.
//! \throws image_error when the path does not exist or the folder holds no such file.
[[nodiscard]] std::vector<std::filesystem::path> list_images(const std::filesystem::path& file_or_folder);

namespace detail {
//! Decoders behind read_image, for an open file positioned at its start; `name` is used only in messages.
//! \throws image_error as read_image.
[[nodiscard]] image decode_png(std::FILE* fp, const std::filesystem::path& name);
[[nodiscard]] image decode_jpeg(std::FILE* fp, const std::filesystem::path& name);
//! Takes ownership of `pixels` (width x height x 3 RGB bytes from malloc, as both decoders return them), copies
//! them into an image and frees them.
[[nodiscard]] image adopt_rgb(unsigned char* pixels, std::size_t width, std::size_t height);
} // namespace detail

} // namespace conveyor::filter
