#pragma once
//! \file solve.hpp
//! The `conveyor solve` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `solve` to `app`: Jacobi-preconditioned conjugate gradients (double precision, cuSPARSE
//! SpMV, own deterministic reductions) on a Matrix Market SPD matrix (--matrix FILE) or a generated Poisson matrix
//! (--poisson N: 2D 5-point on N x N; --poisson3d N: 3D 7-point on N³), right-hand side --rhs ones|random
//! (--seed S), in the modes --mode sync|stream|graph-per-iteration|graph-while|all (all), with --tol (1e-8) and
//! --max-iter (0 = 10·n). Prints per mode: iterations, the solver's and the independently recomputed relative
//! residual, set-up and solve time, µs per iteration and speedup per iteration against sync. --dot FILE writes the
//! graph-while graph (WHILE body nested) as Graphviz DOT. --profile FILE.json / --profile-steps N (50) / --doctor
//! (scenarios/common/profiling.hpp): a step is one CG iteration with its read-back, in graph-while the whole solve.
//! When the subcommand runs it throws scenarios::usage_error for inconsistent options,
//! conveyor::solve::matrix_market_error for a malformed or non-symmetric file, std::invalid_argument for a matrix
//! the solver cannot take (non-positive diagonal), std::runtime_error when no CUDA device is present, the DOT file
//! cannot be written or a mode did not converge, and conveyor::cuda_error / conveyor::libraries::library_error when a
//! call fails.
void register_solve_command(CLI::App& app);
