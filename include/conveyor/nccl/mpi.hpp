#pragma once
//! \file mpi.hpp
//! MPI bootstrap of NCCL communicators: one process per GPU started by mpirun. CMake target
//! conveyor::nccl_mpi (links MPI::MPI_C and conveyor::nccl); not included by conveyor/nccl.hpp, so
//! that only its users need MPI.

#include "conveyor/nccl/communicator.hpp"

#ifndef OMPI_SKIP_MPICXX
//! Only MPI's C API: keeps Open MPI's deprecated C++ bindings (which warn under -Wextra) out of
//! mpi.h.
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
//! Only MPI's C API: keeps MPICH's deprecated C++ bindings out of mpi.h.
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

namespace conveyor::nccl {

//! MPI for the life of the object: `MPI_Init_thread` (MPI_THREAD_FUNNELED) in the constructor and
//! `MPI_Finalize` in the destructor, both only when this object initialised MPI (when MPI is
//! already initialised the session borrows it). Make one in main() before any other MPI use.
//! Move-only would be meaningless: not copyable, not movable. Thread safety: MPI_THREAD_FUNNELED:
//! only the thread that made the session makes MPI calls.
class mpi_session {
public:
  //! Initialises MPI unless it is already (`MPI_Initialized`); reads the rank and size of
  //! MPI_COMM_WORLD and the rank among the processes of this host
  //! (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`).
  //! \param argc, argv main's, or null (MPI then reads nothing from the command line)
  //! \throws std::runtime_error with MPI's error text when an MPI call fails, or when MPI
  //!         provides a thread level below MPI_THREAD_FUNNELED to the MPI_Init_thread it calls;
  //!         when it throws after initialising MPI, it finalises MPI first.
  mpi_session(int* argc = nullptr, char*** argv = nullptr);
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  //! Calls `MPI_Finalize` when this session initialised MPI and it is not finalised yet. Never
  //! throws.
  ~mpi_session();

  //! The rank in MPI_COMM_WORLD.
  [[nodiscard]] int rank() const noexcept { return rank_; }
  //! The size of MPI_COMM_WORLD.
  [[nodiscard]] int size() const noexcept { return size_; }
  //! The rank among the processes on this host: the usual choice of CUDA device.
  [[nodiscard]] int local_rank() const noexcept { return local_rank_; }
  //! The number of processes on this host.
  [[nodiscard]] int local_size() const noexcept { return local_size_; }
  //! True when this session called MPI_Init_thread (and will call MPI_Finalize).
  [[nodiscard]] bool owns_mpi() const noexcept { return owns_; }

private:
  void read_world();
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  bool owns_ = false;
};

//! A communicator over the processes of `comm`: rank r of the NCCL communicator is rank r of
//! `comm`, on CUDA device `device`. Every process of `comm` must call it. First an `MPI_Allgather`
//! of (device, host name from `MPI_Get_processor_name`, compared whole, whether the device exists)
//! refuses, on every rank alike, two ranks on one device of one host (naming both ranks, the host
//! and the device) and a device that does not exist; then rank 0 makes the unique id
//! (`ncclGetUniqueId`), `MPI_Bcast`s it, and every rank calls communicator::init_rank with the
//! options' timeout.
//! \throws nccl_error (ncclInvalidArgument) for the refusals above (on every rank);
//!         nccl_error from NCCL or on timeout; std::runtime_error when an MPI call fails. Thread
//!         safety: as MPI (the session's thread).
[[nodiscard]] communicator init_with_mpi(MPI_Comm comm, int device,
                                         const comm_options& options = {});

//! Checks that `comm` has `expected` processes, e.g. a world size the user asked for.
//! \throws std::invalid_argument naming both ("expected 4 MPI processes, but this job has
//!         2: start it with mpirun -np 4") when they differ; std::runtime_error when MPI_Comm_size
//!         fails.
void check_world_size(MPI_Comm comm, int expected);

} // namespace conveyor::nccl
