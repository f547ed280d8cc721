// Readable names for the text reports (profile/readable.hpp): plain C++, host-tested.
#include "conveyor/profile/readable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>

namespace conveyor::profile {

namespace {

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// The '>' closing the template argument list that opens at s[i] == '<', or npos where it is not one (a parenthesis
// comes first, or nothing closes it).
std::size_t template_end(std::string_view s, std::size_t i) {
  int depth = 0;
  for (std::size_t j = i; j < s.size(); ++j) {
    if (s[j] == '(' || s[j] == ')') return std::string_view::npos;
    depth += s[j] == '<' ? 1 : s[j] == '>' ? -1 : 0;
    if (depth == 0) return j;
  }
  return std::string_view::npos;
}

// The index of the `close` matching the `open` at s[i] (nested pairs matched), or npos where nothing closes it.
std::size_t matching_close(std::string_view s, std::size_t i, char open, char close) {
  int depth = 0;
  for (std::size_t j = i; j < s.size(); ++j) {
    depth += s[j] == open ? 1 : s[j] == close ? -1 : 0;
    if (depth == 0) return j;
  }
  return std::string_view::npos;
}

// Whether s[i] opens a template argument list: a '<' right after an identifier, not an operator "<<".
bool opens_template(std::string_view s, std::size_t i) {
  return s[i] == '<' && i > 0 && word_char(s[i - 1]) && s.substr(i, 2) != "<<";
}

// Removes every template argument list that follows an identifier ("name<...>", nested brackets matched).
std::string drop_templates(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::size_t end = opens_template(s, i) ? template_end(s, i) : std::string_view::npos;
    if (end != std::string_view::npos) i = end;
    else out += s[i];
  }
  return out;
}

// The transformations that apply anywhere in a text: anonymous namespaces, templates, qualifiers.
std::string strip_qualifiers(std::string_view s) {
  static const std::regex anonymous(R"(\(anonymous namespace\)::)");
  static const std::regex qualifiers(R"(\b(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~]))");
  std::string out = std::regex_replace(std::string(s), anonymous, "");
  out = drop_templates(out);
  return std::regex_replace(out, qualifiers, "");
}

// A name with every number replaced by '#': names that differ only in numbers share it.
std::string shape_of(const std::string& name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(name[i])) != 0) {
      out += '#';
      while (i + 1 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1])) != 0) ++i;
    } else {
      out += name[i];
    }
  }
  return out;
}

} // namespace

namespace {

// short_name without the wrapper rule: qualifiers, templates, "void" and the parameter list dropped.
std::string bare_name(std::string_view name) {
  static const std::regex void_prefix(R"(^\s*void\s+(?=[A-Za-z_]))");
  static const std::regex call(R"(^([A-Za-z_]\w*)\()");
  std::string s = std::regex_replace(strip_qualifiers(name), void_prefix, "");
  // A kernel's parameter list: from the '(' right after the name to a matching ')' that ends the name.
  std::smatch m;
  if (!std::regex_search(s, m, call)) return s;
  const std::size_t close = matching_close(s, static_cast<std::size_t>(m.length(0)) - 1, '(', ')');
  if (close == std::string_view::npos) return s;
  return close + 1 == s.size() ? m[1].str() : s;
}

// Kernel templates whose name says nothing and whose first template argument names the work (CUTLASS's, as cuBLAS
// launches them: "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(...)").
bool is_wrapper(const std::string& bare) { return bare == "Kernel" || bare == "Kernel2" || bare == "device_kernel"; }

// The first template argument of `bare`'s template argument list in `name`; empty where there is none.
std::string first_template_argument(std::string_view name, const std::string& bare) {
  const std::size_t open = name.find(bare + "<");
  if (open == std::string_view::npos) return {};
  const std::size_t from = open + bare.size() + 1;
  int depth = 0;
  for (std::size_t j = from; j < name.size(); ++j) {
    depth += name[j] == '<' ? 1 : 0;
    if (depth == 0 && (name[j] == ',' || name[j] == '>')) return std::string(name.substr(from, j - from));
    depth -= name[j] == '>' ? 1 : 0;
  }
  return {};
}

} // namespace

std::string short_name(std::string_view name) {
  std::string bare = bare_name(name);
  if (!is_wrapper(bare)) return bare;
  const std::string argument = first_template_argument(name, bare);
  return argument.empty() ? bare : fmt::format("{}<{}>", bare, short_name(argument));
}

// `s` without the return type "void " of each kernel signature in it and that signature's parameter list.
std::string drop_signatures(const std::string& s) {
  static const std::regex signature(R"(\bvoid\s+([A-Za-z_]\w*)\()");
  std::string out;
  std::size_t from = 0;
  for (std::sregex_iterator m(s.begin(), s.end(), signature), end; m != end; ++m) {
    const auto at = static_cast<std::size_t>(m->position(0));
    if (at < from) continue; // inside a parameter list already dropped
    out.append(s, from, at - from);
    out += (*m)[1].str();
    const std::size_t close = matching_close(s, at + static_cast<std::size_t>(m->length(0)) - 1, '(', ')');
    from = close == std::string_view::npos ? s.size() : close + 1; // just after the ')'
  }
  return out.append(s, std::min(from, s.size()));
}

std::string shorten_names(std::string_view text) { return drop_signatures(strip_qualifiers(text)); }

namespace {

constexpr std::string_view body_mark = "/body ";

// A conditional node's label in a path, cut to its first word and "…" where it is longer than 12 characters.
std::string short_label(std::string_view label) {
  if (label.size() <= 12) return std::string(label);
  const std::size_t space = label.find(' ');
  return std::string(label.substr(0, std::min<std::size_t>(space == std::string_view::npos ? 12 : space, 12))) + "…";
}

// The end of the path part of `name` ("while x/body 0/" and deeper): just after the last "/body N/", or 0.
std::size_t path_end(std::string_view name) {
  const std::size_t at = name.rfind(body_mark);
  if (at == std::string_view::npos) return 0;
  const std::size_t slash = name.find('/', at + body_mark.size());
  return slash == std::string_view::npos ? 0 : slash + 1;
}

} // namespace

std::string short_path_prefix(std::string_view prefix) {
  std::string out;
  std::size_t from = 0;
  for (std::size_t at = prefix.find(body_mark); at != std::string_view::npos; at = prefix.find(body_mark, from)) {
    const std::size_t slash = prefix.find('/', at + body_mark.size());
    if (slash == std::string_view::npos) break;
    out += short_label(prefix.substr(from, at - from));
    out += prefix.substr(at, slash + 1 - at);
    from = slash + 1;
  }
  return out.append(prefix.substr(from));
}

std::string short_path(std::string_view name) {
  const std::size_t end = path_end(name);
  if (end == 0) return short_name(name);
  return short_path_prefix(name.substr(0, end)) + short_name(name.substr(end));
}

namespace {

// `text` with every occurrence of `from` replaced by `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return text;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

} // namespace

std::string shorten_paths(std::string text, const std::vector<std::string>& names) {
  std::vector<std::string> longest_first = names;
  std::sort(longest_first.begin(), longest_first.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const auto& n : longest_first) {
    const std::size_t end = path_end(n);
    if (end == 0) continue;
    text = replace_all(std::move(text), n, short_path(n));
    text = replace_all(std::move(text), n.substr(0, end), short_path_prefix(n.substr(0, end)));
  }
  return text;
}

namespace {

// The entry for shortened[i, j): one run of names of one shape.
std::string run_entry(const std::vector<std::string>& shortened, std::size_t i, std::size_t j) {
  const bool identical = std::all_of(shortened.begin() + static_cast<std::ptrdiff_t>(i),
                                     shortened.begin() + static_cast<std::ptrdiff_t>(j),
                                     [&](const std::string& n) { return n == shortened[i]; });
  if (identical) return fmt::format("{} × {}", shortened[i], j - i);
  return fmt::format("{} … {}: {} nodes", shortened[i], shortened[j - 1], j - i);
}

// Whether shortened[i, j) folds into one entry: two or more identical names, or three or more of one shape.
bool folds(const std::vector<std::string>& shortened, std::size_t i, std::size_t j) {
  return j - i >= 3 || (j - i == 2 && shortened[i] == shortened[i + 1]);
}

// The end of the entry that starts at shortened[i]: the end of its run where the run folds, else i + 1.
std::size_t entry_end(const std::vector<std::string>& shortened, std::size_t i) {
  const std::string shape = shape_of(shortened[i]);
  std::size_t j = i + 1;
  while (j < shortened.size() && shape_of(shortened[j]) == shape) ++j;
  return folds(shortened, i, j) ? j : i + 1;
}

} // namespace

std::vector<std::string> fold_names(const std::vector<std::string>& names, std::size_t most) {
  std::vector<std::string> shortened;
  shortened.reserve(names.size());
  for (const auto& n : names) shortened.push_back(short_path(n));
  std::vector<std::string> out;
  std::size_t entries = 0;
  for (std::size_t i = 0; i < shortened.size();) {
    const std::size_t j = entry_end(shortened, i);
    if (entries++ < most) out.push_back(j - i > 1 ? run_entry(shortened, i, j) : shortened[i]);
    i = j;
  }
  if (entries > most) out.push_back(fmt::format("and {} more", entries - most));
  return out;
}

} // namespace conveyor::profile
