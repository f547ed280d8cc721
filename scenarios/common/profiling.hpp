#pragma once
//! \file profiling.hpp
//! The workloads' `--profile FILE.json`, `--profile-steps N` and `--doctor` options, and the profiling session
//! behind them (conveyor/profile): the mode runner (mode_runner.hpp) marks every step of a workload (profiling::step),
//! has its graph step watch the executable graphs it launches and hand them to the doctor after the run
//! (profiling::examine); the session profiles a bounded window of steps per execution mode, then writes the Perfetto
//! trace, the coloured DOT (and SVG) and prints the report and the findings.
//!
//! Without --profile and --doctor no session exists: no step is marked and nothing else runs.
//! With one, CUPTI records only from a window's first step (or a watched graph's set-up) to the window's end: the
//! rest of the run runs without a profiler.

#include "common/graph_sink.hpp"

#include <conveyor/assembly/graphed_types.hpp>
#include <conveyor/define/description.hpp>
#include <conveyor/execute/exec_facts.hpp>
#include <conveyor/profile/profiler.hpp>

#include <CLI/CLI.hpp>

#include <cstddef>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor {
class graph_exec;
} // namespace conveyor

namespace conveyor::scenarios {

//! The options as given on a workload's command line.
struct profiling_cli {
  std::string trace;                   //!< --profile FILE.json; empty: none
  std::size_t steps = 50;              //!< --profile-steps: steps profiled per execution mode
  bool doctor = false;                 //!< --doctor
  bool verbose = false;                //!< --verbose-report: full names and findings in the printed text
  std::size_t warmup_steps = 3;        //!< steps per mode run before the profiled ones (the workload's choice)
  CLI::Option* steps_option = nullptr; //!< the --profile-steps option (to tell whether it was given)
};

//! Adds --profile FILE.json, --profile-steps N and --doctor to `sub`, storing into `o` (which must outlive `sub`).
//! `step` says what one profiled step is in this workload, `doctor_modes` which --mode values --doctor needs
//! (both for the help text); `warmup_steps` (stored in `o`) how many steps per mode run before the profiled ones.
void add_profiling_options(CLI::App& sub, profiling_cli& o, std::string_view step, std::string_view doctor_modes,
                           std::size_t warmup_steps = 3);

//! Checks the options together, before any work: --doctor needs a graph mode (`has_graph`), --profile-steps needs
//! --profile or --doctor, and the --profile file must end in ".json" and be writable atomically (check_output_file)
//! as must the DOT and SVG files written next to it (profile_dot_path).
//! \throws usage_error for the combinations and the file name, naming `doctor_modes`; std::invalid_argument for the
//!         paths.
void check_profiling_options(const profiling_cli& o, bool has_graph, std::string_view doctor_modes);

//! Renders `dot_file` as SVG into `svg_file` with Graphviz (`dot -Tsvg`, found on PATH), atomically: a temporary
//! file in the same folder, renamed on success. Returns an empty string on success, else why not. Never throws but
//! for std::bad_alloc.
[[nodiscard]] std::string render_svg(const std::filesystem::path& dot_file, const std::filesystem::path& svg_file);

//! The DOT file written next to a --profile trace: FILE.json -> FILE.dot; empty for an empty path.
[[nodiscard]] std::string profile_dot_path(std::string_view trace);

//! What a profiling session does.
struct profiling_settings {
  std::string workload;           //!< "train", "cavity", ...: for headings and messages
  std::filesystem::path trace;    //!< Perfetto JSON to write (and the DOT, SVG next to it); empty: none
  bool doctor = false;            //!< run the doctor on the examined graphs at finish()
  std::size_t steps = 50;         //!< steps profiled per track (execution mode), >= 1
  std::size_t warmup_steps = 3;   //!< steps per track run before the window opens (not profiled)
  bool print_report = true;       //!< finish() prints profile::to_text(report) when `trace` is set
  bool verbose = false;           //!< the printed report and findings in full (profile::to_text's `verbose`)
  bool graph_tracks_only = false; //!< profile only tracks whose name starts with "graph" (the doctor alone needs
                                  //!< no profile of the eager modes)
};

//! A profiling session over a workload's run. Per track (execution mode) it counts the steps the workload marks and
//! profiles steps [warmup_steps, warmup_steps + steps): a CUPTI profiler (conveyor::profile::profiler) is started
//! when the window opens (or when a graph is watched) and collected and stopped when the window closes, the track
//! changes or the session finishes; only the work of profiled steps is kept (a conditional body's work with the
//! graph launch that ran it). One session at a time per process (CUPTI allows one profiler). Not thread-safe.
class profiling final : public graph_sink {
public:
  //! Starts and stops a profiler once, so that a machine where CUPTI cannot record fails here, before any work.
  //! \throws std::invalid_argument for steps 0; profile::profiler_error when CUPTI cannot record (another
  //!         profiler attached, no CUPTI library); conveyor::cuda_error when CUDA cannot be initialised.
  explicit profiling(profiling_settings settings);
  ~profiling() override;                           //!< stops a running profiler; writes nothing. Never throws.
  profiling(const profiling&) = delete;            //!< one session
  profiling& operator=(const profiling&) = delete; //!< one session

  //! Marks the next step of track `track`: an engaged scope for the steps of its window, else an empty optional.
  //! Call it at the start of each step; the previous step must have ended. Closing a window (the first step after
  //! it, or of another track) collects the profile: it waits for the device (cudaDeviceSynchronize).
  //! \throws profile::profiler_error when CUPTI fails; conveyor::cuda_error when collecting reports an error.
  [[nodiscard]] std::optional<profile::step_scope> step(std::string_view track);

  //! Names the executable graph `exec` `name` for the profile (profiler::watch with describe(exec)); starts a
  //! profiler when none runs. Call it after instantiating and before launching; again after a re-instantiation.
  //! Ignored after stop().
  //! \throws profile::profiler_error; conveyor::cuda_error when the graph cannot be described.
  void watch(const graph_exec& exec, std::string name) override;

  //! Hands `exec` to the doctor: its description and facts() as of now (call it after the run's launches), with
  //! a graphed callable's statistics and reasons when the graph is one of its executables. Ignored when the doctor
  //! is off or after stop(). \throws conveyor::cuda_error when the graph cannot be described.
  void examine(const graph_exec& exec, std::string name, const graphed_statistics* graphed = nullptr,
               const std::deque<std::string>* reasons = nullptr);

  //! Closes the open window; later steps, watches and examinations are ignored (e.g. after the first image size).
  //! \throws as step().
  void stop();

  //! Stops, analyses what was profiled and, as set: writes the Perfetto trace atomically, the coloured DOT of each
  //! watched graph next to it (FILE.dot; further graphs FILE.<name>.dot) and, when Graphviz `dot` is on PATH, the
  //! SVG; prints profile::to_text(report), then the doctor's findings for every examined graph.
  //! \throws scenarios::file_error when a file cannot be written; std::invalid_argument when the analysis refuses
  //!         a description; as step().
  void finish();

private:
  struct examined {
    std::string name;
    graph_description graph;
    exec_facts facts;
    std::optional<graphed_statistics> graphed;
    std::optional<std::deque<std::string>> reasons;
  };
  void close();
  void start();
  void merge(profile::trace t);
  [[nodiscard]] bool profiles(std::string_view track) const;
  // finish()'s phases: the trace and the coloured graphs, the text report, the doctor's findings.
  void write_trace(const profile::profile_report& report) const;
  void print_report(const profile::profile_report& report) const;
  void run_doctor(const profile::profile_report& report) const;

  profiling_settings settings_;
  std::optional<profile::profiler> profiler_;
  std::string window_track_;                             // track whose window is open ("" none)
  std::map<std::string, std::size_t, std::less<>> seen_; // steps marked per track
  profile::trace collected_;
  std::vector<examined> examined_;
  bool stopped_ = false;
};

//! The session the options ask for, or nullptr when neither --profile nor --doctor was given. With --doctor alone
//! only the graph modes are profiled.
//! \throws as profiling::profiling().
[[nodiscard]] std::unique_ptr<profiling> make_profiling(const profiling_cli& o, std::string workload);

} // namespace conveyor::scenarios
