// check_determinism (debug/step.hpp): two runs of one executable graph from the same contents of named buffers,
// compared bitwise, and with step-through the first node after which they differ.
#include "conveyor/debug/step.hpp"

#include "conveyor/error.hpp"
#include "cuda/check.hpp"
#include "debug/step_runner.hpp"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

namespace conveyor {

namespace {

using contents = std::vector<std::vector<unsigned char>>;
using step_trail = std::vector<std::pair<step_node, contents>>; // the buffers after each step

contents read_all(const std::vector<watched_buffer>& buffers) {
  contents out;
  for (const auto& b : buffers) {
    out.emplace_back(b.count * detail::element_bytes(b.type));
    CONVEYOR_CHECK(cudaMemcpy(out.back().data(), b.data, out.back().size(), cudaMemcpyDefault));
  }
  return out;
}

void write_all(const std::vector<watched_buffer>& buffers, const contents& values) {
  for (std::size_t k = 0; k < buffers.size(); ++k)
    CONVEYOR_CHECK(
        cudaMemcpy(const_cast<void*>(buffers[k].data), values[k].data(), values[k].size(), cudaMemcpyDefault));
  CONVEYOR_CHECK(cudaDeviceSynchronize());
}

// One run from `start`: a replay, or a step-through recording the buffers after every node.
contents run_once(graph_exec& e, const stream& s, const std::vector<watched_buffer>& buffers, const contents& start,
                  bool step, step_trail* trail) {
  write_all(buffers, start);
  if (!step) {
    e.launch(s);
    s.synchronize();
    return read_all(buffers);
  }
  step_options o;
  o.on_step = [&](const step_node& n) { trail->emplace_back(n, read_all(buffers)); };
  (void)step_through(e, s, o);
  return read_all(buffers);
}

nondeterministic_buffer compare(const watched_buffer& b, const std::vector<unsigned char>& x,
                                const std::vector<unsigned char>& y) {
  const std::size_t width = b.count == 0 ? 1 : x.size() / b.count;
  nondeterministic_buffer d{b.name, 0, 0};
  for (std::size_t i = 0; i < b.count; ++i)
    if (std::memcmp(x.data() + i * width, y.data() + i * width, width) != 0) {
      if (d.differing == 0) d.first_index = i;
      ++d.differing;
    }
  return d;
}

// Refuses an empty list of buffers, and a buffer without data or elements.
void check_buffers(const std::vector<watched_buffer>& buffers) {
  if (buffers.empty())
    throw std::invalid_argument("conveyor::check_determinism: no buffers to compare: name the graph's outputs");
  for (const auto& b : buffers)
    if (b.data == nullptr || b.count == 0)
      throw std::invalid_argument(
          fmt::format("conveyor::check_determinism: buffer '{}' has no data or no elements", b.name));
}

// The buffers whose contents differ between the runs that ended with `a` and `b`.
std::vector<nondeterministic_buffer> differing_buffers(const std::vector<watched_buffer>& buffers, const contents& a,
                                                       const contents& b) {
  std::vector<nondeterministic_buffer> out;
  for (std::size_t k = 0; k < buffers.size(); ++k)
    if (auto d = compare(buffers[k], a[k], b[k]); d.differing > 0) out.push_back(std::move(d));
  return out;
}

// The first node after which the buffers of two step-through runs differ; none when they never do (or no step ran).
std::optional<step_node> first_difference(const step_trail& first, const step_trail& second) {
  for (std::size_t i = 0; i < first.size() && i < second.size(); ++i)
    if (first[i].second != second[i].second) return first[i].first;
  return std::nullopt;
}

} // namespace

determinism_report check_determinism(graph_exec& e, const stream& s, const std::vector<watched_buffer>& buffers,
                                     bool step) {
  check_buffers(buffers);
  s.synchronize();
  const contents start = read_all(buffers);
  step_trail first_trail;
  step_trail second_trail;
  const contents a = run_once(e, s, buffers, start, step, &first_trail);
  const contents b = run_once(e, s, buffers, start, step, &second_trail);
  determinism_report report;
  report.differing = differing_buffers(buffers, a, b);
  report.first_node = first_difference(first_trail, second_trail);
  return report;
}

} // namespace conveyor
