// Host-only half of graphed.hpp: the Markdown table (in conveyor_bench_report, tested without a GPU).
#include "bench/graphed.hpp"

#include "bench/markdown.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace conveyor::bench {

std::string format_graphed_rebind(const std::vector<rebind_row>& rows) {
  const std::vector<std::string> header{"case",
                                        "N",
                                        "what",
                                        "µs/call (with sync)",
                                        "min µs",
                                        "host µs in call",
                                        "above replay µs",
                                        "per reached node µs",
                                        "÷ eager",
                                        "captures",
                                        "rebinds"};
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    const double above = r.call_us - r.replay_call_us;
    const bool is_reference = r.reached == 0;
    body.push_back({fmt::format("`{}`", r.name), fmt::format("{}", r.nodes), r.what, format_number(r.us),
                    format_number(r.min_us), format_number(r.call_us), is_reference ? "" : format_number(above),
                    r.reached > 1 ? format_number(above / static_cast<double>(r.reached)) : "",
                    r.eager_us > 0 ? fmt::format("{:.3f}", r.us / r.eager_us) : "", fmt::format("{}", r.captures),
                    fmt::format("{}", r.rebinds)});
  }
  return fmt::format("### graphed/: changed arguments — rebind vs re-capture vs eager\n\nMedians over the timed "
                     "calls; the cases of one N run interleaved, one call each in turn, so that all meet the machine "
                     "alike. \"µs/call\" includes `cudaStreamSynchronize` (the GPU's work); \"host µs in call\" is "
                     "the call alone (key, patch or capture and update, launch) and \"above replay\" compares it with "
                     "the replay's. \"÷ eager\" (µs/call) below 1 is faster than running the callable eagerly.\n\n{}",
                     markdown_table(header, body, "lrlrrrrrrrr"));
}

std::string format_recapture_cost(const std::vector<recapture_cost>& rows) {
  const std::vector<std::string> header{"N",
                                        "eager µs",
                                        "capture µs",
                                        "of which checks",
                                        "update µs",
                                        "launch µs",
                                        "default ÷ eager",
                                        "per-node: read µs",
                                        "compare µs",
                                        "set µs",
                                        "launch µs",
                                        "per-node ÷ eager",
                                        "raw: capture µs",
                                        "update µs",
                                        "launch µs",
                                        "raw ÷ eager",
                                        "default ÷ raw",
                                        "checks off: capture / update / launch µs",
                                        "checks off ÷ raw",
                                        "raw, all N changed ÷ eager",
                                        "read µs a node: Conveyor",
                                        "driver calls"};
  const auto ratio = [](double total, double eager) { return eager > 0 ? fmt::format("{:.3f}", total / eager) : "—"; };
  const auto per_node = [](double us, std::size_t n) { return n > 0 ? fmt::format("{:.3f}", us / n) : "—"; };
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    const double set = std::max(0.0, r.update_us - r.read_us - r.compare_us);
    const double raw = r.raw_capture_us + r.raw_update_us + r.raw_launch_us;
    body.push_back({fmt::format("{}", r.nodes),
                    format_number(r.eager_us),
                    format_number(r.capture_us),
                    format_number(r.checks_us),
                    format_number(r.whole_update_us),
                    format_number(r.whole_launch_us),
                    ratio(r.capture_us + r.whole_update_us + r.whole_launch_us, r.eager_us),
                    format_number(r.read_us),
                    format_number(r.compare_us),
                    format_number(set),
                    format_number(r.launch_us),
                    ratio(r.capture_us + r.update_us + r.launch_us, r.eager_us),
                    format_number(r.raw_capture_us),
                    format_number(r.raw_update_us),
                    format_number(r.raw_launch_us),
                    ratio(r.raw_capture_us + r.raw_update_us + r.raw_launch_us, r.eager_us),
                    ratio(r.capture_us + r.whole_update_us + r.whole_launch_us, raw),
                    fmt::format("{} / {} / {}", format_number(r.unchecked_capture_us),
                                format_number(r.unchecked_update_us), format_number(r.unchecked_launch_us)),
                    ratio(r.unchecked_capture_us + r.unchecked_update_us + r.unchecked_launch_us, raw),
                    ratio(r.raw_all_nodes_us, r.eager_us),
                    per_node(r.read_us, r.nodes),
                    per_node(r.raw_read_us, r.nodes)});
  }
  return fmt::format(
      "### graphed/: where a re-capture's time goes\n\nHost µs, medians, when 1 of the N kernel nodes changed: the "
      "callable run eagerly (until finished); `conveyor::capture` of it with the default checks (default streams, host "
      "memory), and what the checks cost. Then the default way graphed applies it (`recapture_update::whole_graph`): "
      "`graph_exec::update` (its guards and `cudaGraphExecUpdate`), and the launch until finished, with the replaced "
      "graph destroyed while the GPU runs; default ÷ eager = (capture + update + launch) ÷ eager. And the per-node way "
      "(`recapture_update::per_node`): reading the captured graph (kernel parameters, launch attributes, edges), "
      "comparing it with the executable graph's own, setting the changed node and destroying the replaced graph "
      "(`update_incremental` less its read and comparison), the launch until finished; per-node ÷ eager = (capture + "
      "read + compare + set + launch) ÷ eager. Last, the anchor: the same re-capture through the Runtime API alone "
      "(`cudaStreamBeginCapture` … `cudaStreamEndCapture`, `cudaGraphExecUpdate`, `cudaGraphLaunch` until finished, "
      "the replaced graph destroyed while the GPU runs), raw ÷ eager = (capture + update + launch) ÷ eager, and "
      "default ÷ raw, graphed's default path against the Runtime API's own capture, update and launch; checks off ÷ "
      "raw, the same path with the capture's checks off (`capture_options`: `catch_default_streams = false`, "
      "`host_memory = host_memory_check::off`, the user's promise that the callable enqueues nothing on a default "
      "stream and copies no pageable host memory), on an executable graph of its own, whose update then reads the "
      "cluster attributes the capture did not; the same "
      "when all N nodes changed (a pointer every kernel takes), on an executable graph of its own: the floor of "
      "graphed's all-nodes re-capture rows; and the read per node, Conveyor's (`per-node: read µs` ÷ N) beside the "
      "driver calls alone that it makes, on another fresh capture (node list; each node's type, kernel parameters, "
      "eight launch attributes, dependencies).\n\n{}",
      markdown_table(header, body, "rrrrrrrrrrrrrrrrrrrrrr"));
}

std::string format_prepare_cost(const std::vector<prepare_cost>& rows) {
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    std::vector<std::string> row{fmt::format("{}", r.buckets),
                                 fmt::format("{}", r.nodes),
                                 format_number(r.prepare_ms),
                                 format_number(r.buckets > 0 ? r.prepare_ms / static_cast<double>(r.buckets) : 0.0),
                                 format_number(r.raw_ms),
                                 fmt::format("{:.2f}", r.ratio()),
                                 format_number(r.no_warmup_ms),
                                 format_number(r.unwatched_ms),
                                 fmt::format("{:.2f}", r.same_work_ratio())};
    for (double ms : r.instantiate_ms) row.push_back(format_number(ms));
    row.push_back(fmt::format("{:.2f}", r.instantiate_ms[3] > 0 ? r.instantiate_ms[0] / r.instantiate_ms[3] : 0.0));
    for (double ms : r.background_ms) row.push_back(format_number(ms));
    const double best = *std::min_element(r.background_ms.begin(), r.background_ms.end());
    row.push_back(r.raw_ms > 0 && best > 0 ? fmt::format("{:.2f}", best / r.raw_ms) : "—");
    body.push_back(std::move(row));
  }
  return fmt::format(
      "### graphed/: start-up with many shapes\n\nHost ms, medians of 7 rounds (each round runs every prepare variant "
      "and the raw work once, in turn, the first rotating): `graphed::prepare` of a callable of "
      "N tiny kernels over B batch-size buckets (one warm-up call, then each bucket captured, "
      "instantiated and uploaded, largest first); the raw Runtime API's capture, instantiation and "
      "upload of the same buckets one after another, in the same run; prepare without the warm-up "
      "call (`warmup_calls = 0`: the raw side's work), with the stream watch of each bucket's capture "
      "and without it (`CONVEYOR_WATCH_STREAMS=0`), and the former against raw (target ≤ 1.05); the raw "
      "`cudaGraphInstantiate` of the B "
      "captured graphs spread over 1, 2, 4 and 8 host threads; and prepare with "
      "`graphed_options::instantiate_in_background` (each bucket instantiated and uploaded on 1 or 2 "
      "worker threads while the next is captured, until all are cached), the better of the two against "
      "raw (target ≤ 0.5).\n\n{}",
      markdown_table({"buckets", "N", "prepare ms", "ms per bucket", "raw ms", "prepare / raw", "no warm-up ms",
                      "no warm-up, unwatched ms", "no warm-up / raw", "instantiate ms, 1 thread", "2 threads",
                      "4 threads", "8 threads", "1 thread / 8", "prepare in the background ms, 1 worker", "2 workers",
                      "best / raw"},
                     body, "rrrrrrrrrrrrrrrrr"));
}

namespace {

// The value below which `share` of `values` lie (nearest rank; 0 for none).
double percentile(std::vector<double> values, double share) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(share * static_cast<double>(values.size())));
  return values[std::min(values.size(), std::max<std::size_t>(rank, 1)) - 1];
}

double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double sum = 0;
  for (std::size_t i = from; i < to; ++i) sum += v[i];
  return to > from ? sum / static_cast<double>(to - from) : 0;
}

} // namespace

std::string format_first_calls(const std::vector<first_calls_row>& rows) {
  if (rows.empty()) return {};
  std::vector<std::vector<std::string>> summary;
  for (const auto& r : rows) {
    double total = 0;
    for (double us : r.us) total += us;
    summary.push_back({r.variant, format_number(total / 1000.0), format_number(percentile(r.us, 0.5)),
                       format_number(percentile(r.us, 0.9)), format_number(percentile(r.us, 1.0)),
                       fmt::format("{}", r.eager), fmt::format("{}", r.replays), fmt::format("{}", r.captures)});
  }
  std::vector<std::string> header{"calls"};
  for (const auto& r : rows) header.push_back(r.variant);
  std::vector<std::vector<std::string>> blocks;
  const std::size_t calls = rows.front().us.size();
  for (std::size_t from = 0; from < calls; from += 10) {
    const std::size_t to = std::min(calls, from + 10);
    std::vector<std::string> line{fmt::format("{}–{}", from + 1, to)};
    for (const auto& r : rows) line.push_back(format_number(mean_of(r.us, from, std::min(to, r.us.size()))));
    blocks.push_back(std::move(line));
  }
  return fmt::format(
      "### graphed/: the first {} calls of a stream of mixed shapes\n\nA callable of {} tiny kernels; each call's "
      "batch size drawn at random (fixed seed) among {} bucket sizes; no `prepare`. Latency: host µs from the call to "
      "the "
      "end of its stream synchronisation. The same calls three ways: eagerly; `graphed` with its defaults (a new "
      "shape's first call runs eagerly, its second captures, instantiates and launches); and with "
      "`graphed_options::instantiate_in_background` (the second call captures and runs eagerly while a worker "
      "thread instantiates and uploads; the shape's calls run eagerly until the graph is ready). All three leave "
      "the same buffers.\n\n{}\n\nMean latency (µs) of each block of ten calls:\n\n{}",
      calls, rows.front().nodes, rows.front().buckets,
      markdown_table({"variant", "total ms", "median µs", "90th percentile µs", "largest µs", "calls run eagerly",
                      "graph launches", "captures"},
                     summary, "lrrrrrrr"),
      markdown_table(header, blocks, std::string(header.size(), 'r')));
}

std::string format_graphed_study(const graphed_study_result& result) {
  return format_graphed_rebind(result.rebind) + "\n" + format_recapture_cost(result.recapture) + "\n" +
         format_prepare_cost(result.prepare) + "\n" + format_first_calls(result.first_calls);
}

} // namespace conveyor::bench
