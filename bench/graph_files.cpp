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

graph_file_row measure_chain(const stream& s, std::size_t n, int repeats, const image_source& images) {
  device_floats y(kernel_threads);
  save_options so;
  so.images = {&images};
  std::vector<double> capture_ms, save_ms, load_ms, both_ms;
  graph_file_row row;
  row.what = fmt::format("chain of {} kernels", n);
  for (int r = 0; r < repeats; ++r) {
    auto t0 = clock_type::now();
    graph g = capture_chain(s, y.p, n);
    { const graph_exec e = instantiate(g); capture_ms.push_back(ms_since(t0)); }
    t0 = clock_type::now();
    const std::vector<unsigned char> bytes = to_bytes(to_graph_file({{"chain", &g, nullptr}}, so));
    save_ms.push_back(ms_since(t0));
    t0 = clock_type::now();
    loaded_graphs l = load(from_bytes(bytes));
    load_ms.push_back(ms_since(t0));
    { const graph_exec e = instantiate(l.at("chain")); both_ms.push_back(ms_since(t0)); }
    row.nodes = n;
    row.file_bytes = bytes.size();
  }
  row.capture_instantiate_ms = median(capture_ms);
  row.save_ms = median(save_ms);
  row.load_ms = median(load_ms);
  row.load_instantiate_ms = median(both_ms);
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
  std::vector<double> prepare_ms, save_ms, load_ms;
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
    row.file_bytes = std::filesystem::file_size(path);
  }
  std::filesystem::remove(path);
  row.nodes = buckets * nodes;
  row.capture_instantiate_ms = median(prepare_ms);
  row.save_ms = median(save_ms);
  row.load_instantiate_ms = median(load_ms);
  return row;
}

} // namespace

graph_files_result measure_graph_files_study(const study_args& args) {
  const profile::module_images images; // before the first kernel: every module's image is recorded
  const stream s;
  graph_files_result out;
  const std::vector<std::size_t> sizes = args.quick ? std::vector<std::size_t>{10, 1000, 10000}
                                                    : std::vector<std::size_t>{10, 100, 1000, 10000};
  for (std::size_t n : sizes) out.rows.push_back(measure_chain(s, n, n >= 10000 ? 5 : 11, images));
  out.rows.push_back(measure_train_step(11, images));
  out.rows.push_back(measure_buckets(s, args.quick ? 16 : 64, 100, 5, images));
  out.image_modules = images.modules();
  out.image_bytes = images.bytes();
  return out;
}

} // namespace conveyor::bench
