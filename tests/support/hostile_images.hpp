#pragma once
// Test support for the image readers' limits: small PNG and JPEG files built byte by byte, whose headers may declare
// far more pixels than the files hold (a few dozen bytes declaring 32768 x 32768).

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace conveyor::test {

//! Appends `v` big-endian in `bytes` bytes.
inline void put_be(std::string& out, std::uint32_t v, int bytes) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFFU));
}

//! One PNG chunk: length, type, data, CRC-32 of type and data.
inline std::string png_chunk(const std::string& type, const std::string& data) {
  std::string out;
  put_be(out, static_cast<std::uint32_t>(data.size()), 4);
  const std::string body = type + data;
  out += body;
  put_be(out,
         static_cast<std::uint32_t>(
             crc32(0L, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))),
         4);
  return out;
}

//! A PNG declaring `width` x `height` at `bit_depth` with `colour_type` (0 grey, 2 RGB, 6 RGBA, ...), whose one IDAT
//! holds `raw_bytes` zero bytes, deflated (each row is a filter byte and its samples: (1 + row bytes) x height makes
//! a complete image of black rows), then IEND.
inline std::string png_file(std::uint32_t width, std::uint32_t height, int bit_depth, int colour_type,
                            std::size_t raw_bytes) {
  std::string ihdr;
  put_be(ihdr, width, 4);
  put_be(ihdr, height, 4);
  ihdr.push_back(static_cast<char>(bit_depth));
  ihdr.push_back(static_cast<char>(colour_type));
  ihdr.append(3, '\0'); // deflate, adaptive filtering, no interlace
  const std::string raw(raw_bytes, '\0');
  std::string idat(compressBound(static_cast<uLong>(raw.size())), '\0');
  uLongf idat_size = static_cast<uLongf>(idat.size());
  if (compress2(reinterpret_cast<Bytef*>(idat.data()), &idat_size, reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), 9) != Z_OK)
    throw std::runtime_error("compress2 failed");
  idat.resize(idat_size);
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + png_chunk("IDAT", idat) +
         png_chunk("IEND", "");
}

//! A JPEG declaring `width` x `height` (baseline SOF0, or progressive SOF2), three components sampled 2x2, 1x1, 1x1,
//! with a start of scan, a few bytes of scan data and EOI: no quantisation or Huffman table, so it never decodes,
//! but its header reads.
inline std::string jpeg_file(std::uint16_t width, std::uint16_t height, bool progressive = false) {
  std::string out("\xFF\xD8", 2);
  out += progressive ? std::string("\xFF\xC2", 2) : std::string("\xFF\xC0", 2);
  put_be(out, 17, 2);
  out.push_back(8); // bits per sample
  put_be(out, height, 2);
  put_be(out, width, 2);
  out.push_back(3);
  for (const char c : {'\x01', '\x22', '\x00', '\x02', '\x11', '\x01', '\x03', '\x11', '\x01'}) out.push_back(c);
  out += std::string("\xFF\xDA", 2);
  put_be(out, 12, 2);
  out.push_back(3);
  for (const char c : {'\x01', '\x00', '\x02', '\x11', '\x03', '\x11'}) out.push_back(c);
  out.push_back(0);                             // Ss
  out.push_back(progressive ? '\x00' : '\x3F'); // Se: DC only in a progressive first scan
  out.push_back(0);                             // Ah, Al
  out += std::string("\x12\x34\x56\x78\xFF\xD9", 6);
  return out;
}

} // namespace conveyor::test
