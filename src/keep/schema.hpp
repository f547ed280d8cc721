#pragma once
// Internal (keep layer): the CBOR document of a graph file as nlohmann::json values, both ways. The document's
// schema is docs/graph-files.md; reading checks each field's presence, type and range and names where it is
// ("graphs[0] 'step' node 3 (kernel): 'grid': expected ..."); the rules across fields are graph_file_check's.

#include "conveyor/keep/graph_file.hpp"
#include "keep/flat_document.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor::detail::keep {

using json = nlohmann::json;

//! The document of `file` (every field, images and contents as CBOR byte strings).
[[nodiscard]] json to_document(const graph_file& file);
//! The file a document holds (read into a flat document). \throws graph_file_error naming the field and what was
//! expected.
[[nodiscard]] graph_file from_document(const flat_value& document, const graph_file_limits& limits);

//! One launch attribute the format knows: its CUDA ID, name in the document and messages, and number of values.
struct attribute_format {
  std::uint32_t id;
  std::string_view name;
  std::size_t values;
};
//! The entry for `id`, or nullopt for an ID the format does not know.
[[nodiscard]] std::optional<attribute_format> attribute_format_of(std::uint32_t id) noexcept;

//! The name of node kind `kind` in documents ("kernel", "memcpy", ...; node_kind's to_string), and back (nullopt for
//! a name no kind has).
[[nodiscard]] std::optional<node_kind> node_kind_named(std::string_view name) noexcept;

} // namespace conveyor::detail::keep
