#pragma once
// Internal (keep layer): a CBOR document read into one flat array of values (nlohmann's CBOR reader, through its SAX
// interface), instead of nlohmann's tree of allocated maps: a graph file of 10,000 nodes holds a few hundred thousand
// values, and a tree costs an allocation or more each (most of the reading time, measured). Values are read in
// document order; a container's children follow it, each subtree's size known, so a child is found by skipping.

#include <cstddef>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace conveyor::detail::keep {

class flat_document;

//! One value of a flat document (a handle: cheap to copy, valid while the document lives).
class flat_value {
public:
  enum class kind : std::uint8_t { null, boolean, unsigned_integer, signed_integer, floating, text, bytes, array, map };
  flat_value(const flat_document* doc, std::uint32_t at) noexcept : doc_(doc), at_(at) {}

  [[nodiscard]] kind type() const noexcept;
  [[nodiscard]] bool is_null() const noexcept { return type() == kind::null; }
  [[nodiscard]] bool is_boolean() const noexcept { return type() == kind::boolean; }
  [[nodiscard]] bool is_number_unsigned() const noexcept { return type() == kind::unsigned_integer; }
  //! Signed or unsigned integer (as nlohmann's is_number_integer).
  [[nodiscard]] bool is_number_integer() const noexcept {
    return type() == kind::signed_integer || type() == kind::unsigned_integer;
  }
  [[nodiscard]] bool is_number() const noexcept { return is_number_integer() || type() == kind::floating; }
  [[nodiscard]] bool is_string() const noexcept { return type() == kind::text; }
  [[nodiscard]] bool is_binary() const noexcept { return type() == kind::bytes; }
  [[nodiscard]] bool is_array() const noexcept { return type() == kind::array; }
  [[nodiscard]] bool is_object() const noexcept { return type() == kind::map; }
  [[nodiscard]] bool is_discarded() const noexcept { return false; }
  //! "null", "boolean", "number", "string", "binary", "array", "object" (nlohmann's names, for messages).
  [[nodiscard]] const char* type_name() const noexcept;

  [[nodiscard]] std::uint64_t unsigned_value() const noexcept;
  [[nodiscard]] std::int64_t signed_value() const noexcept;
  [[nodiscard]] double number() const noexcept;
  [[nodiscard]] bool boolean() const noexcept;
  [[nodiscard]] std::string_view text() const noexcept;
  [[nodiscard]] std::span<const unsigned char> bytes() const noexcept;

  //! Elements of an array, entries of a map.
  [[nodiscard]] std::size_t size() const noexcept;
  //! Element `i` of an array (sequential access is constant time: the document remembers the last one found).
  [[nodiscard]] flat_value operator[](std::size_t i) const noexcept;
  //! The entry `key` of a map, or a null handle (valid() false).
  [[nodiscard]] flat_value find(std::string_view key) const noexcept;
  [[nodiscard]] bool valid() const noexcept { return doc_ != nullptr; }

private:
  const flat_document* doc_;
  std::uint32_t at_;
};

//! A CBOR document in document order. Built by read_flat_document.
class flat_document {
public:
  struct entry {
    flat_value::kind type = flat_value::kind::null;
    std::uint32_t subtree = 1;  //!< entries in this value's subtree, itself included
    std::uint32_t children = 0; //!< arrays and maps
    std::uint64_t bits = 0;     //!< integers, booleans, a double's bits; text and bytes: offset in their arena
    std::uint32_t length = 0;   //!< text and bytes: length
    std::uint32_t key = 0;      //!< a map entry: its key's offset in the text arena
    std::uint32_t key_length = 0;
  };
  [[nodiscard]] flat_value root() const noexcept { return {this, 0}; }
  std::vector<entry> entries;
  std::string texts;
  std::vector<unsigned char> blobs;
  // Per array, the last element operator[] found (index, entry): sequential reads of an array cost a step each,
  // also while other arrays are read in between (a graph's nodes, each node's dependencies).
  struct cursor {
    std::size_t index = 0;
    std::uint32_t at = 0;
  };
  mutable std::unordered_map<std::uint32_t, cursor> cursors;
};

//! Reads CBOR `bytes` (nlohmann's reader, strict, tags refused) into a flat document, nested no deeper than
//! `max_depth`. Returns an empty string, or why not (with the byte offset where nlohmann says it).
[[nodiscard]] std::string read_flat_document(std::span<const unsigned char> bytes, std::size_t max_depth,
                                             flat_document& out);

} // namespace conveyor::detail::keep
