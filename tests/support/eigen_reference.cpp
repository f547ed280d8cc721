// Test support: Eigen reference solve and eigenvalue estimates (see eigen_reference.hpp).
#include "support/eigen_reference.hpp"

#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>

#include <random>
#include <stdexcept>

namespace conveyor::test {

reference_solution eigen_reference_solve(const solve::csr_matrix& a, std::span<const double> b) {
  const int n = a.rows;
  std::vector<Eigen::Triplet<double>> triplets;
  triplets.reserve(a.nnz());
  for (int i = 0; i < n; ++i)
    for (int k = a.row_ptr[static_cast<std::size_t>(i)]; k < a.row_ptr[static_cast<std::size_t>(i) + 1]; ++k)
      triplets.emplace_back(i, a.col_idx[static_cast<std::size_t>(k)], a.values[static_cast<std::size_t>(k)]);
  Eigen::SparseMatrix<double> m(n, n);
  m.setFromTriplets(triplets.begin(), triplets.end());
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> ldlt(m);
  if (ldlt.info() != Eigen::Success) throw std::runtime_error("Eigen SimplicialLDLT: factorisation failed");

  reference_solution out;
  const Eigen::Map<const Eigen::VectorXd> rhs(b.data(), n);
  const Eigen::VectorXd x = ldlt.solve(rhs);
  if (ldlt.info() != Eigen::Success) throw std::runtime_error("Eigen SimplicialLDLT: solve failed");
  out.x.assign(x.data(), x.data() + n);
  out.residual = solve::relative_residual(a, out.x, b);

  std::mt19937_64 engine(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  Eigen::VectorXd v(n);
  for (int i = 0; i < n; ++i) v[i] = uniform(engine);
  v.normalize();
  Eigen::VectorXd w = v;
  for (int k = 0; k < 100; ++k) {
    v = ldlt.solve(v);
    v.normalize();
  }
  out.lambda_min = v.dot(m * v);
  double norm = 0.0;
  for (int k = 0; k < 300; ++k) {
    w = m * w;
    norm = w.norm();
    w /= norm;
  }
  out.lambda_max = norm;
  return out;
}

} // namespace conveyor::test
