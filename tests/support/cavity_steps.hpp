#pragma once
// Test support shared by the cavity tests: options for a fixed number of time steps.

#include "cavity/solver.hpp"

#include <cstdint>

namespace conveyor::test {

//! Cavity options for exactly `steps` time steps (no convergence stop, tol 0) at Reynolds number `re` on an n x n
//! lattice, `k` steps per graph.
inline conveyor::cavity::cavity_options fixed(double re, int n, std::int64_t steps, int k) {
  conveyor::cavity::cavity_options o;
  o.re = re;
  o.n = n;
  o.steps = steps;
  o.steps_per_graph = k;
  o.tol = 0.0;
  return o;
}

} // namespace conveyor::test
