//! \file idx_reader.cpp
//! IDX reading through zlib (gzopen / gzread).

#include "train/idx_reader.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <system_error>

namespace conveyor::train {

idx_error::idx_error(const std::filesystem::path& path, const std::string& problem)
    : std::runtime_error(fmt::format("IDX file '{}': {}", path.string(), problem)), path_(path) {}

namespace {

//! Owns a gzFile; closes it on destruction.
class gz_file {
public:
  explicit gz_file(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw idx_error(path, "cannot open: file does not exist");
    if (!std::filesystem::is_regular_file(path, ec)) throw idx_error(path, "cannot open: not a regular file");
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) throw idx_error(path, "cannot open: gzopen failed (permission denied or out of memory)");
    gzbuffer(file_, 1U << 17);
  }
  gz_file(const gz_file&) = delete;
  gz_file& operator=(const gz_file&) = delete;
  ~gz_file() { gzclose(file_); }

  //! Reads up to `n` bytes; returns how many were read (fewer only at the end of the data).
  //! \throws idx_error when zlib reports corrupt data, or a cut-off gzip stream before `n` bytes were read.
  std::size_t read_some(std::uint8_t* out, std::size_t n, const char* what) {
    std::size_t got = 0;
    while (got < n) {
      const auto chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, INT_MAX / 2));
      const int r = gzread(file_, out + got, chunk);
      if (r < 0) throw_zlib_error(got, n, what);
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    // zlib decompresses ahead, so an error may be flagged while the bytes asked for are all there; it then
    // surfaces at a later read. A short read with Z_BUF_ERROR means the gzip stream itself was cut off.
    if (got < n) {
      int errnum = Z_OK;
      (void)gzerror(file_, &errnum);
      if (errnum != Z_OK) throw_zlib_error(got, n, what);
    }
    return got;
  }

  //! Reads exactly `n` bytes of `what`.
  //! \throws idx_error ("truncated") when the data ends early, or when zlib reports an error.
  void read_exact(std::uint8_t* out, std::size_t n, const char* what) {
    const std::size_t got = read_some(out, n, what);
    if (got != n)
      throw idx_error(path_, fmt::format("truncated: expected {} bytes of {}, got only {}", n, what, got));
  }

  //! Checks that the data ends here. Reading past the end also makes zlib verify the gzip CRC and length.
  //! \throws idx_error on trailing bytes or a bad gzip trailer.
  void expect_end() {
    std::uint8_t extra = 0;
    if (read_some(&extra, 1, "end of the data") != 0)
      throw idx_error(path_, "trailing data after the elements the header declares");
  }

private:
  [[noreturn]] void throw_zlib_error(std::size_t got, std::size_t n, const char* what) {
    int errnum = Z_OK;
    const char* msg = gzerror(file_, &errnum);
    std::string text = (msg != nullptr && *msg != '\0') ? msg : "unknown zlib error";
    // gzerror prefixes the path, which idx_error already gives.
    if (const std::string prefix = path_.string() + ": "; text.starts_with(prefix)) text.erase(0, prefix.size());
    if (errnum == Z_BUF_ERROR)
      throw idx_error(path_, fmt::format("truncated gzip stream ({}): got only {} of the {} bytes of {}", text, got, n,
                                         what));
    if (errnum == Z_ERRNO) throw idx_error(path_, fmt::format("read error ({}) while reading the {}", text, what));
    throw idx_error(path_, fmt::format("corrupt gzip data: {} (noticed while reading the {})", text, what));
  }

  std::filesystem::path path_;
  gzFile file_ = nullptr;
};

std::uint32_t big_endian_u32(const std::uint8_t* b) noexcept {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
}

const char* describe_magic(std::uint32_t magic) noexcept {
  if (magic == idx_images_magic) return "an IDX image file";
  if (magic == idx_labels_magic) return "an IDX label file";
  return "not an unsigned-byte IDX file of the expected shape";
}

//! Reads and checks the magic and the dimension sizes; returns the sizes.
std::vector<std::size_t> read_header(gz_file& f, const std::filesystem::path& path, std::uint32_t expected_magic,
                                     const char* expected_kind) {
  std::array<std::uint8_t, 4> m{};
  f.read_exact(m.data(), m.size(), "magic number");
  const std::uint32_t magic = big_endian_u32(m.data());
  if (magic != expected_magic) {
    std::string why;
    if (m[0] != 0 || m[1] != 0)
      why = "not an IDX file";
    else if (m[2] != 0x08)
      why = fmt::format("element type 0x{:02x} is not unsigned byte (0x08)", m[2]);
    else
      why = fmt::format("{}; {} dimension(s) where {} are expected", describe_magic(magic), m[3],
                        expected_magic & 0xFFU);
    throw idx_error(path, fmt::format("wrong magic 0x{:08x}, expected 0x{:08x} ({}): {}", magic, expected_magic,
                                      expected_kind, why));
  }
  const std::size_t dims = expected_magic & 0xFFU;
  std::vector<std::size_t> sizes(dims);
  constexpr std::size_t max_bytes = std::size_t{1} << 30; // 1 GiB: far above any real IDX data set
  std::size_t total = 1;
  for (std::size_t d = 0; d < dims; ++d) {
    std::array<std::uint8_t, 4> b{};
    f.read_exact(b.data(), b.size(), "dimension sizes");
    sizes[d] = big_endian_u32(b.data());
    if (sizes[d] == 0) throw idx_error(path, fmt::format("dimension {} of the header is 0", d));
    total *= sizes[d];
    if (total > max_bytes)
      throw idx_error(path, fmt::format("implausible dimensions: more than {} bytes of data declared", max_bytes));
  }
  return sizes;
}

} // namespace

idx_images read_idx_images(const std::filesystem::path& path) {
  gz_file f(path);
  const auto sizes = read_header(f, path, idx_images_magic, "images");
  idx_images out;
  out.count = sizes[0];
  out.rows = sizes[1];
  out.cols = sizes[2];
  out.pixels.resize(out.count * out.rows * out.cols);
  f.read_exact(out.pixels.data(), out.pixels.size(), "pixel data");
  f.expect_end();
  return out;
}

idx_labels read_idx_labels(const std::filesystem::path& path, int num_classes) {
  if (num_classes < 1 || num_classes > 256)
    throw std::invalid_argument(fmt::format("read_idx_labels: num_classes {} outside [1, 256]", num_classes));
  gz_file f(path);
  const auto sizes = read_header(f, path, idx_labels_magic, "labels");
  idx_labels out;
  out.values.resize(sizes[0]);
  f.read_exact(out.values.data(), out.values.size(), "label data");
  f.expect_end();
  for (std::size_t i = 0; i < out.values.size(); ++i)
    if (out.values[i] >= num_classes)
      throw idx_error(path, fmt::format("label {} at index {} is out of range [0, {})", out.values[i], i,
                                        num_classes));
  return out;
}

} // namespace conveyor::train
