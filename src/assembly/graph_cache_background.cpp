// graph_cache's background instantiations (graphed_options::instantiate_in_background): the hand-over to the worker
// thread, and the call that takes a finished graph into the cache.
#include "conveyor/assembly/graph_cache.hpp"

#include "assembly/background_job.hpp"
#include "assembly/task_thread.hpp"

#include "conveyor/error.hpp"
#include "conveyor/runtime/device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace conveyor {

namespace detail {

void background_job::run() noexcept {
  try {
    CONVEYOR_CHECK(cudaSetDevice(device));
    holding = holding_of(source);
    const stream upload;
    exec = instantiate(source, flags);
    exec.upload(upload);
    upload.synchronize();
  } catch (...) {
    error = std::current_exception();
  }
  done.set_value();
}

bool background_job::finished() const noexcept {
  return ready.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

} // namespace detail

void graph_cache::add_in_background(const call_key& key, graph g) {
  if (!worker_) worker_ = std::make_unique<detail::task_thread>();
  auto job = std::make_shared<detail::background_job>();
  job->key = key;
  job->source = std::move(g);
  job->flags = options_.flags;
  job->device = current_device();
  pending_.push_back(job);
  ++stats_.captures;
  std::erase_if(warmups_, [&](auto& w) { return w.first.same_shape(key); });
  note(fmt::format("captured a graph for shape ({}): instantiating it in the background, the calls of its shape run "
                   "eagerly until it is ready",
                   key.shape_text()));
  worker_->post([job] { job->run(); });
}

void graph_cache::wait_for_background() const noexcept {
  for (const auto& job : pending_) job->ready.wait();
}

// For a call with `key`: true when its shape's graph is still being instantiated on the worker thread (the call runs
// eagerly). A finished one is taken into the cache (or dropped, when prepare cached the shape meanwhile), its error
// thrown.
bool graph_cache::take_background(const call_key& key) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const auto& j) { return j->key.same_shape(key); });
  if (it == pending_.end()) return false;
  if (!(*it)->finished()) return true;
  const std::shared_ptr<detail::background_job> job = *it;
  pending_.erase(it);
  if (job->error) std::rethrow_exception(job->error);
  if (has_shape(job->key)) {
    note(fmt::format("dropped the graph instantiated in the background for shape ({}): one was cached meanwhile",
                     job->key.shape_text()));
    return false;
  }
  make_room(job->holding.bytes, nullptr);
  note(fmt::format("the graph of {} nodes for shape ({}) instantiated in the background is ready", job->holding.nodes,
                   job->key.shape_text()));
  ++stats_.background_instantiations;
  (void)store(job->key, std::move(job->exec), job->holding);
  return false;
}

} // namespace conveyor
