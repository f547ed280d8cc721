#include "conveyor/assembly/graph_cache.hpp"

#include "assembly/rebind.hpp"
#include "assembly/rebind_cuda.hpp"
#include "assembly/background_job.hpp"
#include "assembly/task_thread.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/node_name.hpp"
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"
#include "util/byte_size.hpp"

#include "conveyor/runtime/device.hpp"
#include "conveyor/runtime/graph_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace conveyor {

namespace detail {
std::size_t audit_every_env() {
  static const std::string value = [] {
    const char* v = std::getenv("CONVEYOR_AUDIT_EVERY");
    return std::string(v == nullptr ? "" : v);
  }();
  if (value.empty()) return 0;
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc{} || end != value.data() + value.size() || n >= (std::size_t{1} << 32))
    throw std::invalid_argument(fmt::format(
        "CONVEYOR_AUDIT_EVERY='{}': expected a whole number of calls in [0, 2^32) (1 audits every replayed call, 0 "
        "none)",
        value));
  return n;
}
} // namespace detail

namespace {

// A float or double argument's value (its bit pattern in `v.bits`).
std::string floating_text(const argument_key& v) {
  if (v.size == sizeof(float)) {
    float f = 0;
    const auto low = static_cast<std::uint32_t>(v.bits);
    std::memcpy(&f, &low, sizeof f);
    return fmt::format("{}", f);
  }
  double d = 0;
  std::memcpy(&d, &v.bits, sizeof d);
  return fmt::format("{}", d);
}

std::string value_text(const argument_key& v) {
  switch (v.kind) {
  case argument_kind::pointer: return fmt::format("{:#x}", v.bits);
  case argument_kind::floating: return floating_text(v);
  case argument_kind::integer:
  case argument_kind::padded_size:
  case argument_kind::real_size: return fmt::format("{}", v.bits);
  case argument_kind::bytes: return fmt::format("({} bytes)", v.size);
  }
  return fmt::format("{}", v.bits);
}

// The smallest of the sorted `buckets` at least `n`, or nullopt when `n` is above the largest.
std::optional<std::size_t> bucket_above(const std::vector<std::size_t>& buckets, std::size_t n) noexcept {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  if (it == buckets.end()) return std::nullopt;
  return *it;
}

// `n` rounded up to a multiple of `multiple`, or nullopt when that overflows.
std::optional<std::size_t> multiple_above(std::size_t multiple, std::size_t n) noexcept {
  if (n > std::numeric_limits<std::size_t>::max() - (multiple - 1)) return std::nullopt;
  return (n + multiple - 1) / multiple * multiple;
}

// `n` rounded up to a power of two, or nullopt when that overflows.
std::optional<std::size_t> power_of_two_above(std::size_t n) noexcept {
  if (n > (std::numeric_limits<std::size_t>::max() >> 1) + 1) return std::nullopt;
  return std::bit_ceil(n);
}

// The size `n` padded by the kind of `rule` (buckets, multiple, power of two; none: `n`), before its limit.
std::optional<std::size_t> padded_by_kind(const padding_rule& rule, std::size_t n) noexcept {
  if (!rule.buckets.empty()) return bucket_above(rule.buckets, n);
  if (rule.multiple != 0) return multiple_above(rule.multiple, n);
  if (rule.power_of_two) return power_of_two_above(n);
  return n;
}

// The size `n` padded by `rule`, or nullopt when the rule cannot pad it.
std::optional<std::size_t> padded_by(const padding_rule& rule, std::size_t n) noexcept {
  const std::optional<std::size_t> p = padded_by_kind(rule, n);
  if (!p || (rule.limit != 0 && *p > rule.limit)) return std::nullopt;
  return p;
}

// What a rule pads to, for the reason of an eager call: "the largest bucket 256", "the limit 4096".
std::string rule_bound(const padding_rule& rule) {
  if (rule.limit != 0 && (rule.buckets.empty() || rule.limit < rule.buckets.back()))
    return fmt::format("the limit {}", rule.limit);
  return rule.buckets.empty() ? std::string("what its rule pads")
                              : fmt::format("the largest bucket {}", rule.buckets.back());
}

// Checks and sorts a padding rule (`what` names it in the message).
void check_rule(padding_rule& rule, const std::string& what) {
  const int kinds = (rule.buckets.empty() ? 0 : 1) + (rule.multiple != 0 ? 1 : 0) + (rule.power_of_two ? 1 : 0);
  if (kinds > 1)
    throw std::invalid_argument(fmt::format("conveyor::graphed: {} gives more than one of buckets, multiple and "
                                            "power_of_two; give one",
                                            what));
  std::sort(rule.buckets.begin(), rule.buckets.end());
  if (!rule.buckets.empty() && rule.buckets.front() == 0)
    throw std::invalid_argument(fmt::format("conveyor::graphed: {} has a bucket of size 0", what));
}

constexpr std::array<std::pair<argument_kind, std::string_view>, 6> kind_texts{{
    {argument_kind::pointer, "pointer"},
    {argument_kind::integer, "integer"},
    {argument_kind::floating, "scalar"},
    {argument_kind::padded_size, "padded size"},
    {argument_kind::real_size, "real size"},
    {argument_kind::bytes, "value"},
}};

std::string_view kind_text(argument_kind kind) {
  for (const auto& [k, text] : kind_texts)
    if (k == kind) return text;
  return "value";
}

// The same role, kind and argument position.
bool same_slot(const argument_key& a, const argument_key& b) noexcept {
  return a.role == b.role && a.kind == b.kind && a.position == b.position;
}

// How entry `b` differs from `a` (its value before), for changes_from.
std::string change_text(const argument_key& a, const argument_key& b) {
  return b.kind == argument_kind::bytes ? fmt::format("argument {} value changed ({} bytes)", b.position, b.size)
                                        : fmt::format("argument {} {} changed from {} to {}", b.position,
                                                      kind_text(b.kind), value_text(a), value_text(b));
}

// Refuses an options list (rebind_arguments, dimensions: `what`) whose entry `i` names an argument an earlier one
// names.
template <class List>
void check_not_repeated(const List& list, std::size_t i, const char* what) {
  for (std::size_t j = 0; j < i; ++j)
    if (list[i].first == list[j].first)
      throw std::invalid_argument(fmt::format("conveyor::graphed: {} names argument {} twice", what, list[i].first));
}

// Checks the counts and the per-argument rebind policies of graphed_options.
void check_counts(const graphed_options& options) {
  if (options.max_graphs == 0) throw std::invalid_argument("conveyor::graphed: max_graphs must be at least 1");
  if (options.rebind_verifications < 1)
    throw std::invalid_argument(fmt::format("conveyor::graphed: rebind_verifications must be at least 1 (got {})",
                                            options.rebind_verifications));
  for (std::size_t i = 0; i < options.rebind_arguments.size(); ++i)
    check_not_repeated(options.rebind_arguments, i, "rebind_arguments");
  if (options.warmup_calls < 0) throw std::invalid_argument("conveyor::graphed: warmup_calls must be >= 0");
  if (options.instantiate_threads == 0)
    throw std::invalid_argument("conveyor::graphed: instantiate_threads must be at least 1");
}

// Sorts and checks the default bucket list.
void check_buckets(std::vector<std::size_t>& buckets) {
  std::sort(buckets.begin(), buckets.end());
  if (!buckets.empty() && buckets.front() == 0) throw std::invalid_argument("conveyor::graphed: a bucket of size 0");
}

// Checks (and sorts) the padding rule of each dimension; each argument at most once.
void check_dimensions(std::vector<std::pair<std::size_t, padding_rule>>& dimensions) {
  for (std::size_t i = 0; i < dimensions.size(); ++i) {
    check_rule(dimensions[i].second, fmt::format("the padding rule of argument {}", dimensions[i].first));
    check_not_repeated(dimensions, i, "dimensions");
  }
}

void check_churn(const churn_guard& churn) {
  if (churn.max_records != 0 && (churn.window <= churn.max_records || churn.settle_calls == 0))
    throw std::invalid_argument(fmt::format(
        "conveyor::graphed: the churn guard needs a window above its cap and settle_calls >= 1 (max_records {}, "
        "window {}, settle_calls {})",
        churn.max_records, churn.window, churn.settle_calls));
}

// The callable's rebind policy or an argument's satisfies `pred`.
template <class Pred>
bool any_policy(const graphed_options& options, Pred pred) {
  return pred(options.rebind) || std::any_of(options.rebind_arguments.begin(), options.rebind_arguments.end(),
                                             [&](const auto& a) { return pred(a.second); });
}

} // namespace

// ---- call_key ------------------------------------------------------------------------------------------------

void call_key::add(std::uint64_t bits, argument_role role, argument_kind kind, std::size_t position,
                   std::uint32_t size) {
  if (count_ == capacity)
    throw std::invalid_argument(fmt::format("conveyor::graphed: more than {} keyed values (argument {}); wrap "
                                            "arguments that do not change the work in conveyor::unkeyed, or supply "
                                            "a key function",
                                            capacity, position));
  args_[count_++] = argument_key{bits, size, role, kind, static_cast<std::uint8_t>(position)};
}

void call_key::add_bytes(const void* data, std::size_t size, argument_role role, std::size_t position) {
  if (size > 0xFFFFFFFFULL)
    throw std::invalid_argument(fmt::format("conveyor::graphed: argument {} of {} bytes is too large to key; pass "
                                            "a pointer to it",
                                            position, size));
  add(bytes_.size(), role, argument_kind::bytes, position, static_cast<std::uint32_t>(size));
  const auto* p = static_cast<const unsigned char*>(data);
  bytes_.insert(bytes_.end(), p, p + size);
}

bool call_key::same_entry(const call_key& other, std::size_t i) const noexcept {
  const auto& a = args_[i];
  const auto& b = other.args_[i];
  if (a.kind != b.kind || a.size != b.size) return false;
  if (a.kind != argument_kind::bytes) return a.bits == b.bits;
  return std::memcmp(bytes_.data() + a.bits, other.bytes_.data() + b.bits, a.size) == 0;
}

bool call_key::same_shape(const call_key& other) const noexcept {
  if (count_ != other.count_ || user_key_ != other.user_key_ || has_user_key_ != other.has_user_key_) return false;
  for (std::size_t i = 0; i < count_; ++i) {
    if (!same_slot(args_[i], other.args_[i])) return false;
    if (args_[i].role == argument_role::shape && !same_entry(other, i)) return false;
  }
  return true;
}

bool call_key::same_binding(const call_key& other) const noexcept {
  for (std::size_t i = 0; i < count_ && i < other.count_; ++i)
    if (args_[i].role != argument_role::shape && !same_entry(other, i)) return false;
  return count_ == other.count_;
}

std::string call_key::changes_from(const call_key& before) const {
  std::string out;
  for (std::size_t i = 0; i < count_ && i < before.count_; ++i) {
    if (same_entry(before, i)) continue;
    if (!out.empty()) out += "; ";
    out += change_text(before.args_[i], args_[i]);
  }
  if (before.user_key_ != user_key_)
    out += fmt::format("{}key changed from {} to {}", out.empty() ? "" : "; ", before.user_key_, user_key_);
  return out;
}

std::string call_key::shape_text() const {
  std::string shape;
  for (std::size_t i = 0; i < count_; ++i)
    if (args_[i].role == argument_role::shape)
      shape += fmt::format("{}{}={}", shape.empty() ? "" : ", ", args_[i].position, value_text(args_[i]));
  if (has_user_key_) shape += fmt::format("{}key={}", shape.empty() ? "" : ", ", user_key_);
  return shape;
}

// ---- graph_cache ---------------------------------------------------------------------------------------------

graph_cache::graph_cache(graph_cache&&) noexcept = default;
graph_cache& graph_cache::operator=(graph_cache&&) noexcept = default;
// The worker threads first: they finish the instantiation in progress and let their jobs go before pending_ does,
// so that no graph dies on a worker.
graph_cache::~graph_cache() { workers_.clear(); }

graph_cache::graph_cache(graphed_options options) : options_(std::move(options)) {
  check_counts(options_);
  check_buckets(options_.buckets);
  default_rule_.buckets = options_.buckets;
  check_dimensions(options_.dimensions);
  const churn_guard& churn = options_.churn;
  check_churn(churn);
  stats_.churn_max_records = churn.max_records;
  stats_.churn_window = churn.max_records != 0 ? churn.window : 0;
  rebinding_ = any_policy(options_, [](rebind_policy p) { return p != rebind_policy::recapture; });
  declared_patch_ = any_policy(options_, [](rebind_policy p) { return p == rebind_policy::patch; });
}

std::optional<std::size_t> graph_cache::bucket_for(std::size_t n) const noexcept {
  if (options_.buckets.empty()) return n;
  return bucket_above(options_.buckets, n);
}

const padding_rule& graph_cache::rule_of(std::size_t position) const noexcept {
  for (const auto& [p, rule] : options_.dimensions)
    if (p == position) return rule;
  return default_rule_;
}

std::optional<std::size_t> graph_cache::bucket_for(std::size_t position, std::size_t n) const noexcept {
  return padded_by(rule_of(position), n);
}

namespace {

// prepare_shapes' dimensions: one per distinct rule, and the dimension of each size.
struct shape_dimensions {
  std::vector<const padding_rule*> rules;
  std::vector<std::size_t> dimension_of; // per size
  bool any_list = false;                 // some rule has a bucket list
};

// The dimensions of sizes padded by `rule_of_size` (per size): one per distinct rule.
shape_dimensions dimensions_of(const std::vector<const padding_rule*>& rule_of_size) {
  shape_dimensions out;
  out.dimension_of.resize(rule_of_size.size());
  for (std::size_t i = 0; i < rule_of_size.size(); ++i) {
    const padding_rule* r = rule_of_size[i];
    auto it = std::find(out.rules.begin(), out.rules.end(), r);
    if (it == out.rules.end()) it = out.rules.insert(out.rules.end(), r);
    out.dimension_of[i] = static_cast<std::size_t>(it - out.rules.begin());
    out.any_list = out.any_list || !r->buckets.empty();
  }
  return out;
}

// The sizes a dimension of `rule` takes, largest first (no bucket list: one entry, 0 = each keeps its own size).
std::vector<std::size_t> choices_of(const padding_rule& rule) {
  std::vector<std::size_t> out;
  for (std::size_t b : rule.buckets)
    if (rule.limit == 0 || b <= rule.limit) out.insert(out.begin(), b);
  if (out.empty()) out.push_back(0);
  return out;
}

// Advances the odometer `at` over `choices` (the last dimension fastest); false once it went round.
bool advance(std::vector<std::size_t>& at, const std::vector<std::vector<std::size_t>>& choices) {
  std::size_t d = at.size();
  while (d > 0 && ++at[d - 1] == choices[d - 1].size()) at[--d] = 0;
  return d != 0;
}

// The shape the odometer `at` points at: each size its dimension's choice, or its own size padded by its rule.
std::vector<std::size_t> shape_at(const std::vector<std::size_t>& at,
                                  const std::vector<std::vector<std::size_t>>& choices, const shape_dimensions& dims,
                                  const std::vector<std::pair<std::size_t, std::size_t>>& sizes,
                                  const std::vector<const padding_rule*>& rule_of_size) {
  std::vector<std::size_t> shape(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::size_t c = choices[dims.dimension_of[i]][at[dims.dimension_of[i]]];
    shape[i] = c != 0 ? c : padded_by(*rule_of_size[i], sizes[i].second).value_or(sizes[i].second);
  }
  return shape;
}

} // namespace

std::vector<std::vector<std::size_t>>
graph_cache::prepare_shapes(const std::vector<std::pair<std::size_t, std::size_t>>& sizes) const {
  // The dimensions: one per distinct rule (the shared default one for arguments without their own), each with the
  // sizes it takes, largest first (a dimension without a bucket list: one entry, 0 = each keeps its own size).
  std::vector<const padding_rule*> rule_of_size(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) rule_of_size[i] = &rule_of(sizes[i].first);
  const shape_dimensions dims = dimensions_of(rule_of_size);
  std::vector<std::vector<std::size_t>> out;
  if (!dims.any_list) return out;
  std::vector<std::vector<std::size_t>> choices(dims.rules.size());
  for (std::size_t d = 0; d < dims.rules.size(); ++d) choices[d] = choices_of(*dims.rules[d]);
  std::vector<std::size_t> at(dims.rules.size(), 0); // an odometer over the choices, the last dimension fastest
  do out.push_back(shape_at(at, choices, dims, sizes, rule_of_size));
  while (advance(at, choices));
  return out;
}

namespace {

// A plan that captures or re-captures: a record for the churn guard.
bool records(call_plan p) noexcept {
  return p == call_plan::capture_new || p == call_plan::capture_background || p == call_plan::recapture;
}

} // namespace

call_plan graph_cache::plan(const call_key& key) {
  ++stats_.calls;
  matched_ = nullptr;
  if (!pending_.empty()) reap_background(); // finished background instantiations into the cache, whatever the plan
  if (stats_.guard_engaged && !settled(key)) {
    ++stats_.guarded_calls;
    return call_plan::eager_guarded;
  }
  const call_plan p = plan_cached(key);
  if (records(p) && churning(key)) {
    matched_ = nullptr;
    ++stats_.guarded_calls;
    return call_plan::eager_guarded;
  }
  return p;
}

bool graph_cache::churning(const call_key& key) {
  const churn_guard& churn = options_.churn;
  if (churn.max_records == 0) return false;
  records_.push_back(stats_.calls);
  while (!records_.empty() && records_.front() + churn.window <= stats_.calls) records_.pop_front();
  if (records_.size() <= churn.max_records) return false;
  note(fmt::format("churn guard: {} captures and re-captures in the last {} calls, more than {}: running eagerly "
                   "until the arguments settle ({} steady calls in a row)",
                   records_.size(), churn.window, churn.max_records, churn.settle_calls));
  records_.clear();
  stats_.guard_engaged = true;
  ++stats_.guard_trips;
  steady_ = 0;
  last_key_ = key;
  return true;
}

bool graph_cache::settled(const call_key& key) {
  const bool replayable = std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) {
    return e->key.same_shape(key) && e->key.same_binding(key);
  });
  const bool steady = replayable || (last_key_.same_shape(key) && last_key_.same_binding(key));
  last_key_ = key;
  steady_ = steady ? steady_ + 1 : 0;
  if (steady_ < options_.churn.settle_calls) return false;
  stats_.guard_engaged = false;
  ++stats_.guard_resumes;
  note(fmt::format("churn guard: {} steady calls in a row: graphing again", steady_));
  return true;
}

namespace {

// Refuses a call whose static_pointer argument differs from the one the cached graph `cached` reads.
void check_static_pointers(const call_key& cached, const call_key& key) {
  for (std::size_t i = 0; i < key.size(); ++i)
    if (key[i].role == argument_role::static_pointer && key[i].bits != cached[i].bits)
      throw std::invalid_argument(fmt::format(
          "conveyor::graphed: argument {} was declared static but changed from {:#x} to {:#x}; the graph "
          "reads the old address, so a replay would silently use stale data. Copy the new data into the static "
          "buffer, or do not declare the argument static",
          key[i].position, cached[i].bits, key[i].bits));
}

} // namespace

call_plan graph_cache::plan_cached(const call_key& key) {
  const auto found =
      std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e->key.same_shape(key); });
  return found != entries_.end() ? plan_for(**found, key) : plan_new_shape(key);
}

// A call of a cached shape: replay when the binding is the graph's, else patch (rebind) or re-capture.
call_plan graph_cache::plan_for(entry& e, const call_key& key) {
  check_static_pointers(e.key, key);
  matched_ = &e;
  e.last_used = ++clock_;
  e.last_call = stats_.calls;
  if (!e.binding_unknown && e.key.same_binding(key)) return call_plan::replay;
  not_rebound_.clear();
  if (!rebinding_ || e.rebind_broken || e.binding_unknown) return call_plan::recapture;
  if (!e.rebind && declared_patch_) (void)rebinder_of(e); // declared arguments need no verifying re-capture
  if (e.rebind && e.rebind->can_patch(e.key, key, &not_rebound_)) return call_plan::rebind;
  if (!e.rebind) not_rebound_ = "first change of this graph's arguments: learning where they are embedded";
  return call_plan::recapture;
}

// A call of a shape with no cached graph: eager while its graph is instantiated in the background or while it warms
// up, then captured (in the call, or handed to a worker).
call_plan graph_cache::plan_new_shape(const call_key& key) {
  if (!pending_.empty() && waiting_for_background(key)) {
    ++stats_.eager_while_instantiating;
    return call_plan::eager_instantiating;
  }
  auto warm = std::find_if(warmups_.begin(), warmups_.end(), [&](auto& w) { return w.first.same_shape(key); });
  if (warm == warmups_.end()) warm = warmups_.insert(warmups_.end(), {key, 0});
  if (warm->second < options_.warmup_calls) {
    ++warm->second;
    ++stats_.warmups;
    return call_plan::eager_warmup;
  }
  return options_.instantiate_in_background ? call_plan::capture_background : call_plan::capture_new;
}

namespace detail {

graph_holding holding_of(const graph& g) {
  graph_holding h;
  const auto nodes = graph_nodes(g.get());
  h.nodes = nodes.size();
  for (cudaGraphNode_t n : nodes)
    if (kind_of(n) == node_kind::mem_alloc) {
      ++h.allocations;
      h.bytes += read_mem_alloc(n).bytes;
    }
  return h;
}

} // namespace detail

namespace {

// The graph allocation bytes the cache's entries hold.
template <class Entries>
std::size_t bytes_held(const Entries& entries) {
  std::size_t held = 0;
  for (const auto& e : entries) held += e->bytes;
  return held;
}

// The least recently used of `entries` other than `keep` (end() when none).
template <class Entries, class Entry>
auto least_recently_used(Entries& entries, const Entry* keep) {
  auto victim = entries.end();
  for (auto it = entries.begin(); it != entries.end(); ++it)
    if (it->get() != keep && (victim == entries.end() || (*it)->last_used < (*victim)->last_used)) victim = it;
  return victim;
}

// `incoming` more bytes than the `held` ones exceed the byte budget `max_bytes` (0: none).
bool over_budget(std::size_t max_bytes, std::size_t held, std::size_t incoming) noexcept {
  return max_bytes != 0 && held + incoming > max_bytes;
}

} // namespace

void graph_cache::evict(std::vector<std::unique_ptr<entry>>::iterator victim, const char* why) {
  const entry& e = **victim;
  note(fmt::format("evicted the least recently used graph{} ({})",
                   e.bytes != 0 ? fmt::format(" holding {} of graph allocations", detail::byte_size(e.bytes)) : "",
                   why));
  if (matched_ == victim->get()) matched_ = nullptr;
  // Destroyed at once: its queued launches keep what they use until they finish (graph_exec's lifetimes).
  entries_.erase(victim);
  ++stats_.evictions;
}

// Evicts least recently used graphs (never `keep`) until one more graph fits the count cap (when `keep` is null: a
// graph is about to be added) and `incoming` more bytes fit the byte budget.
void graph_cache::make_room(std::size_t incoming, const entry* keep) {
  bool freed_bytes = false;
  for (;;) {
    const std::size_t held = bytes_held(entries_);
    const auto victim = least_recently_used(entries_, keep);
    if (victim == entries_.end()) break;
    if (keep == nullptr && entries_.size() >= options_.max_graphs) {
      evict(victim, fmt::format("cache holds {}", options_.max_graphs).c_str());
      continue;
    }
    if (!over_budget(options_.max_bytes, held, incoming)) break;
    evict(victim, fmt::format("byte budget {}: {} held, {} more wanted", detail::byte_size(options_.max_bytes),
                              detail::byte_size(held), detail::byte_size(incoming))
                      .c_str());
    ++stats_.budget_evictions;
    freed_bytes = true;
  }
  if (freed_bytes && options_.trim_on_evict) trim_graph_memory(current_device());
}

graph_cache::entry& graph_cache::insert(const call_key& key, graph g) {
  const detail::graph_holding h = detail::holding_of(g);
  make_room_for(h);
  note(fmt::format("captured and instantiated a graph of {} nodes for shape ({})", h.nodes, key.shape_text()));
  ++stats_.captures;
  return store(key, instantiate(g, options_.flags), h);
}

// Room for one more graph holding `h` (make_room), and the reason when it is above the byte budget by itself.
void graph_cache::make_room_for(const detail::graph_holding& h) {
  make_room(h.bytes, nullptr);
  if (options_.max_bytes != 0 && h.bytes > options_.max_bytes)
    note(fmt::format("the new graph holds {} of graph allocations, above the byte budget {}: cached alone",
                     detail::byte_size(h.bytes), detail::byte_size(options_.max_bytes)));
}

// Adds an executable graph made for `key`, holding `h` (room made by the caller), as the most recently used.
graph_cache::entry& graph_cache::store(const call_key& key, graph_exec exec, const detail::graph_holding& h) {
  entries_.push_back(std::make_unique<entry>(
      entry{key, std::move(exec), ++clock_, nullptr, false, h.nodes, h.allocations, h.bytes, stats_.calls}));
  ++stats_.instantiations;
  std::erase_if(warmups_, [&](auto& w) { return w.first.same_shape(key); });
  stats_.held_bytes = bytes_held(entries_);
  return *entries_.back();
}

std::vector<cached_graph> graph_cache::cached() const {
  std::vector<const entry*> order;
  for (const auto& e : entries_) order.push_back(e.get());
  std::sort(order.begin(), order.end(), [](const entry* a, const entry* b) { return a->last_used > b->last_used; });
  std::vector<cached_graph> out;
  for (const entry* e : order) out.push_back({e->key.shape_text(), e->nodes, e->allocations, e->bytes, e->last_call});
  return out;
}

graph_cache::entry& graph_cache::matched(const char* call) {
  if (matched_ == nullptr)
    throw std::logic_error(fmt::format("conveyor::graph_cache::{}: plan() matched no executable graph", call));
  return *matched_;
}

void graph_cache::add(const call_key& key, graph g, const stream& s) {
  (void)detail::nonempty_state(g, "conveyor::graph_cache::add");
  if (options_.instantiate_in_background) return add_in_background(key, std::move(g));
  insert(key, std::move(g)).exec.upload(s);
}

void graph_cache::add_saved(const call_key& key, graph g, const stream& s, bool binding_known) {
  (void)detail::nonempty_state(g, "conveyor::graph_cache::add_saved");
  entry& e = insert(key, std::move(g));
  --stats_.captures; // loaded, not captured
  e.binding_unknown = !binding_known;
  note(fmt::format("loaded a saved graph for shape ({}){}", key.shape_text(),
                   binding_known ? "" : ": its binding is not known, its first call re-captures"));
  e.exec.upload(s);
}

std::vector<graph_cache::bucket> graph_cache::buckets() const {
  std::vector<bucket> out;
  for (const auto& e : entries_) out.push_back({e->key, &e->exec, !e->binding_unknown});
  return out;
}

bool graph_cache::has_cached_shape(const call_key& key) const noexcept {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e->key.same_shape(key); });
}

bool graph_cache::has_shape(const call_key& key) const noexcept {
  return has_cached_shape(key) ||
         std::any_of(pending_.begin(), pending_.end(), [&](const auto& j) { return j->key.same_shape(key); });
}

void graph_cache::add_and_launch(const call_key& key, graph g, const stream& s) {
  (void)detail::nonempty_state(g, "conveyor::graph_cache::add_and_launch");
  entry& e = insert(key, std::move(g));
  matched_ = &e;
  e.exec.launch(s);
  auto& first = detail::exec_access::state(e.exec).first;
  if (first != detail::first_launch::not_yet) first = detail::first_launch::at_instantiation; // no upload came first
  ++stats_.replays;
}

detail::rebinder& graph_cache::rebinder_of(entry& e) {
  if (!e.rebind)
    e.rebind = std::make_shared<detail::rebinder>(
        detail::rebind_settings{options_.rebind, options_.rebind_arguments, options_.rebind_verifications});
  if (!e.rebind->started()) { // what the executable graph runs now: its current graph, with its key
    std::vector<cudaGraphNode_t> nodes;
    e.rebind->start(detail::image_of(detail::current_graph(e.exec)->handle, nodes), e.key, detail::device_ranges());
  }
  return *e.rebind;
}

namespace {

// How a re-capture's update went, for its reason ("re-captured, whole-graph update"), counted in `stats`.
std::string count_update(const update_result& result, graphed_statistics& stats) {
  switch (result.method) {
  case update_method::none: ++stats.unchanged_recaptures; return "re-captured, graph unchanged";
  case update_method::per_node:
    ++stats.per_node_updates;
    stats.nodes_set += result.nodes_set;
    return fmt::format("re-captured, updated {} node(s) in place", result.nodes_set);
  case update_method::whole_graph:
    ++stats.whole_graph_updates;
    return result.explanation.empty() ? std::string("re-captured, whole-graph update")
                                      : fmt::format("re-captured, whole-graph update ({})", result.explanation);
  case update_method::reinstantiated:
    ++stats.instantiations;
    return fmt::format("re-captured, re-instantiated ({})", result.reason());
  case update_method::refused: break; // not asked for: both updates re-instantiate here
  }
  return "re-captured";
}

// Reads the re-capture `g` once, for learning where rebinding arguments sit and for the update: its image in `next`
// (the fields, moved out of the snapshot), whether nodes changed that no argument explains (compared with the graph
// `exec` runs), and the snapshot itself in `read`, for update_incremental.
detail::recapture_facts read_for_learning(const graph_exec& exec, const graph& g, detail::graph_image& next,
                                          detail::graph_snapshot& read) {
  const auto& current = detail::current_graph(exec);
  const auto before = detail::graph_nodes(current->handle);
  read = detail::snapshot_graph(g.get(), true);
  next = detail::image_of(read);
  detail::recapture_facts facts;
  facts.other_nodes_changed =
      detail::other_changes(before, read.nodes, next, {current.get(), detail::access::state(g).get()});
  return facts;
}

// Whether a re-capture from `from` to `to` teaches the rebinder `rb` (null: none yet) anything.
bool worth_learning(bool rebinding_on, bool binding_unknown, const detail::rebinder* rb, const call_key& from,
                    const call_key& to) {
  return rebinding_on && !binding_unknown && (rb == nullptr || rb->can_learn(from, to));
}

// Why the call was not patched, for its reason (empty when rebinding is off or nothing was said).
std::string not_patched_text(bool rebinding_on, const std::string& not_rebound) {
  return rebinding_on && !not_rebound.empty() ? fmt::format(" [not patched: {}]", not_rebound) : std::string();
}

// Teaches `rb` the re-capture `next` (with `key`), updated to by `method`; returns what it learnt, for the reason.
std::string learn_from(detail::rebinder& rb, detail::graph_image next, const call_key& key,
                       detail::recapture_facts facts, update_method method) {
  facts.clean_update = method == update_method::none || method == update_method::per_node;
  const std::string learnt = rb.learn(std::move(next), key, facts, detail::device_ranges());
  return learnt.empty() ? std::string() : fmt::format(" [rebind: {}]", learnt);
}

} // namespace

void graph_cache::update_and_launch(const call_key& key, graph g, const stream& s) {
  (void)detail::nonempty_state(g, "conveyor::graph_cache::update_and_launch");
  entry& e = matched("update_and_launch");
  ++stats_.captures;
  const bool rebinding_on = rebinding_ && !e.rebind_broken;
  if (rebinding_on) ++stats_.rebind_fallbacks;
  // Learning reads both graphs; when every argument that changed re-captures for good it would teach nothing: the
  // rebinder only notes that its image is out of date (refreshed before its next patch).
  const bool learning = worth_learning(rebinding_on, e.binding_unknown, e.rebind.get(), e.key, key);
  // The definition the executable graph runs now, destroyed only after the launch is queued: destroying a graph of
  // N nodes costs about as much as reading it, and then overlaps the GPU's run instead of delaying it.
  std::shared_ptr<const void> replaced = detail::current_graph(e.exec);
  detail::graph_image next;
  detail::recapture_facts facts;
  const update_result result = learning ? learn_and_update(e, g, next, facts) : update_to(e, g);
  std::string line = fmt::format("{}: {}", key.changes_from(e.key), count_update(result, stats_));
  if (result.method == update_method::reinstantiated) rehold(e, g); // another graph now, within the budget
  line += not_patched_text(rebinding_on, not_rebound_);
  if (learning) line += learn_from(*e.rebind, std::move(next), key, std::move(facts), result.method);
  else if (rebinding_on && e.rebind) e.rebind->mark_stale();
  note(std::move(line));
  e.key = key;
  e.binding_unknown = false;
  e.exec.launch(s);
  ++stats_.replays;
  replaced.reset();
}

// The re-capture `g` applied to `e` as graphed_options::recapture says (update_or_reinstantiate by default).
update_result graph_cache::update_to(entry& e, const graph& g) {
  return options_.recapture == recapture_update::per_node ? e.exec.update_incremental(g)
                                                          : e.exec.update_or_reinstantiate(g);
}

// Reads both graphs for the rebinder (`next`, `facts`), then applies `g` node by node from that read.
update_result graph_cache::learn_and_update(entry& e, const graph& g, detail::graph_image& next,
                                            detail::recapture_facts& facts) {
  (void)rebinder_of(e);
  detail::graph_snapshot read;
  facts = read_for_learning(e.exec, g, next, read);
  return detail::exec_access::update_incremental(e.exec, g, std::move(read));
}

// After `e` was re-instantiated from `g`: what it holds now, and room for it within the byte budget.
void graph_cache::rehold(entry& e, const graph& g) {
  const detail::graph_holding h = detail::holding_of(g);
  e.nodes = h.nodes;
  e.allocations = h.allocations;
  e.bytes = h.bytes;
  make_room(0, &e);
  stats_.held_bytes = bytes_held(entries_);
}

bool graph_cache::rebind_and_launch(const call_key& key, const stream& s) {
  entry& e = matched("rebind_and_launch");
  if (!detail::paired_by_position(detail::exec_access::state(e.exec))) { // patches go by position
    not_rebound_ = std::string(detail::not_paired_by_position());
    return false;
  }
  if (e.rebind->stale()) { // re-captures since the last learning: read what the executable graph runs now
    std::vector<cudaGraphNode_t> nodes;
    const std::string note_text = e.rebind->refresh(detail::image_of(detail::current_graph(e.exec)->handle, nodes),
                                                    e.key, detail::device_ranges());
    if (!note_text.empty()) note(fmt::format("[rebind: {}]", note_text));
    if (!e.rebind->can_patch(e.key, key, &not_rebound_)) return false;
  }
  const auto& nodes = e.rebind->patch(e.key, key);
  std::size_t applied = 0;
  const cudaError_t rc = detail::apply_patch(e.exec, e.rebind->image(), nodes, applied);
  if (rc != cudaSuccess) {
    // The nodes set so far are marked patched in the executable graph: the re-capture's update sets them again.
    e.rebind.reset();
    e.rebind_broken = true;
    not_rebound_ = fmt::format("CUDA refused patching node {} ({}): rebinding is off for this graph", nodes[applied],
                               cudaGetErrorName(rc));
    return false;
  }
  note(fmt::format("{}: patched {} node(s) in place, no capture", key.changes_from(e.key), nodes.size()));
  e.key = key;
  ++stats_.rebinds;
  stats_.nodes_patched += nodes.size();
  e.exec.launch(s);
  ++stats_.replays;
  return true;
}

void graph_cache::step(const graph& g, const stream& s) {
  (void)detail::nonempty_state(g, "conveyor::graph_cache::step");
  ++stats_.calls;
  ++stats_.stepped;
  (void)conveyor::step_through(g, s, options_.step);
}

bool graph_cache::audit_due(call_plan plan) noexcept {
  if (options_.audit_every == 0 || (plan != call_plan::replay && plan != call_plan::rebind)) return false;
  return ++audit_count_ % options_.audit_every == 0;
}

namespace {

// What differs between the graph an executable graph ran and a fresh capture, node by node, when the executable
// graph runs `ran`'s fields for its patchable nodes (rebinding patched them) and the nodes of `current` otherwise.
// What differs between two patchable nodes (empty: nothing).
std::string_view patchable_difference(const detail::node_image& a, const detail::node_image& b) noexcept {
  if (a.fixed != b.fixed) return "function, launch shape or sizes";
  if (a.bytes != b.bytes) return "fields (arguments, pointers, values)";
  return {};
}

// What differs between node `a` the executable graph ran (`was` in its graph) and node `b` of a fresh capture (`now`)
// (empty: nothing).
std::string_view node_difference(const detail::node_image& a, const detail::node_image& b, cudaGraphNode_t was,
                                 cudaGraphNode_t now, const detail::compare_context& ctx) {
  if (a.kind != b.kind) return "another kind";
  if (a.patchable && b.patchable) return patchable_difference(a, b);
  if (!a.patchable && detail::traits_of(b.kind).compare(was, now, ctx).differs) return "its parameters";
  return {};
}

std::vector<std::string> patched_differences(const detail::graph_image& ran,
                                             const std::vector<cudaGraphNode_t>& current,
                                             const detail::graph_image& fresh, const std::vector<cudaGraphNode_t>& now,
                                             const detail::compare_context& ctx) {
  std::vector<std::string> out;
  if (ran.nodes.size() != fresh.nodes.size() || current.size() != now.size())
    return {fmt::format("the capture has {} nodes, the executable graph {}", fresh.nodes.size(), ran.nodes.size())};
  for (std::size_t i = 0; i < fresh.nodes.size(); ++i) {
    const std::string name = detail::node_name(ctx.after, now[i]);
    const std::string_view what = node_difference(ran.nodes[i], fresh.nodes[i], current[i], now[i], ctx);
    if (!what.empty()) out.push_back(fmt::format("node {} ({}): {}", i, name, what));
  }
  return out;
}

std::vector<std::string> graph_differences(const detail::graph_comparison& c, const detail::compare_context& ctx) {
  if (!c.same_topology) return {fmt::format("the topology: {}", c.topology_reason)};
  std::vector<std::string> out;
  for (const auto& d : c.changed)
    out.push_back(
        fmt::format("node {} ({}): {}", d.position, detail::node_name(ctx.after, c.after[d.position]), d.diff.what));
  return out;
}

// The first four of `differences`, and how many more.
std::string first_differences(const std::vector<std::string>& differences) {
  std::string list;
  for (std::size_t k = 0; k < differences.size() && k < 4; ++k) list += (k == 0 ? "" : "; ") + differences[k];
  if (differences.size() > 4) list += fmt::format("; and {} more", differences.size() - 4);
  return list;
}

} // namespace

void graph_cache::audit(const graph& fresh) {
  (void)detail::nonempty_state(fresh, "conveyor::graph_cache::audit");
  entry& e = matched("audit");
  ++stats_.audits;
  const auto& current = detail::current_graph(e.exec);
  const detail::compare_context ctx{current.get(), detail::access::state(fresh).get()};
  std::vector<std::string> differences;
  if (detail::exec_access::state(e.exec).over.patched.empty()) {
    differences = graph_differences(detail::compare_graphs(current->handle, fresh.get(), ctx), ctx);
  } else {
    std::vector<cudaGraphNode_t> now;
    const detail::graph_image image = detail::image_of(fresh.get(), now);
    differences = patched_differences(e.rebind->image(), detail::graph_nodes(current->handle), image, now, ctx);
  }
  if (differences.empty()) return;
  const std::string list = first_differences(differences);
  throw audit_error(fmt::format(
      "conveyor::graphed audit: call {}: the executable graph ran other work than a capture of the callable gives "
      "({}). The call replayed or patched a graph captured for other arguments or state: the callable depends on "
      "something its key does not see (state it captures by reference, a global), or patching was declared for an "
      "argument it branches on. Re-capture that argument (rebind_policy::recapture), or pass the state as an "
      "argument",
      stats_.calls, list));
}

graph_cache::entry* graph_cache::most_recent() noexcept {
  entry* best = nullptr;
  for (auto& e : entries_)
    if (best == nullptr || e->last_used > best->last_used) best = e.get();
  return best;
}

std::vector<argument_binding> graph_cache::bindings() {
  entry* e = most_recent();
  if (e == nullptr) return {};
  auto& rb = rebinder_of(*e);
  const auto& current = detail::current_graph(e->exec);
  const auto nodes = detail::graph_nodes(current->handle);
  return rb.bindings([&](std::size_t i) { return i < nodes.size() ? detail::node_name(current.get(), nodes[i]) : ""; });
}

graph_description graph_cache::describe() {
  entry* e = most_recent();
  if (e == nullptr) return {};
  const auto& current = detail::current_graph(e->exec);
  graph_description d = detail::describe_graph(current->handle, current.get());
  if (!rebinding_ || e->rebind_broken) return d;
  auto& rb = rebinder_of(*e);
  for (std::size_t i = 0; i < d.nodes.size(); ++i) d.nodes[i].bindings = rb.node_bindings(i);
  return d;
}

std::vector<const graph_exec*> graph_cache::executables() const {
  std::vector<const entry*> order;
  order.reserve(entries_.size());
  for (const auto& e : entries_) order.push_back(e.get());
  std::sort(order.begin(), order.end(), [](const entry* a, const entry* b) { return a->last_used > b->last_used; });
  std::vector<const graph_exec*> out;
  out.reserve(order.size());
  for (const entry* e : order) out.push_back(&e->exec);
  return out;
}

void graph_cache::replay(const stream& s) {
  matched("replay").exec.launch(s);
  ++stats_.replays;
}

capture_options graph_cache::capture_settings(bool first_of_shape) const noexcept {
  capture_options o(options_.mode);
  o.catch_default_streams = options_.catch_default_streams;
  if (first_of_shape) o.watch_streams = stream_watch::if_available;
  // Pageable copies are recorded, not refused, by the capture: inspect() names those from graphed's copy of the
  // arguments first, then applies the policy (refuse, warn, allow).
  o.host_memory = host_memory_check::pageable;
  return o;
}

stream_watch_hold graph_cache::hold_stream_watch() const {
  return conveyor::hold_stream_watch(capture_settings(true).watch_streams);
}

namespace {

// Refuses a pageable copy of `found` from or into graphed's copy of the arguments (`bytes` at `arguments`).
template <class Found>
void refuse_argument_copies(const Found& found, const void* arguments, std::size_t bytes) {
  const auto* begin = static_cast<const unsigned char*>(arguments);
  for (const auto& a : found) {
    const auto* p = static_cast<const unsigned char*>(a.address);
    if (p >= begin && p < begin + bytes)
      throw std::invalid_argument(fmt::format(
          "conveyor::graphed: node {} ({}) copies {} B {} host address {}, inside graphed's copy of the call's "
          "arguments (a callable taking an argument by reference and copying from it, cudaMemcpyAsync(d, &arg, "
          "...)): that copy is gone after the call, and every replay would read whatever the stack holds then. "
          "Fix: copy the value into a page-locked buffer that lives as long as the graph and copy from there, or "
          "pass it to a kernel by value",
          a.node, a.node_name, a.bytes, a.source ? "from" : "into", a.address));
  }
}

} // namespace

void graph_cache::inspect(const graph& g, const void* arguments, std::size_t bytes) {
  (void)detail::nonempty_state(g, "conveyor::graph_cache::inspect");
  const auto& found = detail::access::state(g)->pageable; // checked above
  if (found.empty()) return;
  refuse_argument_copies(found, arguments, bytes);
  const auto& a = found.front();
  if (options_.pageable == pageable_policy::refuse)
    throw std::invalid_argument(fmt::format(
        "conveyor::graphed: node {} ({}) copies {} B {} pageable host memory {}: a replay reads or writes it when "
        "the copy runs, not at the call (a local std::vector freed when a helper returned, a buffer the program "
        "changes between calls). Fix: copy from (or into) a page-locked buffer that lives as long as the graph "
        "(cudaMallocHost, cudaHostRegister); or, when the buffer outlives the graph and holds what each replay must "
        "copy, declare it: graphed_options::pageable = pageable_policy::allow (or warn)",
        a.node, a.node_name, a.bytes, a.source ? "from" : "into", a.address));
  if (options_.pageable != pageable_policy::warn) return;
  std::string line = fmt::format("pageable host memory in {} copy node(s), e.g. node {} ({}) {} {} ({} B): a replay "
                                 "copies it when the node runs, not at the call; keep it alive and unchanged as long "
                                 "as the graph, or use page-locked memory (graphed_options::pageable)",
                                 found.size(), a.node, a.node_name, a.source ? "reads" : "writes", a.address, a.bytes);
  if (!warned_pageable_) {
    warned_pageable_ = true;
    std::fputs(fmt::format("conveyor::graphed: warning: {}\n", line).c_str(), stderr);
  }
  note(std::move(line));
}

void graph_cache::note_fallback(std::size_t position, std::size_t size) {
  ++stats_.calls;
  ++stats_.eager_fallbacks;
  note(fmt::format("argument {}: size {} above {}: ran eagerly", position, size, rule_bound(rule_of(position))));
}

void graph_cache::note(std::string reason) {
  reasons_.push_back(fmt::format("call {}: {}", stats_.calls, std::move(reason)));
  while (reasons_.size() > options_.max_reasons) reasons_.pop_front();
}

namespace {

// report()'s line of the churn guard (empty when it is off and never engaged).
std::string churn_line(const churn_guard& churn, const graphed_statistics& s) {
  if (churn.max_records == 0 && s.guard_trips == 0) return {};
  return fmt::format("  churn guard (cap {} records in {} calls): engaged {} time(s), {} call(s) run eagerly, "
                     "resumed {} time(s); {}\n",
                     churn.max_records, churn.window, s.guard_trips, s.guarded_calls, s.guard_resumes,
                     s.guard_engaged ? "running eagerly now" : "graphing now");
}

// report()'s line of the cached graphs' allocations (empty when none and no budget).
std::string held_line(std::size_t held, std::size_t max_bytes, const graphed_statistics& s) {
  if (held == 0 && max_bytes == 0) return {};
  return fmt::format("  the cached graphs hold {} of graph allocations{}; {} evicted for the budget\n",
                     detail::byte_size(static_cast<double>(held)),
                     max_bytes != 0 ? fmt::format(" (budget {})", detail::byte_size(static_cast<double>(max_bytes)))
                                    : std::string(),
                     s.budget_evictions);
}

} // namespace

std::string graph_cache::report(std::string_view name) const {
  const auto& s = stats_;
  std::string out = fmt::format("{}: {} calls, {} replays, {} warm-ups, {} captures, {} instantiations, "
                                "{} rebinds ({} nodes patched), {} per-node updates ({} nodes set), {} whole-graph "
                                "updates, {} unchanged re-captures, {} eager fallbacks, {} evictions, {} graphs "
                                "cached\n",
                                name, s.calls, s.replays, s.warmups, s.captures, s.instantiations, s.rebinds,
                                s.nodes_patched, s.per_node_updates, s.nodes_set, s.whole_graph_updates,
                                s.unchanged_recaptures, s.eager_fallbacks, s.evictions, entries_.size());
  out += churn_line(options_.churn, s);
  if (options_.instantiate_in_background || s.background_instantiations != 0)
    out += fmt::format("  in the background: {} instantiation(s) taken into the cache, {} call(s) run eagerly while "
                       "their shape's graph was being instantiated, {} pending now\n",
                       s.background_instantiations, s.eager_while_instantiating, pending_.size());
  std::size_t held = 0;
  for (const cached_graph& c : cached()) {
    held += c.allocation_bytes;
    out +=
        fmt::format("  graph for shape ({}): {} nodes, {} graph allocation(s) of {}, last used at call {}\n", c.shape,
                    c.nodes, c.allocations, detail::byte_size(static_cast<double>(c.allocation_bytes)), c.last_call);
  }
  out += held_line(held, options_.max_bytes, s);
  for (const auto& r : reasons_) out += fmt::format("  {}\n", r);
  return out;
}

} // namespace conveyor
