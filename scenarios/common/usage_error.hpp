#pragma once
//! \file usage_error.hpp
//! The error of a command line that is wrong: an option value out of its range, or options that do not go
//! together. The `conveyor` program ends with exit status 2 for it, as for CLI11's own parse errors (an unknown or
//! malformed option), and with 1 for every other failure (no GPU, an unreadable input, a CUDA error, a failed check).

#include <stdexcept>
#include <string>

namespace conveyor::scenarios {

//! A usage error: what() names the option and says what is wrong. Thread safety: an immutable value once thrown.
class usage_error : public std::invalid_argument {
public:
  //! An error with the message `what`.
  explicit usage_error(const std::string& what) : std::invalid_argument(what) {}
};

//! Exit status for a usage error (bad option, value or combination).
inline constexpr int exit_usage = 2;
//! Exit status for any other failure.
inline constexpr int exit_failure = 1;

} // namespace conveyor::scenarios
