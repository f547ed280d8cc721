#pragma once
//! \file bench.hpp
//! The `conveyor bench` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `bench` to `app`, with one subcommand per thing it measures or writes:
//!
//! - `suite`: the Google Benchmark suite (bench/suite.hpp): the launch cost per kernel in the three execution modes
//!   (sync, stream, graph; chain and fork/join), Conveyor's graph replay against the raw CUDA Runtime API, build,
//!   first-launch, update and memory costs, for N = 1 ... 10000 kernels; prints the Markdown report on stdout
//!   (progress on stderr). Options: --quick, --json FILE (schema conveyor-bench/1), --markdown FILE, --filter REGEX
//!   (over the names "group/topology/variant/api/N[/changed]"), --repetitions N, --target-ms MS, --rotation-sets N,
//!   --min-pairs N, --gbench-json FILE (Google Benchmark's own JSON), --device N. It exits with 1 when any benchmark
//!   failed, after writing the reports, which list the failures.
//! - `list`: the names `suite` would run (--quick, --filter), no GPU needed.
//! - `render REPORT`: the Markdown report of a saved `suite --json` file (--markdown FILE), no GPU needed.
//! - one subcommand per study of the study table (bench/studies.hpp: graphed, pdl, profile, update-growth,
//!   graphed-overhead), each with --markdown FILE, --device N and the study's own options.
//!
//! `conveyor bench` without a subcommand is a usage error. Each subcommand takes only its own options (CLI11 refuses
//! any other). Numbers are checked against their ranges in the type they are used in. Every output path is checked
//! before any work (its folder takes new files; no two options name the same file) and written atomically at the
//! end. Then it throws conveyor::scenarios::usage_error for a --filter that is no regular expression,
//! std::runtime_error when the filter matches nothing, a saved report cannot be read or breaks the schema, no CUDA
//! device is present (checked after every input check) or a benchmark failed, std::invalid_argument for an output
//! path that cannot be written, and conveyor::cuda_error when setting up the GPU context fails.
void register_bench_command(CLI::App& app);
