#include "conveyor/assembly/graphed_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace conveyor::detail {

namespace {
std::string value_text(const arg_value& v) {
  switch (v.type) {
  case 'p': return fmt::format("{:#x}", v.bits);
  case 'f': {
    float f = 0;
    const auto low = static_cast<std::uint32_t>(v.bits);
    std::memcpy(&f, &low, sizeof f);
    return fmt::format("{}", f);
  }
  case 'd': {
    double d = 0;
    std::memcpy(&d, &v.bits, sizeof d);
    return fmt::format("{}", d);
  }
  default: return fmt::format("{}", v.bits);
  }
}
std::string_view type_text(char type) {
  switch (type) {
  case 'p': return "pointer";
  case 'i': return "integer";
  case 'f':
  case 'd': return "scalar";
  case 'b': return "padded size";
  case 'r': return "real size";
  default: return "value";
  }
}
} // namespace

bool call_key::same_shape(const call_key& other) const noexcept {
  if (count != other.count || user_key != other.user_key || has_user_key != other.has_user_key) return false;
  for (std::size_t i = 0; i < count; ++i)
    if (args[i].role == arg_role::shape && args[i].bits != other.args[i].bits) return false;
  return true;
}

bool call_key::same_binding(const call_key& other) const noexcept {
  for (std::size_t i = 0; i < count; ++i)
    if (args[i].role != arg_role::shape && args[i].role != arg_role::ignored && args[i].bits != other.args[i].bits)
      return false;
  return true;
}

graphed_core::graphed_core(graphed_options options) : options_(std::move(options)) {
  if (options_.max_graphs == 0) throw std::invalid_argument("conveyor::graphed: max_graphs must be at least 1");
  if (options_.warmup_calls < 0) throw std::invalid_argument("conveyor::graphed: warmup_calls must be >= 0");
  std::sort(options_.buckets.begin(), options_.buckets.end());
  if (!options_.buckets.empty() && options_.buckets.front() == 0)
    throw std::invalid_argument("conveyor::graphed: a bucket of size 0");
}

std::optional<std::size_t> graphed_core::bucket_for(std::size_t n) const noexcept {
  if (options_.buckets.empty()) return n;
  auto it = std::lower_bound(options_.buckets.begin(), options_.buckets.end(), n);
  if (it == options_.buckets.end()) return std::nullopt;
  return *it;
}

std::string graphed_core::describe_change(const call_key& from, const call_key& to) const {
  std::string out;
  for (std::size_t i = 0; i < to.count; ++i) {
    const auto& a = from.args[i];
    const auto& b = to.args[i];
    if (a.bits == b.bits || b.role == arg_role::ignored) continue;
    if (!out.empty()) out += "; ";
    out += fmt::format("argument {} {} changed from {} to {}", b.position, type_text(b.type), value_text(a),
                       value_text(b));
  }
  if (from.user_key != to.user_key) out += fmt::format("{}key changed from {} to {}", out.empty() ? "" : "; ",
                                                       from.user_key, to.user_key);
  return out;
}

call_plan graphed_core::plan(const call_key& key) {
  ++stats_.calls;
  matched_ = nullptr;
  for (auto& e : entries_) {
    if (!e->key.same_shape(key)) continue;
    for (std::size_t i = 0; i < key.count; ++i)
      if (key.args[i].role == arg_role::static_pointer && key.args[i].bits != e->key.args[i].bits)
        throw std::invalid_argument(fmt::format(
            "conveyor::graphed: argument {} was declared static but changed from {:#x} to {:#x}; the graph "
            "reads the old address, so a replay would silently use stale data. Copy the new data into the static "
            "buffer, or do not declare the argument static",
            key.args[i].position, e->key.args[i].bits, key.args[i].bits));
    matched_ = e.get();
    matched_->last_used = ++clock_;
    return e->key.same_binding(key) ? call_plan::replay : call_plan::recapture;
  }
  auto warm = std::find_if(warmups_.begin(), warmups_.end(), [&](auto& w) { return w.first.same_shape(key); });
  if (warm == warmups_.end()) warm = warmups_.insert(warmups_.end(), {key, 0});
  if (warm->second < options_.warmup_calls) {
    ++warm->second;
    ++stats_.warmups;
    return call_plan::eager_warmup;
  }
  return call_plan::capture_new;
}

graphed_core::~graphed_core() {
  for (auto& r : retired_) (void)cudaEventSynchronize(r.done.get());
  (void)cudaGetLastError();
}

void graphed_core::reap() noexcept {
  std::erase_if(retired_, [](const retired_graph& r) {
    const cudaError_t rc = cudaEventQuery(r.done.get());
    if (rc == cudaErrorNotReady) return false;
    if (rc != cudaSuccess) (void)cudaGetLastError(); // an error of earlier work: reported by the caller's next check
    return true;
  });
}

graphed_core::entry& graphed_core::insert(const call_key& key, graph g, const stream* s) {
  reap();
  if (entries_.size() >= options_.max_graphs) {
    auto victim = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
    note(fmt::format("evicted the least recently used graph (cache holds {})", options_.max_graphs));
    if (s != nullptr) {
      // Its launches may still be queued on `s`: destroy it once they are done, without waiting here.
      event done(cudaEventDisableTiming);
      done.record(*s);
      retired_.push_back({std::move((*victim)->exec), std::move(done)});
    }
    entries_.erase(victim);
    ++stats_.evictions;
  }
  std::string shape;
  for (std::size_t i = 0; i < key.count; ++i)
    if (key.args[i].role == arg_role::shape)
      shape += fmt::format("{}{}={}", shape.empty() ? "" : ", ", key.args[i].position, key.args[i].bits);
  if (key.has_user_key) shape += fmt::format("{}key={}", shape.empty() ? "" : ", ", key.user_key);
  note(fmt::format("captured and instantiated a graph of {} nodes for shape ({})", g.node_count(), shape));
  auto exec = instantiate(g, options_.flags);
  entries_.push_back(std::make_unique<entry>(entry{key, std::move(exec), ++clock_}));
  ++stats_.captures;
  ++stats_.instantiations;
  warmups_.erase(std::remove_if(warmups_.begin(), warmups_.end(), [&](auto& w) { return w.first.same_shape(key); }),
                 warmups_.end());
  return *entries_.back();
}

void graphed_core::add(const call_key& key, graph g) { (void)insert(key, std::move(g), nullptr); }

bool graphed_core::has_shape(const call_key& key) const noexcept {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e->key.same_shape(key); });
}

void graphed_core::add_and_launch(const call_key& key, graph g, const stream& s) {
  entry& e = insert(key, std::move(g), &s);
  e.exec.launch(s);
  ++stats_.replays;
}

void graphed_core::update_and_launch(const call_key& key, graph g, const stream& s) {
  entry& e = *matched_;
  ++stats_.captures;
  const std::string change = describe_change(e.key, key);
  auto result = e.exec.update_incremental(g);
  switch (result.method) {
  case update_method::none:
    ++stats_.unchanged_recaptures;
    note(fmt::format("{}: re-captured, graph unchanged", change));
    break;
  case update_method::per_node:
    ++stats_.per_node_updates;
    stats_.nodes_set += result.nodes_set;
    note(fmt::format("{}: updated {} node(s) in place", change, result.nodes_set));
    break;
  case update_method::whole_graph:
    ++stats_.whole_graph_updates;
    note(fmt::format("{}: whole-graph update ({})", change, result.reason));
    break;
  case update_method::reinstantiated:
    ++stats_.instantiations;
    note(fmt::format("{}: re-instantiated ({})", change, result.reason));
    break;
  case update_method::refused: break; // not asked for: update_incremental re-instantiates here
  }
  e.key = key;
  e.exec.launch(s);
  ++stats_.replays;
}

void graphed_core::replay(const stream& s) {
  matched_->exec.launch(s);
  ++stats_.replays;
}

void graphed_core::note_fallback(std::size_t position, std::size_t size) {
  ++stats_.calls;
  ++stats_.eager_fallbacks;
  note(fmt::format("argument {}: size {} above the largest bucket {}: ran eagerly", position, size,
                   options_.buckets.back()));
}

void graphed_core::note(std::string reason) {
  reasons_.push_back(fmt::format("call {}: {}", stats_.calls, std::move(reason)));
  while (reasons_.size() > options_.max_reasons) reasons_.pop_front();
}

std::string graphed_core::report(std::string_view name) const {
  const auto& s = stats_;
  std::string out = fmt::format("{}: {} calls, {} replays, {} warm-ups, {} captures, {} instantiations, "
                                "{} per-node updates ({} nodes set), {} whole-graph updates, {} unchanged "
                                "re-captures, {} eager fallbacks, {} evictions, {} graphs cached\n",
                                name, s.calls, s.replays, s.warmups, s.captures, s.instantiations,
                                s.per_node_updates, s.nodes_set, s.whole_graph_updates, s.unchanged_recaptures,
                                s.eager_fallbacks, s.evictions, entries_.size());
  for (const auto& r : reasons_) out += fmt::format("  {}\n", r);
  return out;
}

} // namespace conveyor::detail
