#pragma once
//! \file file_output.hpp
//! Files the scenarios write: atomically (a temporary file in the same folder, then rename, so that a reader never
//! sees half a file and a failed run leaves no partial one), and 8-bit PNG images through libpng. Host-only.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace conveyor::scenarios {

//! A file could not be written (or read). what() reads "FILE: REASON".
class file_error : public std::runtime_error {
public:
  //! \param file   the file concerned
  //! \param reason why it failed, e.g. "cannot rename the temporary file into place: Permission denied"
  file_error(const std::filesystem::path& file, std::string reason);
  //! The file concerned.
  [[nodiscard]] const std::filesystem::path& file() const noexcept { return file_; }
  //! Why it failed, without the file name.
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

private:
  std::filesystem::path file_;
  std::string reason_;
};

//! Closes a C stream (std::fclose, errors ignored); never throws.
struct file_closer {
  void operator()(std::FILE* f) const noexcept { (void)std::fclose(f); }
};
//! An owned C stream.
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

//! The system's text for an errno value, e.g. "No such file or directory".
[[nodiscard]] std::string errno_text(int code);

//! Writes `file` through `fill`, which gets an open temporary file in the same folder and returns an empty string
//! on success, else the reason it failed. The temporary file is flushed, synced and renamed over `file`; on any
//! failure it is removed and nothing replaces `file`.
//! \throws file_error naming the file and the reason (the folder is missing or unwritable, `fill` failed, ...).
void write_atomically(const std::filesystem::path& file, const std::function<std::string(std::FILE*)>& fill);

//! Writes `content` to `file` atomically (write_atomically).
//! \throws file_error as write_atomically.
void write_file_atomically(const std::filesystem::path& file, std::string_view content);

//! Writes an 8-bit image as PNG, atomically: `height` rows of `width` pixels, each `channels` bytes (1: grey, 3: R,
//! G, B), rows packed without padding (libpng's simplified API, fast zlib settings).
//! \throws std::invalid_argument when a size is below 1, `channels` is not 1 or 3, or pixels.size() is not
//!         width * height * channels; file_error when the file cannot be written.
void write_png(const std::filesystem::path& file, int width, int height, int channels,
               std::span<const std::uint8_t> pixels);

} // namespace conveyor::scenarios
