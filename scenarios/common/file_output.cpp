//! \file file_output.cpp
//! Atomic file writes and the PNG writer shared by the scenarios.

#include "common/file_output.hpp"

#include <png.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

namespace conveyor::scenarios {

std::string errno_text(int code) { return std::system_category().message(code); }

file_error::file_error(const std::filesystem::path& file, std::string reason) :
    std::runtime_error(file.string() + ": " + reason),
    file_(file),
    reason_(std::move(reason)) {}

void write_atomically(const std::filesystem::path& file, const std::function<std::string(std::FILE*)>& fill) {
  if (file.filename().empty()) throw file_error(file, "not a file name");
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
  if (fd < 0)
    throw file_error(file, "cannot create a temporary file in '" + folder.string() + "': " + errno_text(errno));
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
    throw file_error(file, "cannot open the temporary file: " + errno_text(err));
  }
  if (std::string reason = fill(fp.get()); !reason.empty()) throw file_error(file, reason);
  if (std::fflush(fp.get()) != 0 || ::fsync(::fileno(fp.get())) != 0)
    throw file_error(file, "cannot write: " + errno_text(errno));
  if (std::fclose(fp.release()) != 0) throw file_error(file, "cannot write: " + errno_text(errno));
  if (std::rename(temp.c_str(), file.c_str()) != 0)
    throw file_error(file, "cannot rename the temporary file into place: " + errno_text(errno));
  committed = true;
}

void write_file_atomically(const std::filesystem::path& file, std::string_view content) {
  write_atomically(file, [&](std::FILE* fp) -> std::string {
    if (!content.empty() && std::fwrite(content.data(), 1, content.size(), fp) != content.size())
      return "cannot write: " + errno_text(errno);
    return {};
  });
}

void write_png(const std::filesystem::path& file, int width, int height, int channels,
               std::span<const std::uint8_t> pixels) {
  if (width < 1 || height < 1 || (channels != 1 && channels != 3) ||
      pixels.size() !=
          static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * static_cast<std::size_t>(channels))
    throw std::invalid_argument("write_png(" + file.string() + "): " + std::to_string(pixels.size()) + " bytes for a " +
                                std::to_string(width) + " x " + std::to_string(height) + " image with " +
                                std::to_string(channels) + " channel(s) (1 or 3)");
  write_atomically(file, [&](std::FILE* fp) -> std::string {
    png_image out{};
    out.version = PNG_IMAGE_VERSION;
    out.width = static_cast<png_uint_32>(width);
    out.height = static_cast<png_uint_32>(height);
    out.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    out.flags = PNG_IMAGE_FLAG_FAST; // faster zlib settings: a larger file, much less time
    const int ok = png_image_write_to_stdio(&out, fp, 0, pixels.data(), 0, nullptr);
    std::string reason = ok != 0 ? std::string() : std::string("PNG encoding failed (libpng: ") + out.message + ")";
    png_image_free(&out);
    return reason;
  });
}

} // namespace conveyor::scenarios
