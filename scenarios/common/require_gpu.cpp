#include "common/require_gpu.hpp"

#include <conveyor/runtime/architecture.hpp>
#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <stdexcept>

namespace conveyor::scenarios {

void require_gpu(std::string_view command) {
  if (!has_device()) throw std::runtime_error(fmt::format("no CUDA device: {} needs a GPU", command));
  check_device_architecture(current_device());
}

} // namespace conveyor::scenarios
