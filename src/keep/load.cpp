// Loading graph files (docs/graph-files.md): each node through its kind's keep facets (kinds/keep.hpp); the loader
// below resolves kernels (registry, then embedded images), binds or allocates buffers and events, makes condition
// handles on the graph that holds their conditional node, and adds dependencies with their edge data. Everything it
// makes is owned by one `resources` value, which the loaded graphs keep alive: a refused load destroys it all.
#include "conveyor/keep/load.hpp"

#include "conveyor/error.hpp"
#include "cuda/compat.hpp"
#include "cuda/driver.hpp"
#include "define/conditional_record.hpp"
#include "kinds/keep.hpp"
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

namespace conveyor {

namespace detail::keep {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// What a load made, destroyed when the last loaded graph (or executable graph made from one) lets go of it.
struct load_resources {
  struct allocation {
    void* pointer = nullptr;
    buffer_memory memory = buffer_memory::device;
  };
  std::vector<allocation> allocations;
  std::vector<cudaLibrary_t> libraries;
  std::vector<cudaEvent_t> events;
  std::vector<std::shared_ptr<std::function<void()>>> hosts;
  [[nodiscard]] bool empty() const noexcept {
    return allocations.empty() && libraries.empty() && events.empty() && hosts.empty();
  }
  load_resources() = default;
  load_resources(const load_resources&) = delete;
  load_resources& operator=(const load_resources&) = delete;
  ~load_resources() {
    for (const auto& a : allocations) {
      if (a.memory == buffer_memory::host) std::free(a.pointer);
      else if (a.memory == buffer_memory::pinned_host) (void)cudaFreeHost(a.pointer);
      else (void)cudaFree(a.pointer);
    }
    for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
    for (cudaLibrary_t l : libraries) (void)cudaLibraryUnload(l);
    if (!libraries.empty()) forget_parameter_layouts();
    (void)cudaGetLastError();
  }
};

// A kernel resolved in this process, for one device.
struct resolved_kernel {
  CUfunction function = nullptr;
  CUkernel kernel = nullptr;
  CUcontext context = nullptr;
};

std::string kernel_text(const saved_kernel& k) {
  const std::string readable = readable_kernel_name(k.name.c_str());
  return readable == k.name ? fmt::format("'{}'", k.name) : fmt::format("'{}' (mangled '{}')", readable, k.name);
}

class loader final : public keep_loader {
public:
  loader(const graph_file& file, const load_options& options) : file_(file), options_(options) {}

  std::shared_ptr<load_resources> made = std::make_shared<load_resources>();
  std::vector<loaded_buffer> buffers;
  loaded_graphs::timing spent;

  void bind_buffers() {
    const auto t0 = clock_type::now();
    for (const auto& b : options_.buffers)
      if (std::none_of(file_.buffers.begin(), file_.buffers.end(), [&](const auto& f) { return f.name == b.name; }))
        throw load_error(
            fmt::format("conveyor::load: load_options::buffers names '{}', which the file does not have", b.name));
    for (const auto& b : file_.buffers) buffers.push_back(bind(b));
    spent.buffers += seconds_since(t0);
  }

  void bind_events() {
    for (const auto& name : file_.events) {
      const auto it =
          std::find_if(options_.events.begin(), options_.events.end(), [&](const auto& e) { return e.name == name; });
      if (it != options_.events.end()) {
        events_.push_back(it->event);
        continue;
      }
      cudaEvent_t e = nullptr;
      CONVEYOR_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      made->events.push_back(e);
      events_.push_back(e);
    }
  }

  void bind_hosts() {
    for (const auto& name : file_.host_functions) {
      auto f = options_.registry != nullptr ? options_.registry->host(name) : nullptr;
      if (!f)
        throw load_error(fmt::format("conveyor::load: host function '{}' is not registered; fix: register its callable "
                                     "under that name (kernel_registry::add_host) and pass the registry in "
                                     "load_options::registry",
                                     name));
      made->hosts.push_back(f);
    }
  }

  graph build(const named_graph& g) {
    const auto t0 = clock_type::now();
    const double kernels_before = spent.kernels; // kernels resolve while nodes are added: counted there, not here
    place_ = fmt::format("graph '{}'", g.name);
    node_.reset();
    conditions_.assign(g.graph.conditions.size(), 0);
    conditions_file_ = &g.graph.conditions;
    graph out;
    auto& state = access::state(out);
    state->captured = g.graph.captured;
    state->clusters.reset(); // not known without a read: whole-graph updates read them
    // What the load made lives as long as the graph and what is made from it; a load that made nothing (buffers,
    // events and kernels all the program's) adds no user object, which every launch would pay for.
    if (!made->empty()) state->keep->add(made);
    fill(state, g.graph);
    spent.graphs += seconds_since(t0) - (spent.kernels - kernels_before);
    return out;
  }

  // ---- keep_loader -------------------------------------------------------------------------------------------
  void* address(const saved_address& a) override {
    if (a.is_null()) return nullptr;
    const loaded_buffer& b = buffers.at(a.buffer);
    if (b.pointer == nullptr)
      throw load_error(fmt::format("conveyor::load: {}: buffer '{}' is a graph allocation not made yet (its allocation "
                                   "node is in another graph loaded later, or not loaded)",
                                   where(), b.name));
    return static_cast<unsigned char*>(b.pointer) + a.offset;
  }

  CUDA_KERNEL_NODE_PARAMS kernel(const saved_kernel_node& k, std::vector<unsigned char>& arguments,
                                 std::vector<void*>& pointers) override {
    const resolved_kernel& r = resolve(k.kernel, k.device);
    const saved_kernel& entry = file_.kernels[k.kernel];
    arguments = k.arguments;
    for (const auto& rel : k.relocations) {
      std::uint64_t word = 0;
      if (rel.target == relocation_target::condition) word = condition(rel.index);
      else word = reinterpret_cast<std::uint64_t>(address({rel.index, rel.at}));
      std::memcpy(arguments.data() + rel.offset, &word, 8);
    }
    pointers.clear();
    for (const auto& [offset, size] : entry.parameters) pointers.push_back(arguments.data() + offset);
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = r.function;
    p.kern = r.function == nullptr ? r.kernel : nullptr;
    p.ctx = r.function == nullptr ? r.context : nullptr;
    p.kernelParams = pointers.empty() ? nullptr : pointers.data();
    return p;
  }

  cudaEvent_t event(std::uint32_t index) override { return events_.at(index); }

  std::function<void()>* host_function(std::uint32_t index) override { return made->hosts.at(index).get(); }

  cudaGraph_t child_graph(const saved_graph& g) override {
    auto body = std::make_shared<graph_state>();
    CONVEYOR_CHECK(cudaGraphCreate(&body->handle, 0));
    body->keep = made_keep_;
    const std::string place = place_;
    const auto outer = node_;
    place_ = where() + " child graph";
    node_.reset();
    fill(body, g);
    place_ = place;
    node_ = outer;
    pending_child_ = body;
    return body->handle;
  }

  cudaGraphConditionalHandle condition(std::uint32_t index) override {
    if (index >= conditions_.size() || conditions_[index] == 0)
      throw load_error(fmt::format("conveyor::load: {}: condition {} is used before the graph holding its conditional "
                                   "node is loaded",
                                   where(), index));
    return conditions_[index];
  }

  void conditional_added(cudaGraphNode_t node, const saved_node& n, const std::vector<cudaGraph_t>& bodies) override {
    const auto& c = std::get<saved_conditional_node>(n.parameters);
    const saved_condition& sc = (*conditions_file_)[c.condition];
    conveyor::condition cond{conditions_[c.condition], current_->handle, sc.default_value, sc.reset};
    (void)record_conditional(current_, node, bodies, cond, {static_cast<cudaGraphConditionalNodeType>(c.type), c.size});
    const auto& info = current_->conditionals.at(node);
    const std::shared_ptr<graph_state> parent = current_;
    const std::string place = place_;
    const auto outer = node_;
    const std::string at = where();
    for (std::size_t b = 0; b < info.bodies.size(); ++b) {
      place_ = fmt::format("{} body {}", at, b);
      node_.reset();
      fill(info.bodies[b], n.bodies[b]);
    }
    place_ = place;
    node_ = outer;
    current_ = parent;
  }

  std::uint64_t allocation_bytes(std::uint32_t buffer) override { return file_.buffers.at(buffer).bytes; }

  void allocated(std::uint32_t buffer, void* pointer) override { buffers.at(buffer).pointer = pointer; }

private:
  loaded_buffer bind(const saved_buffer& b) {
    loaded_buffer out{b.name, nullptr, static_cast<std::size_t>(b.bytes), b.memory, false, false};
    if (b.memory == buffer_memory::graph_allocation) return out; // made by its allocation node
    const auto it =
        std::find_if(options_.buffers.begin(), options_.buffers.end(), [&](const auto& x) { return x.name == b.name; });
    if (it != options_.buffers.end()) {
      if (it->pointer == nullptr || it->bytes < b.bytes)
        throw load_error(fmt::format("conveyor::load: buffer '{}' passed with {} bytes at {}, and the file needs {}",
                                     b.name, it->bytes, it->pointer, b.bytes));
      out.pointer = it->pointer;
      return out;
    }
    out.pointer = allocate(b);
    out.allocated = true;
    if (b.contents && options_.fill_contents) {
      if (b.memory == buffer_memory::host) std::memcpy(out.pointer, b.contents->data(), b.bytes);
      else CONVEYOR_CHECK(cudaMemcpy(out.pointer, b.contents->data(), b.bytes, cudaMemcpyDefault));
      out.filled = true;
    }
    return out;
  }

  void* allocate(const saved_buffer& b) {
    const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(b.bytes), 1);
    void* p = nullptr;
    switch (b.memory) {
    case buffer_memory::host:
      p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
      if (p == nullptr) throw std::bad_alloc();
      break;
    case buffer_memory::pinned_host: CONVEYOR_CHECK(cudaMallocHost(&p, bytes)); break;
    case buffer_memory::managed: CONVEYOR_CHECK(cudaMallocManaged(&p, bytes)); break;
    case buffer_memory::device:
    case buffer_memory::graph_allocation: {
      const device_scope scope(device_for(b.device, fmt::format("buffer '{}'", b.name)));
      CONVEYOR_CHECK(cudaMalloc(&p, bytes));
      break;
    }
    }
    made->allocations.push_back({p, b.memory});
    return p;
  }

  // The current device while it lives.
  struct device_scope {
    int before = 0;
    explicit device_scope(int device) {
      CONVEYOR_CHECK(cudaGetDevice(&before));
      if (device != before) CONVEYOR_CHECK(cudaSetDevice(device));
    }
    ~device_scope() { (void)cudaSetDevice(before); }
    device_scope(const device_scope&) = delete;
    device_scope& operator=(const device_scope&) = delete;
  };

  int device_for(int saved, const std::string& what) const {
    if (saved < 0) {
      int current = 0;
      CONVEYOR_CHECK(cudaGetDevice(&current));
      return current;
    }
    int count = 0;
    CONVEYOR_CHECK(cudaGetDeviceCount(&count));
    if (saved >= count)
      throw load_error(
          fmt::format("conveyor::load: {} was saved on device {}, and {} device(s) are visible", what, saved, count));
    return saved;
  }

  const resolved_kernel& resolve(std::uint32_t index, int device) {
    const auto key = std::pair{index, device};
    if (const auto it = resolved_.find(key); it != resolved_.end()) return it->second;
    const auto t0 = clock_type::now();
    const saved_kernel& k = file_.kernels.at(index);
    const device_scope scope(device_for(device, fmt::format("kernel {}", kernel_text(k))));
    const resolved_kernel r = find_kernel(k);
    if (r.function == nullptr && r.kernel == nullptr)
      throw load_error(fmt::format(
          "conveyor::load: {}: kernel {} cannot be found: it is not in load_options::registry, the file has no image "
          "of it, and this program has not launched it through Conveyor's typed calls; fix: register it "
          "(kernel_registry::add), or save the file where its image is known (a module "
          "loaded through conveyor::kernel_module, or a profile::module_images recorder for library kernels)",
          where(), kernel_text(k)));
    check_layout(k, r);
    spent.kernels += seconds_since(t0);
    return resolved_.emplace(key, r).first->second;
  }

  // Kernel `k` in the current context: the registry's, else the file's image of it, else the program's own recorded
  // kernel; empty when none has it.
  resolved_kernel find_kernel(const saved_kernel& k) {
    resolved_kernel r;
    r.function = registered(k.name);
    if (r.function == nullptr && k.image) r = from_image(k);
    if (r.function == nullptr && r.kernel == nullptr) r.function = recorded(k.name);
    return r;
  }

  // The kernel registered under `name` in load_options::registry, or null.
  CUfunction registered(const std::string& name) const {
    if (options_.registry == nullptr) return nullptr;
    const auto* e = options_.registry->find(name);
    if (e == nullptr) return nullptr;
    cudaFunction_t f = nullptr;
    CONVEYOR_CHECK(cudaGetFuncBySymbol(&f, e->function));
    return reinterpret_cast<CUfunction>(f);
  }

  // The program's own kernel `name` among those its typed calls recorded (make_kernel_args), in the current context,
  // or null.
  CUfunction recorded(const std::string& name) {
    if (!recorded_read_) {
      recorded_read_ = true;
      for (const void* stub : recorded_kernels()) {
        cudaFunction_t f = nullptr;
        const char* n = nullptr;
        if (cudaGetFuncBySymbol(&f, stub) != cudaSuccess) {
          (void)cudaGetLastError();
          continue;
        }
        if (driver::func_get_name(&n, reinterpret_cast<CUfunction>(f)) == CUDA_SUCCESS && n != nullptr)
          recorded_.emplace(n, stub);
      }
    }
    const auto it = recorded_.find(name);
    if (it == recorded_.end()) return nullptr;
    cudaFunction_t f = nullptr;
    CONVEYOR_CHECK(cudaGetFuncBySymbol(&f, it->second));
    return reinterpret_cast<CUfunction>(f);
  }

  resolved_kernel from_image(const saved_kernel& k) {
    const std::uint32_t image = *k.image;
    if (libraries_.size() < file_.images.size()) libraries_.resize(file_.images.size(), nullptr);
    if (libraries_[image] == nullptr) libraries_[image] = load_image(file_.images[image], k);
    resolved_kernel r;
    if (driver::library_get_kernel(&r.kernel, reinterpret_cast<CUlibrary>(libraries_[image]), k.name.c_str()) !=
        CUDA_SUCCESS)
      throw load_error(fmt::format("conveyor::load: the file's image {} has no kernel {}", image, kernel_text(k)));
    r.context = current_context();
    return r;
  }

  // Loads image `i` (which holds kernel `k`, for the refusal) as a library that the load owns.
  cudaLibrary_t load_image(const saved_image& i, const saved_kernel& k) {
    std::vector<unsigned char> bytes = i.bytes;
    if (i.format == image_format::ptx && (bytes.empty() || bytes.back() != 0)) bytes.push_back(0);
    cudaLibrary_t lib = nullptr;
    const cudaError_t rc = cudaLibraryLoadData(&lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      throw load_error(fmt::format("conveyor::load: the image of kernel {} ({}, {} bytes from {}) does not load on "
                                   "this device: {}; fix: register the kernel (kernel_registry::add), or save on a "
                                   "GPU of this architecture",
                                   kernel_text(k), to_string(i.format), i.bytes.size(), i.source,
                                   cudaGetErrorName(rc)));
    }
    made->libraries.push_back(lib);
    return lib;
  }

  // The current context, the device's primary context made current when there is none.
  static CUcontext current_context() {
    CUcontext context = nullptr;
    if (driver::ctx_get_current(&context) != CUDA_SUCCESS || context == nullptr) {
      CONVEYOR_CHECK(cudaFree(nullptr)); // make the device's primary context current
      (void)driver::ctx_get_current(&context);
    }
    return context;
  }

  // The kernel found here takes the parameters the file's arguments were laid out for (another build of it would
  // read them wrongly).
  void check_layout(const saved_kernel& k, const resolved_kernel& r) const {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = r.function;
    p.kern = r.kernel;
    const auto* layout = parameter_layout_ref(p);
    if (layout == nullptr) return; // the driver cannot tell: as for kernels launched directly
    bool same = layout->size() == k.parameters.size();
    for (std::size_t i = 0; same && i < layout->size(); ++i)
      same = (*layout)[i].first == k.parameters[i].first && (*layout)[i].second == k.parameters[i].second;
    if (!same)
      throw load_error(fmt::format("conveyor::load: kernel {} found here takes {} parameters laid out otherwise than "
                                   "the file's {}: another version of the kernel; fix: save the file again with this "
                                   "build, or load with the build that saved it",
                                   kernel_text(k), layout->size(), k.parameters.size()));
  }

  // Condition handles of the conditional nodes of `g`, made on `state`'s graph before its nodes.
  void make_conditions(graph_state& state, const saved_graph& g) {
    for (const auto& n : g.nodes) {
      const auto* c = std::get_if<saved_conditional_node>(&n.parameters);
      if (c == nullptr || conditions_.at(c->condition) != 0) continue;
      const saved_condition& sc = (*conditions_file_)[c->condition];
      CONVEYOR_CHECK(
          cudaGraphConditionalHandleCreate(&conditions_[c->condition], state.handle, sc.default_value,
                                           sc.reset ? static_cast<unsigned>(cudaGraphCondAssignDefault) : 0U));
    }
  }

  static bool full(const saved_dependency& d) { return d.from_port == 0 && d.to_port == 0 && d.type == 0; }

  // Adds `g`'s nodes to the graph of `state` in creation order: each after its full dependencies on earlier nodes
  // (given at creation, as the builder does), its other dependencies right after it, those on later nodes at the end.
  void fill(const std::shared_ptr<graph_state>& state, const saved_graph& g) {
    const std::shared_ptr<graph_state> parent = current_;
    current_ = state;
    const auto keep = made_keep_;
    made_keep_ = state->keep;
    make_conditions(*state, g);
    std::vector<cudaGraphNode_t> nodes;
    nodes.reserve(g.nodes.size());
    std::vector<std::pair<std::size_t, std::size_t>> deferred; // (node, dependency) on a later node
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const saved_node& n = g.nodes[i];
      const std::vector<cudaGraphNode_t> deps = creation_dependencies(n, i, nodes, deferred);
      nodes.push_back(add_node(state, n, i, deps));
      add_other_earlier_edges(state->handle, n, i, nodes);
    }
    for (const auto& [i, d] : deferred)
      edge(state->handle, nodes[g.nodes[i].dependencies[d].from], nodes[i], g.nodes[i].dependencies[d]);
    made_keep_ = keep;
    current_ = parent;
  }

  // The nodes node `i` is created after: its full dependencies on earlier nodes. Those on later nodes (or itself)
  // are added to `deferred`.
  static std::vector<cudaGraphNode_t>
  creation_dependencies(const saved_node& n, std::size_t i, const std::vector<cudaGraphNode_t>& nodes,
                        std::vector<std::pair<std::size_t, std::size_t>>& deferred) {
    std::vector<cudaGraphNode_t> deps;
    for (std::size_t d = 0; d < n.dependencies.size(); ++d) {
      const auto& dep = n.dependencies[d];
      if (dep.from >= i) deferred.emplace_back(i, d);
      else if (full(dep)) deps.push_back(nodes[dep.from]);
    }
    return deps;
  }

  // Adds node `i` to the graph of `state` through its kind's facet, with its label and child graph's state.
  cudaGraphNode_t add_node(const std::shared_ptr<graph_state>& state, const saved_node& n, std::size_t i,
                           const std::vector<cudaGraphNode_t>& deps) {
    const auto outer = node_;
    node_ = {i, n.kind};
    current_ = state;
    cudaGraphNode_t node = traits_of(n.kind).keep->load(n, state->handle, deps, *this);
    current_ = state;
    node_ = outer;
    if (!n.label.empty()) state->labels[node] = n.label;
    if (pending_child_) state->child_bodies[node] = std::move(pending_child_);
    pending_child_.reset();
    return node;
  }

  // The dependencies of node `i` (the last of `nodes`) on earlier nodes that carry edge data.
  static void add_other_earlier_edges(cudaGraph_t g, const saved_node& n, std::size_t i,
                                      const std::vector<cudaGraphNode_t>& nodes) {
    for (const auto& dep : n.dependencies)
      if (dep.from < i && !full(dep)) edge(g, nodes[dep.from], nodes[i], dep);
  }

  static void edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to, const saved_dependency& d) {
    cudaGraphEdgeData data{};
    data.from_port = d.from_port;
    data.to_port = d.to_port;
    data.type = d.type;
    CONVEYOR_CHECK(add_dependencies(g, &from, &to, &data, 1));
  }

  const graph_file& file_;
  const load_options& options_;
  std::vector<cudaEvent_t> events_;
  std::vector<cudaLibrary_t> libraries_;
  std::map<std::pair<std::uint32_t, int>, resolved_kernel> resolved_;
  std::vector<cudaGraphConditionalHandle> conditions_;
  const std::vector<saved_condition>* conditions_file_ = nullptr;
  std::shared_ptr<graph_state> current_;
  std::shared_ptr<conveyor::detail::resources> made_keep_;
  std::shared_ptr<graph_state> pending_child_;
  // Where the loader is, for refusals: the graph (or body) path, and the node being added (rendered by where()).
  std::string place_;
  std::optional<std::pair<std::size_t, node_kind>> node_;
  [[nodiscard]] std::string where() const {
    return node_ ? fmt::format("{} node {} ({})", place_, node_->first, to_string(node_->second)) : place_;
  }
  std::map<std::string, const void*> recorded_; // the program's typed kernels by mangled name (read once)
  bool recorded_read_ = false;
};

} // namespace
} // namespace detail::keep

graph& loaded_graphs::at(std::string_view name) {
  for (auto& [n, g] : graphs_)
    if (n == name) return g;
  throw std::out_of_range(fmt::format("conveyor::loaded_graphs::at: no graph '{}' was loaded (loaded: {})", name,
                                      fmt::join(names(), ", ")));
}

std::vector<std::string> loaded_graphs::names() const {
  std::vector<std::string> out;
  for (const auto& [n, g] : graphs_) out.push_back(n);
  return out;
}

const loaded_buffer& loaded_graphs::buffer(std::string_view name) const {
  for (const auto& b : buffers_)
    if (b.name == name) return b;
  throw std::out_of_range(fmt::format("conveyor::loaded_graphs::buffer: the file has no buffer '{}'", name));
}

// The one place that fills a loaded_graphs (the "attorney" of its private members).
struct loaded_graphs_access {
  // `checked`: the file came from read_graph_file, which checked it.
  static loaded_graphs load_file(graph_file loaded, const load_options& options, bool checked);
};

loaded_graphs load(graph_file loaded, const load_options& options) {
  return loaded_graphs_access::load_file(std::move(loaded), options, false);
}

loaded_graphs loaded_graphs_access::load_file(graph_file loaded, const load_options& options, bool checked) {
  auto shared = std::make_shared<const graph_file>(std::move(loaded));
  const graph_file& file = *shared;
  if (!checked) graph_file_check(file);
  for (const auto& name : options.graphs)
    if (file.find(name) == nullptr) throw load_error(fmt::format("conveyor::load: the file has no graph '{}'", name));
  detail::keep::loader l(file, options);
  l.bind_buffers();
  l.bind_events();
  l.bind_hosts();
  loaded_graphs out;
  for (const auto& g : file.graphs) {
    if (!options.graphs.empty() &&
        std::find(options.graphs.begin(), options.graphs.end(), g.name) == options.graphs.end())
      continue;
    out.graphs_.emplace_back(g.name, l.build(g));
  }
  out.buffers_ = std::move(l.buffers);
  out.resources_ = l.made;
  out.spent_ = l.spent;
  out.file_ = std::move(shared);
  return out;
}

loaded_graphs load(const std::filesystem::path& path, const load_options& options) {
  return loaded_graphs_access::load_file(read_graph_file(path), options, true);
}

} // namespace conveyor
