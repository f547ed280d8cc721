//! \file statistics.cpp
//! The median of repeated timings.

#include "common/statistics.hpp"

#include <algorithm>

namespace conveyor::scenarios {

double median(std::vector<double> values) noexcept {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

} // namespace conveyor::scenarios
