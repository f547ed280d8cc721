#pragma once
//! \file graph_file.hpp
//! Graph files (format version 1, docs/graph-files.md): graphs that outlive their process, as plain
//! values, and their encoding. A file holds one or several named graphs that share one table of
//! kernels (by mangled name, with the image each came from where Conveyor could obtain it), one
//! table of buffers (every address a node holds is a buffer and a byte offset, never a raw
//! pointer), events, host functions and kernel images. What a file means is in docs/graph-files.md;
//! save and load (conveyor/keep/save.hpp, load.hpp) turn CUDA graphs into these values and back.
//! Everything here is plain C++: it needs no GPU, so tools (`conveyor graph show`, `diff`) and
//! tests read files anywhere.
//!
//! Encoding: a 32-byte header (magic, version, flags, sizes), then one Zstandard frame (with its
//! content checksum) holding one CBOR document (RFC 8949). Thread safety: plain values and pure
//! functions.

#include "conveyor/define/edge_type.hpp"
#include "conveyor/define/kernel_args.hpp"
#include "conveyor/define/node_kind.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace conveyor {

//! The format version this library writes, and the newest it reads (a newer file is refused, naming
//! both).
inline constexpr std::uint32_t graph_file_version = 1;

//! An address a node holds, rebuilt at load: the null pointer, or `offset` bytes into buffer
//! `buffer` of graph_file::buffers. A plain value.
struct saved_address {
  static constexpr std::uint32_t null_buffer = 0xFFFFFFFFU; //!< `buffer` of the null pointer
  std::uint32_t buffer = null_buffer;                       //!< index into graph_file::buffers
  std::uint64_t offset = 0;                                 //!< bytes from the buffer's start
  //! True for the null pointer. Never throws.
  [[nodiscard]] bool is_null() const noexcept { return buffer == null_buffer; }
  //! Member-wise equality.
  friend bool operator==(const saved_address&, const saved_address&) = default;
};

//! What memory a buffer is, and so what load allocates when the program passes none.
enum class buffer_memory : std::uint8_t {
  device,      //!< device memory (cudaMalloc) on buffer::device
  pinned_host, //!< page-locked host memory (cudaMallocHost)
  managed,     //!< managed memory (cudaMallocManaged)
  //! pageable host memory, saved only where the program named the buffer (load: new[])
  //! the address a memory allocation node of the graph returns (made by that node at load)
  host,
  graph_allocation,
};

//! "device", "pinned_host", "managed", "host" or "graph_allocation". Never throws.
[[nodiscard]] std::string_view to_string(buffer_memory m) noexcept;

//! One buffer of a file: memory that nodes' addresses point into. A plain value.
struct saved_buffer {
  std::string name; //!< the program's name for it (save_options::buffers), else "buffer<k>"; unique
  buffer_memory memory = buffer_memory::device; //!< its kind
  std::uint64_t bytes = 0; //!< its size at save, bytes; load refuses a smaller buffer passed for it
  //! device memory and graph allocations: the device ordinal at save; else -1
  int device = -1;
  //! the program named it at save (rather than Conveyor finding the allocation)
  bool named = false;
  //! Its contents at save (save_options::contents), exactly `bytes` bytes; load may fill a buffer
  //! it allocates with them. Empty optional: not saved.
  std::optional<std::vector<unsigned char>> contents;
  //! Member-wise equality.
  friend bool operator==(const saved_buffer&, const saved_buffer&) = default;
};

//! The form of a kernel image.
enum class image_format : std::uint8_t {
  cubin,  //!< an ELF cubin for one architecture (what CUPTI's module-load callback hands over)
  fatbin, //!< a fat binary (cubins and PTX for several architectures)
  ptx,    //!< PTX text, compiled by the driver at load
};

//! "cubin", "fatbin" or "ptx". Never throws.
[[nodiscard]] std::string_view to_string(image_format f) noexcept;

//! One kernel image embedded in a file (a module the kernels of the file come from). A plain value.
struct saved_image {
  image_format format = image_format::cubin; //!< what `bytes` holds
  //! where Conveyor obtained it: "module 'x.cubin'", "cupti module 7"
  std::string source;
  std::vector<unsigned char> bytes; //!< the image as cuLibraryLoadData takes it
  //! Member-wise equality.
  friend bool operator==(const saved_image&, const saved_image&) = default;
};

//! One kernel of a file. A plain value.
struct saved_kernel {
  //! the mangled name (cuFuncGetName / cuKernelGetName): what load looks up
  std::string name;
  std::optional<std::uint32_t> image; //!< index into graph_file::images, when its image is embedded
  //! Each parameter's (offset, size) in bytes (cuFuncGetParamInfo), in order.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> parameters;
  //! Each parameter's class at save, parallel to `parameters`.
  std::vector<parameter_class> classes;
  //! Member-wise equality.
  friend bool operator==(const saved_kernel&, const saved_kernel&) = default;
};

//! What a relocated kernel-argument word points to.
enum class relocation_target : std::uint8_t {
  buffer,    //!< an address inside buffer `index`, `at` bytes from its start
  condition, //!< the conditional handle `index` of the top-level graph's condition table
};

//! One 8-byte word of a kernel node's arguments that load rewrites. A plain value.
struct saved_relocation {
  std::uint32_t offset = 0;                             //!< the word's offset in the argument bytes
  relocation_target target = relocation_target::buffer; //!< what it points to
  std::uint32_t index = 0;                              //!< buffer or condition index
  std::uint64_t at = 0;                                 //!< buffers: bytes from the buffer's start
  //! the parameter's type said it is an address (else a scanned word: a heuristic)
  bool typed = true;
  //! Member-wise equality.
  friend bool operator==(const saved_relocation&, const saved_relocation&) = default;
};

//! One launch attribute of a kernel node (cudaLaunchAttributeID `id`), as the numbers CUDA's value
//! holds, in the order docs/graph-files.md gives per attribute (cluster: x, y, z; priority: p;
//! ...). A plain value.
struct saved_attribute {
  std::uint32_t id = 0;             //!< CUDA's cudaLaunchAttributeID
  std::vector<std::int64_t> values; //!< its integer fields
  //! the access policy window's base address; null for other attributes
  saved_address address;
  //! the access policy window's hit ratio; 0 for other attributes
  double ratio = 0.0;
  //! Member-wise equality.
  friend bool operator==(const saved_attribute&, const saved_attribute&) = default;
};

//! A kernel node. A plain value.
struct saved_kernel_node {
  std::uint32_t kernel = 0;             //!< index into graph_file::kernels
  std::array<std::uint32_t, 3> grid{};  //!< blocks per grid
  std::array<std::uint32_t, 3> block{}; //!< threads per block
  std::uint32_t shared_bytes = 0;       //!< dynamic shared memory, bytes
  int device = 0;                       //!< the device of its context at save
  //! The argument bytes at the parameters' offsets; relocated words are zero here (load writes
  //! them).
  std::vector<unsigned char> arguments;
  std::vector<saved_relocation> relocations; //!< by offset
  //! those that differ from a node made without attributes, by id
  std::vector<saved_attribute> attributes;
  //! Member-wise equality.
  friend bool operator==(const saved_kernel_node&, const saved_kernel_node&) = default;
};

//! One side of a copy (cudaPitchedPtr and its position). A plain value.
struct saved_pitched {
  saved_address address;                   //!< the buffer and offset of the pointer
  std::uint64_t pitch = 0;                 //!< bytes per row
  std::uint64_t xsize = 0;                 //!< logical width, bytes
  std::uint64_t ysize = 0;                 //!< logical height, rows
  std::array<std::uint64_t, 3> position{}; //!< cudaPos (x in bytes)
  //! Member-wise equality.
  friend bool operator==(const saved_pitched&, const saved_pitched&) = default;
};

//! A copy node (cudaMemcpy3DParms between addresses; copies of CUDA arrays are refused at save). A
//! plain value.
struct saved_memcpy_node {
  saved_pitched source;                  //!< where it reads
  saved_pitched destination;             //!< where it writes
  std::array<std::uint64_t, 3> extent{}; //!< width (bytes), height, depth
  int kind = 4;                          //!< cudaMemcpyKind (4: cudaMemcpyDefault)
  //! Member-wise equality.
  friend bool operator==(const saved_memcpy_node&, const saved_memcpy_node&) = default;
};

//! A memset node (cudaMemsetParams). A plain value.
struct saved_memset_node {
  saved_address destination;      //!< where it writes
  std::uint64_t pitch = 0;        //!< bytes between rows (height > 1)
  std::uint32_t value = 0;        //!< the element value (its low element_size bytes)
  std::uint32_t element_size = 1; //!< 1, 2 or 4 bytes
  std::uint64_t width = 0;        //!< elements per row
  std::uint64_t height = 1;       //!< rows
  //! Member-wise equality.
  friend bool operator==(const saved_memset_node&, const saved_memset_node&) = default;
};

//! A node that refers to an entry of one of the file's name tables: a host node's function
//! (graph_file::host_functions) or an event node's event (graph_file::events). A plain value.
struct saved_reference {
  std::uint32_t index = 0; //!< into the table
  //! Member-wise equality.
  friend bool operator==(const saved_reference&, const saved_reference&) = default;
};

//! A memory allocation node (cudaMemAllocNodeParams). A plain value.
struct saved_mem_alloc_node {
  std::uint32_t buffer = 0; //!< its buffer (buffer_memory::graph_allocation) in graph_file::buffers
  int device = 0;           //!< poolProps.location: the device whose memory holds it
  //! accessDescs: the other devices that reach it, and whether read-only.
  std::vector<std::pair<int, bool>> access;
  std::uint16_t usage = 0; //!< poolProps.usage
  //! Member-wise equality.
  friend bool operator==(const saved_mem_alloc_node&, const saved_mem_alloc_node&) = default;
};

//! A memory free node: the address it frees. A plain value.
struct saved_mem_free_node {
  saved_address address; //!< a graph allocation's buffer
  //! Member-wise equality.
  friend bool operator==(const saved_mem_free_node&, const saved_mem_free_node&) = default;
};

//! A conditional node (cudaConditionalNodeParams); its bodies are saved_node::bodies. A plain
//! value.
struct saved_conditional_node {
  int type = 0;                //!< cudaGraphConditionalNodeType: 0 IF, 1 WHILE, 2 SWITCH
  std::uint32_t size = 1;      //!< number of bodies
  std::uint32_t condition = 0; //!< index into the top-level saved_graph::conditions
  //! Member-wise equality.
  friend bool operator==(const saved_conditional_node&, const saved_conditional_node&) = default;
};

//! A dependency of a node on an earlier or later node of the same graph, with CUDA's edge data. A
//! plain value.
struct saved_dependency {
  std::uint32_t from = 0;     //!< the node it waits for (position in creation order)
  std::uint8_t from_port = 0; //!< cudaGraphEdgeData::from_port
  std::uint8_t to_port = 0;   //!< cudaGraphEdgeData::to_port
  std::uint8_t type = 0;      //!< cudaGraphEdgeData::type
  //! Member-wise equality.
  friend bool operator==(const saved_dependency&, const saved_dependency&) = default;
};

struct saved_graph;

//! The parameters of a node, by kind (std::monostate: a kind with none, an empty node).
using saved_parameters = std::variant<std::monostate, saved_kernel_node, saved_memcpy_node,
                                      saved_memset_node, saved_reference, saved_mem_alloc_node,
                                      saved_mem_free_node, saved_conditional_node>;

//! One node of a saved graph. A plain value.
struct saved_node {
  node_kind kind = node_kind::empty; //!< CUDA's node type
  std::string label;                 //!< the program's label, or empty
  //! in the order CUDA lists them (the order they were added)
  std::vector<saved_dependency> dependencies;
  //! by kind (saved_reference for host and event nodes)
  saved_parameters parameters;
  //! a child graph's graph; a conditional node's bodies
  std::vector<saved_graph> bodies;
  //! Member-wise equality.
  friend bool operator==(const saved_node&, const saved_node&) = default;
};

//! A condition handle (cudaGraphConditionalHandleCreate): made at load on the graph holding the
//! conditional node that uses it. A plain value.
struct saved_condition {
  std::uint32_t default_value = 0; //!< the value each launch starts with when `reset`
  bool reset = true;               //!< cudaGraphCondAssignDefault
  //! Member-wise equality.
  friend bool operator==(const saved_condition&, const saved_condition&) = default;
};

//! One graph: nodes in creation order (the order cudaGraphExecUpdate and Conveyor pair nodes by). A
//! plain value.
struct saved_graph {
  std::vector<saved_node> nodes; //!< creation order
  //! top-level graphs only: every condition of the graph and its bodies
  std::vector<saved_condition> conditions;
  bool captured = false; //!< made by stream capture
  //! Member-wise equality.
  friend bool operator==(const saved_graph&, const saved_graph&) = default;
};

//! One entry of a graphed callable's key (call_key), saved with its bucket. A plain value.
struct saved_key_entry {
  std::uint64_t bits = 0;    //!< argument_key::bits (pointers: zero, see `address`)
  std::uint32_t size = 0;    //!< argument_key::size
  std::uint8_t role = 0;     //!< argument_role
  std::uint8_t kind = 0;     //!< argument_kind
  std::uint8_t position = 0; //!< argument position
  //! A pointer entry: where it points (load relocates it as the graph's own addresses); null when
  //! the pointer is null or points into no buffer of the file (then kept as `bits`).
  saved_address address;
  //! Member-wise equality.
  friend bool operator==(const saved_key_entry&, const saved_key_entry&) = default;
};

//! A graphed callable's key for one saved bucket: what a call must match to replay it. A plain
//! value.
struct saved_key {
  //! The entries' binding is what the graph runs. False when the executable graph saved had nodes
  //! changed by per-node setters or patches since its graph was applied: a call then re-captures
  //! and updates it (never replays).
  bool exact = true;
  //! The graphed callable's type and argument types (their mangled names): load refuses the buckets
  //! for another.
  std::string callable;
  std::vector<saved_key_entry> entries;  //!< call_key's entries
  std::vector<unsigned char> bytes;      //!< call_key's bytes (argument_kind::bytes values)
  std::optional<std::uint64_t> user_key; //!< the key function's value
  //! Member-wise equality.
  friend bool operator==(const saved_key&, const saved_key&) = default;
};

//! A named graph of a file. A plain value.
struct named_graph {
  std::string name;             //!< unique in the file
  saved_graph graph;            //!< the graph
  std::optional<saved_key> key; //!< a graphed bucket's key (save of a graphed callable)
  //! Member-wise equality.
  friend bool operator==(const named_graph&, const named_graph&) = default;
};

//! Who wrote a file (informational: load checks none of it but the format version). A plain value.
struct file_producer {
  std::string conveyor;       //!< the library's version
  int cuda_runtime = 0;       //!< CUDART_VERSION it was built with
  int driver = 0;             //!< cudaDriverGetVersion at save
  std::string device;         //!< the GPU's name at save
  int compute_capability = 0; //!< major * 10 + minor
  //! Member-wise equality.
  friend bool operator==(const file_producer&, const file_producer&) = default;
};

//! A whole graph file. A plain value.
struct graph_file {
  std::uint32_t version = graph_file_version; //!< the format version
  file_producer producer;                     //!< who wrote it
  std::vector<saved_image> images;            //!< kernel images, shared by every graph
  std::vector<saved_kernel> kernels;          //!< kernels, shared by every graph
  std::vector<saved_buffer> buffers;          //!< buffers, shared by every graph
  std::vector<std::string> events;            //!< event names (event record and wait nodes)
  //! host-node function names (the load's registry provides them)
  std::vector<std::string> host_functions;
  std::vector<named_graph> graphs; //!< the graphs, in the order saved

  //! The graph named `name`, or null. Never throws.
  [[nodiscard]] const named_graph* find(std::string_view name) const noexcept;
  //! Member-wise equality.
  friend bool operator==(const graph_file&, const graph_file&) = default;
};

//! Bounds a reader holds a file to before it allocates (every size is checked against them).
struct graph_file_limits {
  //! the decompressed CBOR document, bytes
  std::uint64_t max_document_bytes = std::uint64_t{1} << 32;
  //! nesting of child graphs and conditional bodies
  std::size_t max_depth = 24;
  std::size_t max_nodes = std::size_t{1} << 24; //!< nodes in the whole file
};

//! A file that cannot be read: a bad header, a corrupt frame, a document that does not follow the
//! schema, or a graph that breaks a rule (a dependency on a missing node, a cycle, an index out of
//! range). what() names the byte offset (of the file, or of the decompressed document) or the graph
//! and node, and what was expected.
class graph_file_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! The file's bytes: header, then the CBOR document compressed into one Zstandard frame (level 3,
//! with a checksum).
//! \throws graph_file_error when `file` breaks a rule of the format (graph_file_check);
//!         std::bad_alloc.
[[nodiscard]] std::vector<unsigned char> to_bytes(const graph_file& file);

//! Reads a file from its bytes. Checks the header (magic, version: a newer one is refused naming
//! both, flags, sizes) before allocating, the frame's checksum, the document's shape and every rule
//! a loader relies on.
//! \throws graph_file_error naming the offset or the node, and what was expected.
[[nodiscard]] graph_file from_bytes(std::span<const unsigned char> bytes,
                                    const graph_file_limits& limits = {});

//! Writes `file` to `path` atomically (a temporary file in the same folder, renamed into place).
//! \throws graph_file_error as to_bytes; std::runtime_error naming the path when it cannot
//!         be written.
void write_graph_file(const std::filesystem::path& path, const graph_file& file);

//! Reads the file at `path` (from_bytes). \throws graph_file_error; std::runtime_error naming the
//! path when it cannot be opened or read.
[[nodiscard]] graph_file read_graph_file(const std::filesystem::path& path,
                                         const graph_file_limits& limits = {});

//! Checks `file` against the rules a loader relies on (indices in range, dependencies on nodes of
//! the same graph, no cycle, relocations inside the arguments and buffers, kinds a conditional body
//! may hold, sizes consistent).
//! \throws graph_file_error naming the graph and node, and what was expected.
void graph_file_check(const graph_file& file, const graph_file_limits& limits = {});

} // namespace conveyor
