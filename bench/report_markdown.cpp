//! \file report_markdown.cpp
//! The Markdown report of a suite run: the machine and settings, then one section per measurement.

#include "bench/report_markdown.hpp"

#include "bench/markdown.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

namespace conveyor::bench {

namespace {

std::string pretty_topology(std::string_view t) {
  if (t == "chain") return "chain";
  if (t == "fork_join") return "fork/join (width 4)";
  return std::string(t);
}

class result_index {
public:
  explicit result_index(const bench_report& report) {
    for (const auto& r : report.results) {
      by_name_.emplace(r.name, &r);
      variants_.emplace(r.id.group, r.id.variant);
    }
  }
  // True when some result (run or failed) has this group and variant.
  [[nodiscard]] bool has_group_variant(const std::string& group, const std::string& variant) const {
    return variants_.contains({group, variant});
  }
  [[nodiscard]] const result_record* find(const bench_id& id) const {
    auto it = by_name_.find(bench_name(id));
    return it == by_name_.end() ? nullptr : it->second;
  }
  // The metric's summary, or null when the benchmark is absent, failed or lacks the metric.
  [[nodiscard]] const summary* metric(const bench_id& id, const std::string& name) const {
    const result_record* r = find(id);
    if (r == nullptr || !r->error.empty()) return nullptr;
    auto it = r->metrics.find(name);
    return it == r->metrics.end() ? nullptr : &it->second;
  }
  [[nodiscard]] std::string cell(const bench_id& id, const std::string& name) const {
    const summary* s = metric(id, name);
    return s == nullptr ? std::string(missing) : format_summary(*s);
  }
  [[nodiscard]] std::string bytes_cell(const bench_id& id, const std::string& name) const {
    const summary* s = metric(id, name);
    if (s == nullptr) return std::string(missing);
    return fmt::format("{} [{}–{}]", format_bytes(s->median), format_bytes(s->min), format_bytes(s->max));
  }
  // A ratio metric as "median [min–max]" with 3 decimals, or "—".
  [[nodiscard]] std::string ratio_summary_cell(const bench_id& id, const std::string& name) const {
    const summary* s = metric(id, name);
    if (s == nullptr) return std::string(missing);
    return fmt::format("{:.3f} [{:.3f}–{:.3f}]", s->median, s->min, s->max);
  }
  // median(a) / median(b) with `decimals` decimals and a suffix, or "—".
  [[nodiscard]] std::string ratio_cell(const bench_id& a, const bench_id& b, const std::string& name, int decimals,
                                       std::string_view suffix) const {
    const summary* x = metric(a, name);
    const summary* y = metric(b, name);
    if (x == nullptr || y == nullptr || !(y->median > 0.0) || !std::isfinite(x->median / y->median))
      return std::string(missing);
    return fmt::format("{:.{}f}{}", x->median / y->median, decimals, suffix);
  }

private:
  std::map<std::string, const result_record*> by_name_;
  std::set<std::pair<std::string, std::string>> variants_;
};

// Sorted distinct values of `field` over the results of `group` (optionally one topology).
template <class Field>
auto distinct(const bench_report& report, std::string_view group, std::string_view topology, Field field) {
  std::set<std::invoke_result_t<Field, const result_record&>> values;
  for (const auto& r : report.results)
    if (r.id.group == group && (topology.empty() || r.id.topology == topology)) values.insert(field(r));
  return values;
}

std::vector<std::string> topologies_of(const bench_report& report, std::string_view group) {
  std::vector<std::string> out;
  for (std::string_view t : {"chain", "fork_join"})
    for (const auto& r : report.results)
      if (r.id.group == group && r.id.topology == t) {
        out.emplace_back(t);
        break;
      }
  for (const auto& r : report.results)
    if (r.id.group == group && std::find(out.begin(), out.end(), r.id.topology) == out.end())
      out.push_back(r.id.topology);
  return out;
}

bench_id id_of(std::string group, std::string topology, std::string variant, std::string api, std::size_t n,
               std::size_t changed = 0) {
  return {std::move(group), std::move(topology), std::move(variant), std::move(api), n, changed};
}

std::string changed_label(std::size_t changed, std::size_t nodes) {
  if (changed == nodes) return fmt::format("{} (all)", changed);
  if (changed == 1 || nodes == 0 || changed > nodes) return fmt::format("{}", changed);
  return fmt::format("{} ({:.0f}%)", changed, 100.0 * static_cast<double>(changed) / static_cast<double>(nodes));
}

std::string clock_text(const clock_sample& c) {
  if (!c.available) return "not available (no NVML)";
  std::string text =
      fmt::format("SM {} MHz, memory {} MHz (max {} / {} MHz)", c.sm_mhz, c.memory_mhz, c.sm_max_mhz, c.memory_max_mhz);
  if (c.temperature_c >= 0) text += fmt::format(", {} °C", c.temperature_c);
  if (c.clock_event_reasons != 0) text += fmt::format(", clock-event reasons 0x{:x}", c.clock_event_reasons);
  return text;
}

void header_section(std::string& out, const bench_report& report) {
  const environment& e = report.env;
  const run_settings& s = report.settings;
  out += "# Conveyor benchmarks\n\n";
  // Every text that comes from the report (a saved one may come from anywhere) is escaped: one list item each.
  out += fmt::format("- **GPU**: {} (sm_{}{}, {} SMs, {} memory, {} L2, PCI {})\n", markdown_text(e.gpu_name),
                     e.compute_major, e.compute_minor, e.sm_count, format_bytes(static_cast<double>(e.memory_bytes)),
                     format_bytes(static_cast<double>(e.l2_bytes)),
                     e.pci_bus_id.empty() ? "?" : markdown_text(e.pci_bus_id));
  out += fmt::format("- **Driver**: CUDA {}{}; **runtime**: CUDA {}\n", cuda_version_string(e.driver_version),
                     e.driver_release.empty() ? std::string()
                                              : fmt::format(" (release {})", markdown_text(e.driver_release)),
                     cuda_version_string(e.runtime_version));
  out += fmt::format("- **Clocks**: at start {}; at end {}", clock_text(e.clocks_start), clock_text(e.clocks_end));
  if (e.clocks_during.samples > 0)
    out += fmt::format("; SM {}–{} MHz over {} samples during the run", e.clocks_during.sm_min_mhz,
                       e.clocks_during.sm_max_mhz, e.clocks_during.samples);
  out += fmt::format("; peak (cudaDevAttrClockRate) SM {} MHz, memory {} MHz\n", e.peak_sm_mhz, e.peak_memory_mhz);
  out += fmt::format("- **Host**: {}, {} CPUs, CPU frequency scaling {}\n",
                     e.host_name.empty() ? "?" : markdown_text(e.host_name), e.host_cpus,
                     e.cpu_scaling.empty() ? "unknown" : markdown_text(e.cpu_scaling));
  std::string sizes;
  for (std::size_t n : s.sizes) sizes += sizes.empty() ? fmt::format("{}", n) : fmt::format(", {}", n);
  out += fmt::format("- **Run**: {}, {} repetitions{} of ≈ {} ms timed work each, N ∈ {{{}}}, buffer sets per "
                     "repetition: {}{}{}; {:.0f} s; started {}; Conveyor {}\n",
                     s.quick ? "quick" : "full", s.repetitions, s.interleaved ? " (interleaved)" : "",
                     format_number(s.target_ms), sizes, s.rotation_sets,
                     s.min_pairs > 0 ? fmt::format(", at least {} pairs per paired repetition", s.min_pairs)
                                     : std::string(),
                     s.filter.empty() ? std::string() : fmt::format(", filter {}", markdown_code(s.filter)),
                     s.elapsed_s, markdown_text(e.started_utc), markdown_text(e.conveyor_version));
  out += fmt::format("- **Command**: `conveyor bench suite{}{}`\n", s.quick ? " --quick" : "",
                     s.filter.empty() ? std::string() : fmt::format(" --filter '{}'", s.filter));
  out += "- Cells: **median [min–max]** over the repetitions; — where a benchmark did not run (filtered out or "
         "failed) or did not record that measurement.\n";
}

void launch_section(std::string& out, const bench_report& report, const result_index& index) {
  const auto topologies = topologies_of(report, "launch");
  if (topologies.empty()) return;
  out += "\n## 1. Launch cost per kernel: sync, stream, graph\n\n";
  out += "N tiny kernels (1 block of 256 threads) per step. *sync*: launch, then synchronise, kernel by kernel; "
         "*stream*: all launches asynchronous, one synchronisation at the end; *graph*: one `graph_exec::launch` of "
         "an executable graph holding the N kernels. Wall time runs from the first call until the step has "
         "finished; host time counts only the launch calls (graph: the one cudaGraphLaunch).\n";
  for (const auto& t : topologies) {
    const auto sizes = distinct(report, "launch", t, [](const result_record& r) { return r.id.nodes; });
    std::vector<std::vector<std::string>> wall;
    std::vector<std::vector<std::string>> host;
    for (std::size_t n : sizes) {
      const auto sync = id_of("launch", t, "sync", "cuda", n);
      const auto stream = id_of("launch", t, "stream", "cuda", n);
      const auto graph = id_of("launch", t, "graph", "conveyor", n);
      wall.push_back({fmt::format("{}", n), index.cell(sync, "wall_us_per_kernel"),
                      index.cell(stream, "wall_us_per_kernel"), index.cell(graph, "wall_us_per_kernel"),
                      index.ratio_cell(sync, graph, "wall_us_per_kernel", 1, "x"),
                      index.ratio_cell(stream, graph, "wall_us_per_kernel", 1, "x")});
      host.push_back({fmt::format("{}", n), index.cell(sync, "host_us_per_call"),
                      index.cell(stream, "host_us_per_call"), index.cell(graph, "host_us_per_call")});
    }
    out += fmt::format("\n### {}: wall time per kernel (µs)\n\n", pretty_topology(t));
    out += markdown_table({"N", "sync", "stream", "graph", "sync ÷ graph", "stream ÷ graph"}, wall, "rrrrrr");
    out += fmt::format("\n### {}: host time per launch call (µs)\n\n", pretty_topology(t));
    out += markdown_table({"N", "sync", "stream", "graph"}, host, "rrrr");
  }
}

void paired_replay_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "paired")) {
    for (std::size_t n : distinct(report, "paired", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto id = id_of("paired", t, "replay", "conveyor_vs_raw", n);
      if (index.find(id) == nullptr) continue;
      rows.push_back({pretty_topology(t), fmt::format("{}", n), index.cell(id, "conveyor_wall_us_per_kernel"),
                      index.cell(id, "raw_wall_us_per_kernel"), index.ratio_summary_cell(id, "wall_ratio"),
                      index.ratio_summary_cell(id, "host_ratio")});
    }
  }
  if (rows.empty()) return;
  out += "\n### Replay, paired: Conveyor and raw alternating launch by launch\n\n";
  out += "One benchmark launches both executable graphs (same kernels, topology and buffers) back to back, in "
         "alternating order, each twice in a row, timing the second. Ratio = median over the pairs of a repetition "
         "of Conveyor ÷ raw; cells show the median [min–max] of that over the repetitions.\n\n";
  out += markdown_table(
      {"topology", "N", "Conveyor wall µs/kernel", "raw wall µs/kernel", "wall ratio", "host ratio (launch call)"},
      rows, "lrrrrr");
}

void paired_build_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "paired")) {
    for (const char* method : {"capture", "explicit"}) {
      for (std::size_t n : distinct(report, "paired", t, [](const result_record& r) { return r.id.nodes; })) {
        const auto id = id_of("paired", t, method, "conveyor_vs_raw", n);
        if (index.find(id) == nullptr) continue;
        rows.push_back({pretty_topology(t), method, fmt::format("{}", n), index.cell(id, "conveyor_us_per_node"),
                        index.cell(id, "raw_us_per_node"), index.ratio_summary_cell(id, "ratio"),
                        index.ratio_summary_cell(id, "build_ratio"),
                        index.ratio_summary_cell(id, "instantiate_ratio")});
      }
    }
  }
  if (rows.empty()) return;
  out += "\n### Build + instantiate, paired: Conveyor and raw alternating build by build\n\n";
  out += "One benchmark builds and instantiates the step both ways back to back, in alternating order (µs per "
         "node). Ratios = median over the pairs of a repetition of Conveyor ÷ raw, for the whole and for each part; "
         "cells show the median [min–max] of that over the repetitions.\n\n";
  out += markdown_table({"topology", "method", "N", "Conveyor µs/node", "raw µs/node", "ratio", "construction ratio",
                         "instantiate ratio"},
                        rows, "llrrrrrr");
}

void replay_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "launch")) {
    for (std::size_t n : distinct(report, "launch", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto conv = id_of("launch", t, "graph", "conveyor", n);
      const auto raw = id_of("launch", t, "graph", "raw", n);
      if (index.find(conv) == nullptr && index.find(raw) == nullptr) continue;
      rows.push_back({pretty_topology(t), fmt::format("{}", n), index.cell(conv, "wall_us_per_kernel"),
                      index.cell(raw, "wall_us_per_kernel"), index.ratio_cell(conv, raw, "wall_us_per_kernel", 3, ""),
                      index.cell(conv, "host_us_per_call"), index.cell(raw, "host_us_per_call"),
                      index.ratio_cell(conv, raw, "host_us_per_call", 3, "")});
    }
  }
  const bool paired = index.has_group_variant("paired", "replay");
  if (rows.empty() && !paired) return;
  out += "\n## 2. Graph replay: Conveyor against the raw CUDA Runtime API\n\n";
  if (rows.empty()) {
    paired_replay_section(out, report, index);
    return;
  }
  out += "The same kernels and topology, built and launched through Conveyor (`conveyor::graph`, `instantiate`, "
         "`graph_exec::launch`) and through the CUDA Runtime (`cudaGraphAddKernelNode`, `cudaGraphInstantiate`, "
         "`cudaGraphLaunch`), repetitions interleaved. Ratio = Conveyor ÷ raw (medians): Conveyor's overhead.\n\n";
  out += markdown_table({"topology", "N", "Conveyor wall µs/kernel", "raw wall µs/kernel", "ratio",
                         "Conveyor host µs/launch", "raw host µs/launch", "ratio"},
                        rows, "lrrrrrrr");
  paired_replay_section(out, report, index);
}

void build_section(std::string& out, const bench_report& report, const result_index& index) {
  const auto topologies = topologies_of(report, "build");
  const auto first_topologies = topologies_of(report, "first_launch");
  const bool paired = index.has_group_variant("paired", "capture") || index.has_group_variant("paired", "explicit");
  if (topologies.empty() && first_topologies.empty() && !paired) return;
  out += "\n## 3. Build costs\n";
  for (const auto& t : topologies) {
    std::vector<std::vector<std::string>> total;
    std::vector<std::vector<std::string>> construction;
    for (std::size_t n : distinct(report, "build", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto cc = id_of("build", t, "capture", "conveyor", n);
      const auto cr = id_of("build", t, "capture", "raw", n);
      const auto ec = id_of("build", t, "explicit", "conveyor", n);
      const auto er = id_of("build", t, "explicit", "raw", n);
      total.push_back({fmt::format("{}", n), index.cell(cc, "us_per_node"), index.cell(cr, "us_per_node"),
                       index.cell(ec, "us_per_node"), index.cell(er, "us_per_node")});
      construction.push_back({fmt::format("{}", n), index.cell(cc, "build_us_per_node"),
                              index.cell(cr, "build_us_per_node"), index.cell(ec, "build_us_per_node"),
                              index.cell(er, "build_us_per_node")});
    }
    out += fmt::format("\n### {}: build, then instantiate (µs per node)\n\n", pretty_topology(t));
    out += "Stream capture (`conveyor::capture` / `cudaStreamBeginCapture`) or explicit building (the "
           "`conveyor::graph` builder / `cudaGraphAddKernelNode`), then `instantiate` / `cudaGraphInstantiate`.\n\n";
    out += markdown_table({"N", "capture, Conveyor", "capture, raw", "explicit, Conveyor", "explicit, raw"}, total,
                          "rrrrr");
    out += fmt::format("\n### {}: the graph's construction alone (µs per node)\n\n", pretty_topology(t));
    out += markdown_table({"N", "capture, Conveyor", "capture, raw", "explicit, Conveyor", "explicit, raw"},
                          construction, "rrrrr");
  }
  paired_build_section(out, report, index);
  std::vector<std::vector<std::string>> first;
  for (const auto& t : first_topologies) {
    for (std::size_t n : distinct(report, "first_launch", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto plain = id_of("first_launch", t, "no_upload", "conveyor", n);
      const auto uploaded = id_of("first_launch", t, "upload", "conveyor", n);
      first.push_back({pretty_topology(t), fmt::format("{}", n), index.cell(plain, "first_launch_wall_us"),
                       index.cell(uploaded, "upload_us"), index.cell(uploaded, "first_launch_wall_us"),
                       index.cell(plain, "later_launch_wall_us")});
    }
  }
  if (!first.empty()) {
    out += "\n### First launch of a new executable graph (µs, wall, launch until finished)\n\n";
    out += "Without `graph_exec::upload` the first launch uploads the graph itself; with it, the upload "
           "(until finished) is shown apart. A later launch of the same graph for comparison.\n\n";
    out += markdown_table(
        {"topology", "N", "first launch, no upload", "upload", "first launch after upload", "later launch"}, first,
        "lrrrrr");
  }
}

void paired_setters_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : report.results) {
    if (r.id.group != "paired" || r.id.variant != "setters") continue;
    rows.push_back({fmt::format("{}", r.id.nodes), changed_label(r.id.changed, r.id.nodes),
                    index.cell(r.id, "conveyor_update_us"), index.cell(r.id, "raw_update_us"),
                    index.ratio_summary_cell(r.id, "ratio")});
  }
  if (rows.empty()) return;
  out += "\n### Per-node setters, paired: Conveyor and raw alternating update by update\n\n";
  out += "One benchmark changes the same nodes of two executable graphs of the chain, one through "
         "`graph_exec::set_kernel_args`, one through `cudaGraphExecKernelNodeSetParams`, in alternating order. Each "
         "side runs as a replay loop does (change, launch, wait) twice and only its second change is timed (µs per "
         "update, host), so both are measured right after a launch of their own graph. Ratio = median over the "
         "pairs of a repetition of Conveyor ÷ raw; cells show the median [min–max] of that over the "
         "repetitions.\n\n";
  out +=
      markdown_table({"N", "changed", "set_kernel_args", "cudaGraphExecKernelNodeSetParams", "ratio"}, rows, "rrrrr");
}

void paired_whole_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : report.results) {
    if (r.id.group != "paired" || r.id.variant != "whole") continue;
    rows.push_back({fmt::format("{}", r.id.nodes), changed_label(r.id.changed, r.id.nodes),
                    index.cell(r.id, "conveyor_update_us"), index.cell(r.id, "raw_update_us"),
                    index.ratio_summary_cell(r.id, "ratio")});
  }
  if (rows.empty()) return;
  out += "\n### Whole-graph update, paired: Conveyor and raw alternating update by update\n\n";
  out += "One benchmark moves two executable graphs of the chain between two graphs that differ in the changed "
         "nodes' kernel argument, one through `graph_exec::update` (graphs from Conveyor's builder), one through "
         "`cudaGraphExecUpdate` (graphs from the Runtime API), in alternating order; each side updates, launches and "
         "waits twice and only its second update is timed (µs per update, host). Ratio = median over the pairs of a "
         "repetition of Conveyor ÷ raw; cells show the median [min–max] of that over the repetitions.\n\n";
  out += markdown_table({"N", "changed", "graph_exec::update", "cudaGraphExecUpdate", "ratio"}, rows, "rrrrr");
}

void update_section(std::string& out, const bench_report& report, const result_index& index) {
  std::set<std::tuple<std::string, std::size_t, std::size_t>> rows_seen;
  for (const auto& r : report.results)
    if (r.id.group == "update") rows_seen.emplace(r.id.topology, r.id.nodes, r.id.changed);
  if (rows_seen.empty()) {
    if (index.has_group_variant("paired", "setters") || index.has_group_variant("paired", "whole")) {
      out += "\n## 4. Update costs\n";
      paired_setters_section(out, report, index);
      paired_whole_section(out, report, index);
    }
    return;
  }
  std::vector<std::vector<std::string>> cost;
  std::vector<std::vector<std::string>> after;
  const bool several_topologies =
      distinct(report, "update", "", [](const result_record& r) { return r.id.topology; }).size() > 1;
  for (const auto& [t, n, k] : rows_seen) {
    const auto sc = id_of("update", t, "setters", "conveyor", n, k);
    const auto sr = id_of("update", t, "setters", "raw", n, k);
    const auto wc = id_of("update", t, "whole", "conveyor", n, k);
    const auto wr = id_of("update", t, "whole", "raw", n, k);
    const auto ic = id_of("update", t, "reinstantiate", "conveyor", n, k);
    const auto ir = id_of("update", t, "reinstantiate", "raw", n, k);
    std::vector<std::string> lead{fmt::format("{}", n), changed_label(k, n)};
    if (several_topologies) lead.insert(lead.begin(), pretty_topology(t));
    auto row = lead;
    for (const auto& id : {sc, sr, wc, wr, ic, ir}) row.push_back(index.cell(id, "update_us"));
    cost.push_back(std::move(row));
    row = lead;
    for (const auto& id : {sc, sr, wc, wr, ic, ir}) row.push_back(index.cell(id, "launch_after_wall_us"));
    after.push_back(std::move(row));
  }
  std::vector<std::string> header{"N",
                                  "changed",
                                  "set_kernel_args",
                                  "cudaGraphExecKernelNodeSetParams",
                                  "graph_exec::update",
                                  "cudaGraphExecUpdate",
                                  "re-instantiate, Conveyor",
                                  "re-instantiate, raw"};
  std::string align = "rrrrrrrr";
  if (several_topologies) {
    header.insert(header.begin(), "topology");
    align.insert(align.begin(), 'l');
  }
  out += "\n## 4. Update costs\n\n";
  out += "A kernel argument changes in 1 node, 10% of the nodes or all nodes of an instantiated chain. Per-node "
         "setters change each node in place; whole-graph update applies a graph built with the new arguments; "
         "re-instantiation instantiates that graph anew (the old executable graph is destroyed untimed).\n";
  out += "\n### Time to apply the change (µs per update, host)\n\n";
  out += markdown_table(header, cost, align);
  out += "\n### The next launch after the change (µs, wall, launch until finished)\n\n";
  out += markdown_table(header, after, align);
  paired_setters_section(out, report, index);
  paired_whole_section(out, report, index);
}

void memory_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "memory")) {
    for (std::size_t n : distinct(report, "memory", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto id = id_of("memory", t, "instantiate_upload", "conveyor", n);
      const summary* copies = index.metric(id, "copies");
      rows.push_back({pretty_topology(t), fmt::format("{}", n), index.bytes_cell(id, "bytes_per_graph"),
                      index.cell(id, "bytes_per_node"),
                      copies == nullptr ? std::string(missing) : fmt::format("{:.0f}", copies->median)});
    }
  }
  if (rows.empty()) return;
  out += "\n## 5. Device memory held by an instantiated graph\n\n";
  out += "`cudaMemGetInfo` before and after instantiating and uploading several copies of the graph (about 20000 "
         "nodes in all, at most 500 copies, so that the allocation granularity does not hide small graphs), divided "
         "by the number of copies. These benchmarks run first and destroy nothing until they all have run: the driver "
         "reuses the memory of destroyed executable graphs, which would hide new ones.\n\n";
  out += markdown_table({"topology", "N", "bytes per graph", "bytes per node", "copies"}, rows, "lrrrr");
}

void failures_section(std::string& out, const bench_report& report) {
  std::string list;
  for (const auto& r : report.results)
    if (!r.error.empty()) list += fmt::format("- {}: {}\n", markdown_code(r.name), markdown_text(r.error));
  if (list.empty()) return;
  out += "\n## Failures\n\n" + list;
}

} // namespace

std::string to_markdown(const bench_report& report) {
  const result_index index(report);
  std::string out;
  header_section(out, report);
  launch_section(out, report, index);
  replay_section(out, report, index);
  build_section(out, report, index);
  update_section(out, report, index);
  memory_section(out, report, index);
  failures_section(out, report);
  return out;
}

} // namespace conveyor::bench
