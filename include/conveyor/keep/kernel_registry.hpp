#pragma once
//! \file kernel_registry.hpp
//! conveyor::kernel_registry: the program's own kernels and host functions, by name, for graph
//! files. At load, a file's kernel resolves through the registry by its mangled name (or from its
//! image embedded in the file); a host node's function resolves by the name it was saved under (its
//! label). At save, a registered kernel's parameter types say which argument words are addresses
//! (docs/graph-files.md, "Addresses and values").

#include "conveyor/define/kernel_args.hpp"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

//! Kernels (by their host function) and host functions (by name) a program offers to graph files.
//! Thread safety: fill it before use; then concurrent reads (save, load) are safe.
class kernel_registry {
public:
  //! One registered kernel. A plain value.
  struct kernel_entry {
    //! its mangled name (cuFuncGetName), read when it is registered
    std::string name;
    //! its host function, as `<<<>>>` and cudaGraphAddKernelNode take it
    const void* function = nullptr;
    std::vector<parameter_class> classes; //!< each parameter's class, from its type
  };

  //! Registers kernels, each with its parameter types: `registry.add(axpy, scale, reduce<float>)`.
  //! Needs a CUDA device (the mangled name is read through cudaGetFuncBySymbol and cuFuncGetName).
  //! \throws cuda_error when a kernel cannot be found on the current device;
  //!         std::invalid_argument when another kernel of the same name was registered.
  template <class... Kernels>
  kernel_registry& add(Kernels... kernels) {
    (add_one(kernels), ...);
    return *this;
  }
  //! Registers a kernel from an untyped host function with the classes of its parameters (one per
  //! parameter).
  //! \throws as add.
  kernel_registry& add_untyped(const void* function, std::vector<parameter_class> classes);
  //! Registers `f` as the host function `name`: host nodes saved under that name (their label) call
  //! it after load. The registry keeps the callable; loaded graphs share it. \throws
  //! std::invalid_argument for an empty or taken name.
  kernel_registry& add_host(std::string name, std::function<void()> f);

  //! The kernel registered under mangled name `name`, or null. Never throws.
  [[nodiscard]] const kernel_entry* find(std::string_view name) const noexcept;
  //! The kernel registered with host function `function`, or null. Never throws.
  [[nodiscard]] const kernel_entry* find(const void* function) const noexcept;
  //! The host function registered under `name`, or null. Never throws.
  [[nodiscard]] std::shared_ptr<std::function<void()>> host(std::string_view name) const noexcept;
  //! Every registered kernel, in registration order.
  [[nodiscard]] std::span<const kernel_entry> kernels() const noexcept { return kernels_; }

private:
  template <class... Params>
  void add_one(void (*kernel)(Params...)) {
    const auto& classes = detail::parameter_classes<Params...>;
    add_untyped(reinterpret_cast<const void*>(kernel),
                std::vector<parameter_class>(classes.begin(), classes.end()));
  }
  std::vector<kernel_entry> kernels_;
  std::vector<std::pair<std::string, std::shared_ptr<std::function<void()>>>> hosts_;
};

} // namespace conveyor
