#pragma once
// Internal (any layer, and the project's programs): a byte count as people read it, defined once.

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace conveyor::detail {

//! `bytes` in B below 1 KiB (no decimals), else in KiB, MiB or GiB (powers of 1024) with `decimals` decimals:
//! "512 B", "1.5 KiB", "3.00 MiB". Never throws but for std::bad_alloc.
[[nodiscard]] inline std::string byte_size(double bytes, int decimals = 1) {
  constexpr double kib = 1024.0;
  const double a = std::fabs(bytes);
  if (a < kib) return fmt::format("{:.0f} B", bytes);
  if (a < kib * kib) return fmt::format("{:.{}f} KiB", bytes / kib, decimals);
  if (a < kib * kib * kib) return fmt::format("{:.{}f} MiB", bytes / (kib * kib), decimals);
  return fmt::format("{:.{}f} GiB", bytes / (kib * kib * kib), decimals);
}

} // namespace conveyor::detail
