//! \file study.cpp
//! A study's command line and report.

#include "bench/study.hpp"

#include <fmt/format.h>

namespace conveyor::bench {

std::string study_command(const study& s, const study_args& args) {
  std::string command = fmt::format("conveyor bench {}", s.name);
  for (const study_option& o : s.options) {
    switch (o.what) {
    case study_option::kind::quick:
      if (args.quick) command += " --quick";
      break;
    case study_option::kind::steps: command += fmt::format(" --steps {}", args.steps); break;
    }
  }
  return command;
}

std::string study_report(const study& s, const study_args& args, std::string_view device, std::string_view body) {
  return fmt::format("{}\n\n`{}`{}\n\n{}", device, study_command(s, args), s.caption, body);
}

} // namespace conveyor::bench
