#pragma once
//! \file allreduce.hpp
//! The `conveyor allreduce` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `allreduce` to `app`: its options (conveyor::allreduce::options: --min-bytes, --max-bytes,
//! --factor, --gpus, --calls-per-graph, --trials, --timeout-ms, --json, --blocking-baseline, --no-blocking-baseline,
//! --distributed), checked before the GPU is needed (conveyor::allreduce::check_options), then
//! conveyor::allreduce::run, which says what is measured and what it throws.
void register_allreduce_command(CLI::App& app);
