#pragma once
//! \file chain_sinks.hpp
//! Internal to chain.cpp: the chain is written once (define_chain in chain.cpp) against a "sink" that either
//! enqueues each operation on streams (eager_sink), adds it to a graph (graph_sink), or compares it with the node
//! already in an executable graph and updates the node when its arguments changed (update_sink).
//!
//! A sink offers, for operations placed on one of three lanes (streams in the eager modes, branches in the graph):
//!   token kernel(lane, {deps}, label, launch_config, fn, args...)
//!   token copy(lane, {deps}, label, dst, src, bytes, kind)
//!   void  join(lane, {deps})
//! Operations on one lane run in order; `deps` name operations of other lanes to wait for.

#include <conveyor/define/graph.hpp>
#include <conveyor/define/kernel_args.hpp>
#include <conveyor/error.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor::filter::detail {

//! The lanes: the main one (upload, grey blur, Sobel x, magnitude, threshold, edges download), the Sobel y branch
//! and the colour (unsharp mask) branch.
inline constexpr int lanes = 3;
inline constexpr int main_lane = 0;
inline constexpr int gradient_lane = 1;
inline constexpr int colour_lane = 2;

//! Throws conveyor::cuda_error for a failed call naming the operation.
inline void check_op(cudaError_t rc, const char* call, std::string_view label) {
  if (rc != cudaSuccess) check(rc, std::string(call) + " for '" + std::string(label) + "'");
}

//! Enqueues on three streams (events order the lanes); with `sync_each`, synchronises after every operation.
class eager_sink {
public:
  struct token {
    int lane = 0;
    std::uint64_t position = 0; //!< 1-based index of the operation on its lane in this frame
  };

  eager_sink(const std::array<stream, lanes>& streams, const std::array<event, lanes>& events, bool sync_each) :
      streams_(streams),
      events_(events),
      sync_each_(sync_each) {}

  template <class... P, class... A>
  token kernel(int lane, std::initializer_list<token> deps, std::string_view label, const launch_config& cfg,
               void (*fn)(P...), A&&... args) {
    wait_for(lane, deps);
    auto values = make_kernel_args(fn, std::forward<A>(args)...);
    check_op(cudaLaunchKernel(reinterpret_cast<const void*>(fn), cfg.grid, cfg.block, values.pointers(),
                              cfg.shared_bytes, streams_[lane].get()),
             "cudaLaunchKernel", label);
    return done(lane, label);
  }

  token copy(int lane, std::initializer_list<token> deps, std::string_view label, void* dst, const void* src,
             std::size_t bytes, cudaMemcpyKind kind) {
    wait_for(lane, deps);
    check_op(cudaMemcpyAsync(dst, src, bytes, kind, streams_[lane].get()), "cudaMemcpyAsync", label);
    return done(lane, label);
  }

  void join(int lane, std::initializer_list<token> deps) { wait_for(lane, deps); }

private:
  // Makes `lane` wait for each dependency on another lane: records that lane's event (unless a record made since
  // the dependency was enqueued can serve) and waits for it. In sync mode everything enqueued is complete already.
  void wait_for(int lane, std::initializer_list<token> deps) {
    if (sync_each_) return;
    for (const token& d : deps) {
      if (d.lane == lane) continue;
      const auto other = static_cast<std::size_t>(d.lane);
      if (recorded_[other] < d.position) {
        events_[other].record(streams_[other]);
        recorded_[other] = issued_[other];
      }
      streams_[static_cast<std::size_t>(lane)].wait(events_[other]);
    }
  }

  token done(int lane, std::string_view label) {
    const auto l = static_cast<std::size_t>(lane);
    if (sync_each_) check_op(cudaStreamSynchronize(streams_[l].get()), "cudaStreamSynchronize", label);
    return {lane, ++issued_[l]};
  }

  const std::array<stream, lanes>& streams_;
  const std::array<event, lanes>& events_;
  bool sync_each_;
  std::array<std::uint64_t, lanes> issued_{};   // operations enqueued per lane in this frame
  std::array<std::uint64_t, lanes> recorded_{}; // position covered by the lane's last event record in this frame
};

//! The bytes of an operation's arguments, to tell whether a node's parameters changed. Fixed capacity: no
//! allocation per frame.
struct signature {
  std::array<std::byte, 512> bytes{};
  std::size_t size = 0;
  void clear() noexcept { size = 0; }
  friend bool operator==(const signature& a, const signature& b) noexcept {
    return a.size == b.size && std::memcmp(a.bytes.data(), b.bytes.data(), a.size) == 0;
  }
};

template <class T>
void append(signature& sig, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>, "signature: arguments must be trivially copyable");
  if (sig.size + sizeof(T) > sig.bytes.size()) throw std::logic_error("filter chain: kernel arguments too large");
  std::memcpy(sig.bytes.data() + sig.size, &value, sizeof(T));
  sig.size += sizeof(T);
}

template <class... P, class... A>
void kernel_signature(signature& sig, void (*fn)(P...), A&&... args) {
  sig.clear();
  append(sig, reinterpret_cast<const void*>(fn));
  auto values = make_kernel_args(fn, std::forward<A>(args)...);
  std::apply([&](const auto&... v) { (append(sig, v), ...); }, values.values());
}

inline void copy_signature(signature& sig, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  sig.clear();
  append(sig, dst);
  append(sig, src);
  append(sig, bytes);
  append(sig, kind);
}

//! What graph_sink records for update_sink: each operation's node, label and argument signature, in order.
struct graph_record {
  std::vector<node> nodes;
  std::vector<std::string_view> labels;
  std::vector<signature> signatures;
};

//! Adds each operation to a graph: a node depending on the previous node of its lane and on `deps`.
class graph_sink {
public:
  using token = node;

  graph_sink(graph& g, graph_record& record) : graph_(g), record_(record) {}

  template <class... P, class... A>
  token kernel(int lane, std::initializer_list<token> deps, std::string_view label, const launch_config& cfg,
               void (*fn)(P...), A&&... args) {
    signature sig;
    kernel_signature(sig, fn, args...);
    node n = graph_.kernel(after(lane, deps), cfg, fn, std::forward<A>(args)...);
    return added(lane, n, label, sig);
  }

  token copy(int lane, std::initializer_list<token> deps, std::string_view label, void* dst, const void* src,
             std::size_t bytes, cudaMemcpyKind kind) {
    signature sig;
    copy_signature(sig, dst, src, bytes, kind);
    node n = graph_.memcpy(after(lane, deps), dst, src, bytes, kind);
    return added(lane, n, label, sig);
  }

  void join(int, std::initializer_list<token>) {} // a graph launch ends when all its nodes have

private:
  std::vector<node> after(int lane, std::initializer_list<token> deps) const {
    std::vector<node> all(deps.begin(), deps.end());
    if (const node& last = last_[static_cast<std::size_t>(lane)]) all.push_back(last);
    return all;
  }
  token added(int lane, node n, std::string_view label, const signature& sig) {
    n.label(std::string(label));
    last_[static_cast<std::size_t>(lane)] = n;
    record_.nodes.push_back(n);
    record_.labels.push_back(label);
    record_.signatures.push_back(sig);
    return n;
  }

  graph& graph_;
  graph_record& record_;
  std::array<node, lanes> last_{};
};

//! Passes the kernels to `Inner` and leaves the copies out: the chain's compute alone, for the pipelined mode
//! (conveyor::frame_pipeline adds the copies, into and out of its own slots). A left-out copy's token is empty:
//! define_chain makes no kernel depend on a copy's token, only on its lane's order.
template <class Inner>
class kernels_only_sink {
public:
  using token = typename Inner::token;

  explicit kernels_only_sink(Inner& inner) : inner_(inner) {}

  template <class... P, class... A>
  token kernel(int lane, std::initializer_list<token> deps, std::string_view label, const launch_config& cfg,
               void (*fn)(P...), A&&... args) {
    return inner_.kernel(lane, deps, label, cfg, fn, std::forward<A>(args)...);
  }

  token copy(int, std::initializer_list<token>, std::string_view, void*, const void*, std::size_t, cudaMemcpyKind) {
    return token{};
  }

  void join(int, std::initializer_list<token>) {} // only copies are joined (the colour branch's download)

private:
  Inner& inner_;
};

//! Walks the chain in the order graph_sink built it; where an operation's arguments differ from those its node
//! holds, sets them on the executable graph (set_kernel_args / set_memcpy) and counts the node.
class update_sink {
public:
  struct token {};

  update_sink(graph_exec& exec, graph_record& record, std::vector<std::string_view>& updated) :
      exec_(exec),
      record_(record),
      updated_(updated) {
    updated_.clear();
  }

  template <class... P, class... A>
  token kernel(int, std::initializer_list<token>, std::string_view, const launch_config&, void (*fn)(P...),
               A&&... args) {
    kernel_signature(scratch_, fn, args...);
    if (changed()) exec_.set_kernel_args(record_.nodes[index_], fn, std::forward<A>(args)...);
    return next();
  }

  token copy(int, std::initializer_list<token>, std::string_view, void* dst, const void* src, std::size_t bytes,
             cudaMemcpyKind kind) {
    copy_signature(scratch_, dst, src, bytes, kind);
    if (changed()) exec_.set_memcpy(record_.nodes[index_], dst, src, bytes, kind);
    return next();
  }

  void join(int, std::initializer_list<token>) {}

  //! Operations visited (must equal the graph's node count).
  [[nodiscard]] std::size_t visited() const noexcept { return index_; }

private:
  // True when the current operation's signature differs from the recorded one; then records the new one.
  // The record is updated before the setter runs: if the setter throws, the caller discards the executable graph.
  bool changed() {
    if (index_ >= record_.signatures.size())
      throw std::logic_error("filter chain: more operations than the graph has nodes");
    signature& old = record_.signatures[index_];
    if (old == scratch_) return false;
    old = scratch_;
    updated_.push_back(record_.labels[index_]);
    return true;
  }
  token next() {
    ++index_;
    return {};
  }

  graph_exec& exec_;
  graph_record& record_;
  std::vector<std::string_view>& updated_;
  signature scratch_;
  std::size_t index_ = 0;
};

} // namespace conveyor::filter::detail
