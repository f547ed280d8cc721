//! \file image_io.cpp
//! read_image (format detection, dispatch to the PNG and JPEG decoders), atomic writes, folder listing.

#include "filter/image_io.hpp"

#include <png.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <system_error>

namespace conveyor::filter {

image_error::image_error(const std::filesystem::path& file, std::string reason)
    : std::runtime_error(file.string() + ": " + reason), file_(file), reason_(std::move(reason)) {}

namespace {

struct file_closer {
  void operator()(std::FILE* f) const noexcept { (void)std::fclose(f); }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

std::string errno_text(int code) { return std::system_category().message(code); }

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

//! Writes through `fill(FILE*)` into a temporary file next to `file`, then renames it over `file`. On any failure
//! the temporary file is removed and image_error thrown. `fill` returns an empty string on success, else a reason.
void write_atomically(const std::filesystem::path& file, const std::function<std::string(std::FILE*)>& fill) {
  if (file.filename().empty()) throw image_error(file, "not a file name");
  const std::filesystem::path folder = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  // A unique hidden name in the same folder (so rename is atomic), created exclusively with mode 0666 less the
  // umask, as the final file would be.
  static std::atomic<unsigned> counter{0};
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    std::string name = ".";
    name.append(file.filename().string()).append(".tmp-").append(std::to_string(::getpid()));
    name.append("-").append(std::to_string(counter.fetch_add(1)));
    temp = (folder / name).string();
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw image_error(file, "cannot create a temporary file in '" + folder.string() + "': " + errno_text(errno));
  bool committed = false;
  struct remover {
    const std::string& path;
    const bool& committed;
    ~remover() {
      if (!committed) (void)::unlink(path.c_str());
    }
  } remove_unless_committed{temp, committed};
  file_ptr fp(::fdopen(fd, "wb"));
  if (!fp) {
    const int err = errno;
    (void)::close(fd);
    throw image_error(file, "cannot open the temporary file: " + errno_text(err));
  }
  if (std::string reason = fill(fp.get()); !reason.empty()) throw image_error(file, reason);
  if (std::fflush(fp.get()) != 0 || ::fsync(::fileno(fp.get())) != 0)
    throw image_error(file, "cannot write: " + errno_text(errno));
  if (std::fclose(fp.release()) != 0) throw image_error(file, "cannot write: " + errno_text(errno));
  if (std::rename(temp.c_str(), file.c_str()) != 0)
    throw image_error(file, "cannot rename the temporary file into place: " + errno_text(errno));
  committed = true;
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
  write_atomically(file, [&](std::FILE* fp) -> std::string {
    png_image out{};
    out.version = PNG_IMAGE_VERSION;
    out.width = static_cast<png_uint_32>(img.width);
    out.height = static_cast<png_uint_32>(img.height);
    out.format = img.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    out.flags = PNG_IMAGE_FLAG_FAST; // faster zlib settings: a larger file, much less time
    const int ok = png_image_write_to_stdio(&out, fp, 0, img.pixels.data(), 0, nullptr);
    std::string reason = ok != 0 ? std::string() : std::string("PNG encoding failed (libpng: ") + out.message + ")";
    png_image_free(&out);
    return reason;
  });
}

void write_file_atomically(const std::filesystem::path& file, std::string_view content) {
  write_atomically(file, [&](std::FILE* fp) -> std::string {
    if (!content.empty() && std::fwrite(content.data(), 1, content.size(), fp) != content.size())
      return "cannot write: " + errno_text(errno);
    return {};
  });
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
