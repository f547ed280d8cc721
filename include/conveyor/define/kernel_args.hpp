#pragma once
//! \file kernel_args.hpp
//! Typed kernel arguments: a kernel's parameter list checked against the given arguments at compile
//! time, and the `void**` array CUDA's kernel-node calls take.

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor {

//! Grid, block and dynamic shared memory of a kernel launch (the `<<<grid, block, shared_bytes>>>`
//! triple), and the launch attributes Conveyor names (`cudaLaunchConfig_t` /
//! `cudaLaunchAttribute`). A plain value.
struct launch_config {
  dim3 grid{1, 1, 1};           //!< blocks per grid, in x, y, z
  dim3 block{1, 1, 1};          //!< threads per block, in x, y, z
  std::size_t shared_bytes = 0; //!< dynamic shared memory per block, in bytes
  //! Scheduling priority of the kernel's blocks (`cudaLaunchAttributePriority`): lower numbers are
  //! higher priority, within cudaDeviceGetStreamPriorityRange (0 to -5 on the H200); 0 leaves the
  //! default (the stream's priority, or for a graph node none). A graph honours node priorities
  //! when instantiated with instantiate_flags::use_node_priority.
  int priority = 0;
  //! Programmatic dependent launch: the kernel may begin while the kernels it depends on are still
  //! running, and calls conveyor::device::wait_for_dependencies() before reading their results. On
  //! a stream (conveyor::launch) this is `cudaLaunchAttributeProgrammaticStreamSerialization`,
  //! which stream capture turns into a programmatic edge from the previous kernel; in the builder
  //! (graph::kernel) the dependencies given that are kernel nodes become programmatic edges (others
  //! stay full).
  bool programmatic = false;
};

//! The values of a kernel's arguments, converted to the kernel's parameter types and held so that
//! CUDA can copy them (`kernelParams` of cudaKernelNodeParams). Built only through
//! make_kernel_args, which checks at compile time that the arguments match `void kernel(Params...)`
//! in number and type. Not copyable (pointers() points into it); thread safety: a plain value.
template <class... Params>
class kernel_args {
public:
  //! The parameter types, without cv-qualifiers, as stored.
  using values_type = std::tuple<std::remove_cvref_t<Params>...>;

  //! Converts each argument to its parameter type. Prefer make_kernel_args, which also checks count
  //! and types with readable messages.
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

//! How a kernel parameter's type says its bits are to be read when a graph is saved to a file
//! (graph files, conveyor/keep): whether a word that falls inside a buffer is an address (relocated
//! at load) or a value.
enum class parameter_class : std::uint8_t {
  //! a pointer type: relocated, and refused at save when it points into no buffer Conveyor knows
  pointer,
  value, //!< an arithmetic or enum type: never relocated, whatever its bits
  //! a class type, or no type known: each aligned 8-byte word inside a buffer is relocated (a
  //! heuristic)
  //! unsigned long long, CUDA's cudaGraphConditionalHandle: relocated when it equals a condition
  opaque,
  condition,
  // !< handle of the saved graph, else a value
};

namespace detail {
//! The class of parameter type T (parameter_class).
template <class T>
consteval parameter_class parameter_class_of() {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_pointer_v<U> || std::is_null_pointer_v<U>) return parameter_class::pointer;
  else if constexpr (std::is_same_v<U, unsigned long long>) return parameter_class::condition;
  else if constexpr (std::is_arithmetic_v<U> || std::is_enum_v<U>) return parameter_class::value;
  else return parameter_class::opaque;
}
//! The classes of a kernel's parameters, one array per signature.
template <class... Params>
inline constexpr std::array<parameter_class, sizeof...(Params)> parameter_classes{
    parameter_class_of<Params>()...};

//! Records, once per process, the parameter classes of the kernel whose host function is `kernel`
//! (what graph files use to tell addresses from values in the kernel's arguments). Thread-safe;
//! never throws.
void record_kernel_parameters(const void* kernel,
                              std::span<const parameter_class> classes) noexcept;
//! The classes recorded for `kernel`, or an empty span. Thread-safe; never throws.
[[nodiscard]] std::span<const parameter_class>
recorded_kernel_parameters(const void* kernel) noexcept;
//! Every kernel recorded so far (host functions), for graph files. Thread-safe.
[[nodiscard]] std::vector<const void*> recorded_kernels();

//! record_kernel_parameters behind a small per-thread cache: a typed launch of a kernel seen
//! recently costs a load and a compare.
inline void note_kernel_parameters(const void* kernel,
                                   std::span<const parameter_class> classes) noexcept {
  thread_local std::array<const void*, 64> seen{};
  const void*& slot = seen[(reinterpret_cast<std::uintptr_t>(kernel) >> 4) % seen.size()];
  if (slot == kernel) return;
  slot = kernel;
  record_kernel_parameters(kernel, classes);
}

//! True when an argument of type Arg narrows to parameter type Param (list-initialisation would
//! refuse it: double to float, std::size_t to int, a float to an integer, ...).
template <class Param, class Arg>
inline constexpr bool narrows = std::is_arithmetic_v<std::remove_cvref_t<Arg>>&&
                                    std::is_arithmetic_v<std::remove_cvref_t<Param>> &&
                                !requires {
  std::remove_cvref_t<Param>{std::declval<Arg>()};
};

//! Narrowing arithmetic arguments are refused when CONVEYOR_REFUSE_NARROWING is defined to 1 before
//! Conveyor's headers (docs/capture.md, "Typed kernel arguments"); by default they convert as a
//! call of the kernel would.
#if defined(CONVEYOR_REFUSE_NARROWING) && CONVEYOR_REFUSE_NARROWING
inline constexpr bool refuse_narrowing = true;
#else
inline constexpr bool refuse_narrowing = false;
#endif

template <class Param, class Arg>
inline constexpr bool arg_fits = std::is_convertible_v<Arg, std::remove_cvref_t<Param>> &&
                                 !(refuse_narrowing && narrows<Param, Arg>);

template <class ParamList, class ArgList>
struct accepts : std::false_type {};
template <class... Params, class... Args>
requires(sizeof...(Params) ==
         sizeof...(Args)) struct accepts<std::tuple<Params...>, std::tuple<Args...>>
    : std::bool_constant<(arg_fits<Params, Args> && ...)> {
};

//! The position (from 0) of the first argument that does not fit its parameter, or the count when
//! all fit.
template <class... Params, class... Args>
consteval std::size_t first_misfit(std::tuple<Params...>*, std::tuple<Args...>*) {
  std::size_t i = 0;
  const bool fits[] = {arg_fits<Params, Args>..., true};
  while (i < sizeof...(Params) && fits[i]) ++i;
  return i;
}

//! False for every value: what the refusals below assert (they are instantiated only to fail).
template <std::size_t>
inline constexpr bool refused_argument = false;

//! Instantiated only for a refused argument: the compiler's message then names its position (from
//! 0), the type given and the parameter's type, in that order.
template <std::size_t Position, class GivenType, class ParameterType>
struct kernel_argument_refused {
  static_assert(refused_argument<Position>,
                "conveyor: a kernel argument does not fit its parameter type; the instantiation of "
                "'kernel_argument_refused<P, A, T>' beside this message names it: P its position "
                "(from 0), A the "
                "argument's type, T the parameter's type"
#if defined(CONVEYOR_REFUSE_NARROWING) && CONVEYOR_REFUSE_NARROWING
                " (narrowing conversions are refused: CONVEYOR_REFUSE_NARROWING)"
#endif
  );
};

//! Instantiated only for a call with the wrong number of arguments: names both counts.
template <std::size_t GivenCount, std::size_t ParameterCount>
struct kernel_argument_count_refused {
  static_assert(
      refused_argument<GivenCount>,
      "conveyor: the number of kernel arguments differs from the kernel's parameter count; "
      "the instantiation of 'kernel_argument_count_refused<G, P>' beside this message names both: "
      "G "
      "arguments given, P parameters");
};
} // namespace detail

//! True when `void (*)(Params...)` can be called with `Args...` after conversion, as kernel_args
//! requires.
template <class Kernel, class... Args>
inline constexpr bool kernel_accepts = false;
//! The kernel's case: each argument converts to its parameter, and the counts match.
template <class... Params, class... Args>
inline constexpr bool kernel_accepts<void (*)(Params...), Args...> =
    detail::accepts<std::tuple<Params...>, std::tuple<Args...>>::value;

//! Stores `args` converted to the parameter types of `kernel`. A count or type mismatch fails to
//! compile with one message naming the argument's position (from 0), the type given and the
//! parameter's type (or both counts), and nothing after it. Narrowing arithmetic conversions
//! (double to float, std::size_t to int) are accepted as a kernel call accepts them, or refused
//! when CONVEYOR_REFUSE_NARROWING is 1.
template <class... Params, class... Args>
[[nodiscard]] kernel_args<Params...> make_kernel_args(void (*kernel)(Params...), Args&&... args) {
  if constexpr (sizeof...(Params) != sizeof...(Args)) {
    (void)detail::kernel_argument_count_refused<sizeof...(Args), sizeof...(Params)>{};
    std::abort(); // not reached: the line above does not compile
  } else if constexpr (constexpr std::size_t bad =
                           detail::first_misfit(static_cast<std::tuple<Params...>*>(nullptr),
                                                static_cast<std::tuple<Args...>*>(nullptr));
                       bad < sizeof...(Params)) {
    (void)detail::kernel_argument_refused<
        bad, std::remove_cvref_t<std::tuple_element_t<bad, std::tuple<Args...>>>,
        std::tuple_element_t<bad, std::tuple<Params...>>>{};
    std::abort(); // not reached: the line above does not compile
  } else {
    detail::note_kernel_parameters(reinterpret_cast<const void*>(kernel),
                                   detail::parameter_classes<Params...>);
    return kernel_args<Params...>(std::forward<Args>(args)...);
  }
}

} // namespace conveyor
