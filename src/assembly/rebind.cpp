// Rebinding's logic over graph images: candidate scan, verification at re-captures, patch plans (see rebind.hpp).
#include "assembly/rebind.hpp"

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

std::uint64_t read_word(const std::vector<unsigned char>& bytes, std::uint32_t offset, std::uint32_t width) noexcept {
  std::uint64_t v = 0;
  if (offset + width <= bytes.size()) std::memcpy(&v, bytes.data() + offset, width); // little-endian hosts only
  return v;
}

void write_word(std::vector<unsigned char>& bytes, std::uint32_t offset, std::uint32_t width, std::uint64_t v) noexcept {
  if (offset + width <= bytes.size()) std::memcpy(bytes.data() + offset, &v, width);
}

bool entry_changed(const call_key& a, const call_key& b, std::size_t i) noexcept {
  if (a[i].kind != b[i].kind || a[i].size != b[i].size) return true;
  if (a[i].kind == argument_kind::bytes) return std::memcmp(a.bytes_of(i), b.bytes_of(i), a[i].size) != 0;
  return a[i].bits != b[i].bits;
}

std::string_view kind_word(argument_kind kind) {
  switch (kind) {
  case argument_kind::pointer: return "pointer";
  case argument_kind::floating: return "scalar";
  case argument_kind::bytes: return "value";
  default: return "integer";
  }
}

} // namespace

rebind_policy rebind_settings::of(std::size_t position) const noexcept {
  for (const auto& [p, policy] : per_argument)
    if (p == position) return policy;
  return policy;
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
  for (std::size_t i = 0; i < key.size(); ++i) {
    const auto& e = key[i];
    auto& a = arguments_[i];
    a.position = e.position;
    a.kind = e.kind;
    a.binding = e.role == argument_role::binding;
    if (!a.binding) continue;
    const rebind_policy policy = settings_.of(e.position);
    if (policy == rebind_policy::recapture) {
      a.state = binding_state::recaptured;
      a.reason = "declared rebind_policy::recapture";
      continue;
    }
    auto add = [&](std::uint32_t offset, std::uint32_t width, bool pointer) {
      units_.push_back(unit{i, e.position, offset, width, pointer, 0});
    };
    switch (e.kind) {
    case argument_kind::pointer: add(0, 8, true); break;
    case argument_kind::floating: add(0, e.size == 4 ? 4 : 8, false); break;
    case argument_kind::integer:
    case argument_kind::padded_size:
    case argument_kind::real_size:
      add(0, 8, false); // as a 64-bit parameter
      add(0, 4, false); // as a 32-bit one (the callable converting it, as eager code would)
      break;
    case argument_kind::bytes:
      if (e.size > max_tracked_bytes || e.size % 4 != 0) {
        a.state = binding_state::recaptured;
        a.reason = fmt::format("a value of {} bytes: rebind tracks the 4-byte words of values up to {} bytes",
                               e.size, max_tracked_bytes);
        break;
      }
      for (std::uint32_t o = 0; o + 8 <= e.size; o += 8) add(o, 8, true);
      for (std::uint32_t o = 0; o + 4 <= e.size; o += 4) add(o, 4, false);
      break;
    }
  }
}

void rebinder::scan(const graph_image& image, const call_key& key, const range_query& ranges,
                    const std::vector<bool>& which) {
  for (std::uint32_t k = 0; k < units_.size(); ++k) {
    if (!which[k]) continue;
    const unit& u = units_[k];
    const std::uint64_t v = key_word(key, u.entry, u.offset, u.width);
    if (v == 0) continue; // zero is everywhere: learnt at the next change, when it is not zero
    std::optional<std::pair<std::uint64_t, std::uint64_t>> range;
    if (u.pointer && ranges) range = ranges(v);
    for (std::uint32_t n = 0; n < image.nodes.size(); ++n) {
      const node_image& node = image.nodes[n];
      if (!node.patchable) continue;
      for (const auto& [offset, size] : node.fields)
        for (std::uint32_t o = 0; o + u.width <= size; o += u.width) {
          const std::uint64_t w = read_word(node.bytes, offset + o, u.width);
          if (range ? (w >= range->first && w - range->first < range->second) : w == v)
            sites_.push_back(site{n, offset + o, u.width, static_cast<std::int64_t>(w - v), k, false});
        }
    }
  }
}

void rebinder::start(graph_image image, const call_key& key, const range_query& ranges) {
  if (!started_ || arguments_.size() != key.size()) make_units(key);
  image_ = std::move(image);
  key_ = key;
  sites_.clear();
  std::vector<bool> which(units_.size(), false);
  for (std::size_t k = 0; k < units_.size(); ++k) {
    units_[k].rounds = 0;
    which[k] = arguments_[units_[k].entry].state != binding_state::recaptured;
  }
  scan(image_, key_, ranges, which);
  for (auto& s : sites_) // declared: trusted from the start
    if (settings_.of(units_[s.unit].position) == rebind_policy::patch) s.confirmed = true;
  for (auto& a : arguments_)
    if (a.binding && a.state != binding_state::recaptured)
      a.state = settings_.of(a.position) == rebind_policy::patch ? binding_state::patched : binding_state::learning;
  touched_flag_.assign(image_.nodes.size(), 0);
  started_ = true;
  index_sites();
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
  return settings_.of(u.position) == rebind_policy::patch || u.rounds >= std::max(1, settings_.verifications);
}

bool rebinder::same_structure(const graph_image& other, const call_key& key) const noexcept {
  if (other.nodes.size() != image_.nodes.size() || key.size() != key_.size()) return false;
  for (std::size_t i = 0; i < other.nodes.size(); ++i)
    if (other.nodes[i].kind != image_.nodes[i].kind || other.nodes[i].patchable != image_.nodes[i].patchable ||
        other.nodes[i].fields != image_.nodes[i].fields)
      return false;
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
    if (offset < start || offset >= start + size) continue;
    std::string name;
    switch (n.kind) {
    case node_kind::memcpy: name = p == 0 ? "memcpy source" : "memcpy destination"; break;
    case node_kind::memset: name = p == 0 ? "memset destination" : "memset value"; break;
    default: name = fmt::format("kernel parameter {}", p); break;
    }
    if (width != 0 && width < size) name += fmt::format(" bytes {}..{}", offset - start, offset - start + width - 1);
    return name;
  }
  return fmt::format("bytes {}..{}", offset, offset + width - 1);
}

std::string rebinder::learn(graph_image next, const call_key& key, const recapture_facts& facts,
                            const range_query& ranges) {
  if (!started_) {
    start(std::move(next), key, ranges);
    return {};
  }
  if (!same_structure(next, key)) {
    start(std::move(next), key, ranges);
    return "the graph's nodes changed: where arguments are embedded is learnt again";
  }

  // What changed: words of arguments, and bytes of nodes.
  std::vector<bool> unit_changed(units_.size(), false);
  for (std::size_t k = 0; k < units_.size(); ++k) {
    const unit& u = units_[k];
    unit_changed[k] = key_word(key_, u.entry, u.offset, u.width) != key_word(key, u.entry, u.offset, u.width);
  }
  std::vector<std::size_t> changed_entries;
  for (std::size_t i = 0; i < key.size(); ++i)
    if (arguments_[i].binding && entry_changed(key_, key, i)) changed_entries.push_back(i);

  std::vector<std::string> unexplained;
  if (!facts.clean_update)
    unexplained.emplace_back("the executable graph needed more than per-node setters (attributes, topology or a "
                             "kind without a per-node setter changed)");
  for (std::size_t n : facts.other_nodes_changed)
    unexplained.push_back(fmt::format("node {} ({}) changed, and rebind cannot patch that kind", n,
                                      n < next.nodes.size() ? to_string(next.nodes[n].kind) : "?"));
  std::vector<std::vector<std::uint8_t>> covered(next.nodes.size());
  for (std::size_t n = 0; n < next.nodes.size(); ++n) {
    const auto& a = image_.nodes[n];
    const auto& b = next.nodes[n];
    if (a.fixed != b.fixed)
      unexplained.push_back(fmt::format("node {} ({}): its function, launch shape or sizes changed", n,
                                        to_string(b.kind)));
    else if (a.bytes != b.bytes)
      covered[n].assign(b.bytes.size(), 0);
  }

  // Every site against the prediction.
  std::vector<std::pair<std::size_t, std::string>> contradictions;
  std::vector<site> kept;
  kept.reserve(sites_.size());
  for (site s : sites_) {
    const unit& u = units_[s.unit];
    if (arguments_[u.entry].state == binding_state::recaptured) continue;
    const std::uint64_t before = read_word(image_.nodes[s.node].bytes, s.offset, s.width);
    const std::uint64_t after = read_word(next.nodes[s.node].bytes, s.offset, s.width);
    const std::uint64_t predicted_before =
        mask(key_word(key_, u.entry, u.offset, u.width) + static_cast<std::uint64_t>(s.delta), s.width);
    const std::uint64_t predicted_after =
        mask(key_word(key, u.entry, u.offset, u.width) + static_cast<std::uint64_t>(s.delta), s.width);
    if (before != predicted_before) { // a stale candidate (its bytes were another argument's)
      if (s.confirmed)
        contradictions.emplace_back(u.entry, fmt::format("node {} {} held argument {} and no longer does", s.node,
                                                         field_name(s.node, s.offset, s.width), u.position));
      continue;
    }
    if (unit_changed[s.unit]) {
      if (after == predicted_after) {
        s.confirmed = true;
        if (!covered[s.node].empty())
          std::fill_n(covered[s.node].begin() + s.offset, s.width, std::uint8_t{1});
        kept.push_back(s);
      } else if (before == after) {
        if (s.confirmed)
          contradictions.emplace_back(u.entry, fmt::format("node {} {} held argument {} and did not follow its change",
                                                           s.node, field_name(s.node, s.offset, s.width), u.position));
      } else {
        contradictions.emplace_back(
            u.entry, fmt::format("node {} {} holds {:#x} where argument {} predicts {:#x}: the callable transforms "
                                 "the value",
                                 s.node, field_name(s.node, s.offset, s.width), after, u.position, predicted_after));
      }
    } else if (after == predicted_after) {
      kept.push_back(s);
    } else if (s.confirmed) {
      contradictions.emplace_back(u.entry, fmt::format("node {} {} held argument {} and no longer does",
                                                       s.node, field_name(s.node, s.offset, s.width), u.position));
    }
  }
  sites_ = std::move(kept);
  for (std::size_t n = 0; n < next.nodes.size(); ++n) {
    if (covered[n].empty()) continue;
    const auto& a = image_.nodes[n].bytes;
    const auto& b = next.nodes[n].bytes;
    for (std::size_t j = 0; j < b.size(); ++j)
      if (a[j] != b[j] && covered[n][j] == 0) {
        unexplained.push_back(fmt::format("node {} {} changed and no argument's word explains it", n,
                                          field_name(n, static_cast<std::uint32_t>(j), 0)));
        break;
      }
  }
  for (auto& [entry, why] : contradictions) give_up(entry, std::move(why));

  std::string note;
  auto add_note = [&](const std::string& text) { note += (note.empty() ? "" : "; ") + text; };
  // Entries whose changed words were all 0 before were not looked for (zero is everywhere): their fields show as
  // unexplained changes this time, and are looked for with their new values below.
  std::vector<std::size_t> zero_born;
  for (std::size_t i : changed_entries) {
    bool all_zero = arguments_[i].state != binding_state::recaptured;
    for (std::size_t k = 0; all_zero && k < units_.size(); ++k)
      if (units_[k].entry == i && unit_changed[k] && key_word(key_, i, units_[k].offset, units_[k].width) != 0)
        all_zero = false;
    if (all_zero) zero_born.push_back(i);
  }
  if (!unexplained.empty() && !zero_born.empty()) {
    std::string list;
    for (std::size_t i : zero_born) list += fmt::format("{}{}", list.empty() ? "" : ", ", arguments_[i].position);
    add_note(fmt::format("not verified: argument(s) {} were 0 before (not looked for); learnt at the next change",
                         list));
  } else if (!unexplained.empty()) {
    std::vector<std::size_t> live;
    for (std::size_t i : changed_entries)
      if (arguments_[i].state != binding_state::recaptured) live.push_back(i);
    if (live.size() == 1) {
      give_up(live[0], fmt::format("a change of it is not explained by where it is embedded: {}", unexplained[0]));
    } else if (!live.empty()) {
      std::string list;
      for (std::size_t i : live) list += fmt::format("{}{}", list.empty() ? "" : ", ", arguments_[i].position);
      add_note(fmt::format("not verified: arguments {} changed together and {}", list, unexplained[0]));
      for (std::size_t i : live)
        if (++unexplained_rounds_[i] >= max_unexplained_rounds)
          give_up(i, fmt::format("changed together with other arguments {} times without the changes being "
                                 "explained ({})",
                                 max_unexplained_rounds, unexplained[0]));
    }
  } else {
    for (std::size_t k = 0; k < units_.size(); ++k)
      if (unit_changed[k]) ++units_[k].rounds;
    for (std::size_t i : changed_entries) {
      auto& a = arguments_[i];
      if (a.state == binding_state::recaptured) continue;
      const bool reaches = std::any_of(sites_.begin(), sites_.end(), [&](const site& s) {
        return s.confirmed && units_[s.unit].entry == i;
      });
      if (!reaches) {
        give_up(i, "it changed but no node field holds it: the callable uses it on the host or transforms it (e.g. "
                   "writes it into memory the graph reads)");
        continue;
      }
      const bool verified = std::all_of(units_.begin(), units_.end(), [&](const unit& u) {
        return u.entry != i || !unit_changed[&u - units_.data()] || unit_verified(u);
      });
      if (verified && a.state == binding_state::learning) {
        a.state = binding_state::patched;
        std::size_t count = 0;
        for (const auto& s : sites_) count += s.confirmed && units_[s.unit].entry == i ? 1 : 0;
        a.reason = fmt::format("verified at call with {} {} change: {} site(s)", kind_word(a.kind),
                               a.kind == argument_kind::bytes ? "value" : "its", count);
        add_note(fmt::format("argument {} verified ({} node field(s)): patched in place from now on", a.position,
                             count));
      }
    }
  }

  // One field may not hold two arguments: a patch of one would overwrite the other.
  std::vector<const site*> confirmed;
  for (const auto& s : sites_)
    if (s.confirmed && arguments_[units_[s.unit].entry].state != binding_state::recaptured) confirmed.push_back(&s);
  std::sort(confirmed.begin(), confirmed.end(),
            [](const site* x, const site* y) { return std::tie(x->node, x->offset) < std::tie(y->node, y->offset); });
  for (std::size_t k = 1; k < confirmed.size(); ++k) {
    const site& x = *confirmed[k - 1];
    const site& y = *confirmed[k];
    const std::size_t ex = units_[x.unit].entry;
    const std::size_t ey = units_[y.unit].entry;
    if (x.node == y.node && y.offset < x.offset + x.width && ex != ey) {
      const std::string why = fmt::format("node {} {} holds arguments {} and {} in the same bytes", x.node,
                                          field_name(x.node, y.offset, y.width), units_[x.unit].position,
                                          units_[y.unit].position);
      give_up(ex, why);
      give_up(ey, why);
    }
  }
  for (std::size_t i : changed_entries)
    if (arguments_[i].state == binding_state::recaptured && !arguments_[i].reason.empty())
      add_note(fmt::format("argument {} re-captures from now on: {}", arguments_[i].position, arguments_[i].reason));

  // Words without a site (zero before, or never embedded as they were) are looked for again with their new values.
  std::vector<bool> which(units_.size(), false);
  std::vector<bool> has_site(units_.size(), false);
  for (const auto& s : sites_) has_site[s.unit] = true;
  for (std::size_t k = 0; k < units_.size(); ++k)
    which[k] = !has_site[k] && arguments_[units_[k].entry].state != binding_state::recaptured;
  scan(next, key, ranges, which);

  image_ = std::move(next);
  key_ = key;
  touched_flag_.assign(image_.nodes.size(), 0);
  index_sites();
  return note;
}

bool rebinder::can_learn(const call_key& from, const call_key& to) const {
  if (!started_ || from.size() != arguments_.size() || to.size() != arguments_.size()) return true;
  for (std::size_t i = 0; i < arguments_.size(); ++i)
    if (arguments_[i].binding && arguments_[i].state != binding_state::recaptured && entry_changed(from, to, i))
      return true;
  return false;
}

std::string rebinder::refresh(graph_image image, const call_key& key, const range_query& ranges) {
  stale_ = false;
  if (!started_ || !same_structure(image, key)) {
    start(std::move(image), key, ranges);
    return "the graph's nodes changed: where arguments are embedded is learnt again";
  }
  std::string note;
  std::vector<site> kept;
  kept.reserve(sites_.size());
  for (const site& s : sites_) {
    const unit& u = units_[s.unit];
    const std::uint64_t held = read_word(image.nodes[s.node].bytes, s.offset, s.width);
    const std::uint64_t predicted =
        mask(key_word(key, u.entry, u.offset, u.width) + static_cast<std::uint64_t>(s.delta), s.width);
    if (held == predicted) {
      kept.push_back(s);
    } else if (s.confirmed && arguments_[u.entry].state != binding_state::recaptured) {
      give_up(u.entry, fmt::format("node {} {} held argument {} and no longer does after a re-capture", s.node,
                                   field_name(s.node, s.offset, s.width), u.position));
      note += fmt::format("{}argument {} re-captures from now on: {}", note.empty() ? "" : "; ", u.position,
                          arguments_[u.entry].reason);
    }
  }
  sites_ = std::move(kept);
  image_ = std::move(image);
  key_ = key;
  touched_flag_.assign(image_.nodes.size(), 0);
  index_sites();
  return note;
}

bool rebinder::can_patch(const call_key& from, const call_key& to, std::string* why) const {
  if (!started_ || from.size() != arguments_.size() || to.size() != arguments_.size()) {
    if (why != nullptr) *why = "nothing learnt yet";
    return false;
  }
  for (std::size_t i = 0; i < arguments_.size(); ++i) {
    const auto& a = arguments_[i];
    if (!a.binding || !entry_changed(from, to, i)) continue;
    if (a.state == binding_state::recaptured) {
      if (why != nullptr) *why = fmt::format("argument {} re-captures ({})", a.position, a.reason);
      return false;
    }
    bool reaches = false;
    for (std::size_t k = 0; k < units_.size(); ++k) {
      const unit& u = units_[k];
      if (u.entry != i || key_word(from, i, u.offset, u.width) == key_word(to, i, u.offset, u.width)) continue;
      if (!unit_verified(u)) {
        if (why != nullptr)
          *why = fmt::format("argument {}: where it is embedded is not verified yet (learning)", a.position);
        return false;
      }
      reaches = reaches || unit_confirmed_[k] > 0;
    }
    if (!reaches && settings_.of(a.position) == rebind_policy::patch) {
      if (why != nullptr) *why = fmt::format("argument {} (declared patch) reaches no node field", a.position);
      return false;
    }
  }
  return true;
}

const std::vector<std::size_t>& rebinder::patch(const call_key& from, const call_key& to) {
  touched_.clear();
  for (std::size_t k = 0; k < units_.size(); ++k) {
    const unit& u = units_[k];
    const std::uint64_t v = key_word(to, u.entry, u.offset, u.width);
    if (unit_confirmed_[k] == 0 || v == key_word(from, u.entry, u.offset, u.width)) continue;
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
  for (std::size_t n : touched_) touched_flag_[n] = 0;
  std::sort(touched_.begin(), touched_.end());
  key_ = to;
  return touched_;
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
    const unit& u = units_[s.unit];
    if (arguments_[u.entry].state == binding_state::recaptured) continue;
    std::string line = fmt::format("argument {}", u.position);
    if (arguments_[u.entry].kind == argument_kind::bytes) line += fmt::format(" bytes {}..{}", u.offset, u.offset + u.width - 1);
    if (s.delta != 0) line += fmt::format(" {:+} B", s.delta);
    line += fmt::format(" -> {}", field_name(node, s.offset, s.width));
    if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(std::move(line));
  }
  return out;
}

} // namespace detail
} // namespace conveyor
