#pragma once
//! \file cublaslt.hpp
//! cuBLASLt inside captures and conditional bodies: a handle with a preallocated workspace, the
//! algorithm chosen before capture by cuBLASLt's heuristic limited to that workspace
//! (`cublasLtMatmulAlgoGetHeuristic` with CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES), and
//! `cublasLtMatmul` called with both. cublasLtMatmul takes its workspace per call and allocates
//! nothing itself; what goes wrong in a capture is choosing the algorithm there (the heuristic is
//! host work that may differ between runs) or a workspace that the chosen algorithm outgrows.
//! Header-only; link CUDA::cublasLt. Recipe: docs/libraries.md.

#include "conveyor/libraries/workspace.hpp"

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>

namespace conveyor::libraries {

//! Throws library_error naming `call` when `status` is not CUBLAS_STATUS_SUCCESS.
//! \throws library_error.
inline void check_cublaslt(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw library_error("cuBLASLt", call, static_cast<int>(status), cublasLtGetStatusName(status));
}

//! Which algorithms cublaslt_handle::algorithm may choose by how they reduce over k
//! (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK).
enum class split_k {
  allowed, //!< every reduction scheme (cuBLASLt's default)
  //! only algorithms that do not split the sum over k (CUBLASLT_REDUCTION_SCHEME_NONE): no
  //! reduction kernels or memsets in the graph, and kernel parameters that are the same at every
  //! capture, so that conveyor::graphed can patch a changed argument instead of re-capturing
  //! (docs/libraries.md)
  forbidden,
};

//! A cuBLASLt handle (`cublasLtCreate`) with a workspace and a heuristic preference limited to it.
//! Make it, and choose each matmul's algorithm (algorithm()), before capturing; call matmul()
//! inside the capture (or eagerly: the same algorithm, so the same result). Thread safety: one
//! thread at a time.
class cublaslt_handle {
public:
  //! Creates the handle, a workspace of `workspace_bytes` (32 MiB by default) and the preference
  //! limiting algorithms to it and, with split_k::forbidden, to those that do not split k.
  //! \throws library_error when cuBLASLt refuses; cuda_error when the workspace cannot be
  //!         allocated.
  explicit cublaslt_handle(std::size_t workspace_bytes = std::size_t{32} << 20,
                           split_k splits = split_k::allowed) :
      workspace_(workspace_bytes),
      splits_(splits) {
    check_cublaslt(cublasLtCreate(&handle_), "cublasLtCreate");
    const cublasStatus_t set = make_preference();
    if (set != CUBLAS_STATUS_SUCCESS) {
      if (preference_ != nullptr) (void)cublasLtMatmulPreferenceDestroy(preference_);
      (void)cublasLtDestroy(handle_);
      check_cublaslt(set, "cublasLtMatmulPreferenceCreate/SetAttribute");
    }
  }
  cublaslt_handle(const cublaslt_handle&) = delete;
  cublaslt_handle& operator=(const cublaslt_handle&) = delete;
  //! Destroys the preference and the handle; the workspace stays while a graph holds it. Never
  //! throws.
  ~cublaslt_handle() {
    (void)cublasLtMatmulPreferenceDestroy(preference_);
    (void)cublasLtDestroy(handle_);
  }

  //! The fastest algorithm cuBLASLt's heuristic gives for this matmul within the workspace
  //! (`cublasLtMatmulAlgoGetHeuristic`, the first result). Call it before capturing.
  //! \throws library_error when the heuristic fails or finds no algorithm that fits the workspace.
  [[nodiscard]] cublasLtMatmulAlgo_t algorithm(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                               cublasLtMatrixLayout_t d) const {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check_cublaslt(
        cublasLtMatmulAlgoGetHeuristic(handle_, op, a, b, c, d, preference_, 1, &result, &found),
        "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0 || result.workspaceSize > workspace_.bytes())
      throw library_error(
          "cuBLASLt", "cublasLtMatmulAlgoGetHeuristic",
          static_cast<int>(CUBLAS_STATUS_NOT_SUPPORTED),
          splits_ == split_k::forbidden
              ? "no algorithm without split-k fits the workspace (make the handle "
                "with a larger one, or allow split-k)"
              : "no algorithm fits the workspace (make the handle with a larger one)");
    return result.algo;
  }
  //! Whether algorithm() may choose split-k algorithms.
  [[nodiscard]] split_k splits() const noexcept { return splits_; }

  //! D = alpha op(A) op(B) + beta C on `s` with `algo` and the workspace (`cublasLtMatmul`); keeps
  //! the workspace alive with the graph when `s` is capturing. Scalars by host pointer are read now
  //! (fixed in a captured graph).
  //! \throws library_error when cuBLASLt refuses; as workspace::keep_with.
  void matmul(const stream& s, cublasLtMatmulDesc_t op, const void* alpha, const void* a,
              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t& algo) const {
    const capture_scope named(s, "cublasLtMatmul");
    check_cublaslt(cublasLtMatmul(handle_, op, alpha, a, a_layout, b, b_layout, beta, c, c_layout,
                                  d, d_layout, &algo, workspace_.data(), workspace_.bytes(),
                                  s.get()),
                   "cublasLtMatmul");
    workspace_.keep_with(s);
  }
  //! The cuBLASLt handle.
  [[nodiscard]] cublasLtHandle_t get() const noexcept { return handle_; }
  //! The workspace.
  [[nodiscard]] const workspace& scratch() const noexcept { return workspace_; }

private:
  // The preference: the workspace limit and, for split_k::forbidden, the reduction-scheme mask.
  cublasStatus_t make_preference() noexcept {
    cublasStatus_t rc = cublasLtMatmulPreferenceCreate(&preference_);
    std::size_t limit = workspace_.bytes();
    if (rc == CUBLAS_STATUS_SUCCESS)
      rc = cublasLtMatmulPreferenceSetAttribute(
          preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit);
    const std::uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    if (rc == CUBLAS_STATUS_SUCCESS && splits_ == split_k::forbidden)
      rc = cublasLtMatmulPreferenceSetAttribute(
          preference_, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof none);
    return rc;
  }

  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  workspace workspace_;
  split_k splits_ = split_k::allowed;
};

} // namespace conveyor::libraries
