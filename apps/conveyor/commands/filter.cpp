//! \file filter.cpp
//! `conveyor filter`: options, reading and resizing the images, the benchmark per size, verification, outputs.

#include "commands/filter.hpp"

#include "common/require_gpu.hpp"
#include "common/file_output.hpp"
#include "common/mode_option.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/graph_saving.hpp"
#include "common/profiling.hpp"
#include "common/results_table.hpp"
#include "common/usage_error.hpp"

#include "filter/benchmark.hpp"
#include "filter/chain.hpp"
#include "filter/cpu_reference.hpp"
#include "filter/image_io.hpp"
#include "filter/pipelined.hpp"
#include "filter/resize.hpp"

#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using conveyor::scenarios::option_error;

namespace {

using namespace conveyor::filter;

//! Edge pixels may differ from the CPU reference only where its magnitude is this close to the threshold (grey
//! levels): the float chain's magnitude is within ~2e-3 of the double one (see docs/filter.md).
constexpr double verify_margin = 0.05;

struct cli_options {
  std::string input;
  std::string out;
  conveyor::scenarios::mode_option mode; // --mode
  std::vector<std::string> sizes{"512x512", "1920x1080", "3840x2160"};
  filter_params params;
  int warmup = 1;
  int repeat = 10;
  std::size_t limit = 0;
  std::string dot;
  bool verify = false;
  std::size_t pipeline = 0;         // --pipeline DEPTH: 0 = off
  std::size_t pipeline_frames = 60; // --pipeline-frames
  bool pipeline_frames_given = false;
  conveyor::scenarios::profiling_cli profile; // --profile, --profile-steps, --doctor
  conveyor::scenarios::graph_saving_cli save; // --save-graph, --save-graph-contents, --check-saved-graph
};

struct named_image {
  std::string name; // file name without extension
  image img;
};

struct frame_size {
  int width = 0;
  int height = 0;
};

frame_size parse_size(const std::string& text) {
  const auto x = text.find('x');
  int w = 0;
  int h = 0;
  try {
    std::size_t used_w = 0;
    std::size_t used_h = 0;
    if (x == std::string::npos) throw std::invalid_argument("no x");
    w = std::stoi(text.substr(0, x), &used_w);
    h = std::stoi(text.substr(x + 1), &used_h);
    if (used_w != x || used_h != text.size() - x - 1) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    throw option_error("--sizes", "expected WIDTHxHEIGHT (e.g. 1920x1080) or native, got '" + text + "'");
  }
  if (w < 3 || h < 3 || w > max_image_side || h > max_image_side)
    throw option_error("--sizes", "each side must be 3 to 32768 pixels, got '" + text + "'");
  return {w, h};
}

//! The batches: for each size, the indices of the images it holds (all of them, or those of that size for native).
std::vector<std::pair<frame_size, std::vector<std::size_t>>> make_batches(const std::vector<std::string>& sizes,
                                                                          const std::vector<named_image>& images) {
  std::vector<std::pair<frame_size, std::vector<std::size_t>>> batches;
  const bool native = sizes.size() == 1 && sizes[0] == "native";
  if (native) {
    for (std::size_t i = 0; i < images.size(); ++i) {
      const frame_size s{images[i].img.width, images[i].img.height};
      auto it = std::find_if(batches.begin(), batches.end(),
                             [&](const auto& b) { return b.first.width == s.width && b.first.height == s.height; });
      if (it == batches.end()) batches.push_back({s, {i}});
      else it->second.push_back(i);
    }
    return batches;
  }
  std::vector<std::size_t> all(images.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (const auto& text : sizes) batches.push_back({parse_size(text), all});
  return batches;
}

std::string size_text(int w, int h) { return fmt::format("{}x{}", w, h); }

std::string pipelined_mode_name(std::size_t depth) { return fmt::format("pipe-{}", depth); }

const mode_timing* find_mode(const size_report& r, execution_mode mode) {
  for (const auto& m : r.modes)
    if (m.mode == mode) return &m;
  return nullptr;
}

//! The pipelined results beside their bound: each stage alone, the slowest of them, frames/s as a fraction of it.
void print_bound_table(const std::vector<size_report>& reports,
                       const std::vector<std::optional<pipelined_report>>& pipelined) {
  bool any = false;
  for (const auto& p : pipelined) any = any || p.has_value();
  if (!any) return;
  fmt::print("\npipelined: one graph launch per step holds the upload of frame k, the chain of frame k-1 and the "
             "downloads of frame k-2 (depth 3; depth 2: upload k beside chain then downloads of k-1) as independent "
             "branches; bound = the slowest of upload, chain and downloads, each measured alone (ms/frame)\n");
  fmt::print("{:<10} | {:>5} | {:>6} | {:>8} | {:>9} | {:>12} | {:>11} | {:>14} | {:>8} | {:>8} | {:>8} | {:>8} | "
             "{:>12} | {:>9}\n",
             "size", "depth", "frames", "ms/frame", "frames/s", "upload alone", "chain alone", "download alone",
             "bound", "bound by", "of bound", "vs graph", "graphs/nodes", "= graph");
  fmt::print("{:-<10}-+-{:-<5}-+-{:-<6}-+-{:-<8}-+-{:-<9}-+-{:-<12}-+-{:-<11}-+-{:-<14}-+-{:-<8}-+-{:-<8}-+-{:-<8}-+-"
             "{:-<8}-+-{:-<12}-+-{:-<9}\n",
             "", "", "", "", "", "", "", "", "", "", "", "", "", "");
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (!pipelined[i]) continue;
    const pipelined_report& p = *pipelined[i];
    const size_report& r = reports[i];
    const mode_timing* g = find_mode(r, execution_mode::graph);
    const std::string vs_graph =
        g != nullptr && p.ms_per_frame > 0.0 ? fmt::format("{:.2f}x", g->ms_per_frame / p.ms_per_frame) : "n/a";
    const bool same = !r.modes.empty() && p.output_hash == r.modes.front().output_hash;
    fmt::print(
        "{:<10} | {:>5} | {:>6} | {:>8.4f} | {:>9.1f} | {:>12.4f} | {:>11.4f} | {:>14.4f} | {:>8.4f} | {:>8} | "
        "{:>7.1f}% | {:>8} | {:>12} | {:>9}\n",
        size_text(r.width, r.height), p.depth, p.frames_per_pass, p.ms_per_frame, p.frames_per_second, p.upload_ms,
        p.chain_ms, p.download_ms, p.bound_ms, conveyor::to_string(p.bound_by), 100.0 * p.fraction_of_bound, vs_graph,
        fmt::format("{}/{}", p.statistics.instantiations, p.statistics.nodes_updated), same ? "bitwise" : "DIFFERS");
  }
  fmt::print("(per frame: upload 3 bytes per pixel, downloads 4; of bound: frames/s over the bound's frames/s; "
             "graphs/nodes: executable graphs made, copy nodes given new host pointers)\n");
}

//! The results table: per size, a row per mode (and the pipelined mode's), the speedup against that size's sync.
void print_table(const std::vector<size_report>& reports, const std::vector<std::optional<pipelined_report>>& pipelined,
                 const std::string& device) {
  fmt::print("\ndevice: {}\n", device);
  using table = conveyor::scenarios::results_table;
  table t({{"size", 10, true},
           {"mode", 6, true},
           {"frames", 6},
           {"ms/frame (median)", 17},
           {"frames/s", 9},
           table::speedup_column(),
           {"nodes updated/frame", 19}});
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const size_report& r = reports[i];
    t.new_group();
    for (const auto& m : r.modes) {
      const std::string updated =
          m.mode == execution_mode::graph
              ? fmt::format("{:.2f} of {}", m.nodes_updated_per_frame, r.stats ? r.stats->nodes : 0)
              : "-";
      t.add_row(m.mode, m.ms_per_frame,
                {size_text(r.width, r.height), std::string(to_string(m.mode)), fmt::format("{}", r.frames),
                 fmt::format("{:.4f}", m.ms_per_frame), fmt::format("{:.1f}", m.frames_per_second), updated});
    }
    if (i < pipelined.size() && pipelined[i]) {
      const pipelined_report& p = *pipelined[i];
      t.add_row(execution_mode::graph, p.ms_per_frame,
                {size_text(r.width, r.height), pipelined_mode_name(p.depth), fmt::format("{}", p.frames_per_pass),
                 fmt::format("{:.4f}", p.ms_per_frame), fmt::format("{:.1f}", p.frames_per_second), "-"});
    }
  }
  fmt::print("{}", t.text());
}

void print_graph(const size_report& r) {
  if (!r.stats) return;
  const auto& s = *r.stats;
  const auto count = [&](conveyor::node_kind k) {
    auto it = s.by_kind.find(k);
    return it == s.by_kind.end() ? std::size_t{0} : it->second;
  };
  fmt::print("graph {}: {} nodes ({} kernels, {} copies), {} edges, depth {}, width {}; instantiated {} time(s)\n",
             size_text(r.width, r.height), s.nodes, count(conveyor::node_kind::kernel),
             count(conveyor::node_kind::memcpy), s.edges, s.depth, s.width, r.instantiations);
  for (const auto& line : r.graph_log) fmt::print("  {}\n", line);
}

//! Every check of the options that needs neither the images nor a GPU.
//! \throws usage_error naming the option; std::invalid_argument for an output path.
void check_cli(const cli_options& o) {
  const bool has_graph = o.mode.selects_graph();
  if (!o.dot.empty() && !has_graph) throw option_error("--dot", "needs " + o.mode.graph_modes());
  try {
    validate(o.params);
  } catch (const std::invalid_argument& e) {
    throw option_error("parameters", e.what());
  }
  const bool native = o.sizes.size() == 1 && o.sizes[0] == "native";
  if (!native)
    for (const auto& s : o.sizes) (void)parse_size(s);
  if (o.pipeline_frames_given && o.pipeline == 0)
    throw option_error("--pipeline-frames", "applies to --pipeline only; without it it would be ignored");
  conveyor::scenarios::check_profiling_options(o.profile, has_graph, o.mode.graph_modes());
  conveyor::scenarios::check_graph_saving_options(o.save, has_graph);
  conveyor::scenarios::check_output_file("--dot", o.dot);
  conveyor::scenarios::check_output_folder("--out", o.out);
  conveyor::scenarios::check_distinct_outputs(
      {{"--dot", o.dot}, {"--profile (its DOT file)", conveyor::scenarios::profile_dot_path(o.profile.trace)}});
}

//! Every image of --input (the first --limit), read before any GPU work or output: a bad one stops the run.
//! \throws image_error naming the file.
std::vector<named_image> read_images(const cli_options& o) {
  std::vector<std::filesystem::path> files = list_images(o.input);
  if (o.limit > 0 && files.size() > o.limit) files.resize(o.limit);
  std::vector<named_image> images;
  for (const auto& f : files) {
    images.push_back({f.stem().string(), read_image(f)});
    fmt::print("read {} ({}x{})\n", f.string(), images.back().img.width, images.back().img.height);
  }
  return images;
}

//! One frame size's batch: a pinned slot per image (resized unless native) and the images' names.
struct size_batch {
  int width = 0;
  int height = 0;
  std::vector<frame_slot> slots;
  std::vector<std::string> names;
  image first_frame; // the first frame as loaded, for --verify
};

size_batch load_batch(const cli_options& o, frame_size size, const std::vector<std::size_t>& members,
                      const std::vector<named_image>& images) {
  const bool native = o.sizes.size() == 1 && o.sizes[0] == "native";
  size_batch b;
  b.width = size.width;
  b.height = size.height;
  b.slots.reserve(members.size());
  for (const std::size_t i : members) {
    image frame = native ? images[i].img : resize_bilinear(images[i].img, size.width, size.height);
    b.slots.emplace_back(size.width, size.height);
    b.slots.back().load(frame);
    b.names.push_back(images[i].name);
    if (b.slots.size() == 1) b.first_frame = std::move(frame);
  }
  return b;
}

//! The pipelined mode of one size (--pipeline) and its check against the other modes' outputs.
std::optional<pipelined_report> run_pipelined_mode(const cli_options& o, filter_chain& chain, const size_batch& b,
                                                   const size_report& r, const timing_options& timing,
                                                   std::vector<std::string>& failures) {
  if (o.pipeline == 0) return std::nullopt;
  pipelined_report piped = run_pipelined(chain, b.slots, {o.pipeline, o.pipeline_frames}, timing);
  const bool same = piped.output_hash == r.modes.front().output_hash;
  fmt::print("{}: pipelined (depth {}, {} frames per pass) outputs bitwise identical to {} mode: {}\n",
             size_text(b.width, b.height), piped.depth, piped.frames_per_pass, to_string(r.modes.front().mode),
             same ? "yes" : "NO");
  if (!same) failures.push_back(size_text(b.width, b.height) + ": the pipelined outputs differ from the other modes'");
  return piped;
}

//! --verify (the first frame against the CPU reference) and the files of one size (--out, --dot for the first).
void check_and_write(const cli_options& o, const size_batch& b, const size_report& r, bool& dot_written,
                     std::vector<std::string>& failures) {
  const std::string size = size_text(b.width, b.height);
  if (o.verify) {
    const chain_reference ref = run_reference(b.first_frame, o.params);
    const output_check c =
        check_outputs(b.slots[0].edges_image(), b.slots[0].sharp_image(), ref, o.params.threshold, verify_margin);
    fmt::print("{}: verify {} against the CPU reference (double): {}\n", size, b.names[0], c.summary());
    if (!c.ok()) failures.push_back(size + ": verification failed: " + c.summary());
  }
  if (!o.out.empty()) {
    const std::filesystem::path out_dir = o.out;
    for (std::size_t i = 0; i < b.slots.size(); ++i) {
      const std::string stem = b.names[i] + "_" + size;
      write_png(out_dir / (stem + "_edges.png"), b.slots[i].edges_image());
      write_png(out_dir / (stem + "_sharp.png"), b.slots[i].sharp_image());
    }
    fmt::print("{}: wrote {} edges and {} sharpened PNGs to {}\n", size, b.slots.size(), b.slots.size(),
               out_dir.string());
  }
  if (!o.dot.empty() && !dot_written && !r.dot.empty()) {
    write_file_atomically(o.dot, r.dot);
    dot_written = true;
    fmt::print("wrote the {} graph to {}\n", size, o.dot);
  }
}

void run(const cli_options& o) {
  check_cli(o);
  if (std::error_code ec; !std::filesystem::exists(o.input, ec))
    throw conveyor::scenarios::input_error(fmt::format("--input '{}': no such file or folder", o.input));
  const std::vector<named_image> images = read_images(o);
  conveyor::scenarios::require_gpu("`conveyor filter`");
  if (!o.out.empty()) std::filesystem::create_directories(o.out);
  fmt::print("chain: grey, Gaussian sigma {} (radius {}), Sobel x | Sobel y, magnitude, threshold {}; unsharp "
             "sigma {} amount {}; modes: {}; {} warm-up + {} timed pass(es)\n",
             o.params.sigma, gaussian_radius(o.params.sigma), o.params.threshold, o.params.unsharp_sigma,
             o.params.unsharp_amount, o.mode.text, o.warmup, o.repeat);
  std::fflush(stdout);

  // Profiled and examined: the first frame size only (one graph; the tracks compare the same frames).
  const auto saving = conveyor::scenarios::make_graph_saving(o.save); // before the first kernel
  const auto profiling = conveyor::scenarios::make_profiling(o.profile, "filter");
  const timing_options timing{o.warmup, o.repeat};
  std::vector<execution_mode> modes;
  for (const auto& m : o.mode.selected()) modes.push_back(m.kind);
  std::vector<size_report> reports;
  std::vector<std::optional<pipelined_report>> pipelined;
  std::vector<std::string> failures;
  bool dot_written = false;
  for (const auto& [size, members] : make_batches(o.sizes, images)) {
    const size_batch b = load_batch(o, size, members, images);
    filter_chain chain(b.width, b.height, o.params);
    size_report r = run_benchmark(chain, b.slots, b.names, modes, timing, profiling.get());
    if (profiling) profiling->stop(); // the first size only
    print_graph(r);
    if (!r.modes_agree()) failures.push_back(size_text(b.width, b.height) + ": the modes' outputs differ");
    fmt::print("{}: outputs of {} bitwise identical across modes: {}\n", size_text(b.width, b.height), r.frames,
               r.modes_agree() ? "yes" : "NO");
    std::optional<pipelined_report> piped = run_pipelined_mode(o, chain, b, r, timing, failures);
    check_and_write(o, b, r, dot_written, failures);
    std::fflush(stdout);
    reports.push_back(std::move(r));
    pipelined.push_back(std::move(piped));
  }
  print_table(reports, pipelined, conveyor::describe_device(0));
  print_bound_table(reports, pipelined);
  if (profiling) profiling->finish();
  if (!failures.empty()) {
    std::string all;
    for (const auto& f : failures) all += "\n  " + f;
    throw std::runtime_error("conveyor filter: checks failed:" + all);
  }
}

} // namespace

void register_filter_command(CLI::App& app) {
  auto o = std::make_shared<cli_options>();
  CLI::App* sub = app.add_subcommand(
      "filter", "Image filter chain (blur, Sobel x|y, magnitude, threshold; unsharp mask) on real PNG/JPEG images as "
                "a multi-stream graph, in sync, stream and graph modes; report ms/frame, frames/s, speedup");
  sub->add_option("--input,-i", o->input, "A PNG or JPEG file, or a folder of them")->required();
  sub->add_option("--out,-o", o->out, "Folder for the edges and sharpened PNGs (created; nothing written without it)");
  o->mode.add_to(*sub);
  sub->add_option("--sizes", o->sizes, "Frame sizes WIDTHxHEIGHT, comma-separated, or native (each image's own)")
      ->delimiter(',')
      ->capture_default_str();
  using conveyor::scenarios::integer_in;
  using conveyor::scenarios::real_in;
  const conveyor::scenarios::real_range sigma_range{min_gaussian_sigma, max_gaussian_sigma, false, false, false};
  sub->add_option("--sigma", o->params.sigma, "Gaussian sigma before Sobel, pixels (radius ceil(3 sigma) <= 32)")
      ->check(real_in(sigma_range))
      ->capture_default_str();
  // Threshold and amount reach the GPU as floats: checked as floats.
  sub->add_option("--threshold", o->params.threshold, "Edge threshold on the Sobel magnitude, grey levels (>= 0)")
      ->check(real_in(conveyor::scenarios::nonnegative_float()))
      ->capture_default_str();
  sub->add_option("--unsharp-sigma", o->params.unsharp_sigma, "Gaussian sigma of the unsharp mask, pixels")
      ->check(real_in(sigma_range))
      ->capture_default_str();
  sub->add_option("--amount", o->params.unsharp_amount, "Unsharp mask amount (>= 0)")
      ->check(real_in(conveyor::scenarios::nonnegative_float()))
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed passes over the batch per mode (include graph instantiation)")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  sub->add_option("--repeat", o->repeat, "Timed passes over the batch per mode (the median is reported)")
      ->check(integer_in(1, 100000))
      ->capture_default_str();
  sub->add_option("--limit", o->limit, "Use only the first N images (0: all)")
      ->check(integer_in(std::size_t{0}, std::numeric_limits<std::size_t>::max()))
      ->capture_default_str();
  sub->add_option("--dot", o->dot, "Write the graph of the first size as Graphviz DOT to this file");
  sub->add_option("--pipeline", o->pipeline,
                  "Also run the chain pipelined over the frames with DEPTH frames in flight (2 or 3; 1: no overlap): "
                  "one graph launch per step uploads frame k, filters frame k-1 and downloads frame k-2; reports "
                  "it beside its bound, the slowest of upload, chain and download measured alone (0: off)")
      ->check(integer_in(std::size_t{0}, conveyor::max_pipeline_depth))
      ->capture_default_str();
  sub->add_option("--pipeline-frames", o->pipeline_frames,
                  "Frames streamed per pipelined pass (the batch repeated; prologue and epilogue are amortised)")
      ->check(integer_in(std::size_t{1}, std::size_t{1000000}))
      ->capture_default_str();
  sub->add_flag("--verify", o->verify, "Compare the first frame of each size with the CPU reference (double)");
  conveyor::scenarios::add_graph_saving_options(*sub, o->save, "the chain graph of the first size");
  conveyor::scenarios::add_profiling_options(
      *sub, o->profile, "one frame (upload, chain, downloads; one graph launch in graph mode) of the first size",
      o->mode.graph_modes());
  sub->callback([o, sub] {
    o->pipeline_frames_given = sub->count("--pipeline-frames") > 0;
    run(*o);
  });
}
