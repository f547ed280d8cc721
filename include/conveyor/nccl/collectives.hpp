#pragma once
//! \file collectives.hpp
//! NCCL collectives and point-to-point calls on conveyor streams (all-reduce, broadcast,
//! reduce-scatter, all-gather, send, recv), group calls, and agree_on_capture. Part of the CMake
//! target conveyor::nccl.
//!
//! Every call enqueues on the stream it is given, so it is captured like any other stream work
//! (conveyor::capture, capture_session): NCCL's "Using NCCL with CUDA Graphs". Before calling NCCL
//! each call checks what can be checked and throws nccl_error with the rank and device, enqueuing
//! nothing: an empty or aborted communicator, a stream of another device than the communicator's, a
//! root or peer out of range, a null buffer with a count above 0, a stream whose capture was
//! already invalidated, and, inside a group, a collective captured on one of the process's ranks
//! and not on another (NCCL requires that whether an operation is captured be the same on every
//! rank). Buffers are device memory of the communicator's device; counts are in elements; send ==
//! recv is allowed (in place).
//!
//! NCCL's graph rules that only the caller can keep (Conveyor cannot see them):
//! - whether an operation is captured must be the same on every rank, and every rank must launch
//!   the graph made by that capture; agree_on_capture() turns a disagreement between processes into
//!   an error instead of a hang;
//! - point-to-point calls (send/recv) captured before any eager send/recv with the same peer make
//!   NCCL connect the peers during the capture: capture in capture_mode::thread_local_ (Conveyor's
//!   default) or relaxed, not global;
//! - with one thread driving several GPUs, capture them into one graph (conveyor::fork/join to
//!   the other devices' streams) rather than launching one graph per GPU from that thread: NCCL
//!   warns that separate launches can deadlock;
//! - destroy every graph that holds a communicator's operations before the communicator.

#include "conveyor/nccl/communicator.hpp"
#include "conveyor/nccl/error.hpp"
#include "conveyor/runtime/stream.hpp"

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <type_traits>
#include <vector>

namespace conveyor::nccl {

//! A reduction (`ncclRedOp_t`): sum, product, maximum, minimum, and average (the sum divided by the
//! number of ranks; for integers NCCL's integer division).
enum class reduce_op { sum, prod, max, min, avg };

//! The `ncclRedOp_t` of `op`.
[[nodiscard]] constexpr ncclRedOp_t to_nccl(reduce_op op) noexcept {
  switch (op) {
  case reduce_op::sum: return ncclSum;
  case reduce_op::prod: return ncclProd;
  case reduce_op::max: return ncclMax;
  case reduce_op::min: return ncclMin;
  case reduce_op::avg: return ncclAvg;
  }
  return ncclSum;
}

//! True for the element types the collectives take: float, double, std::int32_t, std::int64_t,
//! std::uint8_t.
template <class T>
inline constexpr bool is_element_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint8_t>;

//! The `ncclDataType_t` of T (one of is_element_type_v's types); any other T does not compile, with
//! a message that lists the types.
template <class T>
[[nodiscard]] constexpr ncclDataType_t data_type_of() noexcept {
  static_assert(is_element_type_v<T>,
                "conveyor::nccl collectives take elements of type float, double, "
                "std::int32_t, std::int64_t or std::uint8_t");
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return ncclInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return ncclInt64;
  else return ncclUint8;
}

namespace detail {
//! The untyped calls behind the templates (src/nccl/collectives.cpp); `type` from data_type_of.
void all_reduce(const communicator& comm, const void* send, void* recv, std::size_t count,
                ncclDataType_t type, reduce_op op, const conveyor::stream& s);
//! \copydoc all_reduce
void broadcast(const communicator& comm, const void* send, void* recv, std::size_t count,
               ncclDataType_t type, int root, const conveyor::stream& s);
//! \copydoc all_reduce
void reduce_scatter(const communicator& comm, const void* send, void* recv, std::size_t recv_count,
                    ncclDataType_t type, reduce_op op, const conveyor::stream& s);
//! \copydoc all_reduce
void all_gather(const communicator& comm, const void* send, void* recv, std::size_t send_count,
                ncclDataType_t type, const conveyor::stream& s);
//! \copydoc all_reduce
void send(const communicator& comm, const void* data, std::size_t count, ncclDataType_t type,
          int peer, const conveyor::stream& s);
//! \copydoc all_reduce
void recv(const communicator& comm, void* data, std::size_t count, ncclDataType_t type, int peer,
          const conveyor::stream& s);
} // namespace detail

//! All-reduce (`ncclAllReduce`): every rank's recv[i] becomes op over all ranks' send[i], for i <
//! count.
//! \param comm  this rank's communicator
//! \param send  `count` elements on the communicator's device
//! \param recv  `count` elements on the communicator's device; may equal send (in place)
//! \param count elements (not bytes); 0 enqueues nothing NCCL needs to do
//! \param op    the reduction
//! \param s     a stream of the communicator's device; the call is captured when `s` is capturing
//! \throws nccl_error (nothing enqueued) for the checks in this file's comment; nccl_error
//!         from NCCL (the communicator is aborted) or when the enqueue does not finish within the
//!         timeout. Thread safety: as communicator.
template <class T>
void all_reduce(const communicator& comm, const T* send, T* recv, std::size_t count, reduce_op op,
                const conveyor::stream& s) {
  detail::all_reduce(comm, send, recv, count, data_type_of<T>(), op, s);
}

//! Broadcast (`ncclBroadcast`): every rank's recv becomes rank `root`'s send.
//! \param comm  this rank's communicator
//! \param send  `count` elements; read on `root` only (may be null elsewhere)
//! \param recv  `count` elements on every rank; may equal send (in place)
//! \param count elements (not bytes)
//! \param root  a rank in [0, size())
//! \param s     a stream of the communicator's device
//! \throws nccl_error as all_reduce; also when root is out of range.
template <class T>
void broadcast(const communicator& comm, const T* send, T* recv, std::size_t count, int root,
               const conveyor::stream& s) {
  detail::broadcast(comm, send, recv, count, data_type_of<T>(), root, s);
}

//! Reduce-scatter (`ncclReduceScatter`): rank r's recv[i] becomes op over all ranks' send[r *
//! recv_count + i].
//! \param comm       this rank's communicator
//! \param send       size() * recv_count elements
//! \param recv       recv_count elements; may be send + rank() * recv_count (in place)
//! \param recv_count elements each rank receives
//! \param op         the reduction
//! \param s          a stream of the communicator's device
//! \throws nccl_error as all_reduce.
template <class T>
void reduce_scatter(const communicator& comm, const T* send, T* recv, std::size_t recv_count,
                    reduce_op op, const conveyor::stream& s) {
  detail::reduce_scatter(comm, send, recv, recv_count, data_type_of<T>(), op, s);
}

//! All-gather (`ncclAllGather`): every rank's recv[r * send_count + i] becomes rank r's send[i].
//! \param comm       this rank's communicator
//! \param send       send_count elements; may be recv + rank() * send_count (in place)
//! \param recv       size() * send_count elements
//! \param send_count elements each rank contributes
//! \param s          a stream of the communicator's device
//! \throws nccl_error as all_reduce.
template <class T>
void all_gather(const communicator& comm, const T* send, T* recv, std::size_t send_count,
                const conveyor::stream& s) {
  detail::all_gather(comm, send, recv, send_count, data_type_of<T>(), s);
}

//! Sends `count` elements to rank `peer` (`ncclSend`), which must call recv with the same count and
//! type. A send and the matching recv on the same rank pair block each other's GPU until both run:
//! put several of them in one group.
//! \throws nccl_error as all_reduce; also when peer is out of range.
template <class T>
void send(const communicator& comm, const T* data, std::size_t count, int peer,
          const conveyor::stream& s) {
  detail::send(comm, data, count, data_type_of<T>(), peer, s);
}

//! Receives `count` elements from rank `peer` into `data` (`ncclRecv`); see send().
//! \throws nccl_error as send.
template <class T>
void recv(const communicator& comm, T* data, std::size_t count, int peer,
          const conveyor::stream& s) {
  detail::recv(comm, data, count, data_type_of<T>(), peer, s);
}

//! A group call (`ncclGroupStart` / `ncclGroupEnd`) as an RAII object: the calls made while it is
//! open are launched together at end(). Needed when one thread drives several communicators (one
//! process, several GPUs: each rank's collective in the same group) and to fuse sends and receives.
//! Groups nest; only the outermost end launches.
//!
//! For nonblocking communicators `ncclGroupEnd` returns before the launch is done: end() polls
//! every communicator used in the group until it is (`ncclCommGetAsyncError` no longer
//! ncclInProgress), up to their longest timeout. A call refused by Conveyor's checks inside a group
//! makes the whole group fail: end() then still ends the NCCL group, aborts every communicator used
//! in it (their operations may now wait for peers that will never join) and throws nccl_error. An
//! exception that leaves the group open (thrown by anything between the constructor and end(): user
//! code, std::bad_alloc, cuda_error ...) fails it alike: the destructor sees it unwinding
//! (`std::uncaught_exceptions()`), ends the NCCL group and aborts every communicator used in it
//! ("an exception left the group open"), as the collectives queued so far would otherwise launch
//! without the other ranks' and wait for ever. An abort never waits for graphs that captured the
//! communicator (see communicator's class comment). Thread safety: a group belongs to the thread
//! that opened it (NCCL's groups are per thread).
class group {
public:
  //! Opens a group (`ncclGroupStart`).
  //! \throws nccl_error when NCCL refuses.
  group();
  group(const group&) = delete;
  group& operator=(const group&) = delete;
  //! Ends the group if end() was not called. When an exception thrown since the constructor is
  //! unwinding, the group fails first ("an exception left the group open"), so every communicator
  //! used in it is aborted; otherwise it is launched and waited for as end() does. Any error is
  //! swallowed after aborting the communicators used in it. Never throws.
  ~group();

  //! Ends the group (`ncclGroupEnd`) and, for the outermost group, waits until every communicator
  //! used in it has launched its work (not until the work finishes: use synchronize for that).
  //! \throws std::logic_error when already ended; nccl_error (after aborting the group's
  //!         communicators; the message names every rank and device of the group) when NCCL reports
  //!         an error, the launch does not finish within the timeout, or a call in the group was
  //!         refused or an exception left an inner group open.
  void end();

private:
  bool open_ = true;
  int uncaught_ = std::uncaught_exceptions(); //!< exceptions in flight when the group opened
};

//! Makes every rank agree, before a capture, on what it will capture: an eager all-reduce (max over
//! ranks of {tag, ~tag}, that is the largest and smallest tag) on a small device buffer of each
//! communicator, waited for with the timeout. Call it on every rank with tag 0 for "I will run the
//! next collectives eagerly" or a hash naming what it will capture (e.g. of the graph's shape);
//! when the tags differ, every rank throws nccl_error("capture decision differs between ranks:
//! ...") instead of some ranks capturing while others run eagerly, which NCCL does not allow and
//! which would hang. This overload is for one process driving several devices (comms[i] with
//! streams[i], one tag for all of them): it agrees with the other processes. Must be called outside
//! a capture (it waits for its all-reduce).
//! \throws std::invalid_argument when the spans differ in length or a stream pointer is
//!         null; nccl_error (nothing enqueued) when a stream is capturing; nccl_error when the tags
//!         differ (the communicators stay usable), or on an NCCL error or timeout (they are
//!         aborted).
void agree_on_capture(std::span<const communicator> comms,
                      std::span<const conveyor::stream* const> streams, std::uint64_t tag);

//! agree_on_capture for one rank: `comm` with stream `s`, from this rank's own thread or process.
//! \throws nccl_error as the other overload.
void agree_on_capture(const communicator& comm, const conveyor::stream& s, std::uint64_t tag);

} // namespace conveyor::nccl
