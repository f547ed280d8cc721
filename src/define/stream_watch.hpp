#pragma once
// Internal (define layer): the stream watch of captures (capture_options::watch_streams). While a watched capture is
// open, CUPTI's driver-API callbacks report every kernel launch, copy, memset, host function and graph launch of the
// process; one enqueued on a stream that takes part in no capture is recorded, and the capture's end refuses the
// graph, naming it. docs/capture.md ("Work on streams outside the capture").

#include "conveyor/define/capture.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::detail {

//! One operation enqueued, while a watched capture was open, on a stream outside every capture.
struct foreign_work {
  std::string call;         //!< the driver call (cuLaunchKernel, cuMemcpyAsync, ...)
  std::string kernel;       //!< the kernel's name, for a launch (empty otherwise)
  std::string stream;       //!< "stream 0x...", "the per-thread default stream", "the legacy default stream"
  std::uint64_t thread = 0; //!< the calling thread (its Linux thread id)
};

//! What `requested` means with the environment variable CONVEYOR_WATCH_STREAMS set to `env` (null: unset), for a
//! capture that graphed makes as the first of its shape (`graphed_first`, which asks for if_available): "1" turns
//! every capture's watch on (as stream_watch::on) unless it asked for off; "0" turns it off unless it asked for on;
//! unset (or another value), environment is off. Never throws.
[[nodiscard]] stream_watch resolve_stream_watch(stream_watch requested, const char* env) noexcept;

//! The readable form of `w` ("environment", "off", "on", "if_available").
[[nodiscard]] const char* to_string(stream_watch w) noexcept;

//! Begins watching for a capture about to begin, as `requested` (resolved with CONVEYOR_WATCH_STREAMS) says: loads
//! libcupti and subscribes to its driver-API callbacks when no watch is open. Returns a ticket for
//! end_stream_watch, 0 when the capture is not watched. stream_watch::on sees every thread's work;
//! stream_watch::if_available (graphed's default) the calling thread's only, so that a default never refuses a
//! program whose other threads run eager work on purpose meanwhile. Thread-safe.
//! \throws std::runtime_error when the watch is `on` and CUPTI's callback API cannot be had (why, in the message).
//! `capturing`: the stream whose capture begins next on this thread (null: not known); calls the thread makes on it
//! while the watch is open take part in that capture, and the callback asks the driver nothing about them.
[[nodiscard]] std::uint64_t begin_stream_watch(stream_watch requested, cudaStream_t capturing = nullptr);
//! Keeps CUPTI's subscription (the callbacks stay enabled, recording nothing while no watch is open) until
//! release_stream_watch, so that a batch of watched captures (graphed::prepare) subscribes once, not once a capture.
//! Returns whether it holds (false when `requested` resolves to off, or CUPTI cannot be had: each capture then acts
//! alone). Thread-safe; never throws but for std::bad_alloc.
[[nodiscard]] bool hold_stream_watch(stream_watch requested);
//! Ends one hold_stream_watch that returned true; lets go of CUPTI when no watch is open or held. Thread-safe.
void release_stream_watch() noexcept;

//! Ends the watch of `ticket` (0: nothing) and returns the foreign work seen while it was open; lets go of CUPTI when
//! it was the last watch open. Thread-safe; never throws but for std::bad_alloc.
[[nodiscard]] std::vector<foreign_work> end_stream_watch(std::uint64_t ticket);

//! The capture's refusal: what ran outside it (the first few), why no replay runs it, and the fix. `capturing`: the
//! capturing thread's id (foreign_work::thread).
[[nodiscard]] std::string foreign_work_message(const std::vector<foreign_work>& found, std::uint64_t capturing);

//! The calling thread's id, as foreign_work::thread holds it.
[[nodiscard]] std::uint64_t this_thread_id() noexcept;

//! Why the stream watch cannot run in this process (libcupti not found, another CUPTI subscriber), or empty when it
//! can: tries to load and subscribe when no watch is open. Thread-safe.
[[nodiscard]] std::string stream_watch_unavailable();

} // namespace conveyor::detail
