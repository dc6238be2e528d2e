#include "server/media_type.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <vector>

namespace kwatch::server {

namespace json = boost::json;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether a plain scalar `s` would read back as the same string.
bool plain_safe(const std::string& s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ') return false;
  if (std::string_view("-?:,[]{}#&*!|>'\"%@`").find(s.front()) != std::string_view::npos) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) return false;
    if (c == '#' && i > 0 && s[i - 1] == ' ') return false;
  }
  const std::string l = lower(s);
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
                           ".inf", "-.inf", "+.inf", ".nan"}) {
    if (l == word) return false;
  }
  // Anything a YAML reader might take for a number stays quoted.
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (digit(s.front())) return false;
  if ((s.front() == '+' || s.front() == '.') && s.size() > 1 && (digit(s[1]) || s[1] == '.')) {
    return false;
  }
  return true;
}

void scalar(const json::value& v, std::string& out) {
  if (v.is_string()) {
    const std::string s(v.get_string());
    out += plain_safe(s) ? s : json::serialize(v);  // a JSON string is a YAML double-quoted one
  } else {
    out += json::serialize(v);
  }
}

// A value written on its key's or dash's line: a scalar, or an empty {} / [].
void inline_value(const json::value& v, std::string& out) {
  if (v.is_object()) {
    out += "{}";
  } else if (v.is_array()) {
    out += "[]";
  } else {
    scalar(v, out);
  }
  out += '\n';
}

bool is_block(const json::value& v) {
  return (v.is_object() && !v.get_object().empty()) || (v.is_array() && !v.get_array().empty());
}

void emit(const json::value& v, int indent, std::string& out);

void emit_mapping(const json::object& obj, int indent, std::string& out, bool first_inline) {
  std::vector<const json::key_value_pair*> members;
  for (const auto& kv : obj) members.push_back(&kv);
  std::sort(members.begin(), members.end(),
            [](const auto* a, const auto* b) { return a->key() < b->key(); });
  bool first = true;
  for (const auto* kv : members) {
    if (!(first && first_inline)) out.append(static_cast<std::size_t>(indent), ' ');
    first = false;
    const std::string key(kv->key());
    out += plain_safe(key) ? key : json::serialize(json::value(kv->key()));
    out += ':';
    const json::value& value = kv->value();
    if (value.is_object() && !value.get_object().empty()) {
      out += '\n';
      emit(value, indent + 2, out);
    } else if (value.is_array() && !value.get_array().empty()) {
      out += '\n';
      emit(value, indent, out);  // a sequence at its key's indentation, as kube writes it
    } else {
      out += ' ';
      inline_value(value, out);
    }
  }
}

void emit(const json::value& v, int indent, std::string& out) {
  if (v.is_object() && !v.get_object().empty()) {
    emit_mapping(v.get_object(), indent, out, false);
  } else if (v.is_array() && !v.get_array().empty()) {
    for (const auto& item : v.get_array()) {
      out.append(static_cast<std::size_t>(indent), ' ');
      out += "- ";
      if (item.is_object() && is_block(item)) {
        emit_mapping(item.get_object(), indent + 2, out, true);
      } else if (item.is_array() && is_block(item)) {
        out += '\n';
        emit(item, indent + 2, out);
      } else {
        inline_value(item, out);
      }
    }
  } else {
    inline_value(v, out);
  }
}

}  // namespace

std::optional<Representation> negotiate(std::string_view accept, bool stream) {
  if (trim(accept).empty()) return Representation::json;
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    std::string_view range = comma == std::string_view::npos ? accept : accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const auto semi = range.find(';');
    const std::string type = lower(trim(range.substr(0, semi)));
    bool refused = false;
    for (std::string_view params = semi == std::string_view::npos ? "" : range.substr(semi + 1);
         !params.empty();) {
      const auto next = params.find(';');
      const std::string_view p = trim(params.substr(0, next));
      if (p == "q=0" || p == "q=0.0" || p == "q=0.00" || p == "q=0.000") refused = true;
      params = next == std::string_view::npos ? std::string_view() : params.substr(next + 1);
    }
    if (refused) continue;
    if (type == "application/json" || type == "*/*" || type == "application/*") {
      return Representation::json;
    }
    if (type == "application/yaml" && !stream) return Representation::yaml;
  }
  return std::nullopt;
}

std::string to_yaml(const json::value& value) {
  std::string out;
  emit(value, 0, out);
  return out;
}

}  // namespace kwatch::server
