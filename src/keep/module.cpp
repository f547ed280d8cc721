// conveyor::kernel_module: kernel images loaded through Conveyor (cudaLibraryLoadData), their bytes kept so that graphs
// running their kernels are saved with the image; the live modules are an image source for save.
#include "conveyor/keep/module.hpp"

#include "conveyor/error.hpp"
#include "cuda/driver.hpp"
#include "keep/images.hpp"
#include "kinds/kinds.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>

namespace conveyor {

struct kernel_module::impl {
  cudaLibrary_t library = nullptr;
  saved_image image;
  ~impl() {
    if (library == nullptr) return;
    (void)cudaLibraryUnload(library);
    detail::forget_parameter_layouts(); // its kernels' handles may name other kernels now
  }
};

namespace {

// The live modules, for save (detail::keep::conveyor_images).
struct live_modules {
  std::mutex mutex;
  std::vector<std::weak_ptr<kernel_module::impl>> list;
};
live_modules& modules() {
  static live_modules* m = new live_modules; // never destroyed: modules may outlive static destruction
  return *m;
}

// True when kernel `name` of `library` is what `function` runs (cuLibraryGetKernel, then its function in the
// current context).
bool library_runs(cudaLibrary_t library, std::string_view name, CUfunction function) {
  CUkernel k = nullptr;
  const std::string n(name);
  if (detail::driver::library_get_kernel(&k, reinterpret_cast<CUlibrary>(library), n.c_str()) != CUDA_SUCCESS)
    return false;
  if (function == nullptr) return true;
  CUfunction f = nullptr;
  return detail::driver::kernel_get_function(&f, k) == CUDA_SUCCESS && f == function;
}

} // namespace

kernel_module::kernel_module(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
kernel_module::kernel_module(kernel_module&&) noexcept = default;
kernel_module& kernel_module::operator=(kernel_module&&) noexcept = default;
kernel_module::~kernel_module() = default;

kernel_module kernel_module::load(std::vector<unsigned char> image, image_format format, std::string source) {
  if (image.empty()) throw std::invalid_argument("conveyor::kernel_module::load: an empty image");
  if (format == image_format::ptx && image.back() != 0) image.push_back(0); // PTX is NUL-terminated text
  auto p = std::make_shared<impl>();
  p->image = {format, std::move(source), std::move(image)};
  CONVEYOR_CHECK(cudaLibraryLoadData(&p->library, p->image.bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  auto& m = modules();
  std::lock_guard lock(m.mutex);
  std::erase_if(m.list, [](const auto& w) { return w.expired(); });
  m.list.push_back(p);
  return kernel_module(std::move(p));
}

kernel_module kernel_module::load_file(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  const image_format format =
      ext == ".cubin"    ? image_format::cubin
      : ext == ".fatbin" ? image_format::fatbin
      : ext == ".ptx"    ? image_format::ptx
                         : throw std::invalid_argument(
                               fmt::format("conveyor::kernel_module::load_file: '{}': expected a .cubin, .fatbin or "
                                              ".ptx file",
                                           path.string()));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("conveyor::kernel_module::load_file: cannot read '{}'", path.string()));
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return load(std::move(bytes), format, fmt::format("module '{}'", path.filename().string()));
}

const void* kernel_module::kernel(std::string_view mangled_name) const {
  cudaKernel_t k = nullptr;
  const std::string name(mangled_name);
  {
    const cudaError_t rc = cudaLibraryGetKernel(&k, impl_->library, name.c_str());
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      throw cuda_error(rc, "cudaLibraryGetKernel", std::source_location::current(),
                       fmt::format("{} has no kernel named '{}'", impl_->image.source, name));
    }
  }
  return reinterpret_cast<const void*>(k);
}

cudaLibrary_t kernel_module::get() const noexcept { return impl_->library; }
const saved_image& kernel_module::image() const noexcept { return impl_->image; }

namespace detail::keep {

std::optional<saved_image> conveyor_image(std::string_view mangled_name, CUfunction function) {
  std::vector<std::shared_ptr<kernel_module::impl>> live;
  {
    auto& m = modules();
    std::lock_guard lock(m.mutex);
    for (const auto& w : m.list)
      if (auto p = w.lock()) live.push_back(std::move(p));
  }
  for (const auto& p : live)
    if (library_runs(p->library, mangled_name, function)) return p->image;
  return std::nullopt;
}

} // namespace detail::keep

} // namespace conveyor
