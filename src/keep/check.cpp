// graph_file_check: the rules across fields that a loader relies on (docs/graph-files.md, "What a reader checks").
// Every refusal names the graph and node and what was expected.
#include "conveyor/keep/graph_file.hpp"

#include "kinds/keep.hpp"
#include "kinds/kind.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace conveyor {

namespace {

// Largest parameter block CUDA 12.1+ takes (cuLaunchKernel: 32,764 bytes of parameters).
constexpr std::uint64_t max_argument_bytes = 32768;

struct checker {
  const graph_file& file;
  const graph_file_limits& limits;
  std::size_t nodes = 0;
  std::vector<int> allocated; // per buffer: allocation nodes making it

  [[noreturn]] static void fail(const std::string& where, const std::string& what) {
    throw graph_file_error(fmt::format("graph file: {}: {}", where, what));
  }

  static std::string node_place(const std::string& graph, std::size_t i, const saved_node& n) {
    return n.label.empty() ? fmt::format("{} node {} ({})", graph, i, to_string(n.kind))
                           : fmt::format("{} node {} ({} '{}')", graph, i, to_string(n.kind), n.label);
  }

  // a + b * c, or nullopt on overflow.
  static std::optional<std::uint64_t> span_of(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
    if (c != 0 && b > (std::numeric_limits<std::uint64_t>::max() - a) / c) return std::nullopt;
    return a + b * c;
  }

  void range(const saved_address& a, std::uint64_t bytes, const std::string& where, const char* role) const {
    if (a.is_null()) {
      if (bytes != 0) fail(where, fmt::format("{}: a null address for {} bytes", role, bytes));
      return;
    }
    if (a.buffer >= file.buffers.size())
      fail(where, fmt::format("{}: buffer {} of a table of {}", role, a.buffer, file.buffers.size()));
    const saved_buffer& b = file.buffers[a.buffer];
    if (a.offset > b.bytes || bytes > b.bytes - a.offset)
      fail(where, fmt::format("{}: bytes [{}, {}) of buffer '{}', which holds {} bytes", role, a.offset,
                              a.offset + bytes, b.name, b.bytes));
  }

  void tables() {
    image_table();
    for (std::size_t i = 0; i < file.kernels.size(); ++i) kernel_entry(i);
    buffer_table();
    unique_names(file.events, "events");
    unique_names(file.host_functions, "host_functions");
    allocated.assign(file.buffers.size(), 0);
  }

  void image_table() const {
    for (std::size_t i = 0; i < file.images.size(); ++i)
      if (file.images[i].bytes.empty()) fail(fmt::format("images[{}]", i), "an empty image");
  }

  void buffer_table() const {
    std::set<std::string> names;
    for (std::size_t i = 0; i < file.buffers.size(); ++i) {
      const saved_buffer& b = file.buffers[i];
      const std::string where = fmt::format("buffers[{}] '{}'", i, b.name);
      if (b.name.empty() || !names.insert(b.name).second) fail(where, "expected a name unique in the file");
      buffer_contents(b, where);
    }
  }

  // Contents, when given, fill the whole buffer, and only a buffer that is not a graph allocation.
  static void buffer_contents(const saved_buffer& b, const std::string& where) {
    if (!b.contents) return;
    if (b.contents->size() != b.bytes)
      fail(where, fmt::format("contents of {} bytes for a buffer of {}", b.contents->size(), b.bytes));
    if (b.memory == buffer_memory::graph_allocation)
      fail(where, "contents for a graph allocation (made by its allocation node at load, not filled)");
  }

  void kernel_entry(std::size_t i) const {
    const saved_kernel& k = file.kernels[i];
    const std::string where = fmt::format("kernels[{}] '{}'", i, k.name);
    if (k.name.empty()) fail(where, "expected a kernel name");
    if (k.image && *k.image >= file.images.size())
      fail(where, fmt::format("image {} of a table of {}", *k.image, file.images.size()));
    if (k.classes.size() != k.parameters.size())
      fail(where, fmt::format("{} parameter classes for {} parameters", k.classes.size(), k.parameters.size()));
    parameter_layout(k, where);
  }

  // The parameters follow each other by offset, none empty, all inside the largest parameter block.
  static void parameter_layout(const saved_kernel& k, const std::string& where) {
    std::uint64_t end = 0;
    for (const auto& [offset, size] : k.parameters) {
      if (offset < end || size == 0 || std::uint64_t{offset} + size > max_argument_bytes)
        fail(where, fmt::format("parameter at offset {} of {} bytes: expected parameters in order, each inside {} "
                                "bytes",
                                offset, size, max_argument_bytes));
      end = std::uint64_t{offset} + size;
    }
  }

  static void unique_names(const std::vector<std::string>& list, const char* table) {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].empty() || !seen.insert(list[i]).second)
        fail(fmt::format("{}[{}] '{}'", table, i, list[i]), "expected a name unique in its table");
  }

  static std::uint64_t argument_extent(const saved_kernel& k) {
    std::uint64_t end = 0;
    for (const auto& [offset, size] : k.parameters) end = std::max<std::uint64_t>(end, std::uint64_t{offset} + size);
    return end;
  }

  void relocation(const saved_relocation& r, const saved_kernel_node& k, std::size_t conditions,
                  const std::string& where) const {
    const std::string at = fmt::format("relocation at argument offset {}", r.offset);
    relocated_word(r, k, where, at);
    if (r.target == relocation_target::condition) {
      if (r.index >= conditions) fail(where, at + fmt::format(": condition {} of {}", r.index, conditions));
      return;
    }
    range({r.index, r.at}, 0, where, at.c_str());
  }

  // The word a relocation writes: 8-byte aligned, inside the arguments, zero in the file.
  static void relocated_word(const saved_relocation& r, const saved_kernel_node& k, const std::string& where,
                             const std::string& at) {
    if (r.offset % 8 != 0 || std::uint64_t{r.offset} + 8 > k.arguments.size())
      fail(where,
           at + fmt::format(": expected an 8-byte aligned word inside the {} argument bytes", k.arguments.size()));
    const auto word = k.arguments.begin() + r.offset;
    if (std::any_of(word, word + 8, [](unsigned char byte) { return byte != 0; }))
      fail(where, at + ": expected the word zero in the arguments (load writes it)");
  }

  void kernel_node(const saved_kernel_node& k, std::size_t conditions, const std::string& where) const {
    if (k.kernel >= file.kernels.size())
      fail(where, fmt::format("kernel {} of a table of {}", k.kernel, file.kernels.size()));
    const saved_kernel& entry = file.kernels[k.kernel];
    if (k.arguments.size() != argument_extent(entry))
      fail(where, fmt::format("{} argument bytes for kernel '{}', whose parameters take {}", k.arguments.size(),
                              entry.name, argument_extent(entry)));
    launch_shape(k, where);
    relocations(k, conditions, where);
    launch_attributes(k, where);
  }

  static void launch_shape(const saved_kernel_node& k, const std::string& where) {
    for (int d = 0; d < 3; ++d)
      if (k.grid[d] == 0 || k.block[d] == 0) fail(where, "expected a grid and block of at least 1 in each dimension");
  }

  void relocations(const saved_kernel_node& k, std::size_t conditions, const std::string& where) const {
    std::uint64_t last = 0;
    for (std::size_t r = 0; r < k.relocations.size(); ++r) {
      if (r > 0 && k.relocations[r].offset <= last) fail(where, "expected relocations by increasing offset");
      last = k.relocations[r].offset;
      relocation(k.relocations[r], k, conditions, where);
    }
  }

  // Each launch attribute once; an access policy window inside its buffer.
  void launch_attributes(const saved_kernel_node& k, const std::string& where) const {
    std::set<std::uint32_t> ids;
    for (const auto& a : k.attributes) {
      if (!ids.insert(a.id).second) fail(where, fmt::format("launch attribute {} given twice", a.id));
      if (!a.address.is_null()) range(a.address, 0, where, "access policy window");
    }
  }

  void pitched(const saved_pitched& p, const std::array<std::uint64_t, 3>& extent, const std::string& where,
               const char* role) const {
    if (std::find(extent.begin(), extent.end(), std::uint64_t{0}) != extent.end())
      fail(where, "expected a copy extent of at least 1");
    row_pitch(p, extent, where, role);
    slice_rows(p, extent, where, role);
    const std::uint64_t bytes = pitched_bytes(p, extent, where, role);
    if (p.address.is_null()) fail(where, fmt::format("{}: a null address", role));
    range(p.address, bytes, where, role);
  }

  // A copy of more than one row needs a pitch that holds the row.
  static void row_pitch(const saved_pitched& p, const std::array<std::uint64_t, 3>& extent, const std::string& where,
                        const char* role) {
    if ((extent[1] > 1 || extent[2] > 1) && p.pitch < p.position[0] + extent[0])
      fail(where, fmt::format("{}: pitch {} below the row's end {}", role, p.pitch, p.position[0] + extent[0]));
  }

  // A copy reaching past the first slice needs slices (ysize rows) that hold its rows.
  static void slice_rows(const saved_pitched& p, const std::array<std::uint64_t, 3>& extent, const std::string& where,
                         const char* role) {
    if ((extent[2] > 1 || p.position[2] > 0) && p.ysize < p.position[1] + extent[1])
      fail(where,
           fmt::format("{}: {} rows a slice, below the slice's end {}", role, p.ysize, p.position[1] + extent[1]));
  }

  // The bytes the copy reaches from its address; fails when that overflows 64 bits.
  static std::uint64_t pitched_bytes(const saved_pitched& p, const std::array<std::uint64_t, 3>& extent,
                                     const std::string& where, const char* role) {
    // Rows before the last byte: (z * ysize + y) * pitch + x + width.
    const auto rows = span_of(p.position[1] + extent[1] - 1, p.position[2] + extent[2] - 1, p.ysize);
    const auto bytes = rows ? span_of(p.position[0] + extent[0], *rows, p.pitch) : std::nullopt;
    if (!bytes) fail(where, fmt::format("{}: a copy whose size overflows 64 bits", role));
    return *bytes;
  }

  void memset_node(const saved_memset_node& m, const std::string& where) const {
    memset_element(m, where);
    const std::uint64_t row = memset_row(m, where);
    const auto bytes = span_of(row, m.height - 1, m.pitch);
    if (!bytes) fail(where, "a memset whose size overflows 64 bits");
    if (m.destination.is_null()) fail(where, "destination: a null address");
    range(m.destination, *bytes, where, "destination");
  }

  // An element of 1, 2 or 4 bytes, and a value that fits it.
  static void memset_element(const saved_memset_node& m, const std::string& where) {
    constexpr std::array<std::uint32_t, 3> sizes{1, 2, 4};
    if (std::find(sizes.begin(), sizes.end(), m.element_size) == sizes.end())
      fail(where, fmt::format("element size {}: expected 1, 2 or 4", m.element_size));
    if (m.element_size < 4 && m.value >> (8 * m.element_size) != 0)
      fail(where, fmt::format("value {} wider than its {}-byte elements", m.value, m.element_size));
  }

  // The bytes of a row, with a width and height of at least 1 and a pitch that holds the row.
  static std::uint64_t memset_row(const saved_memset_node& m, const std::string& where) {
    if (m.width == 0 || m.height == 0) fail(where, "expected a width and height of at least 1");
    const auto row = span_of(0, m.width, m.element_size);
    if (!row || (m.height > 1 && m.pitch < *row)) fail(where, "expected a pitch at least the row's bytes");
    return *row;
  }

  void reference(const saved_reference& r, node_kind kind, const std::string& where) const {
    const bool host = kind == node_kind::host;
    const std::size_t size = host ? file.host_functions.size() : file.events.size();
    if (r.index >= size)
      fail(where, fmt::format("{} {} of a table of {}", host ? "host function" : "event", r.index, size));
  }

  void allocation(const saved_mem_alloc_node& a, const std::string& where) {
    if (a.buffer >= file.buffers.size() || file.buffers[a.buffer].memory != buffer_memory::graph_allocation)
      fail(where, fmt::format("buffer {}: expected a graph_allocation buffer", a.buffer));
    if (++allocated[a.buffer] > 1)
      fail(where, fmt::format("buffer '{}' made by a second allocation node", file.buffers[a.buffer].name));
  }

  void free_node(const saved_mem_free_node& f, const std::string& where) const {
    if (f.address.is_null() || f.address.buffer >= file.buffers.size() || f.address.offset != 0 ||
        file.buffers[f.address.buffer].memory != buffer_memory::graph_allocation)
      fail(where, "expected the start of a graph_allocation buffer");
  }

  void conditional(const saved_conditional_node& c, const saved_node& n, std::size_t conditions,
                   const std::string& where) const {
    if (c.condition >= conditions) fail(where, fmt::format("condition {} of {}", c.condition, conditions));
    if (!bodies_fit_type(c))
      fail(where, fmt::format("type {} with {} bodies: expected IF 1-2, WHILE 1, SWITCH 1 or more", c.type, c.size));
    if (n.bodies.size() != c.size) fail(where, fmt::format("{} bodies for a size of {}", n.bodies.size(), c.size));
  }

  // The number of bodies each conditional node type takes: IF 1-2, WHILE 1, SWITCH 1 or more.
  struct body_count {
    int type;
    std::uint32_t fewest;
    std::uint32_t most;
  };
  static constexpr std::array<body_count, 3> body_counts{{
      {cudaGraphCondTypeIf, 1, 2},
      {cudaGraphCondTypeWhile, 1, 1},
      {cudaGraphCondTypeSwitch, 1, std::numeric_limits<std::uint32_t>::max()},
  }};

  static bool bodies_fit_type(const saved_conditional_node& c) {
    const auto it =
        std::find_if(body_counts.begin(), body_counts.end(), [&](const body_count& b) { return b.type == c.type; });
    return it != body_counts.end() && c.size >= it->fewest && c.size <= it->most;
  }

  // The parameters' alternative follows the kind (its graph-file facet's payload); a kind no file holds has none.
  static bool matches(node_kind k, const saved_parameters& p) {
    const detail::keep_facets* f = detail::traits_of(k).keep;
    return f != nullptr && f->save != nullptr && p.index() == f->payload;
  }

  // What graph a node sits in: the rules CUDA sets for conditional bodies and child graphs.
  enum class graph_role { top, body, child };

  static bool allowed_in(node_kind k, graph_role role) {
    if (role == graph_role::body) return detail::traits_of(k).allowed_in_body;
    if (role == graph_role::child) return detail::traits_of(k).allowed_in_child;
    return true;
  }

  // One overload per alternative of saved_parameters: the checks of that kind's fields.
  void payload(const std::monostate&, const saved_node&, std::size_t, const std::string&) const {}
  void payload(const saved_kernel_node& k, const saved_node&, std::size_t conditions, const std::string& where) const {
    kernel_node(k, conditions, where);
  }
  void payload(const saved_memcpy_node& c, const saved_node&, std::size_t, const std::string& where) const {
    pitched(c.source, c.extent, where, "source");
    pitched(c.destination, c.extent, where, "destination");
  }
  void payload(const saved_memset_node& m, const saved_node&, std::size_t, const std::string& where) const {
    memset_node(m, where);
  }
  void payload(const saved_reference& r, const saved_node& n, std::size_t, const std::string& where) const {
    reference(r, n.kind, where);
  }
  void payload(const saved_mem_alloc_node& a, const saved_node&, std::size_t, const std::string& where) {
    allocation(a, where);
  }
  void payload(const saved_mem_free_node& f, const saved_node&, std::size_t, const std::string& where) const {
    free_node(f, where);
  }
  void payload(const saved_conditional_node& c, const saved_node& n, std::size_t conditions,
               const std::string& where) const {
    conditional(c, n, conditions, where);
  }

  // The graphs a node of its kind nests: one for a child graph, its bodies for a conditional node, else none.
  static std::size_t nested_graphs(const saved_node& n) {
    if (n.kind == node_kind::child_graph) return 1;
    return n.kind == node_kind::conditional ? n.bodies.size() : 0;
  }

  void parameters(const saved_node& n, std::size_t conditions, const std::string& where) {
    if (!matches(n.kind, n.parameters)) fail(where, "parameters of another kind than the node's");
    std::visit([&](const auto& p) { payload(p, n, conditions, where); }, n.parameters);
    const std::size_t bodies = nested_graphs(n);
    if (n.bodies.size() != bodies) fail(where, fmt::format("{} nested graphs: expected {}", n.bodies.size(), bodies));
  }

  static void edge(const saved_graph& g, std::size_t i, const saved_dependency& d, const std::string& where) {
    if (d.from >= g.nodes.size() || d.from == i)
      fail(where, fmt::format("a dependency on node {} of a graph of {} (itself excluded)", d.from, g.nodes.size()));
    const bool programmatic = programmatic_edge(d);
    if (!full_edge(d) && !programmatic)
      fail(where,
           fmt::format("dependency on node {}: edge data (from_port {}, to_port {}, type {}) that is not a full, "
                       "programmatic or launch-completion edge",
                       d.from, d.from_port, d.to_port, d.type));
    if (programmatic && !kernel_to_kernel(g, d.from, i))
      fail(where, fmt::format("a programmatic dependency on node {}: both ends must be kernel nodes", d.from));
  }

  // A full dependency: no edge data (the node waits for all of the node before it).
  static bool full_edge(const saved_dependency& d) { return d.from_port == 0 && d.to_port == 0 && d.type == 0; }

  // A programmatic or launch-completion edge (its two ends are kernel nodes).
  static bool programmatic_edge(const saved_dependency& d) {
    return d.to_port == 0 && d.type == cudaGraphDependencyTypeProgrammatic &&
           (d.from_port == cudaGraphKernelNodePortProgrammatic ||
            d.from_port == cudaGraphKernelNodePortLaunchCompletion);
  }

  static bool kernel_to_kernel(const saved_graph& g, std::size_t from, std::size_t to) {
    return g.nodes[from].kind == node_kind::kernel && g.nodes[to].kind == node_kind::kernel;
  }

  // Kahn's order: fails naming a node on a cycle when the dependencies have one.
  static void acyclic(const saved_graph& g, const std::string& graph) {
    std::vector<std::size_t> waiting(g.nodes.size());
    const std::vector<std::vector<std::size_t>> next = successors(g, waiting);
    if (ordered_count(next, waiting) != g.nodes.size()) {
      const auto stuck = std::find_if(waiting.begin(), waiting.end(), [](std::size_t w) { return w > 0; });
      fail(graph, fmt::format("its dependencies make a cycle (through node {})", stuck - waiting.begin()));
    }
  }

  // The nodes that depend on each node; `waiting` counts each node's dependencies.
  static std::vector<std::vector<std::size_t>> successors(const saved_graph& g, std::vector<std::size_t>& waiting) {
    std::vector<std::vector<std::size_t>> next(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& d : g.nodes[i].dependencies) {
        ++waiting[i];
        next[d.from].push_back(i);
      }
    return next;
  }

  // How many nodes come in order when the nodes without `waiting` dependencies go first, each releasing its
  // successors; `waiting` is left above zero on the nodes that never came (those on or after a cycle).
  static std::size_t ordered_count(const std::vector<std::vector<std::size_t>>& next,
                                   std::vector<std::size_t>& waiting) {
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < waiting.size(); ++i)
      if (waiting[i] == 0) ready.push_back(i);
    std::size_t done = 0;
    while (!ready.empty()) {
      const std::size_t n = ready.back();
      ready.pop_back();
      ++done;
      for (std::size_t m : next[n])
        if (--waiting[m] == 0) ready.push_back(m);
    }
    return done;
  }

  // The role the graphs nested in a node of `kind` play, for a node in a graph of `role`: a conditional node's
  // bodies are bodies; a child graph is a child, or a body when it sits in a body (CUDA's body rules reach into it).
  static graph_role nested_role(node_kind kind, graph_role role) {
    if (kind == node_kind::conditional) return graph_role::body;
    return role == graph_role::body ? role : graph_role::child;
  }

  void dependencies(const saved_graph& g, std::size_t i, const std::string& at) const {
    std::set<std::uint32_t> from;
    for (const auto& d : g.nodes[i].dependencies) {
      edge(g, i, d, at);
      if (!from.insert(d.from).second) fail(at, fmt::format("two dependencies on node {}", d.from));
    }
  }

  void node(const saved_graph& g, std::size_t i, const std::string& where, std::size_t depth, std::size_t conditions,
            graph_role role) {
    const saved_node& n = g.nodes[i];
    const std::string at = node_place(where, i, n);
    if (!allowed_in(n.kind, role))
      fail(at, role == graph_role::body ? "a kind CUDA does not allow in a conditional body"
                                        : "a kind CUDA does not allow in a child graph");
    dependencies(g, i, at);
    parameters(n, conditions, at);
    for (std::size_t b = 0; b < n.bodies.size(); ++b)
      graph(n.bodies[b], fmt::format("{} body {}", at, b), depth + 1, conditions, nested_role(n.kind, role));
  }

  void graph(const saved_graph& g, const std::string& where, std::size_t depth, std::size_t conditions,
             graph_role role) {
    if (depth > limits.max_depth) fail(where, fmt::format("graphs nested deeper than {} levels", limits.max_depth));
    nodes += g.nodes.size();
    if (nodes > limits.max_nodes) fail(where, fmt::format("more than {} nodes in the file", limits.max_nodes));
    if (depth > 0 && !g.conditions.empty()) fail(where, "a condition table in a nested graph (top-level graphs only)");
    for (std::size_t i = 0; i < g.nodes.size(); ++i) node(g, i, where, depth, conditions, role);
    acyclic(g, where);
  }

  void key(const saved_key& k, const std::string& where) const {
    if (k.entries.size() > 16) fail(where, fmt::format("{} key entries: expected at most 16", k.entries.size()));
    for (const auto& e : k.entries) key_entry(k, e, where);
  }

  // A bytes entry (kind 5) inside the key's bytes; a pointer inside its buffer.
  void key_entry(const saved_key& k, const saved_key_entry& e, const std::string& where) const {
    if (e.kind == 5 && (e.bits > k.bytes.size() || e.size > k.bytes.size() - e.bits))
      fail(where, "a bytes entry outside the key's bytes");
    if (!e.address.is_null()) range(e.address, 0, where, "key pointer");
  }
};

} // namespace

void graph_file_check(const graph_file& file, const graph_file_limits& limits) {
  if (file.version != graph_file_version)
    throw graph_file_error(
        fmt::format("graph file: document version {}, expected {}", file.version, graph_file_version));
  checker c{file, limits, 0, {}};
  c.tables();
  std::set<std::string> names;
  for (const auto& g : file.graphs) {
    const std::string where = fmt::format("graph '{}'", g.name);
    if (g.name.empty() || !names.insert(g.name).second)
      checker::fail(where, "expected a graph name unique in the file");
    c.graph(g.graph, where, 0, g.graph.conditions.size(), checker::graph_role::top);
    if (g.key) c.key(*g.key, where + " key");
  }
}

} // namespace conveyor
