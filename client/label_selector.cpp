#include "client/label_selector.hpp"

#include <cctype>

namespace kwatch::client {

namespace json = boost::json;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Keys and values: letters, digits, '-', '_', '.', and '/' in keys (a prefix); values may be empty.
bool valid(std::string_view s, bool key) {
  if (key && s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' &&
        !(key && c == '/')) {
      return false;
    }
  }
  return true;
}

// Splits at commas outside parentheses.
std::vector<std::string_view> terms(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '(') ++depth;
    if (i < text.size() && text[i] == ')') --depth;
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      out.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace

std::string LabelSelector::parse(std::string_view text, LabelSelector& out) {
  out.requirements_.clear();
  if (trim(text).empty()) return "";
  for (std::string_view term : terms(text)) {
    if (term.empty()) return "an empty requirement in \"" + std::string(text) + "\"";
    Requirement r;
    if (term.front() == '!') {
      r.key = std::string(trim(term.substr(1)));
      r.op = Op::not_exists;
    } else if (auto ne = term.find("!="); ne != std::string_view::npos) {
      r.key = std::string(trim(term.substr(0, ne)));
      r.op = Op::not_in;
      r.values.insert(std::string(trim(term.substr(ne + 2))));
    } else if (auto eq = term.find('='); eq != std::string_view::npos) {
      r.key = std::string(trim(term.substr(0, eq)));
      r.op = Op::in;
      std::string_view value = term.substr(eq + 1);
      if (!value.empty() && value.front() == '=') value.remove_prefix(1);
      r.values.insert(std::string(trim(value)));
    } else if (auto paren = term.find('('); paren != std::string_view::npos) {
      std::string_view head = trim(term.substr(0, paren));
      if (term.back() != ')') return "a set without its ')' in \"" + std::string(term) + "\"";
      const auto space = head.find_last_of(" \t");
      if (space == std::string_view::npos) return "no operator in \"" + std::string(term) + "\"";
      const std::string_view op = head.substr(space + 1);
      r.key = std::string(trim(head.substr(0, space)));
      if (op == "in") {
        r.op = Op::in;
      } else if (op == "notin") {
        r.op = Op::not_in;
      } else {
        return "an unknown operator \"" + std::string(op) + "\"";
      }
      std::string_view list = term.substr(paren + 1, term.size() - paren - 2);
      for (std::string_view v : terms(list)) {
        if (!valid(v, false)) return "an invalid value \"" + std::string(v) + "\"";
        r.values.insert(std::string(v));
      }
      if (r.values.empty()) return "an empty set in \"" + std::string(term) + "\"";
    } else {
      r.key = std::string(term);
      r.op = Op::exists;
    }
    if (!valid(r.key, true)) return "an invalid key \"" + r.key + "\"";
    for (const auto& v : r.values) {
      if (!valid(v, false)) return "an invalid value \"" + v + "\"";
    }
    out.requirements_.push_back(std::move(r));
  }
  return "";
}

bool LabelSelector::matches(const json::object& object) const {
  const json::object* labels = nullptr;
  if (const json::value* meta = object.if_contains("metadata"); meta != nullptr && meta->is_object()) {
    if (const json::value* l = meta->get_object().if_contains("labels"); l != nullptr) {
      labels = l->if_object();
    }
  }
  for (const auto& r : requirements_) {
    const json::value* v = labels != nullptr ? labels->if_contains(r.key) : nullptr;
    const bool has = v != nullptr && v->is_string();
    const bool in = has && r.values.count(std::string(v->get_string())) > 0;
    switch (r.op) {
      case Op::in:
        if (!in) return false;
        break;
      case Op::not_in:
        if (in) return false;
        break;
      case Op::exists:
        if (!has) return false;
        break;
      case Op::not_exists:
        if (has) return false;
        break;
    }
  }
  return true;
}

}  // namespace kwatch::client
