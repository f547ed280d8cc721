#include "conveyor/assembly/graph_cache.hpp"

#include "assembly/rebind.hpp"
#include "assembly/rebind_cuda.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/node_name.hpp"
#include "kinds/kind.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace conveyor {

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
    out += b.kind == argument_kind::bytes
               ? fmt::format("argument {} value changed ({} bytes)", b.position, b.size)
               : fmt::format("argument {} {} changed from {} to {}", b.position, kind_text(b.kind), value_text(a),
                             value_text(b));
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
graph_cache::~graph_cache() = default;

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
  std::sort(options_.buckets.begin(), options_.buckets.end());
  if (!options_.buckets.empty() && options_.buckets.front() == 0)
    throw std::invalid_argument("conveyor::graphed: a bucket of size 0");
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

call_plan graph_cache::plan(const call_key& key) {
  ++stats_.calls;
  matched_ = nullptr;
  for (auto& e : entries_) {
    if (!e->key.same_shape(key)) continue;
    for (std::size_t i = 0; i < key.size(); ++i)
      if (key[i].role == argument_role::static_pointer && key[i].bits != e->key[i].bits)
        throw std::invalid_argument(fmt::format(
            "conveyor::graphed: argument {} was declared static but changed from {:#x} to {:#x}; the graph "
            "reads the old address, so a replay would silently use stale data. Copy the new data into the static "
            "buffer, or do not declare the argument static",
            key[i].position, e->key[i].bits, key[i].bits));
    matched_ = e.get();
    matched_->last_used = ++clock_;
    if (e->key.same_binding(key)) return call_plan::replay;
    not_rebound_.clear();
    if (!rebinding_ || e->rebind_broken) return call_plan::recapture;
    if (!e->rebind && declared_patch_) (void)rebinder_of(*e); // declared arguments need no verifying re-capture
    if (e->rebind && e->rebind->can_patch(e->key, key, &not_rebound_)) return call_plan::rebind;
    if (!e->rebind) not_rebound_ = "first change of this graph's arguments: learning where they are embedded";
    return call_plan::recapture;
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

graph_cache::entry& graph_cache::insert(const call_key& key, graph g) {
  if (entries_.size() >= options_.max_graphs) {
    auto victim = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
    note(fmt::format("evicted the least recently used graph (cache holds {})", options_.max_graphs));
    // Destroyed at once: its queued launches keep what they use until they finish (graph_exec's lifetimes).
    entries_.erase(victim);
    ++stats_.evictions;
  }
  note(fmt::format("captured and instantiated a graph of {} nodes for shape ({})", g.node_count(), key.shape_text()));
  auto exec = instantiate(g, options_.flags);
  entries_.push_back(std::make_unique<entry>(entry{key, std::move(exec), ++clock_, nullptr, false}));
  ++stats_.captures;
  ++stats_.instantiations;
  std::erase_if(warmups_, [&](auto& w) { return w.first.same_shape(key); });
  return *entries_.back();
}

graph_cache::entry& graph_cache::matched(const char* call) {
  if (matched_ == nullptr)
    throw std::logic_error(fmt::format("conveyor::graph_cache::{}: plan() matched no executable graph", call));
  return *matched_;
}

void graph_cache::add(const call_key& key, graph g, const stream& s) { insert(key, std::move(g)).exec.upload(s); }

bool graph_cache::has_shape(const call_key& key) const noexcept {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e->key.same_shape(key); });
}

void graph_cache::add_and_launch(const call_key& key, graph g, const stream& s) {
  entry& e = insert(key, std::move(g));
  matched_ = &e;
  detail::exec_access::state(e.exec).launched_at_instantiation = true; // no upload could come ahead of this launch
  e.exec.launch(s);
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
  const bool learning = rebinding_on && (!e.rebind || e.rebind->can_learn(e.key, key));
  // The definition the executable graph runs now, destroyed only after the launch is queued: destroying a graph of
  // N nodes costs about as much as reading it, and then overlaps the GPU's run instead of delaying it.
  std::shared_ptr<const void> replaced = detail::current_graph(e.exec);
  detail::graph_image next;
  detail::recapture_facts facts;
  detail::graph_snapshot read;
  if (learning) {
    (void)rebinder_of(e);
    facts = read_for_learning(e.exec, g, next, read);
  }
  const update_result result = learning ? detail::exec_access::update_incremental(e.exec, g, std::move(read))
                               : options_.recapture == recapture_update::per_node ? e.exec.update_incremental(g)
                                                                                  : e.exec.update_or_reinstantiate(g);
  std::string line = fmt::format("{}: {}", key.changes_from(e.key), count_update(result, stats_));
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
  e.exec.launch(s);
  ++stats_.replays;
  replaced.reset();
}

bool graph_cache::rebind_and_launch(const call_key& key, const stream& s) {
  entry& e = matched("rebind_and_launch");
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
    not_rebound_ = fmt::format("CUDA refused patching node {} ({}): rebinding is off for this graph",
                               nodes[applied], cudaGetErrorName(rc));
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
std::vector<std::string> patched_differences(const detail::graph_image& ran, const std::vector<cudaGraphNode_t>& current,
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
      out.push_back(fmt::format("node {} ({}): {}", i, name, a.fixed != b.fixed ? "function, launch shape or sizes"
                                                                               : "fields (arguments, pointers, values)"));
    else if (!a.patchable && detail::traits_of(b.kind).compare(current[i], now[i], ctx).differs)
      out.push_back(fmt::format("node {} ({}): its parameters", i, name));
  }
  return out;
}

std::vector<std::string> graph_differences(const detail::graph_comparison& c, const detail::compare_context& ctx) {
  if (!c.same_topology) return {fmt::format("the topology: {}", c.topology_reason)};
  std::vector<std::string> out;
  for (const auto& d : c.changed)
    out.push_back(fmt::format("node {} ({}): {}", d.position, detail::node_name(ctx.after, c.after[d.position]),
                              d.diff.what));
  return out;
}

} // namespace

void graph_cache::audit(const graph& fresh) {
  entry& e = matched("audit");
  ++stats_.audits;
  const auto& current = detail::current_graph(e.exec);
  const detail::compare_context ctx{current.get(), detail::access::state(fresh).get()};
  std::vector<std::string> differences;
  if (detail::exec_access::state(e.exec).patched.empty()) {
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

capture_options graph_cache::capture_settings() const noexcept {
  capture_options o(options_.mode);
  o.catch_default_streams = options_.catch_default_streams;
  o.host_memory = options_.pageable == pageable_policy::refuse ? host_memory_check::refuse_pageable
                                                               : host_memory_check::pageable;
  return o;
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
  if (options_.pageable != pageable_policy::warn) return;
  const auto& a = found.front();
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
  note(fmt::format("argument {}: size {} above the largest bucket {}: ran eagerly", position, size,
                   options_.buckets.back()));
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
  for (const auto& r : reasons_) out += fmt::format("  {}\n", r);
  return out;
}

} // namespace conveyor
