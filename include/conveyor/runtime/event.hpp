#pragma once
//! \file event.hpp
//! conveyor::event, a move-only owner of a cudaEvent_t.

#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <source_location>
#include <utility>

namespace conveyor {

//! A CUDA event (`cudaEvent_t`), move-only; the destructor destroys an owned handle and never
//! throws. Thread safety: as stream: CUDA events may be recorded and waited on from several
//! threads; the object itself must not be moved or destroyed while another thread uses it.
class event {
public:
  //! Creates an event with `cudaEventCreateWithFlags`.
  //! \param flags cudaEventDefault (timed), cudaEventDisableTiming (cheapest, for ordering
  //!        only), ...
  //! \throws cuda_error when creation fails.
  explicit event(unsigned flags = cudaEventDefault);

  //! Wraps an existing handle; with ownership::owned the event destroys it.
  [[nodiscard]] static event adopt(cudaEvent_t handle,
                                   ownership own = ownership::borrowed) noexcept;

  //! Takes over `other`'s handle; `other` is left empty.
  event(event&& other) noexcept :
      handle_(std::exchange(other.handle_, nullptr)),
      owned_(std::exchange(other.owned_, false)) {}
  //! Destroys the owned event, if any, and takes over `other`'s handle; `other` is left empty.
  //! Never throws.
  event& operator=(event&& other) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event();

  //! The CUDA handle.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }

  //! Records the event on `s` (`cudaEventRecord`). Inside a capture this becomes a dependency, not
  //! a node.
  //! \throws cuda_error when recording fails.
  void record(const stream& s) const;
  //! Blocks the host until the event has completed (`cudaEventSynchronize`).
  //! \throws cuda_error with any error the awaited work raised.
  void synchronize(std::source_location where = std::source_location::current()) const;
  //! Milliseconds between `start` and `end`, both recorded and completed (`cudaEventElapsedTime`).
  //! \throws cuda_error when either event was made with cudaEventDisableTiming or has not
  //!         completed.
  [[nodiscard]] static float elapsed_ms(const event& start, const event& end);

private:
  event(cudaEvent_t handle, bool owned) noexcept : handle_(handle), owned_(owned) {}
  cudaEvent_t handle_ = nullptr;
  bool owned_ = false;
};

} // namespace conveyor
