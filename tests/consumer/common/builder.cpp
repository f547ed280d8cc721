// Plain C++ (no nvcc) against Conveyor's headers: a graph described without a GPU, and the profile package's
// analysis and doctor.
#include <conveyor/conveyor.hpp>
#include <conveyor/profile/doctor.hpp>
#include <conveyor/profile/report.hpp>

#include <string>

std::string describe_builder() {
  conveyor::graph_description d;
  d.nodes.push_back(conveyor::node_description{});
  d.nodes[0].kind = conveyor::node_kind::empty;
  d.nodes[0].label = "start";
  // The profile package (conveyor::profile): the analysis and the doctor run without a GPU.
  const auto report = conveyor::profile::analyze(conveyor::profile::trace{});
  conveyor::profile::doctor_input in;
  in.graph = &d;
  const auto findings = conveyor::profile::diagnose(in);
  return conveyor::to_json(d, -1) + "\nprofile: " + std::to_string(report.records) +
         " records; doctor: " + std::to_string(findings.size()) + " finding(s)";
}
