#pragma once
// Internal (any layer, and the project's programs: scenarios, bench): the median of a sample, defined once.

#include <algorithm>
#include <vector>

namespace conveyor::detail {

//! The median of `values` (the mean of the two middle values for an even count); 0 for none. Takes a copy: the
//! caller's order is kept. Never throws but for std::bad_alloc.
[[nodiscard]] inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : (values[m - 1] + values[m]) / 2;
}

} // namespace conveyor::detail
