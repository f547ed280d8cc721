//! \file statistics.cpp
//! Median and range of a measurement's samples.

#include "bench/statistics.hpp"

#include "util/median.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::bench {

double median(std::vector<double> values) {
  // The project's one median (src/util/median.hpp); a report shows NaN, not 0, for a measurement without samples.
  return values.empty() ? std::numeric_limits<double>::quiet_NaN() : conveyor::detail::median(std::move(values));
}

summary summarise(std::vector<double> values) {
  if (values.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan, nan};
  }
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  const double min = *lo;
  const double max = *hi;
  return {median(std::move(values)), min, max};
}

} // namespace conveyor::bench
