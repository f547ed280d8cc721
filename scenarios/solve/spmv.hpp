#pragma once
//! \file spmv.hpp
//! y = A x through cuSPARSE (cusparseSpMV, CSR, double), set up once so that the call is capture-safe: descriptors
//! and the work buffer are made ahead, scalars live on the device (CUSPARSE_POINTER_MODE_DEVICE), the algorithm
//! is the deterministic CUSPARSE_SPMV_CSR_ALG2, and cusparseSpMV_preprocess runs once at set-up.

#include "solve/csr.hpp"
#include "common/device_buffer.hpp"

#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <source_location>
#include <stdexcept>
#include <string_view>

namespace conveyor::solve {

using scenarios::device_buffer;
using scenarios::pinned_buffer;

//! A cuSPARSE call returned a status other than CUSPARSE_STATUS_SUCCESS.
//! `what()` reads `file:line: call failed: CUSPARSE_STATUS_NAME (description)`.
class cusparse_error : public std::runtime_error {
public:
  //! \param status the status the call returned
  //! \param call   the call as written
  //! \param where  the call site
  cusparse_error(cusparseStatus_t status, std::string_view call, std::source_location where);
  //! The cuSPARSE status.
  [[nodiscard]] cusparseStatus_t status() const noexcept { return status_; }

private:
  cusparseStatus_t status_;
};

//! Throws cusparse_error when `status` is not CUSPARSE_STATUS_SUCCESS.
inline void check_cusparse(cusparseStatus_t status, std::string_view call,
                           std::source_location where = std::source_location::current()) {
  if (status != CUSPARSE_STATUS_SUCCESS) throw cusparse_error(status, call, where);
}

//! A CSR matrix in device memory (0-based, 32-bit indices, double values).
struct device_csr {
  int rows = 0;                   //!< number of rows
  int cols = 0;                   //!< number of columns
  device_buffer<int> row_ptr;     //!< rows + 1 offsets
  device_buffer<int> col_idx;     //!< nnz column indices
  device_buffer<double> values;   //!< nnz values

  //! Uploads `a` (synchronous copies).
  //! \throws conveyor::cuda_error when allocation or a copy fails.
  explicit device_csr(const csr_matrix& a);
};

//! The product y = A x for fixed device vectors x and y (n = A.cols and A.rows elements), enqueued on any stream.
//! Move-only; owns the cuSPARSE handle, descriptors and work buffer.
class spmv_operator {
public:
  //! Creates the handle and descriptors, sizes and allocates the buffer, runs cusparseSpMV_preprocess.
  //! `a`, `x` and `y` must outlive the operator.
  //! \throws cusparse_error when a cuSPARSE call fails; conveyor::cuda_error when an allocation fails.
  spmv_operator(const device_csr& a, const double* x, double* y);
  spmv_operator(const spmv_operator&) = delete;
  spmv_operator& operator=(const spmv_operator&) = delete;
  ~spmv_operator();

  //! Enqueues y = A x on `s` (cusparseSetStream, then cusparseSpMV); asynchronous and capture-safe.
  //! \throws cusparse_error when cuSPARSE refuses the call.
  void enqueue(cudaStream_t s) const;

private:
  cusparseHandle_t handle_ = nullptr;
  cusparseSpMatDescr_t matrix_ = nullptr;
  cusparseDnVecDescr_t x_ = nullptr;
  cusparseDnVecDescr_t y_ = nullptr;
  device_buffer<double> constants_; // {1.0, 0.0}: alpha and beta on the device
  device_buffer<unsigned char> buffer_;
};

} // namespace conveyor::solve

//! Checks a cuSPARSE call: `SOLVE_CUSPARSE_CHECK(cusparseSpMV(...));` throws conveyor::solve::cusparse_error.
#define SOLVE_CUSPARSE_CHECK(...) ::conveyor::solve::check_cusparse((__VA_ARGS__), #__VA_ARGS__)
