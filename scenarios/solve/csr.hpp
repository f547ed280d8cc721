#pragma once
//! \file csr.hpp
//! Compressed sparse row matrices on the host (double values, 32-bit indices, as cuSPARSE takes them): conversion
//! from Matrix Market storage, host SpMV and norms for independent checks.

#include "solve/matrix_market.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace conveyor::solve {

//! A sparse matrix in CSR form, 0-based: row i's entries are col_idx/values[row_ptr[i] .. row_ptr[i+1]), columns
//! strictly increasing within a row. Both triangles of a symmetric matrix are stored.
struct csr_matrix {
  int rows = 0;               //!< number of rows
  int cols = 0;               //!< number of columns
  std::vector<int> row_ptr;   //!< rows + 1 offsets into col_idx / values
  std::vector<int> col_idx;   //!< column of each stored entry
  std::vector<double> values; //!< value of each stored entry

  //! Number of stored entries.
  [[nodiscard]] std::size_t nnz() const noexcept { return values.size(); }
};

//! Converts Matrix Market storage to CSR. Symmetric storage is expanded: each off-diagonal entry (i, j) also
//! appears as (j, i), so the result holds both triangles. Columns are sorted within each row.
//! \throws std::length_error when the expanded entry count does not fit 32-bit indices.
[[nodiscard]] csr_matrix to_csr(const coo_matrix& m);

//! The diagonal of a square matrix (0 where no diagonal entry is stored).
//! \throws std::invalid_argument when `a` is not square.
[[nodiscard]] std::vector<double> diagonal(const csr_matrix& a);

//! Checks that every diagonal entry is positive (finite and > 0), as the Jacobi preconditioner and an SPD
//! matrix require.
//! \throws std::invalid_argument naming the first offending row (1-based) and its value.
void require_positive_diagonal(const csr_matrix& a);

//! True when `a` is square and a(i, j) == a(j, i) exactly for every stored entry.
[[nodiscard]] bool is_symmetric(const csr_matrix& a);

//! y = A x on the host, each row accumulated in long double. Sizes: x has a.cols elements, the result a.rows.
//! \throws std::invalid_argument when x has the wrong size.
[[nodiscard]] std::vector<double> multiply(const csr_matrix& a, std::span<const double> x);

//! ‖b − A x‖₂ / ‖b‖₂ on the host, in long double (‖b − A x‖₂ when b is zero). Independent of the GPU path.
//! \throws std::invalid_argument when b or x has the wrong size.
[[nodiscard]] double relative_residual(const csr_matrix& a, std::span<const double> x, std::span<const double> b);

//! Euclidean norm, accumulated in long double.
[[nodiscard]] double norm2(std::span<const double> v);

} // namespace conveyor::solve
