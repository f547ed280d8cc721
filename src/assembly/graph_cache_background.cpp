// graph_cache's background instantiations (graphed_options::instantiate_in_background): the hand-over to a worker
// thread, the calls that take finished graphs into the cache, and prepare's wait for all of them.
#include "conveyor/assembly/graph_cache.hpp"

#include "assembly/background_job.hpp"
#include "assembly/task_thread.hpp"
#include "cuda/driver.hpp"
#include "cuda/lifetime.hpp"
#include "model/graph_state.hpp"

#include "conveyor/error.hpp"
#include "conveyor/runtime/device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace conveyor {

namespace detail {

namespace {

// The hand-over's context (or device) current on this thread.
void adopt_context(CUcontext context, int device) {
  if (context == nullptr) {
    CONVEYOR_CHECK(cudaSetDevice(device));
    return;
  }
  const CUresult rc = driver::ctx_set_current(context);
  if (rc != CUDA_SUCCESS)
    throw cuda_error(cudaErrorDeviceUninitialized, "cuCtxSetCurrent", std::source_location::current(),
                     fmt::format("the worker thread could not make the capturing thread's context current (CUresult "
                                 "{})",
                                 static_cast<int>(rc)));
}

} // namespace

void background_job::run() noexcept {
  collect_elsewhere = true; // for good: the thread runs nothing but background jobs
  try {
    adopt_context(context, device);
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    CONVEYOR_CHECK(cudaThreadExchangeStreamCaptureMode(&relaxed));
    holding = holding_of(source);
    exec = instantiate(source, flags);
    if (upload) {
      const stream s;
      exec.upload(s);
      s.synchronize();
    }
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
  (void)detail::nonempty_state(g, "conveyor::graph_cache::add_in_background");
  if (workers_.empty())
    for (std::size_t i = 0; i < options_.instantiate_threads; ++i)
      workers_.push_back(std::make_unique<detail::task_thread>());
  auto job = std::make_shared<detail::background_job>();
  job->key = key;
  job->call = stats_.calls;
  job->source = std::move(g);
  job->flags = options_.flags;
  job->device = current_device();
  job->upload = options_.max_bytes == 0; // under a byte budget, nothing is mapped before make_room has made room
  if (detail::driver::ctx_get_current(&job->context) != CUDA_SUCCESS) job->context = nullptr;
  pending_.reserve(pending_.size() + 1); // the push below cannot throw once the job runs
  workers_[next_worker_ % workers_.size()]->post([job] { job->run(); });
  ++next_worker_;
  pending_.push_back(job);
  ++stats_.captures;
  std::erase_if(warmups_, [&](auto& w) { return w.first.same_shape(key); });
  note(fmt::format("captured a graph for shape ({}): instantiating it in the background, the calls of its shape run "
                   "eagerly until it is ready",
                   key.shape_text()));
}

void graph_cache::wait_for_background() const noexcept {
  for (const auto& job : pending_) job->ready.wait();
}

void graph_cache::finish_background() {
  wait_for_background();
  while (!pending_.empty()) take(pop_pending(pending_.begin()));
}

std::size_t graph_cache::pending_instantiations() const noexcept { return pending_.size(); }

// Out of pending_: the job at `it`, with what it owns.
std::shared_ptr<detail::background_job>
graph_cache::pop_pending(std::vector<std::shared_ptr<detail::background_job>>::iterator it) {
  std::shared_ptr<detail::background_job> job = std::move(*it);
  pending_.erase(it);
  return job;
}

// Every finished instantiation that succeeded, into the cache (or dropped): none waits in pending_ outside
// max_graphs and max_bytes. Failed ones stay for the next call of their shape, which throws their error, unless a
// graph of their shape was cached meanwhile (dropped then).
void graph_cache::reap_background() {
  for (std::size_t i = 0; i < pending_.size();) {
    const detail::background_job& job = *pending_[i];
    if (job.finished() && (!job.error || has_cached_shape(job.key)))
      take(pop_pending(pending_.begin() + static_cast<std::ptrdiff_t>(i)));
    else ++i;
  }
}

// For a call with `key` whose shape has no cached graph: true when its shape's graph is still being instantiated on
// a worker thread (the call runs eagerly); a failed instantiation of its shape is thrown.
bool graph_cache::waiting_for_background(const call_key& key) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const auto& j) { return j->key.same_shape(key); });
  if (it == pending_.end()) return false;
  if (!(*it)->finished()) return true;
  take(pop_pending(it)); // failed (reap_background took the others)
  return false;
}

// A finished background instantiation, out of pending_: into the cache, or dropped when a graph of its shape was
// cached meanwhile; its error thrown, with a reason naming the call that captured it. What the job owns dies here,
// on the calling thread.
void graph_cache::take(std::shared_ptr<detail::background_job> job) {
  graph source = std::move(job->source);
  graph_exec exec = std::move(job->exec);
  if (has_cached_shape(job->key)) {
    note(fmt::format("dropped the graph {} in the background for shape ({}): one was cached meanwhile",
                     job->error ? "that failed to instantiate" : "instantiated", job->key.shape_text()));
    return;
  }
  if (job->error) throw_background_error(*job);
  make_room_for(job->holding);
  note(fmt::format("the graph of {} nodes for shape ({}) instantiated in the background is ready", job->holding.nodes,
                   job->key.shape_text()));
  ++stats_.background_instantiations;
  (void)store(job->key, std::move(exec), job->holding);
}

// The error of a failed background instantiation, thrown on the calling thread: a cuda_error names the call that
// captured the graph, its shape and the worker thread (CUDA's own message after it); any other error as it was.
void graph_cache::throw_background_error(const detail::background_job& job) {
  const std::string where =
      fmt::format("the graph captured at call {} for shape ({}) failed to instantiate on a worker thread "
                  "(graphed_options::instantiate_in_background)",
                  job.call, job.key.shape_text());
  note(where + "; this call throws its error");
  try {
    std::rethrow_exception(job.error);
  } catch (const cuda_error& e) {
    throw cuda_error(e.code(), "conveyor::graphed (background instantiation)", std::source_location::current(),
                     fmt::format("{}: {}", where, e.what()));
  }
}

} // namespace conveyor
