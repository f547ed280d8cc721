//! \file numeric_options.cpp
//! Numeric option checks in the type each option is used in.

#include "common/numeric_options.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace conveyor::scenarios {

namespace {

// The text after an optional leading '+', which std::from_chars does not take.
std::string_view without_plus(std::string_view text) {
  return !text.empty() && text.front() == '+' && (text.size() < 2 || text[1] != '-') ? text.substr(1) : text;
}

template <class T>
std::string integer_problem(std::string_view text, T lo, T hi) {
  const std::string want = fmt::format("must be an integer in [{}, {}], got '{}'", lo, hi, text);
  const std::string_view digits = without_plus(text);
  if (digits.empty() || (std::is_unsigned_v<T> && digits.front() == '-')) return want;
  T value{};
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 10);
  if (ec == std::errc::result_out_of_range) return want + " (too large for the type it is used in)";
  if (ec != std::errc() || end != digits.data() + digits.size()) return want;
  if (value < lo || value > hi) return want;
  return {};
}

bool inside(double v, const real_range& r) {
  const bool above = r.lo_open ? v > r.lo : v >= r.lo;
  const bool below = r.hi_open ? v < r.hi : v <= r.hi;
  return above && below;
}

} // namespace

std::string signed_integer_problem(std::string_view text, std::int64_t lo, std::int64_t hi) {
  return integer_problem<std::int64_t>(text, lo, hi);
}

std::string unsigned_integer_problem(std::string_view text, std::uint64_t lo, std::uint64_t hi) {
  return integer_problem<std::uint64_t>(text, lo, hi);
}

std::string to_string(const real_range& r) {
  return fmt::format("{}{:g}, {:g}{}", r.lo_open ? '(' : '[', r.lo, r.hi, r.hi_open ? ')' : ']');
}

std::string real_problem(std::string_view text, const real_range& r) {
  const std::string want = fmt::format("must be a finite number in {}, got '{}'", to_string(r), text);
  // strtod, not from_chars: it tells an overflow (HUGE_VAL) from an underflow (0 or subnormal). Leading blanks,
  // "nan", "inf" and hexadecimal forms are refused before it sees them.
  const std::string s(text);
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())) != 0) return want;
  for (const char ch : s)
    if (std::isalpha(static_cast<unsigned char>(ch)) != 0 && ch != 'e' && ch != 'E') return want;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return want;
  if (errno == ERANGE && std::fabs(v) > 1.0) return want + " (beyond the largest double)";
  if (errno == ERANGE && !inside(v, r)) return want + fmt::format(" (below the smallest double, it reads as {:g})", v);
  if (!std::isfinite(v)) return want;
  if (r.as_float) {
    // Said when the float is what breaks the range: infinite, or (0, 1, ...) on a bound the double kept off.
    const auto f = static_cast<float>(v);
    if (!std::isfinite(f) || (inside(v, r) && !inside(static_cast<double>(f), r)))
      return want + fmt::format(" (it is {:g} as a float, the type it is used in)", f);
  }
  if (!inside(v, r)) return want;
  return {};
}

CLI::Validator real_in(const real_range& r) {
  return CLI::Validator([r](std::string& text) -> std::string { return real_problem(text, r); }, "in " + to_string(r),
                        "REAL_IN");
}

real_range nonnegative_float() noexcept {
  return {0.0, static_cast<double>(std::numeric_limits<float>::max()), false, false, true};
}

real_range positive_float() noexcept {
  return {0.0, static_cast<double>(std::numeric_limits<float>::max()), true, false, true};
}

} // namespace conveyor::scenarios
