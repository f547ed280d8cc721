//! \file image_io.cpp
//! read_image (format detection, dispatch to the PNG and JPEG decoders), writing (through scenarios/common), folder
//! listing.

#include "filter/image_io.hpp"

#include <png.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

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

} // namespace

image read_image(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw image_error(file, "is a folder, not an image file");
  file_ptr fp(std::fopen(file.c_str(), "rb"));
  if (!fp) throw image_error(file, "cannot open: " + errno_text(errno));
  unsigned char magic[8] = {};
  const std::size_t got = std::fread(magic, 1, sizeof magic, fp.get());
  if (got == 0) {
    if (std::ferror(fp.get()) != 0) throw image_error(file, "cannot read: " + errno_text(errno));
    throw image_error(file, "empty file");
  }
  std::rewind(fp.get());
  if (got >= 8 && png_sig_cmp(magic, 0, 8) == 0) return detail::decode_png(fp.get(), file);
  if (got >= 3 && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF) return detail::decode_jpeg(fp.get(), file);
  if (got < 8 && png_sig_cmp(magic, 0, got) == 0) throw image_error(file, "truncated PNG data (file ends inside the signature)");
  throw image_error(file, "unsupported format: neither PNG nor JPEG (first bytes " + hex_bytes(magic, got) + ")");
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

image adopt_rgb(unsigned char* pixels, std::size_t width, std::size_t height) {
  const std::unique_ptr<unsigned char, decltype(&std::free)> owned(pixels, &std::free);
  image img;
  img.width = static_cast<int>(width);
  img.height = static_cast<int>(height);
  img.channels = 3;
  img.pixels.assign(owned.get(), owned.get() + img.samples());
  return img;
}

} // namespace detail

} // namespace conveyor::filter
