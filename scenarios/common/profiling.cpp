//! \file profiling.cpp
//! The workloads' --profile / --doctor session: windows of profiled steps per execution mode, the trace kept to
//! them, the exports and the doctor.

#include "common/profiling.hpp"

#include "common/file_output.hpp"
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "common/usage_error.hpp"

#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/describe.hpp>
#include <conveyor/profile/doctor.hpp>
#include <conveyor/profile/report.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <set>
#include <stdexcept>
#include <unordered_map>

extern char** environ;

namespace conveyor::scenarios {

namespace {

//! "cavity 100 steps" -> "cavity-100-steps" (file names), or with '_' (DOT identifiers).
std::string slug(std::string_view name, char separator) {
  std::string out;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0)
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != separator) out += separator;
  }
  while (!out.empty() && out.back() == separator) out.pop_back();
  return out.empty() ? std::string("graph") : out;
}

//! The track the graph `name` was launched in (the first such launch), or "" when it was not profiled.
std::string track_of(const profile::profile_report& r, std::string_view name) {
  for (const auto& l : r.launches)
    if (l.graph == name) return l.track;
  return {};
}

bool launched_in(const profile::profile_report& r, std::string_view name) {
  return std::any_of(r.launches.begin(), r.launches.end(), [&](const auto& l) { return l.graph == name; });
}

//! Keeps the work of marked steps only: activities and API calls of a step, and a conditional body's work (CUPTI
//! gives it no correlation id) when the graph launch that ran it (the latest launch of its executable graph that
//! began before it; else the latest graph launch) was in a step. Warm-up steps are never marked, nor is the work
//! between steps (progress read-backs, epoch uploads), so none of it reaches the report.
void keep_steps_only(profile::trace& t) {
  std::unordered_map<std::uint32_t, std::uint32_t> exec_of; // launch correlation -> executable graph
  for (const auto& a : t.activities)
    if (a.correlation != 0 && a.exec_id != 0) exec_of.emplace(a.correlation, a.exec_id);
  struct launch {
    std::uint64_t start_ns;
    std::uint64_t step;
    std::uint32_t exec;
  };
  std::vector<launch> launches;
  for (const auto& c : t.host_calls)
    if (c.graph_launch) {
      const auto it = exec_of.find(c.correlation);
      launches.push_back({c.start_ns, c.step, it == exec_of.end() ? 0u : it->second});
    }
  std::sort(launches.begin(), launches.end(), [](const launch& a, const launch& b) { return a.start_ns < b.start_ns; });
  const auto in_step = [&](const profile::activity& a) {
    if (a.correlation != 0) return a.step != 0;
    const auto after = std::upper_bound(launches.begin(), launches.end(), a.start_ns,
                                        [](std::uint64_t t0, const launch& l) { return t0 < l.start_ns; });
    if (after == launches.begin()) return false;
    for (auto it = after; it != launches.begin();) {
      --it;
      if (it->exec == a.exec_id) return it->step != 0;
    }
    return std::prev(after)->step != 0;
  };
  std::erase_if(t.activities, [&](const profile::activity& a) { return !in_step(a); });
  std::erase_if(t.host_calls, [](const profile::host_call& c) { return c.step == 0; });
}

} // namespace

// ---- options ---------------------------------------------------------------------------------------------------

void add_profiling_options(CLI::App& sub, profiling_cli& o, std::string_view step, std::string_view doctor_modes,
                           std::size_t warmup_steps) {
  o.warmup_steps = warmup_steps;
  const std::string warmup =
      warmup_steps == 0 ? std::string("from the first one") : fmt::format("after {} warm-up step(s)", warmup_steps);
  sub.add_option("--profile", o.trace,
                 fmt::format("Profile the run with CUPTI and write a Perfetto / Chrome trace to FILE.json (open it in "
                             "ui.perfetto.dev), the graph coloured by time to FILE.dot (and FILE.svg when Graphviz "
                             "is installed), and print the report. One step = {}; --profile-steps of them per mode, "
                             "{}",
                             step, warmup));
  o.steps_option = sub.add_option("--profile-steps", o.steps,
                                  fmt::format("Steps profiled per mode, {} (--profile or --doctor only)", warmup))
                       ->check(integer_in(std::size_t{1}, std::size_t{100000}))
                       ->capture_default_str();
  sub.add_flag("--doctor", o.doctor,
               fmt::format("After the run, check the graph against the CUDA Graphs performance checklist (its "
                           "description, its executable graph's history and a profile of its launches; needs {}) "
                           "and print the findings with their fixes",
                           doctor_modes));
  sub.add_flag("--verbose-report", o.verbose,
               "With --profile or --doctor: print node names in full (template arguments, namespaces, parameter "
               "lists) and each finding whole, instead of short names and three lines a finding");
}

std::string profile_dot_path(std::string_view trace) {
  if (trace.empty()) return {};
  return std::filesystem::path(trace).replace_extension(".dot").string();
}

void check_profiling_options(const profiling_cli& o, bool has_graph, std::string_view doctor_modes) {
  if (o.doctor && !has_graph) throw option_error("--doctor", fmt::format("needs {}", doctor_modes));
  if (o.steps_option != nullptr && o.steps_option->count() > 0 && o.trace.empty() && !o.doctor)
    throw option_error("--profile-steps", "applies to --profile or --doctor only; without them it would be ignored");
  if (o.verbose && o.trace.empty() && !o.doctor)
    throw option_error("--verbose-report", "applies to --profile or --doctor only; without them it would be ignored");
  if (o.trace.empty()) return;
  std::string extension = std::filesystem::path(o.trace).extension().string();
  for (auto& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (extension != ".json")
    throw usage_error(fmt::format("--profile '{}': give a file name ending in .json (the graph is written next to it, "
                                  "as .dot and .svg)",
                                  o.trace));
  check_output_file("--profile", o.trace);
  const std::string dot = profile_dot_path(o.trace);
  check_output_file("--profile (its DOT file)", dot);
  check_output_file("--profile (its SVG file)", std::filesystem::path(o.trace).replace_extension(".svg").string());
}

std::unique_ptr<profiling> make_profiling(const profiling_cli& o, std::string workload) {
  if (o.trace.empty() && !o.doctor) return nullptr;
  profiling_settings s;
  s.workload = std::move(workload);
  s.trace = o.trace;
  s.doctor = o.doctor;
  s.steps = o.steps;
  s.warmup_steps = o.warmup_steps;
  s.graph_tracks_only = o.trace.empty();
  s.verbose = o.verbose;
  return std::make_unique<profiling>(std::move(s));
}

// ---- session ---------------------------------------------------------------------------------------------------

profiling::profiling(profiling_settings settings) : settings_(std::move(settings)) {
  if (settings_.steps == 0) throw std::invalid_argument("profiling: at least one step per mode must be profiled");
  // CUPTI's first start loads and initialises it (slow once); and a machine where it cannot record fails now.
  { const profile::profiler probe; }
}

profiling::~profiling() = default;

bool profiling::profiles(std::string_view track) const {
  return !settings_.graph_tracks_only || track.starts_with("graph");
}

void profiling::start() {
  if (!profiler_) profiler_.emplace();
}

std::optional<profile::step_scope> profiling::step(std::string_view track) {
  if (stopped_) return std::nullopt;
  if (!window_track_.empty() && window_track_ != track) close();
  auto it = seen_.find(track);
  if (it == seen_.end()) it = seen_.emplace(std::string(track), 0).first;
  const std::size_t index = it->second++;
  if (!profiles(track) || index < settings_.warmup_steps) return std::nullopt;
  if (index >= settings_.warmup_steps + settings_.steps) {
    if (window_track_ == track) close();
    return std::nullopt;
  }
  start();
  window_track_ = std::string(track);
  return profiler_->step(std::string(track));
}

void profiling::watch(const graph_exec& exec, std::string name) {
  if (stopped_) return;
  graph_description d = describe(exec);
  start();
  profiler_->watch(exec, std::move(name), std::move(d));
}

void profiling::examine(const graph_exec& exec, std::string name, const graphed_statistics* graphed,
                        const std::deque<std::string>* reasons) {
  if (stopped_ || !settings_.doctor) return;
  examined e;
  e.name = std::move(name);
  e.graph = describe(exec);
  e.facts = exec.facts();
  if (graphed != nullptr) e.graphed = *graphed;
  if (reasons != nullptr) e.reasons = *reasons;
  examined_.push_back(std::move(e));
}

void profiling::close() {
  window_track_.clear();
  if (!profiler_) return;
  profile::trace t;
  try {
    t = profiler_->collect();
  } catch (...) {
    profiler_.reset();
    throw;
  }
  profiler_.reset();
  keep_steps_only(t);
  merge(std::move(t));
}

void profiling::merge(profile::trace t) {
  auto& c = collected_;
  // Every profiler numbers its steps from 1: renumber after the steps already collected.
  std::uint64_t offset = 0;
  for (const auto& s : c.steps) offset = std::max(offset, s.id);
  if (offset > 0) {
    for (auto& s : t.steps) s.id += offset;
    for (auto& a : t.activities)
      if (a.step != 0) a.step += offset;
    for (auto& call : t.host_calls)
      if (call.step != 0) call.step += offset;
  }
  c.activities.insert(c.activities.end(), std::make_move_iterator(t.activities.begin()),
                      std::make_move_iterator(t.activities.end()));
  c.host_calls.insert(c.host_calls.end(), std::make_move_iterator(t.host_calls.begin()),
                      std::make_move_iterator(t.host_calls.end()));
  c.steps.insert(c.steps.end(), std::make_move_iterator(t.steps.begin()), std::make_move_iterator(t.steps.end()));
  for (auto& g : t.graphs) {
    const auto same = std::find_if(c.graphs.begin(), c.graphs.end(),
                                   [&](const profile::watched_graph& w) { return w.exec_id == g.exec_id; });
    if (same == c.graphs.end()) c.graphs.push_back(std::move(g));
    else *same = std::move(g);
  }
  c.dropped_records += t.dropped_records;
  if (!t.device_name.empty()) c.device_name = std::move(t.device_name);
}

void profiling::stop() {
  if (stopped_) return;
  close();
  stopped_ = true;
}

void profiling::write_trace(const profile::profile_report& report) const {
  const std::filesystem::path& trace = settings_.trace;
  write_file_atomically(trace, profile::to_perfetto(collected_, report));
  fmt::print(stderr, "wrote the {} profile trace to {} (open it in https://ui.perfetto.dev)\n", settings_.workload,
             trace.string());
  std::set<std::string> used;
  bool first = true;
  for (const auto& g : collected_.graphs) {
    if (!launched_in(report, g.name)) continue; // watched, but none of its launches was profiled
    std::string stem = slug(g.name, '-');
    for (int k = 2; used.contains(stem); ++k) stem = fmt::format("{}-{}", slug(g.name, '-'), k);
    used.insert(stem);
    std::filesystem::path dot = trace;
    dot.replace_extension(first ? std::string(".dot") : "." + stem + ".dot");
    first = false;
    write_file_atomically(dot, profile::to_dot(g.graph, report, g.name, track_of(report, g.name), slug(g.name, '_')));
    std::filesystem::path svg = dot;
    svg.replace_extension(".svg");
    if (const std::string problem = render_svg(dot, svg); problem.empty())
      fmt::print(stderr, "wrote the graph '{}' coloured by time to {} and {}\n", g.name, dot.string(), svg.string());
    else
      fmt::print(stderr, "wrote the graph '{}' coloured by time to {} (no SVG: {})\n", g.name, dot.string(), problem);
  }
}

void profiling::print_report(const profile::profile_report& report) const {
  fmt::print("\nprofile of `conveyor {}`: up to {} step(s) per mode after {} warm-up step(s); timings of this run "
             "include CUPTI's overhead\n",
             settings_.workload, settings_.steps, settings_.warmup_steps);
  if (collected_.steps.empty())
    fmt::print("no step was profiled: each mode ran at most {} step(s) (the warm-up)\n", settings_.warmup_steps);
  fmt::print("{}", profile::to_text(report, 12, settings_.verbose));
}

void profiling::run_doctor(const profile::profile_report& report) const {
  if (examined_.empty()) fmt::print("\ntuning doctor: {}: no graph was examined\n", settings_.workload);
  for (const auto& e : examined_) {
    profile::doctor_input in;
    in.name = e.name;
    in.graph = &e.graph;
    in.exec = &e.facts;
    if (launched_in(report, e.name)) {
      in.profile = &report;
      in.profile_graph = e.name;
      in.profile_track = track_of(report, e.name);
    }
    if (e.graphed) in.graphed = &*e.graphed;
    if (e.reasons) in.graphed_reasons = &*e.reasons;
    const std::vector<profile::finding> findings = profile::diagnose(in);
    fmt::print("\n{}",
               profile::to_text(findings, fmt::format("{} ({})", e.name, settings_.workload), settings_.verbose));
  }
}

void profiling::finish() {
  stop();
  const bool write = !settings_.trace.empty();
  if (!write && !settings_.doctor) return;
  std::fflush(stdout);
  const profile::profile_report report = profile::analyze(collected_);
  if (write) write_trace(report);
  if (write && settings_.print_report) print_report(report);
  if (settings_.doctor) run_doctor(report);
  std::fflush(stdout);
}

// Renders `dot_file` as SVG into `svg_file` with Graphviz (`dot -Tsvg`, found on PATH), atomically: a temporary
//! file in the same folder, renamed on success. Returns an empty string on success, else why not.
std::string render_svg(const std::filesystem::path& dot_file, const std::filesystem::path& svg_file) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path folder = svg_file.has_parent_path() ? svg_file.parent_path() : ".";
  const std::string temp =
      (folder / fmt::format(".{}.tmp-{}-{}", svg_file.filename().string(), ::getpid(), counter.fetch_add(1))).string();
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0) return "cannot start Graphviz";
  (void)posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  (void)posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const std::string input = dot_file.string();
  char arg0[] = "dot";
  char arg1[] = "-Tsvg";
  std::vector<char> arg2(input.begin(), input.end());
  arg2.push_back('\0');
  char* argv[] = {arg0, arg1, arg2.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "dot", &actions, nullptr, argv, environ);
  (void)posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    (void)::unlink(temp.c_str());
    return rc == ENOENT ? "Graphviz `dot` is not on PATH" : "cannot run Graphviz `dot`: " + errno_text(rc);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    (void)::unlink(temp.c_str());
    return WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "Graphviz `dot` is not on PATH"
                                                           : "Graphviz `dot -Tsvg` failed";
  }
  if (std::rename(temp.c_str(), svg_file.c_str()) != 0) {
    const int err = errno;
    (void)::unlink(temp.c_str());
    return "cannot rename the temporary file into place: " + errno_text(err);
  }
  return {};
}

} // namespace conveyor::scenarios
