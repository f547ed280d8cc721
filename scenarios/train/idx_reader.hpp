#pragma once
//! \file idx_reader.hpp
//! Reader for gzip-compressed IDX files (the MNIST / Fashion-MNIST format), host only.
//!
//! IDX layout: a big-endian magic `0x0000TTDD` (TT = element type, 0x08 for unsigned byte; DD = number of
//! dimensions), DD big-endian uint32 sizes, then the elements in row-major order. Files are read through zlib's
//! gzopen/gzread, which also accepts an uncompressed file transparently.
//!
//! Memory follows the file, not the header: a header declaring more data than the file can hold (an uncompressed
//! file's exact size; a gzip file's size times 1032, deflate's largest expansion) is refused before anything is
//! allocated, and the elements are read into a buffer that grows with the data actually decompressed unless the
//! gzip trailer confirms the size.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::train {

//! A malformed or unreadable IDX file. `what()` reads `IDX file '<path>': <problem>`.
class idx_error : public std::runtime_error {
public:
  //! \param path    the file concerned
  //! \param problem what is wrong with it, e.g. "truncated: expected 784 bytes of pixel data, got 100"
  idx_error(const std::filesystem::path& path, const std::string& problem);
  //! The file concerned.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

private:
  std::filesystem::path path_;
};

//! Magic number of an IDX file of unsigned-byte images (3 dimensions: count, rows, columns).
inline constexpr std::uint32_t idx_images_magic = 0x00000803;
//! Magic number of an IDX file of unsigned-byte labels (1 dimension: count).
inline constexpr std::uint32_t idx_labels_magic = 0x00000801;

//! The most element bytes an IDX header may declare (1 GiB, far above any real IDX data set: Fashion-MNIST's
//! training images are 47 MB). A larger header is refused naming this limit; raise it here and rebuild.
inline constexpr std::size_t idx_max_data_bytes = std::size_t{1} << 30;

//! Grey-scale images, `count` of them, each `rows` x `cols` bytes (0 = background, 255 = ink), stored
//! image after image, row-major inside an image.
struct idx_images {
  std::size_t count = 0;            //!< number of images
  std::size_t rows = 0;             //!< pixel rows per image
  std::size_t cols = 0;             //!< pixel columns per image
  std::vector<std::uint8_t> pixels; //!< count * rows * cols bytes

  //! Pixels per image (rows * cols).
  [[nodiscard]] std::size_t pixels_per_image() const noexcept { return rows * cols; }
  //! Pointer to the first pixel of image `i` (no bounds check; `i < count`).
  [[nodiscard]] const std::uint8_t* image(std::size_t i) const noexcept {
    return pixels.data() + i * pixels_per_image();
  }
};

//! Class labels, one byte each.
struct idx_labels {
  std::vector<std::uint8_t> values; //!< one label per sample

  //! Number of labels.
  [[nodiscard]] std::size_t count() const noexcept { return values.size(); }
};

//! Reads an IDX image file (magic 0x00000803: unsigned bytes, 3 dimensions), gzip-compressed or plain.
//! \param path the .gz file, e.g. ".../train-images-idx3-ubyte.gz"
//! \throws idx_error naming `path` when the file is missing, not a regular file (a device such as /dev/zero, a
//!         pipe) or unreadable, is not valid gzip (corrupt data, bad CRC), has the wrong magic (wrong element type,
//!         wrong dimension count, a label file given where images are expected), declares zero-size dimensions or
//!         more than idx_max_data_bytes, declares more data than the file can hold (said before reading it), holds
//!         fewer bytes than its header promises (truncated) or more (trailing data).
[[nodiscard]] idx_images read_idx_images(const std::filesystem::path& path);

//! Reads an IDX label file (magic 0x00000801: unsigned bytes, 1 dimension), gzip-compressed or plain, and checks
//! that every label is below `num_classes`.
//! \param path        the .gz file, e.g. ".../train-labels-idx1-ubyte.gz"
//! \param num_classes labels must lie in [0, num_classes); 10 for (Fashion-)MNIST
//! \throws idx_error naming `path` for the same problems as read_idx_images (an image file given where labels
//!         are expected included) and when a label is >= num_classes (the message gives its index and value);
//!         std::invalid_argument when num_classes is outside [1, 256].
[[nodiscard]] idx_labels read_idx_labels(const std::filesystem::path& path, int num_classes = 10);

} // namespace conveyor::train
