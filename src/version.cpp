#include "conveyor/version.hpp"

namespace conveyor {

const char* version() noexcept { return CONVEYOR_VERSION_STRING; }

} // namespace conveyor
