// Host-only tests of error reporting, flag sets, update reasons and compile-time kernel argument checking.
#include <conveyor/define/kernel_args.hpp>
#include <conveyor/error.hpp>
#include <conveyor/execute/instantiate_flags.hpp>
#include <conveyor/execute/update_result.hpp>

#include "define/stream_watch.hpp"

#include <gtest/gtest.h>

#include <source_location>
#include <string>
#include <vector>

namespace {

void fake_kernel(int, float, const float*, float*) {}

TEST(CudaError, CarriesCodeNameCallLocationAndHint) {
  try {
    conveyor::check(cudaErrorStreamCaptureUnsupported, "cudaMalloc(&p, 64)");
    FAIL() << "check() did not throw";
  } catch (const conveyor::cuda_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(e.name(), "cudaErrorStreamCaptureUnsupported");
    EXPECT_EQ(e.call(), "cudaMalloc(&p, 64)");
    EXPECT_NE(std::string(e.where().file_name()).find("test_errors.cpp"), std::string::npos);
    EXPECT_NE(what.find("cudaMalloc(&p, 64) failed: cudaErrorStreamCaptureUnsupported"), std::string::npos) << what;
    EXPECT_NE(what.find("Fix:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaMallocAsync"), std::string::npos) << what;
  }
}

// Inside a public Conveyor call (here marked by hand, as the library's calls mark themselves), an error names that
// call and the user's call site first, and keeps the failing CUDA call with its location inside the library.
TEST(CudaError, InsideAPublicCallItNamesTheCallAndTheUsersSite) {
  const std::source_location user_site = std::source_location::current();
  {
    const conveyor::detail::api_scope outer("conveyor::instantiate", user_site);
    {
      const conveyor::detail::api_scope inner("conveyor::graph_exec::update", std::source_location::current());
      const conveyor::cuda_error e(cudaErrorInvalidValue, "cudaGraphInstantiateWithParams(flags=none)");
      ASSERT_TRUE(e.api().has_value());
      EXPECT_EQ(e.api()->name, "conveyor::instantiate"); // the outermost call: the user's
      EXPECT_EQ(e.api()->where.line(), user_site.line());
      const std::string what = e.what();
      const std::string starts = std::string(user_site.file_name()) + ":" + std::to_string(user_site.line()) +
                                 ": conveyor::instantiate: cudaGraphInstantiateWithParams(flags=none) failed: "
                                 "cudaErrorInvalidValue";
      EXPECT_EQ(what.rfind(starts, 0), 0U) << what;
      EXPECT_NE(what.find("(at "), std::string::npos) << what; // and where inside the library
    }
    EXPECT_EQ(conveyor::detail::current_api_call()->name, "conveyor::instantiate");
  }
  EXPECT_EQ(conveyor::detail::current_api_call(), nullptr);
  const conveyor::cuda_error outside(cudaErrorInvalidValue, "cudaMalloc(&p, 4)");
  EXPECT_FALSE(outside.api().has_value());
  EXPECT_EQ(std::string(outside.what()).find("conveyor::"), std::string::npos) << outside.what();
}

TEST(CudaError, MacroNamesTheCallAsWritten) {
  try {
    CONVEYOR_CHECK(cudaErrorInvalidValue);
    FAIL() << "CONVEYOR_CHECK did not throw";
  } catch (const conveyor::cuda_error& e) {
    EXPECT_EQ(e.call(), "cudaErrorInvalidValue");
    EXPECT_TRUE(e.hint().empty());
    EXPECT_EQ(std::string(e.what()).find("Fix:"), std::string::npos);
  }
  EXPECT_NO_THROW(conveyor::check(cudaSuccess, "nothing"));
}

TEST(CudaError, EveryCaptureErrorHasAHint) {
  for (auto code : {cudaErrorStreamCaptureUnsupported, cudaErrorStreamCaptureInvalidated,
                    cudaErrorStreamCaptureImplicit, cudaErrorStreamCaptureUnjoined, cudaErrorStreamCaptureIsolation,
                    cudaErrorStreamCaptureWrongThread, cudaErrorStreamCaptureUnmatched})
    EXPECT_FALSE(conveyor::hint_for(code).empty()) << cudaGetErrorName(code);
}

TEST(InstantiateFlags, CombineAndPrint) {
  using conveyor::instantiate_flags;
  auto f = instantiate_flags::upload | instantiate_flags::use_node_priority;
  EXPECT_TRUE(conveyor::has_flag(f, instantiate_flags::upload));
  EXPECT_FALSE(conveyor::has_flag(f, instantiate_flags::device_launch));
  EXPECT_EQ(static_cast<unsigned long long>(f),
            static_cast<unsigned long long>(cudaGraphInstantiateFlagUpload | cudaGraphInstantiateFlagUseNodePriority));
  EXPECT_EQ(conveyor::to_string(f), "upload|use_node_priority");
  EXPECT_EQ(conveyor::to_string(instantiate_flags::none), "none");
  EXPECT_EQ(conveyor::to_string(conveyor::without(f, instantiate_flags::upload)), "use_node_priority");
}

TEST(UpdateResult, ReasonNamesMethodStatusAndNode) {
  conveyor::update_result r;
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.reason(), "none: parameters already equal");
  r.method = conveyor::update_method::refused;
  r.status = conveyor::to_update_status(cudaGraphExecUpdateErrorTopologyChanged);
  r.node_label = "relu1";
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_FALSE(r.reinstantiated());
  EXPECT_EQ(r.reason(), "update refused: topology_changed (nodes or dependencies were added or removed) at node relu1");
  r.method = conveyor::update_method::reinstantiated;
  r.explanation = "topology changed: node count 3 -> 4";
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_TRUE(r.reinstantiated());
  EXPECT_EQ(r.reason(), "reinstantiated: topology changed: node count 3 -> 4; update refused: topology_changed (nodes "
                        "or dependencies were added or removed) at node relu1");
  r = {};
  r.method = conveyor::update_method::per_node;
  r.explanation = "node 1 (axpy): arguments 1";
  EXPECT_EQ(r.reason(), "per_node: node 1 (axpy): arguments 1");
  EXPECT_EQ(conveyor::to_string(conveyor::update_method::whole_graph), "whole_graph");
  EXPECT_EQ(conveyor::to_update_status(cudaGraphExecUpdateErrorFunctionChanged),
            conveyor::update_status::function_changed);
}

TEST(KernelArgs, CompileTimeSignatureCheck) {
  static_assert(conveyor::kernel_accepts<decltype(&fake_kernel), int, float, float*, float*>);
  static_assert(conveyor::kernel_accepts<decltype(&fake_kernel), long, double, const float*, float*>);
  static_assert(!conveyor::kernel_accepts<decltype(&fake_kernel), int, float, float*>, "too few arguments");
  static_assert(!conveyor::kernel_accepts<decltype(&fake_kernel), int, float, const float*, const float*>,
                "const pointer to a non-const parameter");
  static_assert(!conveyor::kernel_accepts<decltype(&fake_kernel), int, float, int*, float*>, "wrong pointee type");
  float x = 0.0F;
  auto args = conveyor::make_kernel_args(&fake_kernel, 7L, 2.5, &x, &x);
  EXPECT_EQ(*static_cast<int*>(args.pointers()[0]), 7);
  EXPECT_FLOAT_EQ(*static_cast<float*>(args.pointers()[1]), 2.5F);
  EXPECT_EQ(*static_cast<float**>(args.pointers()[3]), &x);
}

// The stream watch's table (capture_options::watch_streams with CONVEYOR_WATCH_STREAMS): every row.
TEST(StreamWatch, TheOptionAndTheEnvironmentVariableResolveAsDocumented) {
  using conveyor::stream_watch;
  using conveyor::detail::resolve_stream_watch;
  struct row {
    stream_watch requested;
    const char* env;
    stream_watch resolved;
  };
  const row rows[] = {
      {stream_watch::environment, nullptr, stream_watch::off},
      {stream_watch::environment, "1", stream_watch::on},
      {stream_watch::environment, "0", stream_watch::off},
      {stream_watch::environment, "yes", stream_watch::off},
      {stream_watch::if_available, nullptr, stream_watch::if_available}, // graphed's first capture of a shape
      {stream_watch::if_available, "1", stream_watch::on},
      {stream_watch::if_available, "0", stream_watch::off},
      {stream_watch::on, "0", stream_watch::on}, // asked for in code: the variable does not turn it off
      {stream_watch::off, "1", stream_watch::off},
      {stream_watch::on, nullptr, stream_watch::on},
      {stream_watch::off, nullptr, stream_watch::off},
  };
  for (const auto& r : rows)
    EXPECT_EQ(resolve_stream_watch(r.requested, r.env), r.resolved)
        << conveyor::detail::to_string(r.requested) << " with CONVEYOR_WATCH_STREAMS=" << (r.env ? r.env : "(unset)");
}

// The refusal names each call, its kernel, stream and thread (the capturing one or another), the count beyond the
// first four, and the fix.
TEST(StreamWatch, TheRefusalNamesTheCallTheStreamTheThreadAndTheFix) {
  using conveyor::detail::foreign_work;
  std::vector<foreign_work> found{{"cuLaunchKernel", "_Z5scaleifPf", "stream 0x5a10", 7},
                                  {"cuMemcpyAsync", "", "the per-thread default stream", 9}};
  for (int i = 0; i < 4; ++i) found.push_back({"cuMemsetD32Async", "", "the legacy default stream", 7});
  const std::string text = conveyor::detail::foreign_work_message(found, 7);
  for (const char* part : {"6 operation(s)",
                           "cuLaunchKernel (kernel _Z5scaleifPf) on stream 0x5a10, from the capturing "
                           "thread",
                           "cuMemcpyAsync on the per-thread default stream, from another thread (thread 9)",
                           "and 2 more", "no replay", "conveyor::fork", "cublasSetStream", "stream_watch::off"})
    EXPECT_NE(text.find(part), std::string::npos) << "lacks '" << part << "': " << text;
}

} // namespace
