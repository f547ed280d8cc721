#pragma once
//! \file graphed_file.hpp
//! A graphed callable's buckets in a graph file: saved with their keys (shape and binding, pointers
//! as buffers and offsets), and a callable started from them instead of capturing them. The keys
//! still decide: a loaded bucket is replayed only for a call whose shape and binding match
//! (pointers relocated into the loaded buffers); any other binding re-captures and updates it, as
//! for a bucket captured in this process. A file saved from another callable type is refused.

#include "conveyor/assembly/graphed.hpp"
#include "conveyor/keep/load.hpp"
#include "conveyor/keep/save.hpp"

#include <cstddef>
#include <filesystem>
#include <string>
#include <typeinfo>

namespace conveyor {

namespace detail::keep {
//! The cache's buckets as a file, each named "bucket<k>" with its key (`callable` names the
//! callable's type).
//! \throws as to_graph_file.
[[nodiscard]] graph_file bucket_file(const graph_cache& cache, const std::string& callable,
                                     const save_options& options);
//! Loads the buckets of `file` into `cache` (instantiated and uploaded on `s`); returns how many.
//! \throws load_error when a graph has no key or was saved from another callable type; as load.
std::size_t load_buckets(graph_cache& cache, const std::string& callable, graph_file file,
                         const load_options& options, const stream& s);
} // namespace detail::keep

//! The name a graphed callable's buckets are saved under: its callable's and key function's types.
template <class F, class Key>
[[nodiscard]] std::string graphed_type_name() {
  return std::string(typeid(F).name()) + "/" + typeid(Key).name();
}

//! Saves every cached bucket of `g` to `path`: each bucket's graph (what its executable graph runs)
//! and key. Buckets whose executable graph was patched node by node are saved with a key that
//! re-captures at its first call.
//! \throws as save.
template <class F, class Key>
void save_buckets(const std::filesystem::path& path, const graphed<F, Key>& g,
                  const save_options& options = {}) {
  write_graph_file(path,
                   detail::keep::bucket_file(g.cache(), graphed_type_name<F, Key>(), options));
}

//! Starts `g` from the buckets saved in `path` (save_buckets of a callable of the same type): each
//! is loaded (`options`: the registry, the buffers by name), instantiated and uploaded on `s`, and
//! replayed by the calls whose keys match. Returns the number of buckets loaded.
//! \throws load_error when the file was saved from another callable type or holds a graph
//!         without a key; as load.
template <class F, class Key>
std::size_t load_buckets(graphed<F, Key>& g, const std::filesystem::path& path,
                         const load_options& options, const stream& s) {
  return detail::keep::load_buckets(g.cache(), graphed_type_name<F, Key>(), read_graph_file(path),
                                    options, s);
}

} // namespace conveyor
