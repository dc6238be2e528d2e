#include "apimachinery/field_selector.hpp"

#include <algorithm>

namespace kwatch::apimachinery {
namespace {

// Splits on commas not preceded by an escaping backslash; the backslashes stay in the terms.
std::vector<std::string_view> split_terms(std::string_view s) {
  std::vector<std::string_view> terms;
  if (s.empty()) return terms;
  std::size_t start = 0;
  bool in_slash = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (in_slash) {
      in_slash = false;
    } else if (s[i] == '\\') {
      in_slash = true;
    } else if (s[i] == ',') {
      terms.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(s.substr(start));
  return terms;
}

struct SplitTerm {
  std::string_view lhs, op, rhs;
};

std::optional<SplitTerm> split_term(std::string_view term) {
  for (std::size_t i = 0; i < term.size(); ++i) {
    for (std::string_view op : {"!=", "==", "="}) {
      if (term.substr(i).starts_with(op)) {
        return SplitTerm{term.substr(0, i), op, term.substr(i + op.size())};
      }
    }
  }
  return std::nullopt;
}

ApiResult<std::string> unescape_value(std::string_view s) {
  if (s.find_first_of("\\,=") == std::string_view::npos) return std::string(s);
  std::string out;
  bool in_slash = false;
  for (char c : s) {
    if (in_slash) {
      if (c != '\\' && c != ',' && c != '=') {
        return api_error(Errc::bad_request,
                         std::string("invalid field selector: invalid escape sequence: \\") + c);
      }
      out += c;
      in_slash = false;
      continue;
    }
    if (c == '\\') {
      in_slash = true;
    } else if (c == ',' || c == '=') {
      // Go formats the rune with %v, i.e. as its code point number.
      return api_error(Errc::bad_request,
                       "invalid field selector: unescapedRune character in value: " +
                           std::to_string(static_cast<int>(c)));
    } else {
      out += c;
    }
  }
  if (in_slash) {
    return api_error(Errc::bad_request, "invalid field selector: invalid escape sequence: \\");
  }
  return out;
}

}  // namespace

bool FieldSelector::matches(const FieldLookup& field_value) const {
  for (const auto& r : requirements_) {
    auto v = field_value(r.field);
    std::string_view actual = v ? std::string_view(*v) : std::string_view{};
    if ((actual == r.value) != r.equals) return false;
  }
  return true;
}

std::vector<std::string> FieldSelector::fields() const {
  std::vector<std::string> out;
  for (const auto& r : requirements_) {
    if (std::find(out.begin(), out.end(), r.field) == out.end()) out.push_back(r.field);
  }
  return out;
}

std::optional<std::string> FieldSelector::exact_value(std::string_view field) const {
  for (const auto& r : requirements_) {
    if (r.equals && r.field == field) return r.value;
  }
  return std::nullopt;
}

std::string FieldSelector::to_string() const {
  std::string out;
  for (const auto& r : requirements_) {
    if (!out.empty()) out += ',';
    out += r.field;
    out += r.equals ? "=" : "!=";
    out += escape_field_value(r.value);
  }
  return out;
}

std::string escape_field_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == ',' || c == '=') out += '\\';
    out += c;
  }
  return out;
}

ApiResult<FieldSelector> parse_field_selector(std::string_view text) {
  auto parts = split_terms(text);
  // Kubernetes sorts the raw terms first; it decides which error is reported first.
  std::sort(parts.begin(), parts.end());
  std::vector<FieldRequirement> reqs;
  for (auto part : parts) {
    if (part.empty()) continue;
    auto t = split_term(part);
    if (!t) {
      return api_error(Errc::bad_request, "invalid selector: '" + std::string(text) +
                                              "'; can't understand '" + std::string(part) + "'");
    }
    auto value = unescape_value(t->rhs);
    if (!value) return value.error();
    // Transform drops a term whose field and value are both empty ("=").
    if (t->lhs.empty() && value->empty()) continue;
    reqs.push_back({std::string(t->lhs), t->op != "!=", std::move(*value)});
  }
  return FieldSelector(std::move(reqs));
}

}  // namespace kwatch::apimachinery
