#pragma once
//! \file allreduce_report.hpp
//! The results of `conveyor allreduce` and their two written forms: the table printed on stdout and the JSON file
//! (schema conveyor-allreduce/1). Host-only.

#include "allreduce/allreduce.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::allreduce {

//! One size's measurements, microseconds per all-reduce (medians over the trials); negative: not measured.
struct size_row {
  std::size_t bytes = 0;   //!< bytes per rank and call
  double eager_us = -1;    //!< eager calls, Conveyor's nonblocking communicators
  double blocking_us = -1; //!< eager calls, plain blocking NCCL communicators (the baseline)
  double graph_us = -1;    //!< the calls captured into one graph, replayed
  bool correct = true;     //!< every element of every result equalled the number of ranks
};

//! The sizes to measure: `o.min_bytes`, times `o.factor`, ... up to `o.max_bytes`.
[[nodiscard]] std::vector<std::size_t> sizes_of(const options& o);

//! A size as the table shows it: whole MiB or KiB where it is a multiple of one ("64 MiB", "4 KiB"), else bytes.
[[nodiscard]] std::string size_label(std::size_t bytes);

//! The table of `rows` over `world` ranks under `title`, with a legend.
[[nodiscard]] std::string table(const std::vector<size_row>& rows, int world, const std::string& title);

//! The rows as JSON (schema conveyor-allreduce/1), with the run's ranks, mode, GPUs and NCCL version.
[[nodiscard]] nlohmann::json to_json(const std::vector<size_row>& rows, int world, const options& o,
                                     const std::vector<std::string>& gpus, int nccl_version);

} // namespace conveyor::allreduce
