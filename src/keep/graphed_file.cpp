// graphed buckets in graph files: keys saved with pointers as buffers and offsets, loaded buckets added to the
// cache (graph_cache::add_saved) with their keys relocated into the loaded buffers.
#include "conveyor/keep/graphed_file.hpp"

#include "keep/save_entries.hpp"

#include <fmt/format.h>

namespace conveyor::detail::keep {

namespace {

// The buffer of `file` holding address `p` (by the buffers' addresses at save), or the null address.
saved_address buffer_holding(std::uint64_t p, const graph_file& file, const std::vector<const void*>& bases) {
  for (std::size_t i = 0; i < file.buffers.size(); ++i) {
    if (bases[i] == nullptr) continue;
    const auto base = reinterpret_cast<std::uint64_t>(bases[i]);
    if (p >= base && p < base + file.buffers[i].bytes) return {static_cast<std::uint32_t>(i), p - base};
  }
  return {};
}

saved_key to_saved(const call_key& k, bool exact, const std::string& callable, const graph_file& file,
                   const std::vector<const void*>& bases) {
  saved_key out;
  out.exact = exact;
  out.callable = callable;
  if (k.has_user_key()) out.user_key = k.user_key();
  for (std::size_t i = 0; i < k.size(); ++i) {
    const argument_key& a = k[i];
    saved_key_entry e{a.bits,     a.size, static_cast<std::uint8_t>(a.role), static_cast<std::uint8_t>(a.kind),
                      a.position, {}};
    if (a.kind == argument_kind::bytes) {
      e.bits = out.bytes.size();
      out.bytes.insert(out.bytes.end(), k.bytes_of(i), k.bytes_of(i) + a.size);
    } else if (a.kind == argument_kind::pointer && a.bits != 0) {
      e.address = buffer_holding(a.bits, file, bases);
      if (!e.address.is_null()) e.bits = 0;
      else out.exact = false; // an address the graph does not hold: the first call re-captures
    }
    out.entries.push_back(e);
  }
  return out;
}

// The call_key of a saved bucket, pointers relocated into `l`'s buffers; `exact` cleared where one cannot be.
call_key from_saved(const saved_key& k, const loaded_graphs& l, bool& exact) {
  call_key out;
  exact = k.exact;
  for (const auto& e : k.entries) {
    const auto role = static_cast<argument_role>(e.role);
    const auto kind = static_cast<argument_kind>(e.kind);
    if (kind == argument_kind::bytes) {
      out.add_bytes(k.bytes.data() + e.bits, e.size, role, e.position);
      continue;
    }
    std::uint64_t bits = e.bits;
    if (!e.address.is_null()) {
      const loaded_buffer& b = l.buffers().at(e.address.buffer);
      if (b.memory == buffer_memory::graph_allocation || b.pointer == nullptr) exact = false;
      else bits = reinterpret_cast<std::uint64_t>(b.pointer) + e.address.offset;
    }
    out.add(bits, role, kind, e.position, e.size);
  }
  if (k.user_key) out.set_user_key(*k.user_key);
  return out;
}

} // namespace

graph_file bucket_file(const graph_cache& cache, const std::string& callable, const save_options& options) {
  const auto buckets = cache.buckets();
  std::vector<graph_to_save> entries;
  for (std::size_t i = 0; i < buckets.size(); ++i)
    entries.push_back({fmt::format("bucket{}", i), nullptr, buckets[i].exec});
  std::vector<bool> exact;
  std::vector<const void*> bases;
  graph_file f = save_entries(entries, options, true, &exact, &bases);
  for (std::size_t i = 0; i < buckets.size(); ++i)
    f.graphs[i].key = to_saved(buckets[i].key, exact[i] && buckets[i].binding_known, callable, f, bases);
  return f;
}

std::size_t load_buckets(graph_cache& cache, const std::string& callable, graph_file file, const load_options& options,
                         const stream& s) {
  for (const auto& g : file.graphs) {
    if (!g.key)
      throw load_error(fmt::format("conveyor::load_buckets: graph '{}' has no graphed key: the file was not saved "
                                   "with save_buckets",
                                   g.name));
    if (g.key->callable != callable)
      throw load_error(fmt::format("conveyor::load_buckets: the buckets were saved from callable type '{}', and this "
                                   "graphed callable is '{}'; fix: load them into a callable of the type that saved "
                                   "them",
                                   g.key->callable, callable));
  }
  loaded_graphs l = load(std::move(file), options);
  std::size_t loaded = 0;
  for (const auto& g : l.file().graphs) {
    bool exact = true;
    const call_key key = from_saved(*g.key, l, exact);
    cache.add_saved(key, std::move(l.at(g.name)), s, exact);
    ++loaded;
  }
  return loaded;
}

} // namespace conveyor::detail::keep
