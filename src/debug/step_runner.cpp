// The step-through runner (step_runner.hpp): walks of graphs, one launch per node, conditions followed through probe
// graphs, the watch of named buffers.
#include "debug/step_runner.hpp"

#include "conveyor/error.hpp"
#include "conveyor/runtime/device.hpp"
#include "cuda/check.hpp"
#include "cuda/driver.hpp"
#include "kinds/kinds.hpp"

#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>

namespace conveyor::detail {

// ---- buffers ---------------------------------------------------------------------------------------------------

std::size_t element_bytes(element_type t) noexcept {
  switch (t) {
  case element_type::f32: return 4;
  case element_type::f64: return 8;
  case element_type::f16:
  case element_type::bf16: return 2;
  }
  return 4;
}

namespace {

double half_value(std::uint16_t h) {
  const int sign = (h >> 15) != 0 ? -1 : 1;
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31)
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double bfloat16_value(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The T stored at `p` (any alignment).
template <class T>
T load(const unsigned char* p) {
  T v{};
  std::memcpy(&v, p, sizeof v);
  return v;
}

double value_at(const unsigned char* p, element_type t) {
  switch (t) {
  case element_type::f32: return load<float>(p);
  case element_type::f64: return load<double>(p);
  case element_type::f16: return half_value(load<std::uint16_t>(p));
  case element_type::bf16: return bfloat16_value(load<std::uint16_t>(p));
  }
  return 0;
}

// ---- walks -----------------------------------------------------------------------------------------------------

// Each node's successors, from each node's predecessors.
std::vector<std::vector<std::size_t>> successors_of(const std::vector<std::vector<std::size_t>>& preds) {
  std::vector<std::vector<std::size_t>> succs(preds.size());
  for (std::size_t v = 0; v < preds.size(); ++v)
    for (std::size_t u : preds[v]) succs[u].push_back(v);
  return succs;
}

std::vector<std::size_t> topological_order(const std::vector<std::vector<std::size_t>>& preds) {
  const std::size_t n = preds.size();
  const std::vector<std::vector<std::size_t>> succs = successors_of(preds);
  std::vector<std::size_t> missing(n, 0);
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t v = 0; v < n; ++v) {
    missing[v] = preds[v].size();
    if (missing[v] == 0) ready.push(v);
  }
  std::vector<std::size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const std::size_t u = ready.top();
    ready.pop();
    order.push_back(u);
    for (std::size_t v : succs[u])
      if (--missing[v] == 0) ready.push(v);
  }
  return order; // a graph is a DAG: every node is in it
}

std::string node_words(const node_description& d, std::size_t i) {
  return d.label.empty() ? fmt::format("node {} ({})", i, to_string(d.kind))
                         : fmt::format("node {} '{}' ({})", i, d.label, to_string(d.kind));
}

// The description of the child graph of node `i` of `w`: its parent's description holds it with the labels of the
// graph it was copied from (describe applies them by position); null when it does not.
const graph_description* child_description(const graph_walk& w, std::size_t i) {
  const auto& bodies = w.description.nodes[i].bodies;
  return bodies.size() == 1 ? &bodies[0] : nullptr;
}

// Whether `k`'s parameters can be read one by one: the node was read, with its arguments, and their layout is known.
bool parameters_readable(const kernel_snapshot& k) noexcept {
  return k.readable && k.layout != nullptr && k.has_arguments;
}

// "1: 0x40000000 (4 B)": parameter `p` of `k`, its bytes as a little-endian number, or by its size alone over 8 bytes
// ("1: a 60 B struct").
std::string parameter_text(const kernel_snapshot& k, std::size_t p) {
  const auto [offset, size] = (*k.layout)[p];
  if (size > 8) return fmt::format("{}: a {} B struct", p, size);
  std::uint64_t v = 0;
  std::memcpy(&v, k.arguments.data() + offset, size);
  return fmt::format("{}: {:#x} ({} B)", p, v, size);
}

// "0: 0x7f3a00000000 (8 B), 1: 0x40000000 (4 B)": the first 8 parameters (parameter_text), then how many there are.
std::string argument_text(const kernel_snapshot& k) {
  if (!parameters_readable(k)) return {};
  constexpr std::size_t shown = 8;
  std::string out;
  for (std::size_t p = 0; p < std::min(k.layout->size(), shown); ++p)
    out += (p == 0 ? "" : ", ") + parameter_text(k, p);
  if (k.layout->size() > shown) out += fmt::format(", … ({} parameters)", k.layout->size());
  return out;
}

// The word an 8-byte parameter (offset, size) of `arguments` holds, where a condition handle could be; none for a
// parameter of another size.
std::optional<std::uint64_t> handle_word(const unsigned char* arguments, std::pair<std::size_t, std::size_t> param) {
  std::uint64_t word = 0;
  if (param.second != sizeof word) return std::nullopt;
  std::memcpy(&word, arguments + param.first, sizeof word);
  return word;
}

// The kernel node of a probe graph: `k` with its argument bytes replaced by `arguments` (extra cleared) and the
// attributes of node `n`. \throws step_failure when CUDA refuses it.
cudaGraphNode_t add_probe_kernel(cudaGraph_t probe, cudaGraphNode_t n, const step_node& info, const kernel_snapshot& k,
                                 std::vector<unsigned char>& arguments) {
  std::vector<void*> pointers;
  for (const auto& [offset, size] : *k.layout) pointers.push_back(arguments.data() + offset);
  CUDA_KERNEL_NODE_PARAMS params = k.params;
  params.kernelParams = pointers.data();
  params.extra = nullptr;
  CUgraphNode kernel = nullptr;
  if (driver::add_kernel_node(&kernel, reinterpret_cast<CUgraph>(probe), nullptr, 0, &params) != CUDA_SUCCESS ||
      driver::kernel_node_copy_attributes(kernel, reinterpret_cast<CUgraphNode>(n)) != CUDA_SUCCESS)
    throw step_failure(info, cudaErrorInvalidValue, "adding the kernel to a graph of its own (cuGraphAddKernelNode)");
  return reinterpret_cast<cudaGraphNode_t>(kernel);
}

// The conditional node a probe reads condition `c` through: a SWITCH of its case count, else an IF of one body (IF
// and WHILE conditions read zero or not).
std::pair<cudaGraphConditionalNodeType, unsigned> probe_shape(const conditional_info& c) {
  if (c.type == cudaGraphCondTypeSwitch) return {cudaGraphCondTypeSwitch, c.size};
  return {cudaGraphCondTypeIf, 1U};
}

// The value of condition `c` after a probe whose word for it reads `seen` (body b wrote b + 1; 0: no body ran). IF and
// WHILE read zero or not; a SWITCH its case, or no body for a value at or above its case count.
unsigned probe_value(const conditional_info& c, unsigned seen) {
  return c.type == cudaGraphCondTypeSwitch ? (seen == 0 ? c.size : seen - 1) : seen;
}

// A graph of one node, destroyed on scope exit.
struct one_graph {
  cudaGraph_t handle = nullptr;
  one_graph() { CONVEYOR_CHECK(cudaGraphCreate(&handle, 0)); }
  one_graph(const one_graph&) = delete;
  one_graph& operator=(const one_graph&) = delete;
  ~one_graph() { (void)cudaGraphDestroy(handle); }
};

// Device words a probe graph's conditional bodies write, freed on scope exit.
struct probe_words {
  unsigned* data = nullptr;
  explicit probe_words(std::size_t n) {
    CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(unsigned)));
  }
  probe_words(const probe_words&) = delete;
  probe_words& operator=(const probe_words&) = delete;
  ~probe_words() { (void)cudaFree(data); }
};

} // namespace

std::vector<double> read_values(const watched_buffer& b) {
  const std::size_t width = element_bytes(b.type);
  std::vector<unsigned char> bytes(b.count * width);
  CONVEYOR_CHECK(cudaMemcpy(bytes.data(), b.data, bytes.size(), cudaMemcpyDefault));
  std::vector<double> out(b.count);
  for (std::size_t i = 0; i < b.count; ++i) out[i] = value_at(bytes.data() + i * width, b.type);
  return out;
}

buffer_watch::buffer_watch(const std::vector<watched_buffer>& buffers) : buffers_(buffers) {
  for (const auto& b : buffers_) {
    if (b.data == nullptr || b.count == 0)
      throw std::invalid_argument(fmt::format("conveyor::step_through: watched buffer '{}' has no data or no "
                                              "elements",
                                              b.name));
    values_.push_back(read_values(b));
  }
}

void buffer_watch::check(const step_node& node) {
  for (std::size_t k = 0; k < buffers_.size(); ++k) {
    std::vector<double> now = read_values(buffers_[k]);
    const auto& before = values_[k];
    for (std::size_t i = 0; i < now.size(); ++i)
      if (!std::isfinite(now[i]) && std::isfinite(before[i]))
        throw nonfinite_error(node, buffers_[k].name, i, before[i], now[i]);
    values_[k] = std::move(now);
  }
}

graph_walk walk_of(cudaGraph_t g, const graph_state* owner, std::string prefix, std::vector<std::size_t> position,
                   const graph_description* described) {
  graph_walk w;
  w.handle = g;
  w.owner = owner;
  w.prefix = std::move(prefix);
  w.position = std::move(position);
  w.snapshot = snapshot_graph(g);
  w.description = described != nullptr ? *described : describe_graph(g, owner);
  w.predecessors.resize(w.snapshot.nodes.size());
  for (const auto& e : w.snapshot.edges) w.predecessors[std::get<1>(e)].push_back(std::get<0>(e));
  for (auto& p : w.predecessors) {
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
  w.order = topological_order(w.predecessors);
  return w;
}

step_node describe_step(const graph_walk& w, std::size_t i, std::size_t order) {
  const node_description& d = w.description.nodes[i];
  step_node s;
  s.order = order;
  s.path = w.prefix + node_words(d, i);
  s.position = w.position;
  s.position.push_back(i);
  s.kind = d.kind;
  s.label = d.label;
  s.kernel_name = d.kernel_name;
  s.grid = d.grid;
  s.block = d.block;
  s.shared_bytes = d.shared_bytes;
  s.device = d.device;
  if (d.kind == node_kind::kernel) s.arguments = argument_text(w.snapshot.kernels[i]);
  for (std::size_t p : w.predecessors[i]) s.dependencies.push_back(node_words(w.description.nodes[p], p));
  return s;
}

namespace {

// Reads each graph node `i` of `w` embeds into a walk and calls visit(walk), in order (for_each_embedded): a child
// graph with the description its parent's holds, each body of a conditional node Conveyor built with its state. The
// walks are named under `path` and placed under `position`, the node's. Returns false for a conditional node
// Conveyor did not build (nothing visited).
template <typename Visit>
bool for_each_embedded_walk(const graph_walk& w, std::size_t i, const std::string& path,
                            const std::vector<std::size_t>& position, Visit&& visit) {
  const bool child = w.snapshot.kinds[i] == node_kind::child_graph;
  return for_each_embedded(w.snapshot.nodes[i], w.snapshot.kinds[i], w.owner, [&](const embedded_graph& e) {
    std::vector<std::size_t> at = position;
    at.push_back(e.body); // the child graph: the node's one body in descriptions
    visit(child ? walk_of(e.handle, nullptr, path + " > ", std::move(at), child_description(w, i))
                : walk_of(e.handle, e.state, fmt::format("{} > body {} > ", path, e.body), std::move(at)));
  });
}

std::string unknown_conditional(const std::string& where) {
  return fmt::format("conveyor::step_through: {} is a conditional node Conveyor did not build (inside a child graph, "
                     "or adopted from elsewhere): its condition and bodies are unknown, so it cannot be stepped into. "
                     "Build it with conveyor::add_conditional in the graph itself",
                     where);
}

std::string not_runnable(const std::string& where, node_kind kind) {
  return fmt::format(
      "conveyor::step_through: {} cannot run apart from its executable graph ({}). Step through a graph without "
      "it: allocate outside the graph (cudaMalloc, or cudaMallocAsync before the launch) while debugging",
      where,
      kind == node_kind::mem_alloc || kind == node_kind::mem_free
          ? "CUDA reserves the addresses of graph allocations at instantiation, and the nodes after it use them"
          : "a kind step-through does not run");
}

} // namespace

void check_runnable(const graph_walk& w) {
  for (std::size_t i = 0; i < w.snapshot.nodes.size(); ++i) {
    const node_kind kind = w.snapshot.kinds[i];
    if (traits_of(kind).add_copy != nullptr) continue;
    const std::string where = w.prefix + node_words(w.description.nodes[i], i);
    if (!embeds_graphs(kind)) throw std::invalid_argument(not_runnable(where, kind));
    if (!for_each_embedded_walk(w, i, where, {}, [](const graph_walk& body) { check_runnable(body); }))
      throw std::invalid_argument(unknown_conditional(where));
  }
}

std::vector<step_node> list_steps(const graph_state& g) {
  std::vector<step_node> out;
  std::function<void(const graph_walk&)> list = [&](const graph_walk& w) {
    for (std::size_t i : w.order) {
      step_node s = describe_step(w, i, out.size());
      // A node holding graphs is stepped into (check_runnable has refused conditional nodes of unknown bodies).
      if (!embeds_graphs(w.snapshot.kinds[i]) || !for_each_embedded_walk(w, i, s.path, s.position, list))
        out.push_back(std::move(s));
    }
  };
  const graph_walk top = walk_of(g.handle, &g, "", {});
  check_runnable(top);
  list(top);
  return out;
}

// ---- step_runner ---------------------------------------------------------------------------------------------

step_runner::step_runner(const stream& s, const step_options& options) :
    stream_(s),
    options_(options),
    watch_((s.synchronize(), options.nonfinite)) {}

void step_runner::track_conditions(const graph_state& g) {
  for (const auto& [node, info] : g.conditionals) {
    values_[info.handle] = info.default_value;
    conditions_[info.handle] = &info;
    for (const auto& body : info.bodies) track_conditions(*body);
  }
}

step_report step_runner::run(const graph_state& g) {
  const graph_walk top = walk_of(g.handle, &g, "", {});
  check_runnable(top);
  track_conditions(g);
  run_graph(top);
  return report_;
}

void step_runner::run_graph(const graph_walk& w) {
  for (std::size_t i : w.order) run_node(w, i);
}

bool step_runner::disabled(const graph_walk& w, cudaGraphNode_t n) const {
  return disabled_ != nullptr && w.position.empty() && disabled_->contains(n);
}

void step_runner::run_node(const graph_walk& w, std::size_t i) {
  const cudaGraphNode_t n = w.snapshot.nodes[i];
  if (disabled(w, n)) return; // disabled on the executable graph
  const node_kind kind = w.snapshot.kinds[i];
  const step_node info = describe_step(w, i, report_.steps);
  if (kind == node_kind::child_graph) {
    (void)for_each_embedded_walk(w, i, info.path, info.position, [&](const graph_walk& child) { run_graph(child); });
    return;
  }
  if (kind == node_kind::conditional) return run_conditional(w, i, info);
  if (kind == node_kind::kernel && sets_tracked_condition(w.snapshot.kernels[i]))
    return run_probe(n, info, w.snapshot.kernels[i]);
  run_copy(n, kind, info);
}

void step_runner::run_copy(cudaGraphNode_t n, node_kind kind, const step_node& info) {
  one_graph one;
  cudaGraphNode_t copy = nullptr;
  if (const cudaError_t rc = traits_of(kind).add_copy(n, one.handle, &copy); rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw step_failure(info, rc, "adding the node to a graph of its own");
  }
  launch_alone(one.handle, info);
}

bool step_runner::sets_tracked_condition(const kernel_snapshot& k) const {
  if (conditions_.empty() || !parameters_readable(k) || k.has_extra) return false;
  return std::any_of(k.layout->begin(), k.layout->end(), [&](const auto& param) {
    const auto word = handle_word(k.arguments.data(), param);
    return word && conditions_.contains(*word);
  });
}

void step_runner::run_conditional(const graph_walk& w, std::size_t i, const step_node& info) {
  const conditional_info& c = w.owner->conditionals.at(w.snapshot.nodes[i]);
  const unsigned value = values_.at(c.handle);
  switch (c.type) {
  case cudaGraphCondTypeIf:
    if (value != 0) run_body(c, 0, info, info.path + " > body 0 (condition non-zero) > ");
    else if (c.bodies.size() > 1) run_body(c, 1, info, info.path + " > body 1 (condition zero) > ");
    return;
  case cudaGraphCondTypeWhile:
    for (std::size_t iteration = 1; values_.at(c.handle) != 0; ++iteration)
      run_body(c, 0, info, fmt::format("{} > iteration {} > ", info.path, iteration));
    return;
  case cudaGraphCondTypeSwitch:
    if (value < c.bodies.size()) run_body(c, value, info, fmt::format("{} > case {} > ", info.path, value));
    return;
  }
}

void step_runner::run_body(const conditional_info& c, std::size_t b, const step_node& info, const std::string& what) {
  ++report_.iterations;
  std::vector<std::size_t> position = info.position;
  position.push_back(b);
  run_graph(walk_of(c.bodies[b]->handle, c.bodies[b].get(), what, std::move(position)));
}

void step_runner::run_probe(cudaGraphNode_t n, const step_node& info, const kernel_snapshot& k) {
  // The kernel with each tracked condition handle it takes replaced by a handle of the probe graph (starting at the
  // condition's current value), followed by one conditional node per handle whose bodies write which way it went.
  one_graph probe;
  std::optional<device_guard> on_device;
  if (info.device >= 0) on_device.emplace(info.device);
  std::vector<unsigned char> bytes = k.arguments.to_vector();
  const handle_pairs handles = probe_handles(probe.handle, *k.layout, bytes);
  const cudaGraphNode_t kernel = add_probe_kernel(probe.handle, n, info, k, bytes);
  probe_words words(handles.size());
  CONVEYOR_CHECK(cudaMemsetAsync(words.data, 0, handles.size() * sizeof(unsigned), stream_.get()));
  add_probe_readers(probe.handle, kernel, handles, words.data);
  launch_alone(probe.handle, info);
  read_probe(handles, words.data);
}

step_runner::handle_pairs step_runner::probe_handles(cudaGraph_t probe, const parameter_layout& layout,
                                                     std::vector<unsigned char>& arguments) const {
  handle_pairs handles;
  for (const auto& param : layout) {
    const auto word = handle_word(arguments.data(), param);
    if (!word || !conditions_.contains(*word)) continue;
    cudaGraphConditionalHandle mine = 0;
    CONVEYOR_CHECK(cudaGraphConditionalHandleCreate(&mine, probe, values_.at(*word), cudaGraphCondAssignDefault));
    std::memcpy(arguments.data() + param.first, &mine, param.second);
    handles.emplace_back(*word, mine);
  }
  return handles;
}

void step_runner::add_probe_readers(cudaGraph_t probe, cudaGraphNode_t kernel, const handle_pairs& handles,
                                    unsigned* words) const {
  for (std::size_t j = 0; j < handles.size(); ++j) {
    const auto [type, size] = probe_shape(*conditions_.at(handles[j].first));
    auto [cond, bodies] = add_conditional(probe, node_handles(&kernel, 1), handles[j].second, type, size);
    for (std::size_t b = 0; b < bodies.size(); ++b)
      (void)add_memset(bodies[b], {}, words + j, sizeof(unsigned), static_cast<unsigned>(b + 1), 4, 1, 1);
  }
}

void step_runner::read_probe(const handle_pairs& handles, const unsigned* words) {
  std::vector<unsigned> seen(handles.size());
  CONVEYOR_CHECK(cudaMemcpy(seen.data(), words, seen.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (std::size_t j = 0; j < handles.size(); ++j)
    values_[handles[j].first] = probe_value(*conditions_.at(handles[j].first), seen[j]);
}

void step_runner::launch_alone(cudaGraph_t one, const step_node& info) {
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t rc = cudaGraphInstantiate(&exec, one, 0); rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw step_failure(info, rc, "cudaGraphInstantiate");
  }
  cudaError_t rc = cudaGraphLaunch(exec, stream_.get());
  const char* call = "cudaGraphLaunch";
  if (rc == cudaSuccess) {
    rc = cudaStreamSynchronize(stream_.get());
    call = "cudaStreamSynchronize";
  }
  (void)cudaGraphExecDestroy(exec);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw step_failure(info, rc, call);
  }
  after_step(info);
}

void step_runner::after_step(const step_node& info) {
  ++report_.steps;
  if (!watch_.empty()) watch_.check(info);
  if (options_.on_step) options_.on_step(info);
}

} // namespace conveyor::detail
