#pragma once
//! \file statistics.hpp
//! The statistics every measurement of `conveyor bench` reports: the median and the range of its samples. Host-only.

#include "bench/report.hpp"

#include <vector>

namespace conveyor::bench {

//! The median of `values`: the middle value, or the mean of the two middle values when their number is even; NaN
//! when `values` is empty (a NaN metric is left out of the JSON report).
[[nodiscard]] double median(std::vector<double> values);

//! Median, smallest and largest of `values`; all NaN when `values` is empty.
[[nodiscard]] summary summarise(std::vector<double> values);

} // namespace conveyor::bench
