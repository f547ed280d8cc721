#pragma once
//! \file communicator.hpp
//! conveyor::nccl::communicator: an NCCL communicator (`ncclComm_t`) as a move-only RAII object,
//! always nonblocking (`ncclConfig_t::blocking = 0`) so that every wait is a poll with a deadline
//! and a failed peer ends in an nccl_error, never in a hang. Part of the CMake target
//! conveyor::nccl.

#include "conveyor/nccl/error.hpp"
#include "conveyor/runtime/stream.hpp"

#include <nccl.h>

#include <chrono>
#include <memory>
#include <span>
#include <vector>

namespace conveyor::nccl {

//! Options of a communicator. A plain value.
struct comm_options {
  //! The longest any wait of the communicator may take: its initialisation, group end (group::end),
  //! synchronize() and agree_on_capture(), and the finalisation (or the wait for a background
  //! abort) in the destructor. When it passes the communicator is aborted (`ncclCommAbort`) and the
  //! call throws nccl_error with timed_out() true. Make it longer than the slowest collective you
  //! wait for at once (a whole captured graph's worth of them).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

//! An NCCL unique id (`ncclUniqueId`, 128 bytes): made once by one rank, given to all others (by
//! MPI, a file, a socket ...) before communicator::init_rank. A plain value.
struct unique_id {
  ncclUniqueId id{}; //!< the raw id

  //! A new id (`ncclGetUniqueId`). NCCL opens a bootstrap socket on a network interface of this
  //! host; needs no GPU.
  //! \throws nccl_error when NCCL cannot make one (no usable network interface: see
  //!         NCCL_SOCKET_IFNAME).
  [[nodiscard]] static unique_id create();
};

namespace detail {
struct comm_state;
} // namespace detail

//! An NCCL communicator of one rank on one CUDA device (`ncclComm_t`), move-only.
//!
//! Every communicator is made nonblocking (`ncclConfig_t::blocking = 0`, NCCL's "nonblocking
//! communicator"): NCCL calls then return at once (`ncclInProgress`) and Conveyor polls
//! `ncclCommGetAsyncError` until they are done or options().timeout has passed; on a timeout or an
//! asynchronous error it calls `ncclCommAbort`, so that a peer that failed, was killed, or never
//! called the same collective ends in nccl_error, never in a hang. After an abort the communicator
//! is empty: every use throws nccl_error (ncclInvalidUsage) saying it was aborted.
//!
//! The destructor never throws: `ncclCommFinalize` (polled up to options().timeout) then
//! `ncclCommDestroy`, or `ncclCommAbort` after an error. Destroy every graph (conveyor::graph,
//! graph_exec) that captured the communicator's operations first: NCCL 2.26 and later wait in
//! finalisation until they are gone; a destructor that still finds it waiting after the timeout
//! leaves the communicator to the process's exit (and says so on stderr) rather than hang or abort
//! into NCCL's waiting thread.
//!
//! Aborts and graphs: NCCL 2.26 and later also make `ncclCommAbort` wait until every graph that
//! captured the communicator is destroyed (after setting its abort flag, so its kernels stop at
//! once). A communicator that has had operations captured is therefore aborted (on a timeout, an
//! error or abort()) on a background thread: the call that found the error throws at once while the
//! caller still holds its graph_exec. Destroy the graphs that captured it before the communicator:
//! the abort completes then, and the destructor waits for it up to options().timeout; if it has
//! still not ended the destructor leaves it running, says so on stderr, and returns (never hangs,
//! never throws).
//!
//! Thread safety: one thread at a time per communicator (NCCL's rule); different communicators may
//! be used from different threads (capture then with capture_mode::thread_local_, NCCL's advice for
//! one thread per GPU).
class communicator {
public:
  //! An empty communicator (no handle); every use but destruction and assignment throws nccl_error.
  communicator() noexcept;
  //! Takes over `other`'s communicator; `other` is left empty.
  communicator(communicator&& other) noexcept;
  //! Releases the held communicator (as the destructor) and takes over `other`'s. Never throws.
  communicator& operator=(communicator&& other) noexcept;
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  //! Finalises and destroys the communicator, or waits (up to options().timeout) for an abort
  //! running on a background thread (see the class comment). Never throws.
  ~communicator();

  //! One communicator per device of `devices`, all in this process: rank i on devices[i]
  //! (`ncclCommInitAll`'s semantics). Implemented as `ncclGetUniqueId`, then `ncclGroupStart`,
  //! `ncclCommInitRankConfig` for every device with `config.blocking = 0`, `ncclGroupEnd`, and a
  //! poll of every communicator up to options.timeout (so that the initialisation can time out and
  //! abort, which `ncclCommInitAll` cannot). The calling thread's current device is restored. A
  //! single device makes a communicator of one rank, which NCCL supports (its collectives copy or
  //! do nothing).
  //! \param devices CUDA device ordinals, each at most once
  //! \param options the communicators' options (all get the same)
  //! \throws nccl_error (ncclInvalidArgument) naming them when `devices` is empty, lists a
  //!         device twice or names one that does not exist; nccl_error from NCCL (every
  //!         communicator made so far is aborted) or a timeout. Thread safety: any thread; the
  //!         communicators are then used as the class comment says.
  [[nodiscard]] static std::vector<communicator> init_all(std::span<const int> devices,
                                                          const comm_options& options = {});

  //! Rank `rank` of a communicator of `nranks` ranks identified by `id` (made by unique_id::create
  //! on one rank and given to all), on CUDA device `device` (`ncclCommInitRankConfig` with
  //! `config.blocking = 0`, polled up to options.timeout; the calling thread's current device is
  //! restored). Every rank must call it, each from its own thread or process, within the timeout of
  //! each other.
  //! \throws nccl_error (ncclInvalidArgument) when nranks < 1, rank is outside [0, nranks)
  //!         or the device does not exist; nccl_error from NCCL or on timeout (the communicator is
  //!         aborted).
  [[nodiscard]] static communicator init_rank(int nranks, int rank, const unique_id& id, int device,
                                              const comm_options& options = {});

  //! This communicator's rank, in [0, size()); still known after an abort. \throws nccl_error when
  //! empty.
  [[nodiscard]] int rank() const;
  //! The number of ranks (as `ncclCommCount`); still known after an abort. \throws nccl_error when
  //! empty.
  [[nodiscard]] int size() const;
  //! The CUDA device of this rank (as `ncclCommCuDevice`); still known after an abort. \throws
  //! nccl_error when empty.
  [[nodiscard]] int device() const;
  //! The NCCL handle, for NCCL calls Conveyor does not wrap; null when empty or aborted. On a
  //! nonblocking communicator such calls may return ncclInProgress: poll `ncclCommGetAsyncError`
  //! before the next use.
  [[nodiscard]] ncclComm_t get() const noexcept;
  //! The options it was made with.
  [[nodiscard]] const comm_options& options() const noexcept;
  //! False when empty (default-made, moved from) or aborted.
  [[nodiscard]] bool valid() const noexcept;
  //! True after abort(), or after an error or timeout aborted it.
  [[nodiscard]] bool aborted() const noexcept;

  //! Checks for an asynchronous error (`ncclCommGetAsyncError`); ncclInProgress is not one.
  //! \throws nccl_error with the error, after aborting the communicator (NCCL's advice: a
  //!         communicator with an asynchronous error must be aborted); nccl_error when empty or
  //!         aborted.
  void check() const;

  //! Waits until all work enqueued on `s` so far has finished: polls `cudaStreamQuery` and
  //! `ncclCommGetAsyncError` with short sleeps, up to options().timeout. The stream should be one
  //! this rank's collectives run on.
  //! \throws nccl_error after aborting the communicator (`ncclCommAbort`, which also stops
  //!         NCCL kernels still waiting for peers) when an asynchronous error is reported, when the
  //!         stream reports a CUDA error, or when the timeout passes: "rank 0 (device 0): all work
  //!         on the stream did not finish within 5000 ms; a peer may have failed or not called the
  //!         same collectives; the communicator was aborted"; nccl_error when empty or aborted.
  void synchronize(const conveyor::stream& s) const;

  //! Aborts the communicator (`ncclCommAbort`): NCCL kernels still running stop, resources are
  //! freed, the object becomes empty. Does nothing when already empty. Never throws and never waits
  //! for graphs: when operations of the communicator were captured, the abort runs on a background
  //! thread that ends once the graphs that captured them are destroyed (the destructor waits for
  //! it; see the class comment).
  void abort() noexcept;

  //! Internal: the state behind the handle (for the library's free functions). Not for users.
  [[nodiscard]] detail::comm_state* state() const noexcept { return state_.get(); }

private:
  explicit communicator(std::unique_ptr<detail::comm_state> state) noexcept;
  std::unique_ptr<detail::comm_state> state_;
};

//! Waits, in one process, until all work enqueued on streams[i] (used by comms[i]) has finished,
//! polling every stream and communicator as communicator::synchronize does, up to the longest
//! options().timeout among `comms`.
//! \throws std::invalid_argument when the two spans differ in length or a stream pointer is
//!         null; nccl_error after aborting ALL the communicators when any reports an asynchronous
//!         error or a CUDA error, or the timeout passes (the message names the ranks, devices and
//!         what each still had to do).
void synchronize(std::span<const communicator> comms,
                 std::span<const conveyor::stream* const> streams);

} // namespace conveyor::nccl
