//! \file image_io.cpp
//! read_image (format detection, dispatch to the PNG and JPEG decoders), writing (through scenarios/common), folder
//! listing.

#include "filter/image_io.hpp"

#include <fmt/format.h>
#include <png.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace conveyor::filter {

namespace {

using scenarios::errno_text;
using scenarios::file_ptr;

std::string hex_bytes(const unsigned char* bytes, std::size_t n) {
  std::string out;
  char buf[4];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", bytes[i]);
    out += (i > 0 ? " " : "");
    out += buf;
  }
  return out;
}

// The shared writers throw scenarios::file_error; the filter's callers and tests expect image_error.
template <class F>
void as_image_error(F&& write) {
  try {
    write();
  } catch (const image_error&) {
    throw;
  } catch (const scenarios::file_error& e) {
    throw image_error(e.file(), e.reason());
  }
}

enum class image_format { png, jpeg };

// The format the first `got` bytes announce: a PNG signature, or a JPEG start-of-image marker (FF D8, which libjpeg
// then reads on: a file ending there is a truncated JPEG).
image_format detect_format(const std::filesystem::path& file, const unsigned char* magic, std::size_t got) {
  if (got >= 8 && png_sig_cmp(magic, 0, 8) == 0) return image_format::png;
  if (got >= 2 && magic[0] == 0xFF && magic[1] == 0xD8) return image_format::jpeg;
  if (got < 8 && png_sig_cmp(magic, 0, got) == 0)
    throw image_error(file, "truncated PNG data (file ends inside the signature)");
  if (got == 1 && magic[0] == 0xFF)
    throw image_error(file, "truncated JPEG data (file ends inside the start-of-image marker FF D8)");
  throw image_error(file, "unsupported format: neither PNG nor JPEG (first bytes " + hex_bytes(magic, got) + ")");
}

image decode(image_format format, std::FILE* fp, const std::filesystem::path& file, std::uintmax_t bytes) {
  return format == image_format::png ? detail::decode_png(fp, file, bytes) : detail::decode_jpeg(fp, file, bytes);
}

} // namespace

image read_image(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw image_error(file, "is a folder, not an image file");
  file_ptr fp(std::fopen(file.c_str(), "rb"));
  if (!fp) throw image_error(file, "cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(::fileno(fp.get()), &st) != 0) throw image_error(file, "cannot read: " + errno_text(errno));
  unsigned char magic[8] = {};
  const std::size_t got = std::fread(magic, 1, sizeof magic, fp.get());
  if (got == 0) {
    if (std::ferror(fp.get()) != 0) throw image_error(file, "cannot read: " + errno_text(errno));
    throw image_error(file, "empty file");
  }
  const image_format format = detect_format(file, magic, got);
  if (S_ISREG(st.st_mode)) {
    std::rewind(fp.get());
    return decode(format, fp.get(), file, static_cast<std::uintmax_t>(st.st_size));
  }
  // A pipe or a device cannot be rewound, and its size is unknown: read it into memory, within a limit, and decode
  // from there.
  std::vector<unsigned char> data(magic, magic + got);
  unsigned char chunk[1 << 16];
  while (std::size_t n = std::fread(chunk, 1, sizeof chunk, fp.get())) {
    if (data.size() + n > max_image_stream_bytes)
      throw image_error(file, fmt::format("not a regular file, and longer than {} bytes (max_image_stream_bytes in "
                                          "scenarios/filter/image_io.hpp; raise it there and rebuild): reading "
                                          "stopped there",
                                          max_image_stream_bytes));
    data.insert(data.end(), chunk, chunk + n);
  }
  if (std::ferror(fp.get()) != 0) throw image_error(file, "cannot read: " + errno_text(errno));
  file_ptr memory(::fmemopen(data.data(), data.size(), "rb"));
  if (!memory) throw image_error(file, "cannot decode from memory: " + errno_text(errno));
  return decode(format, memory.get(), file, data.size());
}

void write_png(const std::filesystem::path& file, const image& img) {
  if (!img.valid())
    throw image_error(file, "invalid image to write: " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                                " with " + std::to_string(img.channels) + " channels and " +
                                std::to_string(img.pixels.size()) + " bytes");
  as_image_error([&] { scenarios::write_png(file, img.width, img.height, img.channels, img.pixels); });
}

void write_file_atomically(const std::filesystem::path& file, std::string_view content) {
  as_image_error([&] { scenarios::write_file_atomically(file, content); });
}

std::vector<std::filesystem::path> list_images(const std::filesystem::path& file_or_folder) {
  std::error_code ec;
  const auto status = std::filesystem::status(file_or_folder, ec);
  if (ec || !std::filesystem::exists(status)) throw image_error(file_or_folder, "no such file or folder");
  if (!std::filesystem::is_directory(status)) return {file_or_folder};
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(file_or_folder, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext == ".png" || ext == ".jpg" || ext == ".jpeg") files.push_back(entry.path());
  }
  if (ec) throw image_error(file_or_folder, "cannot list the folder: " + ec.message());
  if (files.empty()) throw image_error(file_or_folder, "the folder holds no .png, .jpg or .jpeg file");
  std::sort(files.begin(), files.end());
  return files;
}

namespace detail {

image rgb_image_for(const std::filesystem::path& name, std::size_t width, std::size_t height) {
  image img;
  img.width = static_cast<int>(width);
  img.height = static_cast<int>(height);
  img.channels = 3;
  try {
    img.pixels.resize(img.samples());
  } catch (const std::bad_alloc&) {
    throw image_error(name, fmt::format("not enough memory for the {}x{} pixels ({} bytes as 8-bit RGB)", width, height,
                                        img.samples()));
  }
  return img;
}

} // namespace detail

} // namespace conveyor::filter
