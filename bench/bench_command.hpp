#pragma once
//! \file bench_command.hpp
//! The `conveyor bench` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `bench` to `app`: measures, on Google Benchmark with manual timing, the launch cost per
//! kernel in the three execution modes (sync, stream, graph; chain and fork/join), Conveyor's graph replay against
//! the raw CUDA Runtime API, build costs (capture / explicit + instantiate, first launch with and without upload),
//! update costs (per-node setters, whole-graph update, re-instantiation; Conveyor and raw) and the device memory
//! of instantiated graphs, for N = 1 ... 10000 kernels; then prints a Markdown report on stdout (progress goes to
//! stderr).
//!
//! Options: --quick (N = 1, 100, 10000 and 3 repetitions: under a minute), --json FILE (schema
//! conveyor-bench/1), --markdown FILE, --filter REGEX (Google Benchmark's --benchmark_filter over the names
//! "group/topology/variant/api/N[/changed]"), --repetitions N (default 10), --target-ms MS (timed work per
//! repetition, default 50), --rotation-sets N (buffer sets, default 1), --gbench-json FILE (Google Benchmark's own
//! JSON), --device N, --list (the names, no GPU needed), --from-json FILE (re-render a saved report, no GPU
//! needed), --graphed-overhead, --graphed, --update-growth N. Numbers are checked against their ranges in the type
//! they are used in; an option that the chosen one of --list, --from-json, --graphed-overhead, --graphed,
//! --update-growth would ignore is refused at parse time (CLI::ExcludesError).
//!
//! When the subcommand runs it first checks every output path (its folder takes new files; no two options name the
//! same file) and writes the reports atomically at the end. It throws std::invalid_argument for an output path
//! that cannot be written, CLI::ValidationError for a --filter that is no regular expression, std::runtime_error
//! when the filter matches nothing, no CUDA device is present (checked after every input check) or any benchmark
//! failed (after writing the reports, which list the failures), and conveyor::cuda_error when setting up the GPU
//! context fails.
void register_bench_command(CLI::App& app);
