//! \file cg_relaunch.cu
//! The graph-relaunch controller (cg_relaunch.hpp). Compiled as relocatable device code (the device runtime's
//! cudaGraphLaunch): see the CMake target conveyor_solve_relaunch.

#include "solve/cg_relaunch.hpp"

#include <conveyor/execute/device_launch.cuh>

namespace conveyor::solve {

conveyor::node add_cg_relaunch(conveyor::graph& g, const int* proceed, int* status) {
  return conveyor::device::add_relaunch(g, conveyor::device::while_nonzero{proceed}, status);
}

} // namespace conveyor::solve
