//! \file plan.cpp
//! The list of benchmarks and their iteration counts.

#include "bench/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace conveyor::bench {

namespace {

constexpr std::int64_t max_iterations = 100000;

bool graph_launch(const bench_id& id) { return id.group == "launch" && id.variant == "graph"; }

// Paired benchmarks that replay or update an executable graph (rather than build one).
bool paired_replay(const bench_id& id) {
  return id.group == "paired" && (id.variant == "replay" || id.variant == "setters" || id.variant == "whole");
}

double setup_us(const bench_id& id, std::size_t rotation_sets) {
  const auto n = static_cast<double>(id.nodes);
  if (graph_launch(id)) return static_cast<double>(rotation_sets) * (5.0 * n + 50.0);
  if (paired_replay(id)) return 10.0 * n + 100.0;
  if (id.group == "update") return 8.0 * n + 100.0;
  if (id.group == "memory") return 6.0 * n + 100.0;
  return 50.0;
}

std::int64_t warmup_for(const bench_id& id, std::int64_t iterations, std::size_t rotation_sets) {
  if (id.group == "launch") {
    const std::int64_t tenth = std::max<std::int64_t>(1, iterations / 10);
    return graph_launch(id) ? std::max<std::int64_t>(static_cast<std::int64_t>(rotation_sets), tenth) : tenth;
  }
  if (id.group == "update") return std::max<std::int64_t>(2, iterations / 10);
  if (id.group == "paired") return paired_replay(id) ? std::max<std::int64_t>(2, iterations / 10) : 2;
  if (id.group == "memory") return 0; // the benchmark instantiates and uploads once before measuring
  return 1;
}

void check_plan_options(const plan_options& options) {
  if (options.sizes.empty()) throw std::invalid_argument("conveyor bench: no sizes to measure");
  for (std::size_t n : options.sizes)
    if (n == 0) throw std::invalid_argument("conveyor bench: N must be at least 1");
  if (!(options.target_ms > 0.0)) throw std::invalid_argument("conveyor bench: the target time must be positive");
  if (options.rotation_sets == 0) throw std::invalid_argument("conveyor bench: at least one buffer set is needed");
  if (options.repetitions < 1) throw std::invalid_argument("conveyor bench: at least one repetition is needed");
  if (options.min_pairs < 1) throw std::invalid_argument("conveyor bench: at least one pair is needed");
}

// Timed iterations per repetition: about options.target_ms of work; a paired benchmark an even number of pairs
// (each order equally often), at least options.min_pairs; the memory benchmark one.
std::int64_t iterations_for(const bench_id& id, double iteration_us, const plan_options& options) {
  if (id.group == "memory") return 1;
  const double target_us = options.target_ms * 1000.0;
  if (id.group == "paired") {
    const std::int64_t pairs = std::clamp<std::int64_t>(std::llround(target_us / iteration_us),
                                                        static_cast<std::int64_t>(options.min_pairs), max_iterations);
    return pairs + pairs % 2;
  }
  return std::clamp<std::int64_t>(std::llround(target_us / iteration_us), 1, max_iterations);
}

bench_case make_case(bench_id id, const plan_options& options) {
  bench_case c;
  c.name = bench_name(id);
  c.estimated_iteration_us = estimate_iteration_us(id);
  c.estimated_setup_us = setup_us(id, options.rotation_sets);
  c.iterations = iterations_for(id, c.estimated_iteration_us, options);
  c.warmup = warmup_for(id, c.iterations, options.rotation_sets);
  if (id.group == "launch" || id.group == "update" || paired_replay(id)) c.warmup_ms = options.warmup_ms;
  c.id = std::move(id);
  return c;
}

const std::vector<std::string> topologies{"chain", "fork_join"};

std::vector<bench_id> launch_ids(const std::vector<std::size_t>& sizes) {
  std::vector<bench_id> ids;
  for (const auto& t : topologies)
    for (std::size_t n : sizes) {
      ids.push_back({"launch", t, "sync", "cuda", n, 0});
      ids.push_back({"launch", t, "stream", "cuda", n, 0});
      ids.push_back({"launch", t, "graph", "conveyor", n, 0});
      ids.push_back({"launch", t, "graph", "raw", n, 0});
    }
  return ids;
}

std::vector<bench_id> build_ids(const std::vector<std::size_t>& sizes) {
  std::vector<bench_id> ids;
  for (const auto& t : topologies)
    for (std::size_t n : sizes)
      for (const char* method : {"capture", "explicit"})
        for (const char* api : {"conveyor", "raw"}) ids.push_back({"build", t, method, api, n, 0});
  return ids;
}

std::vector<bench_id> paired_ids(const std::vector<std::size_t>& sizes) {
  std::vector<bench_id> ids;
  for (const auto& t : topologies)
    for (std::size_t n : sizes)
      for (const char* variant : {"replay", "capture", "explicit"})
        ids.push_back({"paired", t, variant, "conveyor_vs_raw", n, 0});
  for (std::size_t n : sizes)
    for (std::size_t k : changed_counts(n))
      for (const char* variant : {"setters", "whole"})
        ids.push_back({"paired", "chain", variant, "conveyor_vs_raw", n, k});
  return ids;
}

std::vector<bench_id> first_launch_ids(const std::vector<std::size_t>& sizes) {
  std::vector<bench_id> ids;
  for (const auto& t : topologies)
    for (std::size_t n : sizes)
      for (const char* variant : {"no_upload", "upload"}) ids.push_back({"first_launch", t, variant, "conveyor", n, 0});
  return ids;
}

std::vector<bench_id> update_ids(const std::vector<std::size_t>& sizes) {
  std::vector<bench_id> ids;
  for (std::size_t n : sizes)
    for (std::size_t k : changed_counts(n))
      for (const char* method : {"setters", "whole", "reinstantiate"})
        for (const char* api : {"conveyor", "raw"}) ids.push_back({"update", "chain", method, api, n, k});
  return ids;
}

std::vector<bench_id> memory_ids(const std::vector<std::size_t>& sizes) {
  std::vector<bench_id> ids;
  for (const auto& t : topologies)
    for (std::size_t n : sizes) ids.push_back({"memory", t, "instantiate_upload", "conveyor", n, 0});
  return ids;
}

} // namespace

plan_options full_plan() { return {{1, 10, 100, 1000, 10000}, 50.0, 1, 10, 20.0, 8}; }

plan_options quick_plan() { return {{1, 100, 10000}, 10.0, 1, 3, 10.0, 4}; }

std::size_t topology_width(const std::string& topology, std::size_t n) noexcept {
  if (topology != "fork_join") return 1;
  return std::max<std::size_t>(1, std::min(fork_join_width, n));
}

std::vector<std::size_t> changed_counts(std::size_t n) {
  std::vector<std::size_t> counts{1, std::max<std::size_t>(1, n / 10), n};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  counts.erase(std::remove(counts.begin(), counts.end(), std::size_t{0}), counts.end());
  return counts;
}

std::vector<std::size_t> changed_indices(std::size_t n, std::size_t changed) {
  std::vector<std::size_t> indices;
  changed = std::min(changed, n);
  indices.reserve(changed);
  for (std::size_t i = 0; i < changed; ++i) indices.push_back(i * n / changed);
  return indices;
}

std::size_t memory_copies(std::size_t n) noexcept {
  if (n == 0) return 1;
  return std::clamp<std::size_t>((20000 + n - 1) / n, 2, 500);
}

double estimate_iteration_us(const bench_id& id) {
  const auto n = static_cast<double>(id.nodes);
  const auto k = static_cast<double>(id.changed);
  // About 1.3 times what an H200 measured (driver 580, CUDA 13.0), set-up and destruction included.
  if (id.group == "launch") {
    if (id.variant == "sync") return 12.0 * n + 5.0;
    if (id.variant == "stream") return 4.5 * n + 10.0 + (id.topology == "fork_join" ? 5.0 : 0.0);
    return 1.8 * n + 10.0;
  }
  if (id.group == "build") return (id.variant == "capture" ? 4.5 : 4.0) * n + 20.0;
  if (id.group == "first_launch") return 8.0 * n + 60.0;
  if (id.group == "update") {
    if (id.variant == "setters") return 0.8 * k + 1.8 * n + 15.0;
    if (id.variant == "whole") return 2.2 * n + 20.0;
    return 5.5 * n + 40.0;
  }
  if (id.group == "memory") return 6.0 * static_cast<double>(memory_copies(id.nodes)) * n + 1000.0;
  if (id.group == "paired") {
    // Both sides, plus (build) destroying what each built.
    // Each side runs twice per pair (see paired.cpp).
    if (id.variant == "replay") return 4.0 * (1.8 * n + 10.0);
    if (id.variant == "setters") return 4.0 * (0.8 * k + 1.8 * n + 15.0);
    if (id.variant == "whole") return 4.0 * (0.9 * n + 1.1 * n + 15.0);
    return 2.0 * ((id.variant == "capture" ? 4.5 : 4.0) * n + 20.0) + 1.5 * n;
  }
  return 100.0;
}

std::vector<bench_case> plan_cases(const plan_options& options) {
  check_plan_options(options);
  std::vector<bench_case> cases;
  for (std::vector<bench_id> (*group)(const std::vector<std::size_t>&) :
       {launch_ids, build_ids, paired_ids, first_launch_ids, update_ids, memory_ids})
    for (bench_id& id : group(options.sizes)) cases.push_back(make_case(std::move(id), options));
  return cases;
}

double estimate_run_seconds(const std::vector<bench_case>& cases, int repetitions) {
  double us = 0.0;
  for (const auto& c : cases)
    us += static_cast<double>(repetitions) * (c.estimated_setup_us + c.warmup_ms * 1000.0 +
                                              static_cast<double>(c.iterations + c.warmup) * c.estimated_iteration_us);
  return us * 1e-6;
}

} // namespace conveyor::bench
