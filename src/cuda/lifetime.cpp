#include "cuda/lifetime.hpp"

#include "cuda/check.hpp"

#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace conveyor::detail {

namespace {

struct release_queue {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> ready;                                    // from user-object destructors
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> fenced; // waiting for a launch
  std::vector<cudaEvent_t> free_events;                                        // the fence pool
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

void release_at_exit() noexcept {
  std::vector<std::shared_ptr<void>> doomed;
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> fenced;
  {
    std::lock_guard lock(queue().mutex);
    doomed.swap(queue().ready);
    fenced.swap(queue().fenced);
  }
  for (auto& [item, after] : fenced) {
    while (!after->done()) std::this_thread::yield(); // launches still running at exit use these items
    item.reset();
    after.reset();
  }
  doomed.clear();
}

void CUDART_CB release_payload(void* p) {
  // On CUDA's internal thread: no CUDA call, no user destructor; only a move into the queue.
  auto* payload = static_cast<std::shared_ptr<void>*>(p);
  {
    std::lock_guard lock(queue().mutex);
    queue().ready.push_back(std::move(*payload));
  }
  delete payload; // an empty shared_ptr now: destroys nothing else
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

cudaUserObject_t make_user_object(std::shared_ptr<void> payload) {
  auto* boxed = new std::shared_ptr<void>(std::move(payload));
  cudaUserObject_t object = nullptr;
  const cudaError_t rc = cudaUserObjectCreate(&object, boxed, &release_payload, 1, cudaUserObjectNoDestructorSync);
  if (rc != cudaSuccess) {
    delete boxed;
    throw_cuda(rc, "cudaUserObjectCreate", "the object that keeps a graph's resources alive for its launches");
  }
  return object;
}

void defer_release(std::shared_ptr<void> item, std::shared_ptr<fence> after) {
  if (!item) return;
  std::lock_guard lock(queue().mutex);
  if (after)
    queue().fenced.emplace_back(std::move(item), std::move(after));
  else
    queue().ready.push_back(std::move(item));
}

std::size_t collect() noexcept {
  std::vector<std::shared_ptr<void>> doomed;
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> fenced;
  {
    std::lock_guard lock(queue().mutex);
    doomed.swap(queue().ready);
    fenced.swap(queue().fenced);
  }
  // Outside the lock: the queries are CUDA calls, and destructors may call CUDA (a host callable owning a device
  // buffer) or re-enter the queue (a fence returning its event to the pool).
  std::vector<std::pair<std::shared_ptr<void>, std::shared_ptr<fence>>> waiting;
  for (auto& entry : fenced) {
    if (entry.second->done())
      doomed.push_back(std::move(entry.first));
    else
      waiting.push_back(std::move(entry));
  }
  fenced.clear(); // returns the events of finished fences to the pool
  doomed.clear();
  std::lock_guard lock(queue().mutex);
  for (auto& entry : waiting) queue().fenced.push_back(std::move(entry));
  return queue().fenced.size();
}

} // namespace conveyor::detail
