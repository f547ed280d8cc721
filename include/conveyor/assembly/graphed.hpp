#pragma once
//! \file graphed.hpp
//! conveyor::graphed: a callable that captures its GPU work once and replays it, keeps one
//! executable graph per shape, updates in place what changed, pads sizes to captured buckets, and
//! says why it re-recorded. Follows the practice of PyTorch's CUDA graph trees: warm-up on the
//! capture stream, static shapes, readable reasons when a graph is skipped or re-recorded.
//!
//! **The rule: a call is keyed by its arguments' own bytes, and nothing else.** What a pointer or
//! span argument points to is not keyed, nor are references the callable captured, nor globals. A
//! callable that reads such state on the host to decide its work (a grid, a kernel, a node count)
//! replays the work of the call that was captured, not what its eager call would launch now:
//!
//!     void step(const conveyor::stream& s, const params* p, float* x) { scale<<<(p->n + 255) /
//!     256, 256, 0, s.get()>>>(p->n, x);   // reads *p on the host } conveyor::graphed run(step);
//!     run(s, &p, x);  p.n *= 2;  run(s, &p, x);   // replays the old grid: pass n as an argument
//!     instead
//!
//! Pass such values as arguments (they are then keyed), or audit: graphed_options::audit_every, or
//! the environment variable CONVEYOR_AUDIT_EVERY=N for a whole program without changing code,
//! re-captures every N-th replayed call and throws audit_error naming the node that differs
//! (docs/assembly-line.md).

#include "conveyor/assembly/graph_cache.hpp"
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

//! How key_argument keys arguments of one graphed callable.
struct keying {
  //! a key function chooses the shape: integers become binding
  bool user_keyed = false;
  //! positions of pointers declared static (may be null)
  const std::vector<std::size_t>* statics = nullptr;
};

//! True when graphed can key an argument of type T by itself: batch_size, pointers, integral, enum
//! and floating-point values, any other trivially copyable value (compared by its bytes), and
//! unkeyed<T> (skipped).
template <class T>
inline constexpr bool keyable_argument = std::is_trivially_copyable_v<T>;
//! An unkeyed<T> argument is always accepted: the key skips it.
template <class T>
inline constexpr bool keyable_argument<unkeyed<T>> = true;

//! Records `value`, argument `position` of a graphed call, in `key`:
//! - batch_size: the padded size (shape, or binding with a key function) and the real size
//!   (binding);
//! - pointers: binding (static_pointer when declared static);
//! - integral and enum values: shape (binding with a key function);
//! - floating-point values: binding, by bit pattern;
//! - any other trivially copyable value (a struct holding pointers, a std::span, ...): binding,
//!   by its bytes (padding bytes included: a spurious difference costs a re-capture, never a stale
//!   replay);
//! - unkeyed<T>: nothing. Other types do not compile (see graphed), unless `Lenient` (a key
//!   function covers them): then they are skipped.
//! \throws std::invalid_argument when the key is full (call_key::capacity).
template <bool Lenient = false, class T>
void key_argument(call_key& key, const T& value, std::size_t position, const keying& how) {
  if constexpr (std::is_same_v<T, batch_size>) {
    key.add(value.padded, how.user_keyed ? argument_role::binding : argument_role::shape,
            argument_kind::padded_size, position);
    key.add(value.real, argument_role::binding, argument_kind::real_size, position);
  } else if constexpr (std::is_pointer_v<T>) {
    const bool is_static =
        how.statics != nullptr &&
        std::find(how.statics->begin(), how.statics->end(), position) != how.statics->end();
    key.add(reinterpret_cast<std::uintptr_t>(value),
            is_static ? argument_role::static_pointer : argument_role::binding,
            argument_kind::pointer, position);
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    std::uint64_t bits = 0;
    if constexpr (std::is_enum_v<T>)
      bits = static_cast<std::uint64_t>(static_cast<std::underlying_type_t<T>>(value));
    else bits = static_cast<std::uint64_t>(value);
    key.add(bits, how.user_keyed ? argument_role::binding : argument_role::shape,
            argument_kind::integer, position, sizeof(T));
  } else if constexpr (std::is_floating_point_v<T> && sizeof(T) <= sizeof(std::uint64_t)) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    key.add(bits, argument_role::binding, argument_kind::floating, position, sizeof(T));
  } else if constexpr (is_unkeyed<T>) {
    // the caller says it does not change the work
  } else if constexpr (std::is_trivially_copyable_v<T>) {
    key.add_bytes(&value, sizeof(T), argument_role::binding, position);
  } else {
    static_assert(Lenient || !sizeof(T*), "conveyor::graphed: an argument type is not trivially "
                                          "copyable, so graphed cannot tell whether it "
                                          "changed between calls (a replay could run with stale "
                                          "values). Wrap it in conveyor::unkeyed{...} "
                                          "if it does not change the captured work, pass what the "
                                          "work uses (pointers, sizes) instead, or "
                                          "give graphed a key function");
  }
}

//! A graphed callable. Wraps `f(const stream&, args...)`, a function that enqueues GPU work on the
//! stream.
//!
//! Per call: the arguments make a key (key_argument). Integral arguments and the padded value of
//! batch_size arguments are the *shape* (or the user's key function decides it); pointers,
//! floating-point values, the real value of batch_size arguments and every other trivially copyable
//! value (by its bytes: a struct of pointers swapped between calls is seen) are the *binding* the
//! graph embeds. An argument type graphed cannot compare (not trivially copyable) does not compile
//! unless it is wrapped in conveyor::unkeyed or a key function is given.
//! - a new shape runs eagerly `warmup_calls` times, then is captured and instantiated (or, with
//!   graphed_options::instantiate_in_background, instantiated on a worker thread while its calls
//!   run eagerly);
//! - a known shape with the same binding replays its executable graph (one cudaGraphLaunch);
//! - a known shape with another binding is captured again and the executable graph updated in
//!   place — one whole-graph update (cudaGraphExecUpdate), or with recapture_update::per_node only
//!   the nodes that differ (graph_exec::update_incremental) — re-instantiating when CUDA cannot
//!   update it: the default, right whatever the callable does with the values (it may branch on
//!   them). The replaced graph definition is destroyed after the launch is queued, while the GPU
//!   runs;
//! - for arguments declared to flow only into node fields (rebind_policy::learn or patch, per
//!   argument or for the callable) a change is instead *rebound* once graphed knows where the
//!   values sit: the fields holding them (kernel arguments, copy and memset pointers, memset
//!   values) are patched in place with per-node setters, without capturing again (learn: the
//!   mapping is learnt from a re-capture and verified before it is trusted). The reason of every
//!   such call ("argument 1 pointer changed from 0x... to 0x...: re-captured, whole-graph update")
//!   is recorded (reasons());
//! - a batch_size its dimension's padding rule cannot pad (above the largest bucket or the rule's
//!   limit) runs eagerly, with the reason recorded;
//! - with the churn guard on (graphed_options::churn), a callable that keeps re-recording runs
//!   eagerly until its arguments settle, with the reasons recorded. Arguments are copied for the
//!   call. Patching is opt-in (rebind_policy: the callable may branch on a value, and only the
//!   callable's own code knows), and graphed sees only the arguments: state the callable reads
//!   otherwise (a lambda's captured references, globals) is not part of the key, so a replay runs
//!   what the capture saw. Every capture is checked (capture_options): work on a default stream,
//!   and copies from host memory that is gone after the call (the callable's locals, graphed's copy
//!   of the arguments), are refused; other pageable host memory in a copy is reported
//!   (pageable_policy). Graphs allocating with cudaMallocAsync draw on the device's graph memory
//!   pool, which all executable graphs share; capture buckets largest first (prepare) so smaller
//!   graphs reuse it.
template <class F, class Key = no_key>
class graphed {
public:
  //! \param f       the callable, `void f(const conveyor::stream&, Args...)`
  //! \param options warm-up count, buckets, cache size, static arguments, flags
  //! \param key     optional `std::uint64_t key(const Args&...)` choosing the graph instead
  //!        of the integral arguments (which then count as binding)
  //! \throws std::invalid_argument when max_graphs is 0, warmup_calls is negative or a bucket is 0.
  explicit graphed(F f, graphed_options options = {}, Key key = {}) :
      f_(std::move(f)),
      key_(std::move(key)),
      core_(std::move(options)) {}

  //! Runs the work for these arguments on `s`: eagerly, by replay, or by capture (see the class
  //! comment). Thread safety: not thread-safe; one graphed callable per thread (its captures use
  //! thread-local capture mode, so callables in different threads capture and update concurrently).
  //! \throws std::invalid_argument when a static argument changed or more than 16 values
  //!         are keyed (a batch_size counts twice); cuda_error from capture, instantiate, update or
  //!         launch; whatever `f` throws (a capture it throws from is ended and discarded); with
  //!         graphed_options::step_through, step_failure or nonfinite_error naming the node; with
  //!         graphed_options::audit_every, audit_error at an audited call whose executable graph
  //!         ran other work than the callable's capture.
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
    if (core_.options().step_through) {
      graph g = record(s, values);
      core_.step(g, s);
      return;
    }
    const call_key key = make_key(values);
    const call_plan plan = core_.plan(key);
    run(plan, key, s, values);
    if (core_.audit_due(plan)) core_.audit(record(s, values));
  }

  //! Prepares every shape before use, largest first: runs the warm-up calls at the largest shape,
  //! then captures, instantiates and uploads each shape on `s` (without running it), so that no
  //! first call of a shape pays for capture, instantiation or upload. The shapes are the
  //! combinations of the bucket lists of the batch_size arguments' dimensions
  //! (graph_cache::prepare_shapes: `buckets` for the arguments without a rule of their own,
  //! graphed_options::dimensions for the others); `args` are those of a normal call, each
  //! batch_size replaced by {size, size} of the shape (an argument whose dimension has no bucket
  //! list keeps its size, padded). Nothing is prepared when no dimension has a bucket list. With
  //! graphed_options::instantiate_in_background the buckets are instantiated and uploaded on the
  //! worker threads while the next ones are captured, and prepare returns once all are cached.
  //! \throws as operator().
  template <class... Args>
  void prepare(const stream& s, Args&&... args) {
    std::tuple<std::decay_t<Args>...> values(std::forward<Args>(args)...);
    const auto sizes = batch_sizes(values);
    bool first = true;
    stream_watch_hold watch; // one CUPTI subscription for all the buckets' watched captures
    for (const auto& shape : core_.prepare_shapes(sizes)) {
      set_batches(values, shape);
      const call_key key = make_key(values);
      for (int i = 0; first && i < core_.options().warmup_calls; ++i)
        std::apply([&](auto&... v) { (*this)(s, v...); }, values);
      if (first) watch = core_.hold_stream_watch(); // after the warm-up calls, which run eagerly
      first = false;
      if (!core_.has_shape(key)) core_.add(key, record(s, values, true), s);
    }
    // instantiate_in_background: every bucket cached before prepare returns
    core_.finish_background();
  }

  //! What the callable did so far.
  [[nodiscard]] const graphed_statistics& statistics() const noexcept { return core_.statistics(); }
  //! The most recent reasons for captures, updates and eager runs, oldest first.
  [[nodiscard]] const std::deque<std::string>& reasons() const noexcept { return core_.reasons(); }
  //! Executable graphs cached now.
  [[nodiscard]] std::size_t cached_graphs() const noexcept { return core_.cached_graphs(); }
  //! What each cached executable graph holds — nodes, graph allocations and their bytes, last use —
  //! most recently used first (graph_cache::cached; the byte budget is graphed_options::max_bytes).
  [[nodiscard]] std::vector<cached_graph> cached() const { return core_.cached(); }
  //! A readable table of statistics and recent reasons, headed by `name`.
  [[nodiscard]] std::string report(std::string_view name = "graphed") const {
    return core_.report(name);
  }
  //! Where each binding argument sits in the most recently used executable graph, and whether a
  //! change of it is patched in place or re-captured (graph_cache::bindings). \throws cuda_error
  //! when the graph cannot be read.
  [[nodiscard]] std::vector<argument_binding> bindings() { return core_.bindings(); }
  //! The most recently used executable graph's graph for the DOT/JSON exports, each node listing
  //! the arguments patched into it (graph_cache::describe). \throws cuda_error when the graph
  //! cannot be read.
  [[nodiscard]] graph_description describe() { return core_.describe(); }
  //! The cached executable graphs, most recently used first, read-only (graph_cache::executables):
  //! profile or export them without another capture. Valid until the next call of this graphed
  //! callable.
  [[nodiscard]] std::vector<const graph_exec*> executables() const { return core_.executables(); }
  //! The cache behind the callable: its buckets saved to a graph file, or started from one
  //! (conveyor/keep/graphed_file.hpp). Thread safety: as the callable's other calls.
  [[nodiscard]] graph_cache& cache() noexcept { return core_; }
  //! The cache behind the callable, read-only.
  [[nodiscard]] const graph_cache& cache() const noexcept { return core_; }

private:
  template <class Tuple>
  call_key make_key(const Tuple& values) const {
    call_key key;
    constexpr bool user_keyed = !std::is_same_v<Key, no_key>;
    if constexpr (user_keyed)
      key.set_user_key(std::apply(
          [&](const auto&... v) { return static_cast<std::uint64_t>(key_(v...)); }, values));
    const keying how{user_keyed, &core_.options().static_arguments};
    std::apply(
        [&](const auto&... v) {
          std::size_t position = 0;
          (key_argument<user_keyed>(key, v, position++, how), ...);
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
                  if (auto bucket = core_.bucket_for(position, value.real)) value.padded = *bucket;
                  else if (!reason) reason.emplace(position, value.real);
                }
                ++position;
              }(v),
              ...);
        },
        values);
    return reason;
  }

  // The (position, real size) of every batch_size argument, in order.
  template <class Tuple>
  static std::vector<std::pair<std::size_t, std::size_t>> batch_sizes(const Tuple& values) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::apply(
        [&](const auto&... v) {
          std::size_t position = 0;
          (
              [&](const auto& value) {
                if constexpr (std::is_same_v<std::decay_t<decltype(value)>, batch_size>)
                  out.emplace_back(position, value.real);
                ++position;
              }(v),
              ...);
        },
        values);
    return out;
  }

  // Sets the batch_size arguments, in order, to {shape[k], shape[k]}.
  template <class Tuple>
  static void set_batches(Tuple& values, const std::vector<std::size_t>& shape) {
    std::apply(
        [&](auto&... v) {
          std::size_t k = 0;
          (
              [&](auto& value) {
                if constexpr (std::is_same_v<std::decay_t<decltype(value)>, batch_size>) {
                  value = batch_size{shape[k], shape[k]};
                  ++k;
                }
              }(v),
              ...);
        },
        values);
  }

  // Carries out `plan` for the call with `key` and `values`.
  template <class Tuple>
  void run(call_plan plan, const call_key& key, const stream& s, Tuple& values) {
    switch (plan) {
    case call_plan::replay: core_.replay(s); return;
    case call_plan::eager_warmup:
    case call_plan::eager_guarded:
    case call_plan::eager_fallback:
    case call_plan::eager_instantiating:
      std::apply([&](auto&... v) { f_(s, v...); }, values);
      return;
    case call_plan::capture_new: core_.add_and_launch(key, record(s, values, true), s); return;
    case call_plan::capture_background:
      core_.add_in_background(key, record(s, values, true));
      std::apply([&](auto&... v) { f_(s, v...); }, values);
      return;
    case call_plan::recapture: core_.update_and_launch(key, record(s, values), s); return;
    case call_plan::rebind:
      if (core_.rebind_and_launch(key, s)) return;
      core_.update_and_launch(key, record(s, values), s); // CUDA refused a patch: capture after all
      return;
    }
  }

  // Captures the callable with `values` (the call's copy of its arguments, gone after the call: a
  // copy node that reads it is refused like one that reads the callable's locals), checks the
  // capture, applies the transform. `first_of_shape`: the first capture of its shape, which the
  // stream watch watches by default.
  template <class Tuple>
  graph record(const stream& s, Tuple& values, bool first_of_shape = false) {
    graph g = capture(
        s, [&] { std::apply([&](auto&... v) { f_(s, v...); }, values); },
        core_.capture_settings(first_of_shape));
    core_.inspect(g, &values, sizeof(values));
    if (core_.options().transform) {
      g.note_raw_change(); // the transform may set launch attributes through raw handles
      core_.options().transform(g);
    }
    return g;
  }

  F f_;
  [[no_unique_address]] Key key_;
  graph_cache core_;
};

} // namespace conveyor
