//! \file idx_reader.cpp
//! IDX reading through zlib (gzopen / gzread).

#include "train/idx_reader.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <fstream>
#include <optional>
#include <system_error>

namespace conveyor::train {

idx_error::idx_error(const std::filesystem::path& path, const std::string& problem) :
    std::runtime_error(fmt::format("IDX file '{}': {}", path.string(), problem)),
    path_(path) {}

namespace {

//! Owns a gzFile; closes it on destruction.
class gz_file {
public:
  explicit gz_file(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw idx_error(path, "cannot open: file does not exist");
    if (!std::filesystem::is_regular_file(path, ec))
      throw idx_error(path, "cannot open: not a regular file (a folder, device or pipe); give the .gz file itself");
    bytes_ = std::filesystem::file_size(path, ec);
    if (ec) throw idx_error(path, fmt::format("cannot open: {}", ec.message()));
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) throw idx_error(path, "cannot open: gzopen failed (permission denied or out of memory)");
    gzbuffer(file_, 1U << 17);
    direct_ = gzdirect(file_) != 0;
    if (!direct_ && bytes_ >= 18) { // a gzip trailer ends with ISIZE: the data's length mod 2^32, little-endian
      std::ifstream raw(path, std::ios::binary);
      unsigned char b[4] = {};
      if (raw.seekg(-4, std::ios::end) && raw.read(reinterpret_cast<char*>(b), 4))
        trailer_size_ = std::uint32_t{b[0]} | (std::uint32_t{b[1]} << 8) | (std::uint32_t{b[2]} << 16) |
                        (std::uint32_t{b[3]} << 24);
    }
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
    if (got != n) throw idx_error(path_, fmt::format("truncated: expected {} bytes of {}, got only {}", n, what, got));
  }

  //! The file's size in bytes, as stored (compressed or not).
  [[nodiscard]] std::uintmax_t file_bytes() const noexcept { return bytes_; }
  //! True when the file is not gzip (zlib reads it as it is).
  [[nodiscard]] bool uncompressed() const noexcept { return direct_; }
  //! The gzip trailer's ISIZE (uncompressed length mod 2^32 of the last member), when the file is gzip.
  [[nodiscard]] std::optional<std::uint32_t> trailer_size() const noexcept { return trailer_size_; }

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
      throw idx_error(path_,
                      fmt::format("truncated gzip stream ({}): got only {} of the {} bytes of {}", text, got, n, what));
    if (errnum == Z_ERRNO) throw idx_error(path_, fmt::format("read error ({}) while reading the {}", text, what));
    throw idx_error(path_, fmt::format("corrupt gzip data: {} (noticed while reading the {})", text, what));
  }

  std::filesystem::path path_;
  gzFile file_ = nullptr;
  std::uintmax_t bytes_ = 0;
  bool direct_ = false;
  std::optional<std::uint32_t> trailer_size_;
};

//! deflate's largest expansion (zlib FAQ: "the limit on compression ratio is 1032:1").
constexpr std::uintmax_t deflate_max_ratio = 1032;

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
    if (m[0] != 0 || m[1] != 0) why = "not an IDX file";
    else if (m[2] != 0x08) why = fmt::format("element type 0x{:02x} is not unsigned byte (0x08)", m[2]);
    else
      why =
          fmt::format("{}; {} dimension(s) where {} are expected", describe_magic(magic), m[3], expected_magic & 0xFFU);
    throw idx_error(path, fmt::format("wrong magic 0x{:08x}, expected 0x{:08x} ({}): {}", magic, expected_magic,
                                      expected_kind, why));
  }
  const std::size_t dims = expected_magic & 0xFFU;
  std::vector<std::size_t> sizes(dims);
  std::size_t total = 1;
  for (std::size_t d = 0; d < dims; ++d) {
    std::array<std::uint8_t, 4> b{};
    f.read_exact(b.data(), b.size(), "dimension sizes");
    sizes[d] = big_endian_u32(b.data());
    if (sizes[d] == 0) throw idx_error(path, fmt::format("dimension {} of the header is 0", d));
    total *= sizes[d];
    if (total > idx_max_data_bytes)
      throw idx_error(path, fmt::format("implausible dimensions: more than {} bytes of data declared (the limit "
                                        "idx_max_data_bytes in scenarios/train/idx_reader.hpp; raise it there and "
                                        "rebuild for larger data)",
                                        idx_max_data_bytes));
  }
  return sizes;
}

// "60000 x 28 x 28 = 47040000" (several dimensions) or "60000" (one).
std::string describe_sizes(const std::vector<std::size_t>& sizes) {
  std::string out;
  std::size_t n = 1;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    out += fmt::format("{}{}", d > 0 ? " x " : "", sizes[d]);
    n *= sizes[d];
  }
  return sizes.size() > 1 ? fmt::format("{} = {}", out, n) : out;
}

//! Reads the `n` element bytes that the header (`header_bytes` long, declaring `sizes`) promises, holding memory in
//! proportion to what the file can hold or actually holds.
//! \throws idx_error when the file cannot hold `n` bytes (before allocating), is truncated or corrupt.
std::vector<std::uint8_t> read_elements(gz_file& f, const std::filesystem::path& path, std::size_t header_bytes,
                                        const std::vector<std::size_t>& sizes, const char* what) {
  std::size_t n = 1;
  for (const std::size_t s : sizes) n *= s;
  const std::uintmax_t file = f.file_bytes();
  if (f.uncompressed()) {
    const std::uintmax_t present = file > header_bytes ? file - header_bytes : 0;
    if (present < n)
      throw idx_error(path, fmt::format("truncated: the header declares {} bytes of {}, but the file holds only {} "
                                        "after the header",
                                        describe_sizes(sizes), what, present));
  } else if (header_bytes + n > deflate_max_ratio * file) {
    throw idx_error(path,
                    fmt::format("truncated or corrupt: the header declares {} bytes of {}, more than this {}-byte "
                                "gzip file can hold (deflate expands at most {}-fold)",
                                describe_sizes(sizes), what, file, deflate_max_ratio));
  }
  std::vector<std::uint8_t> out;
  const auto expected_isize = static_cast<std::uint32_t>(header_bytes + n); // mod 2^32, as gzip stores it
  if (f.uncompressed() || f.trailer_size() == expected_isize) {
    out.resize(n); // the file's size confirms the header: one allocation of the final size
    f.read_exact(out.data(), n, what);
    return out;
  }
  // The gzip trailer disagrees (truncated or multi-member file): grow with the data actually decompressed.
  constexpr std::size_t first_chunk = std::size_t{1} << 20;
  std::size_t have = 0;
  while (have < n) {
    const std::size_t next = std::min(n, std::max(first_chunk, 2 * have));
    out.reserve(next);
    out.resize(next);
    const std::size_t got = f.read_some(out.data() + have, next - have, what);
    have += got;
    if (have < next)
      throw idx_error(path, fmt::format("truncated: expected {} bytes of {}, got only {}", n, what, have));
  }
  return out;
}

} // namespace

idx_images read_idx_images(const std::filesystem::path& path) {
  gz_file f(path);
  const auto sizes = read_header(f, path, idx_images_magic, "images");
  idx_images out;
  out.count = sizes[0];
  out.rows = sizes[1];
  out.cols = sizes[2];
  out.pixels = read_elements(f, path, 16, sizes, "pixel data");
  f.expect_end();
  return out;
}

idx_labels read_idx_labels(const std::filesystem::path& path, int num_classes) {
  if (num_classes < 1 || num_classes > 256)
    throw std::invalid_argument(fmt::format("read_idx_labels: num_classes {} outside [1, 256]", num_classes));
  gz_file f(path);
  const auto sizes = read_header(f, path, idx_labels_magic, "labels");
  idx_labels out;
  out.values = read_elements(f, path, 8, sizes, "label data");
  f.expect_end();
  for (std::size_t i = 0; i < out.values.size(); ++i)
    if (out.values[i] >= num_classes)
      throw idx_error(path, fmt::format("label {} at index {} is out of range [0, {})", out.values[i], i, num_classes));
  return out;
}

} // namespace conveyor::train
