// kernel_registry: the program's kernels by mangled name (read through cudaGetFuncBySymbol and cuFuncGetName when
// registered) and its host functions by name.
#include "conveyor/keep/kernel_registry.hpp"

#include "conveyor/error.hpp"
#include "cuda/driver.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace conveyor {

namespace {
std::string mangled_name_of(const void* function) {
  cudaFunction_t f = nullptr;
  CONVEYOR_CHECK(cudaGetFuncBySymbol(&f, function));
  const char* name = nullptr;
  if (detail::driver::func_get_name(&name, reinterpret_cast<CUfunction>(f)) != CUDA_SUCCESS || name == nullptr)
    throw cuda_error(cudaErrorInvalidDeviceFunction, "cuFuncGetName", std::source_location::current(),
                     "the driver gives no name for the kernel");
  return name;
}
} // namespace

kernel_registry& kernel_registry::add_untyped(const void* function, std::vector<parameter_class> classes) {
  if (function == nullptr) throw std::invalid_argument("conveyor::kernel_registry::add: a null kernel");
  if (find(function) != nullptr) return *this;
  std::string name = mangled_name_of(function);
  if (find(name) != nullptr)
    throw std::invalid_argument(fmt::format("conveyor::kernel_registry::add: two kernels named '{}'", name));
  kernels_.push_back({std::move(name), function, std::move(classes)});
  return *this;
}

kernel_registry& kernel_registry::add_host(std::string name, std::function<void()> f) {
  if (name.empty()) throw std::invalid_argument("conveyor::kernel_registry::add_host: an empty name");
  if (host(name)) throw std::invalid_argument(fmt::format("conveyor::kernel_registry::add_host: '{}' is taken", name));
  hosts_.emplace_back(std::move(name), std::make_shared<std::function<void()>>(std::move(f)));
  return *this;
}

const kernel_registry::kernel_entry* kernel_registry::find(std::string_view name) const noexcept {
  for (const auto& k : kernels_)
    if (k.name == name) return &k;
  return nullptr;
}

const kernel_registry::kernel_entry* kernel_registry::find(const void* function) const noexcept {
  for (const auto& k : kernels_)
    if (k.function == function) return &k;
  return nullptr;
}

std::shared_ptr<std::function<void()>> kernel_registry::host(std::string_view name) const noexcept {
  for (const auto& [n, f] : hosts_)
    if (n == name) return f;
  return nullptr;
}

} // namespace conveyor
