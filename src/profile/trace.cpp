#include "conveyor/profile/trace.hpp"

namespace conveyor::profile {

const char* to_string(activity_kind k) noexcept {
  switch (k) {
  case activity_kind::kernel: return "kernel";
  case activity_kind::memcpy: return "memcpy";
  case activity_kind::memset: return "memset";
  }
  return "unknown";
}

} // namespace conveyor::profile
