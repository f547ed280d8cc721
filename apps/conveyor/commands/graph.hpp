#pragma once
//! \file graph.hpp
//! The `conveyor graph` subcommand: graph files (docs/graph-files.md) shown, compared and replayed.

#include <CLI/CLI.hpp>

//! Adds `graph` to `app`, with three subcommands:
//! - `show FILE`: a summary of the file (no GPU); `--graph NAME` picks a graph (default: the first) for `--dot F`,
//!   `--svg F` (Graphviz `dot` on PATH) and `--json F` (the graph as exports describe it); `--document F` writes the
//!   whole file as JSON;
//! - `diff A B`: graph `--graph NAME` of A against `--against NAME` of B (default: the same name, else the first),
//!   node by node (no GPU), with what would apply the difference; `--exit-code` exits 3 when they differ;
//! - `replay FILE`: loads graph `--graph NAME` (buffers filled with the saved contents, else at random), launches it
//!   `--launches N` times after warm-up and prints the time per launch; `--profile F` / `--doctor` as the workloads
//!   have them; `--step-through` runs each launch node by node.
//! When a subcommand runs it throws conveyor::graph_file_error or std::runtime_error for an unreadable file,
//! usage_error for a graph name the file does not have, conveyor::load_error when the file cannot load (kernels
//! without an image, host functions), std::runtime_error when no CUDA device is present (replay), and cuda_error.
void register_graph_command(CLI::App& app);
