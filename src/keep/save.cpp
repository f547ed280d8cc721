// Saving graphs (docs/graph-files.md): each node through its kind's keep facets (kinds/keep.hpp); the saver below
// owns the file's tables — buffers (named by the program, allocation nodes' ranges, the allocations CUDA knows),
// kernels (mangled name, parameter layout and classes, image), events, host functions, conditions — and refuses,
// naming the node, what has no stated meaning in a file.
#include "conveyor/keep/save.hpp"

#include "conveyor/version.hpp"
#include "cuda/driver.hpp"
#include "execute/graph_exec_impl.hpp"
#include "keep/images.hpp"
#include "keep/save_entries.hpp"
#include "kinds/keep.hpp"
#include "kinds/kind.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

namespace conveyor {

namespace detail::keep {
namespace {

// One buffer's address range in this process.
struct range {
  std::uint64_t base = 0;
  std::uint64_t end = 0; // one past the last byte
  std::uint32_t buffer = 0;
};

// Where the node being saved is, for refusals: "graph 'step' node 3 (kernel 'axpy')", nested bodies included.
struct node_place {
  std::string graph;
  std::vector<std::string> path;
  std::string text() const {
    std::string out = fmt::format("graph '{}'", graph);
    for (const auto& p : path) out += " " + p;
    return out;
  }
};

bool is_nccl(std::string_view name) {
  return name.find("ncclDevKernel") != std::string_view::npos || name.find("ncclKernel") != std::string_view::npos;
}

class saver final : public keep_saver {
public:
  saver(const save_options& options, graph_file& file) : options_(options), file_(file) {}

  void add_named_buffers() {
    for (const auto& b : options_.buffers) {
      if (b.name.empty() || b.pointer == nullptr || b.bytes == 0)
        throw std::invalid_argument(fmt::format("conveyor::save: named buffer '{}': expected a name, an address and "
                                                "a size",
                                                b.name));
      int device = -1;
      const buffer_memory memory = named_memory(b.pointer, device);
      const auto base = reinterpret_cast<std::uint64_t>(b.pointer);
      refuse_named_overlap(b, base);
      named_.push_back({base, base + b.bytes, add_buffer(b.name, memory, b.bytes, device, true, b.pointer)});
    }
  }

  // Allocation nodes of a top-level graph, read before its other nodes so that addresses into them resolve.
  void add_allocations(cudaGraph_t g) {
    for (cudaGraphNode_t n : graph_nodes(g)) {
      if (kind_of(n) != node_kind::mem_alloc) continue;
      cudaMemAllocNodeParams p{};
      CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(n, &p));
      const auto base = reinterpret_cast<std::uint64_t>(p.dptr);
      const std::uint32_t index =
          add_buffer(fmt::format("allocation{}", allocations_.size()), buffer_memory::graph_allocation, p.bytesize,
                     p.poolProps.location.id, false, nullptr);
      allocations_.push_back({base, base + p.bytesize, index});
    }
  }

  saved_graph save_top(const std::string& name, const graph_state& state) {
    place_ = {name, {}};
    conditions_.clear();
    conditions_table_.clear();
    intern_conditions(state);
    saved_graph g = save_graph(state.handle, &state);
    g.conditions = std::move(conditions_table_);
    return g;
  }

  void save_contents() {
    if (!options_.contents) return;
    CONVEYOR_CHECK(cudaDeviceSynchronize());
    for (std::size_t i = 0; i < file_.buffers.size(); ++i) {
      saved_buffer& b = file_.buffers[i];
      if (b.memory == buffer_memory::graph_allocation) continue;
      std::vector<unsigned char> bytes(b.bytes);
      if (b.memory == buffer_memory::host) std::memcpy(bytes.data(), bases_[i], b.bytes);
      else CONVEYOR_CHECK(cudaMemcpy(bytes.data(), bases_[i], b.bytes, cudaMemcpyDefault));
      b.contents = std::move(bytes);
    }
  }

  // ---- keep_saver --------------------------------------------------------------------------------------------
  saved_address address(const void* p, std::uint64_t bytes, std::string_view role) override {
    if (p == nullptr) return {};
    if (const auto a = lookup(p, bytes, role)) return *a;
    bool pageable = false;
    const char side = memory_side(p, &pageable);
    if (pageable || side == 'H')
      refuse(fmt::format("{} {} is pageable host memory that no named buffer holds: a file cannot carry it", role, p),
             "name the buffer in save_options::buffers (load then takes it by name, or allocates it), or use pinned "
             "memory (cudaMallocHost)");
    refuse(fmt::format("{} {} lies in no allocation CUDA knows", role, p),
           "pass addresses of cudaMalloc, cudaMallocHost or cudaMallocManaged memory, or name the buffer");
  }

  void kernel(const kernel_snapshot& k, saved_kernel_node& out) override {
    const std::string name = mangled_name(k.params);
    if (name.empty()) refuse("the driver gives no name for its kernel", "report it: every kernel has a name");
    if (is_nccl(name))
      refuse(fmt::format("it runs the NCCL kernel '{}', whose arguments point into this process's communicator",
                         readable_kernel_name(name.c_str())),
             "save the graph without the collective and capture the collective again in the loading process");
    out.kernel = intern_kernel(name, k);
    out.arguments = k.arguments.to_vector();
    relocate_arguments(file_.kernels[out.kernel], out);
  }

  std::uint32_t event(cudaEvent_t e) override {
    if (const auto it = events_.find(e); it != events_.end()) return it->second;
    std::string name = label_.empty() ? fmt::format("event{}", file_.events.size()) : label_;
    if (std::find(file_.events.begin(), file_.events.end(), name) != file_.events.end())
      name = fmt::format("{}#{}", name, file_.events.size());
    file_.events.push_back(std::move(name));
    return events_[e] = static_cast<std::uint32_t>(file_.events.size() - 1);
  }

  std::uint32_t host_function() override {
    if (label_.empty())
      refuse("an unlabelled host node: a file names a host function by its node's label",
             "label the node (node::label) and register its callable under that name at load "
             "(kernel_registry::add_host)");
    const auto it = std::find(file_.host_functions.begin(), file_.host_functions.end(), label_);
    if (it != file_.host_functions.end()) return static_cast<std::uint32_t>(it - file_.host_functions.begin());
    file_.host_functions.push_back(label_);
    return static_cast<std::uint32_t>(file_.host_functions.size() - 1);
  }

  saved_graph graph(cudaGraph_t g, const graph_state* state) override {
    const std::string label = label_;
    saved_graph out = save_graph(g, state);
    label_ = label;
    return out;
  }

  std::uint32_t allocation(const void* p, std::uint64_t, int) override {
    const auto u = reinterpret_cast<std::uint64_t>(p);
    for (const auto& r : allocations_)
      if (r.base == u) return r.buffer;
    refuse("an allocation node outside a top-level graph", "allocate in the top-level graph");
  }

  std::uint32_t condition(const conditional_info& c) override {
    if (const auto it = conditions_.find(c.handle); it != conditions_.end()) return it->second;
    conditions_table_.push_back({c.default_value, c.reset});
    return conditions_[c.handle] = static_cast<std::uint32_t>(conditions_table_.size() - 1);
  }

protected:
  void raise(std::string_view reason, std::string_view fix) override {
    throw save_error(fmt::format("conveyor::save: {}: {}; fix: {}", place_.text(), reason, fix));
  }

private:
  std::uint32_t add_buffer(std::string name, buffer_memory memory, std::uint64_t bytes, int device, bool named,
                           const void* base) {
    file_.buffers.push_back({std::move(name), memory, bytes, device, named, std::nullopt});
    bases_.push_back(base);
    return static_cast<std::uint32_t>(file_.buffers.size() - 1);
  }

  // The memory a named buffer lies in (pageable host, pinned host or device); `device` is set to its device.
  static buffer_memory named_memory(const void* pointer, int& device) {
    bool pageable = false;
    const char side = memory_side(pointer, &pageable);
    (void)memory_side(pointer, nullptr, &device);
    return pageable ? buffer_memory::host : side == 'H' ? buffer_memory::pinned_host : buffer_memory::device;
  }

  // Refuses named buffer `b`, starting at `base`, when it overlaps one named before it.
  void refuse_named_overlap(const named_buffer& b, std::uint64_t base) const {
    for (const auto& r : named_)
      if (base < r.end && r.base < base + b.bytes)
        throw std::invalid_argument(
            fmt::format("conveyor::save: named buffers '{}' and '{}' overlap", b.name, file_.buffers[r.buffer].name));
  }

  // The range holding address `u` (strictly inside: an address one past a buffer's end is the next allocation's
  // start as often as an end marker) and the `bytes` after it.
  static std::optional<saved_address> in(const std::vector<range>& ranges, std::uint64_t u, std::uint64_t bytes) {
    for (const auto& r : ranges)
      if (u >= r.base && u < r.end && bytes <= r.end - u) return saved_address{r.buffer, u - r.base};
    return std::nullopt;
  }

  // The buffer already in the file holding [u, u + bytes): a named buffer, an allocation node's, one found before.
  std::optional<saved_address> known(std::uint64_t u, std::uint64_t bytes) const {
    if (auto a = in(named_, u, bytes)) return a;
    if (auto a = in(allocations_, u, bytes)) return a;
    return in(found_, u, bytes);
  }

  // The buffer holding [p, p + bytes), without refusing (nullopt: none); refuses an address in the allocation of a
  // named buffer but outside it (the two would no longer alias after load).
  std::optional<saved_address> lookup(const void* p, std::uint64_t bytes, std::string_view role) {
    const auto u = reinterpret_cast<std::uint64_t>(p);
    if (auto a = known(u, bytes)) return a;
    CUdeviceptr base = 0;
    std::size_t size = 0;
    if (driver::mem_get_address_range(&base, &size, static_cast<CUdeviceptr>(u)) != CUDA_SUCCESS) return std::nullopt;
    if (bytes > base + size - u)
      refuse(fmt::format("{} {} reaches {} bytes past the end of its allocation", role, p, bytes - (base + size - u)),
             "check the size");
    refuse_named_part(p, base, size, role);
    return saved_address{add_found(base, size), u - base};
  }

  // Refuses `p`, in the allocation [base, base + size), when a named buffer lies in that allocation too.
  void refuse_named_part(const void* p, CUdeviceptr base, std::size_t size, std::string_view role) {
    for (const auto& r : named_)
      if (r.base < base + size && base < r.end)
        refuse(fmt::format("{} {} lies in the allocation of named buffer '{}' but outside it", role, p,
                           file_.buffers[r.buffer].name),
               "name the whole allocation, or keep the node's addresses inside the named buffer");
  }

  // Adds the allocation [base, base + size) that CUDA knows as a found buffer: its index.
  std::uint32_t add_found(CUdeviceptr base, std::size_t size) {
    int device = -1;
    const buffer_memory memory = allocation_memory(base, device);
    const std::uint32_t index =
        add_buffer(fmt::format("buffer{}", found_.size()), memory, size, memory == buffer_memory::device ? device : -1,
                   false, reinterpret_cast<const void*>(base));
    found_.push_back({base, base + size, index});
    return index;
  }

  // The memory of the allocation starting at `base` (managed, pinned host or device); `device` is set to its device.
  static buffer_memory allocation_memory(CUdeviceptr base, int& device) {
    bool pageable = false;
    const char side = memory_side(reinterpret_cast<const void*>(base), &pageable, &device);
    cudaPointerAttributes attributes{};
    const bool managed = cudaPointerGetAttributes(&attributes, reinterpret_cast<const void*>(base)) == cudaSuccess &&
                         attributes.type == cudaMemoryTypeManaged;
    (void)cudaGetLastError();
    return managed ? buffer_memory::managed : side == 'H' ? buffer_memory::pinned_host : buffer_memory::device;
  }

  static std::string mangled_name(const CUDA_KERNEL_NODE_PARAMS& p) {
    const char* name = nullptr;
    if (p.func != nullptr && driver::func_get_name(&name, p.func) == CUDA_SUCCESS && name != nullptr) return name;
    if (p.kern != nullptr && driver::kernel_get_name(&name, p.kern) == CUDA_SUCCESS && name != nullptr) return name;
    return {};
  }

  // The classes of the kernel's parameters: the registry's, else those the library recorded for a typed launch,
  // else opaque (scanned).
  std::vector<parameter_class> classes_of(const std::string& name, std::size_t count) {
    if (options_.registry != nullptr)
      if (const auto* e = options_.registry->find(name); e != nullptr && e->classes.size() == count) return e->classes;
    if (typed_.empty()) read_typed();
    if (const auto it = typed_.find(name); it != typed_.end() && it->second.size() == count) return it->second;
    return std::vector<parameter_class>(count, parameter_class::opaque);
  }

  // The recorded typed kernels by mangled name (once per save).
  void read_typed() {
    typed_.emplace(std::string{}, std::vector<parameter_class>{}); // read
    for (const void* stub : recorded_kernels()) {
      cudaFunction_t f = nullptr;
      if (cudaGetFuncBySymbol(&f, stub) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      const char* name = nullptr;
      if (driver::func_get_name(&name, reinterpret_cast<CUfunction>(f)) != CUDA_SUCCESS || name == nullptr) continue;
      const auto classes = recorded_kernel_parameters(stub);
      typed_.emplace(name, std::vector<parameter_class>(classes.begin(), classes.end()));
    }
  }

  std::optional<std::uint32_t> image_for(const std::string& name, CUfunction function) {
    if (!options_.embed_images) return std::nullopt;
    std::optional<saved_image> image = find_image(name, function);
    if (!image) return std::nullopt;
    return intern_image(std::move(*image));
  }

  // The kernel's image: Conveyor's own, else the first that an image source of the options gives.
  std::optional<saved_image> find_image(const std::string& name, CUfunction function) const {
    std::optional<saved_image> image = conveyor_image(name, function);
    for (std::size_t i = 0; !image && i < options_.images.size(); ++i)
      image = options_.images[i]->image_of(name, function);
    return image;
  }

  // The index of `image` in the file's table, added unless the same bytes are there.
  std::uint32_t intern_image(saved_image image) {
    for (std::size_t i = 0; i < file_.images.size(); ++i)
      if (file_.images[i].bytes == image.bytes) return static_cast<std::uint32_t>(i);
    file_.images.push_back(std::move(image));
    return static_cast<std::uint32_t>(file_.images.size() - 1);
  }

  std::uint32_t intern_kernel(const std::string& name, const kernel_snapshot& k) {
    for (std::size_t i = 0; i < file_.kernels.size(); ++i)
      if (file_.kernels[i].name == name) return static_cast<std::uint32_t>(i);
    saved_kernel entry;
    entry.name = name;
    for (const auto& [offset, size] : *k.layout)
      entry.parameters.emplace_back(static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(size));
    entry.classes = classes_of(name, entry.parameters.size());
    CUfunction function = k.params.func;
    if (function == nullptr && k.params.kern != nullptr) (void)driver::kernel_get_function(&function, k.params.kern);
    entry.image = image_for(name, function);
    file_.kernels.push_back(std::move(entry));
    return static_cast<std::uint32_t>(file_.kernels.size() - 1);
  }

  // Every condition of `state` and its bodies, in node order, before any node is saved: a kernel that sets a
  // condition may come before its conditional node.
  void intern_conditions(const graph_state& state) {
    if (state.conditionals.empty()) return;
    for (cudaGraphNode_t n : graph_nodes(state.handle)) {
      const auto it = state.conditionals.find(n);
      if (it == state.conditionals.end()) continue;
      (void)condition(it->second);
      for (const auto& body : it->second.bodies) intern_conditions(*body);
    }
  }

  std::optional<std::uint32_t> condition_of(std::uint64_t word) const {
    const auto it = conditions_.find(static_cast<cudaGraphConditionalHandle>(word));
    return it == conditions_.end() ? std::nullopt : std::optional<std::uint32_t>(it->second);
  }

  void zero_word(saved_kernel_node& out, std::uint32_t offset) { std::memset(out.arguments.data() + offset, 0, 8); }

  // A typed pointer parameter: relocated, or refused when it points into no buffer.
  void relocate_pointer(std::size_t param, std::uint32_t offset, saved_kernel_node& out) {
    std::uint64_t word = 0;
    std::memcpy(&word, out.arguments.data() + offset, 8);
    if (word == 0) return;
    const saved_address a = address(reinterpret_cast<const void*>(word), 0, fmt::format("kernel parameter {}", param));
    out.relocations.push_back({offset, relocation_target::buffer, a.buffer, a.offset, true});
    zero_word(out, offset);
  }

  // An opaque parameter (or a condition-typed one): each aligned word inside a buffer, or equal to a condition
  // handle, is relocated (scanned: a heuristic, unless `typed`).
  void scan_words(std::size_t param, std::uint32_t offset, std::uint32_t size, bool conditions_only,
                  saved_kernel_node& out) {
    for (std::uint32_t at = (offset + 7) / 8 * 8; at + 8 <= offset + size; at += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, out.arguments.data() + at, 8);
      if (word == 0) continue;
      if (relocate_condition(param, at, word, conditions_only, out)) continue;
      if (conditions_only) continue;
      relocate_scanned(param, at, word, out);
    }
  }

  // A scanned word equal to a condition handle: relocated (true), else false.
  bool relocate_condition(std::size_t param, std::uint32_t at, std::uint64_t word, bool conditions_only,
                          saved_kernel_node& out) {
    const auto c = condition_of(word);
    if (!c) return false;
    if (options_.strict && !conditions_only) refuse_scanned(param, at);
    out.relocations.push_back({at, relocation_target::condition, *c, 0, conditions_only});
    zero_word(out, at);
    return true;
  }

  // A scanned word inside a buffer: relocated (untyped).
  void relocate_scanned(std::size_t param, std::uint32_t at, std::uint64_t word, saved_kernel_node& out) {
    const auto a = lookup(reinterpret_cast<const void*>(word), 0, fmt::format("kernel parameter {}", param));
    if (!a) return;
    if (options_.strict) refuse_scanned(param, at);
    out.relocations.push_back({at, relocation_target::buffer, a->buffer, a->offset, false});
    zero_word(out, at);
  }

  [[noreturn]] void refuse_scanned(std::size_t param, std::uint32_t at) {
    refuse(fmt::format("kernel parameter {} (argument bytes {}..{}) holds a word inside a buffer, and its type is not "
                       "known (save_options::strict)",
                       param, at, at + 7),
           "register the kernel (kernel_registry::add) or add it through Conveyor's typed calls, so that its "
           "parameter types are known");
  }

  void relocate_arguments(const saved_kernel& k, saved_kernel_node& out) {
    for (std::size_t i = 0; i < k.parameters.size(); ++i) relocate_parameter(i, k.parameters[i], k.classes[i], out);
    std::sort(out.relocations.begin(), out.relocations.end(),
              [](const auto& a, const auto& b) { return a.offset < b.offset; });
  }

  // Parameter `i` at `at` (offset, size), by its class: a typed pointer, scanned words, or a value left alone.
  void relocate_parameter(std::size_t i, std::pair<std::uint32_t, std::uint32_t> at, parameter_class c,
                          saved_kernel_node& out) {
    const auto [offset, size] = at;
    switch (c) {
    case parameter_class::pointer:
      if (size == 8 && offset % 8 == 0) relocate_pointer(i, offset, out);
      break;
    case parameter_class::condition: scan_words(i, offset, size, true, out); break;
    case parameter_class::opaque: scan_words(i, offset, size, false, out); break;
    case parameter_class::value: break;
    }
  }

  // Labels of `g`'s nodes: from `state` by handle, or by position when `state` is the graph a child node copied.
  std::vector<std::string> labels_of(cudaGraph_t g, const std::vector<cudaGraphNode_t>& nodes,
                                     const graph_state* state) {
    std::vector<std::string> out(nodes.size());
    if (state == nullptr || state->labels.empty()) return out;
    const std::vector<cudaGraphNode_t> own = state->handle == g ? nodes : graph_nodes(state->handle);
    for (std::size_t i = 0; i < nodes.size() && i < own.size(); ++i)
      if (const auto it = state->labels.find(own[i]); it != state->labels.end()) out[i] = it->second;
    return out;
  }

  std::vector<saved_dependency> dependencies_of(cudaGraphNode_t n,
                                                const std::unordered_map<cudaGraphNode_t, std::uint32_t>& index) {
    std::size_t count = 0;
    const auto cu = reinterpret_cast<CUgraphNode>(n);
    if (driver::node_get_dependencies(cu, nullptr, nullptr, &count) != CUDA_SUCCESS)
      refuse("its dependencies cannot be read (cuGraphNodeGetDependencies)", "use a driver of CUDA 12.3 or newer");
    std::vector<CUgraphNode> deps(count);
    std::vector<CUgraphEdgeData> data(count);
    if (count > 0 && driver::node_get_dependencies(cu, deps.data(), data.data(), &count) != CUDA_SUCCESS)
      refuse("its dependencies cannot be read (cuGraphNodeGetDependencies)", "use a driver of CUDA 12.3 or newer");
    std::vector<saved_dependency> out;
    for (std::size_t d = 0; d < count; ++d)
      out.push_back(
          {index.at(reinterpret_cast<cudaGraphNode_t>(deps[d])), data[d].from_port, data[d].to_port, data[d].type});
    return out;
  }

  saved_node save_node(cudaGraphNode_t n, const graph_state* state) {
    saved_node out;
    out.kind = kind_of(n);
    out.label = label_;
    const kind_traits& traits = traits_of(out.kind);
    if (traits.keep == nullptr || traits.keep->save == nullptr)
      refuse(traits.keep != nullptr ? traits.keep->refusal : "a kind this version cannot save",
             traits.keep != nullptr ? traits.keep->fix : "use a newer Conveyor");
    traits.keep->save(n, state, *this, out);
    return out;
  }

  saved_graph save_graph(cudaGraph_t g, const graph_state* state) {
    const std::vector<cudaGraphNode_t> nodes = graph_nodes(g);
    const std::vector<std::string> labels = labels_of(g, nodes, state);
    const graph_state* own = state != nullptr && state->handle == g ? state : nullptr;
    const std::unordered_map<cudaGraphNode_t, std::uint32_t> index = index_of(nodes);
    saved_graph out;
    out.captured = state != nullptr && state->captured;
    out.nodes.reserve(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      label_ = labels[i];
      place_.path.push_back(node_step(i, nodes[i], labels[i]));
      saved_node node = save_node(nodes[i], own != nullptr ? own : state);
      node.dependencies = dependencies_of(nodes[i], index);
      out.nodes.push_back(std::move(node));
      place_.path.pop_back();
    }
    return out;
  }

  // Each node's position in `nodes`.
  static std::unordered_map<cudaGraphNode_t, std::uint32_t> index_of(const std::vector<cudaGraphNode_t>& nodes) {
    std::unordered_map<cudaGraphNode_t, std::uint32_t> index;
    for (std::size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i], static_cast<std::uint32_t>(i));
    return index;
  }

  // Node `i` in a refusal's place: "node 3 (kernel 'axpy')", the label when it has one.
  static std::string node_step(std::size_t i, cudaGraphNode_t n, const std::string& label) {
    return label.empty() ? fmt::format("node {} ({})", i, to_string(kind_of(n)))
                         : fmt::format("node {} ({} '{}')", i, to_string(kind_of(n)), label);
  }

public:
  //! Per buffer of the file: its start in this process (null for graph allocations).
  [[nodiscard]] const std::vector<const void*>& bases() const noexcept { return bases_; }

private:
  const save_options& options_;
  graph_file& file_;
  std::vector<const void*> bases_; // per buffer: its start in this process (null for graph allocations)
  std::vector<range> named_;
  std::vector<range> allocations_;
  std::vector<range> found_;
  std::unordered_map<cudaEvent_t, std::uint32_t> events_;
  std::map<cudaGraphConditionalHandle, std::uint32_t> conditions_;
  std::vector<saved_condition> conditions_table_;
  std::map<std::string, std::vector<parameter_class>> typed_;
  node_place place_;
  std::string label_;
};

file_producer producer() {
  file_producer p;
  p.conveyor = version();
  p.cuda_runtime = CUDART_VERSION;
  (void)cudaDriverGetVersion(&p.driver);
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    p.device = prop.name;
    p.compute_capability = prop.major * 10 + prop.minor;
  }
  (void)cudaGetLastError();
  return p;
}

// The graph state an entry names, and whether it is what its executable graph runs.
const graph_state& state_of(const graph_to_save& g, bool& exact) {
  if ((g.definition == nullptr) == (g.executable == nullptr))
    throw std::invalid_argument(fmt::format("conveyor::save: graph '{}': give a graph or an executable graph", g.name));
  exact = true;
  if (g.definition != nullptr) {
    const auto& state = nonempty_state(*g.definition, "conveyor::save", fmt::format("graph '{}'", g.name).c_str());
    check_not_lost(*state, "conveyor::save");
    return *state;
  }
  if (g.executable->empty())
    throw std::invalid_argument(fmt::format("conveyor::save: executable graph '{}' is empty", g.name));
  const exec_state& e = exec_access::state(*g.executable);
  exact = e.st.nodes != overlay::changed && e.over.patched.empty();
  return *current_graph(*g.executable);
}

// Refuses an empty graph name or one of `names` (the names before it, to which it is added).
void check_graph_name(const graph_to_save& g, std::set<std::string>& names) {
  if (g.name.empty() || !names.insert(g.name).second)
    throw std::invalid_argument(fmt::format("conveyor::save: graph name '{}' is empty or given twice", g.name));
}

// Refuses an executable graph whose nodes were changed since its graph was applied, unless `allow_inexact`.
void check_exact(const graph_to_save& g, bool is_exact, bool allow_inexact) {
  if (!is_exact && !allow_inexact)
    throw save_error(fmt::format("conveyor::save: executable graph '{}' has nodes changed by per-node setters since "
                                 "its graph was applied: the file would compute something else; fix: save the graph "
                                 "the setters' values came from, or apply it as a whole (graph_exec::update) first",
                                 g.name));
}

} // namespace

graph_file save_entries(const std::vector<graph_to_save>& graphs, const save_options& options, bool allow_inexact,
                        std::vector<bool>* exact, std::vector<const void*>* bases) {
  graph_file file;
  file.producer = producer();
  saver s(options, file);
  s.add_named_buffers();
  std::set<std::string> names;
  std::vector<const graph_state*> states;
  for (const auto& g : graphs) {
    check_graph_name(g, names);
    bool is_exact = true;
    states.push_back(&state_of(g, is_exact));
    check_exact(g, is_exact, allow_inexact);
    if (exact != nullptr) exact->push_back(is_exact);
    s.add_allocations(states.back()->handle);
  }
  for (std::size_t i = 0; i < graphs.size(); ++i)
    file.graphs.push_back({graphs[i].name, s.save_top(graphs[i].name, *states[i]), {}});
  s.save_contents();
  if (bases != nullptr) *bases = s.bases();
  return file;
}

} // namespace detail::keep

graph_file to_graph_file(const std::vector<graph_to_save>& graphs, const save_options& options) {
  return detail::keep::save_entries(graphs, options, false, nullptr, nullptr);
}

void save(const std::filesystem::path& path, const std::vector<graph_to_save>& graphs, const save_options& options) {
  write_graph_file(path, to_graph_file(graphs, options));
}

void save(const std::filesystem::path& path, const graph& g, const save_options& options, const std::string& name) {
  save(path, {graph_to_save{name, &g, nullptr}}, options);
}

} // namespace conveyor
