//! \file problem.cpp
//! Poisson matrices and right-hand sides.

#include "solve/problem.hpp"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

namespace conveyor::solve {

namespace {

// Builds the matrix of a d-dimensional grid (d = 2 or 3) with `n` points per side, row by row, columns sorted.
csr_matrix poisson(int n, int dims) {
  long long rows = 1;
  for (int d = 0; d < dims; ++d) rows *= n;
  csr_matrix a;
  a.rows = a.cols = static_cast<int>(rows);
  a.row_ptr.reserve(static_cast<std::size_t>(rows) + 1);
  const auto entries = static_cast<std::size_t>(rows) * static_cast<std::size_t>(2 * dims + 1);
  a.col_idx.reserve(entries);
  a.values.reserve(entries);
  a.row_ptr.push_back(0);
  const long long plane = static_cast<long long>(n) * n;
  for (long long row = 0; row < rows; ++row) {
    const long long x = row % n;
    const long long y = (row / n) % n;
    const long long z = dims == 3 ? row / plane : 0;
    auto add = [&](long long col, double v) {
      a.col_idx.push_back(static_cast<int>(col));
      a.values.push_back(v);
    };
    // In increasing column order: −z, −y, −x, centre, +x, +y, +z.
    if (dims == 3 && z > 0) add(row - plane, -1.0);
    if (y > 0) add(row - n, -1.0);
    if (x > 0) add(row - 1, -1.0);
    add(row, 2.0 * dims);
    if (x < n - 1) add(row + 1, -1.0);
    if (y < n - 1) add(row + n, -1.0);
    if (dims == 3 && z < n - 1) add(row + plane, -1.0);
    a.row_ptr.push_back(static_cast<int>(a.col_idx.size()));
  }
  return a;
}

} // namespace

csr_matrix poisson_2d(int n) {
  if (n < 1 || n > 20000)
    throw std::invalid_argument(fmt::format("poisson_2d: grid size {} out of range [1, 20000]", n));
  return poisson(n, 2);
}

csr_matrix poisson_3d(int n) {
  if (n < 1 || n > 600) throw std::invalid_argument(fmt::format("poisson_3d: grid size {} out of range [1, 600]", n));
  return poisson(n, 3);
}

rhs_kind parse_rhs_kind(std::string_view text) {
  if (text == "ones") return rhs_kind::ones;
  if (text == "random") return rhs_kind::random;
  throw std::invalid_argument(fmt::format("unknown right-hand side '{}'; expected 'ones' or 'random'", text));
}

std::vector<double> make_rhs(std::size_t n, rhs_kind kind, std::uint64_t seed) {
  std::vector<double> b(n, 1.0);
  if (kind == rhs_kind::random) {
    std::mt19937_64 engine(seed);
    for (double& v : b) v = static_cast<double>(engine() >> 11) * 0x1.0p-52 - 1.0; // 53 bits -> [-1, 1)
  }
  return b;
}

} // namespace conveyor::solve
