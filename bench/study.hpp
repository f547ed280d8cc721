#pragma once
//! \file study.hpp
//! A study of `conveyor bench`: one measurement beside the Google Benchmark suite (the graphed/ group, PDL, the
//! profiler's cost, ...), run as its own subcommand, `conveyor bench <name>`. Every study is one entry of the table
//! in studies.hpp: its name, help, options, what it measures and how the result is written. The command
//! (apps/conveyor/commands/bench.cpp) makes one subcommand per entry, with --markdown FILE and --device N
//! besides the entry's options, and prints the study's report (study_report). Host-only.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::bench {

//! The values of a study's options, as given on its command line.
struct study_args {
  bool quick = false;    //!< --quick: fewer sizes and calls
  std::size_t steps = 0; //!< --steps N: how many steps to run
};

//! An option a study takes besides --markdown and --device (which every study has).
struct study_option {
  //! Which option.
  enum class kind {
    quick, //!< the flag --quick (study_args::quick)
    steps  //!< the required option --steps N, N in [min, max] (study_args::steps)
  };
  kind what = kind::quick; //!< which option
  std::string_view help;   //!< what it does in this study, for --help
  std::size_t min = 0;     //!< steps: the smallest value taken
  std::size_t max = 0;     //!< steps: the largest value taken
};

//! One study: an entry of the study table.
struct study {
  std::string_view name;             //!< the subcommand, e.g. "pdl"
  std::string_view help;             //!< what it measures, for `conveyor bench --help`
  std::vector<study_option> options; //!< its options besides --markdown and --device
  //! What the report says right after the command line: empty, or ": " and what the cells hold.
  std::string_view caption;
  //! Measures on the current device and returns the result as Markdown (tables and their notes).
  std::function<std::string(const study_args&)> measure;
};

//! A study's `measure` from its two halves: `measure(args)` (GPU) gives a result, `format(result)` (host-only,
//! tested without a GPU) its Markdown.
template <class Measure, class Format>
[[nodiscard]] std::function<std::string(const study_args&)> measured(Measure measure, Format format) {
  return [measure, format](const study_args& args) { return format(measure(args)); };
}

//! The command line that runs `s` with `args`, e.g. "conveyor bench pdl --quick" or
//! "conveyor bench update-growth --steps 1000": the study's own options only, as given.
[[nodiscard]] std::string study_command(const study& s, const study_args& args);

//! A study's report: `device` (the GPU, one line), the command line in a code span followed by the study's
//! caption, then `body` (what `measure` returned).
[[nodiscard]] std::string study_report(const study& s, const study_args& args, std::string_view device,
                                       std::string_view body);

} // namespace conveyor::bench
