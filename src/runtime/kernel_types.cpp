// The parameter classes of the kernels launched or added through Conveyor's typed calls (make_kernel_args), kept for
// the life of the process: what a graph file's save uses to tell addresses from values (conveyor/keep/save.hpp).
#include "conveyor/define/kernel_args.hpp"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace conveyor::detail {

namespace {
struct kernel_types {
  std::mutex mutex;
  std::unordered_map<const void*, std::vector<parameter_class>> classes;
};
kernel_types& table() {
  static kernel_types* t = new kernel_types; // never destroyed: launches may run during static destruction
  return *t;
}
} // namespace

void record_kernel_parameters(const void* kernel, std::span<const parameter_class> classes) noexcept {
  try {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    t.classes.try_emplace(kernel, classes.begin(), classes.end());
  } catch (...) { // std::bad_alloc: the kernel's arguments are then scanned at save, as for untyped kernels
  }
}

std::span<const parameter_class> recorded_kernel_parameters(const void* kernel) noexcept {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  const auto it = t.classes.find(kernel);
  return it == t.classes.end() ? std::span<const parameter_class>{} : std::span<const parameter_class>(it->second);
}

std::vector<const void*> recorded_kernels() {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  std::vector<const void*> out;
  out.reserve(t.classes.size());
  for (const auto& [kernel, classes] : t.classes) out.push_back(kernel);
  return out;
}

} // namespace conveyor::detail
