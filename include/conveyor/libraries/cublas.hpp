#pragma once
//! \file cublas.hpp
//! cuBLAS inside captures and conditional bodies: a handle bound to the capture stream and a
//! preallocated workspace (`cublasSetStream`, then `cublasSetWorkspace`: setting the stream resets
//! a user workspace to cuBLAS's own pool, from which a captured call would allocate — an allocation
//! node, refused in a conditional node's body). Header-only; link CUDA::cublas. Recipe and caveats:
//! docs/libraries.md.

#include "conveyor/libraries/workspace.hpp"

#include <cublas_v2.h>

#include <cstddef>
#include <string>

namespace conveyor::libraries {

//! The workspace cuBLAS recommends for Hopper and later GPUs (32 MiB; 4 MiB is enough before them).
inline constexpr std::size_t cublas_default_workspace = std::size_t{32} << 20;

//! Throws library_error naming `call` when `status` is not CUBLAS_STATUS_SUCCESS.
//! \throws library_error.
inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw library_error("cuBLAS", call, static_cast<int>(status), cublasGetStatusName(status));
}

//! How a cublas_handle is set up. The modes default to cuBLAS's own defaults, set explicitly
//! (stated in code rather than inherited from a cuBLAS version's defaults): scalars by host
//! pointer, CUBLAS_DEFAULT_MATH (no TF32 for single precision) and CUBLAS_ATOMICS_NOT_ALLOWED (no
//! algorithm that reduces with atomics). With a fixed workspace the same calls then give the same
//! bits eagerly and replayed from a graph (the train scenario relies on it).
struct cublas_settings {
  //! The workspace's size in bytes (cublas_default_workspace: cuBLAS's recommendation for Hopper
  //! and later).
  std::size_t workspace_bytes = cublas_default_workspace;
  //! `cublasSetPointerMode`: CUBLAS_POINTER_MODE_HOST (scalars read at the call: fixed into a
  //! captured call) or CUBLAS_POINTER_MODE_DEVICE (read by the kernels when they run: change them
  //! between replays).
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  //! `cublasSetMathMode`, e.g. CUBLAS_TF32_TENSOR_OP_MATH to allow TF32 for single precision.
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
  //! `cublasSetAtomicsMode`: CUBLAS_ATOMICS_ALLOWED lets cuBLAS pick faster algorithms whose
  //! results may vary from run to run.
  cublasAtomicsMode_t atomics_mode = CUBLAS_ATOMICS_NOT_ALLOWED;
};

//! A cuBLAS handle (`cublasCreate`) with a workspace of its own, bound to one stream at a time.
//! Make it before capturing (cublasCreate allocates); bind it to the capturing stream — before the
//! capture or inside it — and call cuBLAS with get(): the captured calls then use the workspace and
//! allocate nothing. Every bind() on a capturing stream ties the workspace to the graph being
//! captured (workspace::keep_with), so it outlives the graph's replays even after the handle is
//! gone. Scalars given by host pointer (CUBLAS_POINTER_MODE_HOST, the default) are read when the
//! call is captured and fixed in the graph; to change them between replays, use
//! CUBLAS_POINTER_MODE_DEVICE and device scalars (cublas_settings::pointer_mode). Thread safety:
//! one thread at a time (cuBLAS handles are not thread-safe).
class cublas_handle {
public:
  //! Creates the handle and a workspace of `workspace_bytes`, bound to `s`, with cuBLAS's default
  //! modes.
  //! \throws library_error when cuBLAS refuses a call (cublasCreate, the mode setters,
  //!         cublasSetStream, cublasSetWorkspace); cuda_error when the workspace cannot be
  //!         allocated; as workspace::keep_with when `s` is capturing.
  explicit cublas_handle(const stream& s, std::size_t workspace_bytes = cublas_default_workspace) :
      cublas_handle(s, cublas_settings{.workspace_bytes = workspace_bytes}) {}
  //! Creates the handle and a workspace as `settings` say (`cublasCreate`, `cublasSetPointerMode`,
  //! `cublasSetMathMode`, `cublasSetAtomicsMode`), bound to `s`.
  //! \throws library_error when cuBLAS refuses a call (cublasCreate, the mode setters,
  //!         cublasSetStream, cublasSetWorkspace); cuda_error when the workspace cannot be
  //!         allocated; as workspace::keep_with when `s` is capturing.
  cublas_handle(const stream& s, const cublas_settings& settings) :
      workspace_(settings.workspace_bytes) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    try {
      check_cublas(cublasSetPointerMode(handle_, settings.pointer_mode), "cublasSetPointerMode");
      check_cublas(cublasSetMathMode(handle_, settings.math_mode), "cublasSetMathMode");
      check_cublas(cublasSetAtomicsMode(handle_, settings.atomics_mode), "cublasSetAtomicsMode");
      bind(s);
    } catch (...) {
      (void)cublasDestroy(handle_);
      throw;
    }
  }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  //! Destroys the handle (`cublasDestroy`); the workspace stays while a graph holds it. Never
  //! throws.
  ~cublas_handle() { (void)cublasDestroy(handle_); }

  //! Makes cuBLAS enqueue on `s` with the workspace (`cublasSetStream`, `cublasSetWorkspace`),
  //! keeping the workspace alive with the graph when `s` is capturing. Call it again after any
  //! cublasSetStream of your own.
  //! \throws library_error when cuBLAS refuses; as workspace::keep_with.
  void bind(const stream& s) {
    check_cublas(cublasSetStream(handle_, s.get()), "cublasSetStream");
    check_cublas(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()),
                 "cublasSetWorkspace");
    workspace_.keep_with(s);
  }
  //! The cuBLAS handle, for cuBLAS calls.
  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }
  //! The workspace.
  [[nodiscard]] const workspace& scratch() const noexcept { return workspace_; }

private:
  cublasHandle_t handle_ = nullptr;
  workspace workspace_;
};

} // namespace conveyor::libraries
