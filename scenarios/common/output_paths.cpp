#include "common/output_paths.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace conveyor::scenarios {

namespace {
std::filesystem::path parent_of(const std::filesystem::path& p) {
  const auto parent = p.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}
} // namespace

void check_output_file(std::string_view option, std::string_view path) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec))
    throw std::invalid_argument(fmt::format("{} '{}': is a folder; give a file name", option, path));
  if (!std::filesystem::is_directory(parent_of(p), ec))
    throw std::invalid_argument(
        fmt::format("{} '{}': the folder '{}' does not exist", option, path, parent_of(p).string()));
}

void check_output_folder(std::string_view option, std::string_view path) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::exists(p, ec)) {
    if (!std::filesystem::is_directory(p, ec))
      throw std::invalid_argument(fmt::format("{} '{}': exists and is not a folder", option, path));
    return;
  }
  if (!std::filesystem::is_directory(parent_of(p), ec))
    throw std::invalid_argument(
        fmt::format("{} '{}': neither it nor its parent folder '{}' exists", option, path, parent_of(p).string()));
}

} // namespace conveyor::scenarios
