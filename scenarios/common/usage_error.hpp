#pragma once
//! \file usage_error.hpp
//! The error of a command line that is wrong: an option value out of its range, or options that do not go
//! together. The `conveyor` program ends with exit status 2 for it, as for CLI11's own parse errors (an unknown or
//! malformed option), and with 1 for every other failure (no GPU, an unreadable input, a CUDA error, a failed check).

#include <stdexcept>
#include <string>
#include <string_view>

namespace conveyor::scenarios {

//! A usage error: what() names the option and says what is wrong. Thread safety: an immutable value once thrown.
class usage_error : public std::invalid_argument {
public:
  //! An error with the message `what`.
  explicit usage_error(const std::string& what) : std::invalid_argument(what) {}
};

//! The usage error "OPTION: PROBLEM", e.g. option_error("--dot", "needs --mode graph or --mode all").
//! \throws std::bad_alloc only.
[[nodiscard]] inline usage_error option_error(std::string_view option, std::string_view problem) {
  return usage_error(std::string(option).append(": ").append(problem));
}

//! Exit status for a usage error (bad option, value or combination).
inline constexpr int exit_usage = 2;
//! Exit status for any other failure.
inline constexpr int exit_failure = 1;

} // namespace conveyor::scenarios
