#pragma once
//! \file kernel_args.hpp
//! Typed kernel arguments: a kernel's parameter list checked against the given arguments at compile time, and the
//! `void**` array CUDA's kernel-node calls take.

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace conveyor {

//! Grid, block and dynamic shared memory of a kernel launch (the `<<<grid, block, shared_bytes>>>` triple), and the
//! launch attributes Conveyor names (`cudaLaunchConfig_t` / `cudaLaunchAttribute`). A plain value.
struct launch_config {
  dim3 grid{1, 1, 1};           //!< blocks per grid, in x, y, z
  dim3 block{1, 1, 1};          //!< threads per block, in x, y, z
  std::size_t shared_bytes = 0; //!< dynamic shared memory per block, in bytes
  //! Scheduling priority of the kernel's blocks (`cudaLaunchAttributePriority`): lower numbers are higher priority,
  //! within cudaDeviceGetStreamPriorityRange (0 to -5 on the H200); 0 leaves the default (the stream's priority, or
  //! for a graph node none). A graph honours node priorities when instantiated with
  //! instantiate_flags::use_node_priority.
  int priority = 0;
  //! Programmatic dependent launch: the kernel may begin while the kernels it depends on are still running, and calls
  //! conveyor::device::wait_for_dependencies() before reading their results. On a stream (conveyor::launch) this is
  //! `cudaLaunchAttributeProgrammaticStreamSerialization`, which stream capture turns into a programmatic edge
  //! from the previous kernel; in the builder (graph::kernel) the dependencies given that are kernel nodes become
  //! programmatic edges (others stay full).
  bool programmatic = false;
};

//! The values of a kernel's arguments, converted to the kernel's parameter types and held so that CUDA can copy
//! them (`kernelParams` of cudaKernelNodeParams). Built only through make_kernel_args, which checks at compile time
//! that the arguments match `void kernel(Params...)` in number and type. Not copyable (pointers() points into it);
//! thread safety: a plain value.
template <class... Params>
class kernel_args {
public:
  //! The parameter types, without cv-qualifiers, as stored.
  using values_type = std::tuple<std::remove_cvref_t<Params>...>;

  //! Converts each argument to its parameter type. Prefer make_kernel_args, which also checks count and types
  //! with readable messages.
  template <class... Args>
  explicit kernel_args(Args&&... args) : values_(std::forward<Args>(args)...) {
    point(std::index_sequence_for<Params...>{});
  }
  kernel_args(const kernel_args&) = delete;
  kernel_args& operator=(const kernel_args&) = delete;

  //! The array of pointers to each argument, as cudaKernelNodeParams::kernelParams wants it.
  [[nodiscard]] void** pointers() noexcept { return pointers_.data(); }
  //! The converted values.
  [[nodiscard]] const values_type& values() const noexcept { return values_; }

private:
  template <std::size_t... I>
  void point(std::index_sequence<I...>) noexcept {
    ((pointers_[I] = static_cast<void*>(&std::get<I>(values_))), ...);
  }
  values_type values_;
  std::array<void*, sizeof...(Params) == 0 ? 1 : sizeof...(Params)> pointers_{};
};

namespace detail {
template <class Param, class Arg>
inline constexpr bool arg_fits = std::is_convertible_v<Arg, std::remove_cvref_t<Param>>;

template <class ParamList, class ArgList>
struct accepts : std::false_type {};
template <class... Params, class... Args>
  requires(sizeof...(Params) == sizeof...(Args))
struct accepts<std::tuple<Params...>, std::tuple<Args...>> : std::bool_constant<(arg_fits<Params, Args> && ...)> {};
} // namespace detail

//! True when `void (*)(Params...)` can be called with `Args...` after conversion, as kernel_args requires.
template <class Kernel, class... Args>
inline constexpr bool kernel_accepts = false;
//! The kernel's case: each argument converts to its parameter, and the counts match.
template <class... Params, class... Args>
inline constexpr bool kernel_accepts<void (*)(Params...), Args...> =
    detail::accepts<std::tuple<Params...>, std::tuple<Args...>>::value;

//! Stores `args` converted to the parameter types of `kernel`. A count or type mismatch fails to compile with a
//! message naming the problem.
template <class... Params, class... Args>
[[nodiscard]] kernel_args<Params...> make_kernel_args(void (*kernel)(Params...), Args&&... args) {
  (void)kernel;
  static_assert(sizeof...(Params) == sizeof...(Args),
                "conveyor: the number of kernel arguments differs from the kernel's parameter count");
  static_assert(detail::accepts<std::tuple<Params...>, std::tuple<Args...>>::value,
                "conveyor: a kernel argument does not convert to the kernel's parameter type");
  return kernel_args<Params...>(std::forward<Args>(args)...);
}

} // namespace conveyor
