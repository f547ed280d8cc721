#pragma once
//! \file output_paths.hpp
//! Checks of output paths given on the command line, made before any GPU work so that a bad path fails at once,
//! not after a run of minutes: the folder must exist and take new files (a file is created there and removed),
//! which is what an atomic write (file_output.hpp: a temporary file in the same folder, then rename) needs.

#include <initializer_list>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace conveyor::scenarios {

//! Checks that a file can be written atomically at `path` (given with `option`): its folder exists and a file can
//! be created in it, and `path` is not a folder nor an existing special file (a device, a pipe: renaming over it
//! would replace it). Does nothing for an empty path. Leaves nothing behind.
//! \throws std::invalid_argument naming the option, the path and the problem.
void check_output_file(std::string_view option, std::string_view path);

//! Checks that `path` (given with `option`) is a folder files can be created in, or does not exist yet but its
//! parent folder does and takes new entries (the scenario creates it). Does nothing for an empty path. Leaves
//! nothing behind.
//! \throws std::invalid_argument naming the option, the path and the problem.
void check_output_folder(std::string_view option, std::string_view path);

//! Checks that no two of the given (option, path) pairs name the same file (empty paths are skipped): the second
//! write would replace the first.
//! \throws std::invalid_argument naming both options and the path.
void check_distinct_outputs(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs);

//! An input the command line names that cannot be read: a failure (exit status 1), whichever option names it.
class input_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! Checks that `path` (given with `option`) is a file that can be opened for reading. Does nothing for an empty path.
//! \throws input_error "OPTION 'PATH': no such file" (or "is a folder, not a file", or "cannot be read: REASON").
void check_input_file(std::string_view option, std::string_view path);

//! Checks that `path` (given with `option`) is a folder. Does nothing for an empty path.
//! \throws input_error "OPTION 'PATH': no such folder" (or "is a file, not a folder").
void check_input_folder(std::string_view option, std::string_view path);

} // namespace conveyor::scenarios
