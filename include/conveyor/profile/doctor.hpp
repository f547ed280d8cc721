#pragma once
//! \file doctor.hpp
//! The tuning doctor: the CUDA Graphs performance checklist as automatic checks on a graph's
//! description, its executable graph's history, a profile of its launches and a graphed callable's
//! statistics. Each finding names the check, its severity, the nodes, the evidence (numbers) and
//! the fix. Runs without a GPU (its inputs are plain values; the headers need the CUDA runtime's
//! headers, as graphed_types.hpp does).

#include "conveyor/assembly/graphed_types.hpp"
#include "conveyor/define/description.hpp"
#include "conveyor/execute/exec_facts.hpp"
#include "conveyor/profile/report.hpp"

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::profile {

//! How much a finding matters.
enum class severity : std::uint8_t {
  info,     //!< worth knowing; acting on it may help a little
  warning,  //!< costs time now; the fix is usually worth it
  critical, //!< costs most of the step's time, or is a correctness or resource risk
};

//! "info", "warning" or "critical".
[[nodiscard]] const char* to_string(severity s) noexcept;

//! One finding of the doctor. A plain value.
struct finding {
  //! the check's id (doctor_checks lists them), e.g. "short_kernels"
  std::string check;
  severity level = severity::info; //!< how much it matters
  //! the nodes concerned (display names or profile labels); may be empty
  std::vector<std::string> nodes;
  //! the numbers behind it, e.g. "12 of 14 kernels run < 2 µs; launch gap 1.1 µs"
  std::string evidence;
  std::string fix; //!< what to change, e.g. "fuse axpy and scale into one kernel"
  //! False for a check that saw its pattern but cannot apply here, with `evidence` saying why (e.g.
  //! a chain whose kernels cannot wait for their dependencies): not counted among the findings,
  //! shown by to_text only when verbose and by to_json with "applies": false.
  bool applies = true;
};

//! What the doctor looks at. Every part is optional: a check runs when what it needs is there (a
//! null pointer, or an empty profile_graph for the profile, leaves the checks that need it out).
//! Pointers are not owned and must outlive diagnose().
struct doctor_input {
  std::string name;                            //!< the graph's name, for the findings' text
  const graph_description* graph = nullptr;    //!< describe(graph) or describe(graph_exec)
  const exec_facts* exec = nullptr;            //!< graph_exec::facts()
  const profile_report* profile = nullptr;     //!< a profile holding launches of this graph
  std::string profile_graph;                   //!< watched graph name of this graph in `profile`
  std::string profile_track;                   //!< track of its launches in `profile` ("" any)
  const graphed_statistics* graphed = nullptr; //!< a graphed callable's statistics

  //! and its reasons (graphed::reasons())
  const std::deque<std::string>* graphed_reasons = nullptr;
};

//! Where the checks draw their lines. Times in µs.
struct doctor_thresholds {
  //! host+GPU cost of one graph launch; graphs whose work is not several times
  double launch_overhead_us = 2.5;
  // !< this do not amortise it
  std::size_t min_nodes = 4; //!< graphs with fewer kernel/copy nodes are "too few nodes"
  //! kernels shorter than this (and than the gap before them) are fusion
  double short_kernel_us = 3.0;
  // !< candidates
  //! idle gaps on the critical path above this share of the wall time matter
  double gap_share = 0.10;
  //! kernel chains at least this long (each node one predecessor, one
  std::size_t pdl_chain = 3;
  // !< successor) are candidates for programmatic dependent launch
  //! device copies up to this size could be part of a kernel
  std::size_t small_copy_bytes = 64u << 10;
  //! WHILE bodies shorter than this per iteration are dominated by overhead
  double tiny_body_us = 5.0;
  //! without a profile: WHILE bodies with at most this many nodes are tiny
  std::size_t tiny_body_nodes = 2;
  //! graphed: captures + instantiations per call above this are churn
  double churn_rate = 0.05;
};

//! Every check the doctor runs, by id: failed_launch, few_nodes, short_kernels, critical_path_gaps,
//! pdl_chains, host_on_critical_path, removable_copies, missing_upload, unfreed_allocations,
//! captured_allocations, recapture_churn, churn_guard, update_fallbacks, serialised_branches,
//! tiny_loop_body, legacy_stream, step_through.
[[nodiscard]] const std::vector<std::string>& doctor_checks();

//! Runs every check whose inputs `in` holds and returns the findings, most severe first. Profiled
//! launches with non-finite or negative times are left out.
//! \throws std::invalid_argument when the description's edges are not a DAG or name nodes
//!         out of range, or a threshold is not finite, negative, min_nodes is 0 or pdl_chain below
//!         2.
[[nodiscard]] std::vector<finding> diagnose(const doctor_input& in,
                                            const doctor_thresholds& thresholds = {});

//! The findings as text, headed by `name`; "no findings" when none applies (checks that did not
//! apply are listed, with why, only when `verbose`). Each finding in three short lines — what (its
//! severity, check and nodes, folded and shortened: readable.hpp), what it costs (the evidence,
//! names shortened, cut at about 300 characters), the fix — or, `verbose`, in full (every node's
//! full name, the whole evidence). The JSON (to_json) always holds everything. Pure; never throws
//! but for std::bad_alloc.
[[nodiscard]] std::string to_text(const std::vector<finding>& findings, std::string_view name = {},
                                  bool verbose = false);

//! The findings as a JSON array of {"check", "severity", "nodes", "evidence", "fix", "applies"}
//! (finding::applies: false for a check that saw its pattern but does not apply).
[[nodiscard]] std::string to_json(const std::vector<finding>& findings, int indent = 2);

} // namespace conveyor::profile
