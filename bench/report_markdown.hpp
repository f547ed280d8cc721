#pragma once
//! \file report_markdown.hpp
//! The Markdown report of a `conveyor bench suite` run.

#include "bench/report.hpp"

#include <string>

namespace conveyor::bench {

//! The Markdown report: machine and settings, then one section per measurement (launch cost per kernel; Conveyor vs
//! raw graph replay; build costs and first launch; update costs; device memory), each a table over N. Cells show
//! "median [min–max]" over the repetitions; "—" where a benchmark did not run (filtered out or failed). Failed
//! benchmarks are listed at the end with their errors.
[[nodiscard]] std::string to_markdown(const bench_report& report);

} // namespace conveyor::bench
