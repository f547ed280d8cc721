//! \file frame_pipeline.cpp
//! conveyor::pipeline_schedule (plain C++) and conveyor::frame_pipeline: step graphs per shape, per-item updates of
//! the copy nodes' host pointers, launches, completion events.

#include "conveyor/assembly/frame_pipeline.hpp"

#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/runtime/event.hpp"

#include "cuda/check.hpp"
#include "cuda/driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace conveyor {

// ---- pipeline_schedule -----------------------------------------------------------------------------------------

std::string_view to_string(pipeline_stage s) noexcept {
  switch (s) {
  case pipeline_stage::upload: return "upload";
  case pipeline_stage::compute: return "compute";
  case pipeline_stage::download: return "download";
  }
  return "unknown stage";
}

pipeline_lags default_pipeline_lags(std::size_t depth) {
  switch (depth) {
  case 1: return {0, 0, 0};
  case 2: return {0, 1, 1};
  case 3: return {0, 1, 2};
  default:
    throw std::invalid_argument(
        fmt::format("pipeline depth must be 1, 2 or 3 (items in flight, one per stage at most), got {}", depth));
  }
}

pipeline_schedule::pipeline_schedule(std::size_t depth) : lags_(default_pipeline_lags(depth)) {}

pipeline_schedule::pipeline_schedule(const pipeline_lags& lags) : lags_(lags) {
  if (lags[0] != 0)
    throw std::invalid_argument(fmt::format("pipeline lags: the upload's lag must be 0, got {}", lags[0]));
  for (std::size_t s = 1; s < pipeline_stage_count; ++s)
    if (lags[s] != lags[s - 1] && lags[s] != lags[s - 1] + 1)
      throw std::invalid_argument(
          fmt::format("pipeline lags: the {} stage's lag must equal the {} stage's ({}) or be one more, got {}",
                      to_string(all_pipeline_stages[s]), to_string(all_pipeline_stages[s - 1]), lags[s - 1], lags[s]));
}

pipeline_step pipeline_schedule::step(std::size_t k, std::size_t pushed) const noexcept {
  pipeline_step st;
  for (std::size_t s = 0; s < pipeline_stage_count; ++s) {
    if (k < lags_[s]) continue; // prologue: no item has reached this stage yet
    const std::size_t item = k - lags_[s];
    if (item >= pushed) continue; // epilogue, or not pushed yet
    st.item[s] = item;
    st.slot[s] = slot_of(item);
  }
  return st;
}

// ---- frame_pipeline --------------------------------------------------------------------------------------------

namespace {

//! Device memory from cudaMalloc, freed on destruction.
struct device_memory {
  void* pointer = nullptr;
  explicit device_memory(std::size_t bytes, const std::string& what) {
    detail::check_with(cudaMalloc(&pointer, bytes), "cudaMalloc",
                       [&] { return fmt::format("{} ({} bytes)", what, bytes); });
  }
  device_memory(device_memory&& o) noexcept : pointer(std::exchange(o.pointer, nullptr)) {}
  device_memory& operator=(device_memory&&) = delete;
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory() {
    if (pointer != nullptr) (void)detail::cleared(cudaFree(pointer));
  }
};

//! The slots a step's active stages use: the key of its graph.
using step_shape = std::array<std::size_t, pipeline_stage_count>;

//! The allocation a host buffer belongs to: CUDA's process-wide unique buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID),
//! 0 where CUDA gives none. A page-locked buffer allocated at a freed one's address has the same address but another
//! id; a copy node set for the old one must be set again (issue: the address alone cannot tell them apart).
using buffer_id = unsigned long long;

//! One instantiated step graph and what its copy nodes hold now.
struct step_graph_entry {
  step_shape shape{};
  graph definition;
  std::optional<graph_exec> exec;
  std::vector<node> uploads;   // one per input (empty when the upload is inactive)
  std::vector<node> downloads; // one per output
  std::vector<const void*> upload_sources;
  std::vector<void*> download_targets;
  std::vector<buffer_id> upload_ids; // the allocation of each upload's source when its node was set
  std::vector<buffer_id> download_ids;
};

//! Whether a copy node set for (`was`, `was_id`) must be set again for (`now`, `now_id`): another address, another
//! allocation at the same address, or an allocation CUDA gives no id for (then always).
bool copy_node_stale(const void* was, buffer_id was_id, const void* now, buffer_id now_id) noexcept {
  return was != now || was_id != now_id || now_id == 0;
}

// Refuses lags that do not make the depth given.
void check_depth(const pipeline_schedule& schedule, const frame_pipeline_options& options) {
  if (schedule.depth() != options.depth)
    throw std::invalid_argument(fmt::format("{}: lags {{{}, {}, {}}} make a depth of {}, but the depth is {}",
                                            options.name, schedule.lags()[0], schedule.lags()[1], schedule.lags()[2],
                                            schedule.depth(), options.depth));
}

// Refuses an empty list of buffer sizes (`what`: input, output) or a size of 0.
void check_sizes(const std::string& name, const std::vector<std::size_t>& sizes, const char* what) {
  if (sizes.empty()) throw std::invalid_argument(fmt::format("{}: needs at least one {} buffer, got none", name, what));
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] == 0)
      throw std::invalid_argument(fmt::format("{}: {} buffer {} has a size of 0 bytes", name, what, i));
}

// Refuses a missing compute builder, or a stream that is not the pipeline's own.
void check_compute_and_stream(const std::string& name, const frame_pipeline::compute_builder& compute,
                              const stream& s) {
  if (!compute) throw std::invalid_argument(fmt::format("{}: no compute builder given", name));
  if (s.get() == nullptr)
    throw std::invalid_argument(fmt::format("{}: needs a stream of its own (not an empty or legacy default stream, "
                                            "whose implicit synchronisation would serialise the copies)",
                                            name));
}

} // namespace

struct frame_pipeline::impl {
  std::string name;
  pipeline_schedule schedule;
  instantiate_flags flags;
  stream launch_on; // borrowed
  std::vector<std::size_t> input_bytes;
  std::vector<std::size_t> output_bytes;
  std::vector<device_memory> memory;            // slot-major: inputs then outputs of slot 0, then slot 1, ...
  std::vector<std::vector<void*>> slot_inputs;  // [slot][input]
  std::vector<std::vector<void*>> slot_outputs; // [slot][output]
  std::vector<graph> compute;                   // [slot]
  std::vector<std::unique_ptr<step_graph_entry>> graphs;
  // The current run: the host buffers of the items in flight, by slot.
  std::vector<std::vector<const void*>> item_inputs;
  std::vector<std::vector<void*>> item_outputs;
  std::vector<std::vector<buffer_id>> item_input_ids; // [slot][input]: the allocation of each (copy_node_stale)
  std::vector<std::vector<buffer_id>> item_output_ids;
  std::size_t steps_in_run = 0;
  std::size_t pushed = 0;
  std::size_t completed = 0;
  bool drained = false;    // the run was drained: the next push starts a new one
  std::vector<event> done; // [item % slots]: recorded after the step that downloads the item
  frame_pipeline_statistics stats;
  std::string broken; // why the pipeline is unusable (empty: usable)

  impl(std::string n, const pipeline_schedule& sch, instantiate_flags f, const stream& s) :
      name(std::move(n)),
      schedule(sch),
      flags(f),
      launch_on(stream::adopt(s.get(), ownership::borrowed)) {}

  void check_usable(const char* call) const {
    if (!broken.empty())
      throw std::logic_error(
          fmt::format("{}: {}: unusable after an earlier failure ({}); make a new pipeline", name, call, broken));
  }

  // Checks one host buffer: not null, page-locked or managed host memory. Returns its allocation's buffer id.
  buffer_id check_host(const void* p, const char* call, const char* what, std::size_t i, std::size_t bytes) const {
    if (p == nullptr)
      throw std::invalid_argument(fmt::format("{}: {}: {} buffer {} is a null pointer", name, call, what, i));
    cudaPointerAttributes a{};
    const cudaError_t rc = detail::cleared(cudaPointerGetAttributes(&a, p));
    if (rc != cudaSuccess)
      detail::throw_cuda(rc, "cudaPointerGetAttributes", fmt::format("{}: {}: {} buffer {}", name, call, what, i));
    if (a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged) return detail::driver::pointer_buffer_id(p);
    if (a.type == cudaMemoryTypeDevice)
      throw std::invalid_argument(fmt::format(
          "{}: {}: {} buffer {} ({}, {} bytes) is device memory; the pipeline copies between host buffers and its "
          "own device slots",
          name, call, what, i, p, bytes));
    throw std::invalid_argument(fmt::format(
        "{}: {}: {} buffer {} ({}, {} bytes) is pageable host memory; the pipeline's copies need page-locked memory "
        "(cudaMallocHost, cudaHostAlloc or cudaHostRegister) to run asynchronously beside the compute",
        name, call, what, i, p, bytes));
  }

  // Checks the buffers of one item (those of the stages given); returns their allocations' ids.
  std::pair<std::vector<buffer_id>, std::vector<buffer_id>> check_buffers(std::span<const void* const> inputs,
                                                                          std::span<void* const> outputs,
                                                                          const char* call, bool check_inputs,
                                                                          bool check_outputs) const {
    std::pair<std::vector<buffer_id>, std::vector<buffer_id>> ids;
    if (check_inputs) ids.first = check_side(inputs, input_bytes, call, "input");
    if (check_outputs) ids.second = check_side(outputs, output_bytes, call, "output");
    return ids;
  }

  // Checks the host buffers of one side (`what`: input, output; `bytes`: the pipeline's sizes); returns their ids.
  template <class Pointer>
  std::vector<buffer_id> check_side(std::span<Pointer const> buffers, const std::vector<std::size_t>& bytes,
                                    const char* call, const char* what) const {
    if (buffers.size() != bytes.size())
      throw std::invalid_argument(fmt::format("{}: {}: {} {} buffer(s) given, the pipeline has {}", name, call,
                                              buffers.size(), what, bytes.size()));
    std::vector<buffer_id> ids;
    for (std::size_t i = 0; i < buffers.size(); ++i) ids.push_back(check_host(buffers[i], call, what, i, bytes[i]));
    return ids;
  }

  // The graph of shape `shape`, built and instantiated with the given host buffers when new.
  step_graph_entry& graph_for(const step_shape& shape, std::span<const void* const> inputs,
                              std::span<void* const> outputs, std::span<const buffer_id> input_ids,
                              std::span<const buffer_id> output_ids) {
    for (auto& g : graphs)
      if (g->shape == shape) return *g;
    auto e = std::make_unique<step_graph_entry>();
    e->shape = shape;
    constexpr std::size_t none = pipeline_step::none;
    if (shape[0] != none) add_uploads(*e, inputs, input_ids);
    node compute_node;
    if (shape[1] != none) compute_node = add_compute(*e);
    if (shape[2] != none) add_downloads(*e, compute_node, outputs, output_ids);
    e->exec.emplace(instantiate(e->definition, flags, launch_on));
    ++stats.instantiations;
    graphs.push_back(std::move(e));
    return *graphs.back();
  }

  // graph_for: the upload of each input to slot shape[0].
  void add_uploads(step_graph_entry& e, std::span<const void* const> inputs, std::span<const buffer_id> input_ids) {
    const std::size_t up = e.shape[0];
    for (std::size_t i = 0; i < input_bytes.size(); ++i) {
      node n = e.definition.memcpy(slot_inputs[up][i], inputs[i], input_bytes[i], cudaMemcpyHostToDevice);
      n.label(fmt::format("upload input {} to slot {}", i, up));
      e.uploads.push_back(n);
      e.upload_sources.push_back(inputs[i]);
      e.upload_ids.push_back(input_ids[i]);
    }
  }

  // graph_for: the compute of slot shape[1].
  node add_compute(step_graph_entry& e) {
    const std::size_t up = e.shape[0];
    const std::size_t comp = e.shape[1];
    // The same item as the upload (equal lags): after the copies.
    const std::vector<node> after = up == comp ? e.uploads : std::vector<node>{};
    node compute_node = e.definition.child(after, compute[comp]);
    compute_node.label(fmt::format("compute slot {}", comp));
    return compute_node;
  }

  // graph_for: the download of each output from slot shape[2] (after `compute_node` when it computes that slot).
  void add_downloads(step_graph_entry& e, const node& compute_node, std::span<void* const> outputs,
                     std::span<const buffer_id> output_ids) {
    const std::size_t comp = e.shape[1];
    const std::size_t down = e.shape[2];
    for (std::size_t i = 0; i < output_bytes.size(); ++i) {
      std::vector<node> after;
      if (down == comp) after.push_back(compute_node); // same item: after its compute
      node n = e.definition.memcpy(after, outputs[i], slot_outputs[down][i], output_bytes[i], cudaMemcpyDeviceToHost);
      n.label(fmt::format("download output {} from slot {}", i, down));
      e.downloads.push_back(n);
      e.download_targets.push_back(outputs[i]);
      e.download_ids.push_back(output_ids[i]);
    }
  }

  // The device buffers of `slots` slots, slot-major (inputs then outputs), and the per-slot run state.
  void allocate_slots(std::size_t slots) {
    memory.reserve(slots * (input_bytes.size() + output_bytes.size()));
    for (std::size_t sl = 0; sl < slots; ++sl) {
      slot_inputs.push_back(allocate(input_bytes, sl, "input"));
      slot_outputs.push_back(allocate(output_bytes, sl, "output"));
    }
    item_inputs.assign(slots, std::vector<const void*>(input_bytes.size(), nullptr));
    item_outputs.assign(slots, std::vector<void*>(output_bytes.size(), nullptr));
    item_input_ids.assign(slots, std::vector<buffer_id>(input_bytes.size(), 0));
    item_output_ids.assign(slots, std::vector<buffer_id>(output_bytes.size(), 0));
    for (std::size_t sl = 0; sl < slots; ++sl) done.emplace_back(cudaEventDisableTiming);
  }

  // One device buffer per size of `sizes` for slot `sl` (`what`: input, output).
  std::vector<void*> allocate(const std::vector<std::size_t>& sizes, std::size_t sl, const char* what) {
    std::vector<void*> out;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      out.push_back(memory.emplace_back(sizes[i], fmt::format("{}: slot {} {} {}", name, sl, what, i)).pointer);
    return out;
  }

  // Sets the copy nodes whose host buffer differs (copy_node_stale: address or allocation), then launches.
  void launch(step_graph_entry& e, std::span<const void* const> inputs, std::span<void* const> outputs,
              std::span<const buffer_id> input_ids, std::span<const buffer_id> output_ids) {
    for (std::size_t i = 0; i < e.uploads.size(); ++i)
      if (copy_node_stale(e.upload_sources[i], e.upload_ids[i], inputs[i], input_ids[i])) {
        e.exec->set_memcpy(e.uploads[i], slot_inputs[e.shape[0]][i], inputs[i], input_bytes[i], cudaMemcpyHostToDevice);
        e.upload_sources[i] = inputs[i];
        e.upload_ids[i] = input_ids[i];
        ++stats.nodes_updated;
      }
    for (std::size_t i = 0; i < e.downloads.size(); ++i)
      if (copy_node_stale(e.download_targets[i], e.download_ids[i], outputs[i], output_ids[i])) {
        e.exec->set_memcpy(e.downloads[i], outputs[i], slot_outputs[e.shape[2]][i], output_bytes[i],
                           cudaMemcpyDeviceToHost);
        e.download_targets[i] = outputs[i];
        e.download_ids[i] = output_ids[i];
        ++stats.nodes_updated;
      }
    e.exec->launch(launch_on);
  }

  // Launches step `k` of the current run; returns the item it downloads, if any. Marks the pipeline unusable when
  // a CUDA call fails.
  std::optional<std::size_t> run_step(std::size_t k) {
    const pipeline_step st = schedule.step(k, pushed);
    std::optional<std::size_t> finished;
    try {
      const std::size_t up_item = st.item_of(pipeline_stage::upload);
      const std::size_t down_item = st.item_of(pipeline_stage::download);
      const std::size_t up_slot = up_item == pipeline_step::none ? 0 : schedule.slot_of(up_item);
      const std::size_t down_slot = down_item == pipeline_step::none ? 0 : schedule.slot_of(down_item);
      const std::span<const void* const> in(item_inputs[up_slot]);
      const std::span<void* const> out(item_outputs[down_slot]);
      const std::span<const buffer_id> in_ids(item_input_ids[up_slot]);
      const std::span<const buffer_id> out_ids(item_output_ids[down_slot]);
      step_graph_entry& e = graph_for(st.slot, in, out, in_ids, out_ids);
      launch(e, in, out, in_ids, out_ids);
      ++stats.steps;
      if (down_item != pipeline_step::none) {
        done[schedule.slot_of(down_item)].record(launch_on);
        completed = down_item + 1;
        finished = down_item;
      }
    } catch (const std::exception& e) {
      broken = e.what();
      throw;
    }
    ++steps_in_run;
    return finished;
  }
};

frame_pipeline::frame_pipeline(std::vector<std::size_t> input_bytes, std::vector<std::size_t> output_bytes,
                               const compute_builder& compute, const stream& s, frame_pipeline_options options) {
  const pipeline_schedule schedule = options.lags ? pipeline_schedule(*options.lags) : pipeline_schedule(options.depth);
  const std::string& name = options.name;
  check_depth(schedule, options);
  check_sizes(name, input_bytes, "input");
  check_sizes(name, output_bytes, "output");
  check_compute_and_stream(name, compute, s);

  auto m = std::make_unique<impl>(options.name, schedule, options.flags, s);
  m->input_bytes = std::move(input_bytes);
  m->output_bytes = std::move(output_bytes);
  const std::size_t slots = schedule.slots();
  m->allocate_slots(slots);
  impl_ = std::move(m);
  for (std::size_t sl = 0; sl < slots; ++sl) {
    graph g;
    compute(g, slot(sl));
    if (g.node_count() == 0)
      throw std::invalid_argument(fmt::format("{}: the compute builder added no node for slot {}", name, sl));
    impl_->compute.push_back(std::move(g));
  }
}

frame_pipeline::frame_pipeline(frame_pipeline&& other) noexcept = default;

frame_pipeline::~frame_pipeline() {
  if (!impl_) return;
  (void)detail::cleared(cudaStreamSynchronize(impl_->launch_on.get())); // the slots may still be in use
}

std::optional<std::size_t> frame_pipeline::push(std::span<const void* const> inputs, std::span<void* const> outputs) {
  impl& m = *impl_;
  m.check_usable("push");
  auto [input_ids, output_ids] = m.check_buffers(inputs, outputs, "push", true, true);
  if (m.drained) {
    m.steps_in_run = m.pushed = m.completed = 0;
    m.drained = false;
  }
  const std::size_t item = m.pushed;
  const std::size_t sl = m.schedule.slot_of(item);
  std::copy(inputs.begin(), inputs.end(), m.item_inputs[sl].begin());
  std::copy(outputs.begin(), outputs.end(), m.item_outputs[sl].begin());
  m.item_input_ids[sl] = std::move(input_ids);
  m.item_output_ids[sl] = std::move(output_ids);
  ++m.pushed;
  return m.run_step(m.steps_in_run);
}

std::size_t frame_pipeline::drain() {
  impl& m = *impl_;
  m.check_usable("drain");
  std::size_t launched = 0;
  while (m.completed < m.pushed) {
    (void)m.run_step(m.steps_in_run);
    ++launched;
  }
  m.drained = true;
  return launched;
}

void frame_pipeline::wait_for(std::size_t item) const {
  const impl& m = *impl_;
  m.check_usable("wait_for");
  if (item >= m.completed)
    throw std::logic_error(fmt::format(
        "{}: wait_for: item {} has not been downloaded yet ({} pushed, {} downloaded in this run): push more "
        "items or call drain() first",
        m.name, item, m.pushed, m.completed));
  // The event of this slot was recorded for `item` or a later item of the run, which completes after it.
  m.done[m.schedule.slot_of(item)].synchronize();
}

void frame_pipeline::run_alone(pipeline_stage stage, std::size_t slot_index, std::span<const void* const> inputs,
                               std::span<void* const> outputs) {
  impl& m = *impl_;
  m.check_usable("run_alone");
  if (slot_index >= m.schedule.slots())
    throw std::invalid_argument(
        fmt::format("{}: run_alone: slot {} out of range (depth {})", m.name, slot_index, m.schedule.slots()));
  if (m.completed < m.pushed)
    throw std::logic_error(
        fmt::format("{}: run_alone: {} item(s) in flight; call drain() first", m.name, m.pushed - m.completed));
  const auto [input_ids, output_ids] =
      m.check_buffers(inputs, outputs, "run_alone", stage == pipeline_stage::upload, stage == pipeline_stage::download);
  step_shape shape{pipeline_step::none, pipeline_step::none, pipeline_step::none};
  shape[static_cast<std::size_t>(stage)] = slot_index;
  try {
    step_graph_entry& e = m.graph_for(shape, inputs, outputs, input_ids, output_ids);
    m.launch(e, inputs, outputs, input_ids, output_ids);
    ++m.stats.alone;
  } catch (const std::exception& e) {
    m.broken = e.what();
    throw;
  }
}

const pipeline_schedule& frame_pipeline::schedule() const noexcept { return impl_->schedule; }

pipeline_slot frame_pipeline::slot(std::size_t s) const {
  if (s >= impl_->schedule.slots())
    throw std::out_of_range(
        fmt::format("{}: slot {} out of range (depth {})", impl_->name, s, impl_->schedule.slots()));
  return {.index = s,
          .inputs = impl_->slot_inputs[s],
          .outputs = impl_->slot_outputs[s],
          .input_bytes = impl_->input_bytes,
          .output_bytes = impl_->output_bytes};
}

const graph& frame_pipeline::compute_graph(std::size_t s) const {
  if (s >= impl_->compute.size())
    throw std::out_of_range(
        fmt::format("{}: slot {} out of range (depth {})", impl_->name, s, impl_->schedule.slots()));
  return impl_->compute[s];
}

const graph* frame_pipeline::step_graph(const pipeline_step& step) const noexcept {
  for (const auto& g : impl_->graphs)
    if (g->shape == step.slot) return &g->definition;
  return nullptr;
}

std::size_t frame_pipeline::pushed() const noexcept { return impl_->pushed; }
std::size_t frame_pipeline::completed() const noexcept { return impl_->completed; }
const frame_pipeline_statistics& frame_pipeline::statistics() const noexcept { return impl_->stats; }
const stream& frame_pipeline::launch_stream() const noexcept { return impl_->launch_on; }

} // namespace conveyor
