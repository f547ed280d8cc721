//! \file spmv.cpp
//! cuSPARSE SpMV set-up and call, through Conveyor's cuSPARSE adapter.

#include "solve/spmv.hpp"

#include <cstdint>
#include <span>

namespace conveyor::solve {

using libraries::check_cusparse;

device_csr::device_csr(const csr_matrix& a) :
    rows(a.rows),
    cols(a.cols),
    row_ptr(std::span<const int>(a.row_ptr)),
    col_idx(std::span<const int>(a.col_idx)),
    values(std::span<const double>(a.values)) {}

spmv_descriptors::spmv_descriptors(const device_csr& a, const double* x, double* y) {
  try {
    check_cusparse(cusparseCreateCsr(&matrix, a.rows, a.cols, static_cast<int64_t>(a.values.size()),
                                     // cuSPARSE takes non-const pointers; a CSR descriptor only reads them
                                     const_cast<int*>(a.row_ptr.data()), const_cast<int*>(a.col_idx.data()),
                                     const_cast<double*>(a.values.data()), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                     CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
                   "cusparseCreateCsr");
    check_cusparse(cusparseCreateDnVec(&this->x, a.cols, const_cast<double*>(x), CUDA_R_64F), "cusparseCreateDnVec");
    check_cusparse(cusparseCreateDnVec(&this->y, a.rows, y, CUDA_R_64F), "cusparseCreateDnVec");
  } catch (...) {
    release();
    throw;
  }
}

spmv_descriptors::~spmv_descriptors() { release(); }

void spmv_descriptors::release() noexcept {
  if (y != nullptr) (void)cusparseDestroyDnVec(y);
  if (x != nullptr) (void)cusparseDestroyDnVec(x);
  if (matrix != nullptr) (void)cusparseDestroySpMat(matrix);
  y = nullptr;
  x = nullptr;
  matrix = nullptr;
}

spmv_operator::spmv_operator(const device_csr& a, const double* x, double* y, const conveyor::stream& s) :
    handle_(s),
    descriptors_(a, x, y),
    // deterministic: the same result at every run, eager or replayed
    product_(handle_, s, CUSPARSE_OPERATION_NON_TRANSPOSE, 1.0, descriptors_.matrix, descriptors_.x, 0.0,
             descriptors_.y, CUSPARSE_SPMV_CSR_ALG2) {}

void spmv_operator::enqueue(cudaStream_t s) const { product_.run(conveyor::stream::adopt(s)); }

} // namespace conveyor::solve
