#include "conveyor/runtime/launch.hpp"

#include "cuda/check.hpp"

#include <fmt/format.h>

#include <array>

namespace conveyor {

void launch_kernel(const stream& s, const launch_config& cfg, const void* function, void** arguments,
                   std::source_location where) {
  std::array<cudaLaunchAttribute, 2> attributes{};
  unsigned count = 0;
  if (cfg.priority != 0) {
    attributes[count].id = cudaLaunchAttributePriority;
    attributes[count].val.priority = cfg.priority;
    ++count;
  }
  if (cfg.programmatic) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = cfg.grid;
  config.blockDim = cfg.block;
  config.dynamicSmemBytes = cfg.shared_bytes;
  config.stream = s.get();
  config.attrs = count > 0 ? attributes.data() : nullptr;
  config.numAttrs = count;
  detail::check_with(
      cudaLaunchKernelExC(&config, function, arguments), "cudaLaunchKernelExC",
      [&] {
        const char* name = nullptr;
        if (detail::cleared(cudaFuncGetName(&name, function)) != cudaSuccess || name == nullptr) name = "?";
        return fmt::format("conveyor::launch: kernel {}, grid {}x{}x{}, block {}x{}x{}, {} B shared{}{}", name,
                           cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y, cfg.block.z, cfg.shared_bytes,
                           cfg.priority != 0 ? fmt::format(", priority {}", cfg.priority) : std::string{},
                           cfg.programmatic ? ", programmatic" : "");
      },
      where);
}

} // namespace conveyor
