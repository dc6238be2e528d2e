#include "apimachinery/yaml_body.hpp"

#include "apimachinery/json_body.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/yaml_subset.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace kwatch::apimachinery {

namespace json = boost::json;

namespace {

bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

std::optional<json::value> integer(std::string_view text) {
  std::string digits;
  for (char c : text) {
    if (c != '_') digits += c;
  }
  std::string_view d = digits;
  bool negative = false;
  if (!d.empty() && (d[0] == '+' || d[0] == '-')) {
    negative = d[0] == '-';
    d.remove_prefix(1);
  }
  if (d.empty()) return std::nullopt;
  int base = 10;
  if (d.size() > 2 && d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
    base = 16;
    d.remove_prefix(2);
  } else if (d.size() > 2 && d[0] == '0' && (d[1] == 'b' || d[1] == 'B')) {
    base = 2;
    d.remove_prefix(2);
  } else if (d.size() > 1 && d[0] == '0') {
    base = 8;
    d.remove_prefix(1);
  }
  std::uint64_t u = 0;
  auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), u, base);
  if (ec != std::errc() || end != d.data() + d.size()) return std::nullopt;
  if (negative) {
    if (u > static_cast<std::uint64_t>(INT64_MAX) + 1) return std::nullopt;
    return json::value(static_cast<std::int64_t>(0 - u));
  }
  if (u <= static_cast<std::uint64_t>(INT64_MAX)) return json::value(static_cast<std::int64_t>(u));
  return json::value(u);
}

std::optional<json::value> floating(std::string_view text) {
  // [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  std::size_t digits = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    std::size_t exp = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++exp;
    if (exp == 0) return std::nullopt;
  }
  if (i != text.size()) return std::nullopt;
  std::string s(text.front() == '+' ? text.substr(1) : text);
  double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return json::value(v);
}

json::value scalar(const base::YamlNode& n) {
  if (n.quoted) return json::value(n.scalar);
  const std::string_view s = n.scalar;
  if (n.is_null() || one_of(s, {"Null", "NULL"})) return nullptr;
  if (one_of(s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"})) return true;
  if (one_of(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"})) return false;
  if (auto i = integer(s)) return *i;
  if (auto f = floating(s)) return *f;
  return json::value(n.scalar);
}

json::value to_json(const base::YamlNode& n) {
  switch (n.kind) {
    case base::YamlNode::Kind::scalar:
      return scalar(n);
    case base::YamlNode::Kind::sequence: {
      json::array a;
      a.reserve(n.items.size());
      for (const auto& item : n.items) a.push_back(to_json(item));
      return a;
    }
    case base::YamlNode::Kind::mapping: {
      json::object o;
      o.reserve(n.members.size());
      for (const auto& m : n.members) o[m.key] = to_json(m.value);
      return o;
    }
  }
  return nullptr;
}

}  // namespace

ApiResult<json::value> parse_yaml_body(std::string_view body) {
  const auto first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return api_error(Errc::bad_request, "request body is empty");
  if (body[first] == '{' || body[first] == '[') return parse_json_body(body);
  auto doc = base::parse_yaml_subset(body);
  if (!doc) return api_error(Errc::bad_request, "error decoding YAML: " + doc.error());
  // The rules of stored JSON hold for YAML bodies as for JSON ones (depth, UTF-8, numbers).
  json::value value = to_json(*doc);
  if (auto problem = apimachinery::json_problem(value)) {
    return api_error(Errc::bad_request, "error decoding YAML: " + problem->message());
  }
  return value;
}

}  // namespace kwatch::apimachinery
