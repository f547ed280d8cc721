#pragma once
//! \file nccl.hpp
//! The NCCL layer of Conveyor (CMake target conveyor::nccl): communicators, collectives, groups and
//! agree_on_capture. The MPI bootstrap is in conveyor/nccl/mpi.hpp (target conveyor::nccl_mpi), not
//! included here.

#include "conveyor/nccl/collectives.hpp"
#include "conveyor/nccl/communicator.hpp"
#include "conveyor/nccl/error.hpp"
