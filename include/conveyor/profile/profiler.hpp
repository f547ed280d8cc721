#pragma once
//! \file profiler.hpp
//! conveyor::profile::profiler: records the GPU work of graph launches and eager launches through
//! CUPTI's Activity API (kernels, copies and memsets, each with the executable graph and node that
//! ran it), and the steps the user marks. Link the CMake target conveyor::profile (it brings CUPTI;
//! the core library does not need it).

#include "conveyor/profile/report.hpp"
#include "conveyor/profile/trace.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace conveyor {
class graph_exec;
} // namespace conveyor

namespace conveyor::profile {

//! A CUPTI call failed, or a second profiler was started while one is active. The message names the
//! CUPTI call and CUPTI's own words (`cuptiGetResultString`).
class profiler_error : public std::runtime_error {
public:
  //! `what`: the full message.
  explicit profiler_error(const std::string& what) : std::runtime_error(what) {}
};

//! What a profiler records.
struct profiler_options {
  bool copies = true; //!< record memcpy and memset activity as well as kernels
  //! size of each activity buffer handed to CUPTI, bytes (>= 64 KiB)
  std::size_t buffer_bytes = 8u << 20;
  //! GPU activity records kept between two collect() calls; later ones
  std::size_t max_records = 4u << 20;
  // !< are counted in trace::dropped_records (memory stays
  // bounded, about !< 200 bytes a record)
};

class profiler;

//! A marked step (profiler::step): from construction to destruction, the GPU work the calling
//! thread enqueues belongs to it (CUPTI external correlation). Move-only; the destructor ends the
//! step and never throws. End it on the thread that began it (CUPTI keeps one correlation stack per
//! thread). A scope that outlives its profiler ends the step on the thread's CUPTI stack and
//! records nothing.
class step_scope {
public:
  //! takes over `other`'s step; `other` ends nothing
  step_scope(step_scope&& other) noexcept;
  step_scope& operator=(step_scope&&) = delete;      //!< not assignable
  step_scope(const step_scope&) = delete;            //!< not copyable
  step_scope& operator=(const step_scope&) = delete; //!< not copyable
  ~step_scope();                                     //!< ends the step (pops its id); never throws
  //! The step's id (step_info::id).
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

private:
  friend class profiler;
  step_scope(profiler* owner, std::weak_ptr<void> alive, std::uint64_t id) noexcept :
      owner_(owner),
      alive_(std::move(alive)),
      id_(id) {}
  profiler* owner_ = nullptr;
  std::weak_ptr<void> alive_; // expires with the profiler
  std::uint64_t id_ = 0;
};

//! A profiling session. Construction subscribes to CUPTI and enables kernel (and copy, memset)
//! activity records, the driver/runtime API records that give each launch's host time, and external
//! correlation for steps; destruction disables them all. One profiler at a time per process (CUPTI
//! allows one subscriber).
//!
//! Attribution needs to know the graphs: watch() each executable graph whose nodes should be named
//! (it may have been instantiated before the profiler started). Work of unwatched graphs is
//! reported unattributed with the reason; eager work is attributed by kernel name and order within
//! its step.
//!
//! Cost: while a profiler exists CUPTI timestamps every kernel, copy and memset (conveyor bench
//! --profile measures it); with none, nothing is added to any Conveyor call.
//!
//! Thread safety: watch(), step(), pause(), resume() and collect() may be called from any thread;
//! records from all threads are collected. CUPTI delivers records on its own thread; the profiler
//! guards them. Destroy the profiler after the steps of other threads ended.
//!
//! Memory: at most profiler_options::max_records GPU records and as many host API records between
//! two collect() calls; later ones are counted in trace::dropped_records.
class profiler {
public:
  //! Starts recording. \throws profiler_error when a profiler already exists or a CUPTI call fails
  //! (no CUPTI library, no device, or a CUPTI version older than the one Conveyor was built with);
  //! cuda_error when CUDA cannot be initialised; std::invalid_argument for buffer_bytes below 64
  //! KiB or max_records 0.
  explicit profiler(const profiler_options& options = {});
  //! stops recording and releases CUPTI; records not collected are discarded. Never throws.
  ~profiler();
  profiler(const profiler&) = delete;            //!< one session
  profiler& operator=(const profiler&) = delete; //!< one session

  //! Names the executable graph `exec` `name` and attributes its activity to the nodes of
  //! `description` (take it from describe(exec): the graph whose parameters the executable graph
  //! runs, nested bodies included). Watching the same executable graph again replaces its name and
  //! description.
  //! \throws profiler_error when CUPTI cannot give the graph's id; std::invalid_argument
  //!         for an empty `exec`.
  void watch(const graph_exec& exec, std::string name, graph_description description);

  //! Stops recording until resume(): GPU activity (kernels, copies, memsets) and the host API calls
  //! (steps begun meanwhile are not correlated). Work already enqueued is still recorded. For
  //! sampled profiling: resume() before one step in k, pause() after it. \throws profiler_error
  //! when CUPTI refuses.
  void pause();
  //! Records GPU activity again after pause(). \throws profiler_error when CUPTI refuses.
  void resume();
  //! True between pause() and resume().
  [[nodiscard]] bool paused() const noexcept;

  //! Marks a step of track `track` (e.g. an execution mode) on the calling thread until the
  //! returned scope ends. Steps may not nest on one thread (the inner one would take the outer's
  //! work).
  //! \throws profiler_error when CUPTI refuses the external correlation id;
  //!         std::logic_error when the calling thread is already in a step.
  [[nodiscard]] step_scope step(std::string track);

  //! Waits for the device (`cudaDeviceSynchronize`), flushes CUPTI's buffers and returns everything
  //! recorded since the profiler started or the last collect(), with the watched graphs. Records
  //! are then forgotten.
  //! \throws profiler_error when flushing fails; cuda_error when the synchronisation
  //!         reports an error.
  [[nodiscard]] trace collect();

  //! Shorthand: analyze(collect(), options).
  //! \throws as collect() and analyze().
  [[nodiscard]] profile_report report(const analyze_options& options = {});

  struct state; //!< the session's records and CUPTI handles (defined in the library)

private:
  friend class step_scope;
  void end_step(std::uint64_t id) noexcept;
  static void end_orphan_step() noexcept; // pops the thread's step after its profiler is gone
  std::shared_ptr<void> alive_ = std::make_shared<int>(0);
  std::unique_ptr<state> state_;
};

} // namespace conveyor::profile
