#pragma once
// detail::task_thread: one worker thread running posted tasks in order (graph_cache's background instantiations,
// graphed_options::instantiate_in_background).

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace conveyor::detail {

//! One worker thread that runs the tasks posted to it, one at a time, in the order posted. Thread safety: post may be
//! called from any thread.
class task_thread {
public:
  //! Starts the thread. \throws std::system_error when the thread cannot be started.
  task_thread();
  task_thread(const task_thread&) = delete;
  task_thread& operator=(const task_thread&) = delete;
  //! Waits for the task in progress, drops those not started (destroying them unrun), joins the thread. Never throws.
  ~task_thread();
  //! Queues `task`. A task must not throw (catch inside it: a throw ends the program, as from any thread).
  void post(std::function<void()> task);

private:
  void run();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_; // last: started once the members above exist
};

} // namespace conveyor::detail
