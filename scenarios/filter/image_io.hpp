#pragma once
//! \file image_io.hpp
//! Reading PNG and JPEG files into RGB images, writing PNG files atomically (temp file + rename), and listing the
//! images of a folder. Every failure names the file and the reason.

#include "filter/image.hpp"

#include "common/file_output.hpp"

#include <cstddef>
#include <cstdint>
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

//! Largest accepted width or height, in pixels; larger images are refused as unsupported, naming this limit (raise
//! it here and rebuild). A 32768 x 32768 image takes 3 GiB as 8-bit RGB.
inline constexpr int max_image_side = 32768;

//! The most a file that is not a regular file (a pipe, a device) is read into memory before decoding, in bytes;
//! a longer one is refused naming this limit (raise it here and rebuild). Regular files are decoded in place.
inline constexpr std::size_t max_image_stream_bytes = std::size_t{256} << 20;

//! The most pixels a JPEG file may declare per byte of its size. A Huffman-coded scan spends at least one bit on
//! every 8x8 block of a component, and a block covers at most 32 x 32 pixels (4:1 subsampling), so no complete
//! file holds more; a header declaring more belongs to a truncated or corrupt file and is refused before the pixels
//! are allocated. (PNG data are bounded likewise by deflate's largest expansion, 1032-fold.)
inline constexpr std::uintmax_t jpeg_max_pixels_per_byte = 8192;

//! Reads a PNG or JPEG file (recognised by its first bytes, not its name) as an 8-bit RGB image (channels == 3).
//! PNG: palette and grey are expanded to RGB, 16-bit samples keep their high byte, alpha is dropped, gamma and
//! colour profiles are ignored (as cv::imread does). JPEG: baseline or progressive, grey or YCbCr, decoded by
//! libjpeg with its defaults (islow DCT, fancy upsampling); any libjpeg warning (corrupt or truncated data) is an
//! error. The pixels are decoded straight into the returned image (held once), and only after the header has been
//! checked against the file's size: a 100-byte file declaring 32768 x 32768 pixels is refused before allocating.
//! \throws image_error when the file cannot be opened, is empty, is neither PNG nor JPEG ("unsupported format";
//!         a file starting like a PNG or JPEG signature but ending in it is "truncated"), is truncated or corrupt
//!         (also when its header declares more pixels than its size can hold), uses an unsupported colour space,
//!         is larger than max_image_side, is not a regular file and longer than max_image_stream_bytes, or when
//!         memory for its pixels cannot be had.
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
//! Decoders behind read_image, for an open file positioned at its start that holds `file_bytes` bytes (bounding
//! what its header may declare); `name` is used only in messages.
//! \throws image_error as read_image.
[[nodiscard]] image decode_png(std::FILE* fp, const std::filesystem::path& name, std::uintmax_t file_bytes);
//! \copydoc decode_png
[[nodiscard]] image decode_jpeg(std::FILE* fp, const std::filesystem::path& name, std::uintmax_t file_bytes);
//! An RGB image of `width` x `height` for a decoder to fill, its pixels allocated once.
//! \throws image_error naming `name` and the size when the memory cannot be had.
[[nodiscard]] image rgb_image_for(const std::filesystem::path& name, std::size_t width, std::size_t height);
} // namespace detail

} // namespace conveyor::filter
