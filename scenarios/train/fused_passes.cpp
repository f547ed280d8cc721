//! \file fused_passes.cpp
//! Row-major matrices mapped onto cuBLASLt's column-major convention as in mlp.cpp: a row-major R x C matrix is a
//! column-major C x R matrix with leading dimension C.

#include "train/fused_passes.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace conveyor::train {

namespace {

using libraries::check_cublaslt;

//! The shape of D (m x n) = op(A) (m x k) · op(B) (k x n), column-major, with each operand's leading dimension.
struct gemm_shape {
  cublasOperation_t op_a;
  cublasOperation_t op_b;
  int m, n, k;
  int lda, ldb, ldd;
};

//! The epilogue and the vectors it reads or writes (a bias, or the bias gradient for BGRADB; the ReLU mask).
struct gemm_epilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  const void* mask = nullptr;
  std::int64_t mask_ld = 0;
};

void require_aligned(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 256 != 0)
    throw std::logic_error(fmt::format("fused_passes: {} at {} is not aligned to 256 bytes, the alignment cuBLASLt's "
                                       "algorithms were chosen for",
                                       what, p));
}

template <class T>
void set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute, const T& value, const char* call) {
  check_cublaslt(cublasLtMatmulDescSetAttribute(op, attribute, &value, sizeof value), call);
}

cublasLtMatrixLayout_t make_layout(int rows, int cols, int ld) {
  cublasLtMatrixLayout_t l = nullptr;
  check_cublaslt(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, static_cast<std::uint64_t>(rows),
                                            static_cast<std::uint64_t>(cols), ld),
                 "cublasLtMatrixLayoutCreate");
  return l;
}

} // namespace

struct fused_passes::product {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string name;

  product(const libraries::cublaslt_handle& lt, const gemm_shape& s, const gemm_epilogue& e, std::string what) :
      name(std::move(what)) {
    try {
      describe(s, e);
      algo = choose(lt);
    } catch (...) {
      release();
      throw;
    }
  }
  product(const product&) = delete;
  product& operator=(const product&) = delete;
  ~product() { release(); }

  void describe(const gemm_shape& s, const gemm_epilogue& e) {
    check_cublaslt(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    set(op, CUBLASLT_MATMUL_DESC_TRANSA, s.op_a, "cublasLtMatmulDescSetAttribute (TRANSA)");
    set(op, CUBLASLT_MATMUL_DESC_TRANSB, s.op_b, "cublasLtMatmulDescSetAttribute (TRANSB)");
    set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, e.kind, "cublasLtMatmulDescSetAttribute (EPILOGUE)");
    if (e.bias != nullptr) set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, e.bias, "cublasLtMatmulDescSetAttribute (BIAS)");
    if (e.mask != nullptr) {
      set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, e.mask, "cublasLtMatmulDescSetAttribute (AUX_POINTER)");
      set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, e.mask_ld, "cublasLtMatmulDescSetAttribute (AUX_LD)");
    }
    const bool ta = s.op_a != CUBLAS_OP_N;
    const bool tb = s.op_b != CUBLAS_OP_N;
    a = make_layout(ta ? s.k : s.m, ta ? s.m : s.k, s.lda);
    b = make_layout(tb ? s.n : s.k, tb ? s.k : s.n, s.ldb);
    d = make_layout(s.m, s.n, s.ldd);
  }

  //! The first algorithm of cuBLASLt's heuristic within the workspace, without split-k (`lt` forbids it), naming
  //! this product when there is none.
  [[nodiscard]] cublasLtMatmulAlgo_t choose(const libraries::cublaslt_handle& lt) const {
    try {
      return lt.algorithm(op, a, b, d, d);
    } catch (const libraries::library_error& e) {
      if (e.status() != static_cast<int>(CUBLAS_STATUS_NOT_SUPPORTED)) throw;
      throw libraries::library_error(e.library(), e.call(), e.status(),
                                     fmt::format("no algorithm without split-k fits the workspace for {}", name));
    }
  }

  void release() noexcept {
    if (d != nullptr) (void)cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) (void)cublasLtMatmulDescDestroy(op);
    d = b = a = nullptr;
    op = nullptr;
  }

  //! D = op(A) op(B) with the epilogue, on ctx.stream.
  void run(const libraries::cublaslt_handle& lt, const float* a_ptr, const float* b_ptr, float* d_ptr,
           const launch_ctx& ctx) const {
    constexpr float one = 1.0F;
    constexpr float zero = 0.0F;
    lt.matmul(conveyor::stream::adopt(ctx.stream), op, &one, a_ptr, a, b_ptr, b, &zero, d_ptr, d, d_ptr, d, algo);
    ctx.after(name);
  }
};

namespace {

//! Layer l's forward product: Zᵀ (out x rows) = W (op T of the column-major in x out view) · Xᵀ (in x rows).
gemm_shape forward_shape(int l, int rows) {
  const int in = layer_widths[l];
  const int out = layer_widths[l + 1];
  return {CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, in, in, out};
}

//! Layer l's weight gradient: dWᵀ (in x out) = Xᵀ (in x rows) · dZ (op T of the column-major out x rows view).
gemm_shape weight_grad_shape(int l, int rows) {
  const int in = layer_widths[l];
  const int out = layer_widths[l + 1];
  return {CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, in, out, in};
}

//! The gradient into layer l's input: dXᵀ (in x rows) = Wᵀ (the column-major in x out view) · dZᵀ (out x rows).
gemm_shape input_grad_shape(int l, int rows) {
  const int in = layer_widths[l];
  const int out = layer_widths[l + 1];
  return {CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, in, out, in};
}

} // namespace

fused_passes::fused_passes(mlp& model, activations& act, int rows) :
    rows_(rows),
    model_(model),
    act_(act),
    lt_(std::size_t{4} << 20, libraries::split_k::forbidden) {
  if (rows < 1 || rows > act.capacity())
    throw std::invalid_argument(fmt::format("fused_passes: rows {} outside [1, {}]", rows, act.capacity()));
  float* grads = model.gradient_buffer();
  const float* buffers[] = {model.parameter_buffer(), grads,           act.a1.data(),  act.a2.data(), act.logits.data(),
                            act.d_logits.data(),      act.d_a1.data(), act.d_a2.data()};
  for (const float* p : buffers) require_aligned(p, "a parameter, gradient or activation buffer");
  for (int l = 0; l + 1 < num_layers; ++l) {
    const int out = layer_widths[l + 1];
    if (out % 128 != 0) throw std::logic_error("fused_passes: a ReLU mask's rows must be a multiple of 128");
    masks_[l] = device_buffer<std::uint8_t>(static_cast<std::size_t>(rows) * out / 8);
  }
  for (int l = 0; l < num_layers; ++l) {
    const bool relu = l + 1 < num_layers;
    gemm_epilogue fwd{relu ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS, model.biases(l)};
    if (relu) {
      fwd.mask = masks_[l].data();
      fwd.mask_ld = layer_widths[l + 1];
    }
    forward_[l] = std::make_unique<product>(lt_, forward_shape(l, rows), fwd,
                                            fmt::format("cublasLtMatmul (forward, layer {})", l + 1));
    const gemm_epilogue bgrad{CUBLASLT_EPILOGUE_BGRADB, grads + mlp::layout.bias_offset[l]};
    weight_grad_[l] =
        std::make_unique<product>(lt_, weight_grad_shape(l, rows), bgrad,
                                  fmt::format("cublasLtMatmul (weight and bias gradient, layer {})", l + 1));
  }
  for (int l = 0; l + 1 < num_layers; ++l) {
    const gemm_epilogue drelu{CUBLASLT_EPILOGUE_DRELU, nullptr, masks_[l].data(), layer_widths[l + 1]};
    input_grad_[l] = std::make_unique<product>(lt_, input_grad_shape(l + 1, rows), drelu,
                                               fmt::format("cublasLtMatmul (gradient into layer {})", l + 1));
  }
}

fused_passes::~fused_passes() = default;

void fused_passes::forward(const float* x, const launch_ctx& ctx) const {
  require_aligned(x, "the input rows");
  const float* in = x;
  float* outs[num_layers] = {act_.a1.data(), act_.a2.data(), act_.logits.data()};
  for (int l = 0; l < num_layers; ++l) {
    forward_[l]->run(lt_, model_.weights(l), in, outs[l], ctx);
    in = outs[l];
  }
}

void fused_passes::backward(const float* x, const launch_ctx& ctx) const {
  require_aligned(x, "the input rows");
  const float* inputs[num_layers] = {x, act_.a1.data(), act_.a2.data()};
  float* deltas[num_layers] = {act_.d_a1.data(), act_.d_a2.data(), act_.d_logits.data()};
  float* grads = model_.gradient_buffer();
  for (int l = num_layers - 1; l >= 0; --l) {
    weight_grad_[l]->run(lt_, inputs[l], deltas[l], grads + mlp::layout.weight_offset[l], ctx);
    if (l > 0) input_grad_[l - 1]->run(lt_, model_.weights(l), deltas[l], deltas[l - 1], ctx);
  }
}

} // namespace conveyor::train
