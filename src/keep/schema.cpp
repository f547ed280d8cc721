// The graph file's CBOR document, written and read field by field (docs/graph-files.md, "Schema"). Reading checks
// each field's presence, type and range, and names where it is; graph_file_check (check.cpp) checks the rules across
// fields.
#include "keep/schema.hpp"

#include "kinds/keep.hpp"
#include "kinds/kind.hpp"

#include <fmt/format.h>

#include <limits>
#include <string>
#include <utility>

namespace conveyor::detail::keep {

namespace {

// ---- attributes ----------------------------------------------------------------------------------------------

constexpr attribute_format attribute_formats[] = {
    {cudaLaunchAttributeAccessPolicyWindow, "access_policy_window", 3},
    {cudaLaunchAttributeCooperative, "cooperative", 1},
    {cudaLaunchAttributeClusterDimension, "cluster", 3},
    {cudaLaunchAttributeClusterSchedulingPolicyPreference, "cluster_scheduling_policy", 1},
    {cudaLaunchAttributePriority, "priority", 1},
    {cudaLaunchAttributeMemSyncDomainMap, "memory_sync_domain_map", 2},
    {cudaLaunchAttributeMemSyncDomain, "memory_sync_domain", 1},
    {cudaLaunchAttributePreferredClusterDimension, "preferred_cluster", 3},
    {cudaLaunchAttributeDeviceUpdatableKernelNode, "device_updatable", 1},
    {cudaLaunchAttributePreferredSharedMemoryCarveout, "shared_memory_carveout", 1},
    {16, "nvlink_util_centric_scheduling", 1}, // cudaLaunchAttributeNvlinkUtilCentricScheduling (CUDA 13)
};

// ---- writing ---------------------------------------------------------------------------------------------------

json binary(const std::vector<unsigned char>& bytes) { return json::binary(bytes); }

json address_json(const saved_address& a) {
  if (a.is_null()) return nullptr;
  return json::array({a.buffer, a.offset});
}

json dependencies_json(const std::vector<saved_dependency>& deps) {
  json out = json::array();
  for (const auto& d : deps) out.push_back(json::array({d.from, d.from_port, d.to_port, d.type}));
  return out;
}

json relocation_json(const saved_relocation& r) {
  json j = {{"offset", r.offset}, {"index", r.index}, {"typed", r.typed}};
  j["to"] = r.target == relocation_target::buffer ? "buffer" : "condition";
  if (r.target == relocation_target::buffer) j["at"] = r.at;
  return j;
}

json attribute_json(const saved_attribute& a) {
  json j = {{"id", a.id}, {"values", a.values}};
  if (const auto f = attribute_format_of(a.id)) j["name"] = std::string(f->name);
  if (a.id == cudaLaunchAttributeAccessPolicyWindow) {
    j["address"] = address_json(a.address);
    j["ratio"] = a.ratio;
  }
  return j;
}

json pitched_json(const saved_pitched& p) {
  return {{"address", address_json(p.address)},
          {"pitch", p.pitch},
          {"xsize", p.xsize},
          {"ysize", p.ysize},
          {"position", p.position}};
}

json graph_json(const saved_graph& g);

struct parameters_writer {
  json& out;
  void operator()(const std::monostate&) const {}
  void operator()(const saved_kernel_node& k) const {
    out["kernel"] = k.kernel;
    out["grid"] = k.grid;
    out["block"] = k.block;
    out["shared_bytes"] = k.shared_bytes;
    out["device"] = k.device;
    out["arguments"] = binary(k.arguments);
    json relocations = json::array();
    for (const auto& r : k.relocations) relocations.push_back(relocation_json(r));
    out["relocations"] = std::move(relocations);
    json attributes = json::array();
    for (const auto& a : k.attributes) attributes.push_back(attribute_json(a));
    out["attributes"] = std::move(attributes);
  }
  void operator()(const saved_memcpy_node& c) const {
    out["source"] = pitched_json(c.source);
    out["destination"] = pitched_json(c.destination);
    out["extent"] = c.extent;
    out["copy_kind"] = c.kind;
  }
  void operator()(const saved_memset_node& m) const {
    out["destination"] = address_json(m.destination);
    out["pitch"] = m.pitch;
    out["value"] = m.value;
    out["element_size"] = m.element_size;
    out["width"] = m.width;
    out["height"] = m.height;
  }
  void operator()(const saved_reference& r) const { out["index"] = r.index; }
  void operator()(const saved_mem_alloc_node& a) const {
    out["buffer"] = a.buffer;
    out["device"] = a.device;
    json access = json::array();
    for (const auto& [device, read_only] : a.access) access.push_back(json::array({device, read_only}));
    out["access"] = std::move(access);
    out["usage"] = a.usage;
  }
  void operator()(const saved_mem_free_node& f) const { out["address"] = address_json(f.address); }
  void operator()(const saved_conditional_node& c) const {
    out["type"] = c.type;
    out["size"] = c.size;
    out["condition"] = c.condition;
  }
};

json node_json(const saved_node& n) {
  json j = {{"kind", std::string(to_string(n.kind))}, {"dependencies", dependencies_json(n.dependencies)}};
  if (!n.label.empty()) j["label"] = n.label;
  std::visit(parameters_writer{j}, n.parameters);
  if (!n.bodies.empty()) {
    json bodies = json::array();
    for (const auto& b : n.bodies) bodies.push_back(graph_json(b));
    j["bodies"] = std::move(bodies);
  }
  return j;
}

json graph_json(const saved_graph& g) {
  json nodes = json::array();
  for (const auto& n : g.nodes) nodes.push_back(node_json(n));
  json j = {{"nodes", std::move(nodes)}, {"captured", g.captured}};
  if (!g.conditions.empty()) {
    json conditions = json::array();
    for (const auto& c : g.conditions) conditions.push_back({{"default", c.default_value}, {"reset", c.reset}});
    j["conditions"] = std::move(conditions);
  }
  return j;
}

json key_json(const saved_key& k) {
  json entries = json::array();
  for (const auto& e : k.entries)
    entries.push_back({{"bits", e.bits},
                       {"size", e.size},
                       {"role", e.role},
                       {"kind", e.kind},
                       {"position", e.position},
                       {"address", address_json(e.address)}});
  json j = {{"exact", k.exact}, {"callable", k.callable}, {"entries", std::move(entries)}, {"bytes", binary(k.bytes)}};
  if (k.user_key) j["user_key"] = *k.user_key;
  return j;
}

json tables_json(const graph_file& f) {
  json images = json::array();
  for (const auto& i : f.images)
    images.push_back({{"format", std::string(to_string(i.format))}, {"source", i.source}, {"bytes", binary(i.bytes)}});
  json kernels = json::array();
  for (const auto& k : f.kernels) {
    json classes = json::array();
    for (const auto c : k.classes) classes.push_back(static_cast<int>(c));
    kernels.push_back({{"name", k.name},
                       {"image", k.image ? json(*k.image) : json(nullptr)},
                       {"parameters", k.parameters},
                       {"classes", std::move(classes)}});
  }
  json buffers = json::array();
  for (const auto& b : f.buffers) {
    json j = {{"name", b.name},
              {"memory", std::string(to_string(b.memory))},
              {"bytes", b.bytes},
              {"device", b.device},
              {"named", b.named}};
    if (b.contents) j["contents"] = binary(*b.contents);
    buffers.push_back(std::move(j));
  }
  return {{"images", std::move(images)},
          {"kernels", std::move(kernels)},
          {"buffers", std::move(buffers)},
          {"events", f.events},
          {"host_functions", f.host_functions}};
}

// ---- reading ---------------------------------------------------------------------------------------------------

// Where a value is, for messages: "graphs[0] 'step' node 3 (kernel): 'grid'".
// Built only when a message needs it (a file of 10,000 nodes reads hundreds of thousands of fields): a place is a
// link to its parent and one segment, rendered by text(). A place must not outlive the places it was made from.
class place {
public:
  place(std::string root) : root_(std::move(root)) {}
  place(const char* root) : root_(root) {}
  //! Field `name` of this place: "...: 'name'".
  [[nodiscard]] place operator/(std::string_view name) const { return {this, segment::field, name, 0}; }
  //! Element `i`: "...[i]".
  [[nodiscard]] place at(std::size_t i) const { return {this, segment::index, {}, i}; }
  //! Node `i` of a graph: "... node i".
  [[nodiscard]] place node(std::size_t i) const { return {this, segment::node, {}, i}; }
  //! Body `i` of a node: "... body i".
  [[nodiscard]] place body(std::size_t i) const { return {this, segment::body, {}, i}; }
  //! The node's kind: "... (kind)".
  [[nodiscard]] place kind(std::string_view name) const { return {this, segment::kind, name, 0}; }
  [[nodiscard]] std::string text() const {
    if (up_ == nullptr) return root_;
    std::string out = up_->text();
    switch (segment_) {
    case segment::field: return out + fmt::format(": '{}'", name_);
    case segment::index: return out + fmt::format("[{}]", index_);
    case segment::node: return out + fmt::format(" node {}", index_);
    case segment::body: return out + fmt::format(" body {}", index_);
    case segment::kind: return out + fmt::format(" ({})", name_);
    }
    return out;
  }

private:
  enum class segment : std::uint8_t { field, index, node, body, kind };
  place(const place* up, segment s, std::string_view name, std::size_t index) :
      up_(up),
      segment_(s),
      name_(name),
      index_(index) {}
  const place* up_ = nullptr;
  segment segment_ = segment::field;
  std::string_view name_;
  std::size_t index_ = 0;
  std::string root_;
};

[[noreturn]] void fail(const place& where, std::string_view expected, const flat_value& got) {
  throw graph_file_error(fmt::format("graph file: {}: expected {}, got {}", where.text(), expected,
                                     got.is_discarded() ? std::string("nothing") : std::string(got.type_name())));
}

flat_value field(const flat_value& object, std::string_view key, const place& where) {
  if (!object.is_object()) fail(where, "an object (map)", object);
  const flat_value v = object.find(key);
  if (!v.valid()) throw graph_file_error(fmt::format("graph file: {}: missing field '{}'", where.text(), key));
  return v;
}

// The field `key`, or an invalid handle when it is absent or null.
flat_value optional_field(const flat_value& object, std::string_view key) {
  const flat_value v = object.find(key);
  return v.valid() && !v.is_null() ? v : flat_value(nullptr, 0);
}

std::uint64_t as_uint(const flat_value& v, std::uint64_t max, const place& where) {
  if (!v.is_number_unsigned() || v.unsigned_value() > max)
    fail(where, fmt::format("an unsigned integer at most {}", max), v);
  return v.unsigned_value();
}

std::int64_t as_int(const flat_value& v, std::int64_t min, std::int64_t max, const place& where) {
  bool ok = false;
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    ok = v.unsigned_value() <= static_cast<std::uint64_t>(max);
    x = ok ? static_cast<std::int64_t>(v.unsigned_value()) : 0;
  } else if (v.is_number_integer()) {
    x = v.signed_value();
    ok = true;
  }
  if (!ok || x < min || x > max) fail(where, fmt::format("an integer in [{}, {}]", min, max), v);
  return x;
}

template <class T>
T uint_field(const flat_value& o, std::string_view key, const place& where,
             std::uint64_t max = std::numeric_limits<T>::max()) {
  return static_cast<T>(as_uint(field(o, key, where), max, where / key));
}

int int_field(const flat_value& o, std::string_view key, const place& where, int min, int max) {
  return static_cast<int>(as_int(field(o, key, where), min, max, where / key));
}

bool bool_field(const flat_value& o, std::string_view key, const place& where) {
  const flat_value v = field(o, key, where);
  if (!v.is_boolean()) fail(where / key, "true or false", v);
  return v.boolean();
}

// A UTF-8 sequence's lead byte: how many continuation bytes follow (-1: not a lead byte) and the code point's bits
// it carries.
std::pair<int, std::uint32_t> utf8_lead(unsigned char c) {
  if (c < 0x80) return {0, c};
  if ((c & 0xE0) == 0xC0) return {1, c & 0x1FU};
  if ((c & 0xF0) == 0xE0) return {2, c & 0x0FU};
  if ((c & 0xF8) == 0xF0) return {3, c & 0x07U};
  return {-1, 0};
}

// A code point a sequence of `n` continuation bytes may encode: not overlong, at most U+10FFFF, no surrogate.
bool valid_code_point(std::uint32_t cp, int n) {
  const std::uint32_t least[] = {0, 0x80, 0x800, 0x10000};
  return cp >= least[n] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
}

// RFC 3629: CBOR text strings are UTF-8 (RFC 8949, major type 3); a reader that passed others on would hand
// exporters text they cannot write.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto [n, cp] = utf8_lead(static_cast<unsigned char>(s[i]));
    if (n < 0 || (n > 0 && i + static_cast<std::size_t>(n) >= s.size())) return false; // not a lead, or cut short
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3FU);
    }
    if (!valid_code_point(cp, n)) return false;
    i += static_cast<std::size_t>(n) + 1;
  }
  return true;
}

std::string text_of(const flat_value& v, const place& where, std::size_t max) {
  if (!v.is_string() || v.text().size() > max) fail(where, fmt::format("a string of at most {} bytes", max), v);
  if (!valid_utf8(v.text())) fail(where, "a string of valid UTF-8", v);
  return std::string(v.text());
}

std::string string_field(const flat_value& o, std::string_view key, const place& where, std::size_t max = 4096) {
  return text_of(field(o, key, where), where / key, max);
}

const flat_value array_field(const flat_value& o, std::string_view key, const place& where) {
  const flat_value v = field(o, key, where);
  if (!v.is_array()) fail(where / key, "an array", v);
  return v;
}

std::vector<unsigned char> binary_field(const flat_value& o, std::string_view key, const place& where) {
  const flat_value v = field(o, key, where);
  if (!v.is_binary()) fail(where / key, "a byte string", v);
  return {v.bytes().begin(), v.bytes().end()};
}

template <class T, std::size_t N>
std::array<T, N> uint_array(const flat_value& v, const place& where) {
  if (!v.is_array() || v.size() != N) fail(where, fmt::format("an array of {} unsigned integers", N), v);
  std::array<T, N> out{};
  for (std::size_t i = 0; i < N; ++i)
    out[i] = static_cast<T>(as_uint(v[i], std::numeric_limits<T>::max(), where.at(i)));
  return out;
}

saved_address address_of(const flat_value& v, const place& where) {
  if (v.is_null()) return {};
  if (!v.is_array() || v.size() != 2) fail(where, "null or [buffer, offset]", v);
  return {static_cast<std::uint32_t>(as_uint(v[0], saved_address::null_buffer - 1, where.at(0))),
          as_uint(v[1], std::numeric_limits<std::uint64_t>::max(), where.at(1))};
}

saved_graph read_graph(const flat_value& j, const place& where, const graph_file_limits& limits, std::size_t depth,
                       std::size_t& nodes_seen);

saved_relocation read_relocation(const flat_value& j, const place& where) {
  saved_relocation r;
  r.offset = uint_field<std::uint32_t>(j, "offset", where);
  r.index = uint_field<std::uint32_t>(j, "index", where);
  r.typed = bool_field(j, "typed", where);
  const std::string to = string_field(j, "to", where, 16);
  if (to == "buffer") {
    r.at = uint_field<std::uint64_t>(j, "at", where);
  } else if (to == "condition") {
    r.target = relocation_target::condition;
  } else {
    fail(where / "to", "\"buffer\" or \"condition\"", field(j, "to", where));
  }
  return r;
}

saved_attribute read_attribute(const flat_value& j, const place& where) {
  saved_attribute a;
  a.id = uint_field<std::uint32_t>(j, "id", where);
  const auto format = attribute_format_of(a.id);
  if (!format) fail(where / "id", "a launch attribute this version knows (docs/graph-files.md)", field(j, "id", where));
  const flat_value& values = array_field(j, "values", where);
  if (values.size() != format->values)
    fail(where / "values", fmt::format("{} integers for attribute '{}'", format->values, format->name), values);
  for (std::size_t i = 0; i < values.size(); ++i)
    a.values.push_back(as_int(values[i], std::numeric_limits<std::int64_t>::min(),
                              std::numeric_limits<std::int64_t>::max(), (where / "values").at(i)));
  if (a.id == cudaLaunchAttributeAccessPolicyWindow) {
    a.address = address_of(field(j, "address", where), where / "address");
    const flat_value ratio = field(j, "ratio", where);
    if (!ratio.is_number() || !(ratio.number() >= 0.0 && ratio.number() <= 1.0))
      fail(where / "ratio", "a number in [0, 1]", ratio);
    a.ratio = ratio.number();
  }
  return a;
}

saved_kernel_node read_kernel_node(const flat_value& j, const place& where) {
  saved_kernel_node k;
  k.kernel = uint_field<std::uint32_t>(j, "kernel", where);
  k.grid = uint_array<std::uint32_t, 3>(field(j, "grid", where), where / "grid");
  k.block = uint_array<std::uint32_t, 3>(field(j, "block", where), where / "block");
  k.shared_bytes = uint_field<std::uint32_t>(j, "shared_bytes", where);
  k.device = int_field(j, "device", where, 0, 1 << 16);
  k.arguments = binary_field(j, "arguments", where);
  const flat_value& relocations = array_field(j, "relocations", where);
  for (std::size_t i = 0; i < relocations.size(); ++i)
    k.relocations.push_back(read_relocation(relocations[i], (where / "relocations").at(i)));
  const flat_value& attributes = array_field(j, "attributes", where);
  for (std::size_t i = 0; i < attributes.size(); ++i)
    k.attributes.push_back(read_attribute(attributes[i], (where / "attributes").at(i)));
  return k;
}

saved_pitched read_pitched(const flat_value& j, const place& where) {
  saved_pitched p;
  p.address = address_of(field(j, "address", where), where / "address");
  p.pitch = uint_field<std::uint64_t>(j, "pitch", where);
  p.xsize = uint_field<std::uint64_t>(j, "xsize", where);
  p.ysize = uint_field<std::uint64_t>(j, "ysize", where);
  p.position = uint_array<std::uint64_t, 3>(field(j, "position", where), where / "position");
  return p;
}

saved_memcpy_node read_memcpy_node(const flat_value& j, const place& where) {
  saved_memcpy_node c;
  c.source = read_pitched(field(j, "source", where), where / "source");
  c.destination = read_pitched(field(j, "destination", where), where / "destination");
  c.extent = uint_array<std::uint64_t, 3>(field(j, "extent", where), where / "extent");
  c.kind = int_field(j, "copy_kind", where, 0, 4);
  return c;
}

saved_memset_node read_memset_node(const flat_value& j, const place& where) {
  saved_memset_node m;
  m.destination = address_of(field(j, "destination", where), where / "destination");
  m.pitch = uint_field<std::uint64_t>(j, "pitch", where);
  m.value = uint_field<std::uint32_t>(j, "value", where);
  m.element_size = uint_field<std::uint32_t>(j, "element_size", where);
  m.width = uint_field<std::uint64_t>(j, "width", where);
  m.height = uint_field<std::uint64_t>(j, "height", where);
  return m;
}

saved_mem_alloc_node read_mem_alloc_node(const flat_value& j, const place& where) {
  saved_mem_alloc_node a;
  a.buffer = uint_field<std::uint32_t>(j, "buffer", where);
  a.device = int_field(j, "device", where, 0, 1 << 16);
  const flat_value& access = array_field(j, "access", where);
  const place access_place = where / "access";
  for (std::size_t i = 0; i < access.size(); ++i) {
    const place p = access_place.at(i);
    if (!access[i].is_array() || access[i].size() != 2 || !access[i][1].is_boolean())
      fail(p, "[device, read_only]", access[i]);
    a.access.emplace_back(static_cast<int>(as_int(access[i][0], 0, 1 << 16, p.at(0))), access[i][1].boolean());
  }
  a.usage = uint_field<std::uint16_t>(j, "usage", where);
  return a;
}

saved_conditional_node read_conditional_node(const flat_value& j, const place& where) {
  saved_conditional_node c;
  c.type = int_field(j, "type", where, 0, 2);
  c.size = uint_field<std::uint32_t>(j, "size", where, 1U << 16);
  c.condition = uint_field<std::uint32_t>(j, "condition", where);
  return c;
}

// The parameters of a node of `kind`, read as the kind's graph-file facet says they are saved (its payload).
saved_parameters read_parameters(node_kind kind, const flat_value& j, const place& where) {
  const keep_facets* f = traits_of(kind).keep;
  if (f == nullptr || f->save == nullptr)
    throw graph_file_error(fmt::format("graph file: {}: a {} node, which no graph file holds (save refuses the kind)",
                                       where.text(), to_string(kind)));
  const std::size_t p = f->payload;
  if (p == payload_index<saved_kernel_node>) return read_kernel_node(j, where);
  if (p == payload_index<saved_memcpy_node>) return read_memcpy_node(j, where);
  if (p == payload_index<saved_memset_node>) return read_memset_node(j, where);
  if (p == payload_index<saved_reference>) return saved_reference{uint_field<std::uint32_t>(j, "index", where)};
  if (p == payload_index<saved_mem_alloc_node>) return read_mem_alloc_node(j, where);
  if (p == payload_index<saved_mem_free_node>)
    return saved_mem_free_node{address_of(field(j, "address", where), where / "address")};
  if (p == payload_index<saved_conditional_node>) return read_conditional_node(j, where);
  return std::monostate{};
}

std::vector<saved_dependency> read_dependencies(const flat_value& j, const place& where) {
  const flat_value& deps = array_field(j, "dependencies", where);
  const place dependencies_place = where / "dependencies";
  std::vector<saved_dependency> out;
  out.reserve(deps.size());
  for (std::size_t i = 0; i < deps.size(); ++i) {
    const place p = dependencies_place.at(i);
    if (!deps[i].is_array() || deps[i].size() != 4) fail(p, "[from, from_port, to_port, type]", deps[i]);
    out.push_back({static_cast<std::uint32_t>(as_uint(deps[i][0], 0xFFFFFFFFU, p.at(0))),
                   static_cast<std::uint8_t>(as_uint(deps[i][1], 255, p.at(1))),
                   static_cast<std::uint8_t>(as_uint(deps[i][2], 255, p.at(2))),
                   static_cast<std::uint8_t>(as_uint(deps[i][3], 255, p.at(3)))});
  }
  return out;
}

saved_node read_node(const flat_value& j, const place& where, const graph_file_limits& limits, std::size_t depth,
                     std::size_t& nodes_seen) {
  saved_node n;
  const std::string kind = string_field(j, "kind", where, 64);
  const auto k = node_kind_named(kind);
  if (!k) fail(where / "kind", "a node kind (kernel, memcpy, memset, host, child_graph, ...)", field(j, "kind", where));
  n.kind = *k;
  const place named = where.kind(kind);
  if (const flat_value label = optional_field(j, "label"); label.valid())
    n.label = text_of(label, named / "label", 4096);
  n.dependencies = read_dependencies(j, named);
  n.parameters = read_parameters(n.kind, j, named);
  if (const flat_value bodies = optional_field(j, "bodies"); bodies.valid()) {
    if (!bodies.is_array()) fail(named / "bodies", "an array of graphs", bodies);
    if (depth + 1 > limits.max_depth)
      throw graph_file_error(
          fmt::format("graph file: {}: graphs nested deeper than {} levels", named.text(), limits.max_depth));
    for (std::size_t b = 0; b < bodies.size(); ++b)
      n.bodies.push_back(
          read_graph(bodies[b], {fmt::format("{} body {}", named.text(), b)}, limits, depth + 1, nodes_seen));
  }
  return n;
}

saved_graph read_graph(const flat_value& j, const place& where, const graph_file_limits& limits, std::size_t depth,
                       std::size_t& nodes_seen) {
  saved_graph g;
  g.captured = bool_field(j, "captured", where);
  const flat_value& nodes = array_field(j, "nodes", where);
  nodes_seen += nodes.size();
  if (nodes_seen > limits.max_nodes)
    throw graph_file_error(
        fmt::format("graph file: {}: more than {} nodes in the file", where.text(), limits.max_nodes));
  g.nodes.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    g.nodes.push_back(read_node(nodes[i], where.node(i), limits, depth, nodes_seen));
  if (const flat_value conditions = optional_field(j, "conditions"); conditions.valid()) {
    if (!conditions.is_array()) fail(where / "conditions", "an array", conditions);
    const place conditions_place = where / "conditions";
    for (std::size_t i = 0; i < conditions.size(); ++i) {
      const place p = conditions_place.at(i);
      g.conditions.push_back(
          {uint_field<std::uint32_t>(conditions[i], "default", p), bool_field(conditions[i], "reset", p)});
    }
  }
  return g;
}

saved_key read_key(const flat_value& j, const place& where) {
  saved_key k;
  k.exact = bool_field(j, "exact", where);
  k.callable = string_field(j, "callable", where, 1 << 16);
  const flat_value& entries = array_field(j, "entries", where);
  const place entries_place = where / "entries";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const place p = entries_place.at(i);
    const flat_value& e = entries[i];
    k.entries.push_back({uint_field<std::uint64_t>(e, "bits", p), uint_field<std::uint32_t>(e, "size", p),
                         uint_field<std::uint8_t>(e, "role", p, 2), uint_field<std::uint8_t>(e, "kind", p, 5),
                         uint_field<std::uint8_t>(e, "position", p),
                         address_of(field(e, "address", p), p / "address")});
  }
  k.bytes = binary_field(j, "bytes", where);
  if (const flat_value user = optional_field(j, "user_key"); user.valid())
    k.user_key = as_uint(user, ~std::uint64_t{0}, where / "user_key");
  return k;
}

template <class E>
E enum_named(const flat_value& o, std::string_view key, const place& where, std::initializer_list<E> values) {
  const std::string text = string_field(o, key, where, 64);
  for (E v : values)
    if (to_string(v) == text) return v;
  std::string expected;
  for (E v : values) expected += fmt::format("{}\"{}\"", expected.empty() ? "" : ", ", to_string(v));
  fail(where / key, "one of " + expected, field(o, key, where));
}

void read_images(const flat_value& d, graph_file& f) {
  const flat_value& images = array_field(d, "images", {"document"});
  for (std::size_t i = 0; i < images.size(); ++i) {
    const place p{fmt::format("images[{}]", i)};
    f.images.push_back(
        {enum_named(images[i], "format", p, {image_format::cubin, image_format::fatbin, image_format::ptx}),
         string_field(images[i], "source", p), binary_field(images[i], "bytes", p)});
  }
}

void read_kernels(const flat_value& d, graph_file& f) {
  const flat_value& kernels = array_field(d, "kernels", {"document"});
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const place p{fmt::format("kernels[{}]", i)};
    saved_kernel k;
    k.name = string_field(kernels[i], "name", p, 1 << 16);
    if (const flat_value image = optional_field(kernels[i], "image"); image.valid())
      k.image = static_cast<std::uint32_t>(as_uint(image, 0xFFFFFFFEU, p / "image"));
    const flat_value& params = array_field(kernels[i], "parameters", p);
    for (std::size_t q = 0; q < params.size(); ++q) {
      const auto pair = uint_array<std::uint32_t, 2>(params[q], (p / "parameters").at(q));
      k.parameters.emplace_back(pair[0], pair[1]);
    }
    const flat_value& classes = array_field(kernels[i], "classes", p);
    for (std::size_t q = 0; q < classes.size(); ++q)
      k.classes.push_back(static_cast<parameter_class>(as_uint(classes[q], 3, (p / "classes").at(q))));
    f.kernels.push_back(std::move(k));
  }
}

void read_buffers(const flat_value& d, graph_file& f) {
  const flat_value& buffers = array_field(d, "buffers", {"document"});
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const place p{fmt::format("buffers[{}]", i)};
    saved_buffer b;
    b.name = string_field(buffers[i], "name", p, 1024);
    b.memory = enum_named(buffers[i], "memory", p,
                          {buffer_memory::device, buffer_memory::pinned_host, buffer_memory::managed,
                           buffer_memory::host, buffer_memory::graph_allocation});
    b.bytes = uint_field<std::uint64_t>(buffers[i], "bytes", p);
    b.device = int_field(buffers[i], "device", p, -1, 1 << 16);
    b.named = bool_field(buffers[i], "named", p);
    if (optional_field(buffers[i], "contents").valid()) b.contents = binary_field(buffers[i], "contents", p);
    f.buffers.push_back(std::move(b));
  }
}

std::vector<std::string> read_names(const flat_value& d, std::string_view key) {
  const flat_value& names = array_field(d, key, {"document"});
  std::vector<std::string> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out.push_back(text_of(names[i], {fmt::format("{}[{}]", key, i)}, 1024));
  }
  return out;
}

void read_producer(const flat_value& d, graph_file& f) {
  const place p{"producer"};
  const flat_value& j = field(d, "producer", {"document"});
  f.producer.conveyor = string_field(j, "conveyor", p, 64);
  f.producer.cuda_runtime = int_field(j, "cuda_runtime", p, 0, 1 << 24);
  f.producer.driver = int_field(j, "driver", p, 0, 1 << 24);
  f.producer.device = string_field(j, "device", p, 256);
  f.producer.compute_capability = int_field(j, "compute_capability", p, 0, 1000);
}

} // namespace

std::optional<attribute_format> attribute_format_of(std::uint32_t id) noexcept {
  for (const auto& f : attribute_formats)
    if (f.id == id) return f;
  return std::nullopt;
}

std::optional<node_kind> node_kind_named(std::string_view name) noexcept {
  for (node_kind k : all_node_kinds)
    if (to_string(k) == name) return k;
  return std::nullopt;
}

json to_document(const graph_file& file) {
  json d = tables_json(file);
  d["format"] = "conveyor-graph-file";
  d["version"] = file.version;
  d["producer"] = {{"conveyor", file.producer.conveyor},
                   {"cuda_runtime", file.producer.cuda_runtime},
                   {"driver", file.producer.driver},
                   {"device", file.producer.device},
                   {"compute_capability", file.producer.compute_capability}};
  json graphs = json::array();
  for (const auto& g : file.graphs) {
    json j = {{"name", g.name}, {"graph", graph_json(g.graph)}};
    if (g.key) j["key"] = key_json(*g.key);
    graphs.push_back(std::move(j));
  }
  d["graphs"] = std::move(graphs);
  return d;
}

graph_file from_document(const flat_value& d, const graph_file_limits& limits) {
  const place doc{"document"};
  if (!d.is_object()) fail(doc, "a map at the top level", d);
  if (string_field(d, "format", doc, 64) != "conveyor-graph-file")
    fail(doc / "format", "\"conveyor-graph-file\"", field(d, "format", doc));
  graph_file f;
  f.version = uint_field<std::uint32_t>(d, "version", doc);
  read_producer(d, f);
  read_images(d, f);
  read_kernels(d, f);
  read_buffers(d, f);
  f.events = read_names(d, "events");
  f.host_functions = read_names(d, "host_functions");
  const flat_value graphs = array_field(d, "graphs", doc);
  std::size_t nodes_seen = 0;
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    const place p{fmt::format("graphs[{}]", i)};
    named_graph g;
    g.name = string_field(graphs[i], "name", p, 1024);
    g.graph = read_graph(field(graphs[i], "graph", p), {fmt::format("graph '{}'", g.name)}, limits, 0, nodes_seen);
    if (const flat_value key = optional_field(graphs[i], "key"); key.valid()) g.key = read_key(key, p / "key");
    f.graphs.push_back(std::move(g));
  }
  return f;
}

} // namespace conveyor::detail::keep
