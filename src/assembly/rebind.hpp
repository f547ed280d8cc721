#pragma once
// Internal (assembly layer): rebinding — patching the fields of an executable graph's nodes that embed a graphed
// call's arguments, without capturing again.
//
// The mapping from arguments to node fields is learnt, not guessed:
// 1. scan: every word of the graph's patchable fields (kernel argument bytes, memcpy source and destination, memset
//    destination and value) that equals a word of an argument's value, or, for an address, points into the same
//    allocation, is a candidate site (field = value + offset);
// 2. verify: at a re-capture in which arguments changed, each candidate site of a changed word must hold exactly the
//    new value + its offset (confirmed), or be unchanged (a coincidence: dropped); every changed byte of the graph
//    must be explained by a confirmed site, and nothing else may change (function, launch shape, sizes, other kinds
//    of node). A word seen so (rebind_verifications times) is verified;
// 3. patch: a call whose changed words are all verified writes them into the fields of their sites and sets those
//    nodes (per-node setters); anything else re-captures, and teaches.
// Anything the mapping cannot explain — a value the callable transforms, uses on the host, reads from memory, or
// passes into a child graph or a conditional body — sends that argument to re-capture for good, with the reason.
//
// The logic here is plain C++ over images of graphs (testable without a GPU); rebind_cuda.cpp reads images from CUDA
// graphs and applies patches to executable graphs.

#include "conveyor/assembly/graphed_types.hpp"
#include "conveyor/define/node_kind.hpp"
#include "kinds/fields.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor::detail {

//! What one node of a captured graph holds, as rebind reads and patches it: the node's fields as its kind reads
//! them (kinds/fields.hpp).
using node_image = node_fields;

//! A graph as rebind sees it: its nodes in creation order.
struct graph_image {
  std::vector<node_image> nodes;
};

//! The allocation an address belongs to: (base, size in bytes), or nullopt (not device memory).
using range_query = std::function<std::optional<std::pair<std::uint64_t, std::uint64_t>>(std::uint64_t)>;

//! What a re-capture tells rebind besides the two images.
struct recapture_facts {
  //! The executable graph took the new graph's parameters by its cheapest means (update none or per_node): no
  //! attribute or topology change, nothing that needed a whole-graph update or a new instantiation.
  bool clean_update = true;
  //! Nodes rebind does not image (host, child graph, conditional, event, ... nodes) whose parameters changed.
  std::vector<std::size_t> other_nodes_changed;
};

//! Settings of one rebinder.
struct rebind_settings {
  rebind_policy policy = rebind_policy::recapture;
  std::vector<std::pair<std::size_t, rebind_policy>> per_argument;
  int verifications = 1;
  [[nodiscard]] rebind_policy of(std::size_t position) const noexcept;
  //! True when the policy of `position` was given (in per_argument, or as the whole callable's policy other than
  //! the default recapture).
  [[nodiscard]] bool declared(std::size_t position) const noexcept;
};

//! The learnt mapping of one executable graph (one shape of a graphed callable) and the image of what it runs.
//! Not thread-safe (as graphed).
class rebinder {
public:
  explicit rebinder(rebind_settings settings) : settings_(std::move(settings)) {}

  //! Starts over from `image`, which the executable graph runs with the binding `key`: scans for candidate sites.
  void start(graph_image image, const call_key& key, const range_query& ranges);
  //! True once start() has been called.
  [[nodiscard]] bool started() const noexcept { return started_; }

  //! Learns from a re-capture: `next` was captured with `key` and the executable graph now runs it. Returns a
  //! readable note of what was learnt (empty when nothing).
  std::string learn(graph_image next, const call_key& key, const recapture_facts& facts, const range_query& ranges);

  //! True when a re-capture from `from` to `to` can teach something: a binding argument that changed is not sent to
  //! re-capture for good (or nothing was learnt yet). When false, the caller may skip learning and mark_stale().
  [[nodiscard]] bool can_learn(const call_key& from, const call_key& to) const;
  //! The executable graph was brought to another graph without learn(): the image is out of date until refresh().
  void mark_stale() noexcept { stale_ = true; }
  [[nodiscard]] bool stale() const noexcept { return stale_; }
  //! Takes `image` (what the executable graph runs now, with binding `key`) after mark_stale(): every verified site
  //! must still hold its argument's value (else that argument re-captures from now on); a graph of other nodes starts
  //! learning again. Returns a note of what changed (empty when nothing).
  std::string refresh(graph_image image, const call_key& key, const range_query& ranges);

  //! True when the executable graph, running the binding `from`, can be brought to `to` by patching alone. When
  //! not, `why` (if given) says which argument needs a re-capture.
  [[nodiscard]] bool can_patch(const call_key& from, const call_key& to, std::string* why = nullptr) const;

  //! Writes `to`'s changed words into the image (after can_patch) and returns the nodes whose fields changed, in
  //! ascending order. The caller applies those nodes to the executable graph.
  const std::vector<std::size_t>& patch(const call_key& from, const call_key& to);

  //! The image of what the executable graph runs.
  [[nodiscard]] graph_image& image() noexcept { return image_; }

  //! The mapping, one entry per binding argument, in argument order; node names from `name_of`.
  [[nodiscard]] std::vector<argument_binding> bindings(const std::function<std::string(std::size_t)>& name_of) const;

  //! The arguments that reach node `node`, one line each ("argument 1", "argument 0 +4096 B"), for exports.
  [[nodiscard]] std::vector<std::string> node_bindings(std::size_t node) const;

private:
  struct unit { // one word of one argument's value
    std::size_t entry = 0;
    std::size_t position = 0;
    std::uint32_t offset = 0;
    std::uint32_t width = 8;
    bool pointer = false;
    int rounds = 0; // clean re-captures in which it changed
    // A field holds it that no re-capture confirmed yet, and it is not trusted until one in which it changes does
    // (a declared argument whose field another argument also explains; a field that began to hold it).
    bool pending = false;
  };
  struct site {
    std::uint32_t node = 0;
    std::uint32_t offset = 0; // inside the node's bytes
    std::uint32_t width = 8;
    std::int64_t delta = 0;
    std::uint32_t unit = 0;
    bool confirmed = false;
  };
  struct argument { // per key entry
    std::size_t position = 0;
    argument_kind kind = argument_kind::pointer;
    binding_state state = binding_state::learning;
    // A binding entry. Shape and static entries are not rebound; their words are looked for all the same, so that a
    // field they explain is not taken for a declared argument's.
    bool binding = false;
    std::string reason;
  };

  void make_units(const call_key& key);
  void make_argument(std::size_t i, const argument_key& e, bool declared);
  void add_units(std::size_t i, const argument_key& e);
  void scan(const graph_image& image, const call_key& key, const range_query& ranges, const std::vector<bool>& which);
  void scan_unit(const graph_image& image, const call_key& key, const range_query& ranges, std::uint32_t k);
  void scan_node(const node_image& node, std::uint32_t n, std::uint32_t k, std::uint64_t v,
                 const std::optional<std::pair<std::uint64_t, std::uint64_t>>& range);
  [[nodiscard]] bool unit_verified(const unit& u) const noexcept;
  // False for a 4-byte view of a struct word that is a device address: the upper half of an address is the upper
  // half of every address near it, so its views are not looked for on their own (the 8-byte word is).
  [[nodiscard]] bool looked_for(const unit& u, const call_key& key, const range_query& ranges) const;
  // Two sites whose bytes overlap agree: views of the same bytes of one argument's value (as is, no offset).
  [[nodiscard]] bool same_bytes(const site& x, const site& y) const noexcept;
  // Words of `after` that differ from `before` (in bytes no confirmed site explains, where `covered` says) and now
  // hold a word of a binding argument become its candidates; a word trusted already is not trusted again until a
  // re-capture in which it changes confirms the new field. Returns one line per argument so found.
  std::vector<std::string> watch_fields(const graph_image& before, const graph_image& after, const call_key& key,
                                        const range_query& ranges,
                                        const std::vector<std::vector<std::uint8_t>>& covered);
  // watch_fields' per-unit cache: 0 not looked at yet, 1 looked for (value, range), 2 not looked for.
  struct word_lookup {
    std::vector<std::uint8_t> looked;
    std::vector<std::uint64_t> value;
    std::vector<std::optional<std::pair<std::uint64_t, std::uint64_t>>> range;
    // The changed word `w` holds unit `k`'s value (or an address in its allocation).
    bool holds(std::uint32_t k, const unit& u, std::uint64_t w, const rebinder& rb, const call_key& key,
               const range_query& ranges);
    // Fills unit `k`'s entry (value, whether looked for, allocation).
    void look(std::uint32_t k, const unit& u, const rebinder& rb, const call_key& key, const range_query& ranges);
  };
  // What watch_fields' phases share.
  struct watch_state {
    const call_key& key;
    const range_query& ranges;
    const std::vector<std::vector<std::uint8_t>>& covered;
    word_lookup lookup;
    std::vector<std::string> lines; // per argument
  };
  void watch_node(std::uint32_t n, const std::vector<unsigned char>& before, const node_image& after, watch_state& ws);
  void watch_field(std::uint32_t n, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                   std::uint32_t offset, std::uint32_t size, std::uint32_t width, watch_state& ws);
  // The changed word `w` at bytes `at`..+`width` of node `n`: a candidate site of every unit it holds.
  void watch_word(std::uint32_t n, std::uint32_t at, std::uint32_t width, std::uint64_t w, watch_state& ws);
  [[nodiscard]] bool watched(const unit& u, std::uint32_t width) const noexcept;
  site& site_at(std::uint32_t k, std::uint32_t n, std::uint32_t at, std::uint32_t width, std::int64_t delta);
  void distrust(unit& u, std::uint32_t n, std::uint32_t at, std::uint32_t width, std::vector<std::string>& lines);
  void give_up(std::size_t entry, std::string reason);
  // learn()'s phases over one re-capture, which share a round: what changed and what explains it.
  struct round {
    std::vector<bool> unit_changed;                 // per unit: its word changed between the keys
    std::vector<std::size_t> changed_entries;       // binding entries that changed
    std::vector<std::string> unexplained;           // changes of the graph no argument explains
    std::vector<std::vector<std::uint8_t>> covered; // per node whose bytes changed: the bytes confirmed sites explain
    std::vector<std::pair<std::size_t, std::string>> contradictions; // (entry, why): a site broke its promise
    std::vector<std::pair<site, std::uint64_t>> doubtful; // candidates that changed otherwise than predicted, to what
    std::vector<std::pair<std::size_t, std::string>> verified; // (entry, note): verified in this round
    std::string note;                                          // what learn() returns
    void add_note(const std::string& text);
  };
  [[nodiscard]] round compare_round(const graph_image& next, const call_key& key, const recapture_facts& facts) const;
  void compare_nodes(const graph_image& next, round& r) const;
  void check_site(site s, const graph_image& next, const call_key& key, round& r, std::vector<site>& kept) const;
  void check_changed_site(site s, std::uint64_t before, std::uint64_t after, const call_key& key, round& r,
                          std::vector<site>& kept) const;
  void broke(const site& s, std::string_view how, round& r) const;
  [[nodiscard]] std::string transforms(const site& s, std::uint64_t after, std::uint64_t predicted_after) const;
  void check_sites(const graph_image& next, const call_key& key, round& r);
  void check_doubtful(const graph_image& next, const call_key& key, round& r) const;
  [[nodiscard]] bool covered_change(const site& s, const graph_image& next, const round& r) const;
  void find_uncovered(const graph_image& next, round& r) const;
  // Changed entries whose changed words were all 0 before: not looked for (zero is everywhere).
  [[nodiscard]] std::vector<std::size_t> zero_born(const round& r) const;
  [[nodiscard]] bool zero_before(std::size_t i, const round& r) const;
  [[nodiscard]] std::string positions_of(const std::vector<std::size_t>& entries) const;
  void blame_unexplained(round& r);
  void blame_together(const std::vector<std::size_t>& live, const std::string& first, round& r);
  void verify_changed(round& r);
  void count_round(const round& r);
  void verify_entry(std::size_t i, round& r);
  [[nodiscard]] std::size_t confirmed_sites(std::size_t i) const;
  [[nodiscard]] bool changed_words_verified(std::size_t i, const round& r) const;
  void judge(round& r);
  void refuse_overlaps();
  void each_overlap(std::vector<std::size_t> order, const std::function<void(std::size_t, std::size_t)>& f) const;
  [[nodiscard]] std::string overlap_reason(const site& x, const site& y) const;
  void note_outcome(round& r) const;
  void adopt(graph_image next, const call_key& key, const range_query& ranges, round& r);
  void index_sites();
  std::vector<bool> reset_units();
  std::vector<std::uint8_t> ambiguous_sites(std::vector<std::string>& shared) const;
  void confirm_declared(const std::vector<std::uint8_t>& ambiguous);
  void settle_arguments(const std::vector<std::string>& shared);
  // A binding argument not re-captured for good: patched when declared and no unit of it waits, else learning (with
  // the reason for a declared one that waits: `shared`, the field it shares).
  void settle_argument(std::size_t i, const std::string& shared);
  [[nodiscard]] bool live_binding(std::size_t i) const noexcept;
  [[nodiscard]] bool learnt_layout(const call_key& from, const call_key& to) const noexcept;
  std::string restart(graph_image image, const call_key& key, const range_query& ranges);
  std::string recheck_sites(const graph_image& image, const call_key& key);
  [[nodiscard]] std::uint64_t predicted(const site& s, const call_key& key) const noexcept;
  [[nodiscard]] static bool word_changed(const unit& u, const call_key& from, const call_key& to) noexcept;
  [[nodiscard]] bool can_patch_entry(std::size_t i, const call_key& from, const call_key& to, std::string* why) const;
  [[nodiscard]] bool changed_units_verified(std::size_t i, const call_key& from, const call_key& to) const;
  [[nodiscard]] bool reaches_field(std::size_t i, const call_key& from, const call_key& to) const;
  void patch_unit(std::size_t k, std::uint64_t v);
  [[nodiscard]] std::string binding_line(const site& s) const;
  // Same nodes (count, kinds, patchable fields) as the image, and a key of the same entries (kinds and sizes).
  [[nodiscard]] bool same_structure(const graph_image& other, const call_key& key) const noexcept;
  // "kernel parameter 2", "kernel parameter 0 bytes 8..15" (a word narrower than the field; width 0: the field).
  [[nodiscard]] std::string field_name(std::size_t node, std::uint32_t offset, std::uint32_t width) const;

  rebind_settings settings_;
  bool started_ = false;
  bool stale_ = false;
  graph_image image_;
  call_key key_;
  std::vector<unit> units_;
  std::vector<site> sites_;
  std::vector<argument> arguments_;
  std::vector<int> unexplained_rounds_;     // per entry
  std::vector<std::size_t> unit_first_;     // sites_ of unit k: [unit_first_[k], unit_first_[k + 1])
  std::vector<std::size_t> unit_confirmed_; // confirmed sites per unit
  std::vector<std::size_t> touched_;
  std::vector<std::uint8_t> touched_flag_;
};

//! The word of `width` bytes at `offset` of entry `entry` of `key` (little-endian), zero-extended.
[[nodiscard]] std::uint64_t key_word(const call_key& key, std::size_t entry, std::uint32_t offset,
                                     std::uint32_t width) noexcept;

} // namespace conveyor::detail
