#pragma once
//! \file module_images.hpp
//! conveyor::profile::module_images: the image of every module CUDA loads while it lives — the
//! program's own kernels and library kernels (cuBLAS, cuSPARSE, ...) alike — recorded through
//! CUPTI's resource callback (CUPTI_CBID_RESOURCE_MODULE_LOADED, which hands over each module's
//! cubin), so that graphs running their kernels are saved with the image embedded
//! (save_options::images) and load where the kernels are not otherwise found.

#include "conveyor/keep/module.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

namespace conveyor::profile {

//! Records module images while it lives. CUDA loads modules lazily (at a kernel's first use,
//! CUDA_MODULE_LOADING LAZY, the default since CUDA 12.2): make it before the kernels to save first
//! run. One at a time per process (CUPTI allows one callback subscriber; compute-sanitizer and
//! Nsight are subscribers too). Thread-safe.
class module_images final : public image_source {
public:
  //! Subscribes to CUPTI's module-load callback (cuptiSubscribe, cuptiEnableCallback).
  //! \throws profiler_error when CUPTI refuses (another subscriber, no CUPTI).
  module_images();
  //! Unsubscribes (cuptiUnsubscribe); never throws.
  ~module_images() override;
  module_images(const module_images&) = delete;
  module_images& operator=(const module_images&) = delete;

  //! The recorded cubin that defines `mangled_name` (its symbol table holds the name), or nullopt.
  //! The most recently loaded such module wins.
  [[nodiscard]] std::optional<saved_image> image_of(std::string_view mangled_name,
                                                    CUfunction function) const override;
  //! Modules recorded so far.
  [[nodiscard]] std::size_t modules() const;
  //! Their bytes together.
  [[nodiscard]] std::size_t bytes() const;

  struct state; //!< the recorded images (opaque)

private:
  std::shared_ptr<state> state_;
};

} // namespace conveyor::profile
