//! \file cg_solver.cpp
//! The CG solver's modes through the mode runner: sync and stream, and three graph modes (one iteration per launch,
//! the loop in a WHILE node, a device graph relaunching itself).

#include "solve/cg_solver.hpp"

#include "common/mode_runner.hpp"
#include "common/profiling.hpp"
#include "solve/cg_relaunch.hpp"

#include <conveyor/define/capture.hpp>
#include <conveyor/define/conditional.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/execute/device_graph.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/describe.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

namespace conveyor::solve {

namespace {

// Checks the inputs before anything is allocated; returns n.
int validated_size(const csr_matrix& a, std::span<const double> b) {
  if (a.rows != a.cols || a.rows < 1)
    throw std::invalid_argument(
        fmt::format("cg_solver: the matrix is {} x {}; CG needs a square matrix", a.rows, a.cols));
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

scenarios::run_mode as_run_mode(solve_mode mode) noexcept {
  switch (mode) {
  case solve_mode::sync: return scenarios::execution_mode::sync;
  case solve_mode::stream: return scenarios::execution_mode::stream;
  case solve_mode::graph_per_iteration: return {scenarios::execution_mode::graph, "per-iteration"};
  case solve_mode::graph_while: return {scenarios::execution_mode::graph, "while"};
  case solve_mode::graph_relaunch: return {scenarios::execution_mode::graph, "relaunch"};
  }
  return {};
}

std::string to_string(solve_mode mode) { return scenarios::to_string(as_run_mode(mode)); }

solve_mode parse_solve_mode(std::string_view text) {
  for (solve_mode m : all_solve_modes)
    if (to_string(m) == text) return m;
  throw std::invalid_argument(fmt::format(
      "unknown mode '{}'; expected sync, stream, graph-per-iteration, graph-while or graph-relaunch", text));
}

cg_solver::cg_solver(const csr_matrix& a, std::span<const double> b) :
    n_(validated_size(a, b)),
    host_a_(a),
    host_b_(b.begin(), b.end()),
    a_(a),
    b_(b),
    inv_diag_(std::span<const double>(inverse_diagonal(a))),
    x_(static_cast<std::size_t>(n_)),
    r_(static_cast<std::size_t>(n_)),
    z_(static_cast<std::size_t>(n_)),
    p_(static_cast<std::size_t>(n_)),
    ap_(static_cast<std::size_t>(n_)),
    partials_(2 * static_cast<std::size_t>(reduction_blocks(n_))),
    scalars_(1),
    spmv_(a_, p_.data(), ap_.data(), stream_) {
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
  return {[spmv](cudaStream_t s) { spmv->enqueue(s); },   [st](cudaStream_t s) { enqueue_dot_p_ap(st, s); },
          [st](cudaStream_t s) { enqueue_alpha(st, s); }, [st](cudaStream_t s) { enqueue_update_x_r_z(st, s); },
          [st](cudaStream_t s) { enqueue_beta(st, s); },  [st](cudaStream_t s) { enqueue_update_p(st, s); }};
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

// One capture holds the set-up, the WHILE node and its body (capture_condition and capture_conditional insert the
// condition and the node into the capture in progress; the body is captured on a side stream).
conveyor::graph cg_solver::make_while_graph(const solve_options& options) {
  const auto setup = setup_steps();
  auto body = iteration_steps();
  conveyor::graph g = conveyor::capture(stream_, [&](const conveyor::stream& s) {
    const conveyor::condition cond = conveyor::capture_condition(s, 0, conveyor::condition_reset::each_launch);
    for (const auto& f : setup) f(s.get());
    check_step(options, cond.handle, true)(s.get()); // WHILE tests its condition before the first pass
    body.push_back(check_step(options, cond.handle, true));
    auto loop =
        conveyor::capture_conditional(s, conveyor::conditional_kind::while_loop, cond, [&](const conveyor::stream& b) {
          for (const auto& f : body) f(b.get());
        });
    loop.node.label("while rel_res > tol && iterations < max_iter");
  });
  apply_programmatic(g, options, nullptr);
  return g;
}

//! One solve as a workload of the mode runner: one round, from x = 0 to convergence. Eager modes and
//! graph-per-iteration run the set-up and read the scalars in the round's prologue, then one iteration and one
//! read-back per step until the check kernel clears `proceed`; graph-while and graph-relaunch are one step, the whole
//! loop on the GPU.
class cg_run final : public scenarios::workload {
public:
  cg_run(cg_solver& solver, solve_mode mode, const solve_options& o) : solver_(solver), mode_(mode), o_(o) {
    // The read-back (solve_options::read_back): the check kernels of the steps made below write the scalars to
    // pinned host memory too, or a copy follows each iteration. graph-while and graph-relaunch read once, at the
    // end, by copy (graph-relaunch also once after the set-up).
    const bool one_launch = mode == solve_mode::graph_while || mode == solve_mode::graph_relaunch;
    solver.st_.mirror =
        o.read_back == solve_options::readback::mapped && !one_launch ? solver.host_scalars_.data() : nullptr;
    setup_ = solver.setup_steps();
    setup_.push_back(solver.check_step(o, 0, false));
    iteration_ = solver.iteration_steps();
    iteration_.push_back(solver.check_step(o, 0, false));
  }

  [[nodiscard]] cudaStream_t stream() const override { return solver_.stream_.get(); }
  void reset() override {}
  [[nodiscard]] std::unique_ptr<scenarios::graph_step> make_graph() override;
  void synchronize() override { solver_.stream_.synchronize(); }
  [[nodiscard]] std::size_t begin_round(std::size_t round) override {
    if (round > 0) return 0;
    const bool one_launch = mode_ == solve_mode::graph_while || mode_ == solve_mode::graph_relaunch;
    return one_launch ? 1 : std::numeric_limits<std::size_t>::max();
  }
  bool prologue(const scenarios::launch_ctx& ctx) override { return set_up(ctx.sync_each); }
  void enqueue(const scenarios::launch_ctx& ctx, std::size_t) override {
    solver_.run_eager(iteration_, ctx.sync_each);
    read_back();
  }
  bool after_step(std::size_t) override { return !proceed_; }
  //! The units are iterations (at least one, as solve_result::us_per_iteration counts them).
  [[nodiscard]] std::size_t end_round(std::size_t) override {
    return static_cast<std::size_t>(std::max(solver_.host_scalars_.data()[0].iterations, 1));
  }

  //! The set-up kernels and their check, then the scalars read; true when CG must iterate.
  bool set_up(bool sync_each) {
    solver_.run_eager(setup_, sync_each);
    return read_back();
  }
  //! Reads the scalars back; returns (and keeps) whether CG must go on.
  bool read_back() {
    proceed_ = solver_.read_scalars().proceed != 0;
    return proceed_;
  }
  //! The solver's stream: graph launches, read-backs.
  [[nodiscard]] const conveyor::stream& solver_stream() const noexcept { return solver_.stream_; }
  //! The programmatic pass on `g` with --pdl (its report into graph_report).
  void apply_programmatic(conveyor::graph& g) { solver_.apply_programmatic(g, o_, &graph_report); }
  //! What the graph modes report: the programmatic pass, the graph's nodes, the relaunch's device-side status.
  solve_result graph_report;
  int relaunch_status = 0;

private:
  cg_solver& solver_;
  solve_mode mode_;
  const solve_options& o_;
  std::vector<cg_solver::step> setup_;
  std::vector<cg_solver::step> iteration_;
  bool proceed_ = true;
};

namespace {

//! What the three graph modes share: the graph (the programmatic pass applied to it with --pdl), its name for the
//! profile and the doctor, its nodes counted after the run.
class cg_graph_step : public scenarios::graph_step {
public:
  cg_graph_step(cg_run& run, conveyor::graph g, std::string name) :
      run_(run),
      graph_(std::move(g)),
      name_(std::move(name)) {
    run.apply_programmatic(graph_);
  }
  void watch(scenarios::graph_sink& p) override { p.watch(exec(), name_); }
  void after_rounds() override { run_.graph_report.graph_nodes = count_nodes(graph_); }
  void examine(scenarios::profiling& p) override { p.examine(exec(), name_); }

protected:
  [[nodiscard]] virtual const conveyor::graph_exec& exec() const = 0;
  cg_run& run_;
  conveyor::graph graph_;

private:
  std::string name_;
};

//! graph-per-iteration and graph-while: one executable graph launched from the host, the scalars read back after
//! each launch. graph-per-iteration (`eager_set_up`): one iteration and its check captured, launched once per
//! iteration, the set-up eager in the prologue. graph-while: the whole solve in one launch: the set-up kernels, the
//! check setting the condition, a WHILE node whose body is one iteration and the check (the scenarios' showcase of
//! conditional nodes).
class host_launched_step final : public cg_graph_step {
public:
  host_launched_step(cg_run& run, conveyor::graph g, std::string name, bool eager_set_up) :
      cg_graph_step(run, std::move(g), std::move(name)),
      eager_set_up_(eager_set_up) {
    exec_.emplace(conveyor::instantiate(graph_));
    exec_->upload(run.solver_stream());
  }
  bool prologue() override { return !eager_set_up_ || run_.set_up(false); }
  void launch(std::size_t) override {
    exec_->launch(run_.solver_stream());
    (void)run_.read_back();
  }

private:
  [[nodiscard]] const conveyor::graph_exec& exec() const override { return *exec_; }
  bool eager_set_up_;
  std::optional<conveyor::graph_exec> exec_;
};

//! graph-relaunch: the loop's body runs at least once per launch (the launch is its first pass), while WHILE tests
//! first: the set-up kernels and their check run eagerly and the host reads `proceed` once before launching the
//! device graph, which tail-launches itself until the check clears `proceed`.
class relaunch_step final : public cg_graph_step {
public:
  relaunch_step(cg_run& run, conveyor::graph g, device_buffer<int> status) :
      cg_graph_step(run, std::move(g), "CG relaunch loop"),
      status_(std::move(status)),
      loop_(conveyor::instantiate_for_device(graph_, run.solver_stream())) {}
  void launch(std::size_t) override {
    if (run_.set_up(false)) {
      loop_.launch(run_.solver_stream()); // the stream's next work waits for every relaunch
      (void)run_.read_back();
    }
  }
  //! The controller's status: a failed device-side relaunch's CUDA error, else 0.
  void after_rounds() override {
    cg_graph_step::after_rounds();
    run_.relaunch_status = status_.download(1, run_.solver_stream().get()).at(0);
  }

private:
  [[nodiscard]] const conveyor::graph_exec& exec() const override { return loop_.exec(); }
  device_buffer<int> status_;
  conveyor::device_graph loop_;
};

} // namespace

std::unique_ptr<scenarios::graph_step> cg_run::make_graph() {
  solve_options plain = o_;
  plain.programmatic = false; // the pass runs once, on the whole graph (cg_graph_step)
  switch (mode_) {
  case solve_mode::graph_per_iteration:
    return std::make_unique<host_launched_step>(*this,
                                                conveyor::capture(solver_.stream_,
                                                                  [&](const conveyor::stream& s) {
                                                                    for (const auto& f : iteration_) f(s.get());
                                                                  }),
                                                "CG iteration", true);
  case solve_mode::graph_while:
    return std::make_unique<host_launched_step>(*this, solver_.make_while_graph(plain), "CG while loop", false);
  case solve_mode::graph_relaunch: {
    device_buffer<int> status(1);
    status.zero_async(solver_.stream_.get());
    conveyor::graph g = solver_.make_relaunch_graph(plain, status.data());
    return std::make_unique<relaunch_step>(*this, std::move(g), std::move(status));
  }
  case solve_mode::sync:
  case solve_mode::stream: break;
  }
  return nullptr;
}

solve_result cg_solver::solve(solve_mode mode, const solve_options& o) {
  if (!(o.tol > 0.0)) throw std::invalid_argument(fmt::format("cg_solver::solve: tol must be > 0, got {}", o.tol));
  if (o.max_iter < 0)
    throw std::invalid_argument(fmt::format("cg_solver::solve: max_iter must be >= 0, got {}", o.max_iter));
  stream_.synchronize();
  cg_run run(*this, mode, o);
  scenarios::run_settings settings;
  settings.mode = as_run_mode(mode);
  settings.programmatic = o.programmatic && is_graph_mode(mode);
  settings.profiling = o.profiling;
  const scenarios::mode_timing timing = scenarios::run_workload(run, settings);
  solve_result out = finish(mode, o, timing.seconds * 1000.0);
  if (run.relaunch_status != 0)
    throw std::runtime_error(fmt::format("cg_solver: graph-relaunch: the device-side relaunch failed after {} "
                                         "iterations: {} ({})",
                                         out.iterations,
                                         cudaGetErrorName(static_cast<cudaError_t>(run.relaunch_status)),
                                         cudaGetErrorString(static_cast<cudaError_t>(run.relaunch_status))));
  if (is_graph_mode(mode)) {
    out.setup_ms = timing.setup_ms;
    out.graph_nodes = run.graph_report.graph_nodes;
    take_programmatic(out, run.graph_report);
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
