// The stream watch (stream_watch.hpp): CUPTI's driver-API callbacks, through libcupti loaded at run time, so that the
// core library links no CUPTI and a program that never watches never loads it.

#include "define/stream_watch.hpp"

#include "cuda/driver.hpp"

#include <cuda.h>
#include <cupti.h>

#include <fmt/format.h>

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <memory>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace conveyor::detail {

namespace {

// A watched driver call: its callback id, where its stream is in its parameters, and whether a null stream there
// means the per-thread default stream (the _ptsz forms) rather than the legacy one. `launch_ex`: the stream is in
// the CUlaunchConfig the parameters point to (cuLaunchKernelEx).
struct watched_call {
  CUpti_CallbackId id;
  std::size_t stream_offset;
  bool per_thread;
  bool launch_ex;
};

#define CONVEYOR_WATCH(name)                                                                                           \
  watched_call { CUPTI_DRIVER_TRACE_CBID_##name, offsetof(name##_params, hStream), false, false }
#define CONVEYOR_WATCH_PTSZ(name)                                                                                      \
  watched_call { CUPTI_DRIVER_TRACE_CBID_##name##_ptsz, offsetof(name##_ptsz_params, hStream), true, false }
#define CONVEYOR_WATCH_BOTH(name) CONVEYOR_WATCH(name), CONVEYOR_WATCH_PTSZ(name)

// Every way to enqueue a kernel, copy, memset, host function or graph launch on a stream (CUDA 13.0's driver API;
// the runtime and the libraries enqueue through these).
constexpr std::array watched_calls{
    CONVEYOR_WATCH_BOTH(cuLaunchKernel),
    CONVEYOR_WATCH_BOTH(cuLaunchCooperativeKernel),
    watched_call{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, offsetof(cuLaunchKernelEx_params, config), false, true},
    watched_call{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, offsetof(cuLaunchKernelEx_ptsz_params, config), true,
                 true},
    CONVEYOR_WATCH_BOTH(cuLaunchHostFunc),
    CONVEYOR_WATCH_BOTH(cuGraphLaunch),
    CONVEYOR_WATCH_BOTH(cuMemcpyAsync),
    CONVEYOR_WATCH(cuMemcpyHtoDAsync_v2),
    CONVEYOR_WATCH_PTSZ(cuMemcpyHtoDAsync_v2),
    CONVEYOR_WATCH(cuMemcpyDtoHAsync_v2),
    CONVEYOR_WATCH_PTSZ(cuMemcpyDtoHAsync_v2),
    CONVEYOR_WATCH(cuMemcpyDtoDAsync_v2),
    CONVEYOR_WATCH_PTSZ(cuMemcpyDtoDAsync_v2),
    CONVEYOR_WATCH(cuMemcpy2DAsync_v2),
    CONVEYOR_WATCH_PTSZ(cuMemcpy2DAsync_v2),
    CONVEYOR_WATCH(cuMemcpy3DAsync_v2),
    CONVEYOR_WATCH_PTSZ(cuMemcpy3DAsync_v2),
    CONVEYOR_WATCH_BOTH(cuMemcpyPeerAsync),
    CONVEYOR_WATCH_BOTH(cuMemsetD8Async),
    CONVEYOR_WATCH_BOTH(cuMemsetD16Async),
    CONVEYOR_WATCH_BOTH(cuMemsetD32Async),
    CONVEYOR_WATCH_BOTH(cuMemsetD2D8Async),
    CONVEYOR_WATCH_BOTH(cuMemsetD2D16Async),
    CONVEYOR_WATCH_BOTH(cuMemsetD2D32Async),
};

#undef CONVEYOR_WATCH_BOTH
#undef CONVEYOR_WATCH_PTSZ
#undef CONVEYOR_WATCH

// libcupti's entry points, loaded once.
struct cupti_library {
  void* handle = nullptr;
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
  std::string missing; // why it could not be loaded (empty: loaded)
};

template <class Fn>
void bind(cupti_library& lib, Fn& fn, const char* symbol) {
  fn = reinterpret_cast<Fn>(dlsym(lib.handle, symbol));
  if (fn == nullptr && lib.missing.empty()) lib.missing = fmt::format("libcupti has no {}", symbol);
}

const cupti_library& cupti() {
  static const cupti_library lib = [] {
    cupti_library l;
    for (const char* name : {"libcupti.so.13", "libcupti.so"}) {
      l.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (l.handle != nullptr) break;
    }
    if (l.handle == nullptr) {
      l.missing = fmt::format("libcupti.so.13 could not be loaded ({}); it ships with the CUDA toolkit in "
                              "/usr/local/cuda/lib64: add that folder to LD_LIBRARY_PATH",
                              dlerror());
      return l;
    }
    bind(l, l.subscribe, "cuptiSubscribe");
    bind(l, l.unsubscribe, "cuptiUnsubscribe");
    bind(l, l.enable_callback, "cuptiEnableCallback");
    bind(l, l.result_string, "cuptiGetResultString");
    return l;
  }();
  return lib;
}

std::string cupti_error(CUptiResult rc) {
  const char* text = nullptr;
  if (cupti().result_string == nullptr || cupti().result_string(rc, &text) != CUPTI_SUCCESS || text == nullptr)
    return fmt::format("CUPTI error {}", static_cast<int>(rc));
  return text;
}

// What the watch holds: the subscription (under `control`), the foreign work recorded (under `log_mutex`: the
// callback takes no other lock, so that CUPTI may wait for callbacks in flight while `control` is held).
struct watch_state {
  std::mutex control;
  int open = 0;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::uint64_t next_ticket = 1;
  //! An open watch: where it began in `log`, and, for stream_watch::if_available, the capturing thread whose work
  //! alone it refuses (0: every thread's).
  struct opened {
    std::size_t first = 0;
    std::uint64_t only_thread = 0;
    std::shared_ptr<std::atomic<bool>> live; // the capturing thread's capture_here, while this watch is open
  };
  std::unordered_map<std::uint64_t, opened> open_watches; // by ticket
  int held = 0;                                           // hold_stream_watch's subscriptions kept (in `open`)
  std::atomic<int> watching{0};                           // open_watches.size(), for the callback
  std::mutex log_mutex;
  std::vector<foreign_work> log;
  std::size_t log_base = 0; // entries dropped from the front of `log` (none while watches are open)
};

watch_state& watch() {
  static auto* state = new watch_state; // never destroyed: callbacks may run while the process exits
  return *state;
}

// The stream of a watched call, from its parameters.
CUstream stream_of(const watched_call& w, const void* params) {
  const auto* bytes = static_cast<const unsigned char*>(params);
  if (w.launch_ex) {
    const CUlaunchConfig* config = nullptr;
    std::memcpy(&config, bytes + w.stream_offset, sizeof(config));
    return config != nullptr ? config->hStream : nullptr;
  }
  CUstream s = nullptr;
  std::memcpy(&s, bytes + w.stream_offset, sizeof(s));
  return s;
}

// The watched call of each driver callback id, by id (null: not watched): the callback's first question in one load.
const watched_call* find_watched(CUpti_CallbackId id) noexcept {
  static const auto by_id = [] {
    std::array<const watched_call*, CUPTI_DRIVER_TRACE_CBID_SIZE> table{};
    for (const auto& w : watched_calls)
      if (w.id < table.size()) table[w.id] = &w;
    return table;
  }();
  return id < by_id.size() ? by_id[id] : nullptr;
}

// The stream the calling thread captures under its latest open watch (capture_here): a call on it takes part in that
// capture, or in none because CUDA invalidated it, which the capture's end reports. `live` turns false when that watch
// ends, on whichever thread ends it.
struct capturing_stream {
  CUstream stream = nullptr;
  std::shared_ptr<std::atomic<bool>> live;
};
thread_local capturing_stream capture_here;

// Whether the call on `s` is known to belong to the calling thread's open capture, without asking the driver.
bool in_own_capture(CUstream s) noexcept {
  return s != nullptr && s == capture_here.stream && capture_here.live &&
         capture_here.live->load(std::memory_order_acquire);
}

// The watched call a callback reports, for a watched call made while a watch is open (null otherwise).
const watched_call* reported(CUpti_CallbackDomain domain, CUpti_CallbackId id, const CUpti_CallbackData* info) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || info == nullptr || info->callbackSite != CUPTI_API_ENTER) return nullptr;
  const watched_call* w = find_watched(id);
  return w != nullptr && watch().watching.load(std::memory_order_acquire) != 0 ? w : nullptr; // none: held only
}

// Where a call of `w` on `s` went when that stream takes part in no capture ("the legacy default stream", "stream
// 0x..."); empty when it is captured, or invalidated (the capture's end says so).
std::string outside_every_capture(const watched_call& w, CUstream s) {
  if ((s == nullptr && !w.per_thread) || s == CU_STREAM_LEGACY) return "the legacy default stream"; // never captured
  if (in_own_capture(s)) return {};
  const CUstream asked = s == nullptr ? CU_STREAM_PER_THREAD : s;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver::stream_is_capturing(asked, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE) return {};
  return asked == CU_STREAM_PER_THREAD ? std::string("the per-thread default stream")
                                       : fmt::format("stream {}", static_cast<const void*>(asked));
}

// The CUPTI callback: records a watched call enqueued on a stream that takes part in no capture. Runs in the calling
// thread, before the call (CUPTI_API_ENTER); makes at most one driver call (cuStreamIsCapturing) and no runtime call.
void CUPTIAPI on_driver_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  const watched_call* w = reported(domain, id, info);
  if (w == nullptr) return;
  std::string where = outside_every_capture(*w, stream_of(*w, info->functionParams));
  if (where.empty()) return;
  foreign_work f{info->functionName != nullptr ? info->functionName : "a driver call",
                 info->symbolName != nullptr ? info->symbolName : "", std::move(where), this_thread_id()};
  auto& state = watch();
  const std::lock_guard lock(state.log_mutex);
  state.log.push_back(std::move(f));
}

// Enables the watched callbacks for `subscriber`; the reason when CUPTI refuses one (then unsubscribed), else empty.
std::string enable_watched_calls(const cupti_library& lib, CUpti_SubscriberHandle subscriber) {
  for (const auto& w : watched_calls) {
    const CUptiResult e = lib.enable_callback(1U, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, w.id);
    if (e != CUPTI_SUCCESS) {
      (void)lib.unsubscribe(subscriber);
      return fmt::format("cuptiEnableCallback({}): {}", w.id, cupti_error(e));
    }
  }
  return {};
}

// Subscribes and enables the watched callbacks; the reason when CUPTI refuses (empty on success). Under `control`.
std::string subscribe(watch_state& state) {
  const auto& lib = cupti();
  if (!lib.missing.empty()) return lib.missing;
  (void)driver::stream_is_capturing(CU_STREAM_PER_THREAD, nullptr); // resolves the entry point outside a callback
  CUpti_SubscriberHandle subscriber = nullptr;
  const CUptiResult rc = lib.subscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(&on_driver_call), nullptr);
  if (rc != CUPTI_SUCCESS)
    return fmt::format("cuptiSubscribe: {} (CUPTI takes one callback subscriber per process; compute-sanitizer, "
                       "Nsight Systems and conveyor::profile::module_images are subscribers too)",
                       cupti_error(rc));
  if (std::string why = enable_watched_calls(lib, subscriber); !why.empty()) return why;
  state.subscriber = subscriber;
  return {};
}

std::string describe(const foreign_work& f, std::uint64_t capturing) {
  return fmt::format("{}{} on {}, from {}", f.call, f.kernel.empty() ? "" : fmt::format(" (kernel {})", f.kernel),
                     f.stream,
                     f.thread == capturing ? std::string("the capturing thread")
                                           : fmt::format("another thread (thread {})", f.thread));
}

} // namespace

std::uint64_t this_thread_id() noexcept {
  thread_local const auto id = static_cast<std::uint64_t>(::syscall(SYS_gettid));
  return id;
}

const char* to_string(stream_watch w) noexcept {
  switch (w) {
  case stream_watch::environment: return "environment";
  case stream_watch::off: return "off";
  case stream_watch::on: return "on";
  case stream_watch::if_available: return "if_available";
  }
  return "?";
}

stream_watch resolve_stream_watch(stream_watch requested, const char* env) noexcept {
  const std::string_view value = env != nullptr ? env : "";
  if (requested == stream_watch::off || requested == stream_watch::on) return requested;
  if (value == "1") return stream_watch::on;
  if (value == "0") return stream_watch::off;
  return requested == stream_watch::if_available ? stream_watch::if_available : stream_watch::off;
}

namespace {

// Subscribes when no watch is open or held (under `control`); the reason when CUPTI refuses, else empty.
std::string subscribed(watch_state& state) { return state.open == 0 ? subscribe(state) : std::string(); }

// Lets go of CUPTI and of the log when nothing is open or held any more (under `control`).
void unsubscribe_if_unused(watch_state& state) {
  if (state.open != 0) return;
  if (state.subscriber != nullptr) (void)cupti().unsubscribe(state.subscriber); // no callback from here on
  state.subscriber = nullptr;
  const std::lock_guard log_lock(state.log_mutex);
  state.log_base += state.log.size();
  state.log.clear();
}

// The foreign work logged since `w` opened, of the thread it watches (every thread's for only_thread 0).
std::vector<foreign_work> logged_since(watch_state& state, const watch_state::opened& w) {
  std::vector<foreign_work> found;
  const std::lock_guard log_lock(state.log_mutex);
  for (std::size_t i = w.first - state.log_base; i < state.log.size(); ++i)
    if (w.only_thread == 0 || state.log[i].thread == w.only_thread) found.push_back(state.log[i]);
  return found;
}

} // namespace

std::uint64_t begin_stream_watch(stream_watch requested, cudaStream_t capturing) {
  const stream_watch w = resolve_stream_watch(requested, std::getenv("CONVEYOR_WATCH_STREAMS"));
  if (w == stream_watch::off) return 0;
  auto& state = watch();
  const std::lock_guard lock(state.control);
  if (const std::string why = subscribed(state); !why.empty()) {
    if (w == stream_watch::if_available) return 0;
    throw std::runtime_error(fmt::format(
        "conveyor::capture: the stream watch was asked for (capture_options::watch_streams = {}{}) and cannot run: "
        "{}. Nothing was captured. Turn the watch off for this capture (stream_watch::off), or watch where CUPTI "
        "is free",
        to_string(requested), requested == stream_watch::environment ? ", CONVEYOR_WATCH_STREAMS=1" : "", why));
  }
  ++state.open;
  const std::uint64_t ticket = state.next_ticket++;
  std::size_t first = 0;
  {
    const std::lock_guard log_lock(state.log_mutex);
    first = state.log_base + state.log.size();
  }
  // graphed's default watch refuses the capturing thread's work only: another thread's eager work meanwhile may be
  // on purpose (a loader, a second pipeline), and a default must not refuse a correct program.
  auto live = std::make_shared<std::atomic<bool>>(capturing != nullptr);
  state.open_watches.emplace(ticket,
                             watch_state::opened{first, w == stream_watch::if_available ? this_thread_id() : 0, live});
  state.watching.store(static_cast<int>(state.open_watches.size()), std::memory_order_release);
  if (capturing != nullptr) capture_here = capturing_stream{capturing, std::move(live)};
  return ticket;
}

bool hold_stream_watch(stream_watch requested) {
  if (resolve_stream_watch(requested, std::getenv("CONVEYOR_WATCH_STREAMS")) == stream_watch::off) return false;
  auto& state = watch();
  const std::lock_guard lock(state.control);
  if (!subscribed(state).empty()) return false; // each capture then says why, as it would without the hold
  ++state.open;
  ++state.held;
  return true;
}

void release_stream_watch() noexcept {
  auto& state = watch();
  const std::lock_guard lock(state.control);
  if (state.held == 0) return;
  --state.held;
  --state.open;
  unsubscribe_if_unused(state);
}

std::vector<foreign_work> end_stream_watch(std::uint64_t ticket) {
  if (ticket == 0) return {};
  auto& state = watch();
  const std::lock_guard lock(state.control);
  const auto it = state.open_watches.find(ticket);
  if (it == state.open_watches.end()) return {};
  const watch_state::opened watch_of = it->second;
  state.open_watches.erase(it);
  state.watching.store(static_cast<int>(state.open_watches.size()), std::memory_order_release);
  if (watch_of.live) watch_of.live->store(false, std::memory_order_release);
  if (capture_here.live == watch_of.live) capture_here = {};
  --state.open;
  std::vector<foreign_work> found = logged_since(state, watch_of);
  unsubscribe_if_unused(state);
  return found;
}

namespace {
// The first four of `found` described, then how many more there are.
std::string foreign_work_list(const std::vector<foreign_work>& found, std::uint64_t capturing) {
  constexpr std::size_t named = 4;
  std::string list;
  for (std::size_t i = 0; i < found.size() && i < named; ++i)
    list += (i == 0 ? "" : "; ") + describe(found[i], capturing);
  if (found.size() > named) list += fmt::format("; and {} more", found.size() - named);
  return list;
}
} // namespace

std::string foreign_work_message(const std::vector<foreign_work>& found, std::uint64_t capturing) {
  const std::string list = foreign_work_list(found, capturing);
  return fmt::format(
      "{} operation(s) were enqueued, while the capture was open, on streams that take part in no capture: {}. Each "
      "ran once, at capture time, and no replay of the graph would run it. Fix: enqueue the work on the capturing "
      "stream or on a stream forked into the capture (conveyor::fork and join), bind a library's handle to the "
      "capturing stream before the capture (cublasSetStream, cusparseSetStream, cufftSetStream), or run the work "
      "before or after the capture; a thread that must run eager work meanwhile on purpose needs a capture with "
      "capture_options::watch_streams = stream_watch::off (the watch: CONVEYOR_WATCH_STREAMS, docs/capture.md)",
      found.size(), list);
}

std::string stream_watch_unavailable() {
  auto& state = watch();
  const std::lock_guard lock(state.control);
  if (state.open != 0) return {};
  std::string why = subscribe(state);
  unsubscribe_if_unused(state);
  return why;
}

} // namespace conveyor::detail

namespace conveyor {

stream_watch_hold& stream_watch_hold::operator=(stream_watch_hold&& other) noexcept {
  if (this != &other) {
    if (held_) detail::release_stream_watch();
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

stream_watch_hold::~stream_watch_hold() {
  if (held_) detail::release_stream_watch();
}

stream_watch_hold hold_stream_watch(stream_watch requested) {
  return stream_watch_hold(detail::hold_stream_watch(requested));
}

} // namespace conveyor
