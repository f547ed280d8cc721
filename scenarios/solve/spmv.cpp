//! \file spmv.cpp
//! cuSPARSE SpMV set-up and call.

#include "solve/spmv.hpp"

#include <fmt/format.h>

#include <array>
#include <span>

namespace conveyor::solve {

namespace {
constexpr cusparseSpMVAlg_t algorithm = CUSPARSE_SPMV_CSR_ALG2; // deterministic: same result every run
} // namespace

cusparse_error::cusparse_error(cusparseStatus_t status, std::string_view call, std::source_location where)
    : std::runtime_error(fmt::format("{}:{}: {} failed: {} ({})", where.file_name(), where.line(), call,
                                     cusparseGetErrorName(status), cusparseGetErrorString(status))),
      status_(status) {}

device_csr::device_csr(const csr_matrix& a)
    : rows(a.rows), cols(a.cols), row_ptr(std::span<const int>(a.row_ptr)), col_idx(std::span<const int>(a.col_idx)),
      values(std::span<const double>(a.values)) {}

spmv_operator::spmv_operator(const device_csr& a, const double* x, double* y) {
  static constexpr std::array<double, 2> one_zero{1.0, 0.0};
  constants_ = device_buffer<double>(std::span<const double>(one_zero));
  SOLVE_CUSPARSE_CHECK(cusparseCreate(&handle_));
  try {
    SOLVE_CUSPARSE_CHECK(cusparseSetPointerMode(handle_, CUSPARSE_POINTER_MODE_DEVICE));
    SOLVE_CUSPARSE_CHECK(cusparseCreateCsr(&matrix_, a.rows, a.cols, static_cast<int64_t>(a.values.size()),
                                           // cuSPARSE takes non-const pointers; a CSR descriptor only reads them
                                           const_cast<int*>(a.row_ptr.data()), const_cast<int*>(a.col_idx.data()),
                                           const_cast<double*>(a.values.data()), CUSPARSE_INDEX_32I,
                                           CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    SOLVE_CUSPARSE_CHECK(cusparseCreateDnVec(&x_, a.cols, const_cast<double*>(x), CUDA_R_64F));
    SOLVE_CUSPARSE_CHECK(cusparseCreateDnVec(&y_, a.rows, y, CUDA_R_64F));
    const double* one = constants_.data();
    const double* zero = constants_.data() + 1;
    std::size_t bytes = 0;
    SOLVE_CUSPARSE_CHECK(cusparseSpMV_bufferSize(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, one, matrix_, x_, zero, y_,
                                                 CUDA_R_64F, algorithm, &bytes));
    buffer_ = device_buffer<unsigned char>(bytes > 0 ? bytes : 1);
    SOLVE_CUSPARSE_CHECK(cusparseSpMV_preprocess(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, one, matrix_, x_, zero,
                                                 y_, CUDA_R_64F, algorithm, buffer_.data()));
    CONVEYOR_CHECK(cudaDeviceSynchronize()); // preprocess ran on the default stream
  } catch (...) {
    if (y_ != nullptr) (void)cusparseDestroyDnVec(y_);
    if (x_ != nullptr) (void)cusparseDestroyDnVec(x_);
    if (matrix_ != nullptr) (void)cusparseDestroySpMat(matrix_);
    (void)cusparseDestroy(handle_);
    throw;
  }
}

spmv_operator::~spmv_operator() {
  (void)cusparseDestroyDnVec(y_);
  (void)cusparseDestroyDnVec(x_);
  (void)cusparseDestroySpMat(matrix_);
  (void)cusparseDestroy(handle_);
}

void spmv_operator::enqueue(cudaStream_t s) const {
  SOLVE_CUSPARSE_CHECK(cusparseSetStream(handle_, s));
  SOLVE_CUSPARSE_CHECK(cusparseSpMV(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, constants_.data(), matrix_, x_,
                                    constants_.data() + 1, y_, CUDA_R_64F, algorithm,
                                    const_cast<unsigned char*>(buffer_.data()))); // the work buffer cuSPARSE owns
}

} // namespace conveyor::solve
