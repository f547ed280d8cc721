#pragma once
//! \file train.hpp
//! The `conveyor train` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `train` to `app`: trains the 784-256-128-10 perceptron on Fashion-MNIST in the chosen
//! execution modes and prints a table (mode | ms/step (median) | steps/s | speedup vs sync | test accuracy) and
//! the device description. Options: --mode sync|stream|graph|all (all), --epochs (10), --batch (128), --lr (1e-3),
//! --optimizer adam|sgd (adam), --momentum (0.9), --seed (42), --data DIR (/usr/share/datasets/fashion-mnist),
//! --dot FILE (the captured step as Graphviz DOT), --max-steps N (cap on steps), --chunk N (steps per timed
//! chunk, 50), --profile FILE.json / --profile-steps N (50) / --doctor (scenarios/common/profiling.hpp; a step is
//! one training step), --gpus N (1; N > 1: data-parallel over devices 0..N-1 of this process), --distributed (one
//! process per GPU under mpirun; only rank 0 prints), --world-size N (with --distributed: the processes expected),
//! --nccl-timeout-ms (60000: the longest NCCL wait before the run ends in an error naming the rank and device).
//! With N > 1 GPUs it also runs one GPU for 100 steps and prints the data-parallel checks (modes bitwise, replicas
//! identical, losses within 1e-5 of one GPU, the accuracy target of the default run), failing when one fails.
//! Arguments are validated by CLI11 (a CLI::ParseError on bad input). Thread safety: call while building the app.
//! When the subcommand runs it throws scenarios::usage_error for inconsistent options (--dot or --doctor without a
//! graph mode; options that apply to one GPU only with several), std::invalid_argument for options the data refuses
//! and for --gpus N with fewer than N devices visible, conveyor::train::idx_error for unreadable data,
//! std::runtime_error when no CUDA device is present, the DOT file cannot be written or a data-parallel check fails,
//! conveyor::nccl::nccl_error when NCCL fails or times out, and conveyor::cuda_error /
//! conveyor::libraries::library_error when a CUDA or cuBLAS call fails.
void register_train_command(CLI::App& app);
