#pragma once
//! \file chain.hpp
//! The filter chain on the GPU in three execution modes, for frames of one size.
//!
//! Per frame: upload RGB8 -> to float and grey -> three branches: (1) blur rows, blur columns, Sobel x;
//! (2) Sobel y (forked after the blur); (3) colour blur rows, columns, unsharp mask, download of the sharpened
//! image; branches 1 and 2 join at the magnitude, then threshold and download of the edges.
//! - sync:   every operation is followed by cudaStreamSynchronize.
//! - stream: the branches run on three streams ordered by events; no host wait inside a frame.
//! - graph:  the same operations as one CUDA graph (explicit builder, one branch per stream of the eager modes),
//!           instantiated at the first graph-mode frame and replayed; for each later frame only the nodes whose
//!           arguments changed are updated (graph_exec::set_memcpy for the frame's host buffers,
//!           graph_exec::set_kernel_args after set_params), and the count is reported.

#include "common/execution_mode.hpp"
#include "filter/image.hpp"
#include "common/device_buffer.hpp"
#include "filter/params.hpp"

#include <conveyor/define/graph.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace conveyor {
class graph_exec;
} // namespace conveyor

namespace conveyor::filter {

//! The execution modes (scenarios/common): sync, stream, graph (one graph per frame size, replayed per frame).
using scenarios::all_execution_modes;
using scenarios::device_buffer;
using scenarios::execution_mode;
using scenarios::parse_execution_mode;
using scenarios::pinned_buffer;
using scenarios::to_string;

//! Page-locked host memory for one frame of width x height pixels: the input (RGB, 3 bytes per pixel) and the
//! outputs (edges, 1 byte per pixel; sharpened RGB, 3 bytes per pixel). Each frame of a batch has its own slot,
//! so that successive frames differ in their host pointers (the graph-mode update this scenario shows).
class frame_slot {
public:
  //! \throws std::invalid_argument for a non-positive size; conveyor::cuda_error when cudaMallocHost fails.
  frame_slot(int width, int height);
  //! Copies `rgb` into the input buffer. \throws std::invalid_argument when it is not RGB of the slot's size.
  void load(const image& rgb);
  [[nodiscard]] int width() const noexcept { return width_; }
  [[nodiscard]] int height() const noexcept { return height_; }
  [[nodiscard]] std::uint8_t* input() const noexcept { return input_.data(); }
  [[nodiscard]] std::uint8_t* edges() const noexcept { return edges_.data(); }
  [[nodiscard]] std::uint8_t* sharp() const noexcept { return sharp_.data(); }
  //! Copies of the outputs as images (call after the frame's work has completed).
  [[nodiscard]] image edges_image() const;
  [[nodiscard]] image sharp_image() const;
  //! FNV-1a 64-bit hash of both outputs: equal hashes across modes mean bitwise-equal results.
  [[nodiscard]] std::uint64_t output_hash() const noexcept;

private:
  int width_;
  int height_;
  pinned_buffer<std::uint8_t> input_;
  pinned_buffer<std::uint8_t> edges_;
  pinned_buffer<std::uint8_t> sharp_;
};

//! Float intermediates a test can read back with filter_chain::download.
enum class stage { grey, blurred, gradient_x, gradient_y, magnitude, colour_blurred };

//! What the last graph-mode frame did to the executable graph.
struct graph_update_report {
  bool instantiated = false;             //!< true: this frame built and instantiated the graph
  std::size_t nodes_updated = 0;         //!< nodes given new parameters before the launch
  std::vector<std::string_view> updated; //!< their labels, in chain order
};

//! Device buffers, three streams, events and (once graph mode is used) the graph and executable graph of the chain
//! for width x height frames. Not thread-safe. The destructor waits for outstanding work and never throws.
class filter_chain {
public:
  //! Allocates the device buffers and creates the streams.
  //! \throws std::invalid_argument for a bad size or parameters; conveyor::cuda_error when a CUDA call fails.
  filter_chain(int width, int height, const filter_params& params);
  filter_chain(const filter_chain&) = delete;
  filter_chain& operator=(const filter_chain&) = delete;
  ~filter_chain();

  [[nodiscard]] int width() const noexcept;
  [[nodiscard]] int height() const noexcept;
  [[nodiscard]] const filter_params& params() const noexcept;
  //! New parameters for the following frames (in graph mode they update the kernel nodes whose arguments change).
  //! \throws std::invalid_argument for out-of-range parameters.
  void set_params(const filter_params& params);

  //! Enqueues one frame: upload of `frame.input()`, the chain, download into `frame.edges()` and `frame.sharp()`.
  //! In sync mode it returns when the frame is done; in stream and graph modes it returns at once (call
  //! synchronize() before reading the outputs or reusing the slot). The slot must outlive the frame's work.
  //! \throws std::invalid_argument when the frame's size differs from the chain's; conveyor::cuda_error when a
  //!         CUDA call fails (in sync mode also errors raised by the kernels).
  void enqueue(const frame_slot& frame, execution_mode mode);
  //! Waits for all enqueued work. \throws conveyor::cuda_error with any error the work raised.
  void synchronize() const;
  //! Waits, then copies the intermediate `s` of the last frame to the host (width * height floats, 3 per pixel
  //! for colour_blurred). \throws conveyor::cuda_error when a CUDA call fails.
  [[nodiscard]] std::vector<float> download(stage s) const;

  //! Adds the chain's kernels for one frame to `g`, without the copies: they read the RGB8 frame (3 bytes per pixel)
  //! at device `rgb8` and write the edges (1 byte per pixel) to device `edges8` and the sharpened RGB8 to device
  //! `sharp8`, through this chain's intermediates and with its current parameters. The graph mode's kernel nodes,
  //! in the same order with the same arguments but those three pointers: the compute stage of the pipelined mode
  //! (conveyor::frame_pipeline). Two launches of such graphs must not overlap (they share the intermediates).
  //! \throws std::invalid_argument for a null pointer; conveyor::cuda_error when adding a node fails.
  void define_kernels(conveyor::graph& g, const std::uint8_t* rgb8, std::uint8_t* edges8, std::uint8_t* sharp8) const;

  //! The graph of graph mode, or nullptr before the first graph-mode frame.
  [[nodiscard]] const conveyor::graph* graph() const noexcept;
  //! The executable graph of graph mode (to profile or examine it), or nullptr before the first graph-mode frame.
  [[nodiscard]] const conveyor::graph_exec* executable() const noexcept;
  //! What the last graph-mode frame updated.
  [[nodiscard]] const graph_update_report& last_graph_update() const noexcept;
  //! How many times this chain instantiated its graph (0 or 1: one graph per frame size).
  [[nodiscard]] std::size_t instantiations() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace conveyor::filter
