#pragma once
//! \file doctor.hpp
//! The `conveyor doctor` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `doctor` to `app`: runs the tuning doctor (conveyor/profile/doctor.hpp) on the four
//! workloads in graph mode with small, fast settings — train: 200 steps of batch 128; cavity: 128 x 128 cells, 30
//! graph launches of 100 time steps; filter: four generated 640 x 480 frames, 7 passes; solve: 2D Poisson 64 x 64
//! in graph-per-iteration and graph-while — each profiled over up to 20 steps after 3 warm-up steps (solve: none),
//! and prints each workload's findings. Options: --workload train|cavity|filter|solve|all (all), --profile-dir DIR
//! (also write each workload's Perfetto trace, DOT and SVG there as WORKLOAD.json, WORKLOAD.dot, ...), --data DIR
//! (Fashion-MNIST for train; with --workload all a missing data set skips train with the reason).
//! When the subcommand runs it throws std::invalid_argument for an unusable --profile-dir, conveyor::train::idx_error
//! for unreadable data (--workload train), std::runtime_error when no CUDA device is present, and the workloads'
//! errors (conveyor::cuda_error, profile::profiler_error, ...).
void register_doctor_command(CLI::App& app);
