#include "schema/field_set.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <map>

namespace kwatch::schema {

namespace json = boost::json;

namespace {

int rank(std::string_view step) {
  if (step.empty()) return 4;
  switch (step[0]) {
    case 'f': return 0;
    case 'k': return 1;
    case 'v': return 2;
    case 'i': return 3;
    default: return 4;
  }
}

bool step_less(std::string_view a, std::string_view b) {
  const int ra = rank(a), rb = rank(b);
  if (ra != rb) return ra < rb;
  // Indexes by number: "i:9" before "i:10".
  if (ra == 3 && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

bool parse_index(std::string_view text, std::size_t& out) {
  if (text.empty() || text.size() > 18) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<std::size_t>(c - '0');
  }
  return true;
}

// A step as read from fieldsV1, in this file's canonical spelling; nullopt when malformed.
std::optional<std::string> canonical_step(std::string_view text) {
  if (text.size() < 2 || text[1] != ':') return std::nullopt;
  std::string_view rest = text.substr(2);
  switch (text[0]) {
    case 'f':
      return std::string(text);
    case 'i': {
      std::size_t index = 0;
      if (!parse_index(rest, index)) return std::nullopt;
      return index_step(index);
    }
    case 'k':
    case 'v': {
      boost::system::error_code ec;
      json::value v = json::parse(rest, ec);
      if (ec) return std::nullopt;
      if (text[0] == 'v') return value_step(v);
      if (!v.is_object() || v.get_object().empty()) return std::nullopt;
      return key_step(v.get_object());
    }
    default:
      return std::nullopt;
  }
}

bool parse_into(FieldSet& set, const json::value& v, std::string* error, const std::string& at) {
  const json::object* o = v.if_object();
  if (o == nullptr) {
    if (error) *error = "expected an object at " + (at.empty() ? std::string(".") : at);
    return false;
  }
  for (const auto& [key, child] : *o) {
    if (key == ".") {
      if (!child.is_object() || !child.get_object().empty()) {
        if (error) *error = "\".\" must map to {} at " + (at.empty() ? std::string(".") : at);
        return false;
      }
      set.set_member(true);
      continue;
    }
    auto step = canonical_step(key);
    if (!step) {
      if (error) *error = "invalid path element \"" + std::string(key) + "\"";
      return false;
    }
    FieldSet& node = set.descend(*step);
    if (child.is_object() && child.get_object().empty()) {
      node.set_member(true);
      continue;
    }
    if (!parse_into(node, child, error, at + path_string({*step}))) return false;
  }
  return true;
}

}  // namespace

std::string field_step(std::string_view name) { return "f:" + std::string(name); }

std::string key_step(const json::object& keys) {
  std::map<std::string_view, const json::value*> sorted;
  for (const auto& [k, v] : keys) sorted[k] = &v;
  std::string out = "k:{";
  bool first = true;
  for (const auto& [k, v] : sorted) {
    if (!first) out += ',';
    first = false;
    out += json::serialize(json::string(k));
    out += ':';
    out += json::serialize(*v);
  }
  out += '}';
  return out;
}

std::string value_step(const json::value& value) { return "v:" + json::serialize(value); }

std::string index_step(std::size_t index) { return "i:" + std::to_string(index); }

std::string path_string(const FieldPath& path) {
  std::string out;
  for (const auto& step : path) {
    std::string_view rest = std::string_view(step).substr(std::min<std::size_t>(2, step.size()));
    switch (step.empty() ? '?' : step[0]) {
      case 'f':
        out += '.';
        out += rest;
        break;
      case 'k': {
        boost::system::error_code ec;
        json::value v = json::parse(rest, ec);
        out += '[';
        bool first = true;
        if (!ec && v.is_object()) {
          for (const auto& [k, kv] : v.get_object()) {
            if (!first) out += ',';
            first = false;
            out += k;
            out += '=';
            out += json::serialize(kv);
          }
        }
        out += ']';
        break;
      }
      case 'v':
        out += "[=";
        out += rest;
        out += ']';
        break;
      case 'i':
        out += '[';
        out += rest;
        out += ']';
        break;
      default:
        out += step;
    }
  }
  return out;
}

bool StepLess::operator()(std::string_view a, std::string_view b) const { return step_less(a, b); }

FieldSet& FieldSet::descend(const std::string& step) {
  return children_.try_emplace(step).first->second;
}

const FieldSet* FieldSet::find(std::string_view step) const {
  auto it = children_.find(step);
  return it != children_.end() ? &it->second : nullptr;
}

const FieldSet* FieldSet::child(std::string_view step) const { return find(step); }

void FieldSet::insert(const FieldPath& path) {
  FieldSet* node = this;
  for (const auto& step : path) node = &node->descend(step);
  node->member_ = true;
}

bool FieldSet::has(const FieldPath& path) const {
  const FieldSet* node = this;
  for (const auto& step : path) {
    node = node->find(step);
    if (node == nullptr) return false;
  }
  return node->member_;
}

void FieldSet::drop_empty() {
  std::erase_if(children_, [](const auto& c) { return c.second.empty(); });
}

FieldSet FieldSet::union_with(const FieldSet& other) const {
  FieldSet out = *this;
  out.member_ = member_ || other.member_;
  for (const auto& [step, sub] : other.children_) {
    FieldSet& mine = out.descend(step);
    mine = mine.union_with(sub);
  }
  return out;
}

FieldSet FieldSet::difference(const FieldSet& other) const {
  FieldSet out;
  out.member_ = member_ && !other.member_;
  for (const auto& [step, sub] : children_) {
    const FieldSet* theirs = other.find(step);
    out.children_.emplace_hint(out.children_.end(), step, theirs ? sub.difference(*theirs) : sub);
  }
  out.drop_empty();
  return out;
}

FieldSet FieldSet::recursive_difference(const FieldSet& other) const {
  FieldSet out;
  out.member_ = member_ && !other.member_;
  for (const auto& [step, sub] : children_) {
    const FieldSet* theirs = other.find(step);
    if (theirs == nullptr) {
      out.children_.emplace_hint(out.children_.end(), step, sub);
    } else if (!theirs->member_) {
      out.children_.emplace_hint(out.children_.end(), step, sub.recursive_difference(*theirs));
    }
    // A member of `other` takes everything below it along.
  }
  out.drop_empty();
  return out;
}

FieldSet FieldSet::intersection(const FieldSet& other) const {
  FieldSet out;
  out.member_ = member_ && other.member_;
  for (const auto& [step, sub] : children_) {
    if (const FieldSet* theirs = other.find(step)) {
      out.children_.emplace_hint(out.children_.end(), step, sub.intersection(*theirs));
    }
  }
  out.drop_empty();
  return out;
}

void FieldSet::walk(FieldPath& prefix, const std::function<void(const FieldPath&)>& fn) const {
  if (member_) fn(prefix);
  for (const auto& [step, sub] : children_) {
    prefix.push_back(step);
    sub.walk(prefix, fn);
    prefix.pop_back();
  }
}

void FieldSet::for_each(const std::function<void(const FieldPath&)>& fn) const {
  FieldPath prefix;
  walk(prefix, fn);
}

std::size_t FieldSet::size() const {
  std::size_t n = member_ ? 1 : 0;
  for (const auto& c : children_) n += c.second.size();
  return n;
}

json::object FieldSet::to_fields_v1(json::storage_ptr sp) const {
  json::object out(sp);
  out.reserve(children_.size() + (member_ ? 1 : 0));
  if (member_ && !children_.empty()) out.emplace(".", json::object(sp));
  for (const auto& [step, sub] : children_) {
    out.emplace(step, sub.children_.empty() ? json::object(sp) : sub.to_fields_v1(sp));
  }
  return out;
}

std::optional<FieldSet> FieldSet::from_fields_v1(const json::value& v, std::string* error) {
  FieldSet set;
  if (!parse_into(set, v, error, "")) return std::nullopt;
  // The root is the object itself, never a member.
  set.member_ = false;
  set.drop_empty();
  return set;
}

}  // namespace kwatch::schema
