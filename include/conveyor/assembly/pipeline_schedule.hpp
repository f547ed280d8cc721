#pragma once
//! \file pipeline_schedule.hpp
//! conveyor::pipeline_schedule: the software-pipelining schedule behind conveyor::frame_pipeline,
//! as plain C++ (no CUDA call): a step is three stages (upload, compute, download); at step k the
//! stage of lag L handles item k - L, in slot (k - L) mod slots. Steps before the first items
//! (prologue) and after the last (epilogue) leave out the stages that have no item.

#include "conveyor/cxx20.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

namespace conveyor {

//! The three stages of a pipelined step, in the order each item passes through them.
enum class pipeline_stage : std::uint8_t {
  upload = 0,   //!< host to device copies of the item's inputs into its slot
  compute = 1,  //!< the work on the slot's device buffers
  download = 2, //!< device to host copies of the slot's outputs into the item's host buffers
};

//! Number of stages of a step.
inline constexpr std::size_t pipeline_stage_count = 3;
//! The stages in item order.
inline constexpr std::array<pipeline_stage, pipeline_stage_count> all_pipeline_stages{
    pipeline_stage::upload, pipeline_stage::compute, pipeline_stage::download};
//! The deepest pipeline: one item in flight per stage.
inline constexpr std::size_t max_pipeline_depth = pipeline_stage_count;

//! "upload", "compute" or "download". Never throws.
[[nodiscard]] std::string_view to_string(pipeline_stage s) noexcept;

//! Lag of each stage (indexed by pipeline_stage): at step k the stage of lag L handles item k - L.
//! Stages of equal lag handle the same item, one after the other, inside one step.
using pipeline_lags = std::array<std::size_t, pipeline_stage_count>;

//! The default lags of a pipeline of `depth` items in flight: 1 -> {0, 0, 0} (no overlap), 2 -> {0,
//! 1, 1} (upload of item k beside compute then download of item k - 1), 3 -> {0, 1, 2} (upload k,
//! compute k - 1, download k - 2).
//! \throws std::invalid_argument when `depth` is not 1, 2 or 3.
[[nodiscard]] pipeline_lags default_pipeline_lags(std::size_t depth);

//! What one step does: for each stage (indexed by pipeline_stage) the item it handles and that
//! item's slot, or pipeline_step::none when the stage has no item at this step (prologue,
//! epilogue). A plain value.
struct pipeline_step {
  //! Marks a stage without an item.
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  //! item index per stage, or none
  std::array<std::size_t, pipeline_stage_count> item{none, none, none};
  std::array<std::size_t, pipeline_stage_count> slot{none, none, none}; //!< slot per stage, or none

  //! True when stage `s` has an item at this step.
  [[nodiscard]] bool active(pipeline_stage s) const noexcept {
    return item[static_cast<std::size_t>(s)] != none;
  }
  //! True when no stage has an item.
  [[nodiscard]] bool empty() const noexcept {
    return item[0] == none && item[1] == none && item[2] == none;
  }
  //! The item stage `s` handles (none when inactive).
  [[nodiscard]] std::size_t item_of(pipeline_stage s) const noexcept {
    return item[static_cast<std::size_t>(s)];
  }
  //! The slot stage `s` works in (none when inactive).
  [[nodiscard]] std::size_t slot_of(pipeline_stage s) const noexcept {
    return slot[static_cast<std::size_t>(s)];
  }
  //! Equal items and slots.
  friend bool operator==(const pipeline_step&, const pipeline_step&) = default;
};

//! The schedule of a pipeline: which item and slot each stage has at each step. Invariants (checked
//! by the host tests for every valid lag set): each item passes through upload, compute and
//! download exactly once, in that order, and in item order; a slot is never given to a new item
//! before the item it holds has been downloaded; the items of one step's stages of different lags
//! are different, so they run as independent branches. Thread safety: a plain value; const methods
//! may be called from several threads.
class pipeline_schedule {
public:
  //! The schedule of default_pipeline_lags(depth).
  //! \throws std::invalid_argument when `depth` is not 1, 2 or 3.
  explicit pipeline_schedule(std::size_t depth);
  //! A schedule with explicit lags: lags[upload] must be 0, and each later stage's lag equal to the
  //! previous one's or one more (a larger jump would hold an item in flight for a step with nothing
  //! to do).
  //! \throws std::invalid_argument naming the stage whose lag is wrong.
  explicit pipeline_schedule(const pipeline_lags& lags);

  //! Items in flight at once: the largest lag + 1 (1 to 3).
  [[nodiscard]] std::size_t depth() const noexcept { return lags_[pipeline_stage_count - 1] + 1; }
  //! Slots (sets of device buffers) the pipeline rotates through: depth().
  [[nodiscard]] std::size_t slots() const noexcept { return depth(); }
  //! The lag of stage `s`.
  [[nodiscard]] std::size_t lag(pipeline_stage s) const noexcept {
    return lags_[static_cast<std::size_t>(s)];
  }
  //! All lags.
  [[nodiscard]] const pipeline_lags& lags() const noexcept { return lags_; }
  //! The slot of item `item`: item mod slots().
  [[nodiscard]] std::size_t slot_of(std::size_t item) const noexcept { return item % slots(); }

  //! Step `k` (0-based) of a run of which items 0 .. pushed - 1 exist so far: stage s handles item
  //! k - lag(s) when 0 <= k - lag(s) < pushed. While items are pushed (step k pushes item k) pass
  //! pushed = k + 1; to drain a run of n items, steps n .. n + depth() - 2 with pushed = n.
  [[nodiscard]] pipeline_step step(std::size_t k, std::size_t pushed) const noexcept;
  //! Steps a run of `items` items takes, prologue and epilogue included: items + depth() - 1 (0 for
  //! no item).
  [[nodiscard]] std::size_t steps(std::size_t items) const noexcept {
    return items == 0 ? 0 : items + depth() - 1;
  }

private:
  pipeline_lags lags_{};
};

} // namespace conveyor
