#include "model/graph_state.hpp"

#include <stdexcept>
#include <string>

#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"

namespace conveyor::detail {

graph_state::~graph_state() {
  if (owned && handle != nullptr && !lost) (void)cudaGraphDestroy(handle);
  if (keep_object != nullptr) let_go(keep_token);
  for (const auto& t : copied_tokens) let_go(t);
}

std::vector<std::shared_ptr<release_token>> graph_state::held_tokens() const {
  std::vector<std::shared_ptr<release_token>> out = copied_tokens;
  if (keep_object != nullptr && keep_token) out.push_back(keep_token);
  return out;
}

void lose(graph_state& state) noexcept {
  state.lost = true;
  for (auto p = state.parent.lock(); p; p = p->parent.lock()) p->lost = true;
}

void check_not_lost(const graph_state& state, const char* call) {
  if (state.lost)
    throw std::logic_error(std::string(call) +
                           ": this graph was lost: a capture into it (or into one of its conditional bodies) was "
                           "invalidated, and CUDA frees the graph's definition then; build or capture the graph again");
}

void throw_empty_graph(const char* call, const char* argument) {
  std::string what = std::string(call) + ": an empty (moved-from) graph";
  if (argument != nullptr) what += std::string(" (") + argument + ")";
  throw std::invalid_argument(what);
}

void attach_resources_locked(graph_state& state) {
  std::lock_guard lock(state.attach_mutex);
  if (state.keep_object != nullptr || state.handle == nullptr) return;
  {
    std::lock_guard items(state.keep->mutex);
    if (state.keep->items.empty()) return; // nothing a launch could use: no user object, no launch tracking
  }
  auto [object, token] = make_user_object(state.keep);
  const cudaError_t rc = cudaGraphRetainUserObject(state.handle, object, 1, cudaGraphUserObjectMove);
  if (rc != cudaSuccess) {
    (void)cudaUserObjectRelease(object, 1);
    let_go(token);
    throw_cuda(rc, "cudaGraphRetainUserObject", "tying a graph's resources to it for its launches");
  }
  state.keep_token = std::move(token);
  state.keep_object.store(object, std::memory_order_release);
}

void release_resources(graph_state& state) noexcept {
  std::lock_guard lock(state.attach_mutex);
  if (state.keep_object != nullptr && state.handle != nullptr)
    (void)cleared(cudaGraphReleaseUserObject(state.handle, state.keep_object, 1));
  if (state.keep_object != nullptr) let_go(state.keep_token);
  state.keep_object = nullptr;
  state.keep_token.reset();
  auto none = std::make_shared<resources>();
  state.keep = none;
  for (auto& [node, info] : state.conditionals)
    for (auto& body : info.bodies) body->keep = none;
}

} // namespace conveyor::detail
