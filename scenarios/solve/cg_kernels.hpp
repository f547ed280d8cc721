#pragma once
//! \file cg_kernels.hpp
//! The kernels of Jacobi-preconditioned conjugate gradients, double precision, every scalar kept on the device
//! (cg_scalars) so that the same launches run eagerly, captured in a graph, or inside a WHILE conditional node.
//! Reductions are deterministic: a fixed number of blocks (reduction_blocks(n)) each write one partial sum in a
//! fixed order, and a one-block kernel adds the partials in a fixed order.
//!
//! Programmatic dependent launch: every CG kernel calls scenarios::begin_dependent() (common/pdl.cuh) in every
//! block before it touches global memory, so an edge into any of them may be programmatic
//! (waiting_kernel_functions(), for conveyor::make_programmatic). cuSPARSE's SpMV kernels make no such promise:
//! edges into them stay full.

#include <cuda_runtime_api.h>

#include <vector>

namespace conveyor::solve {

//! The scalar state of CG, in device memory (host code reads it back with one copy).
struct cg_scalars {
  double rho = 0.0;     //!< rᵀz, z = M⁻¹r (M = diag(A))
  double pap = 0.0;     //!< pᵀAp of the current iteration
  double alpha = 0.0;   //!< rho / pap
  double beta = 0.0;    //!< rho_new / rho
  double rr = 0.0;      //!< rᵀr of the recursively updated residual
  double bb = 0.0;      //!< bᵀb
  double rel_res = 0.0; //!< sqrt(rr / bb) (0 when b = 0), set by the check kernel
  int iterations = 0;   //!< iterations completed
  int proceed = 0;      //!< 1 while rel_res > tol and iterations < max_iter and no breakdown (check kernel)
  int breakdown = 0;    //!< 1 when pᵀAp was not positive and finite (A not SPD, or loss of accuracy)
  int reserved = 0;
};

//! Device pointers and sizes one CG solve works on. Vectors have n elements; partials has 2·blocks.
struct cg_device_state {
  int n = 0;                        //!< unknowns
  int blocks = 0;                   //!< blocks of every vector kernel = reduction_blocks(n)
  const double* b = nullptr;        //!< right-hand side
  const double* inv_diag = nullptr; //!< 1 / diag(A), the Jacobi preconditioner
  double* x = nullptr;              //!< solution
  double* r = nullptr;              //!< residual b − Ax (recursively updated)
  double* z = nullptr;              //!< preconditioned residual M⁻¹r
  double* p = nullptr;              //!< search direction
  double* ap = nullptr;             //!< A p (written by the SpMV)
  double* partials = nullptr;       //!< per-block partial sums, 2·blocks
  cg_scalars* scalars = nullptr;    //!< the scalar state
  cg_scalars* mirror = nullptr;     //!< pinned host memory (mapped: unified addressing) the check also writes the
                                    //!< scalars to, so that the host reads them without a copy; null: no mirror
};

//! The host functions of every CG kernel above (cg_init ... cg_check): the kernels that wait for their
//! programmatic predecessors before touching memory, for conveyor::waiting_kernels::add_function.
[[nodiscard]] std::vector<const void*> waiting_kernel_functions();

//! Threads per block of every CG kernel.
inline constexpr int cg_block_size = 256;

//! Blocks of the vector kernels for n unknowns: ceil(n / 256), at most 1024 (grid-stride loops beyond). Fixed for
//! a given n, so reductions add in the same order in every mode.
[[nodiscard]] int reduction_blocks(int n) noexcept;

// Each enqueue_* launches exactly one kernel on `s` and checks the launch (conveyor::check_launch).
// \throws conveyor::cuda_error when the launch fails.

//! x = 0, r = b, z = p = M⁻¹b; partial sums of rᵀz and rᵀr.
void enqueue_init(const cg_device_state& st, cudaStream_t s);
//! One block: rho = rᵀz, rr = bb = rᵀr, iterations = 0, breakdown = 0.
void enqueue_init_finish(const cg_device_state& st, cudaStream_t s);
//! Partial sums of pᵀ(Ap) (after the SpMV ap = A p).
void enqueue_dot_p_ap(const cg_device_state& st, cudaStream_t s);
//! One block: pap = pᵀAp, alpha = rho / pap (breakdown and alpha = 0 when pap is not positive and finite).
void enqueue_alpha(const cg_device_state& st, cudaStream_t s);
//! x += alpha p, r −= alpha Ap, z = M⁻¹r; partial sums of rᵀz and rᵀr.
void enqueue_update_x_r_z(const cg_device_state& st, cudaStream_t s);
//! One block: rho_new = rᵀz, rr = rᵀr, beta = rho_new / rho, rho = rho_new, ++iterations.
void enqueue_beta(const cg_device_state& st, cudaStream_t s);
//! p = z + beta p.
void enqueue_update_p(const cg_device_state& st, cudaStream_t s);
//! One thread: rel_res = sqrt(rr / bb), proceed = (rel_res > tol && iterations < max_iter && !breakdown); when
//! `set_condition` is true also `conveyor::set_condition(handle, proceed)` (inside a graph with that handle only).
void enqueue_check(const cg_device_state& st, double tol, int max_iter, cudaGraphConditionalHandle handle,
                   bool set_condition, cudaStream_t s);

} // namespace conveyor::solve
