#pragma once
//! \file cusparse.hpp
//! cuSPARSE inside captures and conditional bodies: a handle in device pointer mode bound to the
//! capture stream (`cusparseSetStream`), and an SpMV whose work buffer is sized
//! (`cusparseSpMV_bufferSize`), allocated and preprocessed (`cusparseSpMV_preprocess`) before
//! capture, with its scalars in device memory — so that a captured `cusparseSpMV` allocates nothing
//! and reads nothing from the host. The recipe for the other generic cuSPARSE calls (SpMM, SpSV,
//! ...) is the same: bufferSize, a buffer allocated ahead, preprocess or analysis ahead, device
//! scalars. Header-only; link CUDA::cusparse. docs/libraries.md.

#include "conveyor/libraries/workspace.hpp"

#include <cusparse.h>

#include <cstddef>
#include <type_traits>

namespace conveyor::libraries {

//! Throws library_error naming `call` when `status` is not CUSPARSE_STATUS_SUCCESS.
//! \throws library_error.
inline void check_cusparse(cusparseStatus_t status, const char* call) {
  if (status != CUSPARSE_STATUS_SUCCESS)
    throw library_error("cuSPARSE", call, static_cast<int>(status), cusparseGetErrorName(status));
}

//! A cuSPARSE handle (`cusparseCreate`) in device pointer mode (CUSPARSE_POINTER_MODE_DEVICE:
//! scalars are read by the kernels from device memory when they run, never from the host at capture
//! time). Make it before capturing. Thread safety: one thread at a time.
class cusparse_handle {
public:
  //! Creates the handle, bound to `s`, in device pointer mode.
  //! \throws library_error when cuSPARSE refuses.
  explicit cusparse_handle(const stream& s) {
    check_cusparse(cusparseCreate(&handle_), "cusparseCreate");
    const cusparseStatus_t rc = cusparseSetPointerMode(handle_, CUSPARSE_POINTER_MODE_DEVICE);
    if (rc != CUSPARSE_STATUS_SUCCESS) {
      (void)cusparseDestroy(handle_);
      check_cusparse(rc, "cusparseSetPointerMode");
    }
    bind(s);
  }
  cusparse_handle(const cusparse_handle&) = delete;
  cusparse_handle& operator=(const cusparse_handle&) = delete;
  //! Destroys the handle (`cusparseDestroy`). Never throws.
  ~cusparse_handle() { (void)cusparseDestroy(handle_); }
  //! Makes cuSPARSE enqueue on `s` (`cusparseSetStream`). \throws library_error when cuSPARSE
  //! refuses.
  void bind(const stream& s) {
    check_cusparse(cusparseSetStream(handle_, s.get()), "cusparseSetStream");
  }
  //! The cuSPARSE handle.
  [[nodiscard]] cusparseHandle_t get() const noexcept { return handle_; }

private:
  cusparseHandle_t handle_ = nullptr;
};

//! y = alpha op(A) x + beta y with cuSPARSE's generic SpMV, ready for capture: the scalars in
//! device memory (T: float or double, the compute type), the work buffer sized, allocated and the
//! matrix preprocessed at construction. The descriptors (a CSR or COO matrix, dense vectors) are
//! the caller's and must outlive it and every graph that captured run(); their pointers are fixed
//! into a captured call. Thread safety: one thread at a time.
template <class T>
class cusparse_spmv {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "cusparse_spmv computes in float or double");

public:
  //! Sizes and allocates the work buffer and preprocesses (`cusparseSpMV_bufferSize`,
  //! `cusparseSpMV_preprocess`) on `s`, then waits for `s`. Not during a capture.
  //! \throws library_error when cuSPARSE refuses; cuda_error when an allocation or copy fails.
  cusparse_spmv(cusparse_handle& handle, const stream& s, cusparseOperation_t op, T alpha,
                cusparseSpMatDescr_t a, cusparseDnVecDescr_t x, T beta, cusparseDnVecDescr_t y,
                cusparseSpMVAlg_t algorithm = CUSPARSE_SPMV_CSR_ALG2) :
      handle_(&handle),
      op_(op),
      a_(a),
      x_(x),
      y_(y),
      algorithm_(algorithm),
      scalars_(2 * sizeof(T)) {
    const T values[2] = {alpha, beta};
    CONVEYOR_CHECK(
        cudaMemcpyAsync(scalars_.data(), values, sizeof values, cudaMemcpyHostToDevice, s.get()));
    handle.bind(s);
    std::size_t bytes = 0;
    check_cusparse(cusparseSpMV_bufferSize(handle.get(), op_, alpha_ptr(), a_, x_, beta_ptr(), y_,
                                           compute_type(), algorithm_, &bytes),
                   "cusparseSpMV_bufferSize");
    buffer_ = workspace(bytes > 0 ? bytes : 1);
    check_cusparse(cusparseSpMV_preprocess(handle.get(), op_, alpha_ptr(), a_, x_, beta_ptr(), y_,
                                           compute_type(), algorithm_, buffer_.data()),
                   "cusparseSpMV_preprocess");
    s.synchronize();
  }

  //! Enqueues the SpMV on `s` (`cusparseSetStream`, `cusparseSpMV` with the work buffer), keeping
  //! the buffer and scalars alive with the graph when `s` is capturing.
  //! \throws library_error when cuSPARSE refuses; as workspace::keep_with.
  void run(const stream& s) const {
    const capture_scope named(s, "cusparseSpMV");
    handle_->bind(s);
    check_cusparse(cusparseSpMV(handle_->get(), op_, alpha_ptr(), a_, x_, beta_ptr(), y_,
                                compute_type(), algorithm_, buffer_.data()),
                   "cusparseSpMV");
    buffer_.keep_with(s);
    scalars_.keep_with(s);
  }
  //! The work buffer.
  [[nodiscard]] const workspace& scratch() const noexcept { return buffer_; }

private:
  static constexpr cudaDataType compute_type() noexcept {
    return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
  }
  [[nodiscard]] const T* alpha_ptr() const noexcept {
    return static_cast<const T*>(scalars_.data());
  }
  [[nodiscard]] const T* beta_ptr() const noexcept {
    return static_cast<const T*>(scalars_.data()) + 1;
  }

  cusparse_handle* handle_;
  cusparseOperation_t op_;
  cusparseSpMatDescr_t a_;
  cusparseDnVecDescr_t x_;
  cusparseDnVecDescr_t y_;
  cusparseSpMVAlg_t algorithm_;
  workspace scalars_;
  workspace buffer_;
};

} // namespace conveyor::libraries
