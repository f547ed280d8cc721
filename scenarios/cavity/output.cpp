//! \file output.cpp
//! CSV output.

#include "cavity/output.hpp"

#include "common/file_output.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace conveyor::cavity {

namespace {

// Atomically (a temporary file, then rename): a failed write leaves no half file.
void write_text(const std::filesystem::path& file, const std::string& text) {
  scenarios::write_file_atomically(file, text);
}

} // namespace

void write_profile_csv(const std::filesystem::path& file, const profile& p, std::string_view coordinate,
                       std::string_view value_name) {
  std::string text = fmt::format("{},{}\n", coordinate, value_name);
  for (std::size_t k = 0; k < p.position.size() && k < p.value.size(); ++k)
    text += fmt::format("{:.17g},{:.17g}\n", p.position[k], p.value[k]);
  write_text(file, text);
}

void write_ghia_csv(const std::filesystem::path& file, const ghia_reference& ref, double re, const profile& u,
                    const profile& v) {
  const std::vector<double>* u_ref = ref.u.column(re);
  const std::vector<double>* v_ref = ref.v.column(re);
  if (u_ref == nullptr || v_ref == nullptr)
    throw std::invalid_argument(fmt::format("Ghia et al. tabulate no Re {:g}", re));
  std::string text = "profile,position,ghia,ours,difference\n";
  auto rows = [&](const char* name, const ghia_table& t, const std::vector<double>& values, const profile& ours) {
    for (std::size_t k = 0; k < t.position.size(); ++k) {
      const double mine = interpolate(ours, t.position[k]);
      text += fmt::format("{},{:.4f},{:.5f},{:.6f},{:.6f}\n", name, t.position[k], values[k], mine, mine - values[k]);
    }
  };
  rows("u", ref.u, *u_ref, u);
  rows("v", ref.v, *v_ref, v);
  write_text(file, text);
}

std::optional<double> ghia_target(double re) noexcept {
  if (std::fabs(re - 100.0) < 1e-9 || std::fabs(re - 400.0) < 1e-9) return 0.02;
  if (std::fabs(re - 1000.0) < 1e-9) return 0.03;
  return std::nullopt;
}

} // namespace conveyor::cavity
