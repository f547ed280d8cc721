#pragma once
//! \file step.hpp
//! The graph debugger: step-through replay (every node of a graph run as its own launch, followed
//! by a synchronisation, in a valid topological order), the first non-finite value in named
//! buffers, and a determinism check. A fault inside a replay surfaces at `cudaGraphLaunch` or a
//! later synchronisation, far from the node that caused it, and `CUDA_LAUNCH_BLOCKING` does not
//! help inside a graph; a step-through run names the node. Off by default and outside the replay
//! path: graph_exec::launch pays one predicted branch (see graph_exec::step_through_launches).

#include "conveyor/define/description.hpp"
#include "conveyor/define/graph.hpp"
#include "conveyor/define/node_kind.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor {

//! The element type of a watched buffer.
enum class element_type : std::uint8_t {
  f32,  //!< float
  f64,  //!< double
  f16,  //!< __half (IEEE binary16)
  bf16, //!< __nv_bfloat16 (bfloat16)
};

//! "float", "double", "half" or "bfloat16". Never throws.
[[nodiscard]] const char* to_string(element_type t) noexcept;

//! A device (or managed, or pinned) buffer a step-through run watches: `count` elements of `type`
//! at `data`. A plain value; the buffer must stay allocated during the run.
struct watched_buffer {
  std::string name;                      //!< for reports, e.g. "loss"
  const void* data = nullptr;            //!< device address of element 0
  element_type type = element_type::f32; //!< what the elements are
  std::size_t count = 0;                 //!< elements (not bytes)
};

//! One node of a step-through run: where it is, what it is, and what it runs with. A plain value.
struct step_node {
  //! position in the step order of the run (0-based): body iterations count again
  std::size_t order = 0;
  //! "node 3 'scale x' (kernel)", inside bodies "node 5 (conditional) > iteration 2 >
  std::string path;
  // !< node 1 (kernel)", inside child graphs "node 2 (child_graph) > node 0
  // (memset)"
  //! Where it is: its index in the top-level graph (creation order), or for a node inside a child
  //! graph or a conditional body, (node index, body index) pairs down to its graph and then its
  //! index there: the path through graph_description's nodes and bodies (mark_fault).
  std::vector<std::size_t> position;
  node_kind kind = node_kind::other;      //!< what the node is
  std::string label;                      //!< the node's label, or empty
  std::string kernel_name;                //!< kernels: the demangled name
  std::array<unsigned, 3> grid{0, 0, 0};  //!< kernels: blocks per grid (x, y, z)
  std::array<unsigned, 3> block{0, 0, 0}; //!< kernels: threads per block (x, y, z)
  std::size_t shared_bytes = 0;           //!< kernels: dynamic shared memory, bytes
  //! kernels: each parameter's bytes, "0: 0x7f3a00000000 (8 B), 1: 0x40000000 (4 B)"
  std::string arguments;
  //! the nodes it depends on in its own graph, as "node 1 'label' (kind)"
  std::vector<std::string> dependencies;
  int device = -1; //!< the device it runs on (-1: not a device node)
  //! One line: "step 12: node 3 'scale x' (kernel scale_kernel, grid 16x1x1 block 256x1x1,
  //! arguments ...), after node 1 'load' (memcpy)".
  [[nodiscard]] std::string text() const;
};

//! What a step-through run reports to on_step after each node ran and its synchronisation returned.
using step_callback = std::function<void(const step_node&)>;

//! Options of a step-through run. A plain value.
struct step_options {
  //! Buffers checked after every node: the first node after which one holds a NaN or an infinity
  //! throws nonfinite_error. Read back to the host after each node (debugging speed, not replay
  //! speed).
  std::vector<watched_buffer> nonfinite;
  //! Called after every node (with the watched buffers checked); may throw to stop the run.
  step_callback on_step;
};

//! What a step-through run did.
struct step_report {
  std::size_t steps = 0;      //!< nodes run (each its own launch), body iterations counted again
  std::size_t iterations = 0; //!< conditional bodies run (each WHILE iteration counts once)
};

//! Thrown by a step-through run at the first node whose own launch (its instantiation, launch or
//! the synchronisation after it) failed. what() names the node (step_node::text()), the CUDA error,
//! and for a sticky error (an illegal address, a failed launch, a device-side assert: the CUDA
//! context is lost) says so and how to continue: the process can make no more CUDA calls; run again
//! in a fresh process, step by step from the start, and under `compute-sanitizer --tool memcheck`,
//! which names the faulting access and the thread.
class step_failure : public std::runtime_error {
public:
  //! \param node the node that failed; \param code CUDA's error; \param call the CUDA call
  //!        that returned it.
  step_failure(step_node node, cudaError_t code, std::string call);
  //! The node that failed.
  [[nodiscard]] const step_node& node() const noexcept { return node_; }
  //! CUDA's error.
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }
  //! True when the error is sticky: the CUDA context is lost for the rest of the process.
  [[nodiscard]] bool sticky() const noexcept { return sticky_; }

private:
  step_node node_;
  cudaError_t code_;
  bool sticky_;
};

//! Thrown by a step-through run at the first node after which a watched buffer holds a NaN or an
//! infinity: the graph counterpart of PyTorch's anomaly detection. what() names the node, the
//! buffer, the index of the first non-finite element, its value and the value it held before that
//! node.
class nonfinite_error : public std::runtime_error {
public:
  //! \param node the node after which the value became non-finite; \param buffer the
  //!        buffer's name; \param index the first non-finite element; \param before its value
  //!        before the node; \param after its value after it.
  nonfinite_error(step_node node, std::string buffer, std::size_t index, double before,
                  double after);
  //! The node that produced the value.
  [[nodiscard]] const step_node& node() const noexcept { return node_; }
  //! The watched buffer's name.
  [[nodiscard]] const std::string& buffer() const noexcept { return buffer_; }
  //! The first non-finite element's index.
  [[nodiscard]] std::size_t index() const noexcept { return index_; }
  //! Its value before the node (finite).
  [[nodiscard]] double before() const noexcept { return before_; }
  //! Its value after the node (NaN or an infinity).
  [[nodiscard]] double after() const noexcept { return after_; }

private:
  step_node node_;
  std::string buffer_;
  std::size_t index_;
  double before_;
  double after_;
};

//! Runs `g` node by node on `s`: each node, in a topological order (creation order among ready
//! nodes), as a graph of its own that is instantiated, launched and synchronised; child graphs and
//! conditional bodies are stepped into (an IF or SWITCH body when its condition selects it, a WHILE
//! body once per iteration while its condition holds), nodes of other devices run on their devices.
//! Conditions are followed as the graph would: a condition's default value at the start
//! (reset_each_launch) and every value a kernel sets with conveyor::set_condition, read back after
//! that kernel's step. On success the buffers the graph writes hold what one replay of it gives
//! (bitwise, for deterministic work). Synchronises `s` first. Thread safety: as a launch of `g`
//! (one thread per graph).
//! \throws step_failure at the first node that fails; nonfinite_error at the first node
//!         after which a watched buffer is not finite; std::invalid_argument for a graph
//!         step-through cannot run (an empty (moved-from) graph; allocation nodes, whose addresses
//!         belong to the executable graph; conditional nodes Conveyor did not build); cuda_error
//!         when a CUDA call of the run itself fails; what on_step throws.
step_report step_through(const graph& g, const stream& s, const step_options& options = {});

//! Runs the graph `e` runs (the graph it was instantiated from or last updated to) node by node, as
//! step_through(const graph&, ...).
//! \throws as step_through(const graph&, ...); std::logic_error when per-node setters
//!         changed `e` since its last update (it then runs parameters its graph does not hold:
//!         update it, or step through the graph you set).
step_report step_through(const graph_exec& e, const stream& s, const step_options& options = {});

//! Runs `g` node by node like step_through and returns each node's description, in step order,
//! without running it (the order a run would take, for a reader or a test). Conditions are not
//! evaluated: every body is listed once.
//! \throws std::invalid_argument as step_through; cuda_error when the graph cannot be read.
[[nodiscard]] std::vector<step_node> step_order(const graph& g);

//! Marks the node at `node.position` in `d` (a description of the graph that was stepped through,
//! e.g. describe(graph)) with `text` (node_description::fault), so that DOT and JSON exports show
//! where a run failed. Returns false when `d` has no node at that position.
bool mark_fault(graph_description& d, const step_node& node, std::string text);

//! A named buffer that differed between two runs of the same graph from the same inputs.
struct nondeterministic_buffer {
  std::string name;            //!< the buffer
  std::size_t first_index = 0; //!< the first element that differs
  std::size_t differing = 0;   //!< elements that differ
};

//! The result of check_determinism.
struct determinism_report {
  //! empty: every watched buffer is bitwise equal in both runs
  std::vector<nondeterministic_buffer> differing;
  //! With `step` set: the first node after which a watched buffer differed between the two
  //! step-through runs.
  std::optional<step_node> first_node;
  //! True when every watched buffer was bitwise equal.
  [[nodiscard]] bool deterministic() const noexcept { return differing.empty(); }
};

//! Runs `e` twice from the same contents of `buffers` (copied before the first run and restored
//! before the second) and compares the buffers bitwise after each. With `step`, both runs step
//! through the graph and the report also names the first node after which a buffer differed. The
//! buffers hold the second run's results afterwards.
//! \throws cuda_error when a CUDA call fails; step_failure as step_through;
//!         std::invalid_argument for an empty buffer list or a buffer without data.
[[nodiscard]] determinism_report check_determinism(graph_exec& e, const stream& s,
                                                   const std::vector<watched_buffer>& buffers,
                                                   bool step = false);

} // namespace conveyor
