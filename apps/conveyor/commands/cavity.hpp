#pragma once
//! \file cavity.hpp
//! The `conveyor cavity` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `cavity` to `app`: the 2D lid-driven cavity (D2Q9 lattice Boltzmann, TRT collision,
//! bounce-back walls, moving-lid bounce-back) in the chosen execution modes. Prints per mode the steps run, time,
//! ms per step, MLUPS and speedup against sync; whether the modes' final states are bitwise equal; the mass drift;
//! and, when Ghia et al.'s tables are found, the largest differences of the centre-line profiles from them.
//! Options: --re (100), --n (257), --lid-speed (0.1), --steps (0: 250 convective times), --tol (1e-7),
//! --steps-per-graph K (100), --mode sync|stream|graph|all (all), --csv DIR, --png FILE, --dot FILE, --ghia DIR,
//! --profile FILE.json / --profile-steps N (50) / --doctor (scenarios/common/profiling.hpp; a step is one block of
//! K time steps and its check, one graph launch in graph mode).
//! When the subcommand runs it throws scenarios::usage_error for invalid or inconsistent options (with the valid
//! range and why, naming the options), std::invalid_argument for an unusable output path or a device that is not
//! visible, conveyor::cavity::ghia_error when an explicitly given --ghia folder cannot be read, std::runtime_error
//! when no CUDA device is present, the run diverges (naming the options to change) or an output file cannot be
//! written, and conveyor::cuda_error when a CUDA call fails. Thread safety: call while building the app.
void register_cavity_command(CLI::App& app);
