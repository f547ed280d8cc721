#pragma once
//! \file hash.hpp
//! FNV-1a (64 bits): the one number the workloads print or compare to say that two results are bitwise equal.
//! Header-only, no CUDA.

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace conveyor::scenarios {

//! FNV-1a's 64-bit offset basis: the hash of no bytes.
inline constexpr std::uint64_t fnv1a_basis = 14695981039346656037ULL;
//! FNV-1a's 64-bit prime.
inline constexpr std::uint64_t fnv1a_prime = 1099511628211ULL;

//! FNV-1a (64 bits) of `bytes`, continuing from `h` (fnv1a_basis for a new hash): for each byte, h = (h ^ byte) *
//! fnv1a_prime. Thread-safe. Never throws.
[[nodiscard]] constexpr std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h = fnv1a_basis) noexcept {
  for (const std::byte b : bytes) h = (h ^ static_cast<std::uint64_t>(b)) * fnv1a_prime;
  return h;
}

//! FNV-1a (64 bits) of the bytes of `values` as they lie in memory (so -0 and +0, or two NaN payloads, differ),
//! continuing from `h`. Thread-safe. Never throws.
template <class T>
requires std::is_trivially_copyable_v<T>
[[nodiscard]] std::uint64_t fnv1a_of(std::span<const T> values, std::uint64_t h = fnv1a_basis) noexcept {
  return fnv1a(std::as_bytes(values), h);
}

} // namespace conveyor::scenarios
