#include "conveyor/error.hpp"

#include <fmt/format.h>

namespace conveyor {

namespace {

// The remedy of a kernel fault (sticky: the process can make no more CUDA calls).
constexpr std::string_view sticky_fault =
    "a kernel faulted, and the error is sticky: this process can make no more CUDA calls. If the kernel ran "
    "inside a graph, find the node in a fresh process: run the program with CONVEYOR_STEP_THROUGH=1 (every "
    "graph launch then runs node by node and names the node that fails: conveyor::step_through), and under "
    "compute-sanitizer --tool memcheck for the faulting access";
// The remedy of device code built for other GPUs.
constexpr std::string_view other_architecture =
    "this GPU cannot run the device code the program was built with (Conveyor's own was built for CUDA "
    "architectures '" CONVEYOR_CUDA_ARCHITECTURES "'): rebuild with -DCMAKE_CUDA_ARCHITECTURES=<the GPU's "
    "compute capability without the dot, e.g. 80 for 8.0; nvidia-smi --query-gpu=compute_cap shows it>, and "
    "call conveyor::check_device_architecture at start-up to stop before the first kernel";

struct hint_entry {
  cudaError_t code;
  std::string_view hint;
};

// One remedy per error code hint_for knows.
constexpr hint_entry hints[] = {
    {cudaErrorStreamCaptureUnsupported,
     "this call is not allowed while a stream is being captured (cudaMalloc, cudaStreamSynchronize, "
     "cudaStreamQuery, cudaStreamGetDevice, cudaStreamGetFlags or cudaStreamGetId of the capturing stream, "
     "cudaEventSynchronize of captured work, cudaDeviceSynchronize ...): allocate before "
     "capturing or use cudaMallocAsync, and never wait for the capturing stream inside the capture. Beware "
     "too of synchronous cudaMemcpy/cudaMemset: they are not refused but run at once and are not captured; "
     "use the *Async form on the capture stream"},
    {cudaErrorStreamCaptureInvalidated,
     "an illegal call earlier in this capture invalidated it (cudaMalloc, a query or synchronisation of the "
     "capturing stream — cudaStreamQuery, cudaStreamGetDevice, cudaStreamGetFlags, cudaStreamGetId —, "
     "cudaDeviceSynchronize, or an implicit synchronisation with the legacy default stream): "
     "check the return code of every call inside the captured callable to find it"},
    {cudaErrorStreamCaptureImplicit,
     "work was enqueued on the legacy default stream (stream 0: a kernel launched without a stream argument, a "
     "copy or memset on stream 0) while a capture was open: it would run once, at capture time, and be missing "
     "from every replay; pass the capturing stream to every launch, copy and memset inside the capture (and "
     "capture on a stream made with cudaStreamNonBlocking)"},
    {cudaErrorStreamCaptureUnjoined,
     "a stream forked into the capture was not joined back: call conveyor::join(origin, forked) (an event "
     "recorded on the forked stream and waited on by the origin) before the capture ends"},
    {cudaErrorStreamCaptureIsolation,
     "a dependency crosses capture boundaries: an event recorded inside one capture was waited on outside "
     "it (or in another capture)"},
    {cudaErrorStreamCaptureWrongThread,
     "the capture was begun in another thread or ended in a thread that did not begin it: use "
     "conveyor::capture_mode::relaxed or keep begin and end in one thread"},
    {cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture was called on a stream that is not capturing"},
    {cudaErrorStreamCaptureMerge, "two independent captures were merged by a cross-stream dependency"},
    {cudaErrorGraphExecUpdateFailure,
     "the new graph differs from the executable graph in a way cudaGraphExecUpdate cannot apply: use "
     "graph_exec::update_or_reinstantiate"},
    {cudaErrorIllegalAddress, sticky_fault},
    {cudaErrorLaunchFailure, sticky_fault},
    {cudaErrorAssert, sticky_fault},
    {cudaErrorMisalignedAddress, sticky_fault},
    {cudaErrorIllegalInstruction, sticky_fault},
    {cudaErrorHardwareStackError, sticky_fault},
    {cudaErrorNoKernelImageForDevice, other_architecture},
    {cudaErrorUnsupportedPtxVersion, other_architecture},
    {cudaErrorNoDevice, "no CUDA device is visible: check nvidia-smi and CUDA_VISIBLE_DEVICES"},
    {cudaErrorInsufficientDriver,
     "no NVIDIA driver was found, or it is older than the CUDA runtime this program was built with: "
     "install or update the driver (nvidia-smi shows its CUDA version)"},
};

} // namespace

std::string_view hint_for(cudaError_t code) noexcept {
  for (const hint_entry& h : hints)
    if (h.code == code) return h.hint;
  return {};
}

namespace {
thread_local const api_call* outermost_call = nullptr;

std::string format_message(cudaError_t code, std::string_view call, const std::source_location& where,
                           std::string_view context, const api_call* api) {
  std::string message = api != nullptr ? fmt::format("{}:{}: {}: {} failed: {} ({}) (at {}:{})", api->where.file_name(),
                                                     api->where.line(), api->name, call, cudaGetErrorName(code),
                                                     cudaGetErrorString(code), where.file_name(), where.line())
                                       : fmt::format("{}:{}: {} failed: {} ({})", where.file_name(), where.line(), call,
                                                     cudaGetErrorName(code), cudaGetErrorString(code));
  if (!context.empty()) message += fmt::format("; {}", context);
  if (auto hint = hint_for(code); !hint.empty()) message += fmt::format(". Fix: {}", hint);
  return message;
}
} // namespace

cuda_error::cuda_error(cudaError_t code, std::string_view call, std::source_location where, std::string_view context) :
    std::runtime_error(format_message(code, call, where, context, outermost_call)),
    code_(code),
    call_(call),
    where_(where) {
  if (outermost_call != nullptr) api_ = *outermost_call;
}

namespace detail {

[[gnu::hot]] api_scope::api_scope(std::string_view name, std::source_location where) noexcept :
    call_{name, where},
    outermost_(outermost_call == nullptr) {
  if (outermost_) outermost_call = &call_;
}

[[gnu::hot]] api_scope::~api_scope() {
  if (outermost_) outermost_call = nullptr;
}

const api_call* current_api_call() noexcept { return outermost_call; }

} // namespace detail

std::string_view cuda_error::name() const noexcept { return cudaGetErrorName(code_); }

std::string_view cuda_error::hint() const noexcept { return hint_for(code_); }

} // namespace conveyor
