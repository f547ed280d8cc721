//! \file png_io.cpp
//! PNG decoding with libpng's low-level API (so that no gamma or colour-profile conversion happens).
//! libpng reports errors by longjmp: the function holding setjmp keeps only plain C data, so no C++ destructor is
//! ever skipped; the caller turns the outcome into an image or an image_error.

#include "filter/image_io.hpp"

#include <png.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace conveyor::filter::detail {
namespace {

struct png_outcome {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  unsigned char* pixels = nullptr; // malloc'd RGB rows on success
  char message[256] = {};          // libpng's or our reason on failure
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* out = static_cast<png_outcome*>(png_get_error_ptr(png));
  std::snprintf(out->message, sizeof out->message, "%s", message != nullptr ? message : "unknown libpng error");
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {} // benign (e.g. an sRGB profile libpng dislikes)

// Plain C data only between setjmp and any longjmp. Returns true with out->pixels set, or false with a message.
bool decode(std::FILE* fp, png_outcome* out) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, out, on_png_error, on_png_warning);
  if (png == nullptr) {
    std::snprintf(out->message, sizeof out->message, "out of memory (png_create_read_struct)");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(out->message, sizeof out->message, "out of memory (png_create_info_struct)");
    return false;
  }
  unsigned char* volatile pixels = nullptr;
  png_bytep* volatile rows = nullptr;
  if (setjmp(png_jmpbuf(png)) != 0) {
    std::free(pixels);
    std::free(rows);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, fp);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  if (width == 0 || height == 0 || width > max_image_side || height > max_image_side)
    png_error(png, "unsupported image size (each side must be 1 to 32768 pixels)");
  png_set_expand(png);        // palette -> RGB, grey < 8 bits -> 8 bits, tRNS -> alpha
  png_set_strip_16(png);      // 16 -> 8 bits: keep the high byte, as cv::imread does
  png_set_strip_alpha(png);   // RGBA -> RGB, grey+alpha -> grey
  png_set_gray_to_rgb(png);   // grey -> RGB
  (void)png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
      png_get_rowbytes(png, info) != static_cast<png_size_t>(width) * 3)
    png_error(png, "unsupported PNG layout after conversion to 8-bit RGB");
  pixels = static_cast<unsigned char*>(std::malloc(static_cast<std::size_t>(width) * height * 3));
  rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * height));
  if (pixels == nullptr || rows == nullptr) png_error(png, "out of memory for the pixels");
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = pixels + static_cast<std::size_t>(y) * width * 3;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  std::free(rows);
  png_destroy_read_struct(&png, &info, nullptr);
  out->width = width;
  out->height = height;
  out->pixels = pixels;
  return true;
}

} // namespace

image decode_png(std::FILE* fp, const std::filesystem::path& name) {
  png_outcome out;
  if (!decode(fp, &out)) {
    std::string reason = out.message;
    // libpng's short-read message: the file ends before the image data does.
    if (reason == "Read Error" || reason.find("Not enough image data") != std::string::npos ||
        reason.find("Truncated") != std::string::npos || reason.find("truncated") != std::string::npos)
      throw image_error(name, "truncated PNG data (libpng: " + reason + ")");
    throw image_error(name, "unreadable PNG (libpng: " + reason + ")");
  }
  return adopt_rgb(out.pixels, out.width, out.height);
}

} // namespace conveyor::filter::detail
