// The kernel node kind: add, read (through the driver, so library kernels are read too), compare every parameter
// CUDA launches it with (function, context, shape, dynamic shared memory, argument bytes, launch attributes), set on
// an executable graph, describe.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "cuda/check.hpp"
#include "cuda/driver.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace conveyor::detail {

namespace {
// Where the parameter list that ends a demangled name begins ("f<int>(float*)": at the '(' matching the last ')'),
// or npos.
std::size_t parameter_list_start(const std::string& name) {
  if (!name.ends_with(')')) return std::string::npos;
  int depth = 0;
  for (std::size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) return i;
  }
  return std::string::npos;
}
} // namespace

std::string readable_kernel_name(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  if (status != 0 || !text) return mangled;
  std::string out = text.get();
  if (const std::size_t start = parameter_list_start(out); start != std::string::npos) out.erase(start);
  return out;
}

namespace {

// ---- launch attributes ----------------------------------------------------------------------------------------
// Every attribute CUDA may hold on a kernel node (cudaLaunchAttributeID values valid for graph nodes, plus those a
// newer driver might accept): read each from both nodes; a read that fails on both with the same error is "absent".
constexpr cudaLaunchAttributeID node_attributes[] = {
    cudaLaunchAttributeAccessPolicyWindow,
    cudaLaunchAttributeCooperative,
    cudaLaunchAttributeClusterDimension,
    cudaLaunchAttributeClusterSchedulingPolicyPreference,
    cudaLaunchAttributePriority,
    cudaLaunchAttributeMemSyncDomainMap,
    cudaLaunchAttributeMemSyncDomain,
    cudaLaunchAttributePreferredClusterDimension,
    cudaLaunchAttributeDeviceUpdatableKernelNode,
    cudaLaunchAttributePreferredSharedMemoryCarveout,
#if CUDART_VERSION >= 13000
    cudaLaunchAttributeNvlinkUtilCentricScheduling,
#endif
};

using attribute_read = kernel_attribute_read;
static_assert(std::size(node_attributes) == kernel_attribute_slots, "kinds.hpp's slot count follows the list");

static_assert(sizeof(CUlaunchAttributeValue) == sizeof(cudaLaunchAttributeValue),
              "the driver's and the runtime's launch attribute values share one layout");

// Through the driver (no runtime bookkeeping, no sticky last-error to clear): read for every kernel node on every
// update, so it should cost as little as a read can.
attribute_read read_attribute(cudaGraphNode_t n, cudaLaunchAttributeID id) {
  attribute_read r;
  std::memset(&r.value, 0, sizeof r.value);
  const CUresult rc =
      driver::kernel_node_get_attribute(reinterpret_cast<CUgraphNode>(n), static_cast<CUlaunchAttributeID>(id),
                                        reinterpret_cast<CUlaunchAttributeValue*>(&r.value));
  r.rc = rc == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
  return r;
}

// Attributes the driver never holds on a kernel node (a read fails even on a node made without attributes, as
// cudaLaunchAttributeNvlinkUtilCentricScheduling on driver 580): learnt at the first failing read and not read again
// (a failing driver call costs about a microsecond; an attribute the driver does not support cannot be set).
std::atomic<std::uint32_t> unsupported_ids{0};

bool cluster_only(cudaLaunchAttributeID id) {
  return id == cudaLaunchAttributeClusterSchedulingPolicyPreference ||
         id == cudaLaunchAttributePreferredClusterDimension;
}

bool has_cluster(const attribute_read& r) {
  return r.rc == cudaSuccess && r.value.clusterDim.x * r.value.clusterDim.y * r.value.clusterDim.z > 0;
}

// Attribute `k` of node_attributes as node `n` holds it, or "unset" (rc cudaErrorInvalidValue) where it is not read:
// attributes that only act with clusters are read only when `clusters` (the node, or the other node of a
// comparison, has cluster dimensions); others the driver does not support are not read. `cluster` is the node's
// cluster dimension, read by the caller.
attribute_read read_listed(cudaGraphNode_t n, std::size_t k, const attribute_read& cluster, bool clusters) {
  const cudaLaunchAttributeID id = node_attributes[k];
  if (id == cudaLaunchAttributeClusterDimension) return cluster;
  attribute_read r;
  const std::uint32_t bit = 1U << static_cast<unsigned>(id);
  if ((unsupported_ids.load(std::memory_order_relaxed) & bit) != 0 || (cluster_only(id) && !clusters)) return r;
  r = read_attribute(n, id);
  if (r.rc != cudaSuccess && !cluster_only(id)) unsupported_ids.fetch_or(bit, std::memory_order_relaxed);
  return r;
}

// The attributes of node `n`, in node_attributes' order (read_listed); `with_clusters` reads the cluster-only
// attributes even when this node has none.
std::array<attribute_read, std::size(node_attributes)> read_attributes(cudaGraphNode_t n, const attribute_read& cluster,
                                                                       bool with_clusters = false) {
  std::array<attribute_read, std::size(node_attributes)> out{};
  const bool clusters = with_clusters || has_cluster(cluster);
  for (std::size_t k = 0; k < std::size(node_attributes); ++k) out[k] = read_listed(n, k, cluster, clusters);
  return out;
}

} // namespace

namespace {

bool same_window(const cudaAccessPolicyWindow& x, const cudaAccessPolicyWindow& y) noexcept {
  return x.base_ptr == y.base_ptr && x.num_bytes == y.num_bytes && x.hitRatio == y.hitRatio && x.hitProp == y.hitProp &&
         x.missProp == y.missProp;
}

// A cluster dimension (clusterDim, preferredClusterDim).
template <class Dim>
bool same_dim(const Dim& a, const Dim& b) noexcept {
  return a.x == b.x && a.y == b.y && a.z == b.z;
}

bool same_domain_map(const cudaLaunchMemSyncDomainMap& a, const cudaLaunchMemSyncDomainMap& b) noexcept {
  return a.default_ == b.default_ && a.remote == b.remote;
}

// The memory sync domain map of a node made without attributes: default domain 0, remote domain 1.
bool default_domain_map(const cudaLaunchMemSyncDomainMap& m) noexcept { return m.default_ == 0 && m.remote == 1; }

} // namespace

namespace {

std::string yes_or_no(int flag) { return flag != 0 ? "yes" : "no"; }

// A cluster dimension (clusterDim, preferredClusterDim): "2x1x1".
template <class Dim>
std::string dim_text(const Dim& d) {
  return fmt::format("{}x{}x{}", d.x, d.y, d.z);
}

template <class Dim>
unsigned blocks(const Dim& d) noexcept {
  return d.x * d.y * d.z;
}

using attribute_value = cudaLaunchAttributeValue;

// Everything Conveyor does with one launch attribute's value, in one place (as traits_of for node kinds): its name
// in messages and exports; whether two values are the same, field by field (the union's other bytes are not CUDA's
// to define); the value as text ("2x1x1", "-5", "50%", "yes"); whether an export leaves it out (what a node made
// without attributes holds, read on the H200, driver 580, or a value that makes no difference to show, as a cluster
// of one block); and whether it holds what a node made without attributes holds (what a snapshot does not store;
// null: all zero, compared by `same`).
struct attribute_traits {
  std::string_view name;
  bool (*same)(const attribute_value&, const attribute_value&) noexcept = nullptr;
  std::string (*text)(const attribute_value&) = nullptr;
  bool (*left_out)(const attribute_value&) noexcept = nullptr;
  bool (*holds_default)(const attribute_value&) noexcept = nullptr;
};

constexpr attribute_traits access_policy_window_traits{
    "access policy window",
    [](const attribute_value& a, const attribute_value& b) noexcept {
      return same_window(a.accessPolicyWindow, b.accessPolicyWindow);
    },
    [](const attribute_value& v) {
      return fmt::format("{}+{} B hit ratio {}", v.accessPolicyWindow.base_ptr, v.accessPolicyWindow.num_bytes,
                         v.accessPolicyWindow.hitRatio);
    },
    [](const attribute_value& v) noexcept { return v.accessPolicyWindow.num_bytes == 0; },
    [](const attribute_value& v) noexcept { return same_window(v.accessPolicyWindow, cudaAccessPolicyWindow{}); }};

constexpr attribute_traits cooperative_traits{
    "cooperative",
    [](const attribute_value& a, const attribute_value& b) noexcept { return a.cooperative == b.cooperative; },
    [](const attribute_value& v) { return yes_or_no(v.cooperative); },
    [](const attribute_value& v) noexcept { return v.cooperative == 0; },
    [](const attribute_value& v) noexcept { return v.cooperative == 0; }};

constexpr attribute_traits cluster_dimension_traits{
    "cluster",
    [](const attribute_value& a, const attribute_value& b) noexcept { return same_dim(a.clusterDim, b.clusterDim); },
    [](const attribute_value& v) { return dim_text(v.clusterDim); },
    [](const attribute_value& v) noexcept { return blocks(v.clusterDim) <= 1; }};

constexpr attribute_traits cluster_scheduling_traits{
    "cluster scheduling policy",
    [](const attribute_value& a, const attribute_value& b) noexcept {
      return a.clusterSchedulingPolicyPreference == b.clusterSchedulingPolicyPreference;
    },
    [](const attribute_value& v) { return fmt::format("{}", static_cast<int>(v.clusterSchedulingPolicyPreference)); },
    [](const attribute_value&) noexcept { return true; }}; // shown with the cluster it applies to

constexpr attribute_traits priority_traits{
    "priority", [](const attribute_value& a, const attribute_value& b) noexcept { return a.priority == b.priority; },
    [](const attribute_value& v) { return fmt::format("{}", v.priority); },
    [](const attribute_value& v) noexcept { return v.priority == 0; },
    [](const attribute_value& v) noexcept { return v.priority == 0; }};

constexpr attribute_traits mem_sync_domain_map_traits{
    "memory sync domain map",
    [](const attribute_value& a, const attribute_value& b) noexcept {
      return same_domain_map(a.memSyncDomainMap, b.memSyncDomainMap);
    },
    [](const attribute_value& v) {
      return fmt::format("{}/{}", v.memSyncDomainMap.default_, v.memSyncDomainMap.remote);
    },
    [](const attribute_value& v) noexcept { return default_domain_map(v.memSyncDomainMap); },
    [](const attribute_value& v) noexcept { return default_domain_map(v.memSyncDomainMap); }};

constexpr attribute_traits mem_sync_domain_traits{
    "memory sync domain",
    [](const attribute_value& a, const attribute_value& b) noexcept { return a.memSyncDomain == b.memSyncDomain; },
    [](const attribute_value& v) { return fmt::format("{}", static_cast<int>(v.memSyncDomain)); },
    [](const attribute_value& v) noexcept { return v.memSyncDomain == cudaLaunchMemSyncDomainDefault; },
    [](const attribute_value& v) noexcept { return static_cast<int>(v.memSyncDomain) == 0; }};

constexpr attribute_traits preferred_cluster_traits{
    "preferred cluster",
    [](const attribute_value& a, const attribute_value& b) noexcept {
      return same_dim(a.preferredClusterDim, b.preferredClusterDim);
    },
    [](const attribute_value& v) { return dim_text(v.preferredClusterDim); },
    [](const attribute_value& v) noexcept { return blocks(v.preferredClusterDim) == 0; }};

constexpr attribute_traits device_updatable_traits{
    "device updatable",
    [](const attribute_value& a, const attribute_value& b) noexcept {
      return a.deviceUpdatableKernelNode.deviceUpdatable == b.deviceUpdatableKernelNode.deviceUpdatable;
    },
    [](const attribute_value& v) { return yes_or_no(v.deviceUpdatableKernelNode.deviceUpdatable); },
    [](const attribute_value& v) noexcept { return v.deviceUpdatableKernelNode.deviceUpdatable == 0; },
    [](const attribute_value& v) noexcept { return v.deviceUpdatableKernelNode.deviceUpdatable == 0; }};

constexpr attribute_traits shared_memory_carveout_traits{
    "shared memory carveout",
    [](const attribute_value& a, const attribute_value& b) noexcept {
      return a.sharedMemCarveout == b.sharedMemCarveout;
    },
    [](const attribute_value& v) { return fmt::format("{}%", v.sharedMemCarveout); },
    [](const attribute_value& v) noexcept { return v.sharedMemCarveout == 0; },
    [](const attribute_value& v) noexcept { return v.sharedMemCarveout == 0; }};

// The entries at CUDA's attribute IDs; an ID without one (those not held by graph nodes, or newer than this table,
// as cudaLaunchAttributeNvlinkUtilCentricScheduling) is compared byte for byte and shown by its number.
constexpr std::array<const attribute_traits*, 15> attribute_entries = [] {
  std::array<const attribute_traits*, 15> t{};
  t[cudaLaunchAttributeAccessPolicyWindow] = &access_policy_window_traits;
  t[cudaLaunchAttributeCooperative] = &cooperative_traits;
  t[cudaLaunchAttributeClusterDimension] = &cluster_dimension_traits;
  t[cudaLaunchAttributeClusterSchedulingPolicyPreference] = &cluster_scheduling_traits;
  t[cudaLaunchAttributePriority] = &priority_traits;
  t[cudaLaunchAttributeMemSyncDomainMap] = &mem_sync_domain_map_traits;
  t[cudaLaunchAttributeMemSyncDomain] = &mem_sync_domain_traits;
  t[cudaLaunchAttributePreferredClusterDimension] = &preferred_cluster_traits;
  t[cudaLaunchAttributeDeviceUpdatableKernelNode] = &device_updatable_traits;
  t[cudaLaunchAttributePreferredSharedMemoryCarveout] = &shared_memory_carveout_traits;
  return t;
}();

// Attribute `id`'s entry, or null.
const attribute_traits* attribute_traits_of(cudaLaunchAttributeID id) noexcept {
  const auto at = static_cast<std::size_t>(id);
  return at < attribute_entries.size() ? attribute_entries[at] : nullptr;
}

// Every attribute of node_attributes that a kernel node made by this version can hold has its entry.
constexpr bool every_listed_attribute_has_an_entry() {
  for (cudaLaunchAttributeID id : node_attributes) {
    const auto at = static_cast<std::size_t>(id);
    if (at < attribute_entries.size() && attribute_entries[at] == nullptr) return false;
  }
  return true;
}
static_assert(every_listed_attribute_has_an_entry(), "node_attributes and attribute_entries list the same attributes");

bool all_zero(const attribute_value& v) noexcept {
  attribute_value zero;
  std::memset(&zero, 0, sizeof zero);
  return std::memcmp(&v, &zero, sizeof zero) == 0;
}

} // namespace

bool same_attribute_value(cudaLaunchAttributeID id, const cudaLaunchAttributeValue& a,
                          const cudaLaunchAttributeValue& b) noexcept {
  const attribute_traits* t = attribute_traits_of(id);
  return t != nullptr ? t->same(a, b) : std::memcmp(&a, &b, sizeof a) == 0;
}

namespace {

std::string_view attribute_name(cudaLaunchAttributeID id) {
  const attribute_traits* t = attribute_traits_of(id);
  return t != nullptr ? t->name : "attribute";
}

// The value alone: "2x1x1", "-5", "50%", "yes"; "unset" when the node holds none.
std::string value_only(cudaLaunchAttributeID id, const attribute_read& r) {
  if (r.rc != cudaSuccess) return "unset";
  const attribute_traits* t = attribute_traits_of(id);
  return t != nullptr ? t->text(r.value) : fmt::format("(id {})", static_cast<int>(id));
}

// "cluster 2x1x1", "priority -5", "cooperative", for exports.
std::string value_text(cudaLaunchAttributeID id, const attribute_read& r) {
  if (id == cudaLaunchAttributeCooperative || id == cudaLaunchAttributeDeviceUpdatableKernelNode)
    return r.rc == cudaSuccess && value_only(id, r) == "yes" ? std::string(attribute_name(id))
                                                             : fmt::format("not {}", attribute_name(id));
  return fmt::format("{} {}", attribute_name(id), value_only(id, r));
}

// True when an export leaves the value out (attribute_traits::left_out). For exports only: diff compares every value.
bool is_default(cudaLaunchAttributeID id, const attribute_read& r) {
  if (r.rc != cudaSuccess) return true;
  const attribute_traits* t = attribute_traits_of(id);
  return t != nullptr ? t->left_out(r.value) : all_zero(r.value);
}

// Both nodes hold the same value of attribute `id`, or neither holds one (the same error).
bool same_read(cudaLaunchAttributeID id, const attribute_read& a, const attribute_read& b) {
  return a.rc == b.rc && (a.rc != cudaSuccess || same_attribute_value(id, a.value, b.value));
}

// Whether attribute_changes lists a difference of attribute `id`: not for an attribute that only acts with clusters,
// present on one side only, where the cluster dimensions differ.
bool listed_difference(cudaLaunchAttributeID id, const attribute_read& a, const attribute_read& b,
                       bool clusters_differ) {
  if (same_read(id, a, b)) return false;
  return !(cluster_only(id) && clusters_differ && (a.rc != cudaSuccess || b.rc != cudaSuccess));
}

// The position of the cluster dimension in node_attributes.
constexpr std::size_t cluster_slot = static_cast<std::size_t>(
    std::find(std::begin(node_attributes), std::end(node_attributes), cudaLaunchAttributeClusterDimension) -
    std::begin(node_attributes));
static_assert(cluster_slot < std::size(node_attributes), "node_attributes lists the cluster dimension");

// "attributes: cluster 1x1x1 -> 2x1x1; priority 0 -> -5", or empty when every attribute is the same ("unset" also
// stands for the value a node made without attributes holds). Attributes that only act with clusters are read only
// from nodes with clusters: where the cluster dimensions differ, those present on one side only are not listed.
std::string attribute_changes(const std::array<attribute_read, kernel_attribute_slots>& ra,
                              const std::array<attribute_read, kernel_attribute_slots>& rb) {
  const bool clusters_differ = !same_read(cudaLaunchAttributeClusterDimension, ra[cluster_slot], rb[cluster_slot]);
  std::string out;
  for (std::size_t k = 0; k < std::size(node_attributes); ++k) {
    const cudaLaunchAttributeID id = node_attributes[k];
    if (!listed_difference(id, ra[k], rb[k], clusters_differ)) continue;
    out += fmt::format("{}{} {} -> {}", out.empty() ? "attributes: " : "; ", attribute_name(id), value_only(id, ra[k]),
                       value_only(id, rb[k]));
  }
  return out;
}

std::string shape_text(const CUDA_KERNEL_NODE_PARAMS& p) {
  return fmt::format("grid {}x{}x{} block {}x{}x{}", p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                     p.blockDimZ);
}

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  return compare_kernel_snapshots(read_kernel_snapshot(a), read_kernel_snapshot(b));
}

cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  const auto p = read_kernel_node(source);
  if (!p) return cudaErrorInvalidValue;
  const CUresult rc = driver::exec_kernel_node_set_params(reinterpret_cast<CUgraphExec>(exec),
                                                          reinterpret_cast<CUgraphNode>(target), &*p);
  return rc == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

void describe(cudaGraphNode_t n, node_description& d, const graph_state*) {
  const kernel_snapshot snap = read_kernel_snapshot(n, false); // one read: the launch and the argument bytes
  if (!snap.readable) return;                                  // the driver cannot read it: the kind only
  const CUDA_KERNEL_NODE_PARAMS* p = &snap.params;
  d.kernel_name = kernel_name(*p);
  d.device = context_device(p->ctx);
  d.grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
  d.block = {p->blockDimX, p->blockDimY, p->blockDimZ};
  d.shared_bytes = p->sharedMemBytes;
  const auto reads = read_attributes(n, read_attribute(n, cudaLaunchAttributeClusterDimension));
  for (std::size_t k = 0; k < std::size(node_attributes); ++k)
    if (!is_default(node_attributes[k], reads[k])) d.attributes.push_back(value_text(node_attributes[k], reads[k]));
  add_kernel_buffers(d, snap);
}

} // namespace

// True when `v` (attribute `id`, as the driver wrote it) holds what a node made without attributes holds, field by
// field as same_attribute_value compares (read for every attribute of every kernel node of a snapshot: no default value built
// for the common ones).
bool attribute_holds_default(cudaLaunchAttributeID id, const cudaLaunchAttributeValue& v) noexcept {
  const attribute_traits* t = attribute_traits_of(id);
  if (t != nullptr && t->holds_default != nullptr) return t->holds_default(v);
  // the cluster attributes, and IDs this version does not know field by field: all zero
  cudaLaunchAttributeValue none;
  std::memset(&none, 0, sizeof none);
  return same_attribute_value(id, v, none);
}

namespace {

// True when the node holds no value for the attribute, or the value a node made without attributes holds.
bool is_unset(cudaLaunchAttributeID id, const attribute_read& r) {
  return r.rc != cudaSuccess || attribute_holds_default(id, r.value);
}

} // namespace

void read_cluster_attributes(cudaGraphNode_t n, std::size_t position, std::vector<kernel_attribute>& out,
                             std::uint32_t inner) {
  const attribute_read cluster = read_attribute(n, cudaLaunchAttributeClusterDimension);
  if (!has_cluster(cluster)) return;
  out.push_back({position, inner, cudaLaunchAttributeClusterDimension, cluster.value});
  for (cudaLaunchAttributeID id :
       {cudaLaunchAttributeClusterSchedulingPolicyPreference, cudaLaunchAttributePreferredClusterDimension}) {
    const attribute_read r = read_attribute(n, id);
    if (!is_unset(id, r)) out.push_back({position, inner, id, r.value});
  }
}

void append_cluster_attributes(std::size_t position, const kernel_snapshot& k, std::vector<kernel_attribute>& out) {
  std::size_t next = 0;
  bool cluster = false;
  for (std::size_t a = 0; a < kernel_attribute_slots; ++a) {
    if ((k.set_attributes & (1U << a)) == 0) continue;
    const cudaLaunchAttributeValue& v = k.attribute_values[next++];
    const cudaLaunchAttributeID id = node_attributes[a];
    if (id == cudaLaunchAttributeClusterDimension) cluster = true;
    if (cluster && (id == cudaLaunchAttributeClusterDimension || cluster_only(id))) out.push_back({position, 0, id, v});
  }
}

std::optional<kernel_attribute> first_attribute_difference(const std::vector<kernel_attribute>& a,
                                                           const std::vector<kernel_attribute>& b) {
  auto place = [](const kernel_attribute& x) { return std::pair{x.position, x.inner}; };
  for (std::size_t k = 0; k < a.size() || k < b.size(); ++k) {
    if (k >= a.size()) return b[k];
    if (k >= b.size()) return a[k];
    if (place(a[k]) != place(b[k])) return place(a[k]) < place(b[k]) ? a[k] : b[k];
    if (a[k].id != b[k].id || !same_attribute_value(a[k].id, a[k].value, b[k].value)) return a[k];
  }
  return std::nullopt;
}

void kernel_fields(const kernel_snapshot& k, node_fields& out) {
  if (!k.readable || k.has_extra || !k.has_arguments || k.layout == nullptr) return;
  out.kernel = k.params;
  out.bytes = k.arguments.to_vector();
  out.fields.reserve(k.layout->size());
  for (const auto& [offset, bytes] : *k.layout)
    out.fields.emplace_back(static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(bytes));
  const auto& p = k.params;
  append_word(out.fixed, p.func);
  append_word(out.fixed, p.kern);
  append_word(out.fixed, p.ctx);
  for (unsigned v : {p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes})
    append_word(out.fixed, v);
  out.patchable = true;
}

namespace {

void read_fields(cudaGraphNode_t n, node_fields& out) { kernel_fields(read_kernel_snapshot(n, false), out); }

cudaError_t set_fields(cudaGraphExec_t exec, cudaGraphNode_t origin, node_fields& f) {
  f.argument_pointers.resize(f.fields.size());
  for (std::size_t k = 0; k < f.fields.size(); ++k) f.argument_pointers[k] = f.bytes.data() + f.fields[k].first;
  CUDA_KERNEL_NODE_PARAMS p = f.kernel;
  p.kernelParams = f.argument_pointers.data();
  p.extra = nullptr;
  return driver::exec_kernel_node_set_params(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUgraphNode>(origin),
                                             &p) == CUDA_SUCCESS
             ? cudaSuccess
             : cudaErrorInvalidValue;
}

std::string field_name(std::size_t k) { return fmt::format("kernel parameter {}", k); }

} // namespace

namespace {
// A copy through the driver (library kernels are driver functions), with the node's launch attributes.
cudaError_t add_copy(cudaGraphNode_t n, cudaGraph_t target, cudaGraphNode_t* out) {
  CUDA_KERNEL_NODE_PARAMS p{};
  if (driver::kernel_node_get_params(reinterpret_cast<CUgraphNode>(n), &p) != CUDA_SUCCESS)
    return cudaErrorInvalidValue;
  CUgraphNode made = nullptr;
  if (driver::add_kernel_node(&made, reinterpret_cast<CUgraph>(target), nullptr, 0, &p) != CUDA_SUCCESS)
    return cudaErrorInvalidValue;
  *out = reinterpret_cast<cudaGraphNode_t>(made);
  return driver::kernel_node_copy_attributes(made, reinterpret_cast<CUgraphNode>(n)) == CUDA_SUCCESS
             ? cudaSuccess
             : cudaErrorInvalidValue;
}

// What only the CUDA graph shows of the device-graph rules (CUDA Programming Guide, "Device Graph Requirements"): the
// nodes of a device graph are all on one device, the current context `ctx`'s (not checked when null). A node the
// driver cannot read, or one without a context, is left to CUDA's instantiation.
device_launch_rule device_launch_check(cudaGraphNode_t n, CUcontext ctx, std::string_view) {
  if (ctx == nullptr) return {};
  const auto params = read_kernel_node(n);
  if (!params || params->ctx == nullptr || params->ctx == ctx) return {};
  return {"the nodes of a device graph must all be on one device; this kernel node belongs to another CUDA context "
          "(device) than the current one",
          "build one device graph per device, and instantiate each with its device current"};
}
} // namespace

extern const keep_facets kernel_keep; // below: graph files

extern const kind_traits kernel_kind{
    .kind = node_kind::kernel,
    .name = "kernel",
    .allowed_in_body = true,
    .has_builder = true,
    .comparable = true,
    .work = true,
    .dot_colour = "#cfe2f3",
    .shows = shows_launch,
    .device_launch_check = &device_launch_check,
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .read_fields = &read_fields,
    .set_fields = &set_fields,
    .field_name = &field_name,
    .add_copy = &add_copy,
    .keep = &kernel_keep,
};

kernel_snapshot read_kernel_snapshot(cudaGraphNode_t node, bool attributes) {
  kernel_snapshot s;
  read_kernel_snapshot_into(node, s, attributes);
  return s;
}

namespace {
// The argument bytes at their offsets, where the node holds kernelParams and the kernel's layout is known.
void copy_arguments(kernel_snapshot& s) {
  s.layout = parameter_layout_ref(s.params);
  if (s.layout == nullptr) return;
  std::size_t size = 0;
  for (const auto& [offset, bytes] : *s.layout) size = std::max(size, offset + bytes);
  s.arguments.resize(size);
  for (std::size_t i = 0; i < s.layout->size(); ++i)
    std::memcpy(s.arguments.data() + (*s.layout)[i].first, s.params.kernelParams[i], (*s.layout)[i].second);
}

// Stores the value of attribute slot `k` in the snapshot.
void keep_attribute(kernel_snapshot& s, std::size_t k, const cudaLaunchAttributeValue& v) {
  s.set_attributes |= 1U << k;
  s.attribute_values.push_back(v);
}

// Reads attribute `id` of `cu` into `v`, unless the driver does not support it (`unsupported`, learnt at the first
// failing read) or it only acts with clusters and the node has none (`clusters` false). False when not read.
bool read_unless_skipped(CUgraphNode cu, cudaLaunchAttributeID id, std::uint32_t unsupported, bool clusters,
                         cudaLaunchAttributeValue& v) {
  const std::uint32_t bit = 1U << static_cast<unsigned>(id);
  if ((unsupported & bit) != 0 || (cluster_only(id) && !clusters)) return false;
  std::memset(&v, 0, sizeof v); // the union's other bytes are not the driver's to write (compared for other IDs)
  if (driver::kernel_node_get_attribute(cu, static_cast<CUlaunchAttributeID>(id),
                                        reinterpret_cast<CUlaunchAttributeValue*>(&v)) != CUDA_SUCCESS) {
    if (!cluster_only(id)) unsupported_ids.fetch_or(bit, std::memory_order_relaxed);
    return false;
  }
  return true;
}

// The launch attributes of `node` that hold something other than a node made without attributes holds, one read
// at a time into one value, in node_attributes' order (most nodes: none, nothing stored). The cluster dimension is
// read first: the attributes that only act with clusters are read only from a node that has them.
void read_set_attributes(cudaGraphNode_t node, kernel_snapshot& s) {
  const auto cu = reinterpret_cast<CUgraphNode>(node);
  const attribute_read cluster = read_attribute(node, cudaLaunchAttributeClusterDimension);
  const bool clusters = has_cluster(cluster);
  const std::uint32_t unsupported = unsupported_ids.load(std::memory_order_relaxed);
  cudaLaunchAttributeValue v;
  for (std::size_t k = 0; k < std::size(node_attributes); ++k) {
    const cudaLaunchAttributeID id = node_attributes[k];
    if (id == cudaLaunchAttributeClusterDimension) {
      if (!is_unset(id, cluster)) keep_attribute(s, k, cluster.value);
      continue;
    }
    if (read_unless_skipped(cu, id, unsupported, clusters, v) && !attribute_holds_default(id, v))
      keep_attribute(s, k, v);
  }
}
} // namespace

void read_kernel_snapshot_into(cudaGraphNode_t node, kernel_snapshot& s, bool attributes) {
  if (driver::kernel_node_get_params(reinterpret_cast<CUgraphNode>(node), &s.params) != CUDA_SUCCESS) return;
  s.readable = true;
  s.has_extra = s.params.extra != nullptr;
  s.has_arguments = s.params.kernelParams != nullptr;
  if (!s.has_extra && s.has_arguments) copy_arguments(s);
  s.params.kernelParams = nullptr;
  s.params.extra = nullptr;
  if (attributes) read_set_attributes(node, s);
}

namespace {
// The attributes of a snapshot as reads: the value a node made without attributes holds where its bit is clear
// (so that messages say "0% -> 50%").
std::array<attribute_read, kernel_attribute_slots> attribute_reads(const kernel_snapshot& s) {
  std::array<attribute_read, kernel_attribute_slots> out{};
  std::size_t next = 0;
  for (std::size_t k = 0; k < kernel_attribute_slots; ++k) {
    out[k].rc = cudaSuccess;
    std::memset(&out[k].value, 0, sizeof out[k].value);
    if ((s.set_attributes & (1U << k)) == 0) {
      if (node_attributes[k] == cudaLaunchAttributeMemSyncDomainMap) out[k].value.memSyncDomainMap.remote = 1;
      continue;
    }
    out[k].value = s.attribute_values[next++];
  }
  return out;
}
} // namespace

namespace {

// compare_kernel_snapshots' findings: what differs, and whether per-node setters and whole-graph updates apply it.
struct kernel_changes {
  std::vector<std::string> what;
  bool settable = true;
  bool comparable = true;
  bool updatable = true;
};

// The findings as a comparison's answer: "; " between them.
param_diff as_diff(const kernel_changes& c) {
  if (c.what.empty()) return param_diff::same();
  return {true, c.comparable, c.settable && c.comparable, c.updatable, fmt::format("{}", fmt::join(c.what, "; "))};
}

// Appends parameter `i` to a list of parameters, "0, 2".
void add_index(std::string& list, std::size_t i) { list += fmt::format("{}{}", list.empty() ? "" : ", ", i); }

bool same_function(const CUDA_KERNEL_NODE_PARAMS& a, const CUDA_KERNEL_NODE_PARAMS& b) {
  return a.func == b.func && a.kern == b.kern;
}

bool same_shape(const CUDA_KERNEL_NODE_PARAMS& a, const CUDA_KERNEL_NODE_PARAMS& b) {
  return a.gridDimX == b.gridDimX && a.gridDimY == b.gridDimY && a.gridDimZ == b.gridDimZ &&
         a.blockDimX == b.blockDimX && a.blockDimY == b.blockDimY && a.blockDimZ == b.blockDimZ;
}

// Context, function, launch shape and dynamic shared memory.
void compare_launch(const CUDA_KERNEL_NODE_PARAMS& pa, const CUDA_KERNEL_NODE_PARAMS& pb, kernel_changes& c) {
  if (pa.ctx != pb.ctx) {
    c.what.emplace_back("context (device)");
    c.settable = false; // CUDA: the owning context of a kernel node cannot change
  }
  if (!same_function(pa, pb)) c.what.push_back(fmt::format("function {} -> {}", kernel_name(pa), kernel_name(pb)));
  if (!same_shape(pa, pb)) c.what.push_back(fmt::format("launch shape {} -> {}", shape_text(pa), shape_text(pb)));
  if (pa.sharedMemBytes != pb.sharedMemBytes)
    c.what.push_back(fmt::format("dynamic shared memory {} -> {} B", pa.sharedMemBytes, pb.sharedMemBytes));
}

// The node's arguments are not in kernelParams (passed through 'extra', or none).
bool without_kernel_params(const kernel_snapshot& s) { return s.has_extra || !s.has_arguments; }

// The parameters whose bytes differ, through `a`'s layout: "0, 2".
std::string differing_parameters(const kernel_snapshot& a, const kernel_snapshot& b) {
  std::string args;
  for (std::size_t i = 0; i < a.layout->size(); ++i) {
    const auto [offset, size] = (*a.layout)[i];
    if (std::memcmp(a.arguments.data() + offset, b.arguments.data() + offset, size) != 0) add_index(args, i);
  }
  return args;
}

// The argument bytes, parameter by parameter through the layout ("arguments 0, 2").
void compare_arguments(const kernel_snapshot& a, const kernel_snapshot& b, kernel_changes& c) {
  if (without_kernel_params(a) || without_kernel_params(b)) {
    c.what.emplace_back("arguments passed through 'extra' (not comparable)");
    c.comparable = false;
  } else if (!same_function(a.params, b.params)) {
    c.what.emplace_back("arguments"); // another function: its arguments are set with it
  } else if (a.layout == nullptr || b.layout == nullptr) {
    c.what.emplace_back("arguments (layout unknown: not comparable)");
    c.comparable = false;
  } else if (a.arguments != b.arguments) {
    c.what.push_back("arguments " + differing_parameters(a, b));
  }
}

// The launch attributes. Per-node kernel setters keep the executable node's attributes, and a whole-graph update
// does not reliably apply them either (seen on the H200, driver 580: after the first launch, cudaGraphExecUpdate
// reports success for new cluster dimensions and the replays keep the old ones): only a new instantiation is safe.
void compare_attributes(const kernel_snapshot& a, const kernel_snapshot& b, kernel_changes& c) {
  if (a.set_attributes == 0 && b.set_attributes == 0) return;
  std::string attributes = attribute_changes(attribute_reads(a), attribute_reads(b));
  if (attributes.empty()) return;
  c.what.push_back(std::move(attributes));
  c.settable = false;
  c.updatable = false;
}

} // namespace

param_diff compare_kernel_snapshots(const kernel_snapshot& a, const kernel_snapshot& b) {
  if (!a.readable || !b.readable) return param_diff::unknown("kernel parameters unreadable (not comparable)");
  kernel_changes c;
  compare_launch(a.params, b.params, c);
  compare_arguments(a, b, c);
  compare_attributes(a, b, c);
  return as_diff(c);
}

std::optional<CUDA_KERNEL_NODE_PARAMS> read_kernel_node(cudaGraphNode_t node) {
  CUDA_KERNEL_NODE_PARAMS p{};
  if (driver::kernel_node_get_params(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return std::nullopt;
  return p;
}

std::string kernel_name(const CUDA_KERNEL_NODE_PARAMS& params) {
  const char* name = nullptr;
  if (params.func != nullptr && driver::func_get_name(&name, params.func) == CUDA_SUCCESS && name != nullptr)
    return readable_kernel_name(name);
  if (params.kern != nullptr && driver::kernel_get_name(&name, params.kern) == CUDA_SUCCESS && name != nullptr)
    return readable_kernel_name(name);
  return {};
}

std::string kernel_name(cudaGraphNode_t node) {
  const auto p = read_kernel_node(node);
  return p ? kernel_name(*p) : std::string{};
}

namespace {
using layout_t = std::vector<std::pair<std::size_t, std::size_t>>;
struct layout_cache {
  std::mutex mutex;
  // Node-based: an entry's address stays valid while others are added (callers keep pointers to it).
  std::unordered_map<const void*, std::optional<layout_t>> entries;
  // Entries forgotten (forget_parameter_layouts): kept, since callers may still hold pointers into them.
  std::vector<std::unordered_map<const void*, std::optional<layout_t>>> retired;
  std::atomic<std::uint64_t> generation{0};
};
layout_cache& layouts() {
  static layout_cache* c = new layout_cache; // never destroyed: kernels may be read during static destruction
  return *c;
}

// The kernel's parameters as (offset, size), from the driver; nothing when it cannot tell.
std::optional<layout_t> read_parameter_layout(const CUDA_KERNEL_NODE_PARAMS& p) {
  layout_t out;
  for (std::size_t i = 0;; ++i) {
    std::size_t offset = 0;
    std::size_t size = 0;
    const CUresult rc = p.func != nullptr ? driver::func_get_param_info(p.func, i, &offset, &size)
                                          : driver::kernel_get_param_info(p.kern, i, &offset, &size);
    if (rc == CUDA_ERROR_INVALID_VALUE) break; // past the last parameter
    if (rc != CUDA_SUCCESS) return std::nullopt;
    out.emplace_back(offset, size);
  }
  return out;
}
} // namespace

void forget_parameter_layouts() noexcept {
  auto& c = layouts();
  std::lock_guard lock(c.mutex);
  try {
    c.retired.push_back(std::move(c.entries));
  } catch (...) { // std::bad_alloc: the entries are dropped instead (no caller keeps one across an unload)
  }
  c.entries.clear();
  c.generation.fetch_add(1, std::memory_order_release);
}

const std::vector<std::pair<std::size_t, std::size_t>>* parameter_layout_ref(const CUDA_KERNEL_NODE_PARAMS& p) {
  auto& c = layouts();
  const void* key = p.func != nullptr ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
  if (key == nullptr) return nullptr;
  // The last function this thread asked for: a graph of thousands of nodes usually runs few kernels, and entries
  // are never freed (their addresses stay valid), so the answer can be kept without the lock — until a library is
  // unloaded (forget_parameter_layouts), after which a handle may name another kernel.
  thread_local const void* last_key = nullptr;
  thread_local const layout_t* last = nullptr;
  thread_local std::uint64_t last_generation = 0;
  const std::uint64_t generation = c.generation.load(std::memory_order_acquire);
  if (key == last_key && generation == last_generation) return last;
  std::lock_guard lock(c.mutex);
  last_generation = generation;
  if (auto it = c.entries.find(key); it != c.entries.end()) {
    last_key = key;
    last = it->second ? &*it->second : nullptr;
    return last;
  }
  const auto& entry = c.entries[key] = read_parameter_layout(p);
  return entry ? &*entry : nullptr;
}

namespace {
// The runtime's kernel node parameters of a launch of `function` with `cfg` and `arguments` (no `extra`).
cudaKernelNodeParams kernel_params(const launch_config& cfg, const void* function, void** arguments) noexcept {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(function);
  p.gridDim = cfg.grid;
  p.blockDim = cfg.block;
  p.sharedMemBytes = static_cast<unsigned>(cfg.shared_bytes);
  p.kernelParams = arguments;
  return p;
}
} // namespace

cudaGraphNode_t add_kernel(cudaGraph_t g, node_handles deps, const launch_config& cfg, const void* function,
                           void** arguments) {
  const cudaKernelNodeParams params = kernel_params(cfg, function, arguments);
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddKernelNode(&n, g, deps.data(), deps.size(), &params));
  if (cfg.priority != 0) {
    cudaLaunchAttributeValue value{};
    value.priority = cfg.priority;
    const cudaError_t rc = cudaGraphKernelNodeSetAttribute(n, cudaLaunchAttributePriority, &value);
    if (rc != cudaSuccess) {
      (void)cudaGraphDestroyNode(n);
      check_with(rc, "cudaGraphKernelNodeSetAttribute(cudaLaunchAttributePriority)",
                 [&] { return "priority " + std::to_string(cfg.priority); });
    }
  }
  return n;
}

kernel_setting read_kernel_setting(cudaGraphNode_t node) {
  cudaKernelNodeParams p{};
  CONVEYOR_CHECK(cudaGraphKernelNodeGetParams(node, &p));
  return {p.func, {p.gridDim, p.blockDim, p.sharedMemBytes}};
}

cudaError_t set_exec_kernel(cudaGraphExec_t exec, cudaGraphNode_t node, const launch_config& cfg, const void* function,
                            void** arguments) noexcept {
  const cudaKernelNodeParams p = kernel_params(cfg, function, arguments);
  return cudaGraphExecKernelNodeSetParams(exec, node, &p);
}

cudaError_t set_graph_kernel(cudaGraphNode_t node, const launch_config& cfg, const void* function,
                             void** arguments) noexcept {
  const cudaKernelNodeParams p = kernel_params(cfg, function, arguments);
  return cudaGraphKernelNodeSetParams(node, &p);
}

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

// A launch attribute as the file's numbers (docs/graph-files.md, "Launch attributes"), and back.
saved_attribute to_saved(cudaLaunchAttributeID id, const cudaLaunchAttributeValue& v, keep_saver& s) {
  saved_attribute a;
  a.id = static_cast<std::uint32_t>(id);
  switch (id) {
  case cudaLaunchAttributeAccessPolicyWindow: {
    const auto& w = v.accessPolicyWindow;
    a.values = {static_cast<std::int64_t>(w.num_bytes), w.hitProp, w.missProp};
    a.ratio = w.hitRatio;
    a.address = s.address(w.base_ptr, w.num_bytes, "access policy window");
    return a;
  }
  case cudaLaunchAttributeCooperative: a.values = {v.cooperative}; return a;
  case cudaLaunchAttributeClusterDimension: a.values = {v.clusterDim.x, v.clusterDim.y, v.clusterDim.z}; return a;
  case cudaLaunchAttributeClusterSchedulingPolicyPreference: a.values = {v.clusterSchedulingPolicyPreference}; return a;
  case cudaLaunchAttributePriority: a.values = {v.priority}; return a;
  case cudaLaunchAttributeMemSyncDomainMap:
    a.values = {v.memSyncDomainMap.default_, v.memSyncDomainMap.remote};
    return a;
  case cudaLaunchAttributeMemSyncDomain: a.values = {v.memSyncDomain}; return a;
  case cudaLaunchAttributePreferredClusterDimension:
    a.values = {v.preferredClusterDim.x, v.preferredClusterDim.y, v.preferredClusterDim.z};
    return a;
  case cudaLaunchAttributeDeviceUpdatableKernelNode: a.values = {v.deviceUpdatableKernelNode.deviceUpdatable}; return a;
  case cudaLaunchAttributePreferredSharedMemoryCarveout: a.values = {v.sharedMemCarveout}; return a;
  default: break;
  }
  if (static_cast<int>(id) == 16) { // cudaLaunchAttributeNvlinkUtilCentricScheduling (CUDA 13): one unsigned int
    unsigned word = 0;
    std::memcpy(&word, &v, sizeof word);
    a.values = {word};
    return a;
  }
  s.refuse(
      fmt::format("it holds launch attribute {}, which graph files of this version do not know", static_cast<int>(id)),
      "clear the attribute before saving, or use a newer Conveyor");
}

cudaLaunchAttributeValue from_saved(const saved_attribute& a, void* window_base) {
  cudaLaunchAttributeValue v;
  std::memset(&v, 0, sizeof v);
  const auto& x = a.values;
  auto u = [&](std::size_t i) { return static_cast<unsigned>(x[i]); };
  switch (static_cast<cudaLaunchAttributeID>(a.id)) {
  case cudaLaunchAttributeAccessPolicyWindow:
    v.accessPolicyWindow.base_ptr = window_base;
    v.accessPolicyWindow.num_bytes = static_cast<std::size_t>(x[0]);
    v.accessPolicyWindow.hitRatio = static_cast<float>(a.ratio);
    v.accessPolicyWindow.hitProp = static_cast<cudaAccessProperty>(x[1]);
    v.accessPolicyWindow.missProp = static_cast<cudaAccessProperty>(x[2]);
    break;
  case cudaLaunchAttributeCooperative: v.cooperative = static_cast<int>(x[0]); break;
  case cudaLaunchAttributeClusterDimension: v.clusterDim = {u(0), u(1), u(2)}; break;
  case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    v.clusterSchedulingPolicyPreference = static_cast<cudaClusterSchedulingPolicy>(x[0]);
    break;
  case cudaLaunchAttributePriority: v.priority = static_cast<int>(x[0]); break;
  case cudaLaunchAttributeMemSyncDomainMap:
    v.memSyncDomainMap.default_ = static_cast<unsigned char>(x[0]);
    v.memSyncDomainMap.remote = static_cast<unsigned char>(x[1]);
    break;
  case cudaLaunchAttributeMemSyncDomain: v.memSyncDomain = static_cast<cudaLaunchMemSyncDomain>(x[0]); break;
  case cudaLaunchAttributePreferredClusterDimension: v.preferredClusterDim = {u(0), u(1), u(2)}; break;
  case cudaLaunchAttributeDeviceUpdatableKernelNode:
    v.deviceUpdatableKernelNode.deviceUpdatable = static_cast<int>(x[0]);
    break;
  case cudaLaunchAttributePreferredSharedMemoryCarveout: v.sharedMemCarveout = u(0); break;
  default: {
    const unsigned word = u(0); // cudaLaunchAttributeNvlinkUtilCentricScheduling: one unsigned int
    std::memcpy(&v, &word, sizeof word);
  }
  }
  return v;
}

void save_kernel(cudaGraphNode_t n, const graph_state*, keep_saver& s, saved_node& out) {
  const kernel_snapshot k = read_kernel_snapshot(n, true);
  if (!k.readable) s.refuse("the driver cannot read its parameters", "report it: every kernel node should be readable");
  if (k.has_extra)
    s.refuse("its arguments are passed through 'extra' (a packed buffer whose layout is not known)",
             "launch the kernel with kernelParams (the <<<>>> syntax, cudaLaunchKernel, conveyor::launch)");
  if (k.layout == nullptr)
    s.refuse("the driver does not give its parameter layout (cuFuncGetParamInfo)",
             "use a driver of CUDA 12.4 or newer");
  saved_kernel_node kn;
  const auto& p = k.params;
  kn.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
  kn.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
  kn.shared_bytes = p.sharedMemBytes;
  kn.device = std::max(context_device(p.ctx), 0);
  s.kernel(k, kn);
  std::size_t next = 0;
  for (std::size_t a = 0; a < kernel_attribute_slots; ++a)
    if ((k.set_attributes & (1U << a)) != 0)
      kn.attributes.push_back(to_saved(node_attributes[a], k.attribute_values[next++], s));
  std::sort(kn.attributes.begin(), kn.attributes.end(), [](const auto& x, const auto& y) { return x.id < y.id; });
  out.parameters = std::move(kn);
}

cudaGraphNode_t load_kernel(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  const auto& k = std::get<saved_kernel_node>(n.parameters);
  std::vector<unsigned char> arguments;
  std::vector<void*> pointers;
  CUDA_KERNEL_NODE_PARAMS p = l.kernel(k, arguments, pointers);
  p.gridDimX = k.grid[0];
  p.gridDimY = k.grid[1];
  p.gridDimZ = k.grid[2];
  p.blockDimX = k.block[0];
  p.blockDimY = k.block[1];
  p.blockDimZ = k.block[2];
  p.sharedMemBytes = k.shared_bytes;
  CUgraphNode made = nullptr;
  if (const CUresult rc = driver::add_kernel_node(&made, reinterpret_cast<CUgraph>(g),
                                                  reinterpret_cast<const CUgraphNode*>(deps.data()), deps.size(), &p);
      rc != CUDA_SUCCESS)
    throw_cuda(
        cudaErrorInvalidValue, "cuGraphAddKernelNode",
        fmt::format("driver error {}: the launch shape or shared memory is not valid for this kernel on this device",
                    static_cast<int>(rc)));
  const auto node = reinterpret_cast<cudaGraphNode_t>(made);
  for (const auto& a : k.attributes) {
    const cudaLaunchAttributeValue v =
        from_saved(a, a.id == cudaLaunchAttributeAccessPolicyWindow ? l.address(a.address) : nullptr);
    const auto id = static_cast<cudaLaunchAttributeID>(a.id);
    if (const cudaError_t rc = cudaGraphKernelNodeSetAttribute(node, id, &v); rc != cudaSuccess) {
      (void)cudaGraphDestroyNode(node);
      throw_cuda(rc, "cudaGraphKernelNodeSetAttribute", fmt::format("launch attribute {}", a.id));
    }
  }
  return node;
}

std::string saved_kernel_name(const graph_file& f, const saved_kernel_node& k) {
  return k.kernel < f.kernels.size() ? readable_kernel_name(f.kernels[k.kernel].name.c_str()) : std::string{};
}

void describe_saved(const saved_node& n, const graph_file& f, node_description& d) {
  const auto& k = std::get<saved_kernel_node>(n.parameters);
  d.kernel_name = saved_kernel_name(f, k);
  d.grid = k.grid;
  d.block = k.block;
  d.shared_bytes = k.shared_bytes;
  d.device = k.device;
  for (const auto& a : k.attributes) {
    attribute_read r;
    r.rc = cudaSuccess;
    std::memset(&r.value, 0, sizeof r.value);
    if (a.id != cudaLaunchAttributeAccessPolicyWindow) r.value = from_saved(a, nullptr);
    const auto id = static_cast<cudaLaunchAttributeID>(a.id);
    if (a.id == cudaLaunchAttributeAccessPolicyWindow)
      d.attributes.push_back(
          fmt::format("access policy window {} +{} B", saved_address_text(a.address, f), a.values[0]));
    else if (!is_default(id, r)) d.attributes.push_back(value_text(id, r));
  }
}

// The words of the argument bytes as the file means them: relocated words by what they point to (buffer name and
// offset, or condition), the rest by their bytes.
std::string argument_word(const saved_kernel_node& k, std::size_t offset, std::size_t size, const graph_file& f) {
  std::string out;
  for (const auto& r : k.relocations)
    if (r.offset >= offset && r.offset < offset + size)
      out += r.target == relocation_target::condition
                 ? fmt::format("@{}:condition {}", r.offset - offset, r.index)
                 : fmt::format("@{}:{}", r.offset - offset, saved_address_text({r.index, r.at}, f));
  out.append(reinterpret_cast<const char*>(k.arguments.data() + offset), size);
  return out;
}

bool same_saved_function(const saved_kernel_node& a, const saved_kernel_node& b, const saved_context& ctx) {
  return ctx.before->kernels[a.kernel].name == ctx.after->kernels[b.kernel].name;
}

// Device, function, launch shape and dynamic shared memory.
void compare_saved_launch(const saved_kernel_node& a, const saved_kernel_node& b, const saved_context& ctx,
                          kernel_changes& c) {
  if (a.device != b.device) {
    c.what.emplace_back(fmt::format("device {} -> {}", a.device, b.device));
    c.settable = false;
  }
  if (!same_saved_function(a, b, ctx))
    c.what.push_back(
        fmt::format("function {} -> {}", saved_kernel_name(*ctx.before, a), saved_kernel_name(*ctx.after, b)));
  if (a.grid != b.grid || a.block != b.block)
    c.what.push_back(fmt::format("launch shape grid {}x{}x{} block {}x{}x{} -> grid {}x{}x{} block {}x{}x{}", a.grid[0],
                                 a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2], b.grid[0], b.grid[1],
                                 b.grid[2], b.block[0], b.block[1], b.block[2]));
  if (a.shared_bytes != b.shared_bytes)
    c.what.push_back(fmt::format("dynamic shared memory {} -> {} B", a.shared_bytes, b.shared_bytes));
}

// The argument words, parameter by parameter through the layout ("arguments 0, 2").
void compare_saved_arguments(const saved_kernel_node& a, const saved_kernel_node& b, const saved_context& ctx,
                             kernel_changes& c) {
  if (!same_saved_function(a, b, ctx)) {
    c.what.emplace_back("arguments");
    return;
  }
  std::string args;
  const auto& layout = ctx.before->kernels[a.kernel].parameters;
  for (std::size_t i = 0; i < layout.size(); ++i)
    if (argument_word(a, layout[i].first, layout[i].second, *ctx.before) !=
        argument_word(b, layout[i].first, layout[i].second, *ctx.after))
      add_index(args, i);
  if (!args.empty()) c.what.push_back("arguments " + args);
}

bool same_saved_attribute(const saved_attribute& x, const saved_attribute& y) {
  return x.id == y.id && x.values == y.values && x.ratio == y.ratio;
}

// The launch attributes, as saved and as described; only a new instantiation applies them (compare_attributes).
void compare_saved_attributes(const saved_node& na, const saved_node& nb, const saved_context& ctx, kernel_changes& c) {
  const auto& a = std::get<saved_kernel_node>(na.parameters).attributes;
  const auto& b = std::get<saved_kernel_node>(nb.parameters).attributes;
  node_description da;
  node_description db;
  describe_saved(na, *ctx.before, da);
  describe_saved(nb, *ctx.after, db);
  if (a.size() == b.size() && da.attributes == db.attributes &&
      std::equal(a.begin(), a.end(), b.begin(), same_saved_attribute))
    return;
  c.what.push_back(
      fmt::format("attributes: [{}] -> [{}]", fmt::join(da.attributes, ", "), fmt::join(db.attributes, ", ")));
  c.settable = false;
  c.updatable = false;
}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto& a = std::get<saved_kernel_node>(na.parameters);
  const auto& b = std::get<saved_kernel_node>(nb.parameters);
  kernel_changes c;
  compare_saved_launch(a, b, ctx, c);
  compare_saved_arguments(a, b, ctx, c);
  compare_saved_attributes(na, nb, ctx, c);
  return as_diff(c);
}

} // namespace

extern const keep_facets kernel_keep{
    .save = &save_kernel,
    .load = &load_kernel,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_kernel_node>,
};

} // namespace conveyor::detail
