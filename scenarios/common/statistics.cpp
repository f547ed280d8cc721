//! \file statistics.cpp
//! The median of repeated timings.

#include "common/statistics.hpp"

#include "util/median.hpp"

#include <new>

#include <algorithm>

namespace conveyor::scenarios {

double median(std::vector<double> values) noexcept {
  try {
    return conveyor::detail::median(std::move(values)); // the project's one median (src/util/median.hpp)
  } catch (const std::bad_alloc&) {
    return 0.0; // no memory for the sorted copy: no statistic (the workloads report timings, not correctness)
  }
}

} // namespace conveyor::scenarios
