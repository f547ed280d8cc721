#pragma once
//! \file load.hpp
//! Loading graph files (docs/graph-files.md): kernels resolved through the program's registry or
//! from the images embedded in the file, buffers passed by name or allocated at their saved sizes
//! (optionally filled with the saved contents), every saved address relocated into them,
//! conditions, events and host functions made or bound. A refusal names the kernel, buffer or node
//! and the fix; a refused load leaves nothing behind (no graph, no buffer, no module, no event).

#include "conveyor/define/graph.hpp"
#include "conveyor/keep/graph_file.hpp"
#include "conveyor/keep/kernel_registry.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

//! A buffer the program passes at load for the file's buffer `name` (at least its saved size). A
//! plain value.
struct buffer_binding {
  std::string name;        //!< the file's name for it (save_options::buffers' name, or "buffer<k>")
  void* pointer = nullptr; //!< where the loaded graph's addresses into it point
  std::size_t bytes = 0;   //!< its size in bytes (refused when below the saved size)
};

//! An event the program passes at load for the file's event `name`. A plain value.
struct event_binding {
  std::string name;            //!< the file's name for it (the saved node's label, or "event<k>")
  cudaEvent_t event = nullptr; //!< the event the loaded nodes record or wait for
};

//! How a file is loaded. A plain value.
struct load_options {
  //! The program's kernels and host functions (kernels are looked up here first, then among the
  //! file's images).
  const kernel_registry* registry = nullptr;
  //! Buffers passed by name; the file's other buffers are allocated (cudaMalloc, cudaMallocHost,
  //! cudaMallocManaged, or host memory, as saved) and owned by the loaded graphs.
  std::vector<buffer_binding> buffers;
  //! Events passed by name; the file's other events are made (cudaEventDisableTiming) and owned by
  //! the graphs.
  std::vector<event_binding> events;
  //! Fill the buffers load allocates with their saved contents, where the file has them.
  bool fill_contents = true;
  //! The graphs to load, by name (empty: every graph of the file).
  std::vector<std::string> graphs;
};

//! One buffer of a loaded file. A plain value.
struct loaded_buffer {
  std::string name; //!< the file's name for it
  //! its address in this process (graph allocations: the address
  void* pointer = nullptr;
  // !< the loaded allocation node reserves, valid
  // while the graph runs)
  std::size_t bytes = 0;                        //!< its saved size
  buffer_memory memory = buffer_memory::device; //!< what memory it is
  bool allocated = false;                       //!< load allocated it (else the program passed it)
  bool filled = false;                          //!< load filled it with the saved contents
};

//! The graphs of a loaded file and what they use. Each graph keeps what its nodes point into
//! (buffers load allocated, modules, events, host callables) alive as long as it, its clones and
//! executable graphs made from it live, as graph::keep_alive does. Move-only. Thread safety: a
//! plain value.
class loaded_graphs {
public:
  //! No graph.
  loaded_graphs() = default;
  //! Takes over `other`'s graphs and buffers.
  loaded_graphs(loaded_graphs&&) noexcept = default;
  //! Lets go of these graphs (what they use lives on with any executable graph made from them) and
  //! takes over `other`'s.
  loaded_graphs& operator=(loaded_graphs&&) noexcept = default;

  //! The graph `name`. \throws std::out_of_range naming it and the graphs loaded.
  [[nodiscard]] graph& at(std::string_view name);
  //! The names of the graphs loaded, in the file's order.
  [[nodiscard]] std::vector<std::string> names() const;
  //! The buffers, in the file's order.
  [[nodiscard]] const std::vector<loaded_buffer>& buffers() const noexcept { return buffers_; }
  //! The buffer `name`. \throws std::out_of_range naming it.
  [[nodiscard]] const loaded_buffer& buffer(std::string_view name) const;
  //! The file's values.
  [[nodiscard]] const graph_file& file() const noexcept { return *file_; }
  //! Seconds spent: resolving kernels (and loading images), allocating and filling buffers,
  //! building graphs.
  struct timing {
    double kernels = 0.0; //!< seconds resolving kernels and loading images
    double buffers = 0.0; //!< seconds allocating and filling buffers
    //! seconds adding nodes and dependencies (kernel resolution, met on the way, counted in
    //! `kernels`)
    double graphs = 0.0;
  };
  //! What load spent, by phase.
  [[nodiscard]] const timing& spent() const noexcept { return spent_; }

private:
  friend struct loaded_graphs_access;
  std::vector<std::pair<std::string, graph>> graphs_;
  std::vector<loaded_buffer> buffers_;
  std::shared_ptr<const graph_file> file_;
  std::shared_ptr<void> resources_;
  timing spent_;
};

//! Load refused a file: what() names the kernel, buffer, event, host function or node, and the fix.
class load_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! Builds the graphs of `file` in this process (graph_file_check first).
//! \throws load_error for a kernel that resolves nowhere or whose parameters differ from
//!         the saved ones, a buffer passed smaller than saved, a host function the registry lacks,
//!         a device the file names that is not visible, an unknown graph name; graph_file_error for
//!         a file that breaks the format's rules; cuda_error when CUDA refuses a node, an
//!         allocation or an image. Nothing is left behind.
[[nodiscard]] loaded_graphs load(graph_file file, const load_options& options = {});

//! Reads and loads the file at `path` (read_graph_file, then load). \throws as both.
[[nodiscard]] loaded_graphs load(const std::filesystem::path& path,
                                 const load_options& options = {});

} // namespace conveyor
