#include "cuda/lifetime.hpp"

#include "cuda/check.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace conveyor::detail {

namespace {

struct release_queue {
  std::mutex mutex;
  std::condition_variable released;         // a scheduled payload was handed over
  std::size_t scheduled = 0;                // payloads no Conveyor object references that CUDA has not handed over yet
  std::vector<std::shared_ptr<void>> ready; // from user-object destructors
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> fenced; // waiting for a launch
  std::vector<cudaEvent_t> free_events;                                         // the fence pool
};

void release_at_exit() noexcept;

release_queue& queue() {
  // Never destroyed: user-object destructors may still run on CUDA's thread during exit. What is queued at exit is
  // released by release_at_exit, registered after CUDA's own exit handler (the queue is first used after CUDA
  // started), so it runs before the runtime unloads.
  static release_queue* q = [] {
    auto* made = new release_queue;
    std::atexit(release_at_exit);
    return made;
  }();
  return *q;
}

// How long release_at_exit waits for unfinished launches: CONVEYOR_EXIT_WAIT_S seconds (default 10; 0: not at all).
std::chrono::duration<double> exit_wait() noexcept {
  const char* v = std::getenv("CONVEYOR_EXIT_WAIT_S");
  if (v == nullptr || *v == '\0') return std::chrono::seconds(10);
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  return std::chrono::duration<double>(end != v && s >= 0.0 && s < 1e6 ? s : 10.0);
}

void release_at_exit() noexcept {
  std::vector<std::shared_ptr<void>> doomed;
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> fenced;
  {
    std::lock_guard lock(queue().mutex);
    doomed.swap(queue().ready);
    fenced.swap(queue().fenced);
  }
  // Launches still running at exit use the fenced items: wait for them, but not without a bound (a kernel that never
  // ends, a WHILE node whose condition stays true). What is still in use then is left unreleased, and said.
  const auto deadline = std::chrono::steady_clock::now() + exit_wait();
  std::size_t left = 0;
  for (auto& [item, after] : fenced) {
    while (!after->done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (!after->done()) {
      new std::shared_ptr<void>(std::move(item)); // leaked on purpose: the GPU may still read or write it
      ++left;
      continue;
    }
    item.reset();
    after.reset();
  }
  if (left > 0)
    std::fprintf(stderr,
                 "conveyor: at exit, %zu resource(s) of executable graphs were still in use by graph launches that had "
                 "not finished after %.3g s (CONVEYOR_EXIT_WAIT_S); left unreleased. Synchronize the streams before "
                 "exit, or look for a kernel that does not end (conveyor::step_through names it)\n",
                 left, exit_wait().count());
  doomed.clear();
}

} // namespace

struct release_token {
  std::size_t holders = 0;  // Conveyor objects holding a CUDA reference (guarded by the queue's mutex)
  bool handed_over = false; // CUDA called the destructor
  bool scheduled = false;   // counted in release_queue::scheduled
};

namespace {

struct boxed_payload {
  std::shared_ptr<void> payload;
  std::shared_ptr<release_token> token;
};

void CUDART_CB release_payload(void* p) {
  // On CUDA's internal thread: no CUDA call, no user destructor; only a move into the queue.
  auto* box = static_cast<boxed_payload*>(p);
  {
    std::lock_guard lock(queue().mutex);
    queue().ready.push_back(std::move(box->payload));
    releases_queued.fetch_add(1, std::memory_order_release);
    box->token->handed_over = true;
    if (box->token->scheduled) {
      box->token->scheduled = false;
      --queue().scheduled;
    }
  }
  queue().released.notify_all();
  delete box; // an empty payload and a token others may still hold: destroys nothing of the user's
}

} // namespace

std::shared_ptr<fence> fence::record(cudaStream_t s) {
  cudaEvent_t e = nullptr;
  {
    std::lock_guard lock(queue().mutex);
    if (!queue().free_events.empty()) {
      e = queue().free_events.back();
      queue().free_events.pop_back();
    }
  }
  if (e == nullptr)
    check_with(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags",
               [] { return std::string("an event to track a launch"); });
  const cudaError_t rc = cudaEventRecord(e, s);
  if (rc != cudaSuccess) {
    (void)cudaEventDestroy(e);
    throw_cuda(rc, "cudaEventRecord", "an event after the launch, to know when what it uses can be released");
  }
  return std::shared_ptr<fence>(new fence(e));
}

fence::~fence() {
  std::lock_guard lock(queue().mutex);
  queue().free_events.push_back(event_);
}

bool fence::done() const noexcept {
  const cudaError_t rc = cudaEventQuery(event_);
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  (void)cleared(rc);
  return true;
}

std::pair<cudaUserObject_t, std::shared_ptr<release_token>> make_user_object(std::shared_ptr<void> payload) {
  auto token = std::make_shared<release_token>();
  token->holders = 1;
  auto* boxed = new boxed_payload{std::move(payload), token};
  cudaUserObject_t object = nullptr;
  const cudaError_t rc = cudaUserObjectCreate(&object, boxed, &release_payload, 1, cudaUserObjectNoDestructorSync);
  if (rc != cudaSuccess) {
    delete boxed;
    throw_cuda(rc, "cudaUserObjectCreate", "the object that keeps a graph's resources alive for its launches");
  }
  return {object, std::move(token)};
}

void hold(const std::shared_ptr<release_token>& token) noexcept {
  if (!token) return;
  std::lock_guard lock(queue().mutex);
  ++token->holders;
}

void let_go(const std::shared_ptr<release_token>& token) noexcept {
  if (!token) return;
  std::lock_guard lock(queue().mutex);
  if (token->holders == 0 || --token->holders != 0 || token->handed_over || token->scheduled) return;
  token->scheduled = true;
  ++queue().scheduled;
}

std::size_t wait_for_releases(std::chrono::milliseconds timeout) noexcept {
  std::unique_lock lock(queue().mutex);
  (void)queue().released.wait_for(lock, timeout, [] { return queue().scheduled == 0; });
  return queue().scheduled;
}

void defer_release(std::shared_ptr<void> item, std::shared_ptr<fence> after) {
  if (!item) return;
  std::lock_guard lock(queue().mutex);
  if (after) queue().fenced.emplace_back(std::move(item), std::move(after));
  else queue().ready.push_back(std::move(item));
  releases_queued.fetch_add(1, std::memory_order_release);
}

std::size_t collect_queued() noexcept {
  std::vector<std::shared_ptr<void>> doomed;
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> fenced;
  {
    std::lock_guard lock(queue().mutex);
    doomed.swap(queue().ready);
    fenced.swap(queue().fenced);
    releases_queued.store(0, std::memory_order_relaxed);
  }
  // Outside the lock: the queries are CUDA calls, and destructors may call CUDA (a host callable owning a device
  // buffer) or re-enter the queue (a fence returning its event to the pool).
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> waiting;
  for (auto& entry : fenced) {
    if (entry.second->done()) doomed.push_back(std::move(entry.first));
    else waiting.push_back(std::move(entry));
  }
  fenced.clear(); // returns the events of finished fences to the pool
  doomed.clear();
  std::lock_guard lock(queue().mutex);
  for (auto& entry : waiting) queue().fenced.push_back(std::move(entry));
  releases_queued.fetch_add(waiting.size(), std::memory_order_release);
  return queue().fenced.size();
}

} // namespace conveyor::detail
