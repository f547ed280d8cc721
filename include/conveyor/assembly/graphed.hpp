#pragma once
//! \file graphed.hpp
//! conveyor::graphed: a callable that captures its GPU work once and replays it, keeps one executable graph per
//! shape, updates in place what changed, pads sizes to captured buckets, and says why it re-recorded.
//! Follows the practice of PyTorch's CUDA graph trees: warm-up on the capture stream, static shapes, readable
//! reasons when a graph is skipped or re-recorded.

#include "conveyor/assembly/graphed_core.hpp"
#include "conveyor/assembly/graphed_types.hpp"
#include "conveyor/define/capture.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

namespace conveyor {

namespace detail {
struct no_key {};

template <class T>
void classify(call_key& key, const T& value, std::size_t position, bool user_keyed,
              const std::vector<std::size_t>& static_positions) {
  auto add = [&](std::uint64_t bits, arg_role role, char type) {
    if (key.count == call_key::capacity)
      throw std::invalid_argument("conveyor::graphed: more than 16 keyed arguments; supply a key function");
    key.args[key.count++] = arg_value{bits, role, static_cast<std::uint8_t>(position), type};
  };
  if constexpr (std::is_same_v<T, batch_size>) {
    add(value.padded, user_keyed ? arg_role::binding : arg_role::shape, 'b');
    add(value.real, arg_role::binding, 'r');
  } else if constexpr (std::is_pointer_v<T>) {
    bool is_static = std::find(static_positions.begin(), static_positions.end(), position) != static_positions.end();
    add(reinterpret_cast<std::uintptr_t>(value), is_static ? arg_role::static_pointer : arg_role::binding, 'p');
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    add(static_cast<std::uint64_t>(value), user_keyed ? arg_role::binding : arg_role::shape, 'i');
  } else if constexpr (std::is_floating_point_v<T>) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    add(bits, arg_role::binding, sizeof(T) == sizeof(float) ? 'f' : 'd');
  }
  // other types are not keyed
}
} // namespace detail

//! A graphed callable. Wraps `f(const stream&, args...)`, a function that enqueues GPU work on the stream.
//!
//! Per call: the arguments make a key. Integral arguments and the padded value of batch_size arguments are the
//! *shape* (or the user's key function decides it); pointers, floating-point values and the real value of
//! batch_size arguments are the *binding* the graph embeds.
//! - a new shape runs eagerly `warmup_calls` times, then is captured and instantiated;
//! - a known shape with the same binding replays its executable graph (one cudaGraphLaunch);
//! - a known shape with another binding is captured again and the executable graph updated in place, setting only
//!   the nodes that differ (graph_exec::update_incremental), falling back to whole-graph update, then to
//!   re-instantiation; the reason ("argument 1 pointer changed from 0x... to 0x...") is recorded;
//! - a batch_size above the largest bucket runs eagerly, with the reason recorded.
//! Arguments are copied for the call. Graphs allocating with cudaMallocAsync draw on the device's graph memory
//! pool, which all executable graphs share; capture buckets largest first (prepare) so smaller graphs reuse it.
template <class F, class Key = detail::no_key>
class graphed {
public:
  //! \param f       the callable, `void f(const conveyor::stream&, Args...)`
  //! \param options warm-up count, buckets, cache size, static arguments, flags
  //! \param key     optional `std::uint64_t key(const Args&...)` choosing the graph instead of the integral
  //!                arguments (which then count as binding)
  //! \throws std::invalid_argument when max_graphs is 0, warmup_calls is negative or a bucket is 0.
  explicit graphed(F f, graphed_options options = {}, Key key = {})
      : f_(std::move(f)), key_(std::move(key)), core_(std::move(options)) {}

  //! Runs the work for these arguments on `s`: eagerly, by replay, or by capture (see the class comment).
  //! \throws std::invalid_argument when a static argument changed or more than 16 values are keyed (a batch_size
  //!         counts twice); cuda_error from capture, instantiate, update
  //!         or launch; whatever `f` throws (a capture it throws from is ended and discarded).
  template <class... Args>
  void operator()(const stream& s, Args&&... args) {
    std::tuple<std::decay_t<Args>...> values(std::forward<Args>(args)...);
    if (core_.options().disabled) {
      std::apply([&](auto&... v) { f_(s, v...); }, values);
      return;
    }
    if (auto oversized = pad(values)) {
      core_.note_fallback(oversized->first, oversized->second);
      std::apply([&](auto&... v) { f_(s, v...); }, values);
      return;
    }
    const detail::call_key key = make_key(values);
    switch (core_.plan(key)) {
    case detail::call_plan::replay: core_.replay(s); return;
    case detail::call_plan::eager_warmup:
    case detail::call_plan::eager_fallback: std::apply([&](auto&... v) { f_(s, v...); }, values); return;
    case detail::call_plan::capture_new: core_.add_and_launch(key, record(s, values), s); return;
    case detail::call_plan::recapture: core_.update_and_launch(key, record(s, values), s); return;
    }
  }

  //! Prepares every bucket before use, largest first: runs the warm-up calls at the largest bucket, then captures
  //! and instantiates each bucket (without running it). `args` are those of a normal call; each batch_size among
  //! them is replaced by {bucket, bucket}.
  //! \throws as operator().
  template <class... Args>
  void prepare(const stream& s, Args&&... args) {
    std::vector<std::size_t> sizes = core_.options().buckets;
    std::sort(sizes.rbegin(), sizes.rend());
    std::tuple<std::decay_t<Args>...> values(std::forward<Args>(args)...);
    bool first = true;
    for (std::size_t bucket : sizes) {
      set_batch(values, batch_size{bucket, bucket});
      const detail::call_key key = make_key(values);
      for (int i = 0; first && i < core_.options().warmup_calls; ++i)
        std::apply([&](auto&... v) { (*this)(s, v...); }, values);
      first = false;
      if (!core_.has_shape(key)) core_.add(key, record(s, values));
    }
  }

  //! What the callable did so far.
  [[nodiscard]] const graphed_statistics& statistics() const noexcept { return core_.statistics(); }
  //! The most recent reasons for captures, updates and eager runs, oldest first.
  [[nodiscard]] const std::deque<std::string>& reasons() const noexcept { return core_.reasons(); }
  //! Executable graphs cached now.
  [[nodiscard]] std::size_t cached_graphs() const noexcept { return core_.cached_graphs(); }
  //! A readable table of statistics and recent reasons, headed by `name`.
  [[nodiscard]] std::string report(std::string_view name = "graphed") const { return core_.report(name); }

private:
  template <class Tuple>
  detail::call_key make_key(const Tuple& values) const {
    detail::call_key key;
    constexpr bool user_keyed = !std::is_same_v<Key, detail::no_key>;
    if constexpr (user_keyed) {
      key.user_key = std::apply([&](const auto&... v) { return static_cast<std::uint64_t>(key_(v...)); }, values);
      key.has_user_key = true;
    }
    const auto& statics = core_.options().static_arguments;
    std::apply(
        [&](const auto&... v) {
          std::size_t position = 0;
          (detail::classify(key, v, position++, user_keyed, statics), ...);
        },
        values);
    return key;
  }

  // Pads every batch_size to its bucket; returns (position, size) of one above the largest bucket.
  template <class Tuple>
  std::optional<std::pair<std::size_t, std::size_t>> pad(Tuple& values) const {
    std::optional<std::pair<std::size_t, std::size_t>> reason;
    std::apply(
        [&](auto&... v) {
          std::size_t position = 0;
          (
              [&](auto& value) {
                if constexpr (std::is_same_v<std::decay_t<decltype(value)>, batch_size>) {
                  if (auto bucket = core_.bucket_for(value.real))
                    value.padded = *bucket;
                  else if (!reason)
                    reason.emplace(position, value.real);
                }
                ++position;
              }(v),
              ...);
        },
        values);
    return reason;
  }

  template <class Tuple>
  static void set_batch(Tuple& values, batch_size size) {
    std::apply(
        [&](auto&... v) {
          (
              [&](auto& value) {
                if constexpr (std::is_same_v<std::decay_t<decltype(value)>, batch_size>) value = size;
              }(v),
              ...);
        },
        values);
  }

  template <class Tuple>
  graph record(const stream& s, Tuple& values) {
    return capture(
        s, [&] { std::apply([&](auto&... v) { f_(s, v...); }, values); }, core_.options().mode);
  }

  F f_;
  [[no_unique_address]] Key key_;
  detail::graphed_core core_;
};

} // namespace conveyor
