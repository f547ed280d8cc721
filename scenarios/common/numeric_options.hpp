#pragma once
//! \file numeric_options.hpp
//! Checks of numeric command-line options in the type the program uses them in: an integer must fit that type (no
//! "-1" wrapping round to 18446744073709551615 in an unsigned option), a real number must be finite and stay in its
//! range once converted to the float the GPU code takes (no 1e308 becoming infinity, no 1e-50 becoming 0), and
//! every refusal names the valid range.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace conveyor::scenarios {

//! Why `text` is not a decimal integer in [lo, hi] (optional sign, digits only, nothing else), or an empty string
//! when it is one. E.g. "must be an integer in [0, 18446744073709551615], got '-1'".
[[nodiscard]] std::string signed_integer_problem(std::string_view text, std::int64_t lo, std::int64_t hi);
//! As signed_integer_problem, for an unsigned range: a leading '-' is refused, not wrapped round.
[[nodiscard]] std::string unsigned_integer_problem(std::string_view text, std::uint64_t lo, std::uint64_t hi);

//! A range of real numbers, its bounds included or not, and the type the value is used in.
struct real_range {
  double lo = 0.0;       //!< lower bound
  double hi = 0.0;       //!< upper bound
  bool lo_open = false;  //!< true: lo itself is refused, (lo, ...
  bool hi_open = false;  //!< true: hi itself is refused, ..., hi)
  bool as_float = false; //!< true: the value is used as a float, so its float conversion must lie in the range
};

//! The range as text, e.g. "(0, 1)" or "[0, 3.40282e+38]".
[[nodiscard]] std::string to_string(const real_range& r);

//! Why `text` is not a finite number in `r` (in double, and in float when r.as_float), or an empty string when it
//! is. Names the range and what went wrong: "must be a finite number in (0, 1), got '1e-400' (below the smallest
//! double, it reads as 0)", "... got '1e308' (it is inf as a float, the type it is used in)".
[[nodiscard]] std::string real_problem(std::string_view text, const real_range& r);

//! A CLI11 check that the option's text is an integer of type T in [lo, hi] (signed_integer_problem or
//! unsigned_integer_problem); its description reads "in [lo, hi]".
template <class T>
[[nodiscard]] CLI::Validator integer_in(T lo, T hi) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  std::string description = "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        if constexpr (std::is_signed_v<T>)
          return signed_integer_problem(text, static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi));
        else return unsigned_integer_problem(text, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi));
      },
      description, "INTEGER_IN");
}

//! A CLI11 check that the option's text is a finite number in `r` (real_problem); its description reads "in (lo,
//! hi]" and so on.
[[nodiscard]] CLI::Validator real_in(const real_range& r);

//! The float range [0, FLT_MAX] for options used as non-negative floats, closed.
[[nodiscard]] real_range nonnegative_float() noexcept;
//! The float range (0, FLT_MAX] for options used as positive floats.
[[nodiscard]] real_range positive_float() noexcept;

} // namespace conveyor::scenarios
