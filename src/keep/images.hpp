#pragma once
// Internal (keep layer): the images of modules loaded through conveyor::kernel_module, for save.

#include "conveyor/keep/graph_file.hpp"

#include <cuda.h>

#include <optional>
#include <string_view>

namespace conveyor::detail::keep {

//! The image of the live Conveyor module whose kernel `mangled_name` is `function` (null: any kernel of that name),
//! or nullopt. Thread-safe.
[[nodiscard]] std::optional<saved_image> conveyor_image(std::string_view mangled_name, CUfunction function);

} // namespace conveyor::detail::keep
