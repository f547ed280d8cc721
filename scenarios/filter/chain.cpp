//! \file chain.cpp
//! The chain, written once (define_chain) and run through the sinks of chain_sinks.hpp in the three modes.

#include "filter/chain.hpp"

#include "filter/chain_sinks.hpp"
#include "filter/kernels.hpp"

#include "common/hash.hpp"

#include <conveyor/execute/graph_exec.hpp>

#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace conveyor::filter {

using detail::colour_lane;
using detail::gradient_lane;
using detail::main_lane;

namespace {

std::size_t pixel_count(int width, int height) {
  if (width <= 0 || height <= 0)
    throw std::invalid_argument("frame size must be positive, got " + std::to_string(width) + "x" +
                                std::to_string(height));
  return static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
}

//! Everything one frame's operations read: device buffers, the frame's host buffers, size and parameters.
struct chain_io {
  std::uint8_t* rgb8;
  float* rgb;
  float* grey;
  float* grey_tmp;
  float* blurred;
  float* gx;
  float* gy;
  float* mag;
  std::uint8_t* edges8;
  float* rgb_tmp;
  float* rgb_blurred;
  std::uint8_t* sharp8;
  const std::uint8_t* input; // host, pinned
  std::uint8_t* edges;       // host, pinned
  std::uint8_t* sharp;       // host, pinned
  int width;
  int height;
  gaussian_taps taps;
  gaussian_taps unsharp_taps;
  float threshold;
  float amount;
};

//! The chain, once for every mode. The order of operations is the graph's node order (update_sink relies on it).
template <class Sink>
void define_chain(Sink& s, const chain_io& io) {
  const kernel_table& k = kernels();
  const launch_config cfg = launch_shape(io.width, io.height);
  const int w = io.width;
  const int h = io.height;
  const std::size_t px = static_cast<std::size_t>(w) * static_cast<std::size_t>(h);

  (void)s.copy(main_lane, {}, "upload rgb8", io.rgb8, io.input, 3 * px, cudaMemcpyHostToDevice);
  const auto to_float = s.kernel(main_lane, {}, "rgb8 to float", cfg, k.rgb8_to_float, io.rgb8, io.rgb, io.grey, w, h);

  // Third branch: unsharp mask of the colour image.
  (void)s.kernel(colour_lane, {to_float}, "colour blur rows", cfg, k.blur_rows, io.rgb, io.rgb_tmp, w, h, 3,
                 io.unsharp_taps);
  (void)s.kernel(colour_lane, {}, "colour blur columns", cfg, k.blur_columns, io.rgb_tmp, io.rgb_blurred, w, h, 3,
                 io.unsharp_taps);
  (void)s.kernel(colour_lane, {}, "unsharp mask", cfg, k.unsharp, io.rgb, io.rgb_blurred, io.sharp8, w, h, io.amount);
  const auto sharp_done =
      s.copy(colour_lane, {}, "download sharpened", io.sharp, io.sharp8, 3 * px, cudaMemcpyDeviceToHost);

  // Edges: Gaussian blur of the grey image, then Sobel x and y on two branches, joined at the magnitude.
  (void)s.kernel(main_lane, {}, "blur rows", cfg, k.blur_rows, io.grey, io.grey_tmp, w, h, 1, io.taps);
  const auto blurred =
      s.kernel(main_lane, {}, "blur columns", cfg, k.blur_columns, io.grey_tmp, io.blurred, w, h, 1, io.taps);
  const auto gy = s.kernel(gradient_lane, {blurred}, "sobel y", cfg, k.sobel_y, io.blurred, io.gy, w, h);
  (void)s.kernel(main_lane, {}, "sobel x", cfg, k.sobel_x, io.blurred, io.gx, w, h);
  (void)s.kernel(main_lane, {gy}, "magnitude", cfg, k.magnitude, io.gx, io.gy, io.mag, w, h);
  (void)s.kernel(main_lane, {}, "threshold", cfg, k.threshold, io.mag, io.edges8, w, h, io.threshold);
  (void)s.copy(main_lane, {}, "download edges", io.edges, io.edges8, px, cudaMemcpyDeviceToHost);

  // The next frame starts on the main lane: it must follow the colour branch too.
  s.join(main_lane, {sharp_done});
}

} // namespace

// ---- frame_slot ------------------------------------------------------------------------------------------------

frame_slot::frame_slot(int width, int height) :
    width_(width),
    height_(height),
    input_(3 * pixel_count(width, height)),
    edges_(pixel_count(width, height)),
    sharp_(3 * pixel_count(width, height)) {}

void frame_slot::load(const image& rgb) {
  if (!rgb.valid() || rgb.channels != 3 || rgb.width != width_ || rgb.height != height_)
    throw std::invalid_argument("frame_slot::load: needs an RGB image of " + std::to_string(width_) + "x" +
                                std::to_string(height_) + ", got " + std::to_string(rgb.width) + "x" +
                                std::to_string(rgb.height) + " with " + std::to_string(rgb.channels) + " channels");
  std::memcpy(input_.data(), rgb.pixels.data(), input_.bytes());
}

image frame_slot::edges_image() const {
  image out;
  out.width = width_;
  out.height = height_;
  out.channels = 1;
  out.pixels.assign(edges_.data(), edges_.data() + edges_.size());
  return out;
}

image frame_slot::sharp_image() const {
  image out;
  out.width = width_;
  out.height = height_;
  out.channels = 3;
  out.pixels.assign(sharp_.data(), sharp_.data() + sharp_.size());
  return out;
}

std::uint64_t frame_slot::output_hash() const noexcept {
  const std::uint64_t h = scenarios::fnv1a_of(std::span<const std::uint8_t>(edges_.data(), edges_.size()));
  return scenarios::fnv1a_of(std::span<const std::uint8_t>(sharp_.data(), sharp_.size()), h);
}

// ---- filter_chain ----------------------------------------------------------------------------------------------

struct filter_chain::impl {
  int width;
  int height;
  filter_params params;
  gaussian_taps taps;
  gaussian_taps unsharp_taps;
  // Device buffers (declared before the streams and graphs, so destroyed after them).
  device_buffer<std::uint8_t> rgb8, edges8, sharp8;
  device_buffer<float> rgb, grey, grey_tmp, blurred, gx, gy, mag, rgb_tmp, rgb_blurred;
  std::array<stream, detail::lanes> streams;
  std::array<event, detail::lanes> events;
  // Graph mode.
  std::optional<conveyor::graph> graph;
  std::optional<graph_exec> exec;
  detail::graph_record record;
  graph_update_report report;
  std::size_t instantiations = 0;

  impl(int w, int h, const filter_params& p) :
      width(w),
      height(h),
      params(p),
      taps(make_taps(p.sigma)),
      unsharp_taps(make_taps(p.unsharp_sigma)),
      rgb8(3 * pixel_count(w, h)),
      edges8(pixel_count(w, h)),
      sharp8(3 * pixel_count(w, h)),
      rgb(3 * pixel_count(w, h)),
      grey(pixel_count(w, h)),
      grey_tmp(pixel_count(w, h)),
      blurred(pixel_count(w, h)),
      gx(pixel_count(w, h)),
      gy(pixel_count(w, h)),
      mag(pixel_count(w, h)),
      rgb_tmp(3 * pixel_count(w, h)),
      rgb_blurred(3 * pixel_count(w, h)),
      streams{stream(), stream(), stream()},
      events{event(cudaEventDisableTiming), event(cudaEventDisableTiming), event(cudaEventDisableTiming)} {}

  chain_io io(const frame_slot& f) {
    chain_io c = io_without_host();
    c.input = f.input();
    c.edges = f.edges();
    c.sharp = f.sharp();
    return c;
  }

  //! The chain's device buffers and parameters; null host buffers.
  chain_io io_without_host() {
    return {.rgb8 = rgb8.data(),
            .rgb = rgb.data(),
            .grey = grey.data(),
            .grey_tmp = grey_tmp.data(),
            .blurred = blurred.data(),
            .gx = gx.data(),
            .gy = gy.data(),
            .mag = mag.data(),
            .edges8 = edges8.data(),
            .rgb_tmp = rgb_tmp.data(),
            .rgb_blurred = rgb_blurred.data(),
            .sharp8 = sharp8.data(),
            .input = nullptr,
            .edges = nullptr,
            .sharp = nullptr,
            .width = width,
            .height = height,
            .taps = taps,
            .unsharp_taps = unsharp_taps,
            .threshold = static_cast<float>(params.threshold),
            .amount = static_cast<float>(params.unsharp_amount)};
  }

  void run_graph(const chain_io& frame) {
    if (!exec) {
      conveyor::graph g;
      detail::graph_record rec;
      detail::graph_sink sink(g, rec);
      define_chain(sink, frame);
      exec.emplace(instantiate(g, instantiate_flags::none, streams[main_lane]));
      graph.emplace(std::move(g));
      record = std::move(rec);
      ++instantiations;
      report.instantiated = true;
      report.nodes_updated = 0;
      report.updated.clear();
    } else {
      report.instantiated = false;
      try {
        detail::update_sink sink(*exec, record, report.updated);
        define_chain(sink, frame);
        if (sink.visited() != record.nodes.size())
          throw std::logic_error("filter chain: fewer operations than the graph has nodes");
      } catch (...) {
        // The record may no longer describe the executable graph: start again at the next graph frame.
        exec.reset();
        graph.reset();
        record = {};
        throw;
      }
      report.nodes_updated = report.updated.size();
    }
    exec->launch(streams[main_lane]);
  }
};

filter_chain::filter_chain(int width, int height, const filter_params& params) {
  (void)pixel_count(width, height);
  validate(params);
  impl_ = std::make_unique<impl>(width, height, params);
}

filter_chain::~filter_chain() {
  if (!impl_) return;
  for (const auto& s : impl_->streams) (void)cudaStreamSynchronize(s.get());
  (void)cudaGetLastError();
}

int filter_chain::width() const noexcept { return impl_->width; }
int filter_chain::height() const noexcept { return impl_->height; }
const filter_params& filter_chain::params() const noexcept { return impl_->params; }

void filter_chain::set_params(const filter_params& params) {
  validate(params);
  const gaussian_taps taps = make_taps(params.sigma);
  const gaussian_taps unsharp_taps = make_taps(params.unsharp_sigma);
  impl_->params = params;
  impl_->taps = taps;
  impl_->unsharp_taps = unsharp_taps;
}

void filter_chain::enqueue(const frame_slot& frame, execution_mode mode) {
  if (frame.width() != impl_->width || frame.height() != impl_->height)
    throw std::invalid_argument("filter_chain::enqueue: frame of " + std::to_string(frame.width()) + "x" +
                                std::to_string(frame.height()) + " on a chain for " + std::to_string(impl_->width) +
                                "x" + std::to_string(impl_->height));
  const chain_io io = impl_->io(frame);
  switch (mode) {
  case execution_mode::sync:
  case execution_mode::stream: {
    detail::eager_sink sink(impl_->streams, impl_->events, mode == execution_mode::sync);
    define_chain(sink, io);
    break;
  }
  case execution_mode::graph: impl_->run_graph(io); break;
  }
}

void filter_chain::synchronize() const {
  for (const auto& s : impl_->streams) s.synchronize();
}

std::vector<float> filter_chain::download(stage s) const {
  synchronize();
  const device_buffer<float>* src = nullptr;
  switch (s) {
  case stage::grey: src = &impl_->grey; break;
  case stage::blurred: src = &impl_->blurred; break;
  case stage::gradient_x: src = &impl_->gx; break;
  case stage::gradient_y: src = &impl_->gy; break;
  case stage::magnitude: src = &impl_->mag; break;
  case stage::colour_blurred: src = &impl_->rgb_blurred; break;
  }
  std::vector<float> out(src->size());
  CONVEYOR_CHECK(
      cudaMemcpyAsync(out.data(), src->data(), src->bytes(), cudaMemcpyDeviceToHost, impl_->streams[main_lane].get()));
  CONVEYOR_CHECK(cudaStreamSynchronize(impl_->streams[main_lane].get()));
  return out;
}

void filter_chain::define_kernels(conveyor::graph& g, const std::uint8_t* rgb8, std::uint8_t* edges8,
                                  std::uint8_t* sharp8) const {
  if (rgb8 == nullptr || edges8 == nullptr || sharp8 == nullptr)
    throw std::invalid_argument("filter_chain::define_kernels: the frame's device buffers must not be null");
  // The host buffers are not used: the copies are left out. The kernels only read rgb8.
  chain_io io = impl_->io_without_host();
  io.rgb8 = const_cast<std::uint8_t*>(rgb8); // NOLINT(cppcoreguidelines-pro-type-const-cast): read only
  io.edges8 = edges8;
  io.sharp8 = sharp8;
  detail::graph_record record;
  detail::graph_sink inner(g, record);
  detail::kernels_only_sink<detail::graph_sink> sink(inner);
  define_chain(sink, io);
}

const conveyor::graph* filter_chain::graph() const noexcept { return impl_->graph ? &*impl_->graph : nullptr; }
const conveyor::graph_exec* filter_chain::executable() const noexcept { return impl_->exec ? &*impl_->exec : nullptr; }
const graph_update_report& filter_chain::last_graph_update() const noexcept { return impl_->report; }
std::size_t filter_chain::instantiations() const noexcept { return impl_->instantiations; }

} // namespace conveyor::filter
