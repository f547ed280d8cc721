#pragma once
//! \file graphed_core.hpp
//! The non-template part of conveyor::graphed: the shape-keyed cache of executable graphs, LRU eviction,
//! statistics and reasons. Used through graphed; documented for maintainers.

#include "conveyor/assembly/graphed_types.hpp"
#include "conveyor/define/graph.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/runtime/event.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace conveyor::detail {

//! What a call should do, decided from its key.
enum class call_plan {
  eager_warmup,   //!< run the callable eagerly (warm-up of a new shape)
  eager_fallback, //!< run eagerly: no graph fits
  capture_new,    //!< capture and instantiate a new executable graph
  recapture,      //!< capture and update the matching executable graph in place (arguments changed)
  replay,         //!< launch the matching executable graph
};

class graphed_core {
public:
  explicit graphed_core(graphed_options options);
  graphed_core(const graphed_core&) = delete;
  graphed_core& operator=(const graphed_core&) = delete;
  graphed_core(graphed_core&&) noexcept = default;
  graphed_core& operator=(graphed_core&&) = delete; // would drop retired graphs without waiting for them
  //! Waits for the evicted executable graphs still in flight, then destroys everything; never throws.
  ~graphed_core();

  //! The bucket `n` pads to, or nullopt when `n` is above the largest bucket. Without buckets, `n` itself.
  [[nodiscard]] std::optional<std::size_t> bucket_for(std::size_t n) const noexcept;
  //! Decides what the call with `key` does; records warm-ups. Throws std::invalid_argument when a static argument
  //! changed.
  [[nodiscard]] call_plan plan(const call_key& key);
  //! After capture_new: instantiates `g` (evicting the least recently used graph beyond the cap: it is destroyed
  //! once the work queued on `s` so far has finished, without waiting for it here), then launches it on `s`.
  void add_and_launch(const call_key& key, graph g, const stream& s);
  //! Instantiates `g` for `key` without launching it (prepare).
  void add(const call_key& key, graph g);
  //! True when an executable graph for `key`'s shape exists.
  [[nodiscard]] bool has_shape(const call_key& key) const noexcept;
  //! After recapture: updates the matching executable graph to `g` (incrementally), then launches it on `s`.
  void update_and_launch(const call_key& key, graph g, const stream& s);
  //! Launches the matching executable graph on `s` (after plan returned replay).
  void replay(const stream& s);
  //! Records an eager fallback: argument `position` has size `size`, above the largest bucket.
  void note_fallback(std::size_t position, std::size_t size);

  [[nodiscard]] const graphed_statistics& statistics() const noexcept { return stats_; }
  [[nodiscard]] const std::deque<std::string>& reasons() const noexcept { return reasons_; }
  [[nodiscard]] const graphed_options& options() const noexcept { return options_; }
  [[nodiscard]] std::size_t cached_graphs() const noexcept { return entries_.size(); }
  //! A readable table of the statistics and the most recent reasons.
  [[nodiscard]] std::string report(std::string_view name) const;

private:
  struct entry {
    call_key key;
    graph_exec exec;
    std::uint64_t last_used = 0;
  };
  // An evicted executable graph, kept until `done` (recorded on the calling stream at eviction) has completed:
  // launches of it may still be queued there, and their host callables and buffers must outlive them.
  struct retired_graph {
    graph_exec exec;
    event done;
  };
  void note(std::string reason);
  entry& insert(const call_key& key, graph g, const stream* s);
  // Destroys the retired graphs whose work has finished.
  void reap() noexcept;
  [[nodiscard]] std::string describe_change(const call_key& from, const call_key& to) const;

  graphed_options options_;
  graphed_statistics stats_;
  std::deque<std::string> reasons_;
  std::vector<std::unique_ptr<entry>> entries_;
  std::vector<retired_graph> retired_;
  std::vector<std::pair<call_key, int>> warmups_; // per shape
  entry* matched_ = nullptr;                       // set by plan()
  std::uint64_t clock_ = 0;
};

} // namespace conveyor::detail
