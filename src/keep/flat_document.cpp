// A CBOR document read through nlohmann's SAX interface into one flat array (flat_document.hpp).
#include "keep/flat_document.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace conveyor::detail::keep {

namespace {

using json = nlohmann::json;
using kind = flat_value::kind;

class builder {
public:
  builder(flat_document& doc, std::size_t max_depth) : doc_(doc), max_depth_(max_depth) {}

  bool null() { return add(kind::null, 0); }
  bool boolean(bool v) { return add(kind::boolean, v ? 1 : 0); }
  bool number_integer(json::number_integer_t v) { return add(kind::signed_integer, static_cast<std::uint64_t>(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return add(kind::unsigned_integer, v); }
  bool number_float(json::number_float_t v, const json::string_t&) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return add(kind::floating, bits);
  }
  bool string(json::string_t& v) {
    const auto offset = doc_.texts.size();
    doc_.texts.append(v);
    return add(kind::text, offset, static_cast<std::uint32_t>(v.size()));
  }
  bool binary(json::binary_t& v) {
    const auto offset = doc_.blobs.size();
    doc_.blobs.insert(doc_.blobs.end(), v.begin(), v.end());
    return add(kind::bytes, offset, static_cast<std::uint32_t>(v.size()));
  }
  bool start_object(std::size_t) { return open(kind::map); }
  bool key(json::string_t& k) {
    key_ = static_cast<std::uint32_t>(doc_.texts.size());
    key_length_ = static_cast<std::uint32_t>(k.size());
    doc_.texts.append(k);
    has_key_ = true;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(kind::array); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = fmt::format("the CBOR document is malformed at its byte {} ({})", position, e.what());
    return false;
  }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

private:
  bool add(kind type, std::uint64_t bits, std::uint32_t length = 0) {
    flat_document::entry e;
    e.type = type;
    e.bits = bits;
    e.length = length;
    if (has_key_) {
      e.key = key_;
      e.key_length = key_length_;
      has_key_ = false;
    }
    if (!open_.empty()) ++doc_.entries[open_.back()].children;
    doc_.entries.push_back(e);
    return true;
  }
  bool open(kind type) {
    if (open_.size() + 1 > max_depth_) {
      error_ = fmt::format("the CBOR document nests deeper than {} levels", max_depth_);
      return false;
    }
    add(type, 0);
    open_.push_back(static_cast<std::uint32_t>(doc_.entries.size() - 1));
    return true;
  }
  bool close() {
    const std::uint32_t at = open_.back();
    open_.pop_back();
    doc_.entries[at].subtree = static_cast<std::uint32_t>(doc_.entries.size() - at);
    return true;
  }

  flat_document& doc_;
  std::size_t max_depth_;
  std::vector<std::uint32_t> open_;
  std::uint32_t key_ = 0;
  std::uint32_t key_length_ = 0;
  bool has_key_ = false;
  std::string error_;
};

} // namespace

flat_value::kind flat_value::type() const noexcept { return doc_->entries[at_].type; }

const char* flat_value::type_name() const noexcept {
  // By kind, in the enumeration's order: JSON's names (every integer and floating point kind is a number).
  constexpr std::array<const char*, 9> names{"null",   "boolean", "number", "number", "number",
                                             "string", "binary",  "array",  "object"};
  static_assert(names.size() == static_cast<std::size_t>(kind::map) + 1, "one name per kind");
  const auto k = static_cast<std::size_t>(type());
  return k < names.size() ? names[k] : "null";
}

std::uint64_t flat_value::unsigned_value() const noexcept { return doc_->entries[at_].bits; }
std::int64_t flat_value::signed_value() const noexcept { return static_cast<std::int64_t>(doc_->entries[at_].bits); }

double flat_value::number() const noexcept {
  const auto& e = doc_->entries[at_];
  if (e.type == kind::unsigned_integer) return static_cast<double>(e.bits);
  if (e.type == kind::signed_integer) return static_cast<double>(static_cast<std::int64_t>(e.bits));
  double d = 0.0;
  std::memcpy(&d, &e.bits, sizeof d);
  return d;
}

bool flat_value::boolean() const noexcept { return doc_->entries[at_].bits != 0; }

std::string_view flat_value::text() const noexcept {
  const auto& e = doc_->entries[at_];
  return std::string_view(doc_->texts).substr(e.bits, e.length);
}

std::span<const unsigned char> flat_value::bytes() const noexcept {
  const auto& e = doc_->entries[at_];
  return std::span<const unsigned char>(doc_->blobs).subspan(e.bits, e.length);
}

std::size_t flat_value::size() const noexcept { return doc_->entries[at_].children; }

flat_value flat_value::operator[](std::size_t i) const noexcept {
  std::uint32_t at = at_ + 1;
  std::size_t k = 0;
  if (i == 0) return {doc_, at}; // the first element needs no walk (and most arrays are short)
  auto [it, fresh] = doc_->cursors.try_emplace(at_);
  flat_document::cursor& c = it->second;
  if (!fresh && c.index <= i) {
    at = c.at;
    k = c.index;
  }
  for (; k < i; ++k) at += doc_->entries[at].subtree;
  c = {i, at};
  return {doc_, at};
}

flat_value flat_value::find(std::string_view key) const noexcept {
  std::uint32_t at = at_ + 1;
  for (std::uint32_t k = 0; k < doc_->entries[at_].children; ++k) {
    const auto& e = doc_->entries[at];
    if (std::string_view(doc_->texts).substr(e.key, e.key_length) == key) return {doc_, at};
    at += e.subtree;
  }
  return {nullptr, 0};
}

std::string read_flat_document(std::span<const unsigned char> bytes, std::size_t max_depth, flat_document& out) {
  out.entries.reserve(std::min<std::size_t>(bytes.size() / 8, std::size_t{1} << 20));
  builder b(out, max_depth);
  bool ok = false;
  try {
    ok = json::sax_parse(bytes.data(), bytes.data() + bytes.size(), &b, json::input_format_t::cbor, true);
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("the CBOR document cannot be read ({})", e.what());
  }
  if (!b.error().empty()) return b.error();
  if (!ok || out.entries.empty()) return "the CBOR document is malformed";
  return {};
}

} // namespace conveyor::detail::keep
