#pragma once
// Internal (kinds layer): the fields of a node that a value passed to captured code can sit in — kernel argument
// bytes, copy and memset pointers, a memset value — read from a graph and set on an executable graph through the
// node's kind (kind_traits::read_fields, set_fields). Rebinding (assembly/rebind.hpp) learns where arguments sit in
// them and patches them.

#include "conveyor/define/node_kind.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace conveyor::detail {

//! One node's patchable fields, read from a graph node. A plain value.
struct node_fields {
  node_kind kind = node_kind::other;
  //! Kernel (arguments readable), memcpy between addresses or memset: `bytes` can be patched.
  bool patchable = false;
  //! Parameters that must stay equal between captures (function, launch shape, sizes), as bytes.
  std::vector<unsigned char> fixed;
  //! Patchable bytes: kernel argument bytes at their offsets; memcpy source | destination; memset destination |
  //! value (4-byte elements only).
  std::vector<unsigned char> bytes;
  //! (offset, size) of each field inside `bytes` (kernel parameters; memcpy: source, destination; memset:
  //! destination, value).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> fields;
  //! For setting them: the parameter blocks read from the node (pointers in them are replaced from `bytes`).
  CUDA_KERNEL_NODE_PARAMS kernel{};
  cudaMemcpy3DParms copy{};
  cudaMemsetParams fill{};
  //! Kernel nodes: pointers to each parameter inside `bytes` (filled when the fields are set).
  std::vector<void*> argument_pointers;
};

//! Appends the bytes of `value` to `out` (the fixed and patchable words of node_fields).
template <class T>
void append_word(std::vector<unsigned char>& out, const T& value) {
  const auto* p = reinterpret_cast<const unsigned char*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

//! The word of `width` bytes (at most 8) at `offset` of `bytes`, zero-extended; 0 when it lies past the end.
[[nodiscard]] inline std::uint64_t read_word(const std::vector<unsigned char>& bytes, std::uint32_t offset,
                                             std::uint32_t width) noexcept {
  std::uint64_t v = 0;
  if (offset + width <= bytes.size()) std::memcpy(&v, bytes.data() + offset, width); // little-endian hosts only
  return v;
}

} // namespace conveyor::detail
