#pragma once
//! \file lattice.hpp
//! The D2Q9 lattice and the one-node update of the lid-driven cavity, shared by the CUDA kernel (kernels.cu) and the
//! CPU reference (reference_cpu.cpp), so that both run exactly the same arithmetic on the same memory layout.
//!
//! Layout: `n` x `n` fluid cells, x to the right, y upwards (the lid is the row y = n - 1 side, at y = n in lattice
//! units). Populations are float32, structure of arrays: population i of cell (x, y) is at
//! `g[i * n * n + y * n + x]`. What is stored is the deviation from the rest state, g_i = f_i - w_i (the density 1
//! and zero velocity are 0 everywhere): the values are small, so float32 rounding errors are about 100 times smaller
//! than with f_i itself. Walls lie halfway between the outermost cells and the (absent) cells beyond them; cell
//! centres are at ((x + 0.5) / n, (y + 0.5) / n) in the unit square.
//!
//! One time step of cell (x, y) ("pull" scheme, streaming fused with collision): population i is pulled from the
//! neighbour (x, y) - c_i of the source array; where that neighbour lies outside the cavity, the population comes
//! from halfway bounce-back at the cell itself (f_i = f*_opp(i)), plus Ladd's moving-wall term 6 w_i rho0 (c_i . u_w)
//! when the neighbour lies beyond the lid (y - c_iy = n; the two top corners count as lid, which keeps every cell's
//! wall terms summing to zero; the float rounding of those two additions, which at a steady state would repeat
//! every step and make the mass drift, is measured exactly and given to the rest population). Then a TRT collision (two relaxation times; the even part relaxes with
//! omega+ = 1 / tau, tau = 3 nu + 1/2, the odd part with omega- chosen by the "magic" parameter
//! Lambda = (1/omega+ - 1/2)(1/omega- - 1/2) = 1/4, the most stable choice) towards He & Luo's incompressible
//! equilibrium f_eq_i = w_i (rho + rho0 (3 c.u + 4.5 (c.u)^2 - 1.5 u.u)) with rho0 = 1 and u = sum_i c_i f_i
//! (momentum, no division by rho). The rest population takes exactly the mass the moving ones gave up
//! (equal to its TRT update in exact arithmetic), so no float32 bias in the weights or the equilibrium's quadratic
//! terms can make the total mass drift: only unbiased rounding remains. The result goes to the destination array.
//! Both arrays hold post-collision populations; their moments are the macroscopic density and velocity of the
//! step (the collision conserves them).

#include <cstddef>

#if defined(__CUDACC__)
#define CAVITY_HD __host__ __device__
#else
#define CAVITY_HD
#endif

namespace conveyor::cavity {

//! Number of D2Q9 velocities.
inline constexpr int q = 9;

//! x component of lattice velocity i (order: rest, E, N, W, S, NE, NW, SW, SE).
CAVITY_HD constexpr int d2q9_cx(int i) noexcept {
  return (i == 1 || i == 5 || i == 8) ? 1 : (i == 3 || i == 6 || i == 7) ? -1 : 0;
}
//! y component of lattice velocity i.
CAVITY_HD constexpr int d2q9_cy(int i) noexcept {
  return (i == 2 || i == 5 || i == 6) ? 1 : (i == 4 || i == 7 || i == 8) ? -1 : 0;
}
//! The index of the opposite velocity -c_i.
CAVITY_HD constexpr int d2q9_opposite(int i) noexcept {
  return i == 0 ? 0 : (i <= 4 ? ((i + 1) % 4) + 1 : ((i - 3) % 4) + 5);
}
//! Lattice weight w_i: 4/9 (rest), 1/9 (axis), 1/36 (diagonal).
CAVITY_HD constexpr float d2q9_weight(int i) noexcept {
  return i == 0 ? 4.0F / 9.0F : (i <= 4 ? 1.0F / 9.0F : 1.0F / 36.0F);
}

static_assert(d2q9_opposite(1) == 3 && d2q9_opposite(2) == 4 && d2q9_opposite(3) == 1 && d2q9_opposite(4) == 2);
static_assert(d2q9_opposite(5) == 7 && d2q9_opposite(6) == 8 && d2q9_opposite(7) == 5 && d2q9_opposite(8) == 6);

//! What one time step needs, in lattice units; derive it with make_lattice_params() (parameters.hpp).
struct lattice_params {
  int n = 0;                //!< cells per side
  float omega_plus = 1.0F;  //!< TRT even relaxation rate, 1 / tau
  float omega_minus = 1.0F; //!< TRT odd relaxation rate (Lambda = 1/4)
  float lid_speed = 0.0F;   //!< lid velocity (x direction), lattice units (cells per step)
  //! Where the step kernel lets the next kernel launch under programmatic dependent launch (--pdl-trigger):
  //! 0 after its wait for the previous step (at most two steps in flight), 1 before the wait (as soon as its blocks
  //! run: steps further ahead get resident and wait), 2 never explicitly (implicitly as its blocks exit: the
  //! default, fastest on the H200, docs/faster.md). Changes no result.
  int pdl_trigger = 2;
  //! How the step kernel's threads cover the lattice (--step-layout): 0 "rows": blocks of 128 cells along x, one
  //! block row per lattice row (at 257 cells a row, its third block holds one cell); 1 "flat" (the default: 1.03× at
  //! 257², 1.13× at 1025² and 4097² on the H200, docs/cavity.md): blocks of 256 consecutive cells of the row-major
  //! lattice, one thread per cell, no idle block. The same arithmetic per cell: bitwise the same states.
  int step_layout = 1;
};

//! Index of population i of cell (x, y) in an n x n structure-of-arrays field.
CAVITY_HD inline std::size_t population_index(int n, int i, int x, int y) noexcept {
  return static_cast<std::size_t>(i) * static_cast<std::size_t>(n) * static_cast<std::size_t>(n) +
         static_cast<std::size_t>(y) * static_cast<std::size_t>(n) + static_cast<std::size_t>(x);
}

//! A horizontal slab of the lattice and where its populations lie in memory (several GPUs: `--gpus`, docs/cavity.md,
//! "Several GPUs"). The slab computes rows [row_begin, row_begin + rows) (global row indices y) and stores rows
//! [first_row, first_row + plane / n): its own rows plus one halo row below (first_row = row_begin - 1) where a slab
//! lies below it, and one above where a slab lies above it, which the halo exchange fills with the neighbours'
//! boundary rows after every step. Structure of arrays as the whole lattice: population i of cell (x, y) is at
//! `i * plane + (y - first_row) * n + x` (slab_index). The whole lattice is the slab whole_lattice(n) =
//! {0, n, 0, n * n}, whose layout is population_index's, so one GPU runs exactly the code of several.
struct slab {
  int row_begin = 0;     //!< first row the slab computes (global y)
  int rows = 0;          //!< rows it computes
  int first_row = 0;     //!< global row of its first stored row (row_begin - 1 with a halo below, else row_begin)
  std::size_t plane = 0; //!< floats per population plane: stored rows (rows plus its halo rows) times n
};

//! The whole n x n lattice as one slab, without halos.
CAVITY_HD inline slab whole_lattice(int n) noexcept {
  return slab{0, n, 0, static_cast<std::size_t>(n) * static_cast<std::size_t>(n)};
}

//! Index of population i of cell (x, y) (y global, within the slab's stored rows) in slab `s`'s field.
CAVITY_HD inline std::size_t slab_index(int n, const slab& s, int i, int x, int y) noexcept {
  return static_cast<std::size_t>(i) * s.plane +
         static_cast<std::size_t>(y - s.first_row) * static_cast<std::size_t>(n) + static_cast<std::size_t>(x);
}

//! The incompressible equilibrium of population i minus its rest value, f_eq_i - w_i, for the density deviation
//! drho = rho - 1 and velocity (ux, uy).
CAVITY_HD inline float equilibrium_deviation(int i, float drho, float ux, float uy) noexcept {
  const float cu = static_cast<float>(d2q9_cx(i)) * ux + static_cast<float>(d2q9_cy(i)) * uy;
  const float usq = ux * ux + uy * uy;
  return d2q9_weight(i) * (drho + 3.0F * cu + 4.5F * cu * cu - 1.5F * usq);
}

//! a + b rounded to float, never fused with the multiplication that produced an operand (nvcc contracts a * b + c
//! into an FMA by default; __fadd_rn is exempt), so that two_sum_error() sees the sum that was stored.
CAVITY_HD inline float add_rounded(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

//! The rounding error of s = a + b computed in float: a + b = s + error exactly (Knuth's TwoSum; additions only,
//! so no contraction into FMAs can change it).
CAVITY_HD inline float two_sum_error(float a, float b, float s) noexcept {
  const float bb = s - a;
  return (a - (s - bb)) + (b - bb);
}

//! One time step of cell (x, y) (global coordinates; y a row slab `s` computes): pull from `src`, bounce back at walls
//! (moving lid included), TRT-collide, write the nine post-collision deviations g_i = f_i - w_i of the cell to
//! `dst`. `src` and `dst` are distinct fields of slab `s` (slab_index); the pulls from the rows beside the slab read
//! its halo rows. Walls and lid are found by the global row, so every slab decomposition runs the same arithmetic
//! on every cell: bitwise the same states.
CAVITY_HD inline void stream_collide_cell(const float* __restrict__ src, float* __restrict__ dst,
                                          const lattice_params& p, const slab& s, int x, int y) noexcept {
  const int n = p.n;
  float g[q];
  float lid_rounding = 0.0F; // what rounding took from the lid terms, given back to the rest population
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = 0; i < q; ++i) {
    const int sx = x - d2q9_cx(i);
    const int sy = y - d2q9_cy(i);
    if (sx >= 0 && sx < n && sy >= 0 && sy < n) {
      g[i] = src[slab_index(n, s, i, sx, sy)];
    } else {
      g[i] = src[slab_index(n, s, d2q9_opposite(i), x, y)]; // w_i = w_opp(i): the same for g as for f
      // Ladd: f_i = f*_opp(i) + 2 w_i rho0 (c_i . u_w) / c_s^2, u_w = (lid_speed, 0) beyond the lid, 0 elsewhere.
      if (sy >= n && d2q9_cx(i) != 0) {
        const float a = g[i];
        const float b = 6.0F * d2q9_weight(i) * static_cast<float>(d2q9_cx(i)) * p.lid_speed;
        g[i] = add_rounded(a, b);
        lid_rounding += two_sum_error(a, b, g[i]);
      }
    }
  }
  const float drho = ((g[0] + g[1]) + (g[2] + g[3])) + ((g[4] + g[5]) + (g[6] + g[7])) + g[8];
  const float ux = (g[1] - g[3]) + (g[5] - g[6]) + (g[8] - g[7]);
  const float uy = (g[2] - g[4]) + (g[5] - g[8]) + (g[6] - g[7]);

  const float wp = p.omega_plus;
  const float wm = p.omega_minus;
  const std::size_t here = slab_index(n, s, 0, x, y);
  const std::size_t plane = s.plane;
  // The pairs (1,3), (2,4), (5,7), (6,8): even (symmetric) and odd (antisymmetric) parts relax separately. A pair
  // loses 2 * even of mass; the rest population gains it all back.
  float given = 0.0F;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 0; k < 4; ++k) {
    const int i = k < 2 ? k + 1 : k + 3; // 1, 2, 5, 6
    const int o = d2q9_opposite(i);
    const float eq_i = equilibrium_deviation(i, drho, ux, uy);
    const float eq_o = equilibrium_deviation(o, drho, ux, uy);
    const float even = wp * (0.5F * (g[i] + g[o]) - 0.5F * (eq_i + eq_o));
    const float odd = wm * (0.5F * (g[i] - g[o]) - 0.5F * (eq_i - eq_o));
    dst[here + static_cast<std::size_t>(i) * plane] = g[i] - even - odd;
    dst[here + static_cast<std::size_t>(o) * plane] = g[o] - even + odd;
    given += even;
  }
  dst[here] = (g[0] + lid_rounding) + 2.0F * given; // = g_0 - omega+ (g_0 - g_eq_0) in exact arithmetic
}

//! One time step of cell (x, y) of the whole lattice: `src` and `dst` are distinct n x n x 9 fields
//! (population_index). The CPU reference's step.
CAVITY_HD inline void stream_collide_cell(const float* __restrict__ src, float* __restrict__ dst,
                                          const lattice_params& p, int x, int y) noexcept {
  stream_collide_cell(src, dst, p, whole_lattice(p.n), x, y);
}

//! The macroscopic density and velocity of cell (x, y) of a post-collision field of deviations `g` (the collision
//! conserves them, so these are the values of the step that wrote `g`).
struct cell_moments {
  float rho = 0.0F; //!< density (lattice units, 1 at rest)
  float ux = 0.0F;  //!< x velocity (lattice units)
  float uy = 0.0F;  //!< y velocity (lattice units)
};

//! Moments of cell (x, y) (global coordinates) of slab `s`'s field of deviations `g_field`, summed in the same order
//! as stream_collide_cell.
CAVITY_HD inline cell_moments moments(const float* g_field, int n, const slab& s, int x, int y) noexcept {
  float g[q];
  for (int i = 0; i < q; ++i) g[i] = g_field[slab_index(n, s, i, x, y)];
  cell_moments m;
  m.rho = 1.0F + (((g[0] + g[1]) + (g[2] + g[3])) + ((g[4] + g[5]) + (g[6] + g[7])) + g[8]);
  m.ux = (g[1] - g[3]) + (g[5] - g[6]) + (g[8] - g[7]);
  m.uy = (g[2] - g[4]) + (g[5] - g[8]) + (g[6] - g[7]);
  return m;
}

//! Moments of cell (x, y) of an n x n field of deviations `g_field` (population_index).
CAVITY_HD inline cell_moments moments(const float* g_field, int n, int x, int y) noexcept {
  return moments(g_field, n, whole_lattice(n), x, y);
}

} // namespace conveyor::cavity
