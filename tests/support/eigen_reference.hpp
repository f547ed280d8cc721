#pragma once
// Test support: an independent CPU solve of A x = b with Eigen (SimplicialLDLT, double), and the smallest and
// largest eigenvalues of A for a condition-aware error bound. Compiled as C++ (Eigen stays out of nvcc).

#include "solve/csr.hpp"

#include <span>
#include <vector>

namespace conveyor::test {

//! The reference solution and what the error bound needs.
struct reference_solution {
  std::vector<double> x;   //!< Eigen SimplicialLDLT solution
  double residual = 0.0;   //!< ‖b − A x‖/‖b‖ of that solution (conveyor::solve::relative_residual)
  double lambda_min = 0.0; //!< smallest eigenvalue: Rayleigh quotient after 100 steps of inverse iteration
  double lambda_max = 0.0; //!< largest eigenvalue: norm ratio after 300 steps of power iteration
};

//! Solves A x = b with Eigen's SimplicialLDLT and estimates λmin (inverse iteration with the same factor) and λmax.
//! \throws std::runtime_error when the factorisation fails (A not SPD or singular).
[[nodiscard]] reference_solution eigen_reference_solve(const solve::csr_matrix& a, std::span<const double> b);

} // namespace conveyor::test
