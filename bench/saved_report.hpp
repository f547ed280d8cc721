#pragma once
//! \file saved_report.hpp
//! A saved JSON report of `conveyor bench suite --json`, read back and written as Markdown (`conveyor bench
//! render`). Host-only: needs no GPU.

#include <string>

namespace conveyor::bench {

//! Reads the report at `path`, checks it against the schema (schema_problems) and returns its Markdown report
//! (to_markdown). A report is a regular file of at most 64 MiB without NUL bytes: devices, pipes and folders are
//! refused before anything is read.
//! \throws std::runtime_error naming `path` when it cannot be read, is not JSON or does not follow the schema
//!         (the first problem).
[[nodiscard]] std::string render_saved_report(const std::string& path);

} // namespace conveyor::bench
