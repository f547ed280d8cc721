// The measuring half of graph_files.hpp (needs a GPU).
#include "bench/graph_files.hpp"

#include "bench/kernels.hpp"

#include "train/dataset.hpp"
#include "train/trainer.hpp"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/define/capture.hpp>
#include <conveyor/error.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/keep/graphed_file.hpp>
#include <conveyor/keep/kernel_registry.hpp>
#include <conveyor/keep/load.hpp>
#include <conveyor/keep/save.hpp>
#include <conveyor/profile/module_images.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace conveyor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct device_floats {
  float* p = nullptr;
  explicit device_floats(std::size_t n) { CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float))); }
  device_floats(const device_floats&) = delete;
  device_floats& operator=(const device_floats&) = delete;
  ~device_floats() { (void)cudaFree(p); }
};

// A chain of `n` axpb kernels on one buffer, captured.
graph capture_chain(const stream& s, float* y, std::size_t n) {
  return capture(s, [&](const stream& cs) {
    for (std::size_t i = 0; i < n; ++i) launch_axpb(cs.get(), y, 0.5F, 1.0F);
    check_launch("axpb (graph-files study)");
  });
}

// The median of `launches` launches of `e` on `s`, each until finished, µs (after 3 untimed ones).
double replay_us(const graph_exec& e, const stream& s, int launches) {
  std::vector<double> us;
  for (int i = 0; i < launches + 3; ++i) {
    const auto t0 = clock_type::now();
    e.launch(s);
    s.synchronize();
    if (i >= 3) us.push_back(ms_since(t0) * 1000.0);
  }
  return median(us);
}

// Samples of load's phases over the repeats; their medians go into a row.
struct load_samples {
  std::vector<double> parse, kernels, buffers, graphs;
  void add(double parse_ms, const loaded_graphs& l) {
    parse.push_back(parse_ms);
    kernels.push_back(l.spent().kernels * 1000.0);
    buffers.push_back(l.spent().buffers * 1000.0);
    graphs.push_back(l.spent().graphs * 1000.0);
  }
  void into(graph_file_row& row) const {
    row.parse_ms = median(parse);
    row.kernels_ms = median(kernels);
    row.buffers_ms = median(buffers);
    row.graphs_ms = median(graphs);
  }
};

// The program's own kernels by name: what a restart of the same program passes at load.
kernel_registry bench_registry() {
  kernel_registry r;
  r.add(axpb_kernel());
  return r;
}

// from_bytes, load with the registry and `y` bound to the file's one buffer, instantiate: ms.
double registry_load_instantiate(const std::vector<unsigned char>& bytes, const kernel_registry& registry, float* y) {
  const auto t0 = clock_type::now();
  graph_file f = from_bytes(bytes);
  load_options o;
  o.registry = &registry;
  o.buffers.push_back({f.buffers.at(0).name, y, kernel_threads * sizeof(float)});
  loaded_graphs l = load(std::move(f), o);
  const graph_exec e = instantiate(l.at("chain"));
  return ms_since(t0);
}

graph_file_row measure_chain(const stream& s, std::size_t n, int repeats, const image_source& images) {
  device_floats y(kernel_threads);
  save_options so;
  so.images = {&images};
  const kernel_registry registry = bench_registry();
  std::vector<double> capture_ms, save_ms, load_ms, both_ms, registry_ms;
  load_samples phases;
  graph_file_row row;
  row.what = fmt::format("chain of {} kernels", n);
  for (int r = 0; r < repeats; ++r) {
    auto t0 = clock_type::now();
    graph g = capture_chain(s, y.p, n);
    {
      const graph_exec e = instantiate(g);
      capture_ms.push_back(ms_since(t0));
    }
    t0 = clock_type::now();
    const std::vector<unsigned char> bytes = to_bytes(to_graph_file({{"chain", &g, nullptr}}, so));
    save_ms.push_back(ms_since(t0));
    t0 = clock_type::now();
    graph_file f = from_bytes(bytes);
    const double parse = ms_since(t0);
    loaded_graphs l = load(std::move(f));
    load_ms.push_back(ms_since(t0));
    phases.add(parse, l);
    {
      const graph_exec e = instantiate(l.at("chain"));
      both_ms.push_back(ms_since(t0));
    }
    registry_ms.push_back(registry_load_instantiate(bytes, registry, y.p));
    row.nodes = n;
    row.file_bytes = bytes.size();
  }
  row.capture_instantiate_ms = median(capture_ms);
  row.save_ms = median(save_ms);
  row.load_ms = median(load_ms);
  row.load_instantiate_ms = median(both_ms);
  row.registry_load_instantiate_ms = median(registry_ms);
  phases.into(row);
  // Replay, the captured graph and the loaded one (buffers and the kernels' library owned by the load: the loaded
  // graph holds them through a CUDA user object) alternately.
  graph g = capture_chain(s, y.p, n);
  const graph_exec original = instantiate(g);
  loaded_graphs l = load(to_graph_file({{"chain", &g, nullptr}}, so));
  const graph_exec loaded = instantiate(l.at("chain"));
  std::vector<double> a, b;
  for (int r = 0; r < 5; ++r) {
    a.push_back(replay_us(original, s, 40));
    b.push_back(replay_us(loaded, s, 40));
  }
  row.replay_us = median(a);
  row.replay_loaded_us = median(b);
  return row;
}

graph_file_row measure_train_step(int repeats, const image_source& images) {
  train::train_options o;
  const train::dataset data = train::make_random_dataset(1024, 128, 7);
  const train::step_file_costs c = train::measure_step_file_costs(o, data, &images, repeats);
  graph_file_row row;
  row.what = fmt::format("train step (batch {}, {} kernels, {} images)", o.batch, c.kernels, c.images);
  row.nodes = c.nodes;
  row.file_bytes = c.file_bytes;
  row.capture_instantiate_ms = c.capture_instantiate_ms;
  row.save_ms = c.save_ms;
  row.load_instantiate_ms = c.load_instantiate_ms;
  row.parse_ms = c.parse_ms;
  row.kernels_ms = c.kernels_ms;
  row.buffers_ms = c.buffers_ms;
  row.graphs_ms = c.graphs_ms;
  return row;
}

graph_file_row measure_buckets(const stream& s, std::size_t buckets, std::size_t nodes, int repeats,
                               const image_source& images) {
  device_floats y(kernel_threads);
  auto body = [p = y.p, nodes](const stream& cs, batch_size rows) {
    for (std::size_t i = 0; i < nodes; ++i) launch_axpb(cs.get(), p, 0.5F, static_cast<float>(rows.padded % 7));
    check_launch("axpb (graph-files study)");
  };
  graphed_options go;
  go.max_graphs = buckets;
  for (std::size_t k = 1; k <= buckets; ++k) go.buckets.push_back(16 * k);
  save_options so;
  so.images = {&images};
  const auto path = std::filesystem::temp_directory_path() / fmt::format("conveyor-bench-buckets-{}.cgf", buckets);
  const kernel_registry registry = bench_registry();
  std::vector<double> prepare_ms, save_ms, load_ms, registry_ms;
  graph_file_row row;
  row.what = fmt::format("{} buckets of {} kernels (graphed)", buckets, nodes);
  for (int r = 0; r < repeats; ++r) {
    graphed step(body, go);
    auto t0 = clock_type::now();
    step.prepare(s, batch_size{1});
    s.synchronize();
    prepare_ms.push_back(ms_since(t0));
    t0 = clock_type::now();
    save_buckets(path, step, so);
    save_ms.push_back(ms_since(t0));
    graphed fresh(body, go);
    t0 = clock_type::now();
    (void)load_buckets(fresh, path, {}, s);
    s.synchronize();
    load_ms.push_back(ms_since(t0));
    graphed again(body, go);
    load_options o;
    o.registry = &registry;
    o.buffers.push_back({read_graph_file(path).buffers.at(0).name, y.p, kernel_threads * sizeof(float)});
    t0 = clock_type::now();
    (void)load_buckets(again, path, o, s);
    s.synchronize();
    registry_ms.push_back(ms_since(t0));
    row.file_bytes = std::filesystem::file_size(path);
  }
  std::filesystem::remove(path);
  row.nodes = buckets * nodes;
  row.capture_instantiate_ms = median(prepare_ms);
  row.save_ms = median(save_ms);
  row.load_instantiate_ms = median(load_ms);
  row.registry_load_instantiate_ms = median(registry_ms);
  return row;
}

} // namespace

graph_files_result measure_graph_files_study(const study_args& args) {
  const profile::module_images images; // before the first kernel: every module's image is recorded
  const stream s;
  graph_files_result out;
  const std::vector<std::size_t> sizes =
      args.quick ? std::vector<std::size_t>{10, 1000, 10000} : std::vector<std::size_t>{10, 100, 1000, 10000};
  for (std::size_t n : sizes) out.rows.push_back(measure_chain(s, n, n >= 10000 ? 5 : 11, images));
  out.rows.push_back(measure_train_step(11, images));
  out.rows.push_back(measure_buckets(s, args.quick ? 16 : 64, 100, 5, images));
  out.image_modules = images.modules();
  out.image_bytes = images.bytes();
  return out;
}

} // namespace conveyor::bench
