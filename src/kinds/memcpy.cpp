// The memcpy node kind: 1D and 2D copies (a copy of zero bytes becomes an empty node, as stream capture records
// nothing for it), every field of cudaMemcpy3DParms compared, per-node setter, description.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"
#include "cuda/check.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace conveyor::detail {

namespace {

bool same_pitched(const cudaPitchedPtr& a, const cudaPitchedPtr& b) {
  return a.ptr == b.ptr && a.pitch == b.pitch && a.xsize == b.xsize && a.ysize == b.ysize;
}
bool same_pos(const cudaPos& a, const cudaPos& b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

std::string_view copy_kind_name(cudaMemcpyKind kind) {
  switch (kind) {
  case cudaMemcpyHostToHost: return "HtoH";
  case cudaMemcpyHostToDevice: return "HtoD";
  case cudaMemcpyDeviceToHost: return "DtoH";
  case cudaMemcpyDeviceToDevice: return "DtoD";
  case cudaMemcpyDefault: return "default";
  }
  return "default";
}

std::size_t bytes_of(const cudaMemcpy3DParms& p) {
  return p.extent.width * std::max<std::size_t>(p.extent.height, 1) * std::max<std::size_t>(p.extent.depth, 1);
}

// The copy kind's name; for a cudaMemcpyDefault copy between memory of known sides ('H', 'D'; 0: unknown), its
// direction ("HtoD").
std::string copy_direction(cudaMemcpyKind kind, char from, char to) {
  if (kind == cudaMemcpyDefault && from != 0 && to != 0) return std::string{from} + "to" + std::string{to};
  return std::string(copy_kind_name(kind));
}

// A copy's device: its destination's, else its source's (-1: neither is device memory); a copy between two devices
// also names its source's.
void set_devices(node_description& d, int src_device, int dst_device) {
  d.device = dst_device >= 0 ? dst_device : src_device;
  if (src_device >= 0 && dst_device >= 0 && src_device != dst_device) d.source_device = src_device;
}

bool same_extent(const cudaExtent& a, const cudaExtent& b) {
  return a.width == b.width && a.height == b.height && a.depth == b.depth;
}

// Where the two copies read and write: arrays, positions, source and destination pointers.
void add_place_changes(const cudaMemcpy3DParms& pa, const cudaMemcpy3DParms& pb, std::vector<std::string>& what) {
  if (pa.srcArray != pb.srcArray || pa.dstArray != pb.dstArray) what.emplace_back("arrays");
  if (!same_pos(pa.srcPos, pb.srcPos) || !same_pos(pa.dstPos, pb.dstPos)) what.emplace_back("positions");
  if (!same_pitched(pa.srcPtr, pb.srcPtr)) what.push_back(fmt::format("source {} -> {}", pa.srcPtr.ptr, pb.srcPtr.ptr));
  if (!same_pitched(pa.dstPtr, pb.dstPtr))
    what.push_back(fmt::format("destination {} -> {}", pa.dstPtr.ptr, pb.dstPtr.ptr));
}

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  cudaMemcpy3DParms pa{};
  cudaMemcpy3DParms pb{};
  CONVEYOR_CHECK(cudaGraphMemcpyNodeGetParams(a, &pa));
  CONVEYOR_CHECK(cudaGraphMemcpyNodeGetParams(b, &pb));
  std::vector<std::string> what;
  add_place_changes(pa, pb, what);
  if (!same_extent(pa.extent, pb.extent)) what.push_back(fmt::format("size {} -> {} B", bytes_of(pa), bytes_of(pb)));
  if (pa.kind != pb.kind)
    what.push_back(fmt::format("kind {} -> {}", copy_kind_name(pa.kind), copy_kind_name(pb.kind)));
  return param_diff::listed("copy", what);
}

cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  cudaMemcpy3DParms p{};
  const cudaError_t rc = cudaGraphMemcpyNodeGetParams(source, &p);
  return rc != cudaSuccess ? rc : cudaGraphExecMemcpyNodeSetParams(exec, target, &p);
}

// The memory of one side of a copy (memory_side; a CUDA array is device memory).
char side_memory(cudaArray_t array, const void* p, bool* pageable, int* device) noexcept {
  return array != nullptr ? 'D' : memory_side(p, pageable, device);
}

void describe(cudaGraphNode_t n, node_description& d, const graph_state*) {
  cudaMemcpy3DParms p{};
  CONVEYOR_CHECK(cudaGraphMemcpyNodeGetParams(n, &p));
  d.bytes = bytes_of(p);
  // One pointer query per side: its memory (for the direction of a cudaMemcpyDefault copy), pageable host memory.
  bool src_pageable = false;
  bool dst_pageable = false;
  int src_device = -1;
  int dst_device = -1;
  const char from = side_memory(p.srcArray, p.srcPtr.ptr, &src_pageable, &src_device);
  const char to = side_memory(p.dstArray, p.dstPtr.ptr, &dst_pageable, &dst_device);
  set_devices(d, src_device, dst_device);
  d.pageable_host = src_pageable || dst_pageable;
  d.copy_kind = copy_direction(p.kind, from, to);
  add_buffer(d, p.srcPtr.ptr);
  add_buffer(d, p.dstPtr.ptr);
}

// Rebinding's fields of a copy between addresses: source and destination; the positions, pitches, extent and kind
// must stay fixed.
void read_fields(cudaGraphNode_t n, node_fields& out) {
  cudaMemcpy3DParms p{};
  if (cleared(cudaGraphMemcpyNodeGetParams(n, &p)) != cudaSuccess) return;
  if (p.srcArray != nullptr || p.dstArray != nullptr) return;
  out.copy = p;
  append_word(out.bytes, reinterpret_cast<std::uint64_t>(p.srcPtr.ptr));
  append_word(out.bytes, reinterpret_cast<std::uint64_t>(p.dstPtr.ptr));
  out.fields = {{0U, 8U}, {8U, 8U}};
  for (std::size_t v :
       {p.srcPos.x, p.srcPos.y, p.srcPos.z, p.srcPtr.pitch, p.srcPtr.xsize, p.srcPtr.ysize, p.dstPos.x, p.dstPos.y,
        p.dstPos.z, p.dstPtr.pitch, p.dstPtr.xsize, p.dstPtr.ysize, p.extent.width, p.extent.height, p.extent.depth})
    append_word(out.fixed, v);
  append_word(out.fixed, static_cast<int>(p.kind));
  out.patchable = true;
}

cudaError_t set_fields(cudaGraphExec_t exec, cudaGraphNode_t origin, node_fields& f) {
  cudaMemcpy3DParms p = f.copy;
  p.srcPtr.ptr = reinterpret_cast<void*>(read_word(f.bytes, 0, 8));
  p.dstPtr.ptr = reinterpret_cast<void*>(read_word(f.bytes, 8, 8));
  return cleared(cudaGraphExecMemcpyNodeSetParams(exec, origin, &p));
}

std::string field_name(std::size_t k) { return k == 0 ? "memcpy source" : "memcpy destination"; }

cudaError_t host_addresses(cudaGraphNode_t n, std::vector<host_address>& out) {
  cudaMemcpy3DParms p{};
  if (const cudaError_t rc = cudaGraphMemcpyNodeGetParams(n, &p); rc != cudaSuccess) return rc;
  const std::size_t bytes = bytes_of(p);
  if (p.srcArray == nullptr && p.srcPtr.ptr != nullptr) out.push_back({p.srcPtr.ptr, bytes, "source", true});
  if (p.dstArray == nullptr && p.dstPtr.ptr != nullptr) out.push_back({p.dstPtr.ptr, bytes, "destination", true});
  return cudaSuccess;
}

// What only the CUDA graph shows of the device-graph rules (CUDA Programming Guide, "Device Graph Requirements"): a
// copy may involve only linear memory, no CUDA array.
device_launch_rule device_launch_check(cudaGraphNode_t n, CUcontext, std::string_view where) {
  cudaMemcpy3DParms p{};
  check_with(cudaGraphMemcpyNodeGetParams(n, &p), "cudaGraphMemcpyNodeGetParams", [&] { return where; });
  if (p.srcArray == nullptr && p.dstArray == nullptr) return {};
  return {"a copy in a device graph may not involve a CUDA array",
          "copy through linear device memory (cudaMalloc / cudaMallocPitch), or do the array copy in a host graph"};
}

} // namespace

namespace {
cudaError_t add_copy(cudaGraphNode_t n, cudaGraph_t target, cudaGraphNode_t* out) {
  cudaMemcpy3DParms p{};
  const cudaError_t rc = cudaGraphMemcpyNodeGetParams(n, &p);
  return rc != cudaSuccess ? rc : cudaGraphAddMemcpyNode(out, target, nullptr, 0, &p);
}
} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

// Bytes from a side's pointer to the last byte the copy touches: ((z + depth - 1) * ysize + y + height - 1) * pitch
// + x + width.
std::uint64_t span_bytes(const cudaPitchedPtr& p, const cudaPos& at, const cudaExtent& e) {
  const std::uint64_t rows =
      (at.z + std::max<std::size_t>(e.depth, 1) - 1) * p.ysize + at.y + std::max<std::size_t>(e.height, 1) - 1;
  return rows * p.pitch + at.x + e.width;
}

saved_pitched save_side(const cudaPitchedPtr& p, const cudaPos& at, const cudaExtent& e, keep_saver& s,
                        std::string_view role) {
  return {s.address(p.ptr, span_bytes(p, at, e), role), p.pitch, p.xsize, p.ysize, {at.x, at.y, at.z}};
}

void save_memcpy(cudaGraphNode_t n, const graph_state*, keep_saver& s, saved_node& out) {
  cudaMemcpy3DParms p{};
  CONVEYOR_CHECK(cudaGraphMemcpyNodeGetParams(n, &p));
  if (p.srcArray != nullptr || p.dstArray != nullptr)
    s.refuse("it copies to or from a CUDA array, whose handle belongs to this process",
             "copy through linear memory (cudaMalloc, cudaMallocPitch) in the saved graph");
  saved_memcpy_node c;
  c.source = save_side(p.srcPtr, p.srcPos, p.extent, s, "memcpy source");
  c.destination = save_side(p.dstPtr, p.dstPos, p.extent, s, "memcpy destination");
  c.extent = {p.extent.width, std::max<std::size_t>(p.extent.height, 1), std::max<std::size_t>(p.extent.depth, 1)};
  c.kind = static_cast<int>(p.kind);
  out.parameters = c;
}

cudaPitchedPtr load_side(const saved_pitched& side, keep_loader& l, cudaPos& at) {
  at = {side.position[0], side.position[1], side.position[2]};
  return {l.address(side.address), side.pitch, side.xsize, side.ysize};
}

cudaGraphNode_t load_memcpy(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  const auto& c = std::get<saved_memcpy_node>(n.parameters);
  cudaMemcpy3DParms p{};
  p.srcPtr = load_side(c.source, l, p.srcPos);
  p.dstPtr = load_side(c.destination, l, p.dstPos);
  p.extent = {c.extent[0], c.extent[1], c.extent[2]};
  p.kind = static_cast<cudaMemcpyKind>(c.kind);
  cudaGraphNode_t node = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemcpyNode(&node, g, deps.data(), deps.size(), &p));
  return node;
}

char side_of(const saved_address& a, const graph_file& f) {
  if (a.is_null() || a.buffer >= f.buffers.size()) return 0;
  const buffer_memory m = f.buffers[a.buffer].memory;
  return m == buffer_memory::device || m == buffer_memory::graph_allocation ? 'D' : 'H';
}

int device_of(const saved_address& a, const graph_file& f) {
  return a.is_null() || a.buffer >= f.buffers.size() ? -1 : f.buffers[a.buffer].device;
}

bool is_host_memory(const saved_address& a, const graph_file& f) {
  return !a.is_null() && f.buffers[a.buffer].memory == buffer_memory::host;
}

void describe_saved(const saved_node& n, const graph_file& f, node_description& d) {
  const auto& c = std::get<saved_memcpy_node>(n.parameters);
  d.bytes = c.extent[0] * c.extent[1] * c.extent[2];
  d.copy_kind = copy_direction(static_cast<cudaMemcpyKind>(c.kind), side_of(c.source.address, f),
                               side_of(c.destination.address, f));
  set_devices(d, device_of(c.source.address, f), device_of(c.destination.address, f));
  d.pageable_host = is_host_memory(c.source.address, f) || is_host_memory(c.destination.address, f);
}

std::string side_text(const saved_pitched& p, const graph_file& f) {
  return fmt::format("{} pitch {} size {}x{} at {},{},{}", saved_address_text(p.address, f), p.pitch, p.xsize, p.ysize,
                     p.position[0], p.position[1], p.position[2]);
}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto& a = std::get<saved_memcpy_node>(na.parameters);
  const auto& b = std::get<saved_memcpy_node>(nb.parameters);
  std::vector<std::string> what;
  const std::string sa = side_text(a.source, *ctx.before);
  const std::string sb = side_text(b.source, *ctx.after);
  if (sa != sb) what.push_back(fmt::format("source {} -> {}", sa, sb));
  const std::string da = side_text(a.destination, *ctx.before);
  const std::string db = side_text(b.destination, *ctx.after);
  if (da != db) what.push_back(fmt::format("destination {} -> {}", da, db));
  if (a.extent != b.extent)
    what.push_back(fmt::format("size {} -> {} B", a.extent[0] * a.extent[1] * a.extent[2],
                               b.extent[0] * b.extent[1] * b.extent[2]));
  if (a.kind != b.kind)
    what.push_back(fmt::format("kind {} -> {}", copy_kind_name(static_cast<cudaMemcpyKind>(a.kind)),
                               copy_kind_name(static_cast<cudaMemcpyKind>(b.kind))));
  return param_diff::listed("copy", what);
}

} // namespace

extern const keep_facets memcpy_keep{
    .save = &save_memcpy,
    .load = &load_memcpy,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_memcpy_node>,
};

extern const kind_traits memcpy_kind{
    .kind = node_kind::memcpy,
    .name = "memcpy",
    .allowed_in_body = true,
    .has_builder = true,
    .comparable = true,
    .work = true,
    .dot_colour = "#d9ead3",
    .shows = shows_bytes | shows_copy_kind,
    .device_launch_check = &device_launch_check,
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .read_fields = &read_fields,
    .set_fields = &set_fields,
    .field_name = &field_name,
    .host_addresses = &host_addresses,
    .add_copy = &add_copy,
    .keep = &memcpy_keep,
};

cudaGraphNode_t add_memcpy_1d(cudaGraph_t g, node_handles deps, void* dst, const void* src, std::size_t bytes,
                              cudaMemcpyKind kind) {
  if (bytes == 0) return add_empty(g, deps);
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemcpyNode1D(&n, g, deps.data(), deps.size(), dst, src, bytes, kind));
  return n;
}

cudaGraphNode_t add_memcpy_2d(cudaGraph_t g, node_handles deps, void* dst, std::size_t dst_pitch, const void* src,
                              std::size_t src_pitch, std::size_t width_bytes, std::size_t height, cudaMemcpyKind kind) {
  if (width_bytes == 0 || height == 0) return add_empty(g, deps);
  cudaMemcpy3DParms p{};
  p.srcPtr = cudaPitchedPtr{const_cast<void*>(src), src_pitch, width_bytes, height};
  p.dstPtr = cudaPitchedPtr{dst, dst_pitch, width_bytes, height};
  p.extent = cudaExtent{width_bytes, height, 1};
  p.kind = kind;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemcpyNode(&n, g, deps.data(), deps.size(), &p));
  return n;
}

cudaError_t set_exec_memcpy_1d(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst, const void* src,
                               std::size_t bytes, cudaMemcpyKind kind) noexcept {
  return cudaGraphExecMemcpyNodeSetParams1D(exec, node, dst, src, bytes, kind);
}

cudaError_t set_graph_memcpy_1d(cudaGraphNode_t node, void* dst, const void* src, std::size_t bytes,
                                cudaMemcpyKind kind) noexcept {
  return cudaGraphMemcpyNodeSetParams1D(node, dst, src, bytes, kind);
}

} // namespace conveyor::detail
