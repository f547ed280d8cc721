#pragma once
//! \file graphed_types.hpp
//! The options, statistics, argument keys and padded sizes of the assembly line (conveyor::graphed).

#include "conveyor/define/capture.hpp"
#include "conveyor/execute/instantiate_flags.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor {

//! A size the callable works on, padded by graphed to the next captured bucket. The caller passes
//! `batch_size{n}`; the callable receives `real` = n and `padded` = the bucket (or n when no buckets are set),
//! sizes its launches by `padded` and masks by `real`.
struct batch_size {
  std::size_t real = 0;   //!< the caller's size (elements, rows, ...)
  std::size_t padded = 0; //!< the size the work is launched for: the bucket graphed pads `real` to
  //! Size 0.
  constexpr batch_size() = default;
  //! A size of `n`, not padded yet (graphed sets `padded` to the bucket).
  constexpr explicit batch_size(std::size_t n) : real(n), padded(n) {}
  //! A size of `n` padded to `p` (for eager calls that mirror a graphed one).
  constexpr batch_size(std::size_t n, std::size_t p) : real(n), padded(p) {}
};

//! Options of a graphed callable.
struct graphed_options {
  //! Eager calls per new shape before capturing (warm-up on the capture stream: lazy library initialisation,
  //! workspace allocation, autotuning happen outside the graph).
  int warmup_calls = 1;
  //! Most executable graphs kept; the least recently used is evicted beyond this (destroyed once the work queued on
  //! the evicting call's stream has finished; the call itself does not wait).
  std::size_t max_graphs = 16;
  //! Captured sizes for batch_size arguments, any order; empty: no padding (every size its own graph).
  std::vector<std::size_t> buckets;
  //! Positions (0-based, after the stream) of pointer arguments the caller promises never change. A call where one
  //! changed is refused with std::invalid_argument before anything runs (a replay would read the old address).
  std::vector<std::size_t> static_arguments;
  //! Flags for every instantiation (e.g. auto_free_on_launch when the callable allocates with cudaMallocAsync).
  instantiate_flags flags = instantiate_flags::none;
  //! Run the callable eagerly (no graphs at all): the same code path, for comparison and debugging.
  bool disabled = false;
  //! Capture mode.
  capture_mode mode = capture_mode::thread_local_;
  //! Most recent reasons kept for report().
  std::size_t max_reasons = 64;
};

//! Counts of what a graphed callable did.
struct graphed_statistics {
  std::size_t calls = 0;               //!< all calls
  std::size_t warmups = 0;             //!< eager warm-up calls
  std::size_t captures = 0;            //!< captures (each followed by instantiate or update)
  std::size_t replays = 0;             //!< graph launches
  std::size_t per_node_updates = 0;    //!< in-place updates that set only the changed nodes
  std::size_t nodes_set = 0;           //!< nodes set by those updates
  std::size_t whole_graph_updates = 0; //!< in-place updates through cudaGraphExecUpdate
  std::size_t unchanged_recaptures = 0; //!< re-captures that found nothing to update
  std::size_t instantiations = 0;      //!< executable graphs made (first capture of a shape, or topology change)
  std::size_t eager_fallbacks = 0;     //!< calls run eagerly because no graph fits (e.g. above the largest bucket)
  std::size_t evictions = 0;           //!< executable graphs dropped by the LRU cap
};

namespace detail {

//! How an argument takes part in choosing and updating a graph.
enum class arg_role : std::uint8_t {
  ignored,        //!< not keyed (types graphed cannot read; supply a key function)
  shape,          //!< integral value or padded batch size: picks the executable graph
  binding,        //!< pointer or scalar the graph embeds: a change updates the graph in place
  static_pointer, //!< pointer declared static: a change is an error
};

//! One argument as graphed sees it.
struct arg_value {
  std::uint64_t bits = 0;            //!< the value (an address for pointers, the bit pattern for scalars)
  arg_role role = arg_role::ignored; //!< how it is keyed
  std::uint8_t position = 0;         //!< argument position (0-based, after the stream)
  char type = '?';                   //!< 'p' pointer, 'i' integral, 'f' float, 'd' double, 'b' batch size (padded), 'r' real
};

//! The arguments of one call (at most 16).
struct call_key {
  static constexpr std::size_t capacity = 16;
  std::array<arg_value, capacity> args{};
  std::size_t count = 0;
  std::uint64_t user_key = 0; //!< from a user key function, part of the shape
  bool has_user_key = false;
  [[nodiscard]] bool same_shape(const call_key& other) const noexcept;
  [[nodiscard]] bool same_binding(const call_key& other) const noexcept;
};

} // namespace detail
} // namespace conveyor
