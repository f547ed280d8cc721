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

std::string value_text(const argument_key& v) {
  switch (v.kind) {
  case argument_kind::pointer: return fmt::format("{:#x}", v.bits);
  case argument_kind::floating: {
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
  case argument_kind::integer:
  case argument_kind::padded_size:
  case argument_kind::real_size: return fmt::format("{}", v.bits);
  case argument_kind::bytes: return fmt::format("({} bytes)", v.size);
  }
  return fmt::format("{}", v.bits);
}

// The size `n` padded by `rule`, or nullopt when the rule cannot pad it.
std::optional<std::size_t> padded_by(const padding_rule& rule, std::size_t n) noexcept {
  std::size_t p = n;
  if (!rule.buckets.empty()) {
    const auto it = std::lower_bound(rule.buckets.begin(), rule.buckets.end(), n);
    if (it == rule.buckets.end()) return std::nullopt;
    p = *it;
  } else if (rule.multiple != 0) {
    if (n > std::numeric_limits<std::size_t>::max() - (rule.multiple - 1)) return std::nullopt;
    p = (n + rule.multiple - 1) / rule.multiple * rule.multiple;
  } else if (rule.power_of_two) {
    if (n > (std::numeric_limits<std::size_t>::max() >> 1) + 1) return std::nullopt;
    p = std::bit_ceil(n);
  }
  if (rule.limit != 0 && p > rule.limit) return std::nullopt;
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

std::string_view kind_text(argument_kind kind) {
  switch (kind) {
  case argument_kind::pointer: return "pointer";
  case argument_kind::integer: return "integer";
  case argument_kind::floating: return "scalar";
  case argument_kind::padded_size: return "padded size";
  case argument_kind::real_size: return "real size";
  case argument_kind::bytes: return "value";
  }
  return "value";
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
    if (args_[i].role != other.args_[i].role || args_[i].kind != other.args_[i].kind ||
        args_[i].position != other.args_[i].position)
      return false;
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
    const auto& a = before.args_[i];
    const auto& b = args_[i];
    if (!out.empty()) out += "; ";
    out += b.kind == argument_kind::bytes ? fmt::format("argument {} value changed ({} bytes)", b.position, b.size)
                                          : fmt::format("argument {} {} changed from {} to {}", b.position,
                                                        kind_text(b.kind), value_text(a), value_text(b));
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
  if (options_.max_graphs == 0) throw std::invalid_argument("conveyor::graphed: max_graphs must be at least 1");
  if (options_.rebind_verifications < 1)
    throw std::invalid_argument(fmt::format("conveyor::graphed: rebind_verifications must be at least 1 (got {})",
                                            options_.rebind_verifications));
  for (std::size_t i = 0; i < options_.rebind_arguments.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (options_.rebind_arguments[i].first == options_.rebind_arguments[j].first)
        throw std::invalid_argument(fmt::format("conveyor::graphed: rebind_arguments names argument {} twice",
                                                options_.rebind_arguments[i].first));
  if (options_.warmup_calls < 0) throw std::invalid_argument("conveyor::graphed: warmup_calls must be >= 0");
  if (options_.instantiate_threads == 0)
    throw std::invalid_argument("conveyor::graphed: instantiate_threads must be at least 1");
  std::sort(options_.buckets.begin(), options_.buckets.end());
  if (!options_.buckets.empty() && options_.buckets.front() == 0)
    throw std::invalid_argument("conveyor::graphed: a bucket of size 0");
  default_rule_.buckets = options_.buckets;
  for (std::size_t i = 0; i < options_.dimensions.size(); ++i) {
    check_rule(options_.dimensions[i].second,
               fmt::format("the padding rule of argument {}", options_.dimensions[i].first));
    for (std::size_t j = 0; j < i; ++j)
      if (options_.dimensions[i].first == options_.dimensions[j].first)
        throw std::invalid_argument(
            fmt::format("conveyor::graphed: dimensions names argument {} twice", options_.dimensions[i].first));
  }
  const churn_guard& churn = options_.churn;
  if (churn.max_records != 0 && (churn.window <= churn.max_records || churn.settle_calls == 0))
    throw std::invalid_argument(fmt::format(
        "conveyor::graphed: the churn guard needs a window above its cap and settle_calls >= 1 (max_records {}, "
        "window {}, settle_calls {})",
        churn.max_records, churn.window, churn.settle_calls));
  stats_.churn_max_records = churn.max_records;
  stats_.churn_window = churn.max_records != 0 ? churn.window : 0;
  auto any_argument = [&](auto pred) {
    return std::any_of(options_.rebind_arguments.begin(), options_.rebind_arguments.end(),
                       [&](const auto& a) { return pred(a.second); });
  };
  rebinding_ = options_.rebind != rebind_policy::recapture ||
               any_argument([](rebind_policy p) { return p != rebind_policy::recapture; });
  declared_patch_ = options_.rebind == rebind_policy::patch ||
                    any_argument([](rebind_policy p) { return p == rebind_policy::patch; });
}

std::optional<std::size_t> graph_cache::bucket_for(std::size_t n) const noexcept {
  if (options_.buckets.empty()) return n;
  auto it = std::lower_bound(options_.buckets.begin(), options_.buckets.end(), n);
  if (it == options_.buckets.end()) return std::nullopt;
  return *it;
}

const padding_rule& graph_cache::rule_of(std::size_t position) const noexcept {
  for (const auto& [p, rule] : options_.dimensions)
    if (p == position) return rule;
  return default_rule_;
}

std::optional<std::size_t> graph_cache::bucket_for(std::size_t position, std::size_t n) const noexcept {
  return padded_by(rule_of(position), n);
}

std::vector<std::vector<std::size_t>>
graph_cache::prepare_shapes(const std::vector<std::pair<std::size_t, std::size_t>>& sizes) const {
  // The dimensions: one per distinct rule (the shared default one for arguments without their own), each with the
  // sizes it takes, largest first (a dimension without a bucket list: one entry, 0 = each keeps its own size).
  std::vector<const padding_rule*> rules;
  std::vector<std::size_t> dimension_of(sizes.size());
  bool any_list = false;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const padding_rule* r = &rule_of(sizes[i].first);
    auto it = std::find(rules.begin(), rules.end(), r);
    if (it == rules.end()) it = rules.insert(rules.end(), r);
    dimension_of[i] = static_cast<std::size_t>(it - rules.begin());
    any_list = any_list || !r->buckets.empty();
  }
  std::vector<std::vector<std::size_t>> out;
  if (!any_list) return out;
  std::vector<std::vector<std::size_t>> choices(rules.size());
  for (std::size_t d = 0; d < rules.size(); ++d) {
    for (std::size_t b : rules[d]->buckets)
      if (rules[d]->limit == 0 || b <= rules[d]->limit) choices[d].insert(choices[d].begin(), b);
    if (choices[d].empty()) choices[d].push_back(0);
  }
  std::vector<std::size_t> at(rules.size(), 0); // an odometer over the choices, the last dimension fastest
  for (;;) {
    std::vector<std::size_t> shape(sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t c = choices[dimension_of[i]][at[dimension_of[i]]];
      shape[i] = c != 0 ? c : padded_by(rule_of(sizes[i].first), sizes[i].second).value_or(sizes[i].second);
    }
    out.push_back(std::move(shape));
    std::size_t d = rules.size();
    while (d > 0 && ++at[d - 1] == choices[d - 1].size()) at[--d] = 0;
    if (d == 0) return out;
  }
}

call_plan graph_cache::plan(const call_key& key) {
  ++stats_.calls;
  matched_ = nullptr;
  if (!pending_.empty()) reap_background(); // finished background instantiations into the cache, whatever the plan
  if (stats_.guard_engaged && !settled(key)) {
    ++stats_.guarded_calls;
    return call_plan::eager_guarded;
  }
  const call_plan p = plan_cached(key);
  const bool records = p == call_plan::capture_new || p == call_plan::capture_background || p == call_plan::recapture;
  if (records && churning(key)) {
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
    std::size_t held = 0;
    for (const auto& e : entries_) held += e->bytes;
    const bool over_count = keep == nullptr && entries_.size() >= options_.max_graphs;
    const bool over_bytes = options_.max_bytes != 0 && held + incoming > options_.max_bytes;
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->get() != keep && (victim == entries_.end() || (*it)->last_used < (*victim)->last_used)) victim = it;
    if ((!over_count && !over_bytes) || victim == entries_.end()) break;
    if (over_count) {
      evict(victim, fmt::format("cache holds {}", options_.max_graphs).c_str());
      continue;
    }
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
  stats_.held_bytes = 0;
  for (const auto& e : entries_) stats_.held_bytes += e->bytes;
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
  if (options_.instantiate_in_background) return add_in_background(key, std::move(g));
  insert(key, std::move(g)).exec.upload(s);
}

void graph_cache::add_saved(const call_key& key, graph g, const stream& s, bool binding_known) {
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

} // namespace

void graph_cache::update_and_launch(const call_key& key, graph g, const stream& s) {
  entry& e = matched("update_and_launch");
  ++stats_.captures;
  const bool rebinding_on = rebinding_ && !e.rebind_broken;
  if (rebinding_on) ++stats_.rebind_fallbacks;
  // Learning reads both graphs; when every argument that changed re-captures for good it would teach nothing: the
  // rebinder only notes that its image is out of date (refreshed before its next patch).
  const bool learning = rebinding_on && !e.binding_unknown && (!e.rebind || e.rebind->can_learn(e.key, key));
  // The definition the executable graph runs now, destroyed only after the launch is queued: destroying a graph of
  // N nodes costs about as much as reading it, and then overlaps the GPU's run instead of delaying it.
  std::shared_ptr<const void> replaced = detail::current_graph(e.exec);
  detail::graph_image next;
  detail::recapture_facts facts;
  const update_result result = learning ? learn_and_update(e, g, next, facts) : update_to(e, g);
  std::string line = fmt::format("{}: {}", key.changes_from(e.key), count_update(result, stats_));
  if (result.method == update_method::reinstantiated) rehold(e, g); // another graph now, within the budget
  if (rebinding_on && !not_rebound_.empty()) line += fmt::format(" [not patched: {}]", not_rebound_);
  if (learning) {
    facts.clean_update = result.method == update_method::none || result.method == update_method::per_node;
    const std::string learnt = e.rebind->learn(std::move(next), key, facts, detail::device_ranges());
    if (!learnt.empty()) line += fmt::format(" [rebind: {}]", learnt);
  } else if (rebinding_on && e.rebind) {
    e.rebind->mark_stale();
  }
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
  stats_.held_bytes = 0;
  for (const auto& other : entries_) stats_.held_bytes += other->bytes;
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
std::vector<std::string> patched_differences(const detail::graph_image& ran,
                                             const std::vector<cudaGraphNode_t>& current,
                                             const detail::graph_image& fresh, const std::vector<cudaGraphNode_t>& now,
                                             const detail::compare_context& ctx) {
  std::vector<std::string> out;
  if (ran.nodes.size() != fresh.nodes.size() || current.size() != now.size())
    return {fmt::format("the capture has {} nodes, the executable graph {}", fresh.nodes.size(), ran.nodes.size())};
  for (std::size_t i = 0; i < fresh.nodes.size(); ++i) {
    const auto& a = ran.nodes[i];
    const auto& b = fresh.nodes[i];
    const std::string name = detail::node_name(ctx.after, now[i]);
    if (a.kind != b.kind) out.push_back(fmt::format("node {} ({}): another kind", i, name));
    else if (a.patchable && b.patchable && (a.fixed != b.fixed || a.bytes != b.bytes))
      out.push_back(
          fmt::format("node {} ({}): {}", i, name,
                      a.fixed != b.fixed ? "function, launch shape or sizes" : "fields (arguments, pointers, values)"));
    else if (!a.patchable && detail::traits_of(b.kind).compare(current[i], now[i], ctx).differs)
      out.push_back(fmt::format("node {} ({}): its parameters", i, name));
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

} // namespace

void graph_cache::audit(const graph& fresh) {
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
  std::string list;
  for (std::size_t k = 0; k < differences.size() && k < 4; ++k) list += (k == 0 ? "" : "; ") + differences[k];
  if (differences.size() > 4) list += fmt::format("; and {} more", differences.size() - 4);
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

void graph_cache::inspect(const graph& g, const void* arguments, std::size_t bytes) {
  const auto& found = detail::access::state(g)->pageable;
  if (found.empty()) return;
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

std::string graph_cache::report(std::string_view name) const {
  const auto& s = stats_;
  std::string out = fmt::format("{}: {} calls, {} replays, {} warm-ups, {} captures, {} instantiations, "
                                "{} rebinds ({} nodes patched), {} per-node updates ({} nodes set), {} whole-graph "
                                "updates, {} unchanged re-captures, {} eager fallbacks, {} evictions, {} graphs "
                                "cached\n",
                                name, s.calls, s.replays, s.warmups, s.captures, s.instantiations, s.rebinds,
                                s.nodes_patched, s.per_node_updates, s.nodes_set, s.whole_graph_updates,
                                s.unchanged_recaptures, s.eager_fallbacks, s.evictions, entries_.size());
  if (options_.churn.max_records != 0 || s.guard_trips != 0)
    out += fmt::format("  churn guard (cap {} records in {} calls): engaged {} time(s), {} call(s) run eagerly, "
                       "resumed {} time(s); {}\n",
                       options_.churn.max_records, options_.churn.window, s.guard_trips, s.guarded_calls,
                       s.guard_resumes, s.guard_engaged ? "running eagerly now" : "graphing now");
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
  if (held != 0 || options_.max_bytes != 0)
    out += fmt::format("  the cached graphs hold {} of graph allocations{}; {} evicted for the budget\n",
                       detail::byte_size(static_cast<double>(held)),
                       options_.max_bytes != 0
                           ? fmt::format(" (budget {})", detail::byte_size(static_cast<double>(options_.max_bytes)))
                           : std::string(),
                       s.budget_evictions);
  for (const auto& r : reasons_) out += fmt::format("  {}\n", r);
  return out;
}

} // namespace conveyor
