#pragma once
//! \file save.hpp
//! Saving graphs to graph files (docs/graph-files.md): every node read through its kind, every
//! address a node holds recorded as a buffer and an offset (never a raw pointer), kernels by
//! mangled name with their image where Conveyor can obtain it. What cannot be saved with a stated
//! meaning is refused, naming the node, the reason and the fix.

#include "conveyor/define/graph.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/keep/graph_file.hpp"
#include "conveyor/keep/kernel_registry.hpp"
#include "conveyor/keep/module.hpp"

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor {

//! A buffer the program names at save (and passes by the same name at load). A plain value.
struct named_buffer {
  std::string name;              //!< unique; what load_options::buffers gives it by
  const void* pointer = nullptr; //!< its start (device, pinned, managed or pageable host memory)
  std::size_t bytes = 0;         //!< its size in bytes
};

//! What save records, and what it knows about the program's memory and kernels. A plain value.
struct save_options {
  //! Buffers the program names. An address inside one is recorded against it (before allocation
  //! nodes and the allocations CUDA knows). Pageable host memory is saved only inside a named
  //! buffer.
  std::vector<named_buffer> buffers;
  //! Save each buffer's contents (all but graph allocations), read when save runs (after a
  //! synchronisation of the device): load can then fill the buffers it allocates with them. Off:
  //! sizes only.
  bool contents = false;
  //! The program's kernels: their parameter types tell addresses from values (as the types of
  //! kernels added or launched through Conveyor's typed calls do, recorded by the library). May be
  //! null.
  const kernel_registry* registry = nullptr;
  //! More places to find kernel images (e.g. a profile::module_images recorder); modules loaded
  //! through conveyor::kernel_module are always looked in.
  std::vector<const image_source*> images;
  //! Embed the image of each kernel whose image Conveyor has (else kernels resolve through the
  //! loader's registry).
  bool embed_images = true;
  //! Refuse words found by scanning (parameters of unknown type, or of a class type, whose bits
  //! fall inside a buffer): only typed relocations are then saved. Off: such words are relocated
  //! and marked scanned in the file.
  bool strict = false;
};

//! A graph to save and its name in the file: a graph definition, or what an executable graph runs
//! (the graph it was instantiated from, or the one last applied to it as a whole). A plain value
//! (the objects must outlive the call).
struct graph_to_save {
  std::string name;                       //!< unique in the file
  const graph* definition = nullptr;      //!< the graph, or null
  const graph_exec* executable = nullptr; //!< else the executable graph
};

//! Save refused a graph: what() names the graph, the node (position, kind, label), the reason and
//! the fix.
class save_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! Reads `graphs` into one file's values (shared tables of kernels, images and buffers).
//! Synchronises the device when contents are saved.
//! \throws save_error naming the node that cannot be saved, or an executable graph whose
//!         nodes were changed by per-node setters since its graph was applied (the file would
//!         compute something else); std::invalid_argument for a duplicate or empty name, an entry
//!         with neither or both objects, an empty (moved-from) graph (the message names it), or
//!         overlapping named buffers; cuda_error when a graph cannot be read.
[[nodiscard]] graph_file to_graph_file(const std::vector<graph_to_save>& graphs,
                                       const save_options& options = {});

//! Saves `graphs` to `path` (to_graph_file, then write_graph_file). \throws as both.
void save(const std::filesystem::path& path, const std::vector<graph_to_save>& graphs,
          const save_options& options = {});

//! Saves one graph, named `name`, to `path`.
//! \throws as save; std::invalid_argument for an empty (moved-from) graph.
void save(const std::filesystem::path& path, const graph& g, const save_options& options = {},
          const std::string& name = "graph");

} // namespace conveyor
