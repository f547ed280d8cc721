#pragma once
//! \file train_command.hpp
//! The `conveyor train` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `train` to `app`: trains the 784-256-128-10 perceptron on Fashion-MNIST in the chosen
//! execution modes and prints a table (mode | ms/step (median) | steps/s | speedup vs sync | test accuracy) and
//! the device description. Options: --mode sync|stream|graph|all (all), --epochs (10), --batch (128), --lr (1e-3),
//! --optimizer adam|sgd (adam), --momentum (0.9), --seed (42), --data DIR (/usr/share/datasets/fashion-mnist),
//! --dot FILE (the captured step as Graphviz DOT), --max-steps N (cap on steps), --chunk N (steps per timed
//! chunk, 50), --profile FILE.json / --profile-steps N (50) / --doctor (scenarios/common/profiling.hpp; a step is
//! one training step). Arguments are validated by CLI11 (a CLI::ParseError on bad input).
//! When the subcommand runs it throws CLI::ValidationError for inconsistent options (--dot or --doctor without graph
//! mode),
//! conveyor::train::idx_error for unreadable data, std::runtime_error when no CUDA device is present or the DOT
//! file cannot be written, and conveyor::cuda_error / cublas_error when a CUDA call fails.
void register_train_command(CLI::App& app);
