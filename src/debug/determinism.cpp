// check_determinism (debug/step.hpp): two runs of one executable graph from the same contents of named buffers,
// compared bitwise, and with step-through the first node after which they differ.
#include "conveyor/debug/step.hpp"

#include "conveyor/error.hpp"
#include "cuda/check.hpp"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

namespace conveyor {

namespace {

std::size_t bytes_of(const watched_buffer& b) {
  switch (b.type) {
  case element_type::f32: return b.count * 4;
  case element_type::f64: return b.count * 8;
  case element_type::f16:
  case element_type::bf16: return b.count * 2;
  }
  return b.count * 4;
}

using contents = std::vector<std::vector<unsigned char>>;

contents read_all(const std::vector<watched_buffer>& buffers) {
  contents out;
  for (const auto& b : buffers) {
    out.emplace_back(bytes_of(b));
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
                  bool step, std::vector<std::pair<step_node, contents>>* trail) {
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
  bool first = true;
  for (std::size_t i = 0; i < b.count; ++i)
    if (std::memcmp(x.data() + i * width, y.data() + i * width, width) != 0) {
      if (first) d.first_index = i;
      first = false;
      ++d.differing;
    }
  return d;
}

} // namespace

determinism_report check_determinism(graph_exec& e, const stream& s, const std::vector<watched_buffer>& buffers,
                                     bool step) {
  if (buffers.empty())
    throw std::invalid_argument("conveyor::check_determinism: no buffers to compare: name the graph's outputs");
  for (const auto& b : buffers)
    if (b.data == nullptr || b.count == 0)
      throw std::invalid_argument(
          fmt::format("conveyor::check_determinism: buffer '{}' has no data or no elements", b.name));
  s.synchronize();
  const contents start = read_all(buffers);
  std::vector<std::pair<step_node, contents>> first_trail;
  std::vector<std::pair<step_node, contents>> second_trail;
  const contents a = run_once(e, s, buffers, start, step, &first_trail);
  const contents b = run_once(e, s, buffers, start, step, &second_trail);
  determinism_report report;
  for (std::size_t k = 0; k < buffers.size(); ++k)
    if (auto d = compare(buffers[k], a[k], b[k]); d.differing > 0) report.differing.push_back(std::move(d));
  for (std::size_t i = 0; i < first_trail.size() && i < second_trail.size(); ++i)
    if (first_trail[i].second != second_trail[i].second) {
      report.first_node = first_trail[i].first;
      break;
    }
  return report;
}

} // namespace conveyor
