#include "common/output_paths.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace conveyor::scenarios {

namespace {

std::filesystem::path parent_of(const std::filesystem::path& p) {
  const auto parent = p.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

// Empty when a new file can be created in `folder` (one is created and removed at once), else the reason.
std::string creation_problem(const std::filesystem::path& folder) {
  static std::atomic<unsigned> counter{0};
  const std::string probe =
      (folder / fmt::format(".conveyor-write-check-{}-{}", ::getpid(), counter.fetch_add(1))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT || e == EINVAL || e == EOPNOTSUPP || e == EPERM)
      return "it takes no new files (a virtual or special file system, such as /proc or /sys)";
    if (e == EROFS) return "it is on a read-only file system";
    if (e == EACCES) return "permission denied";
    return std::system_category().message(e);
  }
  (void)::close(fd);
  (void)::unlink(probe.c_str());
  return {};
}

} // namespace

void check_output_file(std::string_view option, std::string_view path) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  std::error_code ec;
  const auto status = std::filesystem::status(p, ec);
  if (std::filesystem::is_directory(status))
    throw std::invalid_argument(fmt::format("{} '{}': is a folder; give a file name", option, path));
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw std::invalid_argument(fmt::format(
        "{} '{}': exists and is not a regular file (a device or pipe); results are written to a temporary file and "
        "renamed over the target, which would replace it",
        option, path));
  const auto folder = parent_of(p);
  if (!std::filesystem::is_directory(folder, ec))
    throw std::invalid_argument(
        std::filesystem::exists(folder, ec)
            ? fmt::format("{} '{}': '{}' is a file, not a folder", option, path, folder.string())
            : fmt::format("{} '{}': the folder '{}' does not exist", option, path, folder.string()));
  if (const std::string problem = creation_problem(folder); !problem.empty())
    throw std::invalid_argument(
        fmt::format("{} '{}': cannot create a file in the folder '{}': {}", option, path, folder.string(), problem));
}

void check_output_folder(std::string_view option, std::string_view path) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::exists(p, ec)) {
    if (!std::filesystem::is_directory(p, ec))
      throw std::invalid_argument(fmt::format("{} '{}': exists and is not a folder", option, path));
    if (const std::string problem = creation_problem(p); !problem.empty())
      throw std::invalid_argument(fmt::format("{} '{}': cannot create a file in it: {}", option, path, problem));
    return;
  }
  const auto parent = parent_of(p);
  if (!std::filesystem::is_directory(parent, ec))
    throw std::invalid_argument(
        std::filesystem::exists(parent, ec)
            ? fmt::format("{} '{}': '{}' is a file, not a folder", option, path, parent.string())
            : fmt::format("{} '{}': neither it nor its parent folder '{}' exists", option, path, parent.string()));
  if (const std::string problem = creation_problem(parent); !problem.empty())
    throw std::invalid_argument(
        fmt::format("{} '{}': cannot create it in the folder '{}': {}", option, path, parent.string(), problem));
}

void check_distinct_outputs(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs) {
  std::vector<std::pair<std::string_view, std::filesystem::path>> seen;
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    std::error_code ec;
    std::filesystem::path normal = std::filesystem::weakly_canonical(std::filesystem::path(path), ec);
    if (ec) normal = std::filesystem::absolute(std::filesystem::path(path), ec).lexically_normal();
    for (const auto& [other, other_path] : seen)
      if (other_path == normal)
        throw std::invalid_argument(
            fmt::format("{} and {} name the same file '{}': the second would replace the first", other, option, path));
    seen.emplace_back(option, normal);
  }
}

void check_input_file(std::string_view option, std::string_view path) {
  if (path.empty()) return;
  std::error_code ec;
  const auto status = std::filesystem::status(std::filesystem::path(path), ec);
  if (ec || !std::filesystem::exists(status)) throw input_error(fmt::format("{} '{}': no such file", option, path));
  if (std::filesystem::is_directory(status))
    throw input_error(fmt::format("{} '{}': is a folder, not a file", option, path));
  std::FILE* f = std::fopen(std::string(path).c_str(), "rb");
  if (f == nullptr) throw input_error(fmt::format("{} '{}': cannot be read: {}", option, path, std::strerror(errno)));
  std::fclose(f);
}

void check_input_folder(std::string_view option, std::string_view path) {
  if (path.empty()) return;
  std::error_code ec;
  const auto status = std::filesystem::status(std::filesystem::path(path), ec);
  if (ec || !std::filesystem::exists(status)) throw input_error(fmt::format("{} '{}': no such folder", option, path));
  if (!std::filesystem::is_directory(status))
    throw input_error(fmt::format("{} '{}': is a file, not a folder", option, path));
}

} // namespace conveyor::scenarios
