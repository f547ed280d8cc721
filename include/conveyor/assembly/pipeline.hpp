#pragma once
//! \file pipeline.hpp
//! conveyor::pipeline: hybrid execution — stages run in order on one stream, each either graphed
//! (captured once, replayed) or eager (work that cannot be captured: host-dependent control flow, a
//! library that synchronises).

#include "conveyor/assembly/graphed.hpp"
#include "conveyor/runtime/stream.hpp"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace conveyor {

//! A sequence of stages `void(const stream&, Args...)` run in order on the caller's stream.
//! Ordering between stages is the stream's own: no extra synchronisation is added. Graphed stages
//! are conveyor::graphed callables (one per stage, with its own cache and statistics); eager stages
//! run as plain calls. Thread safety: not thread-safe (as graphed); one pipeline per thread.
template <class... Args>
class pipeline {
public:
  //! A stage's callable.
  using stage_function = std::function<void(const stream&, Args...)>;

  //! Appends a stage that is captured and replayed (see conveyor::graphed).
  pipeline& graphed_stage(std::string name, stage_function f, graphed_options options = {}) {
    stages_.push_back(
        {std::move(name),
         {},
         std::make_unique<conveyor::graphed<stage_function>>(std::move(f), std::move(options))});
    return *this;
  }
  //! Appends a stage that always runs eagerly (it may read values on the host and synchronise).
  pipeline& eager_stage(std::string name, stage_function f) {
    stages_.push_back({std::move(name), std::move(f), nullptr});
    return *this;
  }

  //! Runs every stage in order on `s`.
  //! \throws whatever a stage throws, and what graphed throws.
  void operator()(const stream& s, Args... args) {
    for (auto& st : stages_) {
      if (st.captured) (*st.captured)(s, args...);
      else st.eager(s, args...);
    }
  }

  //! Number of stages.
  [[nodiscard]] std::size_t size() const noexcept { return stages_.size(); }
  //! The statistics of stage `i`, or nullptr for an eager stage.
  //! \throws std::out_of_range when `i` >= size().
  [[nodiscard]] const graphed_statistics* statistics(std::size_t i) const {
    return stages_.at(i).captured ? &stages_.at(i).captured->statistics() : nullptr;
  }
  //! One report per graphed stage, and a line per eager stage.
  [[nodiscard]] std::string report() const {
    std::string out;
    for (const auto& st : stages_)
      out += st.captured ? st.captured->report(st.name) : st.name + ": eager\n";
    return out;
  }

private:
  struct stage {
    std::string name;
    stage_function eager;
    std::unique_ptr<conveyor::graphed<stage_function>> captured; //!< null for an eager stage
  };
  std::vector<stage> stages_;
};

} // namespace conveyor
