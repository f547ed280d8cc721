// Rebinding's logic over graph images: candidate scan, verification at re-captures, patch plans (see rebind.hpp).
#include "assembly/rebind.hpp"
#include "kinds/kind.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <tuple>

namespace conveyor {

std::string_view to_string(binding_state state) noexcept {
  switch (state) {
  case binding_state::learning: return "learning";
  case binding_state::patched: return "patched";
  case binding_state::recaptured: return "recaptured";
  }
  return "learning";
}

namespace detail {

namespace {

// Largest struct (argument_kind::bytes) whose words are tracked; larger ones re-capture.
constexpr std::size_t max_tracked_bytes = 256;
// Re-captures whose changes could not be attributed after which the arguments that changed re-capture for good.
constexpr int max_unexplained_rounds = 3;

std::uint64_t mask(std::uint64_t v, std::uint32_t width) noexcept {
  return width >= 8 ? v : (v & ((std::uint64_t{1} << (8 * width)) - 1));
}

void write_word(std::vector<unsigned char>& bytes, std::uint32_t offset, std::uint32_t width,
                std::uint64_t v) noexcept {
  if (offset + width <= bytes.size()) std::memcpy(bytes.data() + offset, &v, width);
}

bool entry_changed(const call_key& a, const call_key& b, std::size_t i) noexcept {
  if (a[i].kind != b[i].kind || a[i].size != b[i].size) return true;
  if (a[i].kind == argument_kind::bytes) return std::memcmp(a.bytes_of(i), b.bytes_of(i), a[i].size) != 0;
  return a[i].bits != b[i].bits;
}

// One entry of the same kind, size, role and position as another.
bool same_entry_layout(const argument_key& a, const argument_key& b) noexcept {
  return a.kind == b.kind && a.size == b.size && a.role == b.role && a.position == b.position;
}

// Same entries, each of the same kind and size: a generic callable may take a float at one call and a double at the
// next (or structs of two sizes) with the same shape, and words learnt for one do not describe the other.
bool same_layout(const call_key& a, const call_key& b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same_entry_layout(a[i], b[i])) return false;
  return true;
}

std::string_view kind_word(argument_kind kind) {
  switch (kind) {
  case argument_kind::pointer: return "pointer";
  case argument_kind::floating: return "scalar";
  case argument_kind::bytes: return "value";
  default: return "integer";
  }
}

// Appends `text` to a note of "; "-separated parts.
void append_note(std::string& note, const std::string& text) { note += (note.empty() ? "" : "; ") + text; }

// The word `w` holds the value `v`, or, given the allocation `range` of an address, an address inside it.
bool holds_value(std::uint64_t w, std::uint64_t v,
                 const std::optional<std::pair<std::uint64_t, std::uint64_t>>& range) {
  return range ? (w >= range->first && w - range->first < range->second) : w == v;
}

// Sets `*why` (if given) to `text`; returns false (the call cannot patch).
bool refuse(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
  return false;
}

// The callable's policy or an argument's is rebind_policy::patch.
bool declares_patch(const rebind_settings& settings) {
  return settings.policy == rebind_policy::patch ||
         std::any_of(settings.per_argument.begin(), settings.per_argument.end(),
                     [](const auto& p) { return p.second == rebind_policy::patch; });
}

// Why a binding argument of policy rebind_policy::recapture re-captures.
std::string recapture_reason(const rebind_settings& settings, std::size_t position) {
  return settings.declared(position) ? "declared rebind_policy::recapture"
                                     : "re-captured at every change (the default): declare it rebind_policy::learn or "
                                       "patch (graphed_options::rebind_arguments) if it only flows into node fields";
}

// A struct (argument_kind::bytes) whose words rebind tracks: of 4-byte words, up to max_tracked_bytes.
bool tracked_value(std::uint32_t size) noexcept { return size <= max_tracked_bytes && size % 4 == 0; }

// One word of an argument's value that is looked for: bytes offset..offset+width, an address when `pointer`.
struct word_view {
  std::uint32_t offset = 0;
  std::uint32_t width = 8;
  bool pointer = false;
};

// The words of a tracked struct: its 8-byte words (maybe addresses), then its 4-byte ones.
std::vector<word_view> value_words(std::uint32_t size) {
  std::vector<word_view> out;
  for (std::uint32_t o = 0; o + 8 <= size; o += 8) out.push_back({o, 8, true});
  for (std::uint32_t o = 0; o + 4 <= size; o += 4) out.push_back({o, 4, false});
  return out;
}

// The words of an entry's value that are looked for in node fields.
std::vector<word_view> words_of(const argument_key& e) {
  switch (e.kind) {
  case argument_kind::pointer: return {{0, 8, true}};
  case argument_kind::floating: return {{0, e.size == 4 ? 4U : 8U, false}};
  case argument_kind::integer:
  case argument_kind::padded_size:
  case argument_kind::real_size:
    return {{0, 8, false},  // as a 64-bit parameter
            {0, 4, false}}; // as a 32-bit one (the callable converting it, as eager code would)
  case argument_kind::bytes: return value_words(e.size);
  }
  return {};
}

} // namespace

rebind_policy rebind_settings::of(std::size_t position) const noexcept {
  for (const auto& [p, policy] : per_argument)
    if (p == position) return policy;
  return policy;
}

bool rebind_settings::declared(std::size_t position) const noexcept {
  return policy != rebind_policy::recapture ||
         std::any_of(per_argument.begin(), per_argument.end(), [&](const auto& p) { return p.first == position; });
}

std::uint64_t key_word(const call_key& key, std::size_t entry, std::uint32_t offset, std::uint32_t width) noexcept {
  const auto& e = key[entry];
  std::uint64_t v = 0;
  if (e.kind == argument_kind::bytes) {
    if (offset + width <= e.size) std::memcpy(&v, key.bytes_of(entry) + offset, width);
    return v;
  }
  return mask(offset >= 8 ? 0 : e.bits >> (8 * offset), width);
}

void rebinder::make_units(const call_key& key) {
  units_.clear();
  arguments_.assign(key.size(), argument{});
  unexplained_rounds_.assign(key.size(), 0);
  // Shape and static entries are looked for only to tell a declared argument's fields from theirs.
  const bool declared = declares_patch(settings_);
  for (std::size_t i = 0; i < key.size(); ++i) make_argument(i, key[i], declared);
}

// Entry `i` of the key (`e`): its argument, and the units of its words unless it re-captures for good.
void rebinder::make_argument(std::size_t i, const argument_key& e, bool declared) {
  auto& a = arguments_[i];
  a.position = e.position;
  a.kind = e.kind;
  a.binding = e.role == argument_role::binding;
  if (!a.binding && !declared) return;
  if (a.binding && settings_.of(e.position) == rebind_policy::recapture) {
    a.state = binding_state::recaptured;
    a.reason = recapture_reason(settings_, e.position);
    return;
  }
  add_units(i, e);
}

// The units of entry `i`'s words; a binding struct too large (or not of 4-byte words) to track re-captures instead.
void rebinder::add_units(std::size_t i, const argument_key& e) {
  if (e.kind == argument_kind::bytes && !tracked_value(e.size)) {
    if (!arguments_[i].binding) return;
    arguments_[i].state = binding_state::recaptured;
    arguments_[i].reason = fmt::format("a value of {} bytes: rebind tracks the 4-byte words of values up to {} bytes",
                                       e.size, max_tracked_bytes);
    return;
  }
  for (const word_view& w : words_of(e)) units_.push_back(unit{i, e.position, w.offset, w.width, w.pointer, 0});
}

void rebinder::scan(const graph_image& image, const call_key& key, const range_query& ranges,
                    const std::vector<bool>& which) {
  for (std::uint32_t k = 0; k < units_.size(); ++k)
    if (which[k]) scan_unit(image, key, ranges, k);
}

// The candidate sites of unit `k` in every patchable node of `image`.
void rebinder::scan_unit(const graph_image& image, const call_key& key, const range_query& ranges, std::uint32_t k) {
  const unit& u = units_[k];
  const std::uint64_t v = key_word(key, u.entry, u.offset, u.width);
  if (v == 0) return; // zero is everywhere: learnt at the next change, when it is not zero
  if (!looked_for(u, key, ranges)) return;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> range;
  if (u.pointer && ranges) range = ranges(v);
  for (std::uint32_t n = 0; n < image.nodes.size(); ++n) scan_node(image.nodes[n], n, k, v, range);
}

// The words of node `n`'s fields that hold unit `k`'s value `v` (or an address in its allocation `range`).
void rebinder::scan_node(const node_image& node, std::uint32_t n, std::uint32_t k, std::uint64_t v,
                         const std::optional<std::pair<std::uint64_t, std::uint64_t>>& range) {
  if (!node.patchable) return;
  const std::uint32_t width = units_[k].width;
  for (const auto& [offset, size] : node.fields)
    for (std::uint32_t o = 0; o + width <= size; o += width) {
      const std::uint64_t w = read_word(node.bytes, offset + o, width);
      if (holds_value(w, v, range))
        sites_.push_back(site{n, offset + o, width, static_cast<std::int64_t>(w - v), k, false});
    }
}

void rebinder::start(graph_image image, const call_key& key, const range_query& ranges) {
  if (!started_ || !same_layout(key_, key)) make_units(key);
  image_ = std::move(image);
  key_ = key;
  stale_ = false;
  sites_.clear();
  scan(image_, key_, ranges, reset_units());
  // Declared: trusted from the start, except in bytes that another argument (any role) or another word of the same
  // one also explains: which of them the field follows is settled by the re-capture at its first change.
  std::vector<std::string> shared(arguments_.size());
  confirm_declared(ambiguous_sites(shared));
  settle_arguments(shared);
  touched_flag_.assign(image_.nodes.size(), 0);
  started_ = true;
  index_sites();
}

// Clears each unit's rounds and pending mark; which units to scan (those whose argument does not re-capture for good).
std::vector<bool> rebinder::reset_units() {
  std::vector<bool> which(units_.size(), false);
  for (std::size_t k = 0; k < units_.size(); ++k) {
    units_[k].rounds = 0;
    units_[k].pending = false;
    which[k] = arguments_[units_[k].entry].state != binding_state::recaptured;
  }
  return which;
}

// For each site, 1 where its bytes overlap another site's with other bytes (two arguments, or two words of one, in one
// field); `shared` names, for each argument holding such a site, the first field found so.
std::vector<std::uint8_t> rebinder::ambiguous_sites(std::vector<std::string>& shared) const {
  std::vector<std::size_t> order(sites_.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::vector<std::uint8_t> ambiguous(sites_.size(), 0);
  each_overlap(std::move(order), [&](std::size_t j, std::size_t k) {
    const site& x = sites_[j];
    const site& y = sites_[k];
    ambiguous[j] = ambiguous[k] = 1;
    for (const site* s : {&x, &y})
      if (shared[units_[s->unit].entry].empty())
        shared[units_[s->unit].entry] = fmt::format("node {} {}", y.node, field_name(y.node, y.offset, y.width));
  });
  return ambiguous;
}

// The sites of declared (rebind_policy::patch) binding arguments: confirmed unless ambiguous, whose unit then waits
// for the re-capture at its first change.
void rebinder::confirm_declared(const std::vector<std::uint8_t>& ambiguous) {
  for (std::size_t j = 0; j < sites_.size(); ++j) {
    site& s = sites_[j];
    unit& u = units_[s.unit];
    if (!arguments_[u.entry].binding || settings_.of(u.position) != rebind_policy::patch) continue;
    s.confirmed = ambiguous[j] == 0;
    if (ambiguous[j] != 0) u.pending = true;
  }
}

// Each binding argument's state: patched when declared and no unit of it waits, else learning (with the reason for a
// declared one that waits: `shared`, the field it shares).
void rebinder::settle_arguments(const std::vector<std::string>& shared) {
  for (std::size_t i = 0; i < arguments_.size(); ++i)
    if (live_binding(i)) settle_argument(i, shared[i]);
}

void rebinder::settle_argument(std::size_t i, const std::string& shared) {
  auto& a = arguments_[i];
  const bool declared = settings_.of(a.position) == rebind_policy::patch;
  const bool pending =
      std::any_of(units_.begin(), units_.end(), [&](const unit& u) { return u.entry == i && u.pending; });
  a.state = declared && !pending ? binding_state::patched : binding_state::learning;
  if (declared && pending)
    a.reason = fmt::format("declared rebind_policy::patch, but {} also holds another argument's value (or another "
                           "word of it): verified at its first change",
                           shared);
}

// Entry `i` is a binding argument that does not re-capture for good.
bool rebinder::live_binding(std::size_t i) const noexcept {
  return arguments_[i].binding && arguments_[i].state != binding_state::recaptured;
}

void rebinder::index_sites() {
  std::sort(sites_.begin(), sites_.end(), [](const site& x, const site& y) {
    return std::tie(x.unit, x.node, x.offset) < std::tie(y.unit, y.node, y.offset);
  });
  unit_first_.assign(units_.size() + 1, 0);
  unit_confirmed_.assign(units_.size(), 0);
  for (const auto& s : sites_) {
    ++unit_first_[s.unit + 1];
    if (s.confirmed) ++unit_confirmed_[s.unit];
  }
  for (std::size_t k = 0; k < units_.size(); ++k) unit_first_[k + 1] += unit_first_[k];
}

bool rebinder::unit_verified(const unit& u) const noexcept {
  if (u.pending) return false;
  return settings_.of(u.position) == rebind_policy::patch || u.rounds >= std::max(1, settings_.verifications);
}

bool rebinder::looked_for(const unit& u, const call_key& key, const range_query& ranges) const {
  if (u.width != 4 || !ranges || key[u.entry].kind != argument_kind::bytes) return true;
  const std::uint32_t word = u.offset & ~std::uint32_t{7};
  if (word + 8 > key[u.entry].size) return true;
  const std::uint64_t v = key_word(key, u.entry, word, 8);
  return v == 0 || !ranges(v);
}

bool rebinder::same_bytes(const site& x, const site& y) const noexcept {
  const unit& ux = units_[x.unit];
  const unit& uy = units_[y.unit];
  return ux.entry == uy.entry && x.delta == 0 && y.delta == 0 &&
         static_cast<std::int64_t>(x.offset) - ux.offset == static_cast<std::int64_t>(y.offset) - uy.offset;
}

bool rebinder::word_lookup::holds(std::uint32_t k, const unit& u, std::uint64_t w, const rebinder& rb,
                                  const call_key& key, const range_query& ranges) {
  if (looked[k] == 0) look(k, u, rb, key, ranges);
  if (looked[k] != 1) return false;
  return holds_value(w, value[k], range[k]);
}

void rebinder::word_lookup::look(std::uint32_t k, const unit& u, const rebinder& rb, const call_key& key,
                                 const range_query& ranges) {
  value[k] = key_word(key, u.entry, u.offset, u.width);
  looked[k] = value[k] != 0 && rb.looked_for(u, key, ranges) ? 1 : 2;
  if (looked[k] == 1 && u.pointer && ranges) range[k] = ranges(value[k]);
}

// A unit of `width` bytes of a binding argument that does not re-capture for good: watched for in changed fields.
bool rebinder::watched(const unit& u, std::uint32_t width) const noexcept {
  return u.width == width && live_binding(u.entry);
}

// The site of unit `k` at bytes `at`..+`width` of node `n`, added (as a candidate, `delta` from the value) if new.
rebinder::site& rebinder::site_at(std::uint32_t k, std::uint32_t n, std::uint32_t at, std::uint32_t width,
                                  std::int64_t delta) {
  auto it = std::find_if(sites_.begin(), sites_.end(),
                         [&](const site& s) { return s.unit == k && s.node == n && s.offset == at; });
  if (it == sites_.end()) it = sites_.insert(sites_.end(), site{n, at, width, delta, k, false});
  return *it;
}

void rebinder::watch_word(std::uint32_t n, std::uint32_t at, std::uint32_t width, std::uint64_t w, watch_state& ws) {
  for (std::uint32_t k = 0; k < units_.size(); ++k) {
    unit& u = units_[k];
    if (!watched(u, width) || !ws.lookup.holds(k, u, w, *this, ws.key, ws.ranges)) continue;
    const site& s = site_at(k, n, at, width, static_cast<std::int64_t>(w - ws.lookup.value[k]));
    if (s.confirmed || !unit_verified(u)) continue;
    distrust(u, n, at, width, ws.lines);
  }
}

// A verified unit `u` that a field (node `n`, bytes `at`..+`width`) began to hold: pending until a re-capture in which
// it changes confirms the field; its argument learns again meanwhile (`lines`: the reason, per argument).
void rebinder::distrust(unit& u, std::uint32_t n, std::uint32_t at, std::uint32_t width,
                        std::vector<std::string>& lines) {
  u.pending = true;
  u.rounds = 0; // verified again as the first time (rebind_verifications)
  auto& arg = arguments_[u.entry];
  if (lines[u.entry].empty())
    lines[u.entry] = fmt::format("node {} {} holds argument {} since a re-capture in which another argument "
                                 "changed: verified again at its next change",
                                 n, field_name(n, at, width), u.position);
  if (arg.state == binding_state::patched) {
    arg.state = binding_state::learning;
    arg.reason = lines[u.entry];
  }
}

namespace {

// Every byte of `width` at `at` of node `n` is one that `covered` marks (explained by a confirmed site).
bool covered_bytes(const std::vector<std::vector<std::uint8_t>>& covered, std::uint32_t n, std::uint32_t at,
                   std::uint32_t width) {
  return n < covered.size() && !covered[n].empty() && at + width <= covered[n].size() &&
         std::all_of(covered[n].begin() + at, covered[n].begin() + at + width, [](std::uint8_t c) { return c != 0; });
}

} // namespace

std::vector<std::string> rebinder::watch_fields(const graph_image& before, const graph_image& after,
                                                const call_key& key, const range_query& ranges,
                                                const std::vector<std::vector<std::uint8_t>>& covered) {
  watch_state ws{key, ranges, covered,
                 word_lookup{std::vector<std::uint8_t>(units_.size(), 0), std::vector<std::uint64_t>(units_.size(), 0),
                             std::vector<std::optional<std::pair<std::uint64_t, std::uint64_t>>>(units_.size())},
                 std::vector<std::string>(arguments_.size())};
  for (std::uint32_t n = 0; n < after.nodes.size() && n < before.nodes.size(); ++n)
    watch_node(n, before.nodes[n].bytes, after.nodes[n], ws);
  std::erase_if(ws.lines, [](const std::string& line) { return line.empty(); });
  return std::move(ws.lines);
}

// Node `n` of the later image (`after`; `before`: its bytes in the earlier one), if patchable and changed.
void rebinder::watch_node(std::uint32_t n, const std::vector<unsigned char>& before, const node_image& after,
                          watch_state& ws) {
  if (!after.patchable || before == after.bytes) return;
  for (const auto& [offset, size] : after.fields)
    for (const std::uint32_t width : {std::uint32_t{8}, std::uint32_t{4}})
      watch_field(n, before, after.bytes, offset, size, width, ws);
}

// The words of `width` bytes of the field at `offset` (`size` bytes) of node `n` that changed from `a` to `b`.
void rebinder::watch_field(std::uint32_t n, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                           std::uint32_t offset, std::uint32_t size, std::uint32_t width, watch_state& ws) {
  for (std::uint32_t o = 0; o + width <= size; o += width) {
    const std::uint32_t at = offset + o;
    const std::uint64_t w = read_word(b, at, width);
    if (read_word(a, at, width) == w || covered_bytes(ws.covered, n, at, width))
      continue; // unchanged, or a changed word's
    watch_word(n, at, width, w, ws);
  }
}

namespace {

// The same kind, patchability and patchable fields.
bool same_node_structure(const node_image& a, const node_image& b) noexcept {
  return a.kind == b.kind && a.patchable == b.patchable && a.fields == b.fields;
}

// The name of field `p` of node `n`, with the bytes `offset`..+`width` of it when narrower (width 0: the field).
std::string name_in_field(const node_image& n, std::size_t p, std::uint32_t offset, std::uint32_t width) {
  const auto [start, size] = n.fields[p];
  const auto field_name = traits_of(n.kind).field_name;
  std::string name = field_name != nullptr ? field_name(p) : fmt::format("field {}", p);
  if (width != 0 && width < size) name += fmt::format(" bytes {}..{}", offset - start, offset - start + width - 1);
  return name;
}

} // namespace

bool rebinder::same_structure(const graph_image& other, const call_key& key) const noexcept {
  if (other.nodes.size() != image_.nodes.size() || !same_layout(key, key_)) return false;
  for (std::size_t i = 0; i < other.nodes.size(); ++i)
    if (!same_node_structure(other.nodes[i], image_.nodes[i])) return false;
  return true;
}

void rebinder::give_up(std::size_t entry, std::string reason) {
  auto& a = arguments_[entry];
  if (a.state == binding_state::recaptured) return;
  a.state = binding_state::recaptured;
  a.reason = std::move(reason);
}

std::string rebinder::field_name(std::size_t node, std::uint32_t offset, std::uint32_t width) const {
  const node_image& n = image_.nodes[node];
  for (std::size_t p = 0; p < n.fields.size(); ++p) {
    const auto [start, size] = n.fields[p];
    if (offset >= start && offset < start + size) return name_in_field(n, p, offset, width);
  }
  return fmt::format("bytes {}..{}", offset, offset + width - 1);
}

void rebinder::round::add_note(const std::string& text) { append_note(note, text); }

namespace {

// The changes of a re-capture that rebind does not image: a costlier update, nodes of other kinds.
void note_unimaged_changes(const recapture_facts& facts, const graph_image& next,
                           std::vector<std::string>& unexplained) {
  if (!facts.clean_update)
    unexplained.emplace_back("the executable graph needed more than per-node setters (attributes, topology or a "
                             "kind without a per-node setter changed)");
  for (std::size_t n : facts.other_nodes_changed)
    unexplained.push_back(fmt::format("node {} ({}) changed, and rebind cannot patch that kind", n,
                                      n < next.nodes.size() ? to_string(next.nodes[n].kind) : "?"));
}

} // namespace

rebinder::round rebinder::compare_round(const graph_image& next, const call_key& key,
                                        const recapture_facts& facts) const {
  round r;
  r.unit_changed.assign(units_.size(), false);
  for (std::size_t k = 0; k < units_.size(); ++k) r.unit_changed[k] = word_changed(units_[k], key_, key);
  for (std::size_t i = 0; i < key.size(); ++i)
    if (arguments_[i].binding && entry_changed(key_, key, i)) r.changed_entries.push_back(i);
  note_unimaged_changes(facts, next, r.unexplained);
  compare_nodes(next, r);
  return r;
}

// Nodes of `next` whose function, launch shape or sizes changed (unexplained), and those whose bytes changed (their
// bytes to be covered by confirmed sites).
void rebinder::compare_nodes(const graph_image& next, round& r) const {
  r.covered.resize(next.nodes.size());
  for (std::size_t n = 0; n < next.nodes.size(); ++n) {
    const auto& a = image_.nodes[n];
    const auto& b = next.nodes[n];
    if (a.fixed != b.fixed)
      r.unexplained.push_back(
          fmt::format("node {} ({}): its function, launch shape or sizes changed", n, to_string(b.kind)));
    else if (a.bytes != b.bytes) r.covered[n].assign(b.bytes.size(), 0);
  }
}

void rebinder::check_site(site s, const graph_image& next, const call_key& key, round& r,
                          std::vector<site>& kept) const {
  const std::uint64_t before = read_word(image_.nodes[s.node].bytes, s.offset, s.width);
  const std::uint64_t after = read_word(next.nodes[s.node].bytes, s.offset, s.width);
  if (before != predicted(s, key_))
    return broke(s, "no longer does", r); // a stale candidate (another argument's bytes)
  if (r.unit_changed[s.unit]) return check_changed_site(s, before, after, key, r, kept);
  if (after == predicted(s, key)) kept.push_back(s);
  else broke(s, "no longer does", r);
}

// check_site() of a site whose unit changed: it followed the change (confirmed), did not (broke its promise, if
// confirmed), or changed otherwise (a contradiction when confirmed, else doubtful).
void rebinder::check_changed_site(site s, std::uint64_t before, std::uint64_t after, const call_key& key, round& r,
                                  std::vector<site>& kept) const {
  const std::uint64_t predicted_after = predicted(s, key);
  if (after == predicted_after) {
    s.confirmed = true;
    if (!r.covered[s.node].empty()) std::fill_n(r.covered[s.node].begin() + s.offset, s.width, std::uint8_t{1});
    kept.push_back(s);
  } else if (before == after) {
    broke(s, "did not follow its change", r);
  } else if (s.confirmed) {
    r.contradictions.emplace_back(units_[s.unit].entry, transforms(s, after, predicted_after));
  } else {
    r.doubtful.emplace_back(s, after);
  }
}

// A confirmed site `s` broke its promise (`how`): a contradiction of its argument.
void rebinder::broke(const site& s, std::string_view how, round& r) const {
  const unit& u = units_[s.unit];
  if (s.confirmed)
    r.contradictions.emplace_back(u.entry, fmt::format("node {} {} held argument {} and {}", s.node,
                                                       field_name(s.node, s.offset, s.width), u.position, how));
}

// Why site `s`, holding `after` where its argument predicts `predicted_after`, contradicts the argument.
std::string rebinder::transforms(const site& s, std::uint64_t after, std::uint64_t predicted_after) const {
  return fmt::format("node {} {} holds {:#x} where argument {} predicts {:#x}: the callable transforms the value",
                     s.node, field_name(s.node, s.offset, s.width), after, units_[s.unit].position, predicted_after);
}

void rebinder::check_sites(const graph_image& next, const call_key& key, round& r) {
  std::vector<site> kept;
  kept.reserve(sites_.size());
  for (const site& s : sites_)
    if (arguments_[units_[s.unit].entry].state != binding_state::recaptured) check_site(s, next, key, r, kept);
  sites_ = std::move(kept);
}

void rebinder::check_doubtful(const graph_image& next, const call_key& key, round& r) const {
  for (const auto& [s, after] : r.doubtful)
    if (!covered_change(s, next, r))
      r.contradictions.emplace_back(units_[s.unit].entry, transforms(s, after, predicted(s, key)));
}

// Every byte of site `s` that changed from the image to `next` is explained by a confirmed site (covered).
bool rebinder::covered_change(const site& s, const graph_image& next, const round& r) const {
  const auto& a = image_.nodes[s.node].bytes;
  const auto& b = next.nodes[s.node].bytes;
  const auto& c = r.covered[s.node];
  if (c.empty()) return false;
  const std::size_t end = std::min<std::size_t>({s.offset + s.width, a.size(), b.size(), c.size()});
  for (std::size_t j = s.offset; j < end; ++j)
    if (a[j] != b[j] && c[j] == 0) return false;
  return true;
}

void rebinder::find_uncovered(const graph_image& next, round& r) const {
  for (std::size_t n = 0; n < next.nodes.size(); ++n) {
    if (r.covered[n].empty()) continue;
    const auto& a = image_.nodes[n].bytes;
    const auto& b = next.nodes[n].bytes;
    for (std::size_t j = 0; j < b.size(); ++j)
      if (a[j] != b[j] && r.covered[n][j] == 0) {
        r.unexplained.push_back(fmt::format("node {} {} changed and no argument's word explains it", n,
                                            field_name(n, static_cast<std::uint32_t>(j), 0)));
        break;
      }
  }
}

std::vector<std::size_t> rebinder::zero_born(const round& r) const {
  std::vector<std::size_t> out;
  for (std::size_t i : r.changed_entries)
    if (zero_before(i, r)) out.push_back(i);
  return out;
}

// Entry `i` does not re-capture for good and each of its words that changed in the round was 0 before.
bool rebinder::zero_before(std::size_t i, const round& r) const {
  if (arguments_[i].state == binding_state::recaptured) return false;
  for (std::size_t k = 0; k < units_.size(); ++k)
    if (units_[k].entry == i && r.unit_changed[k] && key_word(key_, i, units_[k].offset, units_[k].width) != 0)
      return false;
  return true;
}

std::string rebinder::positions_of(const std::vector<std::size_t>& entries) const {
  std::string list;
  for (std::size_t i : entries) list += fmt::format("{}{}", list.empty() ? "" : ", ", arguments_[i].position);
  return list;
}

void rebinder::blame_unexplained(round& r) {
  // Changed arguments that re-capture (declared so, given up before, or just now) may be what changed: the others
  // are then not verified this time, but not blamed either.
  std::vector<std::size_t> live;
  std::vector<std::size_t> others;
  for (std::size_t i : r.changed_entries)
    (arguments_[i].state != binding_state::recaptured ? live : others).push_back(i);
  const std::string& first = r.unexplained[0];
  if (live.size() == 1 && others.empty()) {
    give_up(live[0], fmt::format("a change of it is not explained by where it is embedded: {}", first));
  } else if (!live.empty() && !others.empty()) {
    r.add_note(
        fmt::format("not verified: argument(s) {} changed together with argument(s) {}, which re-capture, and {}",
                    positions_of(live), positions_of(others), first));
  } else if (!live.empty()) {
    blame_together(live, first, r);
  }
}

// Arguments `live` changed together and the change `first` is not explained: not verified; each re-captures for good
// after max_unexplained_rounds such re-captures.
void rebinder::blame_together(const std::vector<std::size_t>& live, const std::string& first, round& r) {
  r.add_note(fmt::format("not verified: arguments {} changed together and {}", positions_of(live), first));
  for (std::size_t i : live)
    if (++unexplained_rounds_[i] >= max_unexplained_rounds)
      give_up(i, fmt::format("changed together with other arguments {} times without the changes being "
                             "explained ({})",
                             max_unexplained_rounds, first));
}

void rebinder::verify_changed(round& r) {
  count_round(r);
  for (std::size_t i : r.changed_entries) verify_entry(i, r);
}

// One more clean re-capture for each unit that changed in it.
void rebinder::count_round(const round& r) {
  for (std::size_t k = 0; k < units_.size(); ++k)
    if (r.unit_changed[k]) {
      ++units_[k].rounds;
      units_[k].pending = false; // its fields confirmed or dropped by this re-capture
    }
}

// Changed entry `i`: given up when no confirmed site holds it, verified (patched from now on) when every word of it
// that changed is.
void rebinder::verify_entry(std::size_t i, round& r) {
  auto& a = arguments_[i];
  if (a.state == binding_state::recaptured) return;
  const std::size_t count = confirmed_sites(i);
  if (count == 0) {
    give_up(i, "it changed but no node field holds it: the callable uses it on the host or transforms it (e.g. "
               "writes it into memory the graph reads)");
    return;
  }
  if (!changed_words_verified(i, r) || a.state != binding_state::learning) return;
  a.state = binding_state::patched;
  a.reason = fmt::format("verified at call with {} {} change: {} site(s)", kind_word(a.kind),
                         a.kind == argument_kind::bytes ? "value" : "its", count);
  r.verified.emplace_back(
      i, fmt::format("argument {} verified ({} node field(s)): patched in place from now on", a.position, count));
}

// The confirmed sites of entry `i`.
std::size_t rebinder::confirmed_sites(std::size_t i) const {
  return static_cast<std::size_t>(std::count_if(
      sites_.begin(), sites_.end(), [&](const site& s) { return s.confirmed && units_[s.unit].entry == i; }));
}

// Every unit of entry `i` that changed in the round is verified.
bool rebinder::changed_words_verified(std::size_t i, const round& r) const {
  return std::all_of(units_.begin(), units_.end(), [&](const unit& u) {
    return u.entry != i || !r.unit_changed[static_cast<std::size_t>(&u - units_.data())] || unit_verified(u);
  });
}

void rebinder::judge(round& r) {
  const std::vector<std::size_t> zero = zero_born(r);
  if (!r.unexplained.empty() && !zero.empty())
    // Entries whose changed words were all 0 before were not looked for (zero is everywhere): their fields show as
    // unexplained changes this time, and are looked for with their new values (rescan).
    r.add_note(fmt::format("not verified: argument(s) {} were 0 before (not looked for); learnt at the next change",
                           positions_of(zero)));
  else if (!r.unexplained.empty()) blame_unexplained(r);
  else verify_changed(r);
}

void rebinder::refuse_overlaps() {
  // One field may not hold two arguments, nor two words of one: a patch of one would overwrite the other. Every
  // earlier site that may reach a site's bytes is compared with it (words are at most 8 bytes), not only the one
  // before it: an 8-byte word can overlap a 4-byte one that follows another at its own offset.
  std::vector<std::size_t> confirmed;
  for (std::size_t j = 0; j < sites_.size(); ++j)
    if (sites_[j].confirmed && arguments_[units_[sites_[j].unit].entry].state != binding_state::recaptured)
      confirmed.push_back(j);
  each_overlap(std::move(confirmed), [&](std::size_t x, std::size_t y) {
    const std::string why = overlap_reason(sites_[x], sites_[y]);
    give_up(units_[sites_[x].unit].entry, why);
    give_up(units_[sites_[y].unit].entry, why);
  });
}

// Calls `f(x, y)` for each pair of the sites `order` (indices into sites_) whose bytes overlap with other bytes, x
// before y in (node, offset) order.
void rebinder::each_overlap(std::vector<std::size_t> order,
                            const std::function<void(std::size_t, std::size_t)>& f) const {
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return std::tie(sites_[x].node, sites_[x].offset) < std::tie(sites_[y].node, sites_[y].offset);
  });
  for (std::size_t k = 1; k < order.size(); ++k)
    for (std::size_t j = k; j-- > 0;) {
      const site& x = sites_[order[j]];
      const site& y = sites_[order[k]];
      if (x.node != y.node || x.offset + 8 <= y.offset) break; // words are at most 8 bytes
      if (y.offset >= x.offset + x.width || same_bytes(x, y)) continue;
      f(order[j], order[k]);
    }
}

std::string rebinder::overlap_reason(const site& x, const site& y) const {
  const unit& ux = units_[x.unit];
  const unit& uy = units_[y.unit];
  if (ux.entry != uy.entry)
    return fmt::format("node {} {} holds arguments {} and {} in the same bytes", x.node,
                       field_name(x.node, y.offset, y.width), ux.position, uy.position);
  return fmt::format("node {} {} holds bytes {}..{} and {}..{} of argument {} in the same bytes", x.node,
                     field_name(x.node, y.offset, y.width), ux.offset, ux.offset + ux.width - 1, uy.offset,
                     uy.offset + uy.width - 1, ux.position);
}

void rebinder::note_outcome(round& r) const {
  for (const auto& [i, text] : r.verified)
    if (arguments_[i].state != binding_state::recaptured) r.add_note(text);
  for (std::size_t i : r.changed_entries)
    if (arguments_[i].state == binding_state::recaptured && !arguments_[i].reason.empty())
      r.add_note(fmt::format("argument {} re-captures from now on: {}", arguments_[i].position, arguments_[i].reason));
}

void rebinder::adopt(graph_image next, const call_key& key, const range_query& ranges, round& r) {
  // Words without a site (zero before, or never embedded as they were) are looked for again with their new values.
  std::vector<bool> which(units_.size(), false);
  std::vector<bool> has_site(units_.size(), false);
  for (const auto& s : sites_) has_site[s.unit] = true;
  for (std::size_t k = 0; k < units_.size(); ++k)
    which[k] = !has_site[k] && arguments_[units_[k].entry].state != binding_state::recaptured;
  scan(next, key, ranges, which);
  // Fields that changed without a confirmed site explaining them and now hold a binding argument's word (the
  // callable passes it there on a path another argument chose): not patched until a re-capture confirms them.
  for (const auto& line : watch_fields(image_, next, key, ranges, r.covered)) r.add_note(line);
  image_ = std::move(next);
  key_ = key;
  stale_ = false; // `next` is what the executable graph runs now
  touched_flag_.assign(image_.nodes.size(), 0);
  index_sites();
}

std::string rebinder::learn(graph_image next, const call_key& key, const recapture_facts& facts,
                            const range_query& ranges) {
  if (!started_) {
    start(std::move(next), key, ranges);
    return {};
  }
  if (!same_structure(next, key)) return restart(std::move(next), key, ranges);
  // What changed (words of arguments, bytes of nodes); every site against the prediction; what no site explains.
  round r = compare_round(next, key, facts);
  check_sites(next, key, r);
  // A candidate whose field changed to another value than predicted transforms the argument, unless every changed
  // byte of it is explained by another word that changed (another argument in the same allocation, another view of
  // the same value): then it was that word's field, and is dropped.
  check_doubtful(next, key, r);
  find_uncovered(next, r);
  for (auto& [entry, why] : r.contradictions) give_up(entry, std::move(why));
  // Verify, or blame, the arguments that changed; no field may hold two of them.
  judge(r);
  refuse_overlaps();
  note_outcome(r);
  adopt(std::move(next), key, ranges, r);
  return r.note;
}

bool rebinder::can_learn(const call_key& from, const call_key& to) const {
  if (!started_ || !learnt_layout(from, to)) return true;
  for (std::size_t i = 0; i < arguments_.size(); ++i)
    if (live_binding(i) && entry_changed(from, to, i)) return true;
  return false;
}

// Both keys have the layout of the one the words were learnt with.
bool rebinder::learnt_layout(const call_key& from, const call_key& to) const noexcept {
  return same_layout(from, key_) && same_layout(to, key_);
}

// Starts over from `image` (another structure, or nothing learnt yet); returns the note of why.
std::string rebinder::restart(graph_image image, const call_key& key, const range_query& ranges) {
  const bool layout = !started_ || same_layout(key, key_);
  start(std::move(image), key, ranges);
  return layout ? "the graph's nodes changed: where arguments are embedded is learnt again"
                : "an argument's kind or size changed: where arguments are embedded is learnt again";
}

std::string rebinder::refresh(graph_image image, const call_key& key, const range_query& ranges) {
  stale_ = false;
  if (!started_ || !same_structure(image, key)) return restart(std::move(image), key, ranges);
  std::string note = recheck_sites(image, key);
  // Fields the re-captures changed that now hold a binding argument (chosen by an argument that re-captures).
  for (const auto& line : watch_fields(image_, image, key, ranges, {})) append_note(note, line);
  image_ = std::move(image);
  key_ = key;
  touched_flag_.assign(image_.nodes.size(), 0);
  index_sites();
  return note;
}

// refresh(): keeps the sites that still hold their prediction under `key` in `image`; an argument a confirmed site
// of which no longer does re-captures from now on. Returns a note of those.
std::string rebinder::recheck_sites(const graph_image& image, const call_key& key) {
  std::string note;
  std::vector<site> kept;
  kept.reserve(sites_.size());
  for (const site& s : sites_) {
    const unit& u = units_[s.unit];
    if (read_word(image.nodes[s.node].bytes, s.offset, s.width) == predicted(s, key)) {
      kept.push_back(s);
    } else if (s.confirmed && arguments_[u.entry].state != binding_state::recaptured) {
      give_up(u.entry, fmt::format("node {} {} held argument {} and no longer does after a re-capture", s.node,
                                   field_name(s.node, s.offset, s.width), u.position));
      append_note(note, fmt::format("argument {} re-captures from now on: {}", u.position, arguments_[u.entry].reason));
    }
  }
  sites_ = std::move(kept);
  return note;
}

// What site `s` holds when the binding is `key`: its unit's word plus the site's delta, in the site's width.
std::uint64_t rebinder::predicted(const site& s, const call_key& key) const noexcept {
  const unit& u = units_[s.unit];
  return mask(key_word(key, u.entry, u.offset, u.width) + static_cast<std::uint64_t>(s.delta), s.width);
}

// Unit `u`'s word differs between `from` and `to`.
bool rebinder::word_changed(const unit& u, const call_key& from, const call_key& to) noexcept {
  return key_word(from, u.entry, u.offset, u.width) != key_word(to, u.entry, u.offset, u.width);
}

bool rebinder::can_patch(const call_key& from, const call_key& to, std::string* why) const {
  if (!started_) return refuse(why, "nothing learnt yet");
  if (!learnt_layout(from, to)) return refuse(why, "an argument's kind or size changed since its words were learnt");
  for (std::size_t i = 0; i < arguments_.size(); ++i)
    if (!can_patch_entry(i, from, to, why)) return false;
  return true;
}

// can_patch() for entry `i`: unchanged or not binding, or re-captures for good, or its changed words are verified and
// (when declared patch) reach a node field.
bool rebinder::can_patch_entry(std::size_t i, const call_key& from, const call_key& to, std::string* why) const {
  const auto& a = arguments_[i];
  if (!a.binding || !entry_changed(from, to, i)) return true;
  if (a.state == binding_state::recaptured)
    return refuse(why, fmt::format("argument {} re-captures ({})", a.position, a.reason));
  if (!changed_units_verified(i, from, to))
    return refuse(why, fmt::format("argument {}: where it is embedded is not verified yet (learning)", a.position));
  if (!reaches_field(i, from, to) && settings_.of(a.position) == rebind_policy::patch)
    return refuse(why, fmt::format("argument {} (declared patch) reaches no node field", a.position));
  return true;
}

// Every unit of entry `i` whose word differs between `from` and `to` is verified.
bool rebinder::changed_units_verified(std::size_t i, const call_key& from, const call_key& to) const {
  return std::all_of(units_.begin(), units_.end(),
                     [&](const unit& u) { return u.entry != i || !word_changed(u, from, to) || unit_verified(u); });
}

// Some unit of entry `i` whose word differs between `from` and `to` has a confirmed site.
bool rebinder::reaches_field(std::size_t i, const call_key& from, const call_key& to) const {
  for (std::size_t k = 0; k < units_.size(); ++k)
    if (units_[k].entry == i && word_changed(units_[k], from, to) && unit_confirmed_[k] > 0) return true;
  return false;
}

const std::vector<std::size_t>& rebinder::patch(const call_key& from, const call_key& to) {
  touched_.clear();
  for (std::size_t k = 0; k < units_.size(); ++k) {
    const unit& u = units_[k];
    const std::uint64_t v = key_word(to, u.entry, u.offset, u.width);
    if (unit_confirmed_[k] == 0 || v == key_word(from, u.entry, u.offset, u.width)) continue;
    patch_unit(k, v);
  }
  for (std::size_t n : touched_) touched_flag_[n] = 0;
  std::sort(touched_.begin(), touched_.end());
  key_ = to;
  return touched_;
}

// Writes `v` (unit `k`'s new word) into the confirmed sites of unit `k`, and notes their nodes in touched_.
void rebinder::patch_unit(std::size_t k, std::uint64_t v) {
  for (std::size_t j = unit_first_[k]; j < unit_first_[k + 1]; ++j) {
    const site& s = sites_[j];
    if (!s.confirmed) continue;
    write_word(image_.nodes[s.node].bytes, s.offset, s.width, mask(v + static_cast<std::uint64_t>(s.delta), s.width));
    if (touched_flag_[s.node] == 0) {
      touched_flag_[s.node] = 1;
      touched_.push_back(s.node);
    }
  }
}

std::vector<argument_binding> rebinder::bindings(const std::function<std::string(std::size_t)>& name_of) const {
  std::vector<argument_binding> out;
  for (std::size_t i = 0; i < arguments_.size(); ++i) {
    const auto& a = arguments_[i];
    if (!a.binding) continue;
    argument_binding b;
    b.position = a.position;
    b.kind = a.kind;
    b.state = a.state;
    b.reason = a.reason;
    for (const auto& s : sites_) {
      const unit& u = units_[s.unit];
      if (u.entry != i) continue;
      b.sites.push_back(binding_site{s.node, name_of ? name_of(s.node) : std::string{},
                                     field_name(s.node, s.offset, s.width), s.delta, u.offset, s.width, s.confirmed});
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<std::string> rebinder::node_bindings(std::size_t node) const {
  std::vector<std::string> out;
  for (const auto& s : sites_) {
    if (s.node != node || !s.confirmed) continue;
    if (arguments_[units_[s.unit].entry].state == binding_state::recaptured) continue;
    std::string line = binding_line(s);
    if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(std::move(line));
  }
  return out;
}

// "argument 1 -> kernel parameter 0", "argument 0 bytes 8..15 +4096 B -> ...": what confirmed site `s` holds.
std::string rebinder::binding_line(const site& s) const {
  const unit& u = units_[s.unit];
  std::string line = fmt::format("argument {}", u.position);
  if (arguments_[u.entry].kind == argument_kind::bytes)
    line += fmt::format(" bytes {}..{}", u.offset, u.offset + u.width - 1);
  if (s.delta != 0) line += fmt::format(" {:+} B", s.delta);
  line += fmt::format(" -> {}", field_name(s.node, s.offset, s.width));
  return line;
}

} // namespace detail
} // namespace conveyor
