//! \file allreduce_report.cpp
//! The table and the JSON file of `conveyor allreduce`.

#include "allreduce/allreduce_report.hpp"

#include <fmt/format.h>

namespace conveyor::allreduce {

namespace {

double bus_factor(int world) { return world > 1 ? 2.0 * (world - 1) / world : 0.0; }

} // namespace

std::vector<std::size_t> sizes_of(const options& o) {
  std::vector<std::size_t> sizes;
  for (std::size_t b = o.min_bytes; b <= o.max_bytes; b *= o.factor) {
    sizes.push_back(b);
    if (b > o.max_bytes / o.factor) break;
  }
  return sizes;
}

std::string size_label(std::size_t b) {
  if (b >= (std::size_t{1} << 20) && b % (std::size_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

std::string table(const std::vector<size_row>& rows, int world, const std::string& title) {
  auto us = [](double v) { return v < 0 ? std::string("-") : fmt::format("{:.2f}", v); };
  auto gbs = [](std::size_t bytes, double us_per_call, double factor) {
    if (us_per_call <= 0) return std::string("-");
    return fmt::format("{:.2f}", factor * static_cast<double>(bytes) / (us_per_call * 1e3));
  };
  const double bf = bus_factor(world);
  std::string out = title + "\n";
  out += fmt::format("| {:>9} | {:>9} | {:>11} | {:>9} | {:>8} | {:>12} | {:>12} | {:>12} | {:>12} | {:>5} |\n", "size",
                     "eager us", "blocking us", "graph us", "speed-up", "algbw eager", "algbw graph", "busbw eager",
                     "busbw graph", "check");
  out += fmt::format("|{:-<11}|{:-<11}|{:-<13}|{:-<11}|{:-<10}|{:-<14}|{:-<14}|{:-<14}|{:-<14}|{:-<7}|\n", "", "", "",
                     "", "", "", "", "", "", "");
  for (const size_row& r : rows) {
    const std::string speedup =
        r.eager_us > 0 && r.graph_us > 0 ? fmt::format("{:.2f}x", r.eager_us / r.graph_us) : std::string("-");
    out += fmt::format("| {:>9} | {:>9} | {:>11} | {:>9} | {:>8} | {:>12} | {:>12} | {:>12} | {:>12} | {:>5} |\n",
                       size_label(r.bytes), us(r.eager_us), us(r.blocking_us), us(r.graph_us), speedup,
                       gbs(r.bytes, r.eager_us, 1.0), gbs(r.bytes, r.graph_us, 1.0),
                       world > 1 ? gbs(r.bytes, r.eager_us, bf) : "n/a",
                       world > 1 ? gbs(r.bytes, r.graph_us, bf) : "n/a", r.correct ? "ok" : "WRONG");
  }
  out += "us: microseconds per all-reduce (median of the trials); eager: Conveyor's nonblocking communicators, calls "
         "enqueued back to back; blocking: plain NCCL blocking communicators (ncclCommInitAll / ncclCommInitRank), "
         "the same calls (-: not measured; off by default under --distributed, where --blocking-baseline turns it "
         "on); graph: the calls captured into one graph, replayed. algbw = bytes / time, busbw = algbw * "
         "2(n-1)/n (NCCL's PERFORMANCE.md), GB/s. check: every element equals the number of ranks.\n";
  return out;
}

nlohmann::json to_json(const std::vector<size_row>& rows, int world, const options& o,
                       const std::vector<std::string>& gpus, int nccl_version) {
  nlohmann::json j;
  j["schema"] = "conveyor-allreduce/1";
  j["ranks"] = world;
  j["mode"] = o.distributed ? "distributed" : "one process";
  j["gpus"] = gpus;
  j["nccl_version"] = nccl_version;
  j["calls_per_graph"] = o.calls_per_graph;
  j["trials"] = o.trials;
  const double bf = bus_factor(world);
  for (const size_row& r : rows) {
    nlohmann::json row;
    row["bytes"] = r.bytes;
    row["eager_us"] = r.eager_us;
    row["blocking_us"] = r.blocking_us >= 0 ? nlohmann::json(r.blocking_us) : nlohmann::json(nullptr);
    row["graph_us"] = r.graph_us;
    row["algbw_eager_gbs"] = static_cast<double>(r.bytes) / (r.eager_us * 1e3);
    row["algbw_graph_gbs"] = static_cast<double>(r.bytes) / (r.graph_us * 1e3);
    row["busbw_eager_gbs"] = bf * static_cast<double>(r.bytes) / (r.eager_us * 1e3);
    row["busbw_graph_gbs"] = bf * static_cast<double>(r.bytes) / (r.graph_us * 1e3);
    row["correct"] = r.correct;
    j["rows"].push_back(row);
  }
  return j;
}

} // namespace conveyor::allreduce
