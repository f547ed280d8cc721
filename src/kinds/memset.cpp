// The memset node kind: 1D and pitched fills (zero elements become an empty node), every field compared, per-node
// setter, description.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"
#include "cuda/check.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace conveyor::detail {

namespace {

std::size_t bytes_of(const cudaMemsetParams& p) { return p.width * p.elementSize * std::max<std::size_t>(p.height, 1); }

// Rows, row length and pitch (a node's cudaMemsetParams or a saved memset node).
template <class Fill>
bool same_shape(const Fill& a, const Fill& b) {
  return a.width == b.width && a.height == b.height && a.pitch == b.pitch;
}

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  cudaMemsetParams pa{};
  cudaMemsetParams pb{};
  CONVEYOR_CHECK(cudaGraphMemsetNodeGetParams(a, &pa));
  CONVEYOR_CHECK(cudaGraphMemsetNodeGetParams(b, &pb));
  std::vector<std::string> what;
  if (pa.dst != pb.dst) what.push_back(fmt::format("destination {} -> {}", pa.dst, pb.dst));
  if (pa.value != pb.value) what.push_back(fmt::format("value {:#x} -> {:#x}", pa.value, pb.value));
  if (pa.elementSize != pb.elementSize)
    what.push_back(fmt::format("element size {} -> {} B", pa.elementSize, pb.elementSize));
  if (!same_shape(pa, pb))
    what.push_back(fmt::format("shape {}x{} pitch {} -> {}x{} pitch {}", pa.width, pa.height, pa.pitch, pb.width,
                               pb.height, pb.pitch));
  return param_diff::listed("memset", what);
}

cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  cudaMemsetParams p{};
  const cudaError_t rc = cudaGraphMemsetNodeGetParams(source, &p);
  return rc != cudaSuccess ? rc : cudaGraphExecMemsetNodeSetParams(exec, target, &p);
}

void describe(cudaGraphNode_t n, node_description& d, const graph_state*) {
  cudaMemsetParams p{};
  CONVEYOR_CHECK(cudaGraphMemsetNodeGetParams(n, &p));
  d.bytes = bytes_of(p);
  (void)memory_side(p.dst, nullptr, &d.device);
  add_buffer(d, p.dst);
}

// Rebinding's fields of a memset: its destination, and its value for 4-byte elements; the shape and element size
// (and a value of other element sizes) must stay fixed.
void read_fields(cudaGraphNode_t n, node_fields& out) {
  cudaMemsetParams p{};
  if (cleared(cudaGraphMemsetNodeGetParams(n, &p)) != cudaSuccess) return;
  out.fill = p;
  append_word(out.bytes, reinterpret_cast<std::uint64_t>(p.dst));
  out.fields = {{0U, 8U}};
  if (p.elementSize == 4) {
    append_word(out.bytes, p.value);
    out.fields.emplace_back(8U, 4U);
  } else {
    append_word(out.fixed, p.value);
  }
  for (std::size_t v : {p.pitch, p.width, p.height}) append_word(out.fixed, v);
  append_word(out.fixed, p.elementSize);
  out.patchable = true;
}

cudaError_t set_fields(cudaGraphExec_t exec, cudaGraphNode_t origin, node_fields& f) {
  cudaMemsetParams p = f.fill;
  p.dst = reinterpret_cast<void*>(read_word(f.bytes, 0, 8));
  if (f.fields.size() > 1) p.value = static_cast<unsigned>(read_word(f.bytes, 8, 4));
  return cleared(cudaGraphExecMemsetNodeSetParams(exec, origin, &p));
}

std::string field_name(std::size_t k) { return k == 0 ? "memset destination" : "memset value"; }

} // namespace

namespace {
cudaError_t add_copy(cudaGraphNode_t n, cudaGraph_t target, cudaGraphNode_t* out) {
  cudaMemsetParams p{};
  const cudaError_t rc = cudaGraphMemsetNodeGetParams(n, &p);
  return rc != cudaSuccess ? rc : cudaGraphAddMemsetNode(out, target, nullptr, 0, &p);
}
} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

void save_memset(cudaGraphNode_t n, const graph_state*, keep_saver& s, saved_node& out) {
  cudaMemsetParams p{};
  CONVEYOR_CHECK(cudaGraphMemsetNodeGetParams(n, &p));
  saved_memset_node m;
  const std::size_t height = std::max<std::size_t>(p.height, 1);
  m.destination = s.address(p.dst, (height - 1) * p.pitch + p.width * p.elementSize, "memset destination");
  m.pitch = p.pitch;
  m.value = p.value;
  m.element_size = p.elementSize;
  m.width = p.width;
  m.height = height;
  out.parameters = m;
}

cudaGraphNode_t load_memset(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  const auto& m = std::get<saved_memset_node>(n.parameters);
  cudaMemsetParams p{};
  p.dst = l.address(m.destination);
  p.pitch = m.pitch;
  p.value = m.value;
  p.elementSize = m.element_size;
  p.width = m.width;
  p.height = m.height;
  cudaGraphNode_t node = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemsetNode(&node, g, deps.data(), deps.size(), &p));
  return node;
}

void describe_saved(const saved_node& n, const graph_file& f, node_description& d) {
  const auto& m = std::get<saved_memset_node>(n.parameters);
  d.bytes = m.width * m.element_size * m.height;
  if (!m.destination.is_null() && m.destination.buffer < f.buffers.size())
    d.device = f.buffers[m.destination.buffer].device;
}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto& a = std::get<saved_memset_node>(na.parameters);
  const auto& b = std::get<saved_memset_node>(nb.parameters);
  std::vector<std::string> what;
  const std::string da = saved_address_text(a.destination, *ctx.before);
  const std::string db = saved_address_text(b.destination, *ctx.after);
  if (da != db) what.push_back(fmt::format("destination {} -> {}", da, db));
  if (a.value != b.value) what.push_back(fmt::format("value {:#x} -> {:#x}", a.value, b.value));
  if (a.element_size != b.element_size)
    what.push_back(fmt::format("element size {} -> {} B", a.element_size, b.element_size));
  if (!same_shape(a, b))
    what.push_back(
        fmt::format("shape {}x{} pitch {} -> {}x{} pitch {}", a.width, a.height, a.pitch, b.width, b.height, b.pitch));
  return param_diff::listed("memset", what);
}

} // namespace

extern const keep_facets memset_keep{
    .save = &save_memset,
    .load = &load_memset,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_memset_node>,
};

extern const kind_traits memset_kind{
    .kind = node_kind::memset,
    .name = "memset",
    .allowed_in_body = true,
    .has_builder = true,
    .comparable = true,
    .work = true,
    .dot_colour = "#fff2cc",
    .shows = shows_bytes,
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .read_fields = &read_fields,
    .set_fields = &set_fields,
    .field_name = &field_name,
    .add_copy = &add_copy,
    .keep = &memset_keep,
};

namespace {
// The runtime's memset node parameters: `height` rows of `width` elements of `element_size` bytes, rows `pitch`
// bytes apart (one row: the width in bytes, as CUDA wants).
cudaMemsetParams memset_params(void* dst, std::size_t pitch, unsigned value, unsigned element_size, std::size_t width,
                               std::size_t height) noexcept {
  cudaMemsetParams p{};
  p.dst = dst;
  p.value = value;
  p.elementSize = element_size;
  p.width = width;
  p.height = height;
  p.pitch = height > 1 ? pitch : width * element_size;
  return p;
}
} // namespace

cudaGraphNode_t add_memset(cudaGraph_t g, node_handles deps, void* dst, std::size_t pitch, unsigned value,
                           unsigned element_size, std::size_t width, std::size_t height) {
  if (width == 0 || height == 0) return add_empty(g, deps);
  const cudaMemsetParams p = memset_params(dst, pitch, value, element_size, width, height);
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemsetNode(&n, g, deps.data(), deps.size(), &p));
  return n;
}

cudaError_t set_exec_memset(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst, unsigned value,
                            unsigned element_size, std::size_t count) noexcept {
  const cudaMemsetParams p = memset_params(dst, 0, value, element_size, count, 1);
  return cudaGraphExecMemsetNodeSetParams(exec, node, &p);
}

cudaError_t set_graph_memset(cudaGraphNode_t node, void* dst, unsigned value, unsigned element_size,
                             std::size_t count) noexcept {
  const cudaMemsetParams p = memset_params(dst, 0, value, element_size, count, 1);
  return cudaGraphMemsetNodeSetParams(node, &p);
}

} // namespace conveyor::detail
