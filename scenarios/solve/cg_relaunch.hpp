#pragma once
//! \file cg_relaunch.hpp
//! The controller of the `graph-relaunch` mode: a device graph (one CG iteration) that tail-launches itself until
//! the check kernel clears cg_scalars::proceed (conveyor::device::add_relaunch with a while_nonzero condition).
//! Its definition (cg_relaunch.cu) is the only relocatable device code of the solve scenario.

#include <conveyor/define/graph.hpp>

namespace conveyor::solve {

//! Adds to `g` (one CG iteration ending with the check kernel) the relaunch controller: a one-thread kernel after
//! every node without dependents that tail-launches the graph it runs in again while `*proceed` (device memory,
//! written by the check kernel) is non-zero. A failed relaunch stores CUDA's error in `*status` (device memory,
//! zero before the launch) and ends the loop. Instantiate `g` with conveyor::instantiate_for_device.
//! \returns the controller node. \throws conveyor::cuda_error when CUDA refuses the node.
conveyor::node add_cg_relaunch(conveyor::graph& g, const int* proceed, int* status);

} // namespace conveyor::solve
