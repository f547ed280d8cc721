// conveyor::profile::profiler: CUPTI Activity API records (kernels, copies, memsets with their executable graph and
// node ids; the runtime and driver API calls that enqueued them; external correlation ids for steps), collected
// into plain values (trace.hpp) for the analysis.

#include "conveyor/profile/profiler.hpp"

#include "conveyor/error.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/kinds.hpp"

#include <cupti.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace conveyor::profile {

namespace {

constexpr std::size_t buffer_alignment = 8; // CUPTI's requirement for activity buffers
constexpr CUpti_ExternalCorrelationKind step_kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

void check_cupti(CUptiResult rc, const char* call) {
  if (rc == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cuptiGetResultString(rc, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  throw profiler_error(fmt::format("conveyor::profile: {} failed: {} ({}){}", call, text, static_cast<int>(rc),
                                   rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                       ? ": another CUPTI tool (compute-sanitizer, Nsight Systems or Compute, a "
                                         "profiler of another library) is attached to the process; run without it"
                                       : ""));
}

std::uint64_t now_ns() noexcept {
  std::uint64_t t = 0;
  (void)cuptiGetTimestamp(&t);
  return t;
}

// CUPTI's memcpy kinds and their names.
constexpr std::array<std::pair<CUpti_ActivityMemcpyKind, const char*>, 5> copy_kinds{{
    {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, "HtoD"},
    {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, "DtoH"},
    {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, "DtoD"},
    {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, "HtoH"},
    {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, "PtoP"},
}};

const char* copy_kind_name(std::uint8_t kind) noexcept {
  const auto it = std::find_if(copy_kinds.begin(), copy_kinds.end(),
                               [&](const auto& k) { return static_cast<std::uint8_t>(k.first) == kind; });
  return it != copy_kinds.end() ? it->second : "other";
}

// The activity kinds a profiler enables, in order (disabled in reverse).
std::vector<CUpti_ActivityKind> kinds_for(const profiler_options& o) {
  std::vector<CUpti_ActivityKind> k{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
                                    CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  if (o.copies) {
    k.push_back(CUPTI_ACTIVITY_KIND_MEMCPY);
    k.push_back(CUPTI_ACTIVITY_KIND_MEMSET);
  }
  return k;
}

thread_local std::uint64_t t_step = 0; // the step the calling thread is in (0: none)

} // namespace

struct profiler::state {
  profiler_options options;
  std::vector<CUpti_ActivityKind> kinds;
  std::mutex mutex; // guards everything below: CUPTI delivers buffers on its own thread
  std::vector<activity> activities;
  std::vector<host_call> host_calls;
  std::unordered_map<std::uint32_t, std::uint64_t> step_of; // correlation id -> step id (external correlation)
  std::vector<step_info> steps;
  std::vector<watched_graph> graphs;
  std::uint64_t dropped = 0;
  std::uint64_t next_step = 1;
  std::mutex control;              // serialises pause() and resume() (never held with `mutex`: CUPTI may deliver
  std::atomic<bool> paused{false}; // a buffer, which takes `mutex`, inside its enable and disable calls)
  std::unordered_map<std::string, std::string> names; // mangled -> readable kernel names, demangled once

  void take(const CUpti_Activity* r);
  void hand_over(trace& t); // the records so far, moved into t (under `mutex`)

private:
  void take_record(const CUpti_Activity* r);                               // a record by its kind
  void hand_over_ended_steps(trace& t);                                    // steps that ended, into t
  void take_kernel(const CUpti_ActivityKernel10* k);                       // a kernel, its name demangled once
  void take_copy(const CUpti_ActivityMemcpy6* m);                          // a memcpy
  void take_memset(const CUpti_ActivityMemset4* m);                        // a memset
  void take_api_call(const CUpti_ActivityAPI* c, CUpti_ActivityKind kind); // a runtime or driver API call
  void take_correlation(const CUpti_ActivityExternalCorrelation* e);       // a step's external correlation id
};

namespace {

std::mutex g_active_mutex; // guards g_active, and a buffer's delivery against the profiler's destruction
profiler::state* g_active = nullptr;
bool g_callbacks_registered = false;
// The CUPTI id of an executable graph made when the process's first profiler started: executable graphs with smaller
// ids were instantiated before (CUPTI numbers them in creation order). Guarded by g_active_mutex.
std::uint32_t g_first_exec_id = 0;

// Instantiates an empty graph and returns its CUPTI id (0 when anything fails).
std::uint32_t current_exec_id() noexcept {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  cudaGraphNode_t n = nullptr;
  std::uint32_t id = 0;
  if (cudaGraphCreate(&g, 0) == cudaSuccess && cudaGraphAddEmptyNode(&n, g, nullptr, 0) == cudaSuccess &&
      cudaGraphInstantiate(&e, g, 0) == cudaSuccess)
    (void)cuptiGetGraphExecId(reinterpret_cast<CUgraphExec>(e), &id);
  if (e != nullptr) (void)cudaGraphExecDestroy(e);
  if (g != nullptr) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();
  return id;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  std::size_t bytes = 8u << 20;
  {
    std::lock_guard lock(g_active_mutex);
    if (g_active != nullptr) bytes = g_active->options.buffer_bytes;
  }
  *buffer = static_cast<std::uint8_t*>(::operator new (bytes, std::align_val_t{buffer_alignment}, std::nothrow));
  *size = *buffer != nullptr ? bytes : 0;
  *max_records = 0; // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  {
    std::lock_guard lock(g_active_mutex);
    if (g_active != nullptr) {
      std::lock_guard records(g_active->mutex);
      CUpti_Activity* r = nullptr;
      while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) g_active->take(r);
      std::size_t dropped = 0;
      if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS)
        g_active->dropped += dropped;
    }
  }
  ::operator delete (buffer, std::align_val_t{buffer_alignment});
}

} // namespace

namespace {

// The fields every GPU activity record (kernel, memcpy, memset) carries alike.
template <class Record>
activity common_fields(activity_kind kind, const Record* r) {
  activity a;
  a.kind = kind;
  a.start_ns = r->start;
  a.end_ns = std::max(r->end, r->start);
  a.device = r->deviceId;
  a.stream = r->streamId;
  a.correlation = r->correlationId;
  a.exec_id = r->graphId;
  a.node_id = r->graphNodeId;
  return a;
}

} // namespace

namespace {

// Whether options.max_records limits records of this kind by the count of activities (kernels, copies, memsets).
bool limited_activity(CUpti_ActivityKind kind) noexcept {
  return kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_MEMCPY ||
         kind == CUPTI_ACTIVITY_KIND_MEMSET;
}

// `name` without its version suffix ("cudaGraphLaunch_v10000" -> "cudaGraphLaunch").
std::string without_version(std::string name) {
  if (const auto v = name.find("_v");
      v != std::string::npos && v + 2 < name.size() && std::isdigit(static_cast<unsigned char>(name[v + 2])))
    name.erase(v);
  return name;
}

// The API call's name without its version suffix ("cudaGraphLaunch_v10000" -> "cudaGraphLaunch"); empty when CUPTI
// has none.
std::string api_call_name(const CUpti_ActivityAPI* c, CUpti_ActivityKind kind) {
  std::string out;
  const char* name = nullptr;
  const auto domain = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
  if (cuptiGetCallbackName(domain, c->cbid, &name) == CUPTI_SUCCESS && name != nullptr) out = name;
  return without_version(std::move(out));
}

} // namespace

void profiler::state::take(const CUpti_Activity* r) {
  if (activities.size() >= options.max_records && limited_activity(r->kind)) {
    ++dropped;
    return;
  }
  take_record(r);
}

void profiler::state::take_record(const CUpti_Activity* r) {
  switch (r->kind) {
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
  case CUPTI_ACTIVITY_KIND_KERNEL: take_kernel(reinterpret_cast<const CUpti_ActivityKernel10*>(r)); break;
  case CUPTI_ACTIVITY_KIND_MEMCPY: take_copy(reinterpret_cast<const CUpti_ActivityMemcpy6*>(r)); break;
  case CUPTI_ACTIVITY_KIND_MEMSET: take_memset(reinterpret_cast<const CUpti_ActivityMemset4*>(r)); break;
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER: take_api_call(reinterpret_cast<const CUpti_ActivityAPI*>(r), r->kind); break;
  case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
    take_correlation(reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(r));
    break;
  default: break;
  }
}

void profiler::state::take_kernel(const CUpti_ActivityKernel10* k) {
  activity a = common_fields(activity_kind::kernel, k);
  const std::string mangled = k->name != nullptr ? k->name : "";
  auto it = names.find(mangled);
  if (it == names.end()) it = names.emplace(mangled, detail::readable_kernel_name(mangled.c_str())).first;
  a.name = it->second;
  a.grid = {static_cast<unsigned>(k->gridX), static_cast<unsigned>(k->gridY), static_cast<unsigned>(k->gridZ)};
  a.block = {static_cast<unsigned>(k->blockX), static_cast<unsigned>(k->blockY), static_cast<unsigned>(k->blockZ)};
  activities.push_back(std::move(a));
}

void profiler::state::take_copy(const CUpti_ActivityMemcpy6* m) {
  activity a = common_fields(activity_kind::memcpy, m);
  a.bytes = m->bytes;
  a.copy_kind = copy_kind_name(m->copyKind);
  a.name = "memcpy " + a.copy_kind;
  activities.push_back(std::move(a));
}

void profiler::state::take_memset(const CUpti_ActivityMemset4* m) {
  activity a = common_fields(activity_kind::memset, m);
  a.bytes = m->bytes;
  a.name = "memset";
  activities.push_back(std::move(a));
}

void profiler::state::take_api_call(const CUpti_ActivityAPI* c, CUpti_ActivityKind kind) {
  if (host_calls.size() >= options.max_records) {
    ++dropped;
    return;
  }
  host_call call;
  call.correlation = c->correlationId;
  call.start_ns = c->start;
  call.end_ns = c->end;
  call.name = api_call_name(c, kind);
  call.graph_launch = call.name.rfind("cudaGraphLaunch", 0) == 0 || call.name.rfind("cuGraphLaunch", 0) == 0;
  host_calls.push_back(std::move(call));
}

void profiler::state::take_correlation(const CUpti_ActivityExternalCorrelation* e) {
  if (step_of.size() >= options.max_records) {
    ++dropped;
    return;
  }
  if (e->externalKind == step_kind) step_of[e->correlationId] = e->externalId;
}

// ---- step_scope ----------------------------------------------------------------------------------------------

step_scope::step_scope(step_scope&& other) noexcept :
    owner_(std::exchange(other.owner_, nullptr)),
    alive_(std::move(other.alive_)),
    id_(std::exchange(other.id_, 0)) {}

step_scope::~step_scope() {
  if (owner_ == nullptr) return;
  if (alive_.lock()) owner_->end_step(id_);
  else profiler::end_orphan_step();
}

void profiler::end_orphan_step() noexcept {
  std::uint64_t popped = 0;
  (void)cuptiActivityPopExternalCorrelationId(step_kind, &popped);
  t_step = 0;
}

// ---- profiler ------------------------------------------------------------------------------------------------

namespace {

void check_options(const profiler_options& options) {
  if (options.buffer_bytes < (64u << 10))
    throw std::invalid_argument(
        fmt::format("conveyor::profile::profiler: buffer_bytes {} is below 64 KiB", options.buffer_bytes));
  if (options.max_records == 0)
    throw std::invalid_argument("conveyor::profile::profiler: max_records must be at least 1");
}

// Makes `s` the process's active profiler, the one CUPTI's buffers go to.
void become_active(profiler::state* s) {
  std::lock_guard lock(g_active_mutex);
  if (g_active != nullptr)
    throw profiler_error("conveyor::profile::profiler: another profiler is active in this process (CUPTI allows "
                         "one); destroy it first");
  g_active = s;
}

// Enables the activity kinds in order; when one fails, disables those enabled before it and throws.
void enable_kinds(const std::vector<CUpti_ActivityKind>& kinds) {
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const CUptiResult rc = cuptiActivityEnable(kinds[i]);
    if (rc != CUPTI_SUCCESS) {
      for (std::size_t j = i; j-- > 0;) (void)cuptiActivityDisable(kinds[j]);
      check_cupti(rc, fmt::format("cuptiActivityEnable(kind {})", static_cast<int>(kinds[i])).c_str());
    }
  }
}

void start_cupti(const std::vector<CUpti_ActivityKind>& kinds) {
  // CUDA must be initialised for CUPTI's timestamps and ids to share the device's clock.
  check(cudaFree(nullptr), "cudaFree(nullptr) (initialising CUDA for the profiler)");
  if (!g_callbacks_registered) {
    check_cupti(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    g_callbacks_registered = true;
  }
  enable_kinds(kinds);
}

// g_first_exec_id, on the process's first profiler.
void note_first_exec_id() {
  // Not under g_active_mutex: instantiating makes CUPTI records, and CUPTI may ask for a buffer (which takes the
  // mutex) on this thread.
  bool first = false;
  {
    std::lock_guard lock(g_active_mutex);
    first = g_first_exec_id == 0;
  }
  if (first) {
    const std::uint32_t id = current_exec_id();
    std::lock_guard lock(g_active_mutex);
    if (g_first_exec_id == 0) g_first_exec_id = id;
  }
}

} // namespace

profiler::profiler(const profiler_options& options) : state_(std::make_unique<state>()) {
  check_options(options);
  state_->options = options;
  state_->kinds = kinds_for(options);
  become_active(state_.get());
  try {
    start_cupti(state_->kinds);
  } catch (...) {
    std::lock_guard lock(g_active_mutex);
    g_active = nullptr;
    throw;
  }
  note_first_exec_id();
}

void profiler::pause() {
  std::lock_guard lock(state_->control);
  if (state_->paused) return;
  for (const auto k : state_->kinds) check_cupti(cuptiActivityDisable(k), "cuptiActivityDisable");
  state_->paused = true;
}

void profiler::resume() {
  std::lock_guard lock(state_->control);
  if (!state_->paused) return;
  for (const auto k : state_->kinds) check_cupti(cuptiActivityEnable(k), "cuptiActivityEnable");
  state_->paused = false;
}

bool profiler::paused() const noexcept { return state_->paused; }

profiler::~profiler() {
  alive_.reset(); // step scopes still open end themselves on their thread's CUPTI stack
  for (auto it = state_->kinds.rbegin(); it != state_->kinds.rend(); ++it) (void)cuptiActivityDisable(*it);
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard lock(g_active_mutex);
  g_active = nullptr;
}

namespace {

// Whether executable graph `id` was instantiated before the process's first profiler started.
bool instantiated_before_profiling(std::uint32_t id) {
  std::lock_guard lock(g_active_mutex);
  return g_first_exec_id != 0 && id < g_first_exec_id;
}

} // namespace

void profiler::watch(const graph_exec& exec, std::string name, graph_description description) {
  if (exec.get() == nullptr)
    throw std::invalid_argument(fmt::format("conveyor::profile::profiler::watch('{}'): an empty (moved-from) "
                                            "executable graph",
                                            name));
  std::uint32_t id = 0;
  check_cupti(cuptiGetGraphExecId(reinterpret_cast<CUgraphExec>(exec.get()), &id), "cuptiGetGraphExecId");
  const bool before = instantiated_before_profiling(id);
  std::lock_guard lock(state_->mutex);
  for (auto& g : state_->graphs)
    if (g.exec_id == id) {
      g.name = std::move(name);
      g.graph = std::move(description);
      g.instantiated_before_profiling = before;
      return;
    }
  state_->graphs.push_back(watched_graph{id, std::move(name), std::move(description), before});
}

step_scope profiler::step(std::string track) {
  if (t_step != 0)
    throw std::logic_error(fmt::format("conveyor::profile::profiler::step('{}'): the calling thread is already in "
                                       "step {}; steps do not nest",
                                       track, t_step));
  std::uint64_t id = 0;
  {
    std::lock_guard lock(state_->mutex);
    id = state_->next_step++;
    state_->steps.push_back(step_info{id, std::move(track), now_ns(), 0});
  }
  check_cupti(cuptiActivityPushExternalCorrelationId(step_kind, id), "cuptiActivityPushExternalCorrelationId");
  t_step = id;
  return step_scope(this, alive_, id);
}

void profiler::end_step(std::uint64_t id) noexcept {
  std::uint64_t popped = 0;
  (void)cuptiActivityPopExternalCorrelationId(step_kind, &popped);
  t_step = 0;
  const std::uint64_t end = now_ns();
  std::lock_guard lock(state_->mutex);
  for (auto it = state_->steps.rbegin(); it != state_->steps.rend(); ++it)
    if (it->id == id) {
      it->host_end_ns = end;
      break;
    }
}

namespace {

using step_map = std::unordered_map<std::uint32_t, std::uint64_t>; // correlation id -> step id

// `step` set to the step of the correlation id, when it has one.
void set_step(std::uint64_t& step, std::uint32_t correlation, const step_map& step_of) {
  if (auto it = step_of.find(correlation); it != step_of.end()) step = it->second;
}

// Each activity's step; the correlation ids that enqueued GPU work.
std::unordered_set<std::uint32_t> step_activities(std::vector<activity>& activities, const step_map& step_of) {
  std::unordered_set<std::uint32_t> enqueued;
  for (auto& a : activities) {
    if (a.correlation == 0) continue;
    enqueued.insert(a.correlation);
    set_step(a.step, a.correlation, step_of);
  }
  return enqueued;
}

// The calls that launched a graph or enqueued GPU work (correlation ids in `enqueued`), with their step, into `out`.
void keep_enqueuing_calls(std::vector<host_call>& calls, const std::unordered_set<std::uint32_t>& enqueued,
                          const step_map& step_of, std::vector<host_call>& out) {
  for (auto& c : calls) {
    if (!c.graph_launch && !enqueued.contains(c.correlation)) continue; // synchronisations, queries, ...
    set_step(c.step, c.correlation, step_of);
    out.push_back(std::move(c));
  }
}

// The current device's name, into t (left empty when CUDA cannot tell).
void add_device_name(trace& t) {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    t.device_name = prop.name;
  else (void)cudaGetLastError();
}

} // namespace

void profiler::state::hand_over(trace& t) {
  t.activities = std::move(activities);
  activities.clear();
  auto calls = std::move(host_calls);
  host_calls.clear();
  auto steps_by_correlation = std::move(step_of);
  step_of.clear();
  t.graphs = graphs; // watched graphs stay watched
  hand_over_ended_steps(t);
  t.dropped_records = std::exchange(dropped, 0);

  const std::unordered_set<std::uint32_t> enqueued = step_activities(t.activities, steps_by_correlation);
  keep_enqueuing_calls(calls, enqueued, steps_by_correlation, t.host_calls);
}

// Steps that ended are handed over; one still open stays for the next collect.
void profiler::state::hand_over_ended_steps(trace& t) {
  std::vector<step_info> open;
  for (auto& s : steps) (s.host_end_ns != 0 ? t.steps : open).push_back(std::move(s));
  steps = std::move(open);
}

trace profiler::collect() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before collecting the profile)");
  check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  trace t;
  {
    std::lock_guard lock(state_->mutex);
    state_->hand_over(t);
  }
  add_device_name(t);
  t.step_through = conveyor::detail::step_through_requested();
  return t;
}

profile_report profiler::report(const analyze_options& options) { return analyze(collect(), options); }

} // namespace conveyor::profile
