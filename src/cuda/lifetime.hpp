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

#include <cstddef>
#include <memory>

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

//! Makes a CUDA user object holding `payload` (initial reference owned by the caller, to be moved into a graph with
//! cudaGraphRetainUserObject). When CUDA drops the last reference, the payload moves to the release queue.
//! \throws cuda_error when cudaUserObjectCreate fails.
cudaUserObject_t make_user_object(std::shared_ptr<void> payload);

//! Releases `item` once `after` has completed (at once when `after` is null). Thread-safe.
void defer_release(std::shared_ptr<void> item, std::shared_ptr<fence> after);

//! Destroys every queued item that nothing can use any more; returns how many still wait for a launch. Never
//! throws; thread-safe; never called from a CUDA callback.
std::size_t collect() noexcept;

} // namespace conveyor::detail
