#include "conveyor/runtime/event.hpp"

namespace conveyor {

event::event(unsigned flags) : owned_(true) { CONVEYOR_CHECK(cudaEventCreateWithFlags(&handle_, flags)); }

event event::adopt(cudaEvent_t handle, ownership own) noexcept { return {handle, own == ownership::owned}; }

event& event::operator=(event&& other) noexcept {
  if (this != &other) {
    if (owned_ && handle_ != nullptr) (void)cudaEventDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

event::~event() {
  if (owned_ && handle_ != nullptr) (void)cudaEventDestroy(handle_);
}

void event::record(const stream& s) const { CONVEYOR_CHECK(cudaEventRecord(handle_, s.get())); }

void event::synchronize(std::source_location where) const {
  const detail::api_scope scope("conveyor::event::synchronize", where);
  CONVEYOR_CHECK(cudaEventSynchronize(handle_));
}

float event::elapsed_ms(const event& start, const event& end) {
  float ms = 0.0F;
  CONVEYOR_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return ms;
}

} // namespace conveyor
