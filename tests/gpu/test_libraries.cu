// GPU tests of the library adapters (conveyor/libraries): cuBLAS, cuBLASLt, cuSPARSE, cuFFT, CUB and Thrust, each
// captured into a graph, into a WHILE node's body and through graphed, against the same calls run eagerly on a copy of
// the same random data (integers bitwise; floats within 1e-5 relative). Each step feeds the next (accumulating or
// perturbing its data), so every replay and loop iteration shows. A captured step holds no allocation node (what a
// body refuses); a step without the adapter's workspace allocates in the capture, which the doctor names. Each test
// skips without a CUDA device.
#include "gpu/gpu_test_util.hpp"
#include "gpu/test_kernels.cuh"
#include "support/gpu.hpp"

#include <conveyor/conveyor.hpp>
#include <conveyor/libraries/cub.cuh>
#include <conveyor/libraries/cublas.hpp>
#include <conveyor/libraries/cublaslt.hpp>
#include <conveyor/libraries/cufft.hpp>
#include <conveyor/libraries/cusparse.hpp>
#include <conveyor/profile/doctor.hpp>

#include "define/stream_watch.hpp" // stream_watch_unavailable

#include <cub/device/device_reduce.cuh>
#include <thrust/execution_policy.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/sort.h>

#include <gtest/gtest.h>

#include <iostream>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace lib = conveyor::libraries;
using conveyor::test::all_equal;
using conveyor::test::all_near;
using conveyor::test::device_array;
using conveyor::test::random_floats;
using conveyor::test::random_ints;
using conveyor::test::kernels::count_up;
using conveyor::test::kernels::set_below_limit;

constexpr int loop_iterations = 3;

// x[i] *= s
__global__ void scale_complex(int n, float s, cufftComplex* x) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    x[i].x *= s;
    x[i].y *= s;
  }
}
// in[i] = (in[i] + *total + i) mod 1000
__global__ void perturb_by_total(int n, int* in, const int* total) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) in[i] = (in[i] + *total + i) % 1000;
}
// keys[i] = (keys[i] * 7 + i) mod 10007
__global__ void perturb_keys(int n, int* keys) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) keys[i] = (keys[i] * 7 + i) % 10007;
}

std::size_t allocation_nodes(const conveyor::graph& g) {
  std::size_t count = 0;
  for (const auto& n : g.nodes()) count += n.kind() == conveyor::node_kind::mem_alloc ? 1 : 0;
  return count;
}

// ---- the three ways, for any case -----------------------------------------------------------------------------------
// A case holds what the library needs (handles, plans, made before any capture) and gives `data` (its buffers, from
// one seed), `step(stream, data)` (one library step, enqueued) and `check(graph data, eager data)`.

template <class Case>
void captured_into_a_graph(Case& c) {
  conveyor::stream s;
  typename Case::data graphed_data(c);
  typename Case::data eager_data(c);
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) { c.step(cs, graphed_data); });
  EXPECT_EQ(allocation_nodes(g), 0U) << "the library allocated inside the capture";
  auto exec = conveyor::instantiate(g);
  for (int k = 0; k < 2; ++k) {
    exec.launch(s);
    c.step(s, eager_data);
  }
  s.synchronize();
  c.check(graphed_data, eager_data);
}

template <class Case>
void captured_into_a_while_body(Case& c) {
  conveyor::stream s;
  typename Case::data graphed_data(c);
  typename Case::data eager_data(c);
  device_array<int> counter(1);
  device_array<int> limit(std::vector<int>{loop_iterations});
  conveyor::graph g;
  const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  const auto zero = g.memset(counter.get(), 0, 1);
  const auto start = g.kernel({zero}, {dim3(1), dim3(1)}, set_below_limit, cond.handle, counter.get(), limit.get());
  auto loop = conveyor::add_conditional(g, {start}, conveyor::conditional_kind::while_loop, cond);
  (void)conveyor::capture_into(loop.bodies[0], s, [&](const conveyor::stream& cs) {
    c.step(cs, graphed_data);
    count_up<<<1, 1, 0, cs.get()>>>(cond.handle, counter.get(), limit.get());
    conveyor::check_launch("count_up");
  });
  auto exec = conveyor::instantiate(g); // a body holding an allocation node would fail here
  exec.launch(s);
  for (int k = 0; k < loop_iterations; ++k) c.step(s, eager_data);
  s.synchronize();
  EXPECT_EQ(counter.download().at(0), loop_iterations);
  c.check(graphed_data, eager_data);
}

template <class Case>
void through_graphed(Case& c) {
  conveyor::stream s;
  typename Case::data graphed_data(c);
  typename Case::data eager_data(c);
  conveyor::graphed step([&](const conveyor::stream& cs) { c.step(cs, graphed_data); });
  for (int k = 0; k < 3; ++k) { // a warm-up, a capture, a replay
    step(s);
    c.step(s, eager_data);
  }
  s.synchronize();
  EXPECT_EQ(step.statistics().captures, 1U) << step.report();
  EXPECT_EQ(step.statistics().replays, 2U) << step.report();
  c.check(graphed_data, eager_data);
}

// ---- cuBLAS: C += 0.5 A B (cublasSgemm) -----------------------------------------------------------------------------

struct cublas_case {
  static constexpr int n = 128;
  conveyor::stream setup;
  lib::cublas_handle handle{setup};
  struct data {
    device_array<float> a, b, c;
    explicit data(const cublas_case&) :
        a(random_floats(n * n, 101)),
        b(random_floats(n * n, 102)),
        c(random_floats(n * n, 103)) {}
  };
  void step(const conveyor::stream& s, data& d) {
    handle.bind(s);
    const float alpha = 0.5F;
    const float beta = 1.0F;
    lib::check_cublas(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, d.a.get(), n, d.b.get(), n,
                                  &beta, d.c.get(), n),
                      "cublasSgemm");
  }
  void check(const data& got, const data& want) { EXPECT_TRUE(all_near(got.c.download(), want.c.download())); }
};

TEST(Libraries, CublasCapturedIntoAGraph) {
  CONVEYOR_REQUIRE_GPU();
  cublas_case c;
  captured_into_a_graph(c);
}
TEST(Libraries, CublasInAWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  cublas_case c;
  captured_into_a_while_body(c);
}
TEST(Libraries, CublasThroughGraphed) {
  CONVEYOR_REQUIRE_GPU();
  cublas_case c;
  through_graphed(c);
}

// A cuBLAS handle bound once to another stream (issue 39, item 1): the GEMM runs there, once, at capture time, and
// a watched capture refuses, naming cuBLAS's kernel and the stream; bound to the capturing stream, the capture is
// accepted and its replay is the eager GEMM's.
TEST(StreamWatch, ACublasHandleBoundToAnotherStreamIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  const std::string why = conveyor::detail::stream_watch_unavailable();
  if (!why.empty()) GTEST_SKIP() << "the stream watch cannot run here: " << why;
  cublas_case c;
  cublas_case::data eager(c), captured(c);
  conveyor::stream s, other;
  c.step(s, eager);
  s.synchronize();
  c.handle.bind(other); // bound once to another stream
  conveyor::capture_options watched;
  watched.watch_streams = conveyor::stream_watch::on;
  std::string text;
  try {
    (void)conveyor::capture(
        s,
        [&](const conveyor::stream&) {
          const float alpha = 0.5F, beta = 1.0F;
          lib::check_cublas(cublasSgemm(c.handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, cublas_case::n, cublas_case::n,
                                        cublas_case::n, &alpha, captured.a.get(), cublas_case::n, captured.b.get(),
                                        cublas_case::n, &beta, captured.c.get(), cublas_case::n),
                            "cublasSgemm");
        },
        watched);
    ADD_FAILURE() << "the GEMM on the handle's other stream was not refused";
  } catch (const conveyor::cuda_error& e) {
    text = e.what();
  }
  c.handle.bind(s);
  std::printf("stream watch (cuBLAS): %s\n", text.c_str());
  EXPECT_NE(text.find("cuLaunchKernel"), std::string::npos) << text;
  EXPECT_NE(text.find("gemm"), std::string::npos) << text;
  other.synchronize();
  cublas_case::data replayed(c);
  auto g = conveyor::capture(
      s, [&](const conveyor::stream& cs) { c.step(cs, replayed); }, watched);
  auto exec = conveyor::instantiate(g);
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(all_equal(replayed.c.download(), eager.c.download()));
}

// ---- cuBLASLt: D = A B + C, then C = D (cublasLtMatmul with the heuristic's algorithm) ------------------------------

struct cublaslt_case {
  static constexpr int n = 96;
  lib::cublaslt_handle handle;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulAlgo_t algo{};
  explicit cublaslt_case(lib::split_k splits = lib::split_k::allowed) : handle(std::size_t{32} << 20, splits) {
    lib::check_cublaslt(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    lib::check_cublaslt(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, n, n, n), "cublasLtMatrixLayoutCreate");
    algo = handle.algorithm(op, layout, layout, layout, layout);
  }
  cublaslt_case(const cublaslt_case&) = delete;
  cublaslt_case& operator=(const cublaslt_case&) = delete;
  ~cublaslt_case() {
    (void)cublasLtMatrixLayoutDestroy(layout);
    (void)cublasLtMatmulDescDestroy(op);
  }
  struct data {
    device_array<float> a, b, c, d;
    explicit data(const cublaslt_case&) :
        a(random_floats(n * n, 201, -0.1F, 0.1F)),
        b(random_floats(n * n, 202)),
        c(random_floats(n * n, 203)),
        d(n * n) {}
  };
  void step(const conveyor::stream& s, data& x) {
    const float alpha = 1.0F;
    const float beta = 1.0F;
    handle.matmul(s, op, &alpha, x.a.get(), layout, x.b.get(), layout, &beta, x.c.get(), layout, x.d.get(), layout,
                  algo);
    CONVEYOR_CHECK(cudaMemcpyAsync(x.c.get(), x.d.get(), x.c.bytes(), cudaMemcpyDeviceToDevice, s.get()));
  }
  void check(const data& got, const data& want) { EXPECT_TRUE(all_near(got.c.download(), want.c.download())); }
};

TEST(Libraries, CublasLtCapturedIntoAGraph) {
  CONVEYOR_REQUIRE_GPU();
  cublaslt_case c;
  captured_into_a_graph(c);
}
TEST(Libraries, CublasLtInAWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  cublaslt_case c;
  captured_into_a_while_body(c);
}
TEST(Libraries, CublasLtThroughGraphed) {
  CONVEYOR_REQUIRE_GPU();
  cublaslt_case c;
  through_graphed(c);
}

// split_k::forbidden: the heuristic's algorithm does not split k (its reduction scheme is NONE), and the case still
// replays as it runs eagerly, captured and through graphed.
TEST(Libraries, CublasLtWithoutSplitKChoosesNoReduction) {
  CONVEYOR_REQUIRE_GPU();
  cublaslt_case c(lib::split_k::forbidden);
  EXPECT_EQ(c.handle.splits(), lib::split_k::forbidden);
  std::uint32_t scheme = 99;
  std::size_t written = 0;
  lib::check_cublaslt(cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                           sizeof scheme, &written),
                      "cublasLtMatmulAlgoConfigGetAttribute");
  EXPECT_EQ(scheme, static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE));
  captured_into_a_graph(c);
  through_graphed(c);
}

// The reduction scheme of the heuristic's algorithm for a product whose k is far larger than m and n (where split-k
// pays, so the heuristic tends to choose it), through a handle with `splits`.
std::uint32_t tall_k_scheme(lib::split_k splits) {
  lib::cublaslt_handle handle(std::size_t{32} << 20, splits);
  struct descriptors { // destroyed on every path
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    ~descriptors() {
      for (auto* l : {d, b, a})
        if (l != nullptr) (void)cublasLtMatrixLayoutDestroy(l);
      if (op != nullptr) (void)cublasLtMatmulDescDestroy(op);
    }
  } x;
  lib::check_cublaslt(cublasLtMatmulDescCreate(&x.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  lib::check_cublaslt(cublasLtMatrixLayoutCreate(&x.a, CUDA_R_32F, 32, 65536, 32), "cublasLtMatrixLayoutCreate");
  lib::check_cublaslt(cublasLtMatrixLayoutCreate(&x.b, CUDA_R_32F, 65536, 32, 65536), "cublasLtMatrixLayoutCreate");
  lib::check_cublaslt(cublasLtMatrixLayoutCreate(&x.d, CUDA_R_32F, 32, 32, 32), "cublasLtMatrixLayoutCreate");
  const cublasLtMatmulAlgo_t algo = handle.algorithm(x.op, x.a, x.b, x.d, x.d);
  std::uint32_t scheme = 99;
  std::size_t written = 0;
  lib::check_cublaslt(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                           sizeof scheme, &written),
                      "cublasLtMatmulAlgoConfigGetAttribute");
  return scheme;
}

// Where the heuristic splits k by default (a 32 x 32 product over k = 65536), split_k::forbidden still gets an
// algorithm that does not; where it does not split by default, the case says so and checks the forbidden side alone.
TEST(Libraries, CublasLtWithoutSplitKHoldsWhereTheHeuristicWouldSplit) {
  CONVEYOR_REQUIRE_GPU();
  const std::uint32_t allowed = tall_k_scheme(lib::split_k::allowed);
  std::cout << "tall-k product: reduction scheme " << allowed << " allowed, "
            << (allowed != CUBLASLT_REDUCTION_SCHEME_NONE ? "split-k" : "no split-k") << " by default\n";
  EXPECT_EQ(tall_k_scheme(lib::split_k::forbidden), static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE));
}

// ---- cuSPARSE: y = A x + y (cusparseSpMV, CSR, deterministic ALG2) --------------------------------------------------

struct cusparse_case {
  static constexpr int rows = 2000;
  static constexpr int per_row = 8;
  conveyor::stream setup;
  lib::cusparse_handle handle{setup};
  std::vector<int> row_ptr, col_idx;
  std::vector<float> values;
  cusparse_case() {
    const auto cols = random_ints<int>(rows * per_row, 301, 0, rows - 1);
    values = random_floats(rows * per_row, 302, -0.01F, 0.01F);
    for (int r = 0; r <= rows; ++r) row_ptr.push_back(r * per_row);
    for (int r = 0; r < rows; ++r) // distinct, ascending columns in each row
      for (int k = 0; k < per_row; ++k) col_idx.push_back((cols[r * per_row] + k * (rows / per_row)) % rows);
    for (int r = 0; r < rows; ++r) std::sort(col_idx.begin() + r * per_row, col_idx.begin() + (r + 1) * per_row);
  }
  struct data {
    device_array<int> rp, ci;
    device_array<float> v, x, y;
    cusparseSpMatDescr_t a = nullptr;
    cusparseDnVecDescr_t xd = nullptr, yd = nullptr;
    std::unique_ptr<lib::cusparse_spmv<float>> spmv;
    explicit data(cusparse_case& c) :
        rp(c.row_ptr),
        ci(c.col_idx),
        v(c.values),
        x(random_floats(rows, 303)),
        y(random_floats(rows, 304)) {
      lib::check_cusparse(cusparseCreateCsr(&a, rows, rows, rows * per_row, rp.get(), ci.get(), v.get(),
                                            CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                            CUDA_R_32F),
                          "cusparseCreateCsr");
      lib::check_cusparse(cusparseCreateDnVec(&xd, rows, x.get(), CUDA_R_32F), "cusparseCreateDnVec");
      lib::check_cusparse(cusparseCreateDnVec(&yd, rows, y.get(), CUDA_R_32F), "cusparseCreateDnVec");
      spmv = std::make_unique<lib::cusparse_spmv<float>>(c.handle, c.setup, CUSPARSE_OPERATION_NON_TRANSPOSE, 1.0F, a,
                                                         xd, 1.0F, yd);
    }
    data(const data&) = delete;
    data& operator=(const data&) = delete;
    ~data() {
      spmv.reset();
      (void)cusparseDestroyDnVec(yd);
      (void)cusparseDestroyDnVec(xd);
      (void)cusparseDestroySpMat(a);
    }
  };
  void step(const conveyor::stream& s, data& d) { d.spmv->run(s); }
  void check(const data& got, const data& want) { EXPECT_TRUE(all_near(got.y.download(), want.y.download())); }
};

TEST(Libraries, CusparseCapturedIntoAGraph) {
  CONVEYOR_REQUIRE_GPU();
  cusparse_case c;
  captured_into_a_graph(c);
}
TEST(Libraries, CusparseInAWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  cusparse_case c;
  captured_into_a_while_body(c);
}
TEST(Libraries, CusparseThroughGraphed) {
  CONVEYOR_REQUIRE_GPU();
  cusparse_case c;
  through_graphed(c);
}

// ---- cuFFT: x = IFFT(FFT(x)) / n, in place (cufftExecC2C, a batch of 4 transforms of 256 points) --------------------

struct cufft_case {
  static constexpr int n = 256;
  static constexpr int batch = 4;
  conveyor::stream setup;
  lib::cufft_plan plan = lib::cufft_plan::plan_1d(setup, n, CUFFT_C2C, batch);
  struct data {
    device_array<float> x; // interleaved complex values
    explicit data(const cufft_case&) : x(random_floats(2 * n * batch, 401)) {}
    [[nodiscard]] cufftComplex* get() const { return reinterpret_cast<cufftComplex*>(x.get()); }
  };
  void step(const conveyor::stream& s, data& d) {
    plan.exec_c2c(s, d.get(), d.get(), CUFFT_FORWARD);
    plan.exec_c2c(s, d.get(), d.get(), CUFFT_INVERSE);
    scale_complex<<<(n * batch + 255) / 256, 256, 0, s.get()>>>(n * batch, 1.0F / n, d.get());
    conveyor::check_launch("scale_complex");
  }
  void check(const data& got, const data& want) { EXPECT_TRUE(all_near(got.x.download(), want.x.download())); }
};

TEST(Libraries, CufftCapturedIntoAGraph) {
  CONVEYOR_REQUIRE_GPU();
  cufft_case c;
  captured_into_a_graph(c);
}
TEST(Libraries, CufftInAWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  cufft_case c;
  captured_into_a_while_body(c);
}
TEST(Libraries, CufftThroughGraphed) {
  CONVEYOR_REQUIRE_GPU();
  cufft_case c;
  through_graphed(c);
}

// ---- CUB: total = sum(in), then in = (in + total + i) mod 1000 (cub::DeviceReduce::Sum) -----------------------------

struct cub_case {
  static constexpr int n = 10000;
  struct data {
    device_array<int> in;
    device_array<int> total{1};
    explicit data(const cub_case&) : in(random_ints<int>(n, 501, 0, 999)) {}
  };
  lib::cub_temp temp{[](void* t, std::size_t& bytes) {
    return cub::DeviceReduce::Sum(t, bytes, static_cast<const int*>(nullptr), static_cast<int*>(nullptr), n);
  }};
  void step(const conveyor::stream& s, data& d) {
    temp.run(s, [&](void* t, std::size_t& bytes) {
      return cub::DeviceReduce::Sum(t, bytes, d.in.get(), d.total.get(), n, s.get());
    });
    perturb_by_total<<<(n + 255) / 256, 256, 0, s.get()>>>(n, d.in.get(), d.total.get());
    conveyor::check_launch("perturb_by_total");
  }
  void check(const data& got, const data& want) {
    EXPECT_TRUE(all_equal(got.in.download(), want.in.download()));
    EXPECT_TRUE(all_equal(got.total.download(), want.total.download()));
  }
};

TEST(Libraries, CubCapturedIntoAGraph) {
  CONVEYOR_REQUIRE_GPU();
  cub_case c;
  captured_into_a_graph(c);
}
TEST(Libraries, CubInAWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  cub_case c;
  captured_into_a_while_body(c);
}
TEST(Libraries, CubThroughGraphed) {
  CONVEYOR_REQUIRE_GPU();
  cub_case c;
  through_graphed(c);
}

// ---- Thrust: sort the keys, then keys = (keys * 7 + i) mod 10007 (thrust::sort on a workspace allocator) ------------

struct thrust_case {
  static constexpr int n = 10000;
  lib::thrust_workspace_allocator alloc{std::size_t{16} << 20};
  struct data {
    device_array<int> keys;
    explicit data(const thrust_case&) : keys(random_ints<int>(n, 601, 0, 10006)) {}
  };
  void step(const conveyor::stream& s, data& d) {
    const conveyor::capture_scope named(s, "thrust::sort");
    alloc.reset();
    thrust::sort(thrust::cuda::par_nosync(alloc).on(s.get()), d.keys.get(), d.keys.get() + n);
    alloc.scratch().keep_with(s);
    perturb_keys<<<(n + 255) / 256, 256, 0, s.get()>>>(n, d.keys.get());
    conveyor::check_launch("perturb_keys");
  }
  void check(const data& got, const data& want) { EXPECT_TRUE(all_equal(got.keys.download(), want.keys.download())); }
};

TEST(Libraries, ThrustCapturedIntoAGraph) {
  CONVEYOR_REQUIRE_GPU();
  thrust_case c;
  captured_into_a_graph(c);
}
TEST(Libraries, ThrustInAWhileBody) {
  CONVEYOR_REQUIRE_GPU();
  thrust_case c;
  captured_into_a_while_body(c);
}
TEST(Libraries, ThrustThroughGraphed) {
  CONVEYOR_REQUIRE_GPU();
  thrust_case c;
  through_graphed(c);
}

// ---- a raw stream adopted inside the capture ---------------------------------------------------------------------------

// Code that holds raw cudaStream_t (the train and solve scenarios) adopts the capturing stream inside the captured code
// and hands the adapters that: their bind and run must leave the capture valid (stream::adopt reads the device
// without cudaStreamGetDevice, which would invalidate it), and the replays must equal the same calls run eagerly.
TEST(Libraries, AdaptersTakeARawStreamAdoptedInsideTheCapture) {
  CONVEYOR_REQUIRE_GPU();
  cublas_case blas;
  cusparse_case sparse;
  cublas_case::data blas_graphed(blas), blas_eager(blas);
  cusparse_case::data sparse_graphed(sparse), sparse_eager(sparse);
  conveyor::stream s;
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    const cudaStream_t raw = cs.get();
    blas.step(conveyor::stream::adopt(raw), blas_graphed);
    sparse.step(conveyor::stream::adopt(raw), sparse_graphed);
  });
  EXPECT_EQ(allocation_nodes(g), 0U);
  auto exec = conveyor::instantiate(g);
  for (int k = 0; k < 2; ++k) {
    exec.launch(s);
    blas.step(s, blas_eager);
    sparse.step(s, sparse_eager);
  }
  s.synchronize();
  blas.check(blas_graphed, blas_eager);
  sparse.check(sparse_graphed, sparse_eager);
}

// ---- the doctor names what a capture allocated ----------------------------------------------------------------------

// cudaMallocAsync in a capture is what a library without a workspace does: an allocation node, which the capture_scope
// around the call names and the doctor reports with that name.
TEST(Libraries, DoctorNamesTheCallThatAllocatedInACapture) {
  CONVEYOR_REQUIRE_GPU();
  conveyor::stream s;
  device_array<int> out(1);
  conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    const conveyor::capture_scope named(cs, "scratch_library_call");
    void* scratch = nullptr;
    CONVEYOR_CHECK(cudaMallocAsync(&scratch, std::size_t{1} << 20, cs.get()));
    CONVEYOR_CHECK(cudaMemsetAsync(scratch, 0, std::size_t{1} << 20, cs.get()));
    CONVEYOR_CHECK(cudaMemcpyAsync(out.get(), scratch, sizeof(int), cudaMemcpyDeviceToDevice, cs.get()));
    CONVEYOR_CHECK(cudaFreeAsync(scratch, cs.get()));
  });
  EXPECT_EQ(allocation_nodes(g), 1U);
  const auto d = conveyor::describe(g);
  conveyor::profile::doctor_input in;
  in.name = "allocating";
  in.graph = &d;
  const auto findings = conveyor::profile::diagnose(in);
  const auto it =
      std::find_if(findings.begin(), findings.end(), [](const auto& f) { return f.check == "captured_allocations"; });
  ASSERT_NE(it, findings.end()) << conveyor::profile::to_text(findings, "allocating", true);
  EXPECT_EQ(it->level, conveyor::profile::severity::warning);
  EXPECT_NE(it->evidence.find("made by scratch_library_call ×1"), std::string::npos) << it->evidence;
  EXPECT_EQ(it->nodes.at(0), "scratch_library_call: allocation");
}

} // namespace
