//! \file png_io.cpp
//! PNG decoding with libpng's low-level API (so that no gamma or colour-profile conversion happens).
//! libpng reports errors by longjmp: each function holding setjmp keeps only plain C data, so no C++ destructor is
//! ever skipped; the caller turns the outcome into an image or an image_error. Decoding runs in two steps, the
//! header and then the rows, so that the caller can check the header against the file's size and allocate the
//! image's own pixels, into which libpng writes directly (the pixels are held once).

#include "filter/image_io.hpp"

#include <fmt/format.h>
#include <png.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <string>

namespace conveyor::filter::detail {
namespace {

//! libpng's state and its last error message; destroys the state with itself.
struct png_reader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256] = {}; // libpng's or our reason on failure

  png_reader() = default;
  png_reader(const png_reader&) = delete;
  png_reader& operator=(const png_reader&) = delete;
  ~png_reader() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

//! What the header declares, before any conversion.
struct png_header {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  int bit_depth = 0; // bits per sample
  int channels = 0;  // samples per pixel (1 for a palette)
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* r = static_cast<png_reader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof r->message, "%s", message != nullptr ? message : "unknown libpng error");
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {} // benign (e.g. an sRGB profile libpng dislikes)

// Reads the header and sets up the conversion to 8-bit RGB. Plain C data only between setjmp and any longjmp.
// Returns true with `h` filled, or false with r->message.
bool read_header(png_reader* r, std::FILE* fp, png_header* h) {
  r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, on_png_error, on_png_warning);
  if (r->png == nullptr) {
    std::snprintf(r->message, sizeof r->message, "out of memory (png_create_read_struct)");
    return false;
  }
  r->info = png_create_info_struct(r->png);
  if (r->info == nullptr) {
    std::snprintf(r->message, sizeof r->message, "out of memory (png_create_info_struct)");
    return false;
  }
  if (setjmp(png_jmpbuf(r->png)) != 0) return false;
  png_init_io(r->png, fp);
  png_read_info(r->png, r->info);
  h->width = png_get_image_width(r->png, r->info);
  h->height = png_get_image_height(r->png, r->info);
  h->bit_depth = png_get_bit_depth(r->png, r->info);
  h->channels = png_get_channels(r->png, r->info);
  if (h->width == 0 || h->height == 0 || h->width > max_image_side || h->height > max_image_side) {
    std::snprintf(r->message, sizeof r->message,
                  "unsupported image size %ux%u (each side must be 1 to %d pixels: max_image_side in "
                  "scenarios/filter/image_io.hpp)",
                  static_cast<unsigned>(h->width), static_cast<unsigned>(h->height), max_image_side);
    png_longjmp(r->png, 1);
  }
  png_set_expand(r->png);      // palette -> RGB, grey < 8 bits -> 8 bits, tRNS -> alpha
  png_set_strip_16(r->png);    // 16 -> 8 bits: keep the high byte, as cv::imread does
  png_set_strip_alpha(r->png); // RGBA -> RGB, grey+alpha -> grey
  png_set_gray_to_rgb(r->png); // grey -> RGB
  (void)png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  if (png_get_channels(r->png, r->info) != 3 || png_get_bit_depth(r->png, r->info) != 8 ||
      png_get_rowbytes(r->png, r->info) != static_cast<png_size_t>(h->width) * 3)
    png_error(r->png, "unsupported PNG layout after conversion to 8-bit RGB");
  return true;
}

// Decodes the rows into `pixels` (width x height x 3 bytes). Plain C data only between setjmp and any longjmp.
bool read_rows(png_reader* r, unsigned char* pixels, png_uint_32 width, png_uint_32 height) {
  png_bytep* volatile rows = nullptr;
  if (setjmp(png_jmpbuf(r->png)) != 0) {
    std::free(rows);
    return false;
  }
  rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * height));
  if (rows == nullptr) png_error(r->png, "out of memory for the row pointers");
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = pixels + static_cast<std::size_t>(y) * width * 3;
  png_read_image(r->png, rows);
  png_read_end(r->png, nullptr);
  std::free(rows);
  return true;
}

[[noreturn]] void fail(const std::filesystem::path& name, const std::string& reason) {
  // libpng's short-read message: the file ends before the image data does.
  if (reason == "Read Error" || reason.find("Not enough image data") != std::string::npos ||
      reason.find("Truncated") != std::string::npos || reason.find("truncated") != std::string::npos)
    throw image_error(name, "truncated PNG data (libpng: " + reason + ")");
  if (reason.starts_with("unsupported image size")) throw image_error(name, reason);
  throw image_error(name, "unreadable PNG (libpng: " + reason + ")");
}

//! deflate's largest expansion (zlib FAQ: "the limit on compression ratio is 1032:1").
constexpr std::uintmax_t deflate_max_ratio = 1032;

} // namespace

image decode_png(std::FILE* fp, const std::filesystem::path& name, std::uintmax_t file_bytes) {
  png_reader r;
  png_header h;
  if (!read_header(&r, fp, &h)) fail(name, r.message);
  // The image data are deflate-compressed inside the file: at least width x height x bits per pixel / 8 bytes,
  // which the file's size bounds before a byte of pixels is allocated.
  const std::uintmax_t data_bytes = static_cast<std::uintmax_t>(h.width) * h.height *
                                    static_cast<std::uintmax_t>(h.bit_depth) * static_cast<std::uintmax_t>(h.channels) /
                                    8;
  if (data_bytes > deflate_max_ratio * file_bytes)
    throw image_error(name, fmt::format("truncated or corrupt PNG: its header declares {}x{} pixels ({} bytes of "
                                        "image data at {} bits per pixel), more than this {}-byte file can hold "
                                        "(deflate expands at most {}-fold)",
                                        h.width, h.height, data_bytes, h.bit_depth * h.channels, file_bytes,
                                        deflate_max_ratio));
  image img = rgb_image_for(name, h.width, h.height);
  if (!read_rows(&r, img.pixels.data(), h.width, h.height)) fail(name, r.message);
  return img;
}

} // namespace conveyor::filter::detail
