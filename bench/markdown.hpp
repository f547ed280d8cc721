#pragma once
//! \file markdown.hpp
//! Markdown text for the reports of `conveyor bench`: escaped text and code spans, numbers, byte counts and tables
//! whose columns line up. Host-only.

#include "bench/report.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace conveyor::bench {

//! What a table cell shows where there is no value: an em dash.
inline constexpr std::string_view missing = "—";

//! `text` for running Markdown text (a list item, a heading): control characters (line breaks, tabs, ...) become
//! spaces, and the characters Markdown or HTML would act on (\\ ` * _ [ ] < > | ~ &) are backslash-escaped, so
//! that "<b>A|B</b>\\nnext" reads as written, on one line.
[[nodiscard]] std::string markdown_text(std::string_view text);
//! `text` as a Markdown code span: fenced by one more backtick than its longest run of backticks (padded with a
//! space where it starts or ends with one), control characters as spaces, e.g. "`^a|b`" or "`` a`b ``".
[[nodiscard]] std::string markdown_code(std::string_view text);

//! A number for a table: 3 decimals below 1, 2 below 10, 1 below 100, none above; "0" for zero, "—" when not
//! finite.
[[nodiscard]] std::string format_number(double value);
//! "median [min–max]" with format_number, e.g. "9.01 [8.95–9.20]".
[[nodiscard]] std::string format_summary(const summary& s);
//! A byte count with a binary unit: "512 B", "1.5 KiB", "12.0 MiB", "2.0 GiB"; "—" when not finite.
[[nodiscard]] std::string format_bytes(double bytes);

//! A Markdown table: header row, alignment row (`---:` right, `:---` left) and rows, cells padded so that columns
//! line up in a monospace font (width counted in UTF-8 code points). '|' and '\\' in a cell are escaped, control
//! characters (line breaks, tabs, ...) become spaces. `align` holds one character per column, 'l' or 'r'.
//! \throws std::invalid_argument when a row or `align` has a different number of columns from `header`, or
//!         `align` holds another character.
[[nodiscard]] std::string markdown_table(const std::vector<std::string>& header,
                                         const std::vector<std::vector<std::string>>& rows, std::string_view align);

} // namespace conveyor::bench
