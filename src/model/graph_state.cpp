#include "model/graph_state.hpp"

#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"

namespace conveyor::detail {

graph_state::~graph_state() {
  if (owned && handle != nullptr) (void)cudaGraphDestroy(handle);
}

void attach_resources(graph_state& state) {
  std::lock_guard lock(state.attach_mutex);
  if (state.keep_attached || state.handle == nullptr) return;
  cudaUserObject_t object = make_user_object(state.keep);
  const cudaError_t rc = cudaGraphRetainUserObject(state.handle, object, 1, cudaGraphUserObjectMove);
  if (rc != cudaSuccess) {
    (void)cudaUserObjectRelease(object, 1);
    throw_cuda(rc, "cudaGraphRetainUserObject", "tying a graph's resources to it for its launches");
  }
  state.keep_attached = true;
}

} // namespace conveyor::detail
