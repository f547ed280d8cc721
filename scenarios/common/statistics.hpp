#pragma once
//! \file statistics.hpp
//! The statistics the workloads report over repeated timings.

#include <vector>

namespace conveyor::scenarios {

//! The median of `values`: the middle value, the mean of the two middle values for an even count, 0 for none.
//! Thread-safe (works on its own copy). Never throws.
[[nodiscard]] double median(std::vector<double> values) noexcept;

} // namespace conveyor::scenarios
