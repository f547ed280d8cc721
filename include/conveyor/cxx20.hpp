#pragma once
//! \file cxx20.hpp
//! Stops the compilation at once, with one message, when a translation unit that includes Conveyor
//! is compiled below C++20 (included first by every public header).

#if !defined(__cplusplus) || __cplusplus < 202002L
#error                                                                                             \
    "conveyor: Conveyor needs C++20: compile with -std=c++20 (CMake: target_compile_features(<target> PRIVATE cxx_std_20), which linking conveyor::conveyor gives)"
// a missing include is fatal: the compiler stops here, with no error after this one
#include <conveyor-needs-cxx20>
#endif
