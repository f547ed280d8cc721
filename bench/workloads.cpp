//! \file workloads.cpp
//! The N-kernel step: context, eager enqueue, graph building and capture through Conveyor and raw CUDA.

#include "bench/workloads.hpp"

#include "bench/plan.hpp"

#include <conveyor/define/capture.hpp>
#include <conveyor/error.hpp>

#include <algorithm>
#include <chrono>

namespace conveyor::bench {

namespace {

std::vector<conveyor::event> make_events(std::size_t count) {
  std::vector<conveyor::event> events;
  events.reserve(count);
  for (std::size_t i = 0; i < count; ++i) events.emplace_back(cudaEventDisableTiming);
  return events;
}

std::vector<conveyor::stream> make_lanes(std::size_t count) {
  std::vector<conveyor::stream> lanes;
  lanes.reserve(count);
  for (std::size_t i = 0; i < count; ++i) lanes.emplace_back(cudaStreamNonBlocking);
  return lanes;
}

std::size_t pool_chunks(std::size_t rotation_sets, std::size_t max_nodes, std::size_t l2_bytes) {
  constexpr std::size_t min_pool = std::size_t{64} << 20;
  const std::size_t bytes = std::max({4 * l2_bytes, rotation_sets * max_nodes * chunk_bytes, min_pool});
  return (bytes + chunk_bytes - 1) / chunk_bytes;
}

const conveyor::launch_config kernel_config{dim3(1), dim3(kernel_threads), 0};

// Joins every forked lane back into the main stream, ignoring errors, so that a failed raw capture can end.
void rejoin_quietly(const bench_context& ctx, std::size_t width) noexcept {
  for (std::size_t l = 1; l < width; ++l) {
    if (cudaEventRecord(ctx.capture_join(l), ctx.lane(l).get()) == cudaSuccess)
      (void)cudaStreamWaitEvent(ctx.main_stream().get(), ctx.capture_join(l), 0);
  }
  (void)cudaGetLastError();
}

} // namespace

bench_context::bench_context(std::size_t rotation_sets, std::size_t max_nodes, std::size_t l2_bytes) :
    rotation_sets_(std::max<std::size_t>(1, rotation_sets)),
    chunks_(pool_chunks(rotation_sets_, max_nodes, l2_bytes)),
    lanes_(make_lanes(fork_join_width)),
    eager_fork_(cudaEventDisableTiming),
    eager_joins_(make_events(fork_join_width)),
    capture_fork_(cudaEventDisableTiming),
    capture_joins_(make_events(fork_join_width)) {
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&pool_), chunks_ * chunk_bytes));
  try {
    CONVEYOR_CHECK(cudaMemset(pool_, 0, chunks_ * chunk_bytes));
    CONVEYOR_CHECK(cudaDeviceSynchronize());
  } catch (...) {
    (void)cudaFree(pool_);
    throw;
  }
}

bench_context::~bench_context() {
  release_kept();
  (void)cudaFree(pool_);
}

void bench_context::release_kept() noexcept {
  (void)cudaDeviceSynchronize();
  kept_.clear();
  (void)cudaGetLastError();
}

void bench_context::synchronize() const {
  for (const auto& l : lanes_) l.synchronize();
}

std::vector<float> b_values(std::size_t n, std::span<const std::size_t> changed) {
  std::vector<float> b(n, axpb_b);
  for (std::size_t j : changed)
    if (j < n) b[j] = axpb_b_changed;
  return b;
}

void enqueue_eager(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set) {
  const cudaStream_t main = ctx.main_stream().get();
  if (width > 1) {
    CONVEYOR_CHECK(cudaEventRecord(ctx.eager_fork(), main));
    for (std::size_t l = 1; l < width; ++l) CONVEYOR_CHECK(cudaStreamWaitEvent(ctx.lane(l).get(), ctx.eager_fork(), 0));
  }
  for (std::size_t j = 0; j < n; ++j) launch_axpb(ctx.lane(j % width).get(), ctx.chunk(set, j, n), axpb_a, axpb_b);
  if (width > 1) {
    for (std::size_t l = 1; l < width; ++l) {
      CONVEYOR_CHECK(cudaEventRecord(ctx.eager_join(l), ctx.lane(l).get()));
      CONVEYOR_CHECK(cudaStreamWaitEvent(main, ctx.eager_join(l), 0));
    }
  }
}

conveyor_built build_conveyor(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set,
                              std::span<const float> b) {
  conveyor_built out;
  out.nodes.reserve(n);
  const axpb_fn fn = axpb_kernel();
  for (std::size_t j = 0; j < n; ++j) {
    float* y = ctx.chunk(set, j, n);
    if (j >= width) out.nodes.push_back(out.graph.kernel({out.nodes[j - width]}, kernel_config, fn, y, axpb_a, b[j]));
    else out.nodes.push_back(out.graph.kernel(kernel_config, fn, y, axpb_a, b[j]));
  }
  return out;
}

raw_built build_raw(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set,
                    std::span<const float> b) {
  raw_built out;
  cudaGraph_t g = nullptr;
  CONVEYOR_CHECK(cudaGraphCreate(&g, 0));
  out.graph.reset(g);
  out.nodes.resize(n);
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void*>(axpb_kernel());
  params.gridDim = dim3(1);
  params.blockDim = dim3(kernel_threads);
  params.sharedMemBytes = 0;
  params.extra = nullptr;
  for (std::size_t j = 0; j < n; ++j) {
    float* y = ctx.chunk(set, j, n);
    float a = axpb_a;
    float bj = b[j];
    void* args[] = {&y, &a, &bj};
    params.kernelParams = args;
    const cudaGraphNode_t* dep = j >= width ? &out.nodes[j - width] : nullptr;
    CONVEYOR_CHECK(cudaGraphAddKernelNode(&out.nodes[j], g, dep, dep != nullptr ? 1 : 0, &params));
  }
  return out;
}

double set_b_conveyor(const bench_context& ctx, conveyor::graph_exec& exec, std::span<const conveyor::node> nodes,
                      std::span<const std::size_t> changed, std::size_t n, std::size_t set, float value) {
  const axpb_fn fn = axpb_kernel();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t j : changed) exec.set_kernel_args(nodes[j], fn, ctx.chunk(set, j, n), axpb_a, value);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double set_b_raw(const bench_context& ctx, cudaGraphExec_t exec, std::span<const cudaGraphNode_t> nodes,
                 std::span<const std::size_t> changed, std::size_t n, std::size_t set, float value) {
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void*>(axpb_kernel());
  params.gridDim = dim3(1);
  params.blockDim = dim3(kernel_threads);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t j : changed) {
    float* y = ctx.chunk(set, j, n);
    float a = axpb_a;
    float v = value;
    void* args[] = {&y, &a, &v};
    params.kernelParams = args;
    CONVEYOR_CHECK(cudaGraphExecKernelNodeSetParams(exec, nodes[j], &params));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

raw_graph_exec instantiate_raw(cudaGraph_t g) {
  cudaGraphExec_t exec = nullptr;
  CONVEYOR_CHECK(cudaGraphInstantiate(&exec, g, 0));
  return raw_graph_exec(exec);
}

conveyor::graph capture_conveyor(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set) {
  return conveyor::capture(ctx.main_stream(), [&](const conveyor::stream& s) {
    for (std::size_t l = 1; l < width; ++l) conveyor::fork(s, ctx.lane(l));
    for (std::size_t j = 0; j < n; ++j) launch_axpb(ctx.lane(j % width).get(), ctx.chunk(set, j, n), axpb_a, axpb_b);
    conveyor::check_launch("axpb<<<1, 256>>> (capture)");
    for (std::size_t l = 1; l < width; ++l) conveyor::join(s, ctx.lane(l));
  });
}

raw_graph capture_raw(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set) {
  const cudaStream_t main = ctx.main_stream().get();
  CONVEYOR_CHECK(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal));
  std::size_t forked = 1;
  try {
    if (width > 1) {
      CONVEYOR_CHECK(cudaEventRecord(ctx.capture_fork(), main));
      for (; forked < width; ++forked)
        CONVEYOR_CHECK(cudaStreamWaitEvent(ctx.lane(forked).get(), ctx.capture_fork(), 0));
    }
    for (std::size_t j = 0; j < n; ++j) launch_axpb(ctx.lane(j % width).get(), ctx.chunk(set, j, n), axpb_a, axpb_b);
    conveyor::check_launch("axpb<<<1, 256>>> (raw capture)");
    for (std::size_t l = 1; l < width; ++l) {
      CONVEYOR_CHECK(cudaEventRecord(ctx.capture_join(l), ctx.lane(l).get()));
      CONVEYOR_CHECK(cudaStreamWaitEvent(main, ctx.capture_join(l), 0));
    }
  } catch (...) {
    rejoin_quietly(ctx, forked);
    cudaGraph_t partial = nullptr;
    if (cudaStreamEndCapture(main, &partial) == cudaSuccess && partial != nullptr) (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();
    throw;
  }
  cudaGraph_t g = nullptr;
  CONVEYOR_CHECK(cudaStreamEndCapture(main, &g));
  return raw_graph(g);
}

} // namespace conveyor::bench
