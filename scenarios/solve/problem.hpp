#pragma once
//! \file problem.hpp
//! Generated test problems: Poisson matrices (2D 5-point, 3D 7-point finite differences, Dirichlet boundary) and
//! right-hand sides.

#include "solve/csr.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace conveyor::solve {

//! The 2D Poisson matrix on an n x n grid of unknowns (5-point stencil, zero Dirichlet boundary, unscaled): n²
//! rows, 4 on the diagonal, −1 for each of the (up to 4) grid neighbours; 5n² − 4n entries. Symmetric positive
//! definite. Unknowns are numbered x-fastest (row = y·n + x).
//! \throws std::invalid_argument when n < 1 or the matrix would not fit 32-bit indices (n > 20000).
[[nodiscard]] csr_matrix poisson_2d(int n);

//! The 3D Poisson matrix on an n x n x n grid (7-point stencil, zero Dirichlet boundary): n³ rows, 6 on the
//! diagonal, −1 for each of the (up to 6) neighbours; 7n³ − 6n² entries. Numbered x-fastest, then y, then z.
//! \throws std::invalid_argument when n < 1 or the matrix would not fit 32-bit indices (n > 600).
[[nodiscard]] csr_matrix poisson_3d(int n);

//! Which right-hand side to solve for.
enum class rhs_kind { ones, random };

//! Parses "ones" or "random".
//! \throws std::invalid_argument for anything else.
[[nodiscard]] rhs_kind parse_rhs_kind(std::string_view text);

//! A right-hand side of `n` elements: all ones, or uniform in [−1, 1) from a 64-bit Mersenne Twister seeded with
//! `seed` (the same on every platform: the mapping from random bits to doubles is explicit).
[[nodiscard]] std::vector<double> make_rhs(std::size_t n, rhs_kind kind, std::uint64_t seed = 0);

} // namespace conveyor::solve
