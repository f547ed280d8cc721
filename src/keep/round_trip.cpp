// check_round_trip: a graph, its file loaded into the same buffers and into new ones, each launched once from the
// same state, every buffer compared byte for byte.
#include "conveyor/keep/round_trip.hpp"

#include "conveyor/error.hpp"
#include "conveyor/keep/load.hpp"
#include "execute/graph_exec_impl.hpp"
#include "keep/save_entries.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <cstring>

namespace conveyor {

namespace {

using bytes_t = std::vector<unsigned char>;

void copy(void* dst, const void* src, std::size_t bytes, buffer_memory m) {
  if (m == buffer_memory::host) std::memcpy(dst, src, bytes);
  else CONVEYOR_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

// Every buffer of `file` but graph allocations, read from `addresses`.
std::vector<bytes_t> read_all(const graph_file& file, const std::vector<void*>& addresses) {
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  std::vector<bytes_t> out(file.buffers.size());
  for (std::size_t i = 0; i < file.buffers.size(); ++i) {
    const saved_buffer& b = file.buffers[i];
    if (b.memory == buffer_memory::graph_allocation) continue;
    out[i].resize(b.bytes);
    copy(out[i].data(), addresses[i], b.bytes, b.memory);
  }
  return out;
}

void restore(const graph_file& file, const std::vector<void*>& addresses) {
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  for (std::size_t i = 0; i < file.buffers.size(); ++i)
    if (file.buffers[i].contents)
      copy(addresses[i], file.buffers[i].contents->data(), file.buffers[i].bytes, file.buffers[i].memory);
  CONVEYOR_CHECK(cudaDeviceSynchronize());
}

std::size_t compare(const graph_file& file, const std::vector<bytes_t>& a, const std::vector<bytes_t>& b,
                    std::string& first, const char* which) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < a[i].size(); ++k)
      if (a[i][k] != b[i][k]) {
        if (first.empty()) first = fmt::format("{}: buffer '{}' byte {}", which, file.buffers[i].name, k);
        ++differ;
      }
  return differ;
}

void launch_once(const graph& g, cudaStream_t s) {
  graph_exec e = instantiate(g);
  CONVEYOR_CHECK(cudaGraphLaunch(e.get(), s));
  CONVEYOR_CHECK(cudaStreamSynchronize(s));
}

} // namespace

round_trip_report check_round_trip(const graph_to_save& g, const save_options& options, cudaStream_t s,
                                   const kernel_registry* registry) {
  save_options with = options;
  with.contents = true;
  std::vector<const void*> bases;
  const graph_file file = detail::keep::save_entries({g}, with, false, nullptr, &bases);
  std::vector<void*> original(bases.size());
  for (std::size_t i = 0; i < bases.size(); ++i) original[i] = const_cast<void*>(bases[i]);
  round_trip_report r;
  r.file_bytes = to_bytes(file).size();
  for (const auto& b : file.buffers)
    if (b.memory != buffer_memory::graph_allocation) r.buffers += 1, r.bytes += b.bytes;
  // The original, once.
  if (g.executable != nullptr) {
    CONVEYOR_CHECK(cudaGraphLaunch(g.executable->get(), s));
    CONVEYOR_CHECK(cudaStreamSynchronize(s));
  } else {
    launch_once(*g.definition, s);
  }
  const auto expected = read_all(file, original);
  // Loaded into the same buffers.
  restore(file, original);
  load_options same;
  same.registry = registry;
  for (std::size_t i = 0; i < file.buffers.size(); ++i)
    if (file.buffers[i].memory != buffer_memory::graph_allocation)
      same.buffers.push_back({file.buffers[i].name, original[i], static_cast<std::size_t>(file.buffers[i].bytes)});
  {
    loaded_graphs l = load(file, same);
    launch_once(l.at(g.name), s);
  }
  r.differ_same = compare(file, expected, read_all(file, original), r.first_difference, "same buffers");
  // Loaded into new buffers, filled with the saved contents.
  restore(file, original);
  {
    load_options other;
    other.registry = registry;
    loaded_graphs l = load(file, other);
    launch_once(l.at(g.name), s);
    std::vector<void*> addresses;
    for (const auto& b : l.buffers()) addresses.push_back(b.pointer);
    r.differ_other = compare(file, expected, read_all(file, addresses), r.first_difference, "new buffers");
  }
  restore(file, original);
  return r;
}

} // namespace conveyor
