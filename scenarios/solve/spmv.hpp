#pragma once
//! \file spmv.hpp
//! y = A x through cuSPARSE (cusparseSpMV, CSR, double) with Conveyor's cuSPARSE adapter
//! (conveyor/libraries/cusparse.hpp): the descriptors, the work buffer and cusparseSpMV_preprocess are made at
//! set-up, the scalars live on the device (CUSPARSE_POINTER_MODE_DEVICE) and the algorithm is the deterministic
//! CUSPARSE_SPMV_CSR_ALG2 — so that the call captures into a graph and into a WHILE body, allocating nothing.

#include "solve/csr.hpp"
#include "common/device_buffer.hpp"

#include <conveyor/libraries/cusparse.hpp>
#include <conveyor/runtime/stream.hpp>

#include <cuda_runtime_api.h>
#include <cusparse.h>

namespace conveyor::solve {

using scenarios::device_buffer;
using scenarios::pinned_buffer;

//! A CSR matrix in device memory (0-based, 32-bit indices, double values).
struct device_csr {
  int rows = 0;                 //!< number of rows
  int cols = 0;                 //!< number of columns
  device_buffer<int> row_ptr;   //!< rows + 1 offsets
  device_buffer<int> col_idx;   //!< nnz column indices
  device_buffer<double> values; //!< nnz values

  //! Uploads `a` (synchronous copies).
  //! \throws conveyor::cuda_error when allocation or a copy fails.
  explicit device_csr(const csr_matrix& a);
};

//! The cuSPARSE descriptors of A (CSR), x and y (dense vectors). Destroys them when it goes. Not copyable.
class spmv_descriptors {
public:
  //! Creates the three descriptors (`cusparseCreateCsr`, `cusparseCreateDnVec`).
  //! \throws conveyor::libraries::library_error when cuSPARSE refuses one (those made are destroyed).
  spmv_descriptors(const device_csr& a, const double* x, double* y);
  spmv_descriptors(const spmv_descriptors&) = delete;
  spmv_descriptors& operator=(const spmv_descriptors&) = delete;
  //! Destroys the descriptors. Never throws.
  ~spmv_descriptors();

  cusparseSpMatDescr_t matrix = nullptr; //!< A
  cusparseDnVecDescr_t x = nullptr;      //!< x
  cusparseDnVecDescr_t y = nullptr;      //!< y

private:
  void release() noexcept;
};

//! The product y = A x for fixed device vectors x and y (n = A.cols and A.rows elements), enqueued on any stream.
//! Not copyable or movable; owns the cuSPARSE handle, descriptors and work buffer (the adapter's).
class spmv_operator {
public:
  //! Creates the handle and descriptors, sizes and allocates the buffer and runs cusparseSpMV_preprocess on `s`
  //! (waiting for it). `a`, `x` and `y` must outlive the operator.
  //! \throws conveyor::libraries::library_error when a cuSPARSE call fails; conveyor::cuda_error when an allocation
  //!         fails.
  spmv_operator(const device_csr& a, const double* x, double* y, const conveyor::stream& s);

  //! Enqueues y = A x on `s` (cusparseSetStream, then cusparseSpMV); asynchronous and capture-safe.
  //! \throws conveyor::libraries::library_error when cuSPARSE refuses the call.
  void enqueue(cudaStream_t s) const;

private:
  libraries::cusparse_handle handle_;
  spmv_descriptors descriptors_;
  libraries::cusparse_spmv<double> product_;
};

} // namespace conveyor::solve
