#pragma once
// Test support: a public call given an empty (moved-from) graph throws std::invalid_argument naming the call and
// saying "moved-from", and changes nothing.

#include <gtest/gtest.h>

#include <exception>
#include <stdexcept>
#include <string>

namespace conveyor::test {

//! Runs `f`; succeeds when it throws std::invalid_argument whose what() holds "moved-from" and `says` (the call, e.g.
//! "conveyor::diff", or the argument it names, "(after)").
template <class F>
::testing::AssertionResult refuses_moved_from(F&& f, const std::string& says) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    if (what.find("moved-from") != std::string::npos && what.find(says) != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "std::invalid_argument without \"moved-from\" and \"" << says
                                         << "\": " << what;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "another exception than std::invalid_argument: " << e.what();
  }
  return ::testing::AssertionFailure() << "nothing thrown (expected \"" << says << "\")";
}

} // namespace conveyor::test

//! Expects the statements `...` to throw std::invalid_argument saying "moved-from" and `says`.
#define EXPECT_REFUSES_MOVED_FROM(says, ...)                                                                           \
  EXPECT_TRUE(::conveyor::test::refuses_moved_from([&] { __VA_ARGS__; }, says))
