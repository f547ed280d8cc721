#pragma once
// Internal (keep layer): saving with what the public calls do not return — whether each executable graph runs its
// definition exactly (graphed's buckets), and each buffer's address in this process (the round-trip check).

#include "conveyor/keep/save.hpp"

#include <vector>

namespace conveyor::detail::keep {

//! to_graph_file, with executable graphs whose nodes were set node by node allowed (`allow_inexact`: graphed saves
//! them with a key that always re-captures), each entry's exactness appended to `exact` and each buffer's address in
//! this process (null for graph allocations) to `bases` (either may be null). \throws as to_graph_file.
[[nodiscard]] graph_file save_entries(const std::vector<graph_to_save>& graphs, const save_options& options,
                                      bool allow_inexact, std::vector<bool>* exact, std::vector<const void*>* bases);

} // namespace conveyor::detail::keep
