//! \file statistics.cpp
//! Median and range of a measurement's samples.

#include "bench/statistics.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::bench {

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
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
