#pragma once
//! \file output_paths.hpp
//! Checks of output paths given on the command line, made before any GPU work so that a bad path fails at once,
//! not after a run of minutes.

#include <string_view>

namespace conveyor::scenarios {

//! Checks that a file can be written at `path` (given with `option`): its folder exists and it is not a folder.
//! Does nothing for an empty path. Writes nothing.
//! \throws std::invalid_argument naming the option, the path and the problem.
void check_output_file(std::string_view option, std::string_view path);

//! Checks that `path` (given with `option`) is a folder, or does not exist yet but its parent folder does (the
//! scenario creates it). Does nothing for an empty path.
//! \throws std::invalid_argument naming the option, the path and the problem.
void check_output_folder(std::string_view option, std::string_view path);

} // namespace conveyor::scenarios
