// GPU tests of device-side graph launch (conveyor/execute/device_graph.hpp, device_launch.cuh): a kernel launches a
// device graph fire-and-forget and as a tail launch; the relaunch loop runs exactly K iterations (and stops on a
// device flag); kernel nodes updated from the device (parameter, enabled, grid, batched; from another launch and
// from a predecessor in the same launch) run with the new values; the rule check on real graphs, its agreement with
// CUDA, and the errors. Prints (does not assert) µs per iteration of a K = 10000 relaunch loop of one tiny kernel.
// Built with relocatable device code and cudadevrt (CUDA_SEPARABLE_COMPILATION on this target only).
#include "support/gpu.hpp"
#include "support/moved_from.hpp"

#include <conveyor/conveyor.hpp>
#include <conveyor/execute/device_graph.hpp>
#include <conveyor/execute/device_launch.cuh>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

using conveyor::device_graph_ref;
using conveyor::device_node;
using conveyor::node_kind;
using conveyor::test::device_array;
namespace device = conveyor::device;

const conveyor::launch_config one_thread{dim3(1), dim3(1)};

// ---- kernels -----------------------------------------------------------------------------------------------------

__global__ void store(int* out, int value) { *out = value; }

__global__ void add_one(unsigned* counter) { *counter += 1; }

//! out[blockIdx.x] = value: the grid shows in how many elements are written.
__global__ void fill(int* out, int value) {
  if (threadIdx.x == 0) out[blockIdx.x] = value;
}

//! y = 2 x
__global__ void twice(const int* x, int* y) { *y = 2 * *x; }

//! Launches `g` from the device; stores CUDA's result in *status.
__global__ void launch_child(device_graph_ref g, device::launch_mode mode, int* status) {
  *status = static_cast<int>(device::launch_graph(g, mode));
}

//! value -= 1; flag = (value > 0); iterations += 1.
__global__ void count_down(int* value, int* flag, unsigned* iterations) {
  *value -= 1;
  *flag = *value > 0 ? 1 : 0;
  *iterations += 1;
}

//! Sets parameter `offset` of `n` to `value` from the device; stores CUDA's result.
__global__ void update_param(device_node n, std::size_t offset, int value, int* status) {
  *status = static_cast<int>(device::set_param(n, offset, value));
}

//! Sets parameter `offset` of `n` to the value read from device memory (a predecessor updating its successor).
__global__ void update_param_from(device_node n, std::size_t offset, const int* value, int* status) {
  *status = static_cast<int>(device::set_param(n, offset, *value));
  __threadfence();
}

__global__ void update_enabled(device_node n, bool enabled, int* status) {
  *status = static_cast<int>(device::set_enabled(n, enabled));
}

//! Enables `n` and sets its grid to `blocks` in one batch (cudaGraphKernelNodeUpdatesApply).
__global__ void update_enabled_and_grid(device_node n, unsigned blocks, int* status) {
  // cudaGraphKernelNodeUpdate has no default constructor (a union holding a dim3): zeroed storage instead.
  alignas(cudaGraphKernelNodeUpdate) unsigned char raw[2 * sizeof(cudaGraphKernelNodeUpdate)] = {};
  auto* updates = reinterpret_cast<cudaGraphKernelNodeUpdate*>(raw);
  updates[0].node = n.handle;
  updates[0].field = cudaGraphKernelNodeFieldEnabled;
  updates[0].updateData.isEnabled = 1;
  updates[1].node = n.handle;
  updates[1].field = cudaGraphKernelNodeFieldGridDim;
  updates[1].updateData.gridDim = dim3(blocks);
  *status = static_cast<int>(device::apply_updates(updates, 2));
}

__global__ void update_grid(device_node n, unsigned blocks, int* status) {
  *status = static_cast<int>(device::set_grid_dim(n, dim3(blocks)));
}

//! A kernel using CUDA dynamic parallelism (launches a kernel from the device): refused in a device graph.
__global__ void launches_a_kernel(unsigned* counter) { add_one<<<1, 1, 0, cudaStreamFireAndForget>>>(counter); }

//! A relaunch condition that also counts every run: the loop of one tiny kernel (the controller alone).
struct count_runs {
  device::count_to loop;
  unsigned* runs = nullptr;
  __device__ bool operator()() const {
    *runs += 1;
    return loop();
  }
};

// ---- helpers -----------------------------------------------------------------------------------------------------

//! Skips when the driver is older than CUDA `version` (12040 = 12.4).
#define REQUIRE_DRIVER(version)                                                                                        \
  do {                                                                                                                 \
    int driver_ = 0;                                                                                                   \
    CONVEYOR_CHECK(cudaDriverGetVersion(&driver_));                                                                    \
    if (driver_ < (version)) GTEST_SKIP() << "the driver supports CUDA " << driver_ << "; this needs " << (version);   \
  } while (0)

template <class T>
T read_one(const device_array<T>& a) {
  return a.download().at(0);
}

template <class T>
void write_one(device_array<T>& a, T v) {
  a.upload(std::vector<T>{v});
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

//! True when CUDA instantiates `g` for device launch (raw cudaGraphInstantiateWithFlags, no Conveyor check).
bool cuda_accepts_for_device_launch(const conveyor::graph& g) {
  cudaGraphExec_t exec = nullptr;
  const cudaError_t rc = cudaGraphInstantiateWithFlags(&exec, g.get(), cudaGraphInstantiateFlagDeviceLaunch);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  CONVEYOR_CHECK(cudaGraphExecDestroy(exec));
  return true;
}

// ---- launch from a kernel ----------------------------------------------------------------------------------------

TEST(DeviceLaunch, FireAndForgetFromAKernelRunsTheDeviceGraph) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(1);
  device_array<int> status(1);
  write_one(out, -1);
  write_one(status, -1);
  conveyor::stream s;

  conveyor::graph child;
  const auto store_node = child.kernel(one_thread, store, out.get(), 42).label("store 42");
  auto child_exec = conveyor::instantiate_for_device(child, s);
  EXPECT_TRUE(has_flag(child_exec.exec().flags(), conveyor::instantiate_flags::device_launch));

  conveyor::graph parent; // a host graph: device launches must come from a kernel in a graph
  (void)parent.kernel(one_thread, launch_child, child_exec.ref(), device::launch_mode::fire_and_forget, status.get());
  auto parent_exec = conveyor::instantiate(parent);
  parent_exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(status), 0) << cudaGetErrorName(static_cast<cudaError_t>(read_one(status)));
  EXPECT_EQ(read_one(out), 42);

  // Again, with another value set from the host on the child (host-side change, then upload).
  child_exec.exec().set_kernel_args(store_node, store, out.get(), 43);
  child_exec.upload(s);
  parent_exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(status), 0);
  EXPECT_EQ(read_one(out), 43);
}

// The handle kernels hold stays valid across every update: an update in place keeps it; one that would re-instantiate
// is refused with the reason and changes nothing (the kernel still launches the graph it had).
TEST(DeviceLaunch, TheHandleKernelsHoldIsNeverLeftStaleByAnUpdate) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(1);
  device_array<int> status(1);
  write_one(out, -1);
  conveyor::stream s;
  conveyor::graph child;
  (void)child.kernel(one_thread, store, out.get(), 1);
  auto d = conveyor::instantiate_for_device(child, s);
  const cudaGraphExec_t handle = d.get();
  conveyor::graph parent;
  (void)parent.kernel(one_thread, launch_child, d.ref(), device::launch_mode::fire_and_forget, status.get());
  auto parent_exec = conveyor::instantiate(parent);
  // In place: same topology, another value.
  conveyor::graph same;
  (void)same.kernel(one_thread, store, out.get(), 2);
  const auto r = d.exec().update_incremental(same);
  EXPECT_EQ(r.method, conveyor::update_method::per_node) << r.reason();
  EXPECT_EQ(d.get(), handle);
  d.upload(s);
  parent_exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(out), 2);
  // Another topology: re-instantiation would replace the handle; refused, for both calls that would do it.
  conveyor::graph bigger;
  auto first = bigger.kernel(one_thread, store, out.get(), 3);
  (void)bigger.kernel({first}, one_thread, store, out.get(), 4);
  for (int call = 0; call < 2; ++call) {
    try {
      (void)(call == 0 ? d.exec().update_incremental(bigger) : d.exec().update_or_reinstantiate(bigger));
      ADD_FAILURE() << "an update that re-instantiates a device graph was accepted";
    } catch (const std::logic_error& e) {
      EXPECT_TRUE(contains(e.what(), "device_graph_ref")) << e.what();
      EXPECT_TRUE(contains(e.what(), "Nothing was changed")) << e.what();
    }
    EXPECT_EQ(d.get(), handle);
  }
  parent_exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(status), 0);
  EXPECT_EQ(read_one(out), 2);
}

TEST(DeviceLaunch, TailLaunchRunsAfterTheWholeLaunchingGraph) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> x(1);
  device_array<int> y(1);
  device_array<int> status(1);
  write_one(x, 1);
  write_one(y, 0);
  conveyor::stream s;

  conveyor::graph tail;
  (void)tail.kernel(one_thread, twice, static_cast<const int*>(x.get()), y.get());
  const auto tail_exec = conveyor::instantiate_for_device(tail, s);

  // The launcher enqueues the tail launch first; a later node of the same graph then sets x = 7. A tail launch
  // runs only once the launching graph has completed, so the tail graph reads 7.
  conveyor::graph parent;
  const auto launch = parent.kernel(one_thread, launch_child, tail_exec.ref(), device::launch_mode::tail, status.get());
  (void)parent.kernel({launch}, one_thread, store, x.get(), 7);
  auto parent_exec = conveyor::instantiate(parent);
  parent_exec.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(status), 0) << cudaGetErrorName(static_cast<cudaError_t>(read_one(status)));
  EXPECT_EQ(read_one(y), 14);
}

TEST(DeviceLaunch, DeviceGraphLaunchedFromTheHostRunsToo) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(1);
  conveyor::stream s;
  conveyor::graph g;
  (void)g.memset(out.get(), 0, 1);
  (void)g.kernel({g.nodes()[0]}, one_thread, store, out.get(), 5);
  const auto d = conveyor::instantiate_for_device(g, s);
  d.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(out), 5);
}

TEST(DeviceLaunch, AMovedFromGraphIsRefusedByTheRuleChecksAndTheDeviceInstantiation) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(1);
  conveyor::stream s;
  conveyor::graph g;
  (void)g.kernel(one_thread, store, out.get(), 5);
  conveyor::graph taken(std::move(g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::device_launch_violations", (void)conveyor::device_launch_violations(g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::check_device_launchable", conveyor::check_device_launchable(g));
  EXPECT_REFUSES_MOVED_FROM("conveyor::instantiate_for_device", (void)conveyor::instantiate_for_device(g, s));
  EXPECT_REFUSES_MOVED_FROM("conveyor::instantiate_for_device", conveyor::device_graph d(g, s));
  device_array<int> status(1);
  EXPECT_REFUSES_MOVED_FROM("conveyor::graph::nodes",
                            (void)device::add_relaunch(g, device::while_nonzero{status.get()}, status.get()));
  EXPECT_TRUE(conveyor::device_launch_violations(taken).empty());
}

// ---- the relaunch loop -------------------------------------------------------------------------------------------

TEST(DeviceRelaunch, RunsExactlyKIterationsPerHostLaunch) {
  CONVEYOR_REQUIRE_GPU();
  device_array<unsigned> runs(1);
  device_array<unsigned> count(1);
  device_array<int> status(1);
  write_one(runs, 0U);
  write_one(count, 0U);
  write_one(status, 0);
  conveyor::stream s;
  for (const unsigned k : {1U, 2U, 1000U}) {
    conveyor::graph loop;
    (void)loop.kernel(one_thread, add_one, runs.get()).label("body");
    const auto controller = device::add_relaunch(loop, device::count_to{count.get(), k}, status.get());
    EXPECT_EQ(controller.dependencies().size(), 1U);
    const auto d = conveyor::instantiate_for_device(loop, s);
    write_one(runs, 0U);
    d.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(status), 0) << cudaGetErrorName(static_cast<cudaError_t>(read_one(status)));
    EXPECT_EQ(read_one(runs), k) << "K = " << k;
    EXPECT_EQ(read_one(count), 0U) << "the loop's counter is reset for the next launch";
    d.launch(s); // the next host launch runs K more
    s.synchronize();
    EXPECT_EQ(read_one(runs), 2 * k) << "K = " << k;
  }
}

TEST(DeviceRelaunch, StopsWhenTheBodyClearsTheFlag) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> value(1);
  device_array<int> flag(1);
  device_array<unsigned> iterations(1);
  device_array<int> status(1);
  write_one(value, 37);
  write_one(flag, 1);
  write_one(iterations, 0U);
  write_one(status, 0);
  conveyor::stream s;
  conveyor::graph loop;
  (void)loop.kernel(one_thread, count_down, value.get(), flag.get(), iterations.get());
  (void)device::add_relaunch(loop, device::while_nonzero{flag.get()}, status.get());
  const auto d = conveyor::instantiate_for_device(loop, s);
  d.launch(s);
  s.synchronize();
  EXPECT_EQ(read_one(status), 0);
  EXPECT_EQ(read_one(value), 0);
  EXPECT_EQ(read_one(iterations), 37U);
}

TEST(DeviceRelaunch, TimingOfATenThousandIterationLoopOfOneKernel) {
  CONVEYOR_REQUIRE_GPU();
  constexpr unsigned k = 10000;
  constexpr int launches = 5;
  device_array<unsigned> runs(1);
  device_array<unsigned> count(1);
  device_array<int> status(1);
  write_one(runs, 0U);
  write_one(count, 0U);
  write_one(status, 0);
  conveyor::stream s;
  conveyor::graph loop; // one kernel node: the controller, whose condition counts its runs
  (void)device::add_relaunch(loop, count_runs{device::count_to{count.get(), k}, runs.get()}, status.get());
  ASSERT_EQ(loop.node_count(), 1U);
  const auto d = conveyor::instantiate_for_device(loop, s);
  d.launch(s); // warm-up
  s.synchronize();
  ASSERT_EQ(read_one(runs), k);
  conveyor::event start;
  conveyor::event stop;
  CONVEYOR_CHECK(cudaEventRecord(start.get(), s.get()));
  for (int i = 0; i < launches; ++i) d.launch(s);
  CONVEYOR_CHECK(cudaEventRecord(stop.get(), s.get()));
  s.synchronize();
  float ms = 0;
  CONVEYOR_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  EXPECT_EQ(read_one(status), 0);
  EXPECT_EQ(read_one(runs), k * (launches + 1));
  std::printf("[ timing   ] device relaunch loop, one kernel, K = %u: %.3f us per iteration (%d launches, %.3f ms)\n",
              k, 1000.0 * ms / (static_cast<double>(k) * launches), launches, static_cast<double>(ms));
  RecordProperty("us_per_iteration", std::to_string(1000.0 * ms / (static_cast<double>(k) * launches)));
}

// ---- kernel node updates from the device -------------------------------------------------------------------------

TEST(DeviceUpdate, ParameterEnabledAndGridSetFromAKernelTakeEffect) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_DRIVER(12040);
  device_array<int> out(4);
  device_array<int> status(1);
  const auto reset = [&] { out.upload(std::vector<int>(4, -1)); };
  const auto status_ok = [&] {
    return ::testing::AssertionResult(read_one(status) == 0)
           << cudaGetErrorName(static_cast<cudaError_t>(read_one(status)));
  };
  conveyor::stream s;
  conveyor::graph g;
  const auto target = g.kernel(one_thread, fill, out.get(), 1).label("fill");
  const device_node dn = conveyor::make_device_updatable(target);
  ASSERT_NE(dn.handle, nullptr);
  const std::size_t value_offset = conveyor::kernel_param_offset(target, 1);
  EXPECT_EQ(value_offset, sizeof(int*));
  auto exec = conveyor::instantiate(g);
  exec.upload(s); // before any device-side update: the first launch's implicit upload would overwrite it
  reset();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(out.download(), (std::vector<int>{1, -1, -1, -1}));

  // A new parameter value.
  update_param<<<1, 1, 0, s.get()>>>(dn, value_offset, 77, status.get());
  CONVEYOR_CHECK(cudaGetLastError());
  reset();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(status_ok());
  EXPECT_EQ(out.download(), (std::vector<int>{77, -1, -1, -1}));

  // Disabled: the node does nothing.
  update_enabled<<<1, 1, 0, s.get()>>>(dn, false, status.get());
  CONVEYOR_CHECK(cudaGetLastError());
  reset();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(status_ok());
  EXPECT_EQ(out.download(), (std::vector<int>{-1, -1, -1, -1}));

  // Enabled again with a grid of 4 blocks, in one batch.
  update_enabled_and_grid<<<1, 1, 0, s.get()>>>(dn, 4, status.get());
  CONVEYOR_CHECK(cudaGetLastError());
  reset();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(status_ok());
  EXPECT_EQ(out.download(), (std::vector<int>{77, 77, 77, 77}));

  // Grid alone, back to 2.
  update_grid<<<1, 1, 0, s.get()>>>(dn, 2, status.get());
  CONVEYOR_CHECK(cudaGetLastError());
  reset();
  exec.launch(s);
  s.synchronize();
  EXPECT_TRUE(status_ok());
  EXPECT_EQ(out.download(), (std::vector<int>{77, 77, -1, -1}));
}

TEST(DeviceUpdate, AKernelUpdatesItsSuccessorInTheSameLaunch) {
  CONVEYOR_REQUIRE_GPU();
  REQUIRE_DRIVER(12040);
  device_array<int> out(1);
  device_array<int> next(1);
  device_array<int> status(1);
  write_one(status, -1);
  conveyor::stream s;
  conveyor::graph g;
  auto target = g.kernel(one_thread, fill, out.get(), 1).label("fill");
  const device_node dn = conveyor::make_device_updatable(target);
  const std::size_t value_offset = conveyor::kernel_param_offset(target, 1);
  auto updater =
      g.kernel(one_thread, update_param_from, dn, value_offset, static_cast<const int*>(next.get()), status.get());
  updater.precede(target);
  auto exec = conveyor::instantiate(g);
  exec.upload(s); // a graph whose kernels update its own nodes must be uploaded before it is launched
  for (const int value : {5, 9}) {
    write_one(next, value);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(read_one(status), 0) << cudaGetErrorName(static_cast<cudaError_t>(read_one(status)));
    EXPECT_EQ(read_one(out), value);
  }
}

TEST(DeviceUpdate, RefusesNodesThatAreNotKernelsAndParametersOutOfRange) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(1);
  conveyor::graph g;
  const auto set = g.memset(out.get(), 0, 1).label("zero");
  const auto k = g.kernel(one_thread, fill, out.get(), 1).label("fill");
  try {
    (void)conveyor::make_device_updatable(set);
    FAIL() << "a memset node was made device-updatable";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "zero is a memset node; only kernel nodes")) << e.what();
  }
  try {
    (void)conveyor::kernel_param_offset(k, 2);
    FAIL() << "parameter 2 of a two-parameter kernel";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "fill: parameter 2 asked, the kernel has 2")) << e.what();
  }
  EXPECT_EQ(conveyor::kernel_param_offset(k, 0), 0U);
}

// ---- the rules on real graphs ------------------------------------------------------------------------------------

TEST(DeviceGraphRules, CheckedOnARealGraphBeforeCudaIsAsked) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(256);
  std::vector<int> pageable(256, 3);
  conveyor::graph g;
  const auto copy = g.memcpy(out.get(), pageable.data(), pageable.size() * sizeof(int)).label("upload");
  const auto work = g.kernel({copy}, one_thread, fill, out.get(), 1).label("work");
  (void)g.host({work}, [] {}).label("report");
  const auto v = conveyor::device_launch_violations(g);
  ASSERT_EQ(v.size(), 2U);
  EXPECT_EQ(v[0].where, "node 0 'upload' (memcpy)");
  EXPECT_TRUE(contains(v[0].rule, "pageable host memory")) << v[0].rule;
  EXPECT_EQ(v[1].where, "node 2 'report' (host)");
  conveyor::stream s;
  try {
    (void)conveyor::instantiate_for_device(g, s);
    FAIL() << "instantiated";
  } catch (const conveyor::device_launch_error& e) {
    EXPECT_EQ(e.violations().size(), 2U);
    EXPECT_TRUE(contains(e.what(), "node 2 'report' (host): a host node cannot be in a device graph")) << e.what();
  }
}

TEST(DeviceGraphRules, CopyOfACudaArrayIsRefused) {
  CONVEYOR_REQUIRE_GPU();
  cudaArray_t array = nullptr;
  const cudaChannelFormatDesc format = cudaCreateChannelDesc<int>();
  CONVEYOR_CHECK(cudaMallocArray(&array, &format, 16, 1));
  device_array<int> out(16);
  {
    conveyor::graph g;
    cudaMemcpy3DParms p{};
    p.srcArray = array;
    p.dstPtr = make_cudaPitchedPtr(out.get(), 16 * sizeof(int), 16, 1);
    p.extent = make_cudaExtent(16, 1, 1);
    p.kind = cudaMemcpyDeviceToDevice;
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeMemcpy;
    params.memcpy.copyParams = p;
    (void)g.add_node({}, params).label("from array");
    const auto v = conveyor::device_launch_violations(g);
    ASSERT_EQ(v.size(), 1U);
    EXPECT_EQ(v[0].where, "node 0 'from array' (memcpy)");
    EXPECT_TRUE(contains(v[0].rule, "CUDA array")) << v[0].rule;
  }
  CONVEYOR_CHECK(cudaFreeArray(array));
}

TEST(DeviceGraphRules, EveryGraphCudaRefusesIsRefusedBeforehand) {
  CONVEYOR_REQUIRE_GPU();
  int driver = 0;
  CONVEYOR_CHECK(cudaDriverGetVersion(&driver));
  device_array<int> out(64);
  device_array<unsigned> counter(1);
  conveyor::test::device_array<int> scratch(64);
  std::vector<int> pageable(64, 1);
  conveyor::event e;
  struct case_t {
    std::string name;
    conveyor::graph g;
  };
  std::vector<case_t> cases;
  const auto add_case = [&](std::string name) -> conveyor::graph& {
    cases.push_back({std::move(name), conveyor::graph{}});
    return cases.back().g;
  };
  {
    auto& g = add_case("kernel, device copy, memset (allowed)");
    const auto a = g.kernel(one_thread, fill, out.get(), 1);
    const auto b = g.memcpy({a}, scratch.get(), out.get(), 64 * sizeof(int));
    (void)g.memset({b}, out.get(), 0, 64);
  }
  {
    auto& g = add_case("kernel in a child graph (allowed)");
    conveyor::graph inner;
    (void)inner.kernel(one_thread, fill, out.get(), 1);
    (void)g.child(inner);
  }
  {
    auto& g = add_case("host node");
    (void)g.kernel(one_thread, fill, out.get(), 1);
    (void)g.host([] {});
  }
  {
    auto& g = add_case("empty node");
    const auto a = g.kernel(one_thread, fill, out.get(), 1);
    (void)g.empty({a});
  }
  {
    auto& g = add_case("event record node");
    const auto a = g.kernel(one_thread, fill, out.get(), 1);
    (void)g.event_record({a}, e);
  }
  {
    auto& g = add_case("memory alloc and free nodes");
    const auto alloc = g.mem_alloc(256);
    const auto a = g.kernel({alloc.node}, one_thread, fill, static_cast<int*>(alloc.pointer), 1);
    (void)g.mem_free({a}, alloc.pointer);
  }
  {
    auto& g = add_case("copy of pageable host memory");
    (void)g.memcpy(out.get(), pageable.data(), pageable.size() * sizeof(int));
  }
  {
    auto& g = add_case("nothing to do (empty graph)");
    (void)g;
  }
  if (driver >= conveyor::required_cuda_version(conveyor::conditional_kind::while_loop)) {
    auto& g = add_case("WHILE conditional node");
    const auto cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
    auto loop = conveyor::add_conditional(g, {}, conveyor::conditional_kind::while_loop, cond);
    (void)loop.bodies[0].kernel(one_thread, add_one, counter.get());
  }
  int agreed = 0;
  for (auto& c : cases) {
    const auto v = conveyor::device_launch_violations(c.g);
    const bool conveyor_refuses = !v.empty();
    const bool cuda_refuses = !cuda_accepts_for_device_launch(c.g);
    EXPECT_FALSE(cuda_refuses && !conveyor_refuses) << c.name
                                                    << ": CUDA refuses it for device launch, Conveyor's "
                                                       "check let it through (a rule is missing)";
    if (c.name.find("(allowed)") != std::string::npos) {
      EXPECT_FALSE(conveyor_refuses) << c.name << ": " << v.at(0).message();
      EXPECT_FALSE(cuda_refuses) << c.name;
    } else {
      EXPECT_TRUE(conveyor_refuses) << c.name;
    }
    if (conveyor_refuses && !cuda_refuses)
      std::printf("[ note     ] %s: refused by the documented rules, but driver %d instantiates it for device "
                  "launch\n",
                  c.name.c_str(), driver);
    else ++agreed;
  }
  std::printf("[ rules    ] Conveyor and driver %d agree on %d of %zu graphs\n", driver, agreed, cases.size());
}

TEST(DeviceGraphRules, DynamicParallelismIsRefusedByCudaWithTheRuleNamed) {
  CONVEYOR_REQUIRE_GPU();
  device_array<unsigned> counter(1);
  conveyor::graph g;
  (void)g.kernel(one_thread, launches_a_kernel, counter.get()).label("spawner");
  EXPECT_TRUE(conveyor::device_launch_violations(g).empty()); // not visible before instantiation
  conveyor::stream s;
  try {
    (void)conveyor::instantiate_for_device(g, s);
    FAIL() << "a kernel using dynamic parallelism was instantiated for device launch";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_TRUE(contains(e.what(), "dynamic parallelism")) << e.what();
    EXPECT_TRUE(contains(e.what(), "conveyor::instantiate_for_device")) << e.what();
  }
}

TEST(DeviceGraphRules, AutoFreeOnLaunchIsRefusedWithDeviceLaunch) {
  CONVEYOR_REQUIRE_GPU();
  device_array<int> out(1);
  conveyor::graph g;
  (void)g.kernel(one_thread, store, out.get(), 1);
  conveyor::stream s;
  try {
    (void)conveyor::instantiate_for_device(g, s, conveyor::instantiate_flags::auto_free_on_launch);
    FAIL() << "instantiated";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "auto_free_on_launch cannot be combined with device launch")) << e.what();
  }
}

} // namespace
