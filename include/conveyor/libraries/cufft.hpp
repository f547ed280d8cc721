#pragma once
//! \file cufft.hpp
//! cuFFT inside captures and conditional bodies: a plan made with auto-allocation off
//! (`cufftSetAutoAllocation(plan, 0)` before `cufftMakePlan*`), its work area sized
//! (`cufftMakePlan*`'s workSize) and allocated ahead (`cufftSetWorkArea`), bound to the capture
//! stream (`cufftSetStream`): a captured `cufftExec*` then runs in the plan's own work area and
//! allocates nothing. Header-only; link CUDA::cufft. docs/libraries.md.

#include "conveyor/libraries/workspace.hpp"

#include <cufft.h>

#include <cstddef>
#include <string>

namespace conveyor::libraries {

//! Throws library_error naming `call` when `status` is not CUFFT_SUCCESS (cuFFT has no status
//! names: the code).
//! \throws library_error.
inline void check_cufft(cufftResult status, const char* call) {
  if (status != CUFFT_SUCCESS)
    throw library_error("cuFFT", call, static_cast<int>(status), "cufftResult");
}

//! A cuFFT plan with a work area of its own, allocated before capture. Plans for 1D transforms
//! (batched) are made by plan_1d; other shapes by plan_many (cufftMakePlanMany's arguments).
//! Execute with get() and the cufftExec* call of its type after bind(s), or through exec_c2c /
//! exec_r2c / exec_c2r, which bind and name the call. Thread safety: one thread at a time.
class cufft_plan {
public:
  //! A batch of `batch` 1D transforms of `n` points of `type` (CUFFT_C2C, CUFFT_R2C, ...), bound to
  //! `s`.
  //! \throws library_error when cuFFT refuses; cuda_error when the work area cannot be allocated.
  static cufft_plan plan_1d(const stream& s, int n, cufftType type, int batch = 1) {
    return cufft_plan(s, [&](cufftHandle p, std::size_t* bytes) {
      return cufftMakePlan1d(p, n, type, batch, bytes);
    });
  }
  //! A plan of cufftMakePlanMany's arguments (`rank`, `n`, the embeddings, strides and distances,
  //! `type`, `batch`), bound to `s`. \throws as plan_1d.
  static cufft_plan plan_many(const stream& s, int rank, int* n, int* inembed, int istride,
                              int idist, int* onembed, int ostride, int odist, cufftType type,
                              int batch) {
    return cufft_plan(s, [&](cufftHandle p, std::size_t* bytes) {
      return cufftMakePlanMany(p, rank, n, inembed, istride, idist, onembed, ostride, odist, type,
                               batch, bytes);
    });
  }
  //! Takes over `other`'s plan; `other` is left empty.
  cufft_plan(cufft_plan&& other) noexcept : plan_(other.plan_), work_(std::move(other.work_)) {
    other.plan_ = 0;
  }
  cufft_plan(const cufft_plan&) = delete;
  cufft_plan& operator=(const cufft_plan&) = delete;
  cufft_plan& operator=(cufft_plan&&) = delete;
  //! Destroys the plan (`cufftDestroy`); the work area stays while a graph holds it. Never throws.
  ~cufft_plan() {
    if (plan_ != 0) (void)cufftDestroy(plan_);
  }

  //! Makes the plan enqueue on `s` (`cufftSetStream`) and keeps the work area alive with the graph
  //! when `s` is capturing. \throws library_error when cuFFT refuses; as workspace::keep_with.
  void bind(const stream& s) {
    check_cufft(cufftSetStream(plan_, s.get()), "cufftSetStream");
    work_.keep_with(s);
  }
  //! A complex-to-complex transform on `s` (`cufftExecC2C`; `direction` CUFFT_FORWARD or
  //! CUFFT_INVERSE).
  //! \throws library_error when cuFFT refuses; as bind.
  void exec_c2c(const stream& s, cufftComplex* in, cufftComplex* out, int direction) {
    bind(s);
    const capture_scope named(s, "cufftExecC2C");
    check_cufft(cufftExecC2C(plan_, in, out, direction), "cufftExecC2C");
  }
  //! A real-to-complex transform on `s` (`cufftExecR2C`). \throws as exec_c2c.
  void exec_r2c(const stream& s, cufftReal* in, cufftComplex* out) {
    bind(s);
    const capture_scope named(s, "cufftExecR2C");
    check_cufft(cufftExecR2C(plan_, in, out), "cufftExecR2C");
  }
  //! A complex-to-real transform on `s` (`cufftExecC2R`). \throws as exec_c2c.
  void exec_c2r(const stream& s, cufftComplex* in, cufftReal* out) {
    bind(s);
    const capture_scope named(s, "cufftExecC2R");
    check_cufft(cufftExecC2R(plan_, in, out), "cufftExecC2R");
  }
  //! The cuFFT plan.
  [[nodiscard]] cufftHandle get() const noexcept { return plan_; }
  //! The work area.
  [[nodiscard]] const workspace& scratch() const noexcept { return work_; }

private:
  // cufftCreate, auto-allocation off, `make` (a cufftMakePlan* call giving the work size), the work
  // area allocated and set, the stream bound.
  template <class Make>
  cufft_plan(const stream& s, Make make) {
    check_cufft(cufftCreate(&plan_), "cufftCreate");
    try {
      check_cufft(cufftSetAutoAllocation(plan_, 0), "cufftSetAutoAllocation");
      std::size_t bytes = 0;
      check_cufft(make(plan_, &bytes), "cufftMakePlan");
      work_ = workspace(bytes > 0 ? bytes : 1);
      check_cufft(cufftSetWorkArea(plan_, work_.data()), "cufftSetWorkArea");
      bind(s);
    } catch (...) {
      (void)cufftDestroy(plan_);
      throw;
    }
  }

  cufftHandle plan_ = 0;
  workspace work_;
};

} // namespace conveyor::libraries
