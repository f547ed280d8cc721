#pragma once
//! \file studies.hpp
//! The table of the studies of `conveyor bench` (study.hpp): one entry per study, in the order `conveyor bench
//! --help` lists them.

#include "bench/study.hpp"

#include <vector>

namespace conveyor::bench {

//! Every study: graphed, pdl, profile, update-growth, graphed-overhead. Their names are distinct and none is `suite`,
//! `list` or `render`, the subcommands of the Google Benchmark suite.
[[nodiscard]] const std::vector<study>& studies();

} // namespace conveyor::bench
