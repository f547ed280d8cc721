#pragma once
//! \file graph_cache.hpp
//! conveyor::graph_cache: the non-template part of conveyor::graphed — executable graphs keyed by
//! call shape, least recently used eviction, in-place updates, statistics and the reasons for each
//! capture, update and eager run. Plain logic around graph_exec, usable on its own and testable
//! without a GPU (plan, bucket_for, keys).

#include "conveyor/assembly/graphed_types.hpp"
#include "conveyor/define/capture.hpp"
#include "conveyor/define/description.hpp"
#include "conveyor/define/graph.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

namespace detail {
class rebinder;    // the learnt mapping of arguments to node fields (src/assembly/rebind.hpp)
class task_thread; // the worker thread of background instantiations (src/assembly/task_thread.hpp)
struct background_job;  // one background instantiation (src/assembly/background_job.hpp)
struct graph_holding;   // what a graph holds (src/assembly/background_job.hpp)
struct graph_image;     // what the rebinder reads of a graph (src/assembly/rebind.hpp)
struct recapture_facts; // what a re-capture's read found (src/assembly/rebind.hpp)
} // namespace detail

//! What a call should do, decided from its key by graph_cache::plan.
enum class call_plan {
  eager_warmup,   //!< run the callable eagerly (warm-up of a new shape)
  eager_fallback, //!< run eagerly: no graph fits
  capture_new,    //!< capture and instantiate a new executable graph
  recapture,      //!< capture and update the matching executable graph in place (arguments changed)
  replay,         //!< launch the matching executable graph
  //! patch the changed arguments into the matching executable graph (no capture), then launch
  rebind,
  eager_guarded, //!< run eagerly: the churn guard holds graphing off until the arguments settle
  //! capture a new shape, hand the graph to the worker thread to instantiate and upload, run the
  //! call eagerly (graphed_options::instantiate_in_background)
  capture_background,
  //! run eagerly: this shape's graph is being instantiated on the worker thread
  //! (instantiate_in_background)
  eager_instantiating,
};

//! Executable graphs keyed by call shape (see call_key), with warm-up counting, bucket padding, LRU
//! eviction and a log of reasons. Thread safety: not thread-safe; one cache per thread, or external
//! locking.
class graph_cache {
public:
  //! \throws std::invalid_argument when max_graphs or instantiate_threads is 0, warmup_calls is
  //!         negative, a bucket is 0, a padding rule gives more than one of buckets, multiple
  //!         and power_of_two, a dimension is listed twice, or the churn guard's window is not
  //!         above its cap or its settle_calls is 0.
  explicit graph_cache(graphed_options options);
  graph_cache(const graph_cache&) = delete;
  graph_cache& operator=(const graph_cache&) = delete;
  //! Moves the cache; `other` is left without graphs.
  graph_cache(graph_cache&&) noexcept;
  //! Replaces this cache by `other`'s (its graphs are destroyed without waiting for their
  //! launches; its worker threads finish the instantiation in progress first, as ~graph_cache).
  graph_cache& operator=(graph_cache&&) noexcept;
  //! Destroys the executable graphs without waiting for their launches; waits for a background
  //! instantiation in progress (instantiate_in_background) and drops those not started. Never
  //! throws.
  ~graph_cache();

  //! The bucket `n` pads to, or nullopt when `n` is above the largest bucket. Without buckets, `n`
  //! itself.
  [[nodiscard]] std::optional<std::size_t> bucket_for(std::size_t n) const noexcept;
  //! The size the batch_size argument at `position` pads `n` to, by its dimension's rule
  //! (graphed_options::dimensions; else `buckets`), or nullopt when the rule cannot pad it (above
  //! the largest bucket or the rule's limit): the call then runs eagerly.
  [[nodiscard]] std::optional<std::size_t> bucket_for(std::size_t position,
                                                      std::size_t n) const noexcept;
  //! The shapes graphed::prepare captures, largest first, for a call whose batch_size arguments are
  //! `sizes` ((position, size) each, in argument order): every combination of the bucket lists of
  //! their dimensions (the arguments without a rule of their own share one, `buckets`), each shape
  //! one size per entry of `sizes`; an argument whose dimension has no bucket list keeps its own
  //! size, padded. Empty when no dimension has a bucket list (nothing to enumerate). Pure. \throws
  //! std::bad_alloc only.
  [[nodiscard]] std::vector<std::vector<std::size_t>>
  prepare_shapes(const std::vector<std::pair<std::size_t, std::size_t>>& sizes) const;
  //! Decides what the call with `key` does; counts the call and its warm-ups. A known shape whose
  //! binding changed is rebind when every changed argument's words are verified (see
  //! rebind_policy), else recapture. With the churn guard on (graphed_options::churn), a capture or
  //! re-capture beyond its cap is eager_guarded instead, and so is every call until the arguments
  //! settle.
  //! With instantiate_in_background it first takes every finished background instantiation into
  //! the cache (evicting as usual), and plans eager_instantiating for a shape still being
  //! instantiated.
  //! \throws std::invalid_argument when a static pointer changed (a replay would read the
  //!         old address); cuda_error from a failed background instantiation of the call's shape
  //!         (its reason names the call that captured it).
  [[nodiscard]] call_plan plan(const call_key& key);
  //! After capture_new: instantiates `g` (evicting the least recently used graph beyond the cap,
  //! without waiting for its launches), then launches it on `s`.
  //! \throws cuda_error from instantiate or launch; std::invalid_argument, before anything is
  //!         counted or changed, for an empty (moved-from) graph (as every call below taking one).
  void add_and_launch(const call_key& key, graph g, const stream& s);
  //! After capture_background: hands `g`, captured for `key`, to one of the cache's worker threads
  //! (graphed_options::instantiate_threads of them, started at the first hand-over, taking the
  //! hand-overs in turn), which makes the calling thread's context current, instantiates `g` with
  //! the options' flags and, without a byte budget (max_bytes 0), uploads it on a stream of its own
  //! (cudaGraphInstantiateWithParams, cudaGraphUpload). The calls of its shape run eagerly
  //! (eager_instantiating) until it is done; then the next call of any shape adds it to the cache
  //! (evicting as insert does: the least recently used graph may be the one of that call's shape),
  //! and the calls of its shape go on as for a cached graph (replay, or a re-capture if their
  //! arguments differ). Nothing waits for the instantiation. Its error is thrown by the next call
  //! of its shape (a cuda_error naming the call that captured it). A finished graph waits for the
  //! callable's next call, uploaded but outside max_graphs, while the callable is idle.
  //! \throws std::system_error when a worker thread cannot be started; std::invalid_argument
  //!         for an empty (moved-from) graph.
  void add_in_background(const call_key& key, graph g);
  //! Blocks until every instantiation handed to the worker threads so far has finished (tests and
  //! benchmarks that want the next call to find it done). Their errors are not thrown here but by
  //! the next call of their shape. Never throws.
  void wait_for_background() const noexcept;
  //! Waits for every instantiation handed to the worker threads (wait_for_background) and takes
  //! each into the cache, in the order handed over (graphed::prepare, after its add calls), so that
  //! no later call waits or runs eagerly for them. Nothing to do when none was handed over.
  //! \throws cuda_error from the first instantiation that failed, in hand-over order (those
  //!         handed over after it stay pending: later calls take them).
  void finish_background();
  //! Instantiates `g` for `key` and uploads it on `s` (cudaGraphUpload), without launching it
  //! (prepare): its first launch then pays no upload. With instantiate_in_background it hands `g`
  //! to the worker threads instead (add_in_background); finish_background then takes it.
  //! \throws cuda_error from instantiate or upload; std::system_error and
  //!         std::invalid_argument as add_in_background.
  void add(const call_key& key, graph g, const stream& s);
  //! Adds `g`, made elsewhere (a bucket loaded from a graph file, conveyor/keep/graphed_file.hpp),
  //! for `key`: instantiated and uploaded on `s`. With `binding_known` false (the file could not
  //! say which binding the graph runs), the first call of its shape re-captures and updates it
  //! instead of replaying it.
  //! \throws cuda_error from instantiate or upload; std::invalid_argument for an empty
  //!         (moved-from) graph.
  void add_saved(const call_key& key, graph g, const stream& s, bool binding_known);
  //! One cached bucket, for saving it: its key, its executable graph (valid until the cache's next
  //! call), and whether the key's binding is what the graph runs.
  struct bucket {
    call_key key;                     //!< the shape and binding it was made for
    const graph_exec* exec = nullptr; //!< its executable graph
    bool binding_known = true;        //!< false for a loaded bucket not yet re-captured (add_saved)
  };
  //! The cached buckets, in the cache's order. Never throws but for std::bad_alloc.
  [[nodiscard]] std::vector<bucket> buckets() const;
  //! True when an executable graph for `key`'s shape exists or is being instantiated on a worker
  //! thread (instantiate_in_background).
  [[nodiscard]] bool has_shape(const call_key& key) const noexcept;
  //! Instantiations handed to the worker threads and not yet taken into the cache (running,
  //! finished but not yet seen by a call, or failed and waiting for a call of their shape).
  [[nodiscard]] std::size_t pending_instantiations() const noexcept;
  //! After recapture: updates the executable graph plan() matched to `g` as
  //! graphed_options::recapture says (graph_exec::update, re-instantiating when refused; or
  //! graph_exec::update_incremental, which is also used while rebinding arguments are learnt),
  //! launches it on `s`, then destroys the replaced graph definition (while the GPU runs).
  //! \throws std::logic_error when plan() matched none; cuda_error from update or launch;
  //!         std::invalid_argument, changing nothing, for an empty (moved-from) graph.
  void update_and_launch(const call_key& key, graph g, const stream& s);
  //! After rebind: patches the changed arguments' fields into the executable graph plan() matched
  //! (per-node setters: cuGraphExecKernelNodeSetParams, cudaGraphExecMemcpyNodeSetParams,
  //! cudaGraphExecMemsetNodeSetParams), then launches it on `s`. Returns false, launching nothing,
  //! when CUDA refused a setter (rebinding is then off for that graph) or when re-reading the graph
  //! after re-captures showed an argument no longer where it was learnt (that argument re-captures
  //! from then on): the caller re-captures (update_and_launch).
  //! \throws std::logic_error when plan() matched none; cuda_error from launch.
  [[nodiscard]] bool rebind_and_launch(const call_key& key, const stream& s);
  //! Step-through mode (graphed_options::step_through): runs the capture `g` node by node on `s`
  //! with the options' step settings (conveyor::step_through), counting the call.
  //! \throws as conveyor::step_through (std::invalid_argument, the call not counted, for an
  //!         empty (moved-from) graph).
  void step(const graph& g, const stream& s);
  //! True when the call just planned as `plan` is to be audited (graphed_options::audit_every:
  //! every n-th call that replayed or patched).
  [[nodiscard]] bool audit_due(call_plan plan) noexcept;
  //! Compares `fresh`, a capture of the call just made, with what the executable graph plan()
  //! matched ran: its graph, and the node fields rebinding patched.
  //! \throws audit_error naming the nodes that differ; cuda_error when a graph cannot be read;
  //!         std::invalid_argument for an empty (moved-from) graph.
  void audit(const graph& fresh);
  //! Launches the executable graph plan() matched on `s`. \throws std::logic_error when plan()
  //! matched none; cuda_error from launch.
  void replay(const stream& s);
  //! The capture options of the callable's captures (mode, default-stream check, host memory check
  //! from graphed_options::pageable); `first_of_shape`: the first capture of a shape, whose stream
  //! watch is stream_watch::if_available (CONVEYOR_WATCH_STREAMS decides otherwise: "0" never, "1"
  //! every capture), where other captures' is stream_watch::environment.
  [[nodiscard]] capture_options capture_settings(bool first_of_shape = false) const noexcept;
  //! Holds the stream watch's subscription for the first captures of shapes (capture_settings(true)
  //! watch them), so that graphed::prepare subscribes once for all its buckets
  //! (conveyor::hold_stream_watch). \throws std::bad_alloc only.
  [[nodiscard]] stream_watch_hold hold_stream_watch() const;
  //! Checks a new capture `g` of the callable, made with capture_settings(): a copy node reading or
  //! writing host memory in [`arguments`, `arguments` + `bytes`) — graphed's copy of the call's
  //! arguments, gone after the call — is refused; other pageable host memory is reported as
  //! graphed_options::pageable says.
  //! \throws std::invalid_argument naming the node, the address and the fix; or for an empty
  //!         (moved-from) graph.
  void inspect(const graph& g, const void* arguments, std::size_t bytes);
  //! Records an eager fallback: argument `position` has size `size`, which its dimension's rule
  //! cannot pad (above the largest bucket or the rule's limit).
  void note_fallback(std::size_t position, std::size_t size);

  //! What was done so far.
  [[nodiscard]] const graphed_statistics& statistics() const noexcept { return stats_; }
  //! The most recent reasons (at most options().max_reasons), oldest first.
  [[nodiscard]] const std::deque<std::string>& reasons() const noexcept { return reasons_; }
  //! The options, buckets sorted.
  [[nodiscard]] const graphed_options& options() const noexcept { return options_; }
  //! Executable graphs cached now.
  [[nodiscard]] std::size_t cached_graphs() const noexcept { return entries_.size(); }
  //! What each cached executable graph holds (nodes, graph allocations and their bytes, last use),
  //! most recently used first. Never throws but for std::bad_alloc.
  [[nodiscard]] std::vector<cached_graph> cached() const;
  //! A readable table of the statistics and the most recent reasons, headed by `name`.
  [[nodiscard]] std::string report(std::string_view name) const;
  //! The rebinding map of the most recently used executable graph: for each binding argument, its
  //! state and the node fields holding it (candidates until a re-capture verified them). Reads the
  //! graph when nothing was learnt yet. Empty when no graph is cached. \throws cuda_error when the
  //! graph cannot be read.
  [[nodiscard]] std::vector<argument_binding> bindings();
  //! The most recently used executable graph's graph as exports show it (observe/export.hpp), each
  //! node listing the arguments patched into it (node_description::bindings). Empty when no graph
  //! is cached.
  //! \throws cuda_error when the graph cannot be read.
  [[nodiscard]] graph_description describe();
  //! The cached executable graphs, most recently used first, read-only: to profile or export them
  //! without another capture (describe(const graph_exec&), profile::profiler::watch). Pointers stay
  //! valid until the next call, which may evict or re-instantiate one. Never throws but for
  //! std::bad_alloc.
  [[nodiscard]] std::vector<const graph_exec*> executables() const;

private:
  struct entry {
    call_key key; // the binding the executable graph runs
    graph_exec exec;
    std::uint64_t last_used = 0;
    std::shared_ptr<detail::rebinder> rebind; // null until a binding changes (or rebinding is off)
    bool rebind_broken = false;               // CUDA refused a patch: re-capture from now on
    std::size_t nodes = 0;                    // what its graph holds (cached_graph)
    std::size_t allocations = 0;
    std::size_t bytes = 0;
    std::size_t last_call = 0;
    // loaded from a file that could not say: re-capture before replaying
    bool binding_unknown = false;
  };
  void note(std::string reason);
  detail::rebinder& rebinder_of(entry& e);
  entry* most_recent() noexcept;
  entry& insert(const call_key& key, graph g);
  entry& store(const call_key& key, graph_exec exec, const detail::graph_holding& h);
  bool waiting_for_background(const call_key& key);
  void reap_background();
  void take(std::shared_ptr<detail::background_job> job);
  [[noreturn]] void throw_background_error(const detail::background_job& job);
  std::shared_ptr<detail::background_job>
  pop_pending(std::vector<std::shared_ptr<detail::background_job>>::iterator it);
  [[nodiscard]] bool has_cached_shape(const call_key& key) const noexcept;
  void make_room(std::size_t incoming, const entry* keep);
  void make_room_for(const detail::graph_holding& h);
  void evict(std::vector<std::unique_ptr<entry>>::iterator victim, const char* why);
  entry& matched(const char* call);
  call_plan plan_cached(const call_key& key);
  call_plan plan_for(entry& e, const call_key& key);
  call_plan plan_new_shape(const call_key& key);
  update_result update_to(entry& e, const graph& g);
  update_result learn_and_update(entry& e, const graph& g, detail::graph_image& next,
                                 detail::recapture_facts& facts);
  void rehold(entry& e, const graph& g);
  bool churning(const call_key& key);
  bool settled(const call_key& key);
  [[nodiscard]] const padding_rule& rule_of(std::size_t position) const noexcept;

  graphed_options options_;
  graphed_statistics stats_;
  std::deque<std::string> reasons_;
  std::vector<std::unique_ptr<entry>> entries_;
  std::vector<std::pair<call_key, int>> warmups_; // per shape
  entry* matched_ = nullptr;                      // set by plan()
  std::string not_rebound_;                       // why plan() chose recapture over rebind
  bool rebinding_ = true;                         // some argument may be rebound (from the options)
  bool declared_patch_ = false;                   // some argument is declared rebind_policy::patch
  bool warned_pageable_ = false;                  // the pageable-memory warning went to stderr
  std::size_t audit_count_ = 0;                   // calls that could be audited so far
  std::uint64_t clock_ = 0;
  // `buckets` as a rule: the dimension of batch_size arguments without their own
  padding_rule default_rule_;
  // churn guard: the calls (numbers) that recorded, within its window
  std::deque<std::size_t> records_;
  std::size_t steady_ = 0; // churn guard engaged: steady calls in a row so far
  call_key last_key_;      // churn guard engaged: the key of the call before
  // instantiate_in_background: the worker thread (from the first hand-over) and the instantiations
  // handed to it
  std::vector<std::unique_ptr<detail::task_thread>> workers_;
  std::size_t next_worker_ = 0; // the worker the next hand-over goes to (round robin)
  std::vector<std::shared_ptr<detail::background_job>> pending_;
};

} // namespace conveyor
