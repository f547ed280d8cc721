// Kinds layer: what memory a node's parameters point into, for descriptions (node_description::buffers,
// pageable_host) and the tuning doctor.

#include "kinds/kinds.hpp"

#include "cuda/driver.hpp"

#include <algorithm>
#include <cstring>

namespace conveyor::detail {

std::optional<std::uint64_t> allocation_base(std::uint64_t address) noexcept {
  if (address == 0) return std::nullopt;
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (driver::mem_get_address_range(&base, &size, static_cast<CUdeviceptr>(address)) != CUDA_SUCCESS || size == 0)
    return std::nullopt;
  return static_cast<std::uint64_t>(base);
}

namespace {

// Writes `value` where the caller asked for it (a null `out`: not asked).
template <class T>
void set_if_asked(T* out, T value) noexcept {
  if (out != nullptr) *out = value;
}

// 'D' for device and managed memory, 'H' for host memory (pageable: unregistered), 0 for another type.
char side_of_type(const cudaPointerAttributes& a, bool* pageable, int* device) noexcept {
  switch (a.type) {
  case cudaMemoryTypeDevice: set_if_asked(device, a.device); return 'D';
  case cudaMemoryTypeManaged: return 'D';
  case cudaMemoryTypeUnregistered: set_if_asked(pageable, true); return 'H';
  case cudaMemoryTypeHost: return 'H';
  }
  return 0;
}

} // namespace

char memory_side(const void* p, bool* pageable, int* device) noexcept {
  set_if_asked(pageable, false);
  set_if_asked(device, -1);
  if (p == nullptr) return 0;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return side_of_type(a, pageable, device);
}

int context_device(CUcontext ctx) noexcept {
  CUdevice device = 0;
  return driver::ctx_get_device(&device, ctx) == CUDA_SUCCESS ? static_cast<int>(device) : -1;
}

void add_buffer(node_description& d, const void* p) {
  const auto base = allocation_base(reinterpret_cast<std::uintptr_t>(p));
  if (!base) return;
  const auto at = std::lower_bound(d.buffers.begin(), d.buffers.end(), *base);
  if (at == d.buffers.end() || *at != *base) d.buffers.insert(at, *base);
}

void add_kernel_buffers(node_description& d, const kernel_snapshot& s) {
  if (s.layout == nullptr || s.arguments.empty()) return;
  for (const auto& [offset, size] : *s.layout) {
    // Every 8-byte-aligned word of every parameter (pointers, and pointers inside structs passed by value).
    for (std::size_t at = (offset + 7) / 8 * 8; at + 8 <= offset + size && at + 8 <= s.arguments.size(); at += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, s.arguments.data() + at, 8);
      if (word < 4096) continue; // small integers are not addresses: no driver call for them
      add_buffer(d, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(word)));
    }
  }
}

} // namespace conveyor::detail
