//! \file jpeg_io.cpp
//! JPEG decoding with libjpeg (libjpeg-turbo). libjpeg reports errors through error_exit, which must not return:
//! it longjmps back into a function holding only plain C data. Warnings (corrupt data, premature end of file) are
//! treated as errors, because libjpeg would otherwise return a silently padded image for a truncated file.

#include "filter/image_io.hpp"

#include <cstddef>
#include <cstdio> // jpeglib.h needs FILE and size_t first

#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstdlib>
#include <memory>
#include <string>

namespace conveyor::filter::detail {
namespace {

struct jpeg_error_context {
  jpeg_error_mgr manager;            // first member: libjpeg hands back this pointer
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  int code = 0;                      // libjpeg's message code (JERR_..., JWRN_...)
};

[[noreturn]] void on_jpeg_error(j_common_ptr info) {
  auto* ctx = reinterpret_cast<jpeg_error_context*>(info->err);
  ctx->code = info->err->msg_code;
  (*info->err->format_message)(info, ctx->message);
  std::longjmp(ctx->jump, 1);
}

void on_jpeg_message(j_common_ptr info, int level) {
  if (level < 0) on_jpeg_error(info); // a warning: corrupt or truncated data
}

struct jpeg_outcome {
  JDIMENSION width = 0;
  JDIMENSION height = 0;
  unsigned char* pixels = nullptr; // malloc'd RGB rows on success
};

// Plain C data only between setjmp and any longjmp. Returns true with out->pixels set, or false with ctx->message.
bool decode(std::FILE* fp, jpeg_error_context* ctx, jpeg_outcome* out) {
  jpeg_decompress_struct info{};
  info.err = jpeg_std_error(&ctx->manager);
  ctx->manager.error_exit = on_jpeg_error;
  ctx->manager.emit_message = on_jpeg_message;
  unsigned char* volatile pixels = nullptr;
  if (setjmp(ctx->jump) != 0) {
    std::free(pixels);
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_stdio_src(&info, fp);
  (void)jpeg_read_header(&info, TRUE);
  if (info.image_width == 0 || info.image_height == 0 || info.image_width > max_image_side ||
      info.image_height > max_image_side) {
    std::snprintf(ctx->message, sizeof ctx->message, "unsupported image size (each side must be 1 to 32768 pixels)");
    jpeg_destroy_decompress(&info);
    return false;
  }
  info.out_color_space = JCS_RGB; // grey and YCbCr convert; CMYK/YCCK do not (libjpeg refuses: unsupported)
  (void)jpeg_start_decompress(&info);
  if (info.output_components != 3) {
    std::snprintf(ctx->message, sizeof ctx->message, "unsupported JPEG colour space (%d output components)",
                  info.output_components);
    jpeg_destroy_decompress(&info);
    return false;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(info.output_width) * 3;
  pixels = static_cast<unsigned char*>(std::malloc(row_bytes * info.output_height));
  if (pixels == nullptr) {
    std::snprintf(ctx->message, sizeof ctx->message, "out of memory for the pixels");
    jpeg_destroy_decompress(&info);
    return false;
  }
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = pixels + static_cast<std::size_t>(info.output_scanline) * row_bytes;
    (void)jpeg_read_scanlines(&info, &row, 1);
  }
  (void)jpeg_finish_decompress(&info);
  out->width = info.output_width;
  out->height = info.output_height;
  out->pixels = pixels;
  jpeg_destroy_decompress(&info);
  return true;
}

} // namespace

image decode_jpeg(std::FILE* fp, const std::filesystem::path& name) {
  jpeg_error_context ctx;
  jpeg_outcome out;
  if (!decode(fp, &ctx, &out)) {
    const std::string reason = ctx.message;
    if (ctx.code == JWRN_JPEG_EOF || ctx.code == JERR_INPUT_EOF || ctx.code == JERR_INPUT_EMPTY)
      throw image_error(name, "truncated JPEG data (libjpeg: " + reason + ")");
    if (ctx.code == JERR_CONVERSION_NOTIMPL || ctx.code == JERR_BAD_J_COLORSPACE)
      throw image_error(name, "unsupported JPEG colour space (libjpeg: " + reason + ")");
    throw image_error(name, "unreadable JPEG (libjpeg: " + reason + ")");
  }
  return adopt_rgb(out.pixels, out.width, out.height);
}

} // namespace conveyor::filter::detail
