// The cavity on several slabs of rows (`conveyor cavity --gpus N`, docs/cavity.md "Several GPUs"): the slab split
// and the halo exchange on the CPU (no GPU needed), then on the GPU: two and three slabs on one device (the
// multi-GPU code, halo copies included, on a one-GPU machine) and two slabs on two devices end bitwise in the
// one-slab state in every mode, stop at the same step, and build the graph of the expected shape.
#include "cavity/block_plan.hpp"
#include "cavity/kernels.hpp"
#include "cavity/lattice.hpp"
#include "cavity/parameters.hpp"
#include "cavity/reference_cpu.hpp"
#include "cavity/solver.hpp"

#include "support/cavity_steps.hpp"
#include "support/gpu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace conveyor::cavity;

using conveyor::test::fixed;

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- without a GPU ------------------------------------------------------------------------------------------------

TEST(CavitySlabs, RowsSplitEvenlyAndCoverTheLattice) {
  for (const int n : {16, 17, 65, 257, 4097})
    for (int count = 1; count <= max_slabs; ++count) {
      SCOPED_TRACE(std::to_string(n) + " rows, " + std::to_string(count) + " slabs");
      int next = 0;
      for (int s = 0; s < count; ++s) {
        const auto [begin, end] = slab_rows(n, count, s);
        EXPECT_EQ(begin, next);
        EXPECT_GE(end - begin, n / count);
        EXPECT_LE(end - begin, n / count + 1);
        const slab g = make_slab(n, count, s);
        EXPECT_EQ(g.row_begin, begin);
        EXPECT_EQ(g.rows, end - begin);
        EXPECT_EQ(g.first_row, s > 0 ? begin - 1 : begin);
        const int stored = g.rows + (s > 0 ? 1 : 0) + (s + 1 < count ? 1 : 0);
        EXPECT_EQ(g.plane, static_cast<std::size_t>(stored) * static_cast<std::size_t>(n));
        next = end;
      }
      EXPECT_EQ(next, n);
    }
  const slab whole = make_slab(257, 1, 0);
  const slab expected = whole_lattice(257);
  EXPECT_EQ(whole.row_begin, expected.row_begin);
  EXPECT_EQ(whole.rows, expected.rows);
  EXPECT_EQ(whole.first_row, expected.first_row);
  EXPECT_EQ(whole.plane, expected.plane);
  for (int i = 0; i < q; ++i) EXPECT_EQ(slab_index(257, whole, i, 3, 200), population_index(257, i, 3, 200));
}

TEST(CavitySlabs, ValidateChecksTheDevices) {
  cavity_options o;
  o.devices = {};
  EXPECT_THROW(validate(o), std::invalid_argument);
  o.devices = std::vector<int>(static_cast<std::size_t>(max_slabs) + 1, 0);
  EXPECT_THROW(validate(o), std::invalid_argument);
  o.devices = {0, -1};
  EXPECT_THROW(validate(o), std::invalid_argument);
  o.devices = {0, 0, 1};
  EXPECT_NO_THROW(validate(o));
  o.halo_copy = "3d";
  EXPECT_THROW(validate(o), std::invalid_argument);
  o.halo_copy = "1d";
  EXPECT_NO_THROW(validate(o));
}

// The decomposition the GPU runs, on the CPU: each slab steps its own rows from its own field with halo rows, then
// the halo exchange copies each boundary row's crossing populations (planes 2..6 upwards, 4..8 downwards, as the
// "2d" copies) into the neighbour's halo row. Bitwise the whole lattice's state after every step, for slab counts
// that split 37 rows unevenly, one-row slabs included.
TEST(CavitySlabs, CpuSlabsWithHaloExchangeAreBitwiseTheWholeLattice) {
  const cavity_options o = fixed(100, 37, 40, 20);
  const lattice_params p = make_lattice_params(o);
  const int n = p.n;
  for (const int count : {2, 3, 5, 37}) {
    SCOPED_TRACE(std::to_string(count) + " slabs");
    std::vector<float> whole_a(static_cast<std::size_t>(n) * n * q, 0.0F);
    std::vector<float> whole_b(whole_a.size(), 0.0F);
    const slab whole = whole_lattice(n);
    std::vector<slab> slabs;
    std::vector<std::vector<float>> fa;
    std::vector<std::vector<float>> fb;
    for (int s = 0; s < count; ++s) {
      slabs.push_back(make_slab(n, count, s));
      fa.emplace_back(slabs.back().plane * q, 0.0F);
      fb.emplace_back(slabs.back().plane * q, 0.0F);
    }
    for (int step = 1; step <= 40; ++step) {
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) stream_collide_cell(whole_a.data(), whole_b.data(), p, whole, x, y);
      std::swap(whole_a, whole_b);
      for (int s = 0; s < count; ++s) {
        const slab& g = slabs[static_cast<std::size_t>(s)];
        for (int y = g.row_begin; y < g.row_begin + g.rows; ++y)
          for (int x = 0; x < n; ++x)
            stream_collide_cell(fa[static_cast<std::size_t>(s)].data(), fb[static_cast<std::size_t>(s)].data(), p, g, x,
                                y);
      }
      std::swap(fa, fb);
      for (int s = 0; s + 1 < count; ++s) {
        const slab& lo = slabs[static_cast<std::size_t>(s)];
        const slab& hi = slabs[static_cast<std::size_t>(s) + 1];
        const int boundary = hi.row_begin;
        for (int i = 2; i <= 6; ++i) // row boundary - 1 of slab s into slab s + 1's lower halo row
          for (int x = 0; x < n; ++x)
            fa[static_cast<std::size_t>(s) + 1][slab_index(n, hi, i, x, boundary - 1)] =
                fa[static_cast<std::size_t>(s)][slab_index(n, lo, i, x, boundary - 1)];
        for (int i = 4; i <= 8; ++i) // row boundary of slab s + 1 into slab s's upper halo row
          for (int x = 0; x < n; ++x)
            fa[static_cast<std::size_t>(s)][slab_index(n, lo, i, x, boundary)] =
                fa[static_cast<std::size_t>(s) + 1][slab_index(n, hi, i, x, boundary)];
      }
    }
    std::size_t differing = 0;
    for (int s = 0; s < count; ++s) {
      const slab& g = slabs[static_cast<std::size_t>(s)];
      for (int i = 0; i < q; ++i)
        for (int y = g.row_begin; y < g.row_begin + g.rows; ++y)
          for (int x = 0; x < n; ++x)
            if (std::memcmp(&fa[static_cast<std::size_t>(s)][slab_index(n, g, i, x, y)],
                            &whole_a[population_index(n, i, x, y)], sizeof(float)) != 0)
              ++differing;
    }
    EXPECT_EQ(differing, 0U);
  }
}

// The step through a slab (here the whole lattice as one) is the CPU reference's step: the slab indexing changes
// where values are, not how they are computed.
TEST(CavitySlabs, WholeLatticeSlabIsTheCpuReference) {
  const lattice_params p = make_lattice_params(fixed(100, 37, 40, 20));
  std::vector<float> a(static_cast<std::size_t>(p.n) * p.n * q, 0.0F);
  std::vector<float> b(a.size(), 0.0F);
  const slab whole = whole_lattice(p.n);
  for (int step = 0; step < 40; ++step) {
    for (int y = 0; y < p.n; ++y)
      for (int x = 0; x < p.n; ++x) stream_collide_cell(a.data(), b.data(), p, whole, x, y);
    std::swap(a, b);
  }
  cpu_lattice reference(p);
  reference.step(40);
  EXPECT_TRUE(bitwise_equal(a, reference.populations()));
}

// ---- the block plan, run on the CPU ------------------------------------------------------------------------------

//! One slab's state in host memory, standing in for its device buffers.
struct host_slab {
  slab geometry;
  std::array<std::vector<float>, 2> f;
  std::vector<float> u_prev;
  convergence_state state{};
};

//! The value of kernel argument `i` of `c` as type T (the kernel_call's stored parameter values).
template <class T>
T arg(const kernel_call& c, int i) {
  T value;
  std::memcpy(&value, c.arguments[i], sizeof(T));
  return value;
}

//! Runs task `t` of a block plan on host memory, as the GPU would: the kernels through the same per-cell code.
void run_task(const task& t) {
  switch (t.kind) {
  case task_kind::copy:
    for (std::size_t h = 0; h < t.height; ++h)
      std::memcpy(static_cast<char*>(t.dst) + h * t.dst_pitch, static_cast<const char*>(t.src) + h * t.src_pitch,
                  t.width);
    return;
  case task_kind::zero_word: std::memset(t.dst, 0, sizeof(unsigned)); return;
  case task_kind::kernel: break;
  }
  const kernel_call& c = t.call;
  if (c.name == "stream_collide_flat_kernel" || c.name == "stream_collide_kernel") {
    const auto* src = arg<const float*>(c, 0);
    auto* dst = arg<float*>(c, 1);
    const auto p = arg<lattice_params>(c, 2);
    const auto s = arg<slab>(c, 3);
    for (int y = s.row_begin; y < s.row_begin + s.rows; ++y)
      for (int x = 0; x < p.n; ++x) stream_collide_cell(src, dst, p, s, x, y);
  } else if (c.name == "velocity_change_kernel") {
    const auto* f = arg<const float*>(c, 0);
    auto* u_prev = arg<float*>(c, 1);
    auto* state = arg<convergence_state*>(c, 2);
    const int n = arg<int>(c, 3);
    const auto s = arg<slab>(c, 4);
    for (int y = s.row_begin; y < s.row_begin + s.rows; ++y)
      for (int x = 0; x < n; ++x) {
        const std::size_t cell = static_cast<std::size_t>(y - s.row_begin) * n + x;
        const cell_moments m = moments(f, n, s, x, y);
        const float d = std::fmax(std::fabs(m.ux - u_prev[2 * cell]), std::fabs(m.uy - u_prev[2 * cell + 1]));
        unsigned bits = 0;
        std::memcpy(&bits, &d, sizeof(bits));
        state->max_change_bits = std::max(state->max_change_bits, bits);
        u_prev[2 * cell] = m.ux;
        u_prev[2 * cell + 1] = m.uy;
      }
  } else if (c.name == "publish_change_kernel") {
    auto* state = arg<convergence_state*>(c, 0);
    const auto* peers = arg<const unsigned*>(c, 1);
    const int count = arg<int>(c, 2);
    auto* slots = arg<float*>(c, 3);
    unsigned bits = state->max_change_bits;
    for (int i = 0; i < count; ++i) bits = std::max(bits, peers[i]);
    std::memcpy(&slots[state->block % 2U], &bits, sizeof(bits));
    state->max_change_bits = 0U;
    ++state->block;
  } else {
    FAIL() << "unexpected kernel " << c.name;
  }
}

//! The cavity from rest on `count` slabs of host memory, `blocks` blocks of the block plan, each block's tasks run
//! in a random order that respects only the plan's dependencies (seeded by `seed`; seed 0: the plan's own order).
//! Returns the published change of every block and the final state, gathered into the whole lattice.
struct plan_run {
  std::vector<float> published;
  std::vector<float> state;
  std::size_t tasks = 0;
};
plan_run run_plan(const lattice_params& p, int k, int count, bool per_population, int blocks, unsigned seed) {
  const int n = p.n;
  std::vector<host_slab> slabs(static_cast<std::size_t>(count));
  std::vector<slab_fields> fields;
  for (int s = 0; s < count; ++s) {
    host_slab& h = slabs[static_cast<std::size_t>(s)];
    h.geometry = count == 1 ? whole_lattice(n) : make_slab(n, count, s);
    h.f[0].assign(h.geometry.plane * q, 0.0F);
    h.f[1].assign(h.geometry.plane * q, 0.0F);
    h.u_prev.assign(2 * static_cast<std::size_t>(h.geometry.rows) * n, 0.0F);
    fields.push_back(slab_fields{h.geometry, {h.f[0].data(), h.f[1].data()}, h.u_prev.data(), &h.state});
  }
  std::vector<unsigned> peers(static_cast<std::size_t>(std::max(count - 1, 1)), 0U);
  std::array<float, 2> slots{};
  const std::vector<task> plan = make_block_plan(p, k, fields, per_population, peers.data(), slots.data());
  std::mt19937 random(seed);
  plan_run out;
  out.tasks = plan.size();
  for (int b = 0; b < blocks; ++b) {
    // Kahn's algorithm, picking a random ready task.
    std::vector<int> waiting(plan.size(), 0);
    std::vector<std::vector<int>> dependents(plan.size());
    for (std::size_t i = 0; i < plan.size(); ++i)
      for (const int d : plan[i].deps) {
        EXPECT_LT(static_cast<std::size_t>(d), i); // dependencies come earlier in the plan
        ++waiting[i];
        dependents[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
      }
    std::vector<int> ready;
    for (std::size_t i = 0; i < plan.size(); ++i)
      if (waiting[i] == 0) ready.push_back(static_cast<int>(i));
    std::size_t done = 0;
    while (!ready.empty()) {
      const std::size_t pick = seed == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(random);
      const int i = ready[pick];
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(pick));
      run_task(plan[static_cast<std::size_t>(i)]);
      ++done;
      for (const int d : dependents[static_cast<std::size_t>(i)])
        if (--waiting[static_cast<std::size_t>(d)] == 0)
          ready.insert(std::lower_bound(ready.begin(), ready.end(), d), d);
    }
    EXPECT_EQ(done, plan.size());
    out.published.push_back(slots[static_cast<std::size_t>(b % 2)]);
  }
  out.state.assign(static_cast<std::size_t>(n) * n * q, 0.0F);
  for (const host_slab& h : slabs)
    for (int i = 0; i < q; ++i)
      for (int y = h.geometry.row_begin; y < h.geometry.row_begin + h.geometry.rows; ++y)
        for (int x = 0; x < n; ++x)
          out.state[population_index(n, i, x, y)] = h.f[0][slab_index(n, h.geometry, i, x, y)];
  return out;
}

// The block plan (the tasks and dependencies solver.cpp enqueues and builds into the graph) run on the CPU: on one
// slab in its own order, it is the CPU reference; on 2, 3 and 5 slabs, with both halo copies, run in random orders
// that respect only the plan's dependencies (as a graph may run them), every block publishes bitwise the same change
// and ends in bitwise the same state. A missing dependency shows as a different state in some order.
TEST(CavitySlabs, BlockPlanInAnyDependencyOrderIsTheOneSlabRun) {
  const lattice_params p = make_lattice_params(fixed(100, 23, 12, 4));
  const int k = 4;
  const int blocks = 3;
  const plan_run one = run_plan(p, k, 1, false, blocks, 0);
  EXPECT_EQ(one.tasks, static_cast<std::size_t>(k + 2));
  cpu_lattice reference(p);
  reference.step(k * blocks);
  EXPECT_TRUE(bitwise_equal(one.state, reference.populations()));
  EXPECT_GT(one.published.back(), 0.0F);
  for (const int count : {2, 3, 5})
    for (const bool per_population : {false, true})
      for (const unsigned seed : {0U, 1U, 2U, 3U, 4U, 5U}) {
        SCOPED_TRACE(std::to_string(count) + " slabs, " + (per_population ? "1d" : "2d") + ", order " +
                     std::to_string(seed));
        const plan_run r = run_plan(p, k, count, per_population, blocks, seed);
        const std::size_t halos = 2 * static_cast<std::size_t>(count - 1) * k * (per_population ? 3 : 1);
        EXPECT_EQ(r.tasks, static_cast<std::size_t>(count * k) + halos + count + 2 * (count - 1) + 1);
        EXPECT_TRUE(bitwise_equal(r.state, one.state));
        ASSERT_EQ(r.published.size(), one.published.size());
        for (std::size_t b = 0; b < r.published.size(); ++b) EXPECT_EQ(r.published[b], one.published[b]) << b;
      }
}

// Every dependency on another slab's task is covered, in the eager modes, by an event: the task waits for the event
// of the latest task of that slab it depends on (stream order covers the earlier ones), and that task has one.
TEST(CavitySlabs, BlockPlanEventsCoverEveryCrossSlabDependency) {
  const lattice_params p = make_lattice_params(fixed(100, 23, 12, 4));
  for (const int count : {1, 2, 3, 5}) {
    std::vector<host_slab> slabs(static_cast<std::size_t>(count));
    std::vector<slab_fields> fields;
    for (int s = 0; s < count; ++s) {
      host_slab& h = slabs[static_cast<std::size_t>(s)];
      h.geometry = count == 1 ? whole_lattice(p.n) : make_slab(p.n, count, s);
      h.f[0].assign(h.geometry.plane * q, 0.0F);
      h.f[1].assign(h.geometry.plane * q, 0.0F);
      h.u_prev.assign(2 * static_cast<std::size_t>(h.geometry.rows) * p.n, 0.0F);
      fields.push_back(slab_fields{h.geometry, {h.f[0].data(), h.f[1].data()}, h.u_prev.data(), &h.state});
    }
    std::vector<unsigned> peers(static_cast<std::size_t>(count), 0U);
    std::array<float, 2> slots{};
    const std::vector<task> plan = make_block_plan(p, 4, fields, true, peers.data(), slots.data());
    std::size_t events = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      events += plan[i].waited_across ? 1 : 0;
      for (const int d : plan[i].deps) {
        const task& before = plan[static_cast<std::size_t>(d)];
        if (before.slab == plan[i].slab) continue;
        const bool covered = std::any_of(plan[i].deps.begin(), plan[i].deps.end(), [&](int e) {
          const task& other = plan[static_cast<std::size_t>(e)];
          return other.slab == before.slab && e >= d && other.waited_across;
        });
        EXPECT_TRUE(covered) << "task " << i << " (" << plan[i].label << ") after " << d << " (" << before.label << ")";
      }
    }
    if (count == 1) EXPECT_EQ(events, 0U); // one slab: one stream, no event
  }
  std::vector<slab_fields> none;
  EXPECT_THROW((void)make_block_plan(p, 4, none, false, nullptr, nullptr), std::invalid_argument);
}

// ---- on the GPU ---------------------------------------------------------------------------------------------------

// Two and three slabs on device 0 (unequal slabs: 65 = 32 + 33 = 21 + 22 + 22 rows) in every mode, both step layouts
// and both halo copies: bitwise the one-slab state, the same final change.
TEST(CavityMultiGpu, SlabsOnOneDeviceAreBitwiseTheOneSlabState) {
  CONVEYOR_REQUIRE_GPU();
  const cavity_options base = fixed(400, 65, 600, 100);
  const run_result reference = run_cavity(base, execution_mode::sync);
  ASSERT_EQ(reference.steps, 600);
  for (const std::vector<int>& devices : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0}})
    for (const auto mode : all_execution_modes) {
      SCOPED_TRACE(std::to_string(devices.size()) + " slabs, " + std::string(to_string(mode)));
      cavity_options o = base;
      o.devices = devices;
      const run_result r = run_cavity(o, mode);
      EXPECT_EQ(r.steps, 600);
      EXPECT_TRUE(bitwise_equal(r.populations, reference.populations));
      EXPECT_EQ(r.final_change, reference.final_change);
      EXPECT_TRUE(r.peer_access.empty()); // one distinct device: nothing to enable
    }
  for (const char* layout : {"rows", "flat"})
    for (const char* halo : {"2d", "1d"}) {
      SCOPED_TRACE(std::string(layout) + " layout, " + halo + " halo copies");
      cavity_options o = base;
      o.devices = {0, 0, 0};
      o.step_layout = layout;
      o.halo_copy = halo;
      const run_result r = run_cavity(o, execution_mode::graph);
      EXPECT_TRUE(bitwise_equal(r.populations, reference.populations));
    }
}

// --pdl with several slabs: programmatic edges only between the kernels of one slab; the same state.
TEST(CavityMultiGpu, ProgrammaticSlabsAreBitwiseTheOneSlabState) {
  CONVEYOR_REQUIRE_GPU();
  cavity_options o = fixed(400, 65, 600, 100);
  const run_result reference = run_cavity(o, execution_mode::sync);
  o.devices = {0, 0};
  o.programmatic = true;
  for (const auto mode : {execution_mode::stream, execution_mode::graph}) {
    SCOPED_TRACE(std::string(to_string(mode)));
    const run_result r = run_cavity(o, mode);
    EXPECT_TRUE(r.programmatic);
    EXPECT_TRUE(bitwise_equal(r.populations, reference.populations));
  }
}

// With a tolerance: the slabs' maxima combine into the one-slab maximum, so every run stops at the same block.
TEST(CavityMultiGpu, SlabsStopAtTheSameStep) {
  CONVEYOR_REQUIRE_GPU();
  cavity_options o = fixed(100, 33, 40000, 200);
  o.tol = 1e-6;
  const run_result a = run_cavity(o, execution_mode::graph);
  ASSERT_TRUE(a.converged);
  for (const std::vector<int>& devices : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0}})
    for (const auto mode : {execution_mode::stream, execution_mode::graph}) {
      SCOPED_TRACE(std::to_string(devices.size()) + " slabs, " + std::string(to_string(mode)));
      cavity_options m = o;
      m.devices = devices;
      const run_result b = run_cavity(m, mode);
      EXPECT_TRUE(b.converged);
      EXPECT_EQ(b.converged_at, a.converged_at);
      EXPECT_EQ(b.steps, a.steps);
      EXPECT_EQ(b.final_change, a.final_change);
      EXPECT_TRUE(bitwise_equal(b.populations, a.populations));
    }
}

// The graph of one block on N slabs with K steps: N K steps, 2 (N - 1) K halo copies (3 times as many with
// --halo-copy 1d), N velocity changes, N - 1 gathers and resets, one publish; every step after the first waits for
// its slab's previous step and the copies into its halo rows.
TEST(CavityMultiGpu, GraphShapeOnSlabs) {
  CONVEYOR_REQUIRE_GPU();
  const int k = 8;
  for (const int count : {2, 3})
    for (const char* halo : {"2d", "1d"}) {
      SCOPED_TRACE(std::to_string(count) + " slabs, " + halo);
      cavity_options o = fixed(100, 33, 16, k);
      o.devices = std::vector<int>(static_cast<std::size_t>(count), 0);
      o.halo_copy = halo;
      const std::size_t per_halo = std::string(halo) == "1d" ? 3 : 1;
      const std::size_t boundaries = static_cast<std::size_t>(count) - 1;
      const std::size_t copies = 2 * boundaries * k * per_halo;
      const run_result r = run_cavity(o, execution_mode::graph);
      EXPECT_EQ(r.graph_nodes, count * k + copies + count + 2 * boundaries + 1);
      EXPECT_EQ(r.graph_copies, copies + boundaries);
      // steps 2..K: the previous step, and per_halo copies from each neighbour (2 boundaries per inner slab)
      const std::size_t step_edges = (k - 1) * (count + 2 * boundaries * per_halo);
      EXPECT_EQ(r.graph_edges, step_edges + copies + count + 2 * boundaries + count);
      EXPECT_EQ(r.programmatic_edges, 0U);
      o.programmatic = true;
      const run_result pdl = run_cavity(o, execution_mode::graph);
      EXPECT_EQ(pdl.programmatic_edges, static_cast<std::size_t>(count * k + 1)); // within each slab's chain
      EXPECT_TRUE(bitwise_equal(pdl.populations, r.populations));
    }
}

// Two slabs on two devices (peer copies inside one cross-device graph), and the slabs swapped: bitwise the one-GPU
// state in every mode, on a lattice that splits unevenly (257 = 128 + 129).
TEST(CavityMultiGpu, TwoDevicesAreBitwiseTheOneDeviceState) {
  CONVEYOR_REQUIRE_GPUS(2);
  const cavity_options base = fixed(400, 257, 600, 100);
  const run_result reference = run_cavity(base, execution_mode::graph);
  for (const std::vector<int>& devices : {std::vector<int>{0, 1}, std::vector<int>{1, 0}})
    for (const auto mode : all_execution_modes) {
      SCOPED_TRACE("devices " + std::to_string(devices[0]) + "," + std::to_string(devices[1]) + ", " +
                   std::string(to_string(mode)));
      cavity_options o = base;
      o.devices = devices;
      const run_result r = run_cavity(o, mode);
      EXPECT_EQ(r.steps, 600);
      EXPECT_TRUE(bitwise_equal(r.populations, reference.populations));
      EXPECT_EQ(r.final_change, reference.final_change);
      EXPECT_EQ(r.peer_access.size(), 2U); // 0 -> 1 and 1 -> 0
    }
  for (const char* halo : {"1d", "2d"}) {
    SCOPED_TRACE(halo);
    cavity_options o = base;
    o.devices = {0, 1};
    o.halo_copy = halo;
    o.programmatic = true;
    const run_result r = run_cavity(o, execution_mode::graph);
    EXPECT_TRUE(bitwise_equal(r.populations, reference.populations));
  }
  cavity_options o = fixed(100, 33, 40000, 200);
  o.tol = 1e-6;
  const run_result one = run_cavity(o, execution_mode::graph);
  o.devices = {0, 1};
  const run_result two = run_cavity(o, execution_mode::graph);
  EXPECT_TRUE(two.converged);
  EXPECT_EQ(two.converged_at, one.converged_at);
  EXPECT_TRUE(bitwise_equal(two.populations, one.populations));
}

TEST(CavityMultiGpu, RefusesDevicesThatAreNotVisible) {
  CONVEYOR_REQUIRE_GPU();
  cavity_options o = fixed(100, 33, 16, 8);
  o.devices = {0, conveyor::device_count()};
  EXPECT_THROW((void)run_cavity(o, execution_mode::graph), std::invalid_argument);
}

} // namespace
