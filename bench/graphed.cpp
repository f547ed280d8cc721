// The `graphed/` group: changed arguments of a graphed call — rebind vs re-capture vs eager (graphed.hpp).
#include "bench/graphed.hpp"

#include "bench/kernels.hpp"
#include "bench/statistics.hpp"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/error.hpp>

// Internal (src/): the snapshot and comparison update_incremental makes, timed apart for the per-phase split.
#include "cuda/driver.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace conveyor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr int all_floats = rebind_all_floats;
constexpr int one_floats = rebind_one_floats;
constexpr float fixed_b = 0.125F; // what nodes 1..N-1 pass where node 0 passes the argument b

// N tiny kernels reading `all` and `a`; node 0 also reads `one` and `b` (the others a fixed buffer and constant).
// With `remap` set, node 0 does not get `one` itself but a buffer the callable picks by its value (a value the
// callable transforms): rebinding cannot explain the change and falls back to re-capture.
struct tiny_chain {
  int n = 0;
  float* fixed_one = nullptr;
  float* remap = nullptr; // the `one` value that selects remap_a
  float* remap_a = nullptr;
  float* remap_b = nullptr;
  void operator()(const conveyor::stream& s, float* all, float a, float* one, float b) const {
    float* first = remap == nullptr ? one : (one == remap ? remap_a : remap_b);
    for (int i = 0; i < n; ++i)
      launch_rebind_tiny(s.get(), all, a, i == 0 ? first : fixed_one, i == 0 ? b : fixed_b, i);
    conveyor::check_launch("rebind_tiny (graphed/ benchmark)");
  }
};

struct device_floats {
  float* p = nullptr;
  explicit device_floats(std::size_t n) {
    CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)));
    CONVEYOR_CHECK(cudaMemset(p, 0, n * sizeof(float)));
  }
  device_floats(const device_floats&) = delete;
  device_floats& operator=(const device_floats&) = delete;
  ~device_floats() { (void)cudaFree(p); }
  [[nodiscard]] std::vector<float> download(std::size_t n) const {
    std::vector<float> out(n);
    CONVEYOR_CHECK(cudaMemcpy(out.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }
};

// The arguments of call `i` of a case: which pointer or scalar changes from call to call.
enum class change { none, pointer_all, pointer_one, scalar_all, scalar_one };

struct buffers {
  device_floats all1{all_floats}, all2{all_floats}, one1{one_floats}, one2{one_floats}, fixed{one_floats};
  device_floats alt1{one_floats}, alt2{one_floats};
};

struct call_args {
  float* all;
  float a;
  float* one;
  float b;
};

call_args args_for(change c, int i, buffers& b) {
  call_args out{b.all1.p, 1.0F, b.one1.p, 2.0F};
  const bool odd = i % 2 != 0;
  switch (c) {
  case change::none: break;
  case change::pointer_all: out.all = odd ? b.all2.p : b.all1.p; break;
  case change::pointer_one: out.one = odd ? b.one2.p : b.one1.p; break;
  case change::scalar_all: out.a = 1.0F + 0.5F * static_cast<float>(i % 7); break;
  case change::scalar_one: out.b = 2.0F + 0.25F * static_cast<float>(i % 5); break;
  }
  return out;
}

double us(clock_type::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct timing {
  double median = 0;
  double min = 0;
  double call = 0;
  std::size_t captures = 0;
  std::size_t rebinds = 0;
};

// One case of the group, run call by call: its own buffers, stream and graphed callable. The cases of one N run
// interleaved, one call each in turn, so that every case meets the machine as it is at that moment (a slower stretch
// of the host's clock costs every case alike, and the ratios to eager hold).
class case_runner {
public:
  case_runner(std::size_t n, change c, const conveyor::graphed_options& options, bool transformed) :
      c_(c),
      step_(transformed ? tiny_chain{static_cast<int>(n), b_.fixed.p, b_.one1.p, b_.alt1.p, b_.alt2.p}
                        : tiny_chain{static_cast<int>(n), b_.fixed.p},
            options) {}

  void warm_up(int calls) {
    for (int k = 0; k < calls; ++k) call();
    s_.synchronize();
    before_ = step_.statistics();
  }

  // One timed call: the call alone, and the call with its GPU work finished.
  void timed_call() {
    const auto t0 = clock_type::now();
    call();
    const auto t1 = clock_type::now();
    s_.synchronize();
    times_.push_back(us(clock_type::now() - t0));
    in_call_.push_back(us(t1 - t0));
  }

  [[nodiscard]] timing result() const {
    const auto after = step_.statistics();
    const summary total = summarise(times_);
    return {total.median, total.min, median(in_call_), after.captures - before_.captures,
            after.rebinds - before_.rebinds};
  }

private:
  void call() {
    const call_args x = args_for(c_, i_++, b_);
    step_(s_, x.all, x.a, x.one, x.b);
  }

  buffers b_;
  conveyor::stream s_;
  change c_;
  conveyor::graphed<tiny_chain> step_;
  int i_ = 0;
  conveyor::graphed_statistics before_;
  std::vector<double> times_;
  std::vector<double> in_call_;
};

// Six calls changing every argument in turn, graphed (rebinding) against eager, bitwise.
void check_against_eager(std::size_t n) {
  auto run = [&](const conveyor::graphed_options& options) {
    buffers b;
    conveyor::stream s;
    conveyor::graphed step(tiny_chain{static_cast<int>(n), b.fixed.p}, options);
    const change order[] = {change::none,        change::pointer_all, change::pointer_all, change::pointer_one,
                            change::pointer_one, change::scalar_all,  change::scalar_all,  change::scalar_one,
                            change::scalar_one,  change::pointer_all};
    int i = 0;
    for (change c : order) {
      const call_args x = args_for(c, ++i, b);
      step(s, x.all, x.a, x.one, x.b);
    }
    s.synchronize();
    std::vector<float> out;
    for (const device_floats* d : {&b.all1, &b.all2}) {
      const auto v = d->download(all_floats);
      out.insert(out.end(), v.begin(), v.end());
    }
    for (const device_floats* d : {&b.one1, &b.one2, &b.fixed}) {
      const auto v = d->download(one_floats);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  conveyor::graphed_options rebinding;
  rebinding.warmup_calls = 0;
  rebinding.rebind = conveyor::rebind_policy::learn; // declared: the arguments only flow into node fields
  conveyor::graphed_options eager;
  eager.disabled = true;
  const auto graphed = run(rebinding);
  const auto eager_result = run(eager);
  if (graphed.size() != eager_result.size() ||
      std::memcmp(graphed.data(), eager_result.data(), graphed.size() * sizeof(float)) != 0)
    throw std::runtime_error(
        fmt::format("graphed/ benchmark: N={}: the rebinding graphed results differ from eager", n));
}

} // namespace

std::vector<rebind_row> measure_graphed_rebind(const std::vector<std::size_t>& sizes, int calls) {
  if (sizes.empty() || calls < 1) throw std::invalid_argument("measure_graphed_rebind: need sizes and calls >= 1");
  std::vector<rebind_row> rows;
  for (std::size_t n : sizes) {
    if (n == 0) throw std::invalid_argument("measure_graphed_rebind: N must be at least 1");
    check_against_eager(n);
    conveyor::graphed_options rebinding;
    rebinding.warmup_calls = 0;
    conveyor::graphed_options recapturing = rebinding; // the default: every change re-captures
    conveyor::graphed_options per_node = recapturing;  // ... and is applied node by node
    per_node.recapture = conveyor::recapture_update::per_node;
    rebinding.rebind = conveyor::rebind_policy::learn; // declared: the arguments only flow into node fields
    conveyor::graphed_options eager;
    eager.disabled = true;
    struct spec {
      const char* name;
      const char* what;
      change c;
      const conveyor::graphed_options* options;
      std::size_t reached;
      bool transformed = false;
    };
    const spec specs[] = {
        {"eager", "callable run on the stream (no graph)", change::pointer_all, &eager, 0},
        {"replay", "same arguments: replay", change::none, &rebinding, 0},
        {"pointer-1-node", "pointer change reaching 1 node (declared: rebind)", change::pointer_one, &rebinding, 1},
        {"pointer-all-nodes", "pointer change reaching all N nodes (declared: rebind)", change::pointer_all, &rebinding,
         n},
        {"scalar-1-node", "scalar change reaching 1 node (declared: rebind)", change::scalar_one, &rebinding, 1},
        {"scalar-all-nodes", "scalar change reaching all N nodes (declared: rebind)", change::scalar_all, &rebinding,
         n},
        {"recapture-pointer-1-node", "pointer change reaching 1 node, re-capture (the default)", change::pointer_one,
         &recapturing, 1},
        {"recapture-pointer-all-nodes", "pointer change reaching all N nodes, re-capture (the default)",
         change::pointer_all, &recapturing, n},
        {"recapture-per-node-pointer-1-node", "pointer change reaching 1 node, re-capture applied node by node",
         change::pointer_one, &per_node, 1},
        {"recapture-per-node-pointer-all-nodes", "pointer change reaching all N nodes, re-capture applied node by node",
         change::pointer_all, &per_node, n},
        {"fallback-pointer-1-node", "pointer the callable transforms, 1 node: re-capture (rebind on, learning)",
         change::pointer_one, &rebinding, 1, true},
    };
    double eager_us = 0;
    double replay_us = 0;
    double replay_call_us = 0;
    const std::size_t first = rows.size();
    std::vector<std::unique_ptr<case_runner>> runners;
    for (const spec& sp : specs) {
      runners.push_back(std::make_unique<case_runner>(n, sp.c, *sp.options, sp.transformed));
      runners.back()->warm_up(3);
    }
    for (int k = 0; k < calls; ++k)
      for (auto& r : runners) r->timed_call();
    for (std::size_t j = 0; j < std::size(specs); ++j) {
      const spec& sp = specs[j];
      const timing t = runners[j]->result();
      if (sp.reached == 0 && sp.options == &eager) eager_us = t.median;
      if (sp.c == change::none) {
        replay_us = t.median;
        replay_call_us = t.call;
      }
      rows.push_back({fmt::format("graphed/{}/N={}", sp.name, n), sp.what, n, sp.reached, t.median, t.min, t.call, 0, 0,
                      0, t.captures, t.rebinds});
    }
    for (std::size_t k = first; k < rows.size(); ++k) {
      rows[k].replay_us = replay_us;
      rows[k].replay_call_us = replay_call_us;
      rows[k].eager_us = eager_us;
    }
  }
  return rows;
}

namespace {

// The per-phase samples of measure_recapture_cost, one vector per column.
struct recapture_samples {
  std::vector<double> eager, capture, checks, whole_update, whole_launch, read, compare, update, launch;
  std::vector<double> raw_capture, raw_update, raw_launch, raw_all, raw_read;
  std::vector<double> unchecked_capture, unchecked_update, unchecked_launch;
  [[nodiscard]] recapture_cost medians(std::size_t n) {
    recapture_cost row;
    row.nodes = n;
    row.eager_us = median(eager);
    row.capture_us = median(capture);
    row.checks_us = median(checks); // paired: each round's checked capture less its unchecked one
    row.whole_update_us = median(whole_update);
    row.whole_launch_us = median(whole_launch);
    row.read_us = median(read);
    row.compare_us = median(compare);
    row.update_us = median(update);
    row.launch_us = median(launch);
    row.raw_capture_us = median(raw_capture);
    row.raw_update_us = median(raw_update);
    row.raw_launch_us = median(raw_launch);
    row.raw_all_nodes_us = median(raw_all);
    row.raw_read_us = median(raw_read);
    row.unchecked_capture_us = median(unchecked_capture);
    row.unchecked_update_us = median(unchecked_update);
    row.unchecked_launch_us = median(unchecked_launch);
    return row;
  }
};

// The capture's checks off (capture_options): no default-stream guard, no host-memory walk. The user's promise that
// the callable enqueues nothing on a default stream and copies no pageable host memory.
conveyor::capture_options checks_off() {
  conveyor::capture_options unchecked;
  unchecked.catch_default_streams = false;
  unchecked.host_memory = conveyor::host_memory_check::off;
  return unchecked;
}

// The default path's update and launch (µs of each): one whole-graph update of `exec` to `g`, then the launch until
// finished, the replaced graph destroyed while the GPU runs. Throws when the update was not applied as a whole
// (`path` ends the message: which path, for a body of `n` kernels).
struct update_and_launch {
  double update_us = 0;
  double launch_us = 0;
};
update_and_launch timed_whole_update(conveyor::graph_exec& exec, const conveyor::graph& g, conveyor::stream& s, int n,
                                     std::string_view path) {
  const auto t0 = clock_type::now();
  std::shared_ptr<const void> replaced = detail::current_graph(exec);
  const auto r = exec.update(g);
  const auto t1 = clock_type::now();
  exec.launch(s);
  replaced.reset();
  s.synchronize();
  const auto t2 = clock_type::now();
  if (r.method != conveyor::update_method::whole_graph)
    throw std::runtime_error(
        fmt::format("measure_recapture_cost: N={}: expected a whole-graph update{}, got {}", n, path, r.reason()));
  return {us(t1 - t0), us(t2 - t1)};
}

// One re-capture of `body` with `one` changed (node 0), applied both ways; the times go to `out` unless `keep` is
// false (the first round, whose updates also read the executable graphs' own graphs).
void recapture_round(const tiny_chain& body, buffers& b, conveyor::stream& s, float* one, conveyor::graph_exec& whole,
                     conveyor::graph_exec& per_node, std::optional<detail::graph_snapshot>& before,
                     recapture_samples& out, bool keep) {
  const conveyor::capture_options unchecked = checks_off();
  auto record = [&](const conveyor::capture_options& o) {
    return conveyor::capture(
        s, [&] { body(s, b.all1.p, 1.0F, one, 2.0F); }, o);
  };
  const auto t0 = clock_type::now();
  body(s, b.all1.p, 1.0F, one, 2.0F);
  s.synchronize();
  const auto t1 = clock_type::now();
  conveyor::graph g = record({});
  const auto t2 = clock_type::now();
  std::optional<conveyor::graph> unused(record(unchecked)); // timed without its destruction, as the checked one
  const auto t3_captured = clock_type::now();
  unused.reset();                                                                   // outside every phase
  const update_and_launch whole_path = timed_whole_update(whole, g, s, body.n, ""); // the default path
  // The per-node path, on a capture of its own.
  conveyor::graph h = record({});
  const auto t6 = clock_type::now();
  detail::graph_snapshot next = detail::snapshot_graph(h.get());
  const auto t7 = clock_type::now();
  const auto c = detail::compare_snapshots(*before, next, {});
  const auto t8 = clock_type::now();
  const auto r = per_node.update_incremental(h);
  const auto t9 = clock_type::now();
  per_node.launch(s);
  s.synchronize();
  const auto t10 = clock_type::now();
  if (r.method != conveyor::update_method::per_node || r.nodes_changed != 1 || c.changed.size() != 1)
    throw std::runtime_error(
        fmt::format("measure_recapture_cost: N={}: expected 1 node set, got {}", body.n, r.reason()));
  before = std::move(next);
  if (!keep) return;
  out.eager.push_back(us(t1 - t0));
  out.capture.push_back(us(t2 - t1));
  out.checks.push_back(us(t2 - t1) - us(t3_captured - t2));
  out.whole_update.push_back(whole_path.update_us);
  out.whole_launch.push_back(whole_path.launch_us);
  out.read.push_back(us(t7 - t6));
  out.compare.push_back(us(t8 - t7));
  out.update.push_back(us(t9 - t8));
  out.launch.push_back(us(t10 - t9));
}

// The same re-capture through the Runtime API alone, the anchor of the default path: cudaStreamBeginCapture/
// EndCapture of `body`, cudaGraphExecUpdate, cudaGraphLaunch until finished, the replaced graph destroyed after the
// launch is queued (as graphed does). `previous` is the graph `exec` runs now.
struct raw_path {
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t previous = nullptr;
  raw_path() = default;
  raw_path(const raw_path&) = delete;
  raw_path& operator=(const raw_path&) = delete;
  ~raw_path() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (previous != nullptr) (void)cudaGraphDestroy(previous);
  }
};

cudaGraph_t raw_capture(const tiny_chain& body, float* all, conveyor::stream& s, float* one) {
  cudaGraph_t g = nullptr;
  CONVEYOR_CHECK(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal));
  body(s, all, 1.0F, one, 2.0F);
  CONVEYOR_CHECK(cudaStreamEndCapture(s.get(), &g));
  return g;
}

cudaGraph_t raw_capture(const tiny_chain& body, buffers& b, conveyor::stream& s, float* one) {
  return raw_capture(body, b.all1.p, s, one);
}

// The driver calls a snapshot makes of `g` and nothing else, node by node: the node list, then each node's type,
// kernel parameters, the eight launch attributes it reads of a node without clusters (cluster dimension, access
// policy window, cooperative, priority, memory sync domain map and domain, device-updatable, shared-memory
// carveout) and its dependencies with their edge data. The floor of a read for update_incremental.
void driver_read(cudaGraph_t g) {
  namespace drv = conveyor::detail::driver;
  static constexpr CUlaunchAttributeID read[] = {CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                                 CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                                 CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                                                 CU_LAUNCH_ATTRIBUTE_PRIORITY,
                                                 CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
                                                 CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
                                                 CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
                                                 CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT};
  const auto cu = reinterpret_cast<CUgraph>(g);
  std::size_t count = 0;
  std::vector<CUgraphNode> nodes;
  if (drv::graph_get_nodes(cu, nullptr, &count) == CUDA_SUCCESS) nodes.resize(count);
  if (nodes.empty() || drv::graph_get_nodes(cu, nodes.data(), &count) != CUDA_SUCCESS)
    throw std::runtime_error("driver_read: cuGraphGetNodes failed (or the graph is empty)");
  bool ok = true;
  for (CUgraphNode n : nodes) {
    CUgraphNodeType type{};
    ok = ok && drv::graph_node_get_type(n, &type) == CUDA_SUCCESS;
    CUDA_KERNEL_NODE_PARAMS p{};
    ok = ok && drv::kernel_node_get_params(n, &p) == CUDA_SUCCESS;
    for (CUlaunchAttributeID id : read) {
      CUlaunchAttributeValue v;
      ok = ok && drv::kernel_node_get_attribute(n, id, &v) == CUDA_SUCCESS;
    }
    std::array<CUgraphNode, 4> deps{};
    std::array<CUgraphEdgeData, 4> data{};
    std::size_t d = deps.size();
    ok = ok && drv::node_get_dependencies(n, deps.data(), data.data(), &d) == CUDA_SUCCESS;
  }
  if (!ok) throw std::runtime_error("driver_read: a driver read failed");
}

// The default path with the capture's checks off (checks_off), on an executable graph of its own: the capture,
// the whole-graph update (which then reads the graph's cluster attributes itself: the capture did not) and the
// launch until finished, the replaced graph destroyed while the GPU runs.
void unchecked_round(const tiny_chain& body, buffers& b, conveyor::stream& s, float* one, conveyor::graph_exec& exec,
                     recapture_samples& out, bool keep) {
  const auto t0 = clock_type::now();
  conveyor::graph g = conveyor::capture(
      s, [&] { body(s, b.all1.p, 1.0F, one, 2.0F); }, checks_off());
  const auto t1 = clock_type::now();
  const update_and_launch path = timed_whole_update(exec, g, s, body.n, " with the checks off");
  if (!keep) return;
  out.unchecked_capture.push_back(us(t1 - t0));
  out.unchecked_update.push_back(path.update_us);
  out.unchecked_launch.push_back(path.launch_us);
}

void raw_round(const tiny_chain& body, buffers& b, conveyor::stream& s, float* one, raw_path& raw,
               recapture_samples& out, bool keep) {
  const auto t0 = clock_type::now();
  cudaGraph_t g = raw_capture(body, b, s, one);
  const auto t1 = clock_type::now();
  cudaGraphExecUpdateResultInfo info{};
  CONVEYOR_CHECK(cudaGraphExecUpdate(raw.exec, g, &info));
  const auto t2 = clock_type::now();
  CONVEYOR_CHECK(cudaGraphLaunch(raw.exec, s.get()));
  CONVEYOR_CHECK(cudaGraphDestroy(std::exchange(raw.previous, g)));
  s.synchronize();
  const auto t3 = clock_type::now();
  if (!keep) return;
  out.raw_capture.push_back(us(t1 - t0));
  out.raw_update.push_back(us(t2 - t1));
  out.raw_launch.push_back(us(t3 - t2));
}

// The raw path when every node changed (`all` moves between two buffers at each round), on its own executable
// graph; and the driver's read of a fresh capture (driver_read), the capture and its destruction untimed.
void raw_all_round(const tiny_chain& body, float* all, conveyor::stream& s, raw_path& raw, recapture_samples& out,
                   bool keep) {
  const auto t0 = clock_type::now();
  cudaGraph_t g = raw_capture(body, all, s, body.fixed_one);
  cudaGraphExecUpdateResultInfo info{};
  CONVEYOR_CHECK(cudaGraphExecUpdate(raw.exec, g, &info));
  CONVEYOR_CHECK(cudaGraphLaunch(raw.exec, s.get()));
  CONVEYOR_CHECK(cudaGraphDestroy(std::exchange(raw.previous, g)));
  s.synchronize();
  const auto t1 = clock_type::now();
  cudaGraph_t fresh = raw_capture(body, all, s, body.fixed_one);
  const auto t2 = clock_type::now();
  driver_read(fresh);
  const auto t3 = clock_type::now();
  CONVEYOR_CHECK(cudaGraphDestroy(fresh));
  if (!keep) return;
  out.raw_all.push_back(us(t1 - t0));
  out.raw_read.push_back(us(t3 - t2));
}

} // namespace

std::vector<recapture_cost> measure_recapture_cost(const std::vector<std::size_t>& sizes, int calls) {
  if (sizes.empty() || calls < 1) throw std::invalid_argument("measure_recapture_cost: need sizes and calls >= 1");
  std::vector<recapture_cost> out;
  for (std::size_t n : sizes) {
    if (n == 0) throw std::invalid_argument("measure_recapture_cost: N must be at least 1");
    buffers b;
    conveyor::stream s;
    const tiny_chain body{static_cast<int>(n), b.fixed.p};
    auto first = [&] { return conveyor::capture(s, [&] { body(s, b.all1.p, 1.0F, b.one1.p, 2.0F); }); };
    auto whole = conveyor::instantiate(first());
    auto per_node = conveyor::instantiate(first());
    auto unchecked = conveyor::instantiate(first());
    std::optional<detail::graph_snapshot> before = detail::snapshot_graph(detail::current_graph(per_node)->handle);
    raw_path raw;
    raw.previous = raw_capture(body, b, s, b.one1.p);
    CONVEYOR_CHECK(cudaGraphInstantiate(&raw.exec, raw.previous, 0));
    raw_path raw_all;
    raw_all.previous = raw_capture(body, b.all1.p, s, body.fixed_one);
    CONVEYOR_CHECK(cudaGraphInstantiate(&raw_all.exec, raw_all.previous, 0));
    recapture_samples samples;
    for (int k = 0; k < calls + 1; ++k) {
      float* one = k % 2 == 0 ? b.one2.p : b.one1.p;
      recapture_round(body, b, s, one, whole, per_node, before, samples, k > 0);
      raw_round(body, b, s, one, raw, samples, k > 0);
      unchecked_round(body, b, s, one, unchecked, samples, k > 0);
      raw_all_round(body, k % 2 == 0 ? b.all2.p : b.all1.p, s, raw_all, samples, k > 0);
    }
    out.push_back(samples.medians(n));
  }
  return out;
}

namespace {

// The raw Runtime API's captures of `count` buckets of `chain` on `s` (one graph each; the batch size only selects
// the scalar, as graphed's body does).
std::vector<cudaGraph_t> raw_captures(const conveyor::stream& s, const tiny_chain& chain, std::size_t count, float* all,
                                      float* one) {
  std::vector<cudaGraph_t> graphs;
  for (std::size_t k = count; k >= 1; --k) { // largest first, as prepare
    CONVEYOR_CHECK(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal));
    chain(s, all, static_cast<float>((16 * k) % 7), one, 2.0F);
    cudaGraph_t g = nullptr;
    CONVEYOR_CHECK(cudaStreamEndCapture(s.get(), &g));
    graphs.push_back(g);
  }
  return graphs;
}

// ms of the raw capture, instantiation and upload of `count` buckets, one after another.
double raw_prepare_ms(const conveyor::stream& s, const tiny_chain& chain, std::size_t count, float* all, float* one) {
  const auto t0 = clock_type::now();
  const auto graphs = raw_captures(s, chain, count, all, one);
  std::vector<cudaGraphExec_t> execs;
  for (cudaGraph_t g : graphs) {
    cudaGraphExec_t e = nullptr;
    CONVEYOR_CHECK(cudaGraphInstantiate(&e, g, 0));
    CONVEYOR_CHECK(cudaGraphUpload(e, s.get()));
    execs.push_back(e);
  }
  const double ms = us(clock_type::now() - t0) / 1000.0;
  s.synchronize();
  for (auto e : execs) CONVEYOR_CHECK(cudaGraphExecDestroy(e));
  for (auto g : graphs) CONVEYOR_CHECK(cudaGraphDestroy(g));
  return ms;
}

// ms (wall) of cudaGraphInstantiate of every graph of `graphs`, spread round-robin over `threads` host threads.
double threaded_instantiate_ms(const std::vector<cudaGraph_t>& graphs, int threads) {
  std::vector<cudaGraphExec_t> execs(graphs.size(), nullptr);
  std::vector<cudaError_t> errors(static_cast<std::size_t>(threads), cudaSuccess);
  int device = 0;
  CONVEYOR_CHECK(cudaGetDevice(&device));
  const auto t0 = clock_type::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      errors[static_cast<std::size_t>(t)] = cudaSetDevice(device);
      for (std::size_t i = static_cast<std::size_t>(t); i < graphs.size(); i += static_cast<std::size_t>(threads))
        if (errors[static_cast<std::size_t>(t)] == cudaSuccess)
          errors[static_cast<std::size_t>(t)] = cudaGraphInstantiate(&execs[i], graphs[i], 0);
    });
  for (auto& th : pool) th.join();
  const double ms = us(clock_type::now() - t0) / 1000.0;
  for (auto e : execs)
    if (e != nullptr) CONVEYOR_CHECK(cudaGraphExecDestroy(e));
  for (cudaError_t rc : errors) CONVEYOR_CHECK(rc);
  return ms;
}

// CONVEYOR_WATCH_STREAMS set to "0" (the stream watch off) while it lives; the former value restored after.
class watch_off {
public:
  watch_off() {
    if (const char* was = std::getenv("CONVEYOR_WATCH_STREAMS")) saved_ = was;
    ::setenv("CONVEYOR_WATCH_STREAMS", "0", 1);
  }
  watch_off(const watch_off&) = delete;
  watch_off& operator=(const watch_off&) = delete;
  ~watch_off() {
    saved_ ? (void)::setenv("CONVEYOR_WATCH_STREAMS", saved_->c_str(), 1) : (void)::unsetenv("CONVEYOR_WATCH_STREAMS");
  }

private:
  std::optional<std::string> saved_;
};

// The thread-scaling columns of a prepare_cost row, each the median of `calls` runs.
void measure_instantiate_threads(prepare_cost& row, const conveyor::stream& s, const tiny_chain& chain, int calls,
                                 float* all, float* one) {
  const auto graphs = raw_captures(s, chain, row.buckets, all, one);
  for (std::size_t k = 0; k < instantiate_threads.size(); ++k) {
    std::vector<double> times;
    for (int c = 0; c < calls; ++c) times.push_back(threaded_instantiate_ms(graphs, instantiate_threads[k]));
    row.instantiate_ms[k] = median(times);
  }
  for (auto g : graphs) CONVEYOR_CHECK(cudaGraphDestroy(g));
}

} // namespace

std::vector<prepare_cost> measure_prepare_cost(const std::vector<std::size_t>& bucket_counts, std::size_t nodes,
                                               int calls) {
  if (bucket_counts.empty() || calls < 1) throw std::invalid_argument("measure_prepare_cost: need counts and calls");
  std::vector<prepare_cost> out;
  buffers b;
  conveyor::stream s;
  const tiny_chain chain{static_cast<int>(nodes), b.fixed.p};
  // The batch size only sizes the work (all of it reads `all`): one graph per bucket.
  auto body = [&](const conveyor::stream& cs, conveyor::batch_size rows) {
    chain(cs, b.all1.p, static_cast<float>(rows.padded % 7), b.one1.p, 2.0F);
  };
  // ms of graphed::prepare of `count` buckets with options `o`, on a fresh callable.
  auto prepare_ms = [&](const conveyor::graphed_options& o, std::size_t count) {
    conveyor::graphed step(body, o);
    const auto t0 = clock_type::now();
    step.prepare(s, conveyor::batch_size{1});
    const double ms = us(clock_type::now() - t0) / 1000.0;
    s.synchronize();
    if (step.cached_graphs() != count)
      throw std::runtime_error(
          fmt::format("measure_prepare_cost: prepare cached {} of {} buckets", step.cached_graphs(), count));
    return ms;
  };
  for (std::size_t count : bucket_counts) {
    conveyor::graphed_options o;
    o.max_graphs = count;
    for (std::size_t k = 1; k <= count; ++k) o.buckets.push_back(16 * k);
    conveyor::graphed_options cold = o; // without the warm-up call: the raw side's work
    cold.warmup_calls = 0;
    std::array<conveyor::graphed_options, 2> background{o, o};
    for (std::size_t t = 0; t < background.size(); ++t) {
      background[t].instantiate_in_background = true;
      background[t].instantiate_threads = t + 1;
    }
    prepare_cost row;
    row.buckets = count;
    row.nodes = nodes;
    // The six sides, one run each in turn, the first side rotating from one round to the next, so that all meet the
    // machine alike; medians of `calls` rounds.
    const std::array<std::function<double()>, 6> sides{
        [&] { return prepare_ms(o, count); },
        [&] { return prepare_ms(cold, count); },
        [&] {
          const watch_off off;
          return prepare_ms(cold, count);
        },
        [&] { return prepare_ms(background[0], count); },
        [&] { return prepare_ms(background[1], count); },
        [&] { return raw_prepare_ms(s, chain, count, b.all1.p, b.one1.p); }};
    std::array<std::vector<double>, 6> times;
    for (int c = 0; c < calls; ++c)
      for (std::size_t i = 0; i < sides.size(); ++i) {
        const std::size_t k = (i + static_cast<std::size_t>(c)) % sides.size();
        times[k].push_back(sides[k]());
      }
    row.prepare_ms = median(times[0]);
    row.no_warmup_ms = median(times[1]);
    row.unwatched_ms = median(times[2]);
    row.background_ms = {median(times[3]), median(times[4])};
    row.raw_ms = median(times[5]);
    measure_instantiate_threads(row, s, chain, calls, b.all1.p, b.one1.p);
    out.push_back(row);
  }
  return out;
}

namespace {

// The first `calls` calls of the mixed-shape stream `rows` (each a batch size), run by `run_call`, each timed to the
// end of its stream synchronisation; the `all` buffer after them.
template <class Call>
std::pair<std::vector<double>, std::vector<float>> time_calls(const std::vector<std::size_t>& rows, Call run_call,
                                                              const conveyor::stream& s, const buffers& b) {
  std::vector<double> us;
  for (std::size_t r : rows) {
    const auto t0 = clock_type::now();
    run_call(r);
    s.synchronize();
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  // Every buffer the calls add to: `all` (1 + bucket % 7 a call), `one` and `fixed` (every call adds to them).
  std::vector<float> left = b.all1.download(all_floats);
  for (const device_floats* d : {&b.one1, &b.fixed}) {
    const auto v = d->download(one_floats);
    left.insert(left.end(), v.begin(), v.end());
  }
  return {us, left};
}

first_calls_row first_calls_of(std::string variant, std::vector<double> us, const conveyor::graphed_statistics* st) {
  first_calls_row row;
  row.variant = std::move(variant);
  row.eager = us.size() - (st != nullptr ? st->replays : 0); // a call launches a graph or runs eagerly
  row.replays = st != nullptr ? st->replays : 0;
  row.captures = st != nullptr ? st->captures : 0;
  row.us = std::move(us);
  return row;
}

} // namespace

std::vector<first_calls_row> measure_first_calls(std::size_t nodes, std::size_t buckets, std::size_t calls) {
  if (nodes == 0 || buckets == 0 || calls == 0) throw std::invalid_argument("measure_first_calls: a count of 0");
  std::mt19937 random(7);
  std::uniform_int_distribution<std::size_t> pick(1, buckets);
  std::vector<std::size_t> rows;
  // The buckets' own sizes: a call's key is its shape alone, so a shape's later calls replay (a size inside a bucket
  // is binding, and would re-capture).
  for (std::size_t c = 0; c < calls; ++c) rows.push_back(16 * pick(random));
  conveyor::stream s;
  std::vector<first_calls_row> out;
  std::vector<float> eager_all;
  for (int variant = 0; variant < 3; ++variant) {
    buffers b;
    const tiny_chain chain{static_cast<int>(nodes), b.fixed.p};
    auto body = [&](const conveyor::stream& cs, conveyor::batch_size n) {
      chain(cs, b.all1.p, static_cast<float>(1 + n.padded % 7), b.one1.p, 2.0F);
    };
    conveyor::graphed_options o;
    o.max_graphs = buckets;
    for (std::size_t k = 1; k <= buckets; ++k) o.buckets.push_back(16 * k);
    o.instantiate_in_background = variant == 2;
    conveyor::graphed step(body, o);
    // eager: the bucket's size, as graphed pads it (the same work)
    auto eager = [&](std::size_t r) { body(s, conveyor::batch_size{r}); };
    auto graphed = [&](std::size_t r) { step(s, conveyor::batch_size{r}); };
    auto [us, all] = variant == 0 ? time_calls(rows, eager, s, b) : time_calls(rows, graphed, s, b);
    if (variant == 0) eager_all = all;
    else if (all != eager_all)
      throw std::runtime_error(fmt::format("measure_first_calls: the {} variant left other values than eager",
                                           variant == 1 ? "graphed" : "background"));
    const char* names[] = {"eager", "graphed (instantiates in the call)", "graphed, instantiate_in_background"};
    out.push_back(first_calls_of(names[variant], std::move(us), variant == 0 ? nullptr : &step.statistics()));
    out.back().buckets = buckets;
    out.back().nodes = nodes;
    step.cache().wait_for_background();
  }
  return out;
}

graphed_study_result measure_graphed_study(const study_args& args) {
  const std::vector<std::size_t> sizes =
      args.quick ? std::vector<std::size_t>{10, 1000, 10000} : std::vector<std::size_t>{10, 100, 1000, 10000};
  graphed_study_result result;
  result.rebind = measure_graphed_rebind(sizes, args.quick ? 11 : 21);
  result.recapture = measure_recapture_cost(sizes, args.quick ? 5 : 11);
  result.prepare = measure_prepare_cost({8, 16, 32, 64}, 100, 7);
  result.first_calls = measure_first_calls();
  return result;
}

} // namespace conveyor::bench
