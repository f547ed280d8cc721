//! \file csr.cpp
//! CSR conversion and host-side checks.

#include "solve/csr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace conveyor::solve {

csr_matrix to_csr(const coo_matrix& m) {
  const bool mirror = m.symmetry == mm_symmetry::symmetric;
  std::size_t total = 0;
  for (const mm_entry& e : m.entries) total += (mirror && e.row != e.col) ? 2 : 1;
  if (total > static_cast<std::size_t>(INT_MAX))
    throw std::length_error(fmt::format("{}: {} entries once both triangles are stored; at most {} fit 32-bit indices",
                                        m.source, total, INT_MAX));
  csr_matrix a;
  a.rows = m.rows;
  a.cols = m.cols;
  a.row_ptr.assign(static_cast<std::size_t>(m.rows) + 1, 0);
  for (const mm_entry& e : m.entries) {
    ++a.row_ptr[static_cast<std::size_t>(e.row) + 1];
    if (mirror && e.row != e.col) ++a.row_ptr[static_cast<std::size_t>(e.col) + 1];
  }
  std::partial_sum(a.row_ptr.begin(), a.row_ptr.end(), a.row_ptr.begin());
  a.col_idx.resize(total);
  a.values.resize(total);
  std::vector<int> next(a.row_ptr.begin(), a.row_ptr.end() - 1);
  auto put = [&](int row, int col, double v) {
    const auto k = static_cast<std::size_t>(next[static_cast<std::size_t>(row)]++);
    a.col_idx[k] = col;
    a.values[k] = v;
  };
  for (const mm_entry& e : m.entries) {
    put(e.row, e.col, e.value);
    if (mirror && e.row != e.col) put(e.col, e.row, e.value);
  }
  // Sort each row by column (the reader has rejected duplicates).
  std::vector<std::pair<int, double>> row;
  for (int i = 0; i < a.rows; ++i) {
    const auto begin = static_cast<std::size_t>(a.row_ptr[static_cast<std::size_t>(i)]);
    const auto end = static_cast<std::size_t>(a.row_ptr[static_cast<std::size_t>(i) + 1]);
    row.clear();
    for (std::size_t k = begin; k < end; ++k) row.emplace_back(a.col_idx[k], a.values[k]);
    std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (std::size_t k = begin; k < end; ++k) {
      a.col_idx[k] = row[k - begin].first;
      a.values[k] = row[k - begin].second;
    }
  }
  return a;
}

std::vector<double> diagonal(const csr_matrix& a) {
  if (a.rows != a.cols)
    throw std::invalid_argument(fmt::format("diagonal: the matrix is {} x {}, not square", a.rows, a.cols));
  std::vector<double> d(static_cast<std::size_t>(a.rows), 0.0);
  for (int i = 0; i < a.rows; ++i)
    for (int k = a.row_ptr[static_cast<std::size_t>(i)]; k < a.row_ptr[static_cast<std::size_t>(i) + 1]; ++k)
      if (a.col_idx[static_cast<std::size_t>(k)] == i)
        d[static_cast<std::size_t>(i)] = a.values[static_cast<std::size_t>(k)];
  return d;
}

void require_positive_diagonal(const csr_matrix& a) {
  const auto d = diagonal(a);
  for (std::size_t i = 0; i < d.size(); ++i)
    if (!(d[i] > 0.0) || !std::isfinite(d[i]))
      throw std::invalid_argument(fmt::format(
          "row {} has diagonal entry {:g}; the matrix is not symmetric positive definite (every diagonal entry must "
          "be > 0, and the Jacobi preconditioner divides by it)",
          i + 1, d[i]));
}

bool is_symmetric(const csr_matrix& a) {
  if (a.rows != a.cols) return false;
  for (int i = 0; i < a.rows; ++i) {
    for (int k = a.row_ptr[static_cast<std::size_t>(i)]; k < a.row_ptr[static_cast<std::size_t>(i) + 1]; ++k) {
      const int j = a.col_idx[static_cast<std::size_t>(k)];
      const auto first = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(j)];
      const auto last = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(j) + 1];
      const auto it = std::lower_bound(first, last, i);
      if (it == last || *it != i) return false;
      if (a.values[static_cast<std::size_t>(it - a.col_idx.begin())] != a.values[static_cast<std::size_t>(k)])
        return false;
    }
  }
  return true;
}

std::vector<double> multiply(const csr_matrix& a, std::span<const double> x) {
  if (x.size() != static_cast<std::size_t>(a.cols))
    throw std::invalid_argument(fmt::format("multiply: x has {} elements, the matrix {} columns", x.size(), a.cols));
  std::vector<double> y(static_cast<std::size_t>(a.rows));
  for (int i = 0; i < a.rows; ++i) {
    long double sum = 0.0L;
    for (int k = a.row_ptr[static_cast<std::size_t>(i)]; k < a.row_ptr[static_cast<std::size_t>(i) + 1]; ++k)
      sum += static_cast<long double>(a.values[static_cast<std::size_t>(k)]) *
             static_cast<long double>(x[static_cast<std::size_t>(a.col_idx[static_cast<std::size_t>(k)])]);
    y[static_cast<std::size_t>(i)] = static_cast<double>(sum);
  }
  return y;
}

double relative_residual(const csr_matrix& a, std::span<const double> x, std::span<const double> b) {
  if (b.size() != static_cast<std::size_t>(a.rows))
    throw std::invalid_argument(
        fmt::format("relative_residual: b has {} elements, the matrix {} rows", b.size(), a.rows));
  if (x.size() != static_cast<std::size_t>(a.cols))
    throw std::invalid_argument(
        fmt::format("relative_residual: x has {} elements, the matrix {} columns", x.size(), a.cols));
  long double rr = 0.0L;
  long double bb = 0.0L;
  for (int i = 0; i < a.rows; ++i) {
    long double ax = 0.0L;
    for (int k = a.row_ptr[static_cast<std::size_t>(i)]; k < a.row_ptr[static_cast<std::size_t>(i) + 1]; ++k)
      ax += static_cast<long double>(a.values[static_cast<std::size_t>(k)]) *
            static_cast<long double>(x[static_cast<std::size_t>(a.col_idx[static_cast<std::size_t>(k)])]);
    const long double bi = b[static_cast<std::size_t>(i)];
    rr += (bi - ax) * (bi - ax);
    bb += bi * bi;
  }
  return static_cast<double>(bb > 0.0L ? std::sqrt(rr / bb) : std::sqrt(rr));
}

double norm2(std::span<const double> v) {
  long double s = 0.0L;
  for (double x : v) s += static_cast<long double>(x) * x;
  return static_cast<double>(std::sqrt(s));
}

} // namespace conveyor::solve
