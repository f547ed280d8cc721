#pragma once
//! \file output.hpp
//! CSV output of the centre-line profiles and of their comparison with Ghia et al. Host-only.

#include "cavity/fields.hpp"
#include "cavity/ghia.hpp"

#include <filesystem>
#include <optional>
#include <string_view>

namespace conveyor::cavity {

//! Writes a profile as CSV: header `<coordinate>,<value_name>`, then one row per point (wall points included),
//! 17 significant digits.
//! \throws std::runtime_error when the file cannot be written.
void write_profile_csv(const std::filesystem::path& file, const profile& p, std::string_view coordinate,
                       std::string_view value_name);

//! Writes the comparison with Ghia et al. at Reynolds number `re` as CSV: header
//! `profile,position,ghia,ours,difference`, rows for u (Table I, position y) then v (Table II, position x).
//! \throws std::invalid_argument when a table has no column for `re`; std::runtime_error when the file cannot be
//!         written.
void write_ghia_csv(const std::filesystem::path& file, const ghia_reference& ref, double re, const profile& u,
                    const profile& v);

//! The target for the largest difference from Ghia et al. at `re` on a 257 x 257 lattice or finer: 0.02 at Re 100
//! and 400, 0.03 at Re 1000; nothing for other Reynolds numbers.
[[nodiscard]] std::optional<double> ghia_target(double re) noexcept;

} // namespace conveyor::cavity
