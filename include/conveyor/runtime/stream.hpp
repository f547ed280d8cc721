#pragma once
//! \file stream.hpp
//! conveyor::stream, a move-only owner of a cudaStream_t.

#include "conveyor/error.hpp"

#include <cuda_runtime_api.h>

#include <source_location>
#include <utility>

namespace conveyor {

class event;

//! Whether a wrapper destroys the CUDA handle it holds.
enum class ownership { owned, borrowed };

//! A CUDA stream (`cudaStream_t`), move-only. An owning stream destroys its handle in the
//! destructor (which never throws); a borrowed one (from adopt(..., ownership::borrowed)) leaves it
//! alone. Thread safety: CUDA streams may be used from several threads; the stream object itself
//! (moving, destroying) must not be changed while another thread uses it.
class stream {
public:
  //! Creates a stream with `cudaStreamCreateWithPriority` on the calling thread's current device
  //! (make it inside a device_guard for another device). The default flag, cudaStreamNonBlocking,
  //! keeps the stream from synchronising with the legacy default stream, which stream capture
  //! needs.
  //! \param flags    cudaStreamDefault or cudaStreamNonBlocking
  //! \param priority lower numbers are higher priority (see cudaDeviceGetStreamPriorityRange)
  //! \throws cuda_error when creation fails (no device, out of resources).
  explicit stream(unsigned flags = cudaStreamNonBlocking, int priority = 0);

  //! Wraps an existing handle. With ownership::owned the stream destroys it; with borrowed it does
  //! not (the handle must then outlive this object). Reads the stream's device through its context
  //! (`cuStreamGetCtx`), which leaves a capture in progress on `handle` valid: adopting a capturing
  //! stream inside the captured code is allowed. Never throws: when the driver cannot tell the
  //! device (not a live stream), it is left unknown and device() asks again.
  [[nodiscard]] static stream adopt(cudaStream_t handle,
                                    ownership own = ownership::borrowed) noexcept;

  //! Takes over `other`'s handle; `other` is left empty.
  stream(stream&& other) noexcept :
      handle_(std::exchange(other.handle_, nullptr)),
      owned_(std::exchange(other.owned_, false)),
      device_(std::exchange(other.device_, -1)) {}
  //! Destroys the owned stream, if any, and takes over `other`'s handle; `other` is left empty.
  //! Never throws.
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream();

  //! The CUDA handle.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  //! Releases ownership and returns the handle; the stream becomes empty.
  [[nodiscard]] cudaStream_t release() noexcept;

  //! Blocks the host until all work enqueued so far has finished (`cudaStreamSynchronize`).
  //! \throws cuda_error with any error the work raised.
  void synchronize(std::source_location where = std::source_location::current()) const;
  //! Makes later work on this stream wait for `e` (`cudaStreamWaitEvent`).
  //! \throws cuda_error when the event or stream is invalid.
  void wait(const event& e) const;
  //! The device the stream belongs to: recorded at creation (or, for an adopted handle, asked of
  //! the driver through the stream's context, `cuStreamGetCtx`, when adopted, or at this call if it
  //! could not tell then); for an empty handle, cudaStreamLegacy or cudaStreamPerThread (default
  //! streams, which belong to whichever device is current) the calling thread's current device.
  //! Works on a capturing stream and leaves its capture valid (`cudaStreamGetDevice` would
  //! invalidate it).
  //! \throws cuda_error (cudaErrorInvalidResourceHandle) when the driver cannot tell (not a
  //!         live stream); cuda_error from cudaGetDevice for a default stream.
  [[nodiscard]] int device() const;
  //! True while this stream is being captured into a graph (`cudaStreamIsCapturing`).
  //! \throws cuda_error when the query fails.
  [[nodiscard]] bool is_capturing() const;

private:
  stream(cudaStream_t handle, bool owned, int device) noexcept :
      handle_(handle),
      owned_(owned),
      device_(device) {}
  cudaStream_t handle_ = nullptr;
  bool owned_ = false;
  int device_ = -1; // -1: not known yet (an adopted handle CUDA would not answer for)
};

} // namespace conveyor
