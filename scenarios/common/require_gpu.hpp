#pragma once
// The commands' one check before GPU work: a device is visible, and this build's device code runs on it.

#include <string_view>

namespace conveyor::scenarios {

//! Throws std::runtime_error "no CUDA device: `command` needs a GPU" when none is visible, and the fix
//! (conveyor::check_device_architecture) when the current device cannot run this build's device code.
void require_gpu(std::string_view command);

} // namespace conveyor::scenarios
