// The graph file's bytes: a 32-byte header, one Zstandard frame, a CBOR document (docs/graph-files.md, "Layout").
// Reading checks the header before it allocates, decompresses into a buffer that grows only as bytes arrive (never
// past the header's size nor the limit), parses CBOR with a bounded nesting depth (nlohmann's SAX interface, so that
// no input recurses deeper than the schema allows), then checks the schema and the rules.
#include "conveyor/keep/graph_file.hpp"

#include "keep/schema.hpp"

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <unistd.h>

namespace conveyor {

namespace {

using detail::keep::json;

constexpr std::array<unsigned char, 8> file_magic{0x89, 'C', 'N', 'V', 'G', 'R', 'F', '\n'};
constexpr std::size_t header_bytes = 32;
constexpr int compression_level = 3;

[[noreturn]] void fail_at(std::uint64_t offset, const std::string& what) {
  throw graph_file_error(fmt::format("graph file: byte {}: {}", offset, what));
}

void put_u32(std::vector<unsigned char>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void put_u64(std::vector<unsigned char>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
std::uint64_t get_le(std::span<const unsigned char> bytes, std::size_t offset, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < width; ++i) v |= std::uint64_t{bytes[offset + i]} << (8 * i);
  return v;
}

struct header {
  std::uint32_t version = 0;
  std::uint64_t payload = 0;
  std::uint64_t document = 0;
};

// The format version: 1 to graph_file_version.
void check_version(std::uint32_t version) {
  if (version > graph_file_version || version == 0)
    fail_at(8, fmt::format("format version {}, and this Conveyor reads versions 1 to {}{}", version, graph_file_version,
                           version > graph_file_version ? ": the file is newer; read it with a newer Conveyor" : ""));
}

// The sizes: the payload is the rest of the file, the document within the reader's limit.
void check_sizes(const header& h, std::size_t file_bytes, const graph_file_limits& limits) {
  if (h.payload != file_bytes - header_bytes)
    fail_at(16, fmt::format("a compressed payload of {} bytes, but {} bytes follow the header", h.payload,
                            file_bytes - header_bytes));
  if (h.document > limits.max_document_bytes)
    fail_at(24, fmt::format("a document of {} bytes, above the reader's limit of {} (graph_file_limits)", h.document,
                            limits.max_document_bytes));
}

header read_header(std::span<const unsigned char> bytes, const graph_file_limits& limits) {
  if (bytes.size() < header_bytes)
    fail_at(bytes.size(), fmt::format("the file ends inside its {}-byte header", header_bytes));
  if (!std::equal(file_magic.begin(), file_magic.end(), bytes.begin()))
    fail_at(0, "not a Conveyor graph file (expected the magic bytes \\x89CNVGRF\\n)");
  header h;
  h.version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  check_version(h.version);
  if (const auto flags = get_le(bytes, 12, 4); flags != 0)
    fail_at(12, fmt::format("flags {:#x}: expected 0 (no flag is defined in version {})", flags, h.version));
  h.payload = get_le(bytes, 16, 8);
  h.document = get_le(bytes, 24, 8);
  check_sizes(h, bytes.size(), limits);
  return h;
}

struct dctx_deleter {
  void operator()(ZSTD_DCtx* c) const noexcept { ZSTD_freeDCtx(c); }
};

// Doubles the output buffer `out` (behind `o`) when it is full, up to the header's `document` size.
void grow_when_full(std::vector<unsigned char>& out, ZSTD_outBuffer& o, std::uint64_t document) {
  if (o.pos == o.size && o.size < document) {
    out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(document, out.size() * 2)));
    o = {out.data(), out.size(), o.pos};
  }
}

// The stream made no progress: the document is longer than the header says (the output is full), or the payload
// ends inside its frame.
[[noreturn]] void fail_stalled(const ZSTD_inBuffer& in, const ZSTD_outBuffer& o, std::uint64_t document) {
  fail_at(header_bytes + in.pos,
          o.pos == o.size ? fmt::format("the document is longer than the {} bytes the header gives", document)
                          : std::string("the compressed payload ends inside its frame"));
}

// One step of the stream: true once the frame is complete.
bool decompress_step(ZSTD_DCtx* dctx, ZSTD_inBuffer& in, ZSTD_outBuffer& o, std::uint64_t document) {
  const std::size_t in_before = in.pos;
  const std::size_t out_before = o.pos;
  const std::size_t rc = ZSTD_decompressStream(dctx, &o, &in);
  if (ZSTD_isError(rc))
    fail_at(header_bytes + in.pos,
            fmt::format("the compressed payload is corrupt (Zstandard: {})", ZSTD_getErrorName(rc)));
  if (rc == 0) return true;
  if (in.pos == in_before && o.pos == out_before) fail_stalled(in, o, document);
  return false;
}

// After the frame: no bytes follow it, and it held the header's document size.
void check_frame_end(const ZSTD_inBuffer& in, const ZSTD_outBuffer& o, std::uint64_t document) {
  if (in.pos != in.size) fail_at(header_bytes + in.pos, "bytes after the compressed frame");
  if (o.pos != document) fail_at(24, fmt::format("a document of {} bytes, but the frame holds {}", document, o.pos));
}

// The frame decompressed, growing the output only as bytes arrive (never beyond the header's document size).
std::vector<unsigned char> decompress(std::span<const unsigned char> frame, std::uint64_t document) {
  std::unique_ptr<ZSTD_DCtx, dctx_deleter> dctx(ZSTD_createDCtx());
  if (!dctx) throw std::bad_alloc();
  std::vector<unsigned char> out;
  out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(document, std::uint64_t{1} << 20)));
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  for (;;) {
    grow_when_full(out, o, document);
    if (decompress_step(dctx.get(), in, o, document)) break;
  }
  check_frame_end(in, o, document);
  out.resize(o.pos);
  return out;
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

} // namespace

std::string_view to_string(buffer_memory m) noexcept {
  switch (m) {
  case buffer_memory::device: return "device";
  case buffer_memory::pinned_host: return "pinned_host";
  case buffer_memory::managed: return "managed";
  case buffer_memory::host: return "host";
  case buffer_memory::graph_allocation: return "graph_allocation";
  }
  return "device";
}

std::string_view to_string(image_format f) noexcept {
  switch (f) {
  case image_format::cubin: return "cubin";
  case image_format::fatbin: return "fatbin";
  case image_format::ptx: return "ptx";
  }
  return "cubin";
}

const named_graph* graph_file::find(std::string_view name) const noexcept {
  for (const auto& g : graphs)
    if (g.name == name) return &g;
  return nullptr;
}

std::vector<unsigned char> to_bytes(const graph_file& file) {
  graph_file_check(file);
  const std::vector<unsigned char> document = json::to_cbor(detail::keep::to_document(file));
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  if (!cctx) throw std::bad_alloc();
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, compression_level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  std::vector<unsigned char> out;
  out.reserve(header_bytes + ZSTD_compressBound(document.size()));
  out.insert(out.end(), file_magic.begin(), file_magic.end());
  put_u32(out, graph_file_version);
  put_u32(out, 0);
  put_u64(out, 0); // payload size, below
  put_u64(out, document.size());
  out.resize(header_bytes + ZSTD_compressBound(document.size()));
  const std::size_t n = ZSTD_compress2(cctx.get(), out.data() + header_bytes, out.size() - header_bytes,
                                       document.data(), document.size());
  if (ZSTD_isError(n)) throw graph_file_error(fmt::format("graph file: compression failed ({})", ZSTD_getErrorName(n)));
  out.resize(header_bytes + n);
  for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<unsigned char>(std::uint64_t{n} >> (8 * i));
  return out;
}

graph_file from_bytes(std::span<const unsigned char> bytes, const graph_file_limits& limits) {
  const header h = read_header(bytes, limits);
  const std::vector<unsigned char> document = decompress(bytes.subspan(header_bytes), h.document);
  detail::keep::flat_document doc;
  // Each graph level of the schema is 6 levels of CBOR (graph, nodes, node, bodies, ...); 8 more for the tables.
  if (const std::string problem = detail::keep::read_flat_document(document, 8 + 6 * (limits.max_depth + 1), doc);
      !problem.empty())
    throw graph_file_error("graph file: " + problem);
  graph_file file = detail::keep::from_document(doc.root(), limits);
  if (file.version != h.version)
    throw graph_file_error(
        fmt::format("graph file: the document says version {}, the header {}", file.version, h.version));
  graph_file_check(file, limits);
  return file;
}

void write_graph_file(const std::filesystem::path& path, const graph_file& file) {
  const std::vector<unsigned char> bytes = to_bytes(file);
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  const std::filesystem::path temp =
      folder / fmt::format(".{}.tmp-{}-{}", path.filename().string(), ::getpid(), counter.fetch_add(1));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error(fmt::format("cannot write the graph file '{}': {}", path.string(), errno_text(errno)));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      const int e = errno;
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw std::runtime_error(fmt::format("cannot write the graph file '{}': {}", path.string(), errno_text(e)));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw std::runtime_error(fmt::format("cannot write the graph file '{}': {}", path.string(), errno_text(e)));
  }
}

graph_file read_graph_file(const std::filesystem::path& path, const graph_file_limits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(fmt::format("cannot open the graph file '{}': {}", path.string(), errno_text(errno)));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot read the graph file '{}': {}", path.string(), ec.message()));
  if (size > limits.max_document_bytes + header_bytes + (limits.max_document_bytes >> 6) + (1 << 20))
    throw graph_file_error(fmt::format("graph file '{}': {} bytes, larger than a document of the reader's limit ({} "
                                       "bytes) can compress to",
                                       path.string(), size, limits.max_document_bytes));
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size()))
    throw std::runtime_error(fmt::format("cannot read the graph file '{}': it ended early", path.string()));
  try {
    return from_bytes(bytes, limits);
  } catch (const graph_file_error& e) {
    throw graph_file_error(fmt::format("'{}': {}", path.string(), e.what()));
  }
}

} // namespace conveyor
