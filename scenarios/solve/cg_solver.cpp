//! \file cg_solver.cpp
//! The five execution modes of the CG solver.

#include "solve/cg_solver.hpp"

#include "common/profiling.hpp"
#include "solve/cg_relaunch.hpp"

#include <conveyor/define/capture.hpp>
#include <conveyor/define/conditional.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/execute/device_graph.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/describe.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <stdexcept>

namespace conveyor::solve {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

// Checks the inputs before anything is allocated; returns n.
int validated_size(const csr_matrix& a, std::span<const double> b) {
  if (a.rows != a.cols || a.rows < 1)
    throw std::invalid_argument(fmt::format("cg_solver: the matrix is {} x {}; CG needs a square matrix", a.rows, a.cols));
  if (b.size() != static_cast<std::size_t>(a.rows))
    throw std::invalid_argument(
        fmt::format("cg_solver: the right-hand side has {} elements, the matrix {} rows", b.size(), a.rows));
  require_positive_diagonal(a);
  return a.rows;
}

std::vector<double> inverse_diagonal(const csr_matrix& a) {
  auto d = diagonal(a);
  for (double& v : d) v = 1.0 / v;
  return d;
}

//! Copies the programmatic pass's report of `from` into `to`.
void take_programmatic(solve_result& to, const solve_result& from) {
  to.programmatic = from.programmatic;
  to.programmatic_changed = from.programmatic_changed;
  to.programmatic_left = from.programmatic_left;
  to.programmatic_lines = from.programmatic_lines;
}

std::size_t count_nodes(const conveyor::graph& g) {
  const auto s = conveyor::statistics(conveyor::describe(g));
  return s.nodes + s.nested_nodes;
}

} // namespace

std::string_view to_string(solve_mode mode) noexcept {
  switch (mode) {
  case solve_mode::sync: return "sync";
  case solve_mode::stream: return "stream";
  case solve_mode::graph_per_iteration: return "graph-per-iteration";
  case solve_mode::graph_while: return "graph-while";
  case solve_mode::graph_relaunch: return "graph-relaunch";
  }
  return "unknown";
}

solve_mode parse_solve_mode(std::string_view text) {
  for (solve_mode m : all_solve_modes)
    if (to_string(m) == text) return m;
  throw std::invalid_argument(
      fmt::format("unknown mode '{}'; expected sync, stream, graph-per-iteration, graph-while or graph-relaunch", text));
}

cg_solver::cg_solver(const csr_matrix& a, std::span<const double> b)
    : n_(validated_size(a, b)), host_a_(a), host_b_(b.begin(), b.end()), a_(a), b_(b),
      inv_diag_(std::span<const double>(inverse_diagonal(a))), x_(static_cast<std::size_t>(n_)),
      r_(static_cast<std::size_t>(n_)), z_(static_cast<std::size_t>(n_)), p_(static_cast<std::size_t>(n_)),
      ap_(static_cast<std::size_t>(n_)), partials_(2 * static_cast<std::size_t>(reduction_blocks(n_))),
      scalars_(1), spmv_(a_, p_.data(), ap_.data()) {
  st_.n = n_;
  st_.blocks = reduction_blocks(n_);
  st_.b = b_.data();
  st_.inv_diag = inv_diag_.data();
  st_.x = x_.data();
  st_.r = r_.data();
  st_.z = z_.data();
  st_.p = p_.data();
  st_.ap = ap_.data();
  st_.partials = partials_.data();
  st_.scalars = scalars_.data();
  // Warm-up: every kernel once, so that the first timed mode does not pay for module loading.
  auto steps = setup_steps();
  for (auto& s : iteration_steps()) steps.push_back(std::move(s));
  steps.push_back(check_step(solve_options{}, 0, false));
  run_eager(steps, false);
  stream_.synchronize();
}

cg_solver::~cg_solver() { (void)cudaStreamSynchronize(stream_.get()); }

std::vector<cg_solver::step> cg_solver::setup_steps() const {
  const cg_device_state st = st_;
  return {[st](cudaStream_t s) { enqueue_init(st, s); }, [st](cudaStream_t s) { enqueue_init_finish(st, s); }};
}

std::vector<cg_solver::step> cg_solver::iteration_steps() const {
  const cg_device_state st = st_;
  const spmv_operator* spmv = &spmv_;
  return {[spmv](cudaStream_t s) { spmv->enqueue(s); },
          [st](cudaStream_t s) { enqueue_dot_p_ap(st, s); },
          [st](cudaStream_t s) { enqueue_alpha(st, s); },
          [st](cudaStream_t s) { enqueue_update_x_r_z(st, s); },
          [st](cudaStream_t s) { enqueue_beta(st, s); },
          [st](cudaStream_t s) { enqueue_update_p(st, s); }};
}

cg_solver::step cg_solver::check_step(const solve_options& o, cudaGraphConditionalHandle handle, bool set) const {
  const cg_device_state st = st_;
  const double tol = o.tol;
  const int max_iter = max_iterations(o);
  return [=](cudaStream_t s) { enqueue_check(st, tol, max_iter, handle, set, s); };
}

int cg_solver::max_iterations(const solve_options& o) const {
  if (o.max_iter > 0) return o.max_iter;
  const long long cap = 10LL * n_;
  return cap > 2000000000LL ? 2000000000 : static_cast<int>(cap);
}

void cg_solver::run_eager(const std::vector<step>& steps, bool sync_each) const {
  for (const auto& f : steps) {
    f(stream_.get());
    if (sync_each) stream_.synchronize();
  }
}

cg_scalars cg_solver::read_scalars() const {
  if (st_.mirror == nullptr) // else the check kernel wrote them to host_scalars_ itself
    CONVEYOR_CHECK(cudaMemcpyAsync(host_scalars_.data(), scalars_.data(), sizeof(cg_scalars), cudaMemcpyDeviceToHost,
                                   stream_.get()));
  stream_.synchronize();
  return host_scalars_.data()[0];
}

void cg_solver::apply_programmatic(conveyor::graph& g, const solve_options& o, solve_result* out) const {
  if (!o.programmatic) return;
  conveyor::waiting_kernels waiting;
  for (const void* f : waiting_kernel_functions()) waiting.add_function(f);
  const conveyor::programmatic_report report = conveyor::make_programmatic(g, waiting);
  if (out == nullptr) return;
  out->programmatic = true;
  out->programmatic_changed = report.changed.size();
  out->programmatic_left = report.left.size();
  out->programmatic_lines = report.lines();
}

conveyor::graph cg_solver::make_relaunch_graph(const solve_options& options, int* status) {
  auto body = iteration_steps();
  body.push_back(check_step(options, 0, false)); // clears proceed to stop; no condition handle
  conveyor::graph g = conveyor::capture(stream_, [&](const conveyor::stream& s) {
    for (const auto& f : body) f(s.get());
  });
  (void)add_cg_relaunch(g, &st_.scalars->proceed, status);
  apply_programmatic(g, options, nullptr);
  return g;
}

conveyor::graph cg_solver::make_while_graph(const solve_options& options) {
  conveyor::graph g;
  const conveyor::condition cond = conveyor::make_condition(g, 0, conveyor::condition_reset::each_launch);
  auto setup = setup_steps();
  setup.push_back(check_step(options, cond.handle, true)); // WHILE tests its condition before the first pass
  const auto frontier = conveyor::capture_into(g, stream_, [&](const conveyor::stream& s) {
    for (const auto& f : setup) f(s.get());
  });
  auto loop = conveyor::add_conditional(g, frontier, conveyor::conditional_kind::while_loop, cond);
  loop.node.label("while rel_res > tol && iterations < max_iter");
  auto body = iteration_steps();
  body.push_back(check_step(options, cond.handle, true));
  (void)conveyor::capture_into(loop.bodies.at(0), stream_, [&](const conveyor::stream& s) {
    for (const auto& f : body) f(s.get());
  });
  apply_programmatic(g, options, nullptr);
  return g;
}

solve_result cg_solver::solve(solve_mode mode, const solve_options& o) {
  if (!(o.tol > 0.0)) throw std::invalid_argument(fmt::format("cg_solver::solve: tol must be > 0, got {}", o.tol));
  if (o.max_iter < 0)
    throw std::invalid_argument(fmt::format("cg_solver::solve: max_iter must be >= 0, got {}", o.max_iter));
  stream_.synchronize();
  // The read-back (solve_options::read_back): the check kernels of the steps made below write the scalars to
  // pinned host memory too, or a copy follows each iteration. graph-while and graph-relaunch read once, at the end,
  // by copy (graph-relaunch also once after the set-up).
  st_.mirror = o.read_back == solve_options::readback::mapped && mode != solve_mode::graph_while &&
                       mode != solve_mode::graph_relaunch
                   ? host_scalars_.data()
                   : nullptr;
  solve_result out;
  auto setup = setup_steps();
  setup.push_back(check_step(o, 0, false));
  auto iteration = iteration_steps();
  iteration.push_back(check_step(o, 0, false));

  switch (mode) {
  case solve_mode::sync:
  case solve_mode::stream: {
    const bool sync_each = mode == solve_mode::sync;
    const auto start = clock_type::now();
    run_eager(setup, sync_each);
    for (cg_scalars s = read_scalars(); s.proceed != 0;) {
      const auto profiled = scenarios::profile_step(o.profiling, mode); // one iteration + read-back
      run_eager(iteration, sync_each);
      s = read_scalars();
    }
    out = finish(mode, o, ms_since(start));
    break;
  }
  case solve_mode::graph_per_iteration: {
    const auto setup_start = clock_type::now();
    conveyor::graph g = conveyor::capture(stream_, [&](const conveyor::stream& s) {
      for (const auto& f : iteration) f(s.get());
    });
    solve_result pdl;
    apply_programmatic(g, o, &pdl);
    conveyor::graph_exec exec = conveyor::instantiate(g);
    exec.upload(stream_);
    stream_.synchronize();
    const double setup_ms = ms_since(setup_start);
    if (o.profiling != nullptr) o.profiling->watch(exec, "CG iteration");
    const auto start = clock_type::now();
    run_eager(setup, false);
    for (cg_scalars s = read_scalars(); s.proceed != 0;) {
      const auto profiled = scenarios::profile_step(o.profiling, mode); // one launch + read-back
      exec.launch(stream_);
      s = read_scalars();
    }
    out = finish(mode, o, ms_since(start));
    if (o.profiling != nullptr) o.profiling->examine(exec, "CG iteration");
    out.setup_ms = setup_ms;
    out.graph_nodes = count_nodes(g);
    take_programmatic(out, pdl);
    break;
  }
  case solve_mode::graph_while: {
    const auto setup_start = clock_type::now();
    solve_options plain = o;
    plain.programmatic = false;
    conveyor::graph g = make_while_graph(plain);
    solve_result pdl;
    apply_programmatic(g, o, &pdl);
    conveyor::graph_exec exec = conveyor::instantiate(g);
    exec.upload(stream_);
    stream_.synchronize();
    const double setup_ms = ms_since(setup_start);
    if (o.profiling != nullptr) o.profiling->watch(exec, "CG while loop");
    const auto start = clock_type::now();
    {
      const auto profiled = scenarios::profile_step(o.profiling, mode); // the whole solve: one launch
      exec.launch(stream_);
      (void)read_scalars();
    }
    out = finish(mode, o, ms_since(start));
    if (o.profiling != nullptr) o.profiling->examine(exec, "CG while loop");
    out.setup_ms = setup_ms;
    out.graph_nodes = count_nodes(g);
    take_programmatic(out, pdl);
    break;
  }
  case solve_mode::graph_relaunch: {
    // The loop's body runs at least once per launch (the launch is its first pass), while WHILE tests first: the
    // set-up kernels and their check run eagerly and the host reads `proceed` once before launching the loop.
    const auto setup_start = clock_type::now();
    device_buffer<int> status(1);
    status.zero_async(stream_.get());
    solve_options plain = o;
    plain.programmatic = false;
    conveyor::graph g = make_relaunch_graph(plain, status.data());
    solve_result pdl;
    apply_programmatic(g, o, &pdl);
    const conveyor::device_graph loop = conveyor::instantiate_for_device(g, stream_);
    stream_.synchronize();
    const double setup_ms = ms_since(setup_start);
    if (o.profiling != nullptr) o.profiling->watch(loop.exec(), "CG relaunch loop");
    const auto start = clock_type::now();
    {
      const auto profiled = scenarios::profile_step(o.profiling, mode); // the whole solve
      run_eager(setup, false);
      if (read_scalars().proceed != 0) {
        loop.launch(stream_); // the stream's next work waits for every relaunch
        (void)read_scalars();
      }
    }
    out = finish(mode, o, ms_since(start));
    if (o.profiling != nullptr) o.profiling->examine(loop.exec(), "CG relaunch loop");
    const std::vector<int> failed = status.download(1, stream_.get());
    if (failed.at(0) != 0)
      throw std::runtime_error(fmt::format("cg_solver: graph-relaunch: the device-side relaunch failed after {} "
                                           "iterations: {} ({})",
                                           out.iterations, cudaGetErrorName(static_cast<cudaError_t>(failed[0])),
                                           cudaGetErrorString(static_cast<cudaError_t>(failed[0]))));
    out.setup_ms = setup_ms;
    out.graph_nodes = count_nodes(g);
    take_programmatic(out, pdl);
    break;
  }
  }
  return out;
}

solve_result cg_solver::finish(solve_mode mode, const solve_options& o, double solve_ms) {
  const cg_scalars s = host_scalars_.data()[0]; // read back by the caller just before
  solve_result out;
  out.mode = mode;
  out.iterations = s.iterations;
  out.breakdown = s.breakdown != 0;
  out.solver_residual = s.rel_res;
  out.converged = !out.breakdown && s.rel_res <= o.tol;
  out.solve_ms = solve_ms;
  out.us_per_iteration = solve_ms * 1000.0 / (s.iterations > 0 ? s.iterations : 1);
  stream_.synchronize();
  out.x = x_.download();
  out.true_residual = relative_residual(host_a_, out.x, host_b_);
  return out;
}

} // namespace conveyor::solve
