#pragma once
// Internal (debug layer): the step-through runner behind conveyor::step_through, and the watch of named buffers
// after each step.

#include "conveyor/debug/step.hpp"

#include "kinds/kind.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <cstddef>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace conveyor::detail {

//! The bytes of one element of type `t`.
[[nodiscard]] std::size_t element_bytes(element_type t) noexcept;

//! The elements of a watched buffer as doubles (half and bfloat16 widened exactly). \throws cuda_error.
[[nodiscard]] std::vector<double> read_values(const watched_buffer& b);

//! The watched buffers' last values on the host, and the check after each step: the first element that is not
//! finite now and was finite before.
class buffer_watch {
public:
  //! Reads every buffer once (the values before the first step). \throws std::invalid_argument for a buffer
  //! without data or elements; cuda_error when a buffer cannot be read.
  explicit buffer_watch(const std::vector<watched_buffer>& buffers);
  //! Reads every buffer again after `node` ran. \throws nonfinite_error at a value that became non-finite.
  void check(const step_node& node);
  //! True when nothing is watched.
  [[nodiscard]] bool empty() const noexcept { return buffers_.empty(); }

private:
  std::vector<watched_buffer> buffers_;
  std::vector<std::vector<double>> values_;
};

//! One graph of a step-through run (the top-level graph, a child graph, a conditional body): its nodes read once,
//! described, ordered.
struct graph_walk {
  cudaGraph_t handle = nullptr;
  const graph_state* owner = nullptr; //!< Conveyor's state of it (labels, conditionals), or null
  std::string prefix;                 //!< the path of the node holding it, with " > ", or empty at the top
  std::vector<std::size_t> position;  //!< (node index, body index) pairs down to it: step_node::position
  graph_snapshot snapshot;            //!< nodes, kinds, edges, kernel parameters
  graph_description description;      //!< labels, kernel names, shapes, devices
  std::vector<std::vector<std::size_t>> predecessors;
  std::vector<std::size_t> order; //!< a topological order: creation order among the nodes ready
};

//! Reads `g` into a walk; `described`, when given, is `g`'s description already made (a child graph's, with the
//! labels its parent's description gave it), else `g` is described here. \throws cuda_error when the graph cannot
//! be read.
[[nodiscard]] graph_walk walk_of(cudaGraph_t g, const graph_state* owner, std::string prefix,
                                 std::vector<std::size_t> position, const graph_description* described = nullptr);

//! Refuses, before anything runs, graphs that step-through cannot run: allocation and free nodes (their addresses
//! are the executable graph's), batch memory operations and unknown kinds, conditional nodes Conveyor did not build.
//! \throws std::invalid_argument naming the node.
void check_runnable(const graph_walk& w);

//! The step order of `g` without running it (every conditional body listed once).
[[nodiscard]] std::vector<step_node> list_steps(const graph_state& g);

//! Runs graphs node by node on one stream.
class step_runner {
public:
  step_runner(const stream& s, const step_options& options);
  //! Runs `g` (checked first), every condition starting at its default value. \throws as conveyor::step_through.
  step_report run(const graph_state& g);
  //! Leaves out the top-level nodes in `disabled` (nodes a per-node setter disabled). Not owned.
  void skip(const std::unordered_set<cudaGraphNode_t>* disabled) noexcept { disabled_ = disabled; }

private:
  // (tracked condition handle, the probe graph's handle in its place)
  using handle_pairs = std::vector<std::pair<cudaGraphConditionalHandle, cudaGraphConditionalHandle>>;
  using parameter_layout = std::vector<std::pair<std::size_t, std::size_t>>; // kernel_snapshot::layout

  void run_graph(const graph_walk& w);
  // Whether node `n` of `w` is a top-level node that a per-node setter disabled: not run.
  [[nodiscard]] bool disabled(const graph_walk& w, cudaGraphNode_t n) const;
  void run_node(const graph_walk& w, std::size_t i);
  // Any other node: a copy of it run as a graph of its own.
  void run_copy(cudaGraphNode_t n, node_kind kind, const step_node& info);
  void run_conditional(const graph_walk& w, std::size_t i, const step_node& info);
  void run_body(const conditional_info& c, std::size_t b, const step_node& info, const std::string& what);
  // A kernel that sets tracked conditions: run in a probe graph that reads back the values it sets.
  void run_probe(cudaGraphNode_t n, const step_node& info, const kernel_snapshot& k);
  // run_probe's phases: the tracked handles the 8-byte parameters of `arguments` hold, each replaced there by a new
  // handle of `probe` starting at the condition's value; after `kernel`, one conditional node per handle whose bodies
  // write body + 1 into its word of `words`; the conditions' values read back from `words` after the launch.
  [[nodiscard]] handle_pairs probe_handles(cudaGraph_t probe, const parameter_layout& layout,
                                           std::vector<unsigned char>& arguments) const;
  void add_probe_readers(cudaGraph_t probe, cudaGraphNode_t kernel, const handle_pairs& handles, unsigned* words) const;
  void read_probe(const handle_pairs& handles, const unsigned* words);
  // Whether kernel `k` takes a tracked condition handle (an 8-byte parameter holding one): it then runs in a probe.
  [[nodiscard]] bool sets_tracked_condition(const kernel_snapshot& k) const;
  void launch_alone(cudaGraph_t one, const step_node& info);
  void after_step(const step_node& info);
  void track_conditions(const graph_state& g);

  const stream& stream_;
  const step_options& options_;
  buffer_watch watch_;
  step_report report_;
  std::unordered_map<cudaGraphConditionalHandle, unsigned> values_;
  std::unordered_map<cudaGraphConditionalHandle, const conditional_info*> conditions_;
  const std::unordered_set<cudaGraphNode_t>* disabled_ = nullptr;
};

//! The step_node of node `i` of `w` (its path, description, arguments and dependencies), numbered `order`.
[[nodiscard]] step_node describe_step(const graph_walk& w, std::size_t i, std::size_t order);

} // namespace conveyor::detail
