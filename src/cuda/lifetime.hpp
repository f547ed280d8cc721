#pragma once
// Internal (CUDA layer): keeping what queued launches use alive without waiting for them.
//
// Two mechanisms, both ending in one release queue that ordinary threads drain (collect):
// - CUDA user objects: a payload tied to a CUDA graph; executable graphs made from (or updated to) the graph hold
//   it until their queued launches finish. CUDA calls the destructor on an internal thread, where no CUDA call
//   (and so no user destructor that might make one) may run: the payload is only moved to the queue there.
// - fences: an event recorded after a launch; an item deferred behind it is released once it has completed
//   (for what an executable graph owns itself: callables set node by node with set_host).

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>

namespace conveyor::detail {

//! An event recorded on a stream after a launch; completed once the launch has finished. Events are pooled.
class fence {
public:
  //! Records a pooled event on `s`. \throws cuda_error when the event cannot be made or recorded.
  static std::shared_ptr<fence> record(cudaStream_t s);
  fence(const fence&) = delete;
  fence& operator=(const fence&) = delete;
  ~fence();
  //! True once the work before the record has finished (or failed: an error of earlier work is reported by the
  //! caller's next synchronising call, not here).
  [[nodiscard]] bool done() const noexcept;

private:
  explicit fence(cudaEvent_t e) noexcept : event_(e) {}
  cudaEvent_t event_;
};

//! Tracks one user object's payload: how many Conveyor objects hold a CUDA reference to the user object (the graph
//! it was made for, clones and parents that copied it, executable graphs made from or updated to one of those), and
//! whether CUDA has handed the payload over. Once no Conveyor object holds a reference, CUDA releases the payload
//! when the last launch using it finishes: it is *scheduled*, and wait_for_releases() waits for it.
struct release_token;

//! Makes a CUDA user object holding `payload` (initial reference owned by the caller, to be moved into a graph with
//! cudaGraphRetainUserObject) and its token, held once (for that reference). When CUDA drops the last reference,
//! the payload moves to the release queue.
//! \throws cuda_error when cudaUserObjectCreate fails.
std::pair<cudaUserObject_t, std::shared_ptr<release_token>> make_user_object(std::shared_ptr<void> payload);

//! One more Conveyor object holds a CUDA reference to the token's user object. Null tokens are ignored. Never throws.
void hold(const std::shared_ptr<release_token>& token) noexcept;
//! A Conveyor object dropped its reference (after its CUDA call released it). Never throws.
void let_go(const std::shared_ptr<release_token>& token) noexcept;

//! Waits, at most `timeout`, until CUDA has handed over every payload that no Conveyor object references any more
//! (those of launches still running wait for them); returns how many are left (0: none). Never throws.
std::size_t wait_for_releases(std::chrono::milliseconds timeout) noexcept;

//! Releases `item` once `after` has completed (at once when `after` is null). Thread-safe.
void defer_release(std::shared_ptr<void> item, std::shared_ptr<fence> after);

//! How many items the release queue holds (ready to release, or waiting for a launch), readable without its lock:
//! collect() on an empty queue (the common case of every update and instantiation) then costs one load.
inline std::atomic<std::size_t> releases_queued{0};

//! collect() once the queue holds something. Never throws; thread-safe.
std::size_t collect_queued() noexcept;

//! True on a thread that must not run users' release payloads (graph_cache's background workers: a deleter or a
//! destructor of the user's runs on the threads that call Conveyor, never on a worker). collect() there does nothing.
inline thread_local bool collect_elsewhere = false;

//! Destroys every queued item that nothing can use any more; returns how many still wait for a launch (0 on a thread
//! with collect_elsewhere set, where it does nothing). Never throws; thread-safe; never called from a CUDA callback.
inline std::size_t collect() noexcept {
  if (collect_elsewhere) return 0;
  return releases_queued.load(std::memory_order_acquire) == 0 ? 0 : collect_queued();
}

} // namespace conveyor::detail
