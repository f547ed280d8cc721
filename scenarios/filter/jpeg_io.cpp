//! \file jpeg_io.cpp
//! JPEG decoding with libjpeg (libjpeg-turbo). libjpeg reports errors through error_exit, which must not return:
//! it longjmps back into a function holding only plain C data. Warnings (corrupt data, premature end of file) are
//! treated as errors, because libjpeg would otherwise return a silently padded image for a truncated file.
//! Decoding runs in steps (header, start, rows) so that the caller can check the header against the file's size and
//! allocate the image's own pixels, into which libjpeg writes directly (the pixels are held once).

#include "filter/image_io.hpp"

#include <cstddef>
#include <cstdio> // jpeglib.h needs FILE and size_t first

#include <jerror.h>
#include <jpeglib.h>

#include <fmt/format.h>

#include <csetjmp>
#include <cstdlib>
#include <string>

namespace conveyor::filter::detail {
namespace {

struct jpeg_error_context {
  jpeg_error_mgr manager; // first member: libjpeg hands back this pointer
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  int code = 0; // libjpeg's message code (JERR_..., JWRN_...)
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

//! libjpeg's state and its last error; destroys the state with itself (jpeg_destroy_decompress accepts a state
//! that was never created, its memory manager being null).
struct jpeg_reader {
  jpeg_error_context ctx;
  jpeg_decompress_struct info{};

  jpeg_reader() = default;
  jpeg_reader(const jpeg_reader&) = delete;
  jpeg_reader& operator=(const jpeg_reader&) = delete;
  ~jpeg_reader() { jpeg_destroy_decompress(&info); }
};

// Each step below holds plain C data only between its setjmp and any longjmp; false means r->ctx says why.

bool read_header(jpeg_reader* r, std::FILE* fp) {
  r->info.err = jpeg_std_error(&r->ctx.manager);
  r->ctx.manager.error_exit = on_jpeg_error;
  r->ctx.manager.emit_message = on_jpeg_message;
  if (setjmp(r->ctx.jump) != 0) return false;
  jpeg_create_decompress(&r->info);
  jpeg_stdio_src(&r->info, fp);
  (void)jpeg_read_header(&r->info, TRUE);
  return true;
}

bool start(jpeg_reader* r) {
  if (setjmp(r->ctx.jump) != 0) return false;
  r->info.out_color_space = JCS_RGB; // grey and YCbCr convert; CMYK/YCCK do not (libjpeg refuses: unsupported)
  (void)jpeg_start_decompress(&r->info);
  return true;
}

bool read_rows(jpeg_reader* r, unsigned char* pixels) {
  if (setjmp(r->ctx.jump) != 0) return false;
  const std::size_t row_bytes = static_cast<std::size_t>(r->info.output_width) * 3;
  while (r->info.output_scanline < r->info.output_height) {
    JSAMPROW row = pixels + static_cast<std::size_t>(r->info.output_scanline) * row_bytes;
    (void)jpeg_read_scanlines(&r->info, &row, 1);
  }
  (void)jpeg_finish_decompress(&r->info);
  return true;
}

[[noreturn]] void fail(const std::filesystem::path& name, const jpeg_error_context& ctx) {
  const std::string reason = ctx.message;
  if (ctx.code == JWRN_JPEG_EOF || ctx.code == JERR_INPUT_EOF || ctx.code == JERR_INPUT_EMPTY)
    throw image_error(name, "truncated JPEG data (libjpeg: " + reason + ")");
  if (ctx.code == JERR_CONVERSION_NOTIMPL || ctx.code == JERR_BAD_J_COLORSPACE)
    throw image_error(name, "unsupported JPEG colour space (libjpeg: " + reason + ")");
  throw image_error(name, "unreadable JPEG (libjpeg: " + reason + ")");
}

} // namespace

image decode_jpeg(std::FILE* fp, const std::filesystem::path& name, std::uintmax_t file_bytes) {
  jpeg_reader r;
  if (!read_header(&r, fp)) fail(name, r.ctx);
  const JDIMENSION width = r.info.image_width;
  const JDIMENSION height = r.info.image_height;
  if (width == 0 || height == 0 || width > max_image_side || height > max_image_side)
    throw image_error(name, fmt::format("unsupported image size {}x{} (each side must be 1 to {} pixels: "
                                        "max_image_side in scenarios/filter/image_io.hpp)",
                                        width, height, max_image_side));
  const std::uintmax_t pixels = static_cast<std::uintmax_t>(width) * height;
  if (pixels > jpeg_max_pixels_per_byte * file_bytes)
    throw image_error(name, fmt::format("truncated or corrupt JPEG: its header declares {}x{} pixels, more than "
                                        "this {}-byte file can hold (at most {} pixels per byte: "
                                        "jpeg_max_pixels_per_byte in scenarios/filter/image_io.hpp)",
                                        width, height, file_bytes, jpeg_max_pixels_per_byte));
  if (!start(&r)) fail(name, r.ctx);
  if (r.info.output_components != 3)
    throw image_error(name,
                      fmt::format("unsupported JPEG colour space ({} output components)", r.info.output_components));
  image img = rgb_image_for(name, r.info.output_width, r.info.output_height);
  if (!read_rows(&r, img.pixels.data())) fail(name, r.ctx);
  return img;
}

} // namespace conveyor::filter::detail
