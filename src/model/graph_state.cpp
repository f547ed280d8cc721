#include "model/graph_state.hpp"

#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"

namespace conveyor::detail {

graph_state::~graph_state() {
  if (owned && handle != nullptr) (void)cudaGraphDestroy(handle);
}

void attach_resources(graph_state& state) {
  std::lock_guard lock(state.attach_mutex);
  if (state.keep_object != nullptr || state.handle == nullptr) return;
  {
    std::lock_guard items(state.keep->mutex);
    if (state.keep->items.empty()) return; // nothing a launch could use: no user object, no launch tracking
  }
  cudaUserObject_t object = make_user_object(state.keep);
  const cudaError_t rc = cudaGraphRetainUserObject(state.handle, object, 1, cudaGraphUserObjectMove);
  if (rc != cudaSuccess) {
    (void)cudaUserObjectRelease(object, 1);
    throw_cuda(rc, "cudaGraphRetainUserObject", "tying a graph's resources to it for its launches");
  }
  state.keep_object = object;
}

void release_resources(graph_state& state) noexcept {
  std::lock_guard lock(state.attach_mutex);
  if (state.keep_object != nullptr && state.handle != nullptr)
    (void)cleared(cudaGraphReleaseUserObject(state.handle, state.keep_object, 1));
  state.keep_object = nullptr;
  auto none = std::make_shared<resources>();
  state.keep = none;
  for (auto& [node, info] : state.conditionals)
    for (auto& body : info.bodies) body->keep = none;
}

} // namespace conveyor::detail
