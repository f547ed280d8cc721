#pragma once
//! \file printable.hpp
//! Text quoted from an input file into an error message, made safe to print.

#include <string>
#include <string_view>

namespace conveyor::scenarios {

//! `text` with control bytes (below 0x20, and 0x7F) written as `\xNN`, so that a NUL does not end what() early and a
//! carriage return or escape sequence does not garble the terminal. Other bytes are kept. Thread-safe.
//! \throws std::bad_alloc only.
[[nodiscard]] std::string printable(std::string_view text);

} // namespace conveyor::scenarios
