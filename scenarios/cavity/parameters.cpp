//! \file parameters.cpp
//! Validation and derived constants of the cavity run.

#include "cavity/parameters.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace conveyor::cavity {

lattice_constants derive(const cavity_options& o) noexcept {
  lattice_constants c;
  c.nu = o.lid_speed * static_cast<double>(o.n) / o.re;
  c.tau = 3.0 * c.nu + 0.5;
  c.tau_minus = 0.5 + trt_magic / (c.tau - 0.5);
  c.mach = o.lid_speed * std::sqrt(3.0);
  c.cell_reynolds = o.re / static_cast<double>(o.n);
  c.convective_time = static_cast<double>(o.n) / o.lid_speed;
  return c;
}

std::pair<double, double> valid_reynolds_range(int n, double lid_speed) noexcept {
  return {lid_speed * static_cast<double>(n) / max_viscosity, max_cell_reynolds * static_cast<double>(n)};
}

invalid_options::invalid_options(const std::string& what) : std::invalid_argument(what) {}

namespace {

//! n, the lid speed and Re, alone and together (the relaxation time they give).
void validate_lattice(const cavity_options& o, const option_names& names) {
  if (o.n < min_cells || o.n > max_cells)
    throw invalid_options(fmt::format(
        "lattice size {} {} is outside [{}, {}]: fewer cells cannot resolve the primary vortex and its wall layers; "
        "more would take hours of time steps to converge and {:.1f} GiB or more of device memory (72 bytes per cell)",
        names.n, o.n, min_cells, max_cells, 72.0 * max_cells * max_cells / (1ULL << 30)));
  if (!(o.lid_speed >= min_lid_speed && o.lid_speed <= max_lid_speed))
    throw invalid_options(fmt::format(
        "lid speed {} {} is outside [{:g}, {}] (lattice units): the lattice Boltzmann method is accurate only at low "
        "Mach number, Ma = U sqrt(3) <= {:.2f}, and a slower lid needs more than n / {:g} time steps to cross the "
        "cavity once",
        names.lid_speed, o.lid_speed, min_lid_speed, max_lid_speed, max_lid_speed * std::sqrt(3.0), min_lid_speed));
  const auto [re_min, re_max] = valid_reynolds_range(o.n, o.lid_speed);
  if (!std::isfinite(o.re) || o.re <= 0.0)
    throw invalid_options(fmt::format("Reynolds number {} {} must be a positive finite number (valid for {} cells at "
                                      "lid speed {}: [{:g}, {:g}])",
                                      names.re, o.re, o.n, o.lid_speed, re_min, re_max));
  const lattice_constants c = derive(o);
  if (o.re > re_max)
    throw invalid_options(fmt::format(
        "Reynolds number {} {:g} is too high for {} cells: nu = U n / Re = {:.4g} gives the relaxation time "
        "tau = 3 nu + 1/2 = {:.5f}, too close to 1/2 (cell Reynolds number Re / n = {:.3g} > {:g}), so the run would "
        "be unstable and under-resolved. Valid for {} cells at lid speed {}: Re in [{:g}, {:g}]; {}",
        names.re, o.re, o.n, c.nu, c.tau, c.cell_reynolds, max_cell_reynolds, o.n, o.lid_speed, re_min, re_max,
        std::ceil(o.re / max_cell_reynolds) <= max_cells
            ? fmt::format("for Re {:g} use {} >= {}", o.re, names.n,
                          static_cast<long long>(std::ceil(o.re / max_cell_reynolds)))
            : fmt::format("Re {:g} would need more than the largest lattice, {} cells (at most Re {:g})", o.re,
                          max_cells, max_cell_reynolds * max_cells)));
  if (o.re < re_min)
    throw invalid_options(fmt::format(
        "Reynolds number {} {:g} is too low for {} cells at lid speed {}: nu = U n / Re = {:.4g} > {:g} gives the "
        "relaxation time tau = 3 nu + 1/2 = {:.4g} > {:g}, outside the hydrodynamic regime the method is accurate "
        "in. Valid for these settings: Re in [{:g}, {:g}]; for Re {:g} lower {} to <= {:.4g} or use fewer cells",
        names.re, o.re, o.n, o.lid_speed, c.nu, max_viscosity, c.tau, 3.0 * max_viscosity + 0.5, re_min, re_max, o.re,
        names.lid_speed, o.re * max_viscosity / static_cast<double>(o.n)));
}

//! K, the step cap and the tolerance.
void validate_run_length(const cavity_options& o, const option_names& names) {
  if (o.steps_per_graph < 2 || o.steps_per_graph > max_steps_per_graph || o.steps_per_graph % 2 != 0)
    throw invalid_options(fmt::format(
        "{} {} must be even and in [2, {}]: each time step swaps the two population arrays, so an even K leaves the "
        "current state in the same array after every graph",
        names.steps_per_graph, o.steps_per_graph, max_steps_per_graph));
  if (o.steps > max_run_steps)
    throw invalid_options(fmt::format("{} {} is more than the {} accepted", names.steps, o.steps, max_run_steps));
  if (o.steps < 0 || o.steps % o.steps_per_graph != 0)
    throw invalid_options(fmt::format(
        "{} {} must be a non-negative multiple of {} {} (time steps run in whole graphs of K steps); e.g. {}",
        names.steps, o.steps, names.steps_per_graph, o.steps_per_graph,
        o.steps < 0 ? std::int64_t{0} : (o.steps / o.steps_per_graph + 1) * o.steps_per_graph));
  if (!std::isfinite(o.tol) || o.tol < 0.0)
    throw invalid_options(
        fmt::format("{} {} must be finite and >= 0 (0: run exactly {})", names.tol, o.tol, names.steps));
  if (o.tol == 0.0 && o.steps == 0)
    throw invalid_options(fmt::format("{} 0 (no convergence stop) needs {} > 0", names.tol, names.steps));
}

//! The slabs' devices and the halo copy.
void validate_slabs(const cavity_options& o, const option_names& names) {
  if (o.devices.empty() || o.devices.size() > static_cast<std::size_t>(max_slabs))
    throw invalid_options(fmt::format("{}: {} slab(s); give 1 to {} devices, one per slab of rows", names.devices,
                                      o.devices.size(), max_slabs));
  for (const int d : o.devices)
    if (d < 0)
      throw invalid_options(fmt::format("{}: device {} is not a CUDA device ordinal (>= 0)", names.devices, d));
  if (o.halo_copy != "2d" && o.halo_copy != "1d")
    throw invalid_options(fmt::format("{} '{}': must be 2d or 1d", names.halo_copy, o.halo_copy));
}

} // namespace

void validate(const cavity_options& o, const option_names& names) {
  validate_lattice(o, names);
  validate_run_length(o, names);
  validate_slabs(o, names);
}

checked_options::checked_options(const cavity_options& o, const option_names& names) : options_(o) {
  validate(options_, names);
}

std::vector<int> distinct_devices(const std::vector<int>& devices) {
  std::vector<int> out = devices;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::pair<int, int> slab_rows(int n, int count, int index) noexcept {
  const auto edge = [&](int i) {
    return static_cast<int>(static_cast<long long>(i) * static_cast<long long>(n) / static_cast<long long>(count));
  };
  return {edge(index), edge(index + 1)};
}

slab make_slab(int n, int count, int index) noexcept {
  const auto [begin, end] = slab_rows(n, count, index);
  const int below = index > 0 ? 1 : 0;
  const int above = index + 1 < count ? 1 : 0;
  slab s;
  s.row_begin = begin;
  s.rows = end - begin;
  s.first_row = begin - below;
  s.plane = static_cast<std::size_t>(s.rows + below + above) * static_cast<std::size_t>(n);
  return s;
}

lattice_params make_lattice_params(const checked_options& checked) {
  const cavity_options& o = *checked;
  const lattice_constants c = derive(o);
  lattice_params p;
  p.n = o.n;
  p.omega_plus = static_cast<float>(1.0 / c.tau);
  p.omega_minus = static_cast<float>(1.0 / c.tau_minus);
  p.lid_speed = static_cast<float>(o.lid_speed);
  p.pdl_trigger = o.pdl_trigger == "early" ? 1 : o.pdl_trigger == "after-wait" ? 0 : 2;
  p.step_layout = o.step_layout == "rows" ? 0 : 1;
  return p;
}

std::int64_t auto_steps(const cavity_options& o) noexcept {
  const double steps = std::ceil(default_convective_times * static_cast<double>(o.n) / o.lid_speed);
  const std::int64_t k = o.steps_per_graph > 0 ? o.steps_per_graph : 1;
  const auto s = static_cast<std::int64_t>(steps);
  return (s + k - 1) / k * k;
}

std::int64_t max_steps(const cavity_options& o) noexcept { return o.steps > 0 ? o.steps : auto_steps(o); }

std::string describe(const cavity_options& o) {
  const lattice_constants c = derive(o);
  return fmt::format("Re {:g}, {}x{} cells, lid speed {:g} (Ma {:.3f}), nu {:.4g}, tau {:.4f} (TRT, tau- {:.4f})", o.re,
                     o.n, o.n, o.lid_speed, c.mach, c.nu, c.tau, c.tau_minus);
}

} // namespace conveyor::cavity
