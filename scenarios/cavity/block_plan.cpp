//! \file block_plan.cpp
//! The tasks of one block of the cavity's work on its slabs.

#include "cavity/block_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace conveyor::cavity {

namespace {

//! Adds a task; returns its index.
int add(std::vector<task>& plan, task t) {
  plan.push_back(std::move(t));
  return static_cast<int>(plan.size()) - 1;
}

//! Adds the copies of row `y` of field `a` from slab `from` (which computes it) into slab `to` (whose halo row it
//! is): the populations with c_y = `cy`, after task `after`. Returns the tasks.
std::vector<int> add_halo(std::vector<task>& plan, int n, std::span<const slab_fields> slabs, bool per_population,
                          int from, int to, int a, int y, int cy, int after, int step) {
  std::vector<int> crossing;
  for (int i = 0; i < q; ++i)
    if (d2q9_cy(i) == cy) crossing.push_back(i);
  const slab_fields& src = slabs[static_cast<std::size_t>(from)];
  const slab_fields& dst = slabs[static_cast<std::size_t>(to)];
  const auto copy = [&](int first, int planes, const std::string& what) {
    task t;
    t.kind = task_kind::copy;
    t.slab = from;
    t.deps = {after};
    t.src = src.f[static_cast<std::size_t>(a)] + slab_index(n, src.geometry, first, 0, y);
    t.dst = dst.f[static_cast<std::size_t>(a)] + slab_index(n, dst.geometry, first, 0, y);
    t.src_pitch = src.geometry.plane * sizeof(float);
    t.dst_pitch = dst.geometry.plane * sizeof(float);
    t.width = static_cast<std::size_t>(n) * sizeof(float);
    t.height = static_cast<std::size_t>(planes);
    t.label = fmt::format("halo after step {}: row {} slab {} -> {} ({})", step, y, from, to, what);
    return add(plan, std::move(t));
  };
  std::vector<int> out;
  if (per_population) {
    for (const int i : crossing) out.push_back(copy(i, 1, fmt::format("population {}", i)));
  } else {
    out.push_back(copy(crossing.front(), crossing.back() - crossing.front() + 1,
                       fmt::format("populations {}..{}", crossing.front(), crossing.back())));
  }
  return out;
}

} // namespace

std::vector<task> make_block_plan(const lattice_params& p, int k, std::span<const slab_fields> slabs,
                                  bool per_population_halos, unsigned* peer_maxima, float* slots) {
  const int count = static_cast<int>(slabs.size());
  if (count < 1) throw std::invalid_argument("make_block_plan: no slab");
  if (k < 2 || k % 2 != 0) throw std::invalid_argument(fmt::format("make_block_plan: K = {} must be even and >= 2", k));
  if (count > 1 && peer_maxima == nullptr)
    throw std::invalid_argument("make_block_plan: several slabs need peer_maxima (one word per slab above the first)");
  const int n = p.n;
  std::vector<task> plan;
  std::vector<int> last_step(static_cast<std::size_t>(count), -1);
  std::vector<std::vector<int>> halo_in(static_cast<std::size_t>(count));
  for (int j = 1; j <= k; ++j) {
    const int from = (j - 1) % 2;
    const int to = j % 2;
    for (int s = 0; s < count; ++s) {
      const slab_fields& sl = slabs[static_cast<std::size_t>(s)];
      task t;
      t.slab = s;
      if (last_step[static_cast<std::size_t>(s)] >= 0) t.deps.push_back(last_step[static_cast<std::size_t>(s)]);
      for (const int h : halo_in[static_cast<std::size_t>(s)]) t.deps.push_back(h);
      t.call =
          stream_collide_call(sl.f[static_cast<std::size_t>(from)], sl.f[static_cast<std::size_t>(to)], p, sl.geometry);
      t.label = count == 1 ? fmt::format("step {} (f{} -> f{})", j, from, to)
                           : fmt::format("step {} slab {} (f{} -> f{})", j, s, from, to);
      last_step[static_cast<std::size_t>(s)] = add(plan, std::move(t));
      halo_in[static_cast<std::size_t>(s)].clear();
    }
    for (int s = 0; s + 1 < count; ++s) {
      const slab& below = slabs[static_cast<std::size_t>(s)].geometry;
      const int boundary = below.row_begin + below.rows; // the first row of slab s + 1
      for (const int c : add_halo(plan, n, slabs, per_population_halos, s, s + 1, to, boundary - 1, +1,
                                  last_step[static_cast<std::size_t>(s)], j))
        halo_in[static_cast<std::size_t>(s) + 1].push_back(c);
      for (const int c : add_halo(plan, n, slabs, per_population_halos, s + 1, s, to, boundary, -1,
                                  last_step[static_cast<std::size_t>(s) + 1], j))
        halo_in[static_cast<std::size_t>(s)].push_back(c);
    }
  }
  // The halo copies after step K fill field 0's halo rows for the next block's first step (graph launches, and the
  // eager blocks, run one after the other as a whole): nothing in this block waits for them.
  std::vector<int> publish_after;
  for (int s = 0; s < count; ++s) {
    const slab_fields& sl = slabs[static_cast<std::size_t>(s)];
    task t;
    t.slab = s;
    t.deps = {last_step[static_cast<std::size_t>(s)]};
    t.call = velocity_change_call(sl.f[0], sl.u_prev, sl.state, n, sl.geometry);
    t.label = count == 1 ? std::string("velocity change") : fmt::format("velocity change slab {}", s);
    const int change = add(plan, std::move(t));
    if (s == 0) {
      publish_after.push_back(change);
      continue;
    }
    task gather;
    gather.kind = task_kind::copy;
    gather.slab = s;
    gather.deps = {change};
    gather.src = &sl.state->max_change_bits;
    gather.dst = peer_maxima + (s - 1);
    gather.width = sizeof(unsigned);
    gather.label = fmt::format("gather change slab {}", s);
    const int gathered = add(plan, std::move(gather));
    publish_after.push_back(gathered);
    task zero;
    zero.kind = task_kind::zero_word;
    zero.slab = s;
    zero.deps = {gathered};
    zero.dst = &sl.state->max_change_bits;
    zero.label = fmt::format("reset change slab {}", s);
    (void)add(plan, std::move(zero));
  }
  task publish;
  publish.slab = 0;
  publish.deps = publish_after;
  publish.call = publish_change_call(slabs.front().state, count > 1 ? peer_maxima : nullptr, count - 1, slots);
  publish.label = "publish change";
  (void)add(plan, std::move(publish));

  for (std::size_t i = 0; i < plan.size(); ++i) {
    std::vector<int> latest(static_cast<std::size_t>(count), -1); // per other slab, the latest task waited for
    for (const int d : plan[i].deps) {
      const int s = plan[static_cast<std::size_t>(d)].slab;
      if (s != plan[i].slab) latest[static_cast<std::size_t>(s)] = std::max(latest[static_cast<std::size_t>(s)], d);
    }
    for (const int d : latest)
      if (d >= 0) plan[static_cast<std::size_t>(d)].waited_across = true;
  }
  return plan;
}

} // namespace conveyor::cavity
