// conveyor::nccl MPI bootstrap: mpi_session, init_with_mpi (the unique id over MPI_Bcast, NCCL's "Example 2: One
// Device per Process or Thread"), check_world_size.
#include "conveyor/nccl/mpi.hpp"

#include "conveyor/runtime/device.hpp"
#include "nccl/state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::nccl {

namespace {

[[noreturn]] void throw_mpi(int rc, std::string_view call) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw std::runtime_error(fmt::format(
      "conveyor::nccl: {} failed: {} (MPI error {})", call,
      length > 0 ? std::string(text, static_cast<std::size_t>(length)) : std::string("no description"), rc));
}

void check_mpi(int rc, std::string_view call) {
  if (rc != MPI_SUCCESS) throw_mpi(rc, call);
}

//! What every rank tells the others before the communicator is made (MPI_Allgather as bytes).
struct rank_facts {
  int device = -1;
  int visible = 0;                            // CUDA devices this rank sees
  char host[MPI_MAX_PROCESSOR_NAME + 1] = {}; // MPI_Get_processor_name, whole
};

//! What rank 0 broadcasts: the unique id, or why it has none.
struct id_message {
  int ok = 0;
  ncclUniqueId id{};
  char error[512] = {};
};

} // namespace

mpi_session::mpi_session(int* argc, char*** argv) {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized == 0) {
    int provided = 0;
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owns_ = true;
    if (provided < MPI_THREAD_FUNNELED) {
      (void)MPI_Finalize();
      owns_ = false;
      throw std::runtime_error(fmt::format(
          "conveyor::nccl: MPI_Init_thread provides thread level {} but MPI_THREAD_FUNNELED ({}) is needed (see "
          "mpi_session): use an MPI built with thread support",
          provided, MPI_THREAD_FUNNELED));
    }
  }
  try {
    read_world();
  } catch (...) {
    if (owns_) {
      (void)MPI_Finalize(); // do not leave MPI initialised by a session that failed to be made
      owns_ = false;
    }
    throw;
  }
}

void mpi_session::read_world() {
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  check_mpi(MPI_Comm_rank(local, &local_rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(local, &local_size_), "MPI_Comm_size");
  check_mpi(MPI_Comm_free(&local), "MPI_Comm_free");
}

mpi_session::~mpi_session() {
  if (!owns_) return;
  int finalized = 0;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && finalized == 0) (void)MPI_Finalize();
}

namespace {

//! This rank's facts: its device, the devices it sees, its host's name. No throw (the other ranks would wait in the
//! Allgather): a name MPI cannot give is "unknown host".
rank_facts facts_of(int device) {
  rank_facts mine;
  mine.device = device;
  mine.visible = device_count();
  int host_length = 0;
  if (MPI_Get_processor_name(mine.host, &host_length) != MPI_SUCCESS || host_length <= 0)
    std::strncpy(mine.host, "unknown host", sizeof mine.host - 1);
  else mine.host[std::min(host_length, MPI_MAX_PROCESSOR_NAME)] = '\0';
  return mine;
}

//! Refuses to make the communicator of `rank` (on `device`): throws ncclInvalidArgument from `call`.
[[noreturn]] void refuse(std::string_view call, int rank, int device, std::string detail) {
  nccl_error_info info;
  info.result = ncclInvalidArgument;
  info.call = std::string(call);
  info.rank = rank;
  info.device = device;
  info.detail = std::move(detail);
  throw nccl_error(std::move(info));
}

//! Refuses a rank that asked for a CUDA device its host does not have.
void check_devices_exist(std::string_view call, int rank, int device, const std::vector<rank_facts>& all) {
  for (std::size_t r = 0; r < all.size(); ++r) {
    const rank_facts& f = all[r];
    if (f.device < 0 || f.device >= f.visible)
      refuse(call, rank, device,
             fmt::format("rank {} asked for CUDA device {} on host '{}', which sees {} device(s){}", r, f.device,
                         f.host, f.visible, f.visible > 0 ? fmt::format(" (0..{})", f.visible - 1) : std::string()));
  }
}

//! Refuses two ranks that use the same CUDA device of the same host.
void check_devices_distinct(std::string_view call, int rank, int device, const std::vector<rank_facts>& all) {
  for (std::size_t a = 0; a < all.size(); ++a)
    for (std::size_t b = a + 1; b < all.size(); ++b) {
      const rank_facts& fa = all[a];
      const rank_facts& fb = all[b];
      if (fa.device == fb.device && std::strcmp(fa.host, fb.host) == 0)
        refuse(call, rank, device,
               fmt::format("ranks {} and {} both use CUDA device {} on host '{}': NCCL needs one device per rank; "
                           "give each rank its own GPU, e.g. its local rank (mpi_session::local_rank())",
                           a, b, fa.device, fa.host));
    }
}

//! Rank 0's unique id, broadcast to every rank of `comm`; every rank throws when rank 0 could not make one.
unique_id broadcast_id(MPI_Comm comm, int rank, int device) {
  id_message message;
  if (rank == 0) {
    try {
      message.id = unique_id::create().id;
      message.ok = 1;
    } catch (const nccl_error& e) {
      std::strncpy(message.error, e.what(), sizeof message.error - 1);
    }
  }
  check_mpi(MPI_Bcast(&message, static_cast<int>(sizeof message), MPI_BYTE, 0, comm), "MPI_Bcast");
  if (message.ok == 0) {
    message.error[sizeof message.error - 1] = '\0';
    nccl_error_info info;
    info.result = ncclSystemError;
    info.call = "ncclGetUniqueId";
    info.rank = rank;
    info.device = device;
    info.detail = fmt::format("rank 0 could not make the unique id: {}", message.error);
    throw nccl_error(std::move(info));
  }
  unique_id id;
  id.id = message.id;
  return id;
}

} // namespace

communicator init_with_mpi(MPI_Comm comm, int device, const comm_options& options) {
  constexpr std::string_view call = "conveyor::nccl::init_with_mpi";
  int rank = 0;
  int size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");

  const rank_facts mine = facts_of(device);
  std::vector<rank_facts> all(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&mine, static_cast<int>(sizeof mine), MPI_BYTE, all.data(), static_cast<int>(sizeof mine),
                          MPI_BYTE, comm),
            "MPI_Allgather");

  // Every rank checks every rank's facts, so that all of them throw alike instead of some waiting in init.
  check_devices_exist(call, rank, device, all);
  check_devices_distinct(call, rank, device, all);

  const unique_id id = broadcast_id(comm, rank, device);
  return communicator::init_rank(size, rank, id, device, options);
}

void check_world_size(MPI_Comm comm, int expected) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  if (size != expected)
    throw std::invalid_argument(fmt::format("expected {} MPI processes, but this job has {}: start it with mpirun -np "
                                            "{}",
                                            expected, size, expected));
}

} // namespace conveyor::nccl
