#pragma once
//! \file filter.hpp
//! The `conveyor filter` subcommand.

#include <CLI/CLI.hpp>

//! Adds the subcommand `filter` to `app`: reads PNG/JPEG images (a file or a folder), resizes them to each of
//! `--sizes` (default 512x512,1920x1080,3840x2160; `native` keeps each image's size), and runs the filter chain
//! (grey, Gaussian blur, Sobel x/y on parallel branches, magnitude, threshold; unsharp mask on a third branch) over
//! the batch in the chosen modes; prints per size and mode ms/frame (median), frames/s, speedup against sync and
//! the graph nodes updated per frame, the graph's statistics and what each image did to the graph. Options:
//! --input PATH (required), --out DIR (edges and sharpened PNGs, written atomically), --mode sync|stream|graph|all
//! (all), --sizes, --sigma (1.5), --threshold (100), --unsharp-sigma (2), --amount (1), --warmup (1), --repeat
//! (10), --limit N (first N images), --dot FILE (graph of the first size), --verify (compare the first frame of
//! each size with the CPU reference), --profile FILE.json / --profile-steps N (50) / --doctor
//! (scenarios/common/profiling.hpp; a step is one frame of the first size).
//! When the subcommand runs it throws scenarios::usage_error for inconsistent options, conveyor::filter::image_error
//! for an unreadable, truncated or unsupported image (before any GPU work or output), std::runtime_error when no
//! CUDA device is present or verification fails, and conveyor::cuda_error when a CUDA call fails.
void register_filter_command(CLI::App& app);
