#pragma once
//! \file graphed_types.hpp
//! The options, statistics, argument keys and padded sizes of the assembly line
//! (conveyor::graphed).

#include "conveyor/define/capture.hpp"
#include "conveyor/debug/step.hpp"
#include "conveyor/execute/instantiate_flags.hpp"

#include <array>
#include <functional>
#include <stdexcept>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor {

//! A size the callable works on, padded by graphed to the next captured bucket. The caller passes
//! `batch_size{n}`; the callable receives `real` = n and `padded` = the bucket (or n when no
//! buckets are set), sizes its launches by `padded` and masks by `real`. A plain value.
struct batch_size {
  std::size_t real = 0;   //!< the caller's size (elements, rows, ...)
  std::size_t padded = 0; //!< the size the work is launched for: the bucket graphed pads `real` to
  //! Size 0.
  constexpr batch_size() = default;
  //! A size of `n`, not padded yet (graphed sets `padded` to the bucket).
  constexpr explicit batch_size(std::size_t n) : real(n), padded(n) {}
  //! A size of `n` padded to `p` (for eager calls that mirror a graphed one).
  constexpr batch_size(std::size_t n, std::size_t p) : real(n), padded(p) {}
};

//! How graphed brings an executable graph to a call whose binding (pointers, scalars, struct bytes)
//! changed.
//!
//! **The rule.** By default a changed argument re-captures the callable and updates the executable
//! graph in place (rebind_policy::recapture): sound whatever the callable does with the value,
//! because the new capture runs the callable's own code for it. Patching a value into node fields
//! without running the callable is right only when the value does nothing but flow into those
//! fields. A callable may instead choose *what* to enqueue from it —
//!
//!     void step(const conveyor::stream& s, float a, float* x) {
//!       if (a < 0) negate<<<1, n, 0, s.get()>>>(x); // the branch depends on `a`
//!       axpy<<<1, n, 0, s.get()>>>(a, x);
//!     }
//!
//! — and a patched replay for a = -1 of the graph captured with a = 2 runs the a >= 0 branch: a
//! wrong result, with no word said. No amount of watching values proves a callable branch-free, so
//! patching is opt-in, argument by argument (graphed_options::rebind_arguments) or for the whole
//! callable (graphed_options::rebind): you declare that the argument only flows into node fields
//! (kernel arguments, copy and memset pointers, memset values) — no branch, node count, launch
//! shape, size, host use or equality test depends on it.
enum class rebind_policy : std::uint8_t {
  //! A change re-captures and updates the executable graph in place (graphed_options::recapture:
  //! one whole-graph update by default, else node by node), re-instantiating when CUDA cannot
  //! update it. The default: computes what an eager call computes.
  recapture,
  //! Declared: the argument only flows into node fields. Where its value sits in the graph's nodes
  //! is learnt from a re-capture in which it changed and verified (the value moved exactly as
  //! predicted, nothing else changed); from then on a change patches those fields in place with
  //! per-node setters, without capturing again. Anything the mapping does not explain (a value the
  //! callable transforms, uses on the host, or that reaches a child graph) keeps re-capturing, with
  //! the reason in bindings().
  learn,
  //! Declared, and trusted from the first change: the value is embedded as it is (a pointer
  //! possibly at fixed offsets inside its allocation), patched without a verifying re-capture.
  //! Fields that hold the same value by coincidence are patched too (other pointers into the same
  //! allocation included): use learn when unsure. Where another argument's value explains a field
  //! as well (the same pointer passed twice, a real size equal to its padded size), the first
  //! change re-captures once to tell them apart.
  patch,
};

//! How a re-capture (a changed binding that is not patched) brings the new graph into the
//! executable graph. Both leave the executable graph running exactly the new capture; they differ
//! in cost and in what the reasons say.
enum class recapture_update : std::uint8_t {
  //! One cudaGraphExecUpdate: CUDA compares the graphs itself, so Conveyor reads nothing but what
  //! guards the update (the kernels' cluster attributes, allocation nodes when the executable graph
  //! has any). The fastest way for a re-captured graph (CUDA compares faster than reading and
  //! comparing the new graph first: docs/benchmarks.md); the reason says "whole-graph update".
  //! Refused (another topology, a cluster or allocation change): a new instantiation. The default,
  //! but for rebinding arguments still being learnt, which read the graph anyway (per_node).
  whole_graph,
  //! graph_exec::update_incremental: reads and compares the new graph with the one the executable
  //! graph runs, sets only the nodes that differ and names them in the reason ("updated 2 node(s)
  //! in place"), falling back to whole-graph update, then re-instantiation. Slower for large
  //! graphs; shows what each re-capture changed.
  per_node,
};

//! What graphed does with pageable host memory (not page-locked, not managed) that a captured copy
//! node reads or writes. Host memory in stack frames that returned — the callable's locals and
//! temporaries, graphed's copy of the call's arguments — is always refused: a replay would read it
//! after it is gone.
enum class pageable_policy : std::uint8_t {
  //! Declares the buffers outlive the graph, and records a reason (reasons(), report()) at each
  //! capture that holds such a copy, writing one line to stderr the first time: the copy reads or
  //! writes the buffer when the replay runs it, so the buffer must outlive the graph and must not
  //! change between the call and the replay (eager code copies it at the call).
  warn,
  //! Refuse the capture (std::invalid_argument naming the node, the address and the fix): every
  //! host buffer must be page-locked, or declared with warn or allow. The default, as for
  //! conveyor::capture.
  refuse,
  //! Declares the buffers outlive the graph, and says nothing (the caller owns them for as long as
  //! the graph).
  allow,
};

namespace detail {
//! True when the environment variable CONVEYOR_STEP_THROUGH is set and not "0" (read once per
//! process).
[[nodiscard]] bool step_through_env() noexcept;
//! The environment variable CONVEYOR_AUDIT_EVERY as a count of calls (read once per process): 0
//! when unset or empty.
//! \throws std::invalid_argument naming the variable and its value when it is not a whole
//!         number in [0, 2^32).
[[nodiscard]] std::size_t audit_every_env();
} // namespace detail

//! How graphed pads one size dimension (the batch_size arguments given the rule): a size pads up to
//! the size the rule gives, and every size that pads alike shares one executable graph. One of
//! `buckets`, `multiple` or `power_of_two` (none: every size is its own shape). A plain value.
struct padding_rule {
  //! Captured sizes, any order: a size pads up to the next one; a size above the largest runs
  //! eagerly.
  std::vector<std::size_t> buckets;
  //! Pad up to a multiple of this (e.g. 128 for a sequence length); 0: not used.
  std::size_t multiple = 0;
  //! Pad up to the next power of two (0 pads to 1).
  bool power_of_two = false;
  //! Sizes that pad above this run eagerly; 0: no limit but the largest bucket. With `multiple` or
  //! `power_of_two` it bounds how many shapes the dimension has.
  std::size_t limit = 0;
};

//! Guards a graphed callable against churn: when it keeps re-recording (captures of new shapes and
//! re-captures of changed arguments), each call pays a capture and an instantiation or update that
//! no replay pays back. Once more than `max_records` records fall within `window` calls, the guard
//! runs the callable eagerly — saying so in the reasons — until the arguments settle:
//! `settle_calls` calls in a row that are steady (the same arguments as the call before, or
//! arguments a cached graph replays as it is); then graphing resumes. A plain value.
struct churn_guard {
  //! Most records in `window` calls; one more engages the guard. 0: no guard (the default).
  std::size_t max_records = 0;
  //! The calls the records are counted over (a sliding window, at least max_records + 1).
  std::size_t window = 100;
  //! Steady calls in a row after which graphing resumes (at least 1).
  std::size_t settle_calls = 10;
};

//! Options of a graphed callable. A plain value.
struct graphed_options {
  //! Eager calls per new shape before capturing (warm-up on the capture stream: lazy library
  //! initialisation, workspace allocation, autotuning happen outside the graph).
  int warmup_calls = 1;
  //! Most executable graphs kept; the least recently used is evicted beyond this (destroyed at
  //! once, without waiting: its queued launches keep what they use until they finish).
  std::size_t max_graphs = 16;
  //! Most bytes of graph allocations the cached executable graphs may hold together (each graph's
  //! mem_alloc nodes — cudaMallocAsync calls in the capture — summed, as
  //! cached_graph::allocation_bytes); beyond it the least recently used graphs are evicted until
  //! the new one fits (a graph above the budget by itself is cached alone). What graphs of one
  //! device may map at once, an upper bound of what they take from the device's graph memory pool
  //! (graphs that do not run at the same time can share pages: graph_memory.hpp). 0: no budget.
  std::size_t max_bytes = 0;
  //! After evicting graphs for the byte budget, give the device's graph memory that no launch uses
  //! back to the system (trim_graph_memory on the current device): evicted graphs' allocations
  //! otherwise stay reserved in the pool for later graphs.
  bool trim_on_evict = false;
  //! Captured sizes for batch_size arguments, any order; empty: no padding (every size its own
  //! graph). All batch_size arguments without a rule of their own (`dimensions`) pad by these, as
  //! one dimension (prepare captures them with the same bucket).
  std::vector<std::size_t> buckets;
  //! A padding rule of its own for the batch_size argument at each position (0-based, after the
  //! stream): several dimensions, each padded by its rule, e.g. batch × sequence length:
  //! `{{0, {.buckets = {8, 16, 32}}}, {1, {.multiple = 128, .limit = 4096}}}`. A size one rule
  //! cannot pad runs the call eagerly. The shapes are the combinations of the dimensions' padded
  //! sizes (prepare captures every combination of the dimensions with bucket lists).
  std::vector<std::pair<std::size_t, padding_rule>> dimensions;
  //! The churn guard (off by default): eager calls while the callable keeps re-recording.
  churn_guard churn;
  //! Positions (0-based, after the stream) of pointer arguments the caller promises never change. A
  //! call where one changed is refused with std::invalid_argument before anything runs (a replay
  //! would read the old address).
  std::vector<std::size_t> static_arguments;
  //! Flags for every instantiation (e.g. auto_free_on_launch when the callable allocates with
  //! cudaMallocAsync).
  instantiate_flags flags = instantiate_flags::none;
  //! Run the callable eagerly (no graphs at all): the same code path, for comparison and debugging.
  bool disabled = false;
  //! Capture mode.
  capture_mode mode = capture_mode::thread_local_;
  //! Most recent reasons kept for report().
  std::size_t max_reasons = 64;
  //! How a changed binding argument reaches the executable graph, for every argument not named in
  //! rebind_arguments (see rebind_policy for the rule): re-capture unless declared otherwise.
  rebind_policy rebind = rebind_policy::recapture;
  //! Per-argument declarations, overriding `rebind`: (position, policy), positions 0-based after
  //! the stream. E.g. `{{1, rebind_policy::learn}}`: argument 1 only flows into node fields, so its
  //! changes may be patched.
  std::vector<std::pair<std::size_t, rebind_policy>> rebind_arguments;
  //! Re-captures in which an argument declared rebind_policy::learn must have changed, each
  //! explained exactly by the learned mapping, before it is patched (at least 1).
  int rebind_verifications = 1;
  //! Applied to every captured graph before graphed instantiates it or compares it with an
  //! executable graph (to update it in place), so that every capture of the callable is transformed
  //! alike: e.g. `[&](graph& g) { (void)make_programmatic(g, waiting); }` to make the step's
  //! eligible edges programmatic. Empty: none. It runs on the calling thread; what it throws
  //! propagates from the call (the capture is discarded). It may set launch attributes through raw
  //! node handles: graphed calls graph::note_raw_change() before it.
  std::function<void(graph&)> transform;
  //! Refuse captures in which work escaped to the legacy or per-thread default stream
  //! (capture_options): such work runs once, at capture time, and a replay would miss it.
  bool catch_default_streams = true;
  //! Pageable host memory in captured copies (pageable_policy).
  pageable_policy pageable = pageable_policy::refuse;
  //! How a re-capture updates the executable graph (recapture_update).
  recapture_update recapture = recapture_update::whole_graph;
  //! Debugging: every call captures the callable and runs the capture step by step
  //! (conveyor::step_through with `step`), each node its own launch followed by a synchronisation,
  //! instead of replaying: the node that fails, or after which a watched buffer stops being finite,
  //! is named (step_failure, nonfinite_error). No executable graph is made. On by default when the
  //! environment variable CONVEYOR_STEP_THROUGH is set (and not "0").
  bool step_through = detail::step_through_env();
  //! The watched buffers and callback of step_through.
  step_options step;
  //! Start-up without waiting: a new shape's graph, captured after its warm-up calls, is
  //! instantiated and uploaded on a worker thread of the callable (instantiate_threads of them,
  //! started at the first such capture) while that call and the next calls of the shape run
  //! eagerly; the first call that finds the graph ready replays it. No call waits for
  //! cudaGraphInstantiate, at the cost of the capture (on the calling thread) and of running
  //! eagerly meanwhile. The hand-over call runs the callable twice on the host, once captured and
  //! once eagerly (its GPU work runs once): host-side effects of the callable (a counter it
  //! advances, a log line) happen twice there. A failed instantiation is thrown by the next call of
  //! its shape, with a reason naming the call that captured it. Every call first takes the
  //! finished instantiations into the cache (max_graphs and max_bytes apply then; under a byte
  //! budget the worker does not upload). The worker threads capture in relaxed mode, make the
  //! capturing thread's context current and never run users' release payloads.
  //! graphed::prepare hands its buckets to the worker threads too, capturing the next bucket while
  //! they instantiate, and waits for all of them before it returns. Off by default
  //! (graph_cache::add_in_background).
  bool instantiate_in_background = false;
  //! Worker threads of instantiate_in_background (at least 1); the hand-overs go to them in turn.
  //! cudaGraphInstantiate scaled to two threads and no further on the H100 and the H200
  //! (docs/benchmarks.md).
  std::size_t instantiate_threads = 1;
  //! Every `audit_every` calls that replay or patch (0: never), graphed also captures the callable
  //! and compares the capture with what the executable graph ran (its graph, with the patched node
  //! fields), and throws audit_error at the first call where they differ, naming the node: a replay
  //! that ran something else than the callable's own code would have (state the key cannot see:
  //! what a pointer argument points to, captured references, globals; see graphed.hpp). Costs a
  //! capture and a comparison per audited call. Defaults to the environment variable
  //! CONVEYOR_AUDIT_EVERY (unset: 0), so a whole program can be audited without changing its code.
  std::size_t audit_every = detail::audit_every_env();
};

//! Thrown by a graphed call whose audit (graphed_options::audit_every) found that the executable
//! graph ran other work than a capture of the callable gives. what() names the call, the nodes and
//! what differs.
class audit_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! Counts of what a graphed callable did. A plain value.
struct graphed_statistics {
  std::size_t calls = 0;   //!< all calls
  std::size_t warmups = 0; //!< eager warm-up calls
  //! captures (each followed by instantiate or update; with instantiate_in_background, by a
  //! hand-over whose graph may also be dropped or fail)
  std::size_t captures = 0;
  std::size_t replays = 0;              //!< graph launches
  std::size_t per_node_updates = 0;     //!< in-place updates that set only the changed nodes
  std::size_t nodes_set = 0;            //!< nodes set by those updates
  std::size_t whole_graph_updates = 0;  //!< in-place updates through cudaGraphExecUpdate
  std::size_t unchanged_recaptures = 0; //!< re-captures that found nothing to update
  //! executable graphs made (first capture of a shape, or topology change)
  std::size_t instantiations = 0;
  //! calls run eagerly because no graph fits (e.g. above the largest bucket)
  std::size_t eager_fallbacks = 0;
  std::size_t evictions = 0; //!< executable graphs dropped by the LRU cap
  //! calls whose changed arguments were patched in place, without capture
  std::size_t rebinds = 0;
  std::size_t nodes_patched = 0; //!< nodes set by those calls
  //! calls that changed an argument rebind cannot patch (yet): re-captured
  std::size_t rebind_fallbacks = 0;
  std::size_t stepped = 0; //!< calls run step by step (graphed_options::step_through)
  //! calls audited against a re-capture (graphed_options::audit_every)
  std::size_t audits = 0;
  //! calls the churn guard ran eagerly (graphed_options::churn)
  std::size_t guarded_calls = 0;
  std::size_t guard_trips = 0;   //!< times the churn guard engaged
  std::size_t guard_resumes = 0; //!< times graphing resumed after the arguments settled
  bool guard_engaged = false;    //!< the churn guard runs the calls eagerly now
  //! the guard's cap (graphed_options::churn), for readers of the numbers
  std::size_t churn_max_records = 0;
  std::size_t churn_window = 0; //!< and its window, in calls
  //! evictions to stay within graphed_options::max_bytes (counted in evictions)
  std::size_t budget_evictions = 0;
  //! bytes of graph allocations the cached executable graphs hold now
  std::size_t held_bytes = 0;
  //! executable graphs instantiated on the worker thread
  //! (graphed_options::instantiate_in_background), counted in instantiations when a call takes them
  std::size_t background_instantiations = 0;
  //! calls run eagerly while their shape's graph was being instantiated on the worker thread
  std::size_t eager_while_instantiating = 0;
};

//! What one cached executable graph holds (graph_cache::cached, graphed::cached). A plain value.
struct cached_graph {
  std::string shape;           //!< the shape it was captured for, "0=128, 1=512"
  std::size_t nodes = 0;       //!< nodes of its graph (top level)
  std::size_t allocations = 0; //!< its graph allocation (mem_alloc) nodes
  //! their sizes summed: what the graph maps from the graph memory pool at most
  std::size_t allocation_bytes = 0;
  std::size_t last_call = 0; //!< the call (1-based count of calls) that last used it
};

//! A graphed argument the key must not look at: its value does not change what the captured work
//! does (a logger, a host-side container only read outside the GPU work, ...). The callable
//! receives the wrapped value through the conversion operators (`const T&` / `T&` parameters accept
//! it). Arguments that are not trivially copyable must be wrapped so (or the graphed callable given
//! a key function), so that nothing that could change the work is silently ignored.
template <class T>
struct unkeyed {
  T value; //!< the argument
  //! The wrapped value, for a callable taking `T&` or `T`.
  operator T&() & noexcept { return value; }
  //! The wrapped value, for a callable taking `const T&` or `T`.
  operator const T&() const& noexcept { return value; }
};
//! Deduction guide: `conveyor::unkeyed{value}` wraps value's type.
template <class T>
unkeyed(T) -> unkeyed<T>;

//! True for unkeyed<T>.
template <class T>
inline constexpr bool is_unkeyed = false;
//! True: an unkeyed<T>.
template <class T>
inline constexpr bool is_unkeyed<unkeyed<T>> = true;

//! The default key of conveyor::graphed: no key function (the arguments themselves choose the
//! graph).
struct no_key {};

//! What kind of value an argument of a graphed call is, as its key records it.
enum class argument_kind : std::uint8_t {
  pointer,     //!< an address (bits = the address)
  integer,     //!< an integral or enum value
  floating,    //!< a float or double (bits = its bit pattern)
  padded_size, //!< batch_size::padded
  real_size,   //!< batch_size::real
  //! any other trivially copyable value (a struct of pointers, a span...), compared by its bytes
  bytes,
};

//! How an argument takes part in choosing and updating a graph.
enum class argument_role : std::uint8_t {
  shape, //!< integral value or padded batch size: picks the executable graph
  //! value the graph embeds (pointers, scalars, structs): a change updates the graph in place
  binding,
  static_pointer, //!< pointer declared static: a change is an error
};

//! One argument as its key records it.
struct argument_key {
  //! the value; for argument_kind::bytes, the offset of its bytes
  std::uint64_t bits = 0;
  std::uint32_t size = 0;                      //!< argument_kind::bytes: the value's size in bytes
  argument_role role = argument_role::binding; //!< how it is keyed
  argument_kind kind = argument_kind::integer; //!< what it is
  std::uint8_t position = 0;                   //!< argument position (0-based, after the stream)
};

//! The key of one graphed call: its arguments (at most `capacity` entries; a batch_size takes two)
//! and an optional user key. Two calls with the same shape share an executable graph; the same
//! binding replays it unchanged. Thread safety: a plain value.
class call_key {
public:
  //! Most argument entries per call.
  static constexpr std::size_t capacity = 16;

  //! Records an argument held in 64 bits (`size`: its size in bytes, for printing floating values).
  //! \throws std::invalid_argument when `capacity` entries are taken.
  void add(std::uint64_t bits, argument_role role, argument_kind kind, std::size_t position,
           std::uint32_t size = 8);
  //! Records an argument by its `size` bytes at `data` (argument_kind::bytes).
  //! \throws std::invalid_argument when `capacity` entries are taken, or `size` is above 4 GiB.
  void add_bytes(const void* data, std::size_t size, argument_role role, std::size_t position);
  //! Sets the user key (from a key function): part of the shape.
  void set_user_key(std::uint64_t key) noexcept {
    user_key_ = key;
    has_user_key_ = true;
  }

  //! Number of argument entries.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  //! Entry `i` (below size()).
  [[nodiscard]] const argument_key& operator[](std::size_t i) const noexcept { return args_[i]; }
  //! The bytes of entry `i` when it is argument_kind::bytes (else empty).
  [[nodiscard]] const unsigned char* bytes_of(std::size_t i) const noexcept {
    return args_[i].kind == argument_kind::bytes ? bytes_.data() + args_[i].bits : nullptr;
  }
  //! The user key, when a key function gave one.
  [[nodiscard]] bool has_user_key() const noexcept { return has_user_key_; }
  //! The user key (0 without a key function).
  [[nodiscard]] std::uint64_t user_key() const noexcept { return user_key_; }

  //! Same shape: same entries, same shape values and user key.
  [[nodiscard]] bool same_shape(const call_key& other) const noexcept;
  //! Same binding: every binding and static entry equal (values, or bytes).
  [[nodiscard]] bool same_binding(const call_key& other) const noexcept;
  //! "argument 1 pointer changed from 0x... to 0x...; argument 2 bytes changed", from `before` to
  //! this key.
  [[nodiscard]] std::string changes_from(const call_key& before) const;
  //! The shape as text, "0=256, key=3".
  [[nodiscard]] std::string shape_text() const;

private:
  [[nodiscard]] bool same_entry(const call_key& other, std::size_t i) const noexcept;
  std::array<argument_key, capacity> args_{};
  std::size_t count_ = 0;
  std::uint64_t user_key_ = 0;
  bool has_user_key_ = false;
  std::vector<unsigned char> bytes_; // values of argument_kind::bytes entries
};

//! Where rebinding stands for one argument of a graphed callable's executable graph.
enum class binding_state : std::uint8_t {
  //! not verified yet: a change re-captures, and teaches where the argument is embedded
  //! verified (or declared rebind_policy::patch): a change patches its sites in place, without
  //! capture
  //! a change always re-captures (declared so, or the mapping could not explain a change: see
  //! reason)
  learning,
  patched,
  recaptured,
};

//! One field of one node that holds (a word of) an argument's value.
struct binding_site {
  std::size_t node = 0;  //!< node position in creation order of the executable graph's graph
  std::string node_name; //!< the node's label, else its kernel name, else its kind
  //! "kernel parameter 2", "kernel parameter 0 bytes 8..15", "memcpy source", ...
  std::string field;
  //! the field's value minus the argument's (bytes inside the allocation; 0: as is)
  std::int64_t offset = 0;
  //! where the word sits inside the argument's value, bytes (structs)
  std::size_t value_offset = 0;
  std::size_t width = 0; //!< bytes of the word: 4 or 8
  //! seen to move with the argument in a re-capture (or declared patch)
  bool verified = false;
};

//! The mapping of one binding argument: its state and the node fields it reaches. A plain value.
struct argument_binding {
  std::size_t position = 0;                      //!< argument position (0-based, after the stream)
  argument_kind kind = argument_kind::pointer;   //!< what it is
  binding_state state = binding_state::learning; //!< how a change reaches the graph
  std::string reason;                            //!< why it re-captures, or how it was verified
  //! the fields holding it (candidates while learning)
  std::vector<binding_site> sites;
};

//! "learning", "patched" or "recaptured". Never throws.
[[nodiscard]] std::string_view to_string(binding_state state) noexcept;

} // namespace conveyor
