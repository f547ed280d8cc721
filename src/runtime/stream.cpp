#include "conveyor/runtime/stream.hpp"
#include "conveyor/runtime/event.hpp"

#include "cuda/driver.hpp"

namespace conveyor {

stream::stream(unsigned flags, int priority) : owned_(true) {
  CONVEYOR_CHECK(cudaGetDevice(&device_));
  CONVEYOR_CHECK(cudaStreamCreateWithPriority(&handle_, flags, priority));
}

namespace {
// The legacy default stream and the per-thread default stream stand for the calling thread's current device,
// whichever it is at the time of use: their device is never cached.
bool follows_current_device(cudaStream_t handle) noexcept {
  return handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread;
}
} // namespace

stream stream::adopt(cudaStream_t handle, ownership own) noexcept {
  // Through the stream's context, never cudaStreamGetDevice: that call invalidates a capture in progress on the
  // stream (CUDA 13.0), and raw streams are adopted inside captures (launch on a cudaStream_t, the library adapters).
  const int device = follows_current_device(handle) ? -1 : detail::driver::stream_device(handle);
  return {handle, own == ownership::owned, device};
}

int stream::device() const {
  if (device_ >= 0) return device_;
  int device = -1;
  if (follows_current_device(handle_)) { // a default stream: the current device's
    CONVEYOR_CHECK(cudaGetDevice(&device));
    return device;
  }
  device = detail::driver::stream_device(handle_); // safe during a capture, unlike cudaStreamGetDevice
  if (device < 0)
    throw cuda_error(cudaErrorInvalidResourceHandle, "cuStreamGetCtx", std::source_location::current(),
                     "the driver cannot tell the stream's device: is the handle a live stream?");
  return device;
}

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    if (owned_ && handle_ != nullptr) (void)cudaStreamDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    owned_ = std::exchange(other.owned_, false);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

stream::~stream() {
  if (owned_ && handle_ != nullptr) (void)cudaStreamDestroy(handle_);
}

cudaStream_t stream::release() noexcept {
  owned_ = false;
  return std::exchange(handle_, nullptr);
}

void stream::synchronize(std::source_location where) const {
  const detail::api_scope scope("conveyor::stream::synchronize", where);
  CONVEYOR_CHECK(cudaStreamSynchronize(handle_));
}

void stream::wait(const event& e) const { CONVEYOR_CHECK(cudaStreamWaitEvent(handle_, e.get(), 0)); }

bool stream::is_capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CONVEYOR_CHECK(cudaStreamIsCapturing(handle_, &status));
  return status != cudaStreamCaptureStatusNone;
}

} // namespace conveyor
