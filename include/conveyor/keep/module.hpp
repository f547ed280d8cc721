#pragma once
//! \file module.hpp
//! conveyor::kernel_module: a kernel image (cubin, fatbin or PTX) loaded through Conveyor
//! (cudaLibraryLoadData), whose bytes Conveyor keeps, so that graphs running its kernels are saved
//! with the image embedded and load in a process that never had it; and conveyor::image_source,
//! what else can tell save where a kernel's image is (the CUPTI module recorder of
//! conveyor::profile, for library kernels).

#include "conveyor/keep/graph_file.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

//! Something that can give the image a kernel comes from, by the kernel's mangled name and its
//! driver function. Implementations: modules loaded through conveyor::kernel_module (always
//! consulted), profile::module_images.
class image_source {
public:
  virtual ~image_source() = default;
  //! The image holding `mangled_name` (`function`: the kernel's driver function in the current
  //! context, or null), or nullopt. Must be thread-safe.
  [[nodiscard]] virtual std::optional<saved_image> image_of(std::string_view mangled_name,
                                                            CUfunction function) const = 0;
};

//! A kernel image loaded through Conveyor (`cudaLibraryLoadData`): its kernels launch as any kernel
//! does (`kernel(name)` gives the handle `<<<>>>`-style launches and the builder take), and graphs
//! running them are saved with the image embedded (save_options::embed_images). Move-only; unloads
//! the library when destroyed (after the graphs using its kernels are gone). Thread safety: const
//! members may be called concurrently.
class kernel_module {
public:
  //! Loads `image` (bytes of a cubin, a fatbin, or NUL-terminated PTX) on the current device.
  //! \throws cuda_error when CUDA cannot load it (cudaLibraryLoadData);
  //!         std::invalid_argument for empty bytes.
  static kernel_module load(std::vector<unsigned char> image, image_format format,
                            std::string source = "module");
  //! Loads the image in file `path` (".cubin", ".fatbin", ".ptx": the format from the extension).
  //! \throws std::runtime_error when the file cannot be read; std::invalid_argument for
  //!         another extension; as load.
  static kernel_module load_file(const std::filesystem::path& path);

  //! Takes over `other`'s library; `other` is left empty.
  kernel_module(kernel_module&&) noexcept;
  //! Unloads this module's library (after its graphs let go) and takes over `other`'s.
  kernel_module& operator=(kernel_module&&) noexcept;
  kernel_module(const kernel_module&) = delete;
  kernel_module& operator=(const kernel_module&) = delete;
  //! Unloads the library (`cudaLibraryUnload`); never throws.
  ~kernel_module();

  //! The kernel `mangled_name` of the module as a function handle for launches and kernel nodes
  //! (`cudaLibraryGetKernel`: a cudaKernel_t, valid in every context).
  //! \throws cuda_error when the module has no such kernel.
  [[nodiscard]] const void* kernel(std::string_view mangled_name) const;
  //! The library handle.
  [[nodiscard]] cudaLibrary_t get() const noexcept;
  //! The image's bytes and form.
  [[nodiscard]] const saved_image& image() const noexcept;

  struct impl; //!< the library and its image (opaque)

private:
  explicit kernel_module(std::shared_ptr<impl> p) noexcept;
  std::shared_ptr<impl> impl_;
};

} // namespace conveyor
