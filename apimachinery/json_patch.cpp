#include "apimachinery/json_patch.hpp"

#include "apimachinery/json_equality.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kwatch::apimachinery {
namespace {

namespace json = boost::json;

constexpr std::string_view kRejected =
    "the server rejected our request due to an error in our request";

std::string_view go_kind(const json::value& v) {
  switch (v.kind()) {
    case json::kind::string: return "string";
    case json::kind::bool_: return "bool";
    case json::kind::array: return "array";
    case json::kind::object: return "object";
    case json::kind::null: return "null";
    default: return "number";
  }
}

std::optional<std::vector<std::string>> parse_pointer(std::string_view p) {
  std::vector<std::string> tokens;
  if (p.empty()) return tokens;
  if (p.front() != '/') return std::nullopt;
  std::size_t i = 1;
  while (true) {
    std::string tok;
    while (i < p.size() && p[i] != '/') {
      if (p[i] == '~') {
        if (i + 1 >= p.size() || (p[i + 1] != '0' && p[i + 1] != '1')) return std::nullopt;
        tok += p[i + 1] == '0' ? '~' : '/';
        i += 2;
      } else {
        tok += p[i++];
      }
    }
    tokens.push_back(std::move(tok));
    if (i >= p.size()) return tokens;
    ++i;  // skip '/'
  }
}

std::optional<std::size_t> parse_index(std::string_view tok) {
  if (tok.empty() || tok.size() > 18) return std::nullopt;
  if (tok.size() > 1 && tok.front() == '0') return std::nullopt;
  std::size_t n = 0;
  for (char c : tok) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return n;
}

// Removes `key` keeping the order of the other members (object::erase moves the last member).
void erase_stable(json::object& obj, std::string_view key) {
  json::object out;
  out.reserve(obj.size());
  for (auto& [k, v] : obj) {
    if (k != key) out.emplace(k, std::move(v));
  }
  obj = std::move(out);
}

json::value* child(json::value& v, const std::string& tok) {
  if (auto* obj = v.if_object()) {
    auto it = obj->find(tok);
    return it == obj->end() ? nullptr : &it->value();
  }
  if (auto* arr = v.if_array()) {
    auto idx = parse_index(tok);
    if (!idx || *idx >= arr->size()) return nullptr;
    return &(*arr)[*idx];
  }
  return nullptr;
}

json::value* find(json::value& root, const std::vector<std::string>& tokens, std::size_t n) {
  json::value* cur = &root;
  for (std::size_t i = 0; i < n && cur; ++i) cur = child(*cur, tokens[i]);
  return cur;
}

struct Failure {
  std::string detail;
  Errc code = Errc::invalid;
};

// What a value adds to a document: a lower bound of its serialized size (escapes and number
// digits only add to it) and its depth (a scalar is 0, `{}` is 1).
struct Measure {
  std::size_t bytes = 0;
  std::size_t depth = 0;
};

// A member adds its quoted key and a colon; any element after the first adds a comma.
std::size_t member_overhead(std::string_view key) { return key.size() + 3; }

// Applies operations one by one while keeping the work and the growth of the document bounded:
// the accumulated size of copies (kube's limit), the size and depth of the document after each
// operation, and the elements visited or shifted in all.
class Applier {
 public:
  explicit Applier(json::value& doc) : doc_(doc), bytes_(measure(doc).bytes) {}

  std::optional<Failure> apply_bounded(const json::object& op) {
    if (auto f = apply(op)) return f;
    if (bytes_ > apimachinery::kMaxObjectBytes) {
      return Failure{"Request entity too large: the patched object exceeds the limit of " +
                         std::to_string(apimachinery::kMaxObjectBytes) + " bytes",
                     Errc::too_large};
    }
    if (work_ > kMaxJsonPatchWork) {
      return Failure{"the patch needs more than " + std::to_string(kMaxJsonPatchWork) +
                     " steps to apply"};
    }
    return std::nullopt;
  }

 private:
  std::optional<Failure> apply(const json::object& op) {
    std::string kind = "unknown";
    if (auto it = op.find("op"); it != op.end()) {
      if (!it->value().is_string()) return Failure{"json: cannot unmarshal " +
                                                   std::string(go_kind(it->value())) +
                                                   " into Go value of type string"};
      kind = it->value().get_string();
    }
    if (kind == "add") return add_op(op);
    if (kind == "remove") return remove_op(op);
    if (kind == "replace") return replace_op(op);
    if (kind == "move") return move_op(op);
    if (kind == "copy") return copy_op(op);
    if (kind == "test") return test_op(op);
    return Failure{"Unexpected kind: " + kind};
  }

  static std::optional<Failure> pointer_of(const json::object& op, std::string_view member,
                                           std::string& raw, std::vector<std::string>& tokens) {
    auto it = op.find(member);
    if (it == op.end() || it->value().is_null()) {
      return Failure{"operation missing " + std::string(member == "from" ? "from" : "path") +
                     " field"};
    }
    if (!it->value().is_string()) {
      return Failure{"json: cannot unmarshal " + std::string(go_kind(it->value())) +
                     " into Go value of type string"};
    }
    raw = it->value().get_string();
    auto parsed = parse_pointer(raw);
    if (!parsed) return Failure{"invalid JSON pointer: \"" + raw + "\""};
    tokens = std::move(*parsed);
    return std::nullopt;
  }

  static const json::value* value_of(const json::object& op) {
    auto it = op.find("value");
    return it == op.end() ? nullptr : &it->value();
  }

  // A lower bound of the serialized size of `v` and its depth; stops adding up the size once it
  // exceeds `cap`. Every node visited counts as work.
  Measure measure(const json::value& v, std::size_t cap = SIZE_MAX) {
    Measure m;
    std::vector<std::pair<const json::value*, std::size_t>> stack{{&v, 0}};
    while (!stack.empty() && m.bytes <= cap) {
      const auto [cur, depth] = stack.back();
      stack.pop_back();
      ++work_;
      switch (cur->kind()) {
        case json::kind::string: m.bytes += cur->get_string().size() + 2; break;
        case json::kind::null: m.bytes += 4; break;
        case json::kind::bool_: m.bytes += cur->get_bool() ? 4 : 5; break;
        case json::kind::array: {
          const auto& a = cur->get_array();
          m.depth = std::max(m.depth, depth + 1);
          m.bytes += 2 + (a.empty() ? 0 : a.size() - 1);
          for (const auto& e : a) stack.emplace_back(&e, depth + 1);
          break;
        }
        case json::kind::object: {
          const auto& o = cur->get_object();
          m.depth = std::max(m.depth, depth + 1);
          m.bytes += 2 + (o.empty() ? 0 : o.size() - 1);
          for (const auto& [k, e] : o) {
            m.bytes += member_overhead(k);
            stack.emplace_back(&e, depth + 1);
          }
          break;
        }
        default: m.bytes += 1; break;  // a number has at least one digit
      }
    }
    return m;
  }

  // Inserts `value` (measured as `m`) at `tokens`, keeping the document within the depth limit.
  std::optional<Failure> insert(const std::vector<std::string>& tokens, json::value value,
                                Measure m, std::string_view what, const std::string& raw) {
    if (tokens.size() + m.depth > apimachinery::kMaxJsonDepth) {
      return Failure{std::string(what) + " operation does not apply: the value at \"" + raw +
                     "\" would nest deeper than " + std::to_string(apimachinery::kMaxJsonDepth) +
                     " levels"};
    }
    if (tokens.empty()) {
      doc_ = std::move(value);
      bytes_ = m.bytes;
      return std::nullopt;
    }
    json::value* parent = find(doc_, tokens, tokens.size() - 1);
    auto missing = [&] {
      return Failure{std::string(what) + " operation does not apply: doc is missing path: \"" +
                     raw + "\": missing value"};
    };
    if (!parent) return missing();
    const auto& key = tokens.back();
    if (auto* obj = parent->if_object()) {
      if (auto it = obj->find(key); it != obj->end()) {
        bytes_ -= measure(it->value()).bytes;
        it->value() = std::move(value);
      } else {
        bytes_ += member_overhead(key) + (obj->empty() ? 0 : 1);
        obj->emplace(key, std::move(value));
      }
      bytes_ += m.bytes;
      return std::nullopt;
    }
    if (auto* arr = parent->if_array()) {
      std::size_t idx = arr->size();
      if (key != "-") {
        auto parsed = parse_index(key);
        if (!parsed || *parsed > arr->size()) {
          return Failure{"Unable to access invalid index: " + key + ": invalid index referenced"};
        }
        idx = *parsed;
      }
      work_ += arr->size() - idx;  // elements shifted
      bytes_ += m.bytes + (arr->empty() ? 0 : 1);
      arr->insert(arr->begin() + static_cast<std::ptrdiff_t>(idx), std::move(value));
      return std::nullopt;
    }
    return missing();
  }

  // Removes the value at `tokens` into `out`, measured as `m`.
  std::optional<Failure> take(const std::vector<std::string>& tokens, std::string_view what,
                              const std::string& raw, json::value& out, Measure& m) {
    auto missing = [&] {
      return Failure{std::string(what) + " operation does not apply: doc is missing path: \"" +
                     raw + "\": missing value"};
    };
    if (tokens.empty()) return missing();
    json::value* parent = find(doc_, tokens, tokens.size() - 1);
    if (!parent) return missing();
    const auto& key = tokens.back();
    if (auto* obj = parent->if_object()) {
      auto it = obj->find(key);
      if (it == obj->end()) return missing();
      out = std::move(it->value());
      m = measure(out);
      bytes_ -= m.bytes + member_overhead(key) + (obj->size() > 1 ? 1 : 0);
      work_ += obj->size();
      erase_stable(*obj, key);
      return std::nullopt;
    }
    if (auto* arr = parent->if_array()) {
      auto idx = parse_index(key);
      if (!idx || *idx >= arr->size()) {
        return Failure{"Unable to access invalid index: " + key + ": invalid index referenced"};
      }
      out = std::move((*arr)[*idx]);
      m = measure(out);
      bytes_ -= m.bytes + (arr->size() > 1 ? 1 : 0);
      work_ += arr->size() - *idx;
      arr->erase(arr->begin() + static_cast<std::ptrdiff_t>(*idx));
      return std::nullopt;
    }
    return missing();
  }

  std::optional<Failure> add_op(const json::object& op) {
    std::string raw;
    std::vector<std::string> tokens;
    if (auto f = pointer_of(op, "path", raw, tokens)) return f;
    const auto* value = value_of(op);
    if (!value) return Failure{"add operation does not apply: missing value"};
    return insert(tokens, *value, measure(*value), "add", raw);
  }

  std::optional<Failure> remove_op(const json::object& op) {
    std::string raw;
    std::vector<std::string> tokens;
    if (auto f = pointer_of(op, "path", raw, tokens)) return f;
    json::value removed;
    Measure m;
    return take(tokens, "remove", raw, removed, m);
  }

  std::optional<Failure> replace_op(const json::object& op) {
    std::string raw;
    std::vector<std::string> tokens;
    if (auto f = pointer_of(op, "path", raw, tokens)) return f;
    const auto* value = value_of(op);
    if (!value) return Failure{"replace operation does not apply: missing value"};
    json::value* target = find(doc_, tokens, tokens.size());
    if (!target) {
      return Failure{"replace operation does not apply: doc is missing key: " + raw +
                     ": missing value"};
    }
    const Measure m = measure(*value);
    if (tokens.size() + m.depth > apimachinery::kMaxJsonDepth) {
      return Failure{"replace operation does not apply: the value at \"" + raw +
                     "\" would nest deeper than " + std::to_string(apimachinery::kMaxJsonDepth) +
                     " levels"};
    }
    bytes_ = bytes_ - measure(*target).bytes + m.bytes;
    *target = *value;
    return std::nullopt;
  }

  std::optional<Failure> move_op(const json::object& op) {
    std::string from_raw, path_raw;
    std::vector<std::string> from, path;
    if (auto f = pointer_of(op, "from", from_raw, from)) return f;
    if (auto f = pointer_of(op, "path", path_raw, path)) return f;
    if (from == path) {
      // A no-op, but the source must exist.
      if (!find(doc_, from, from.size())) {
        return Failure{"move operation does not apply: doc is missing from path: " + from_raw +
                       ": missing value"};
      }
      return std::nullopt;
    }
    if (path.size() > from.size() && std::equal(from.begin(), from.end(), path.begin())) {
      return Failure{"move operation does not apply: from path " + from_raw +
                     " is a prefix of path " + path_raw};
    }
    json::value* source = find(doc_, from, from.size());
    if (!source) {
      return Failure{"move operation does not apply: doc is missing from path: " + from_raw +
                     ": missing value"};
    }
    json::value value;
    Measure m;
    if (auto f = take(from, "move", from_raw, value, m)) return f;
    return insert(path, std::move(value), m, "move", path_raw);
  }

  std::optional<Failure> copy_op(const json::object& op) {
    std::string from_raw, path_raw;
    std::vector<std::string> from, path;
    if (auto f = pointer_of(op, "from", from_raw, from)) return f;
    if (auto f = pointer_of(op, "path", path_raw, path)) return f;
    json::value* source = find(doc_, from, from.size());
    if (!source) {
      return Failure{"copy operation does not apply: doc is missing from path: " + from_raw +
                     ": missing value"};
    }
    // Measured before it is made: a copy past the limit never takes the memory.
    const std::size_t allowance = kMaxJsonPatchCopyBytes - copied_;
    const Measure m = measure(*source, allowance);
    if (m.bytes > allowance) {
      return Failure{"Unable to complete the copy, the accumulated size increase of copy is " +
                     std::to_string(copied_ + m.bytes) + ", exceeding the limit " +
                     std::to_string(kMaxJsonPatchCopyBytes)};
    }
    copied_ += m.bytes;
    return insert(path, *source, m, "copy", path_raw);
  }

  std::optional<Failure> test_op(const json::object& op) {
    std::string raw;
    std::vector<std::string> tokens;
    if (auto f = pointer_of(op, "path", raw, tokens)) return f;
    const auto* value = value_of(op);
    static const json::value kNull;
    json::value* target = find(doc_, tokens, tokens.size());
    if (!target || !json_equal(*target, value ? *value : kNull)) {
      return Failure{"testing value " + raw + " failed: test failed"};
    }
    return std::nullopt;
  }

  json::value& doc_;
  std::size_t bytes_;       // lower bound of the document's serialized size
  std::size_t copied_ = 0;  // accumulated size of copies
  std::size_t work_ = 0;    // nodes measured and elements shifted
};

}  // namespace

bool json_equal(const json::value& a, const json::value& b) {
  return json_equal_with(a, b, [](const json::value& x, const json::value& y) {
    if (x.is_double() || y.is_double()) return x.to_number<double>() == y.to_number<double>();
    if (x.is_int64() && y.is_int64()) return x.get_int64() == y.get_int64();
    if (x.is_uint64() && y.is_uint64()) return x.get_uint64() == y.get_uint64();
    // One signed, one unsigned: equal only when the signed one is non-negative.
    std::int64_t s = x.is_int64() ? x.get_int64() : y.get_int64();
    std::uint64_t u = x.is_uint64() ? x.get_uint64() : y.get_uint64();
    return s >= 0 && static_cast<std::uint64_t>(s) == u;
  });
}

ApiResult<json::value> apply_json_patch(json::value doc, const json::value& patch,
                                        std::string* failure_detail) {
  const auto* ops = patch.if_array();
  if (!ops) {
    return api_error(Errc::bad_request, "json: cannot unmarshal " + std::string(go_kind(patch)) +
                                            " into Go value of type jsonpatch.Patch");
  }
  for (const auto& op : *ops) {
    if (!op.is_object() && !op.is_null()) {
      return api_error(Errc::bad_request, "json: cannot unmarshal " + std::string(go_kind(op)) +
                                              " into Go value of type jsonpatch.Operation");
    }
  }
  if (ops->size() > kMaxJsonPatchOperations) {
    return api_error(Errc::too_large,
                     "Request entity too large: The allowed maximum operations in a JSON patch "
                     "is " + std::to_string(kMaxJsonPatchOperations) + ", got " +
                         std::to_string(ops->size()));
  }
  Applier applier(doc);
  static const json::object kEmpty;
  for (const auto& op : *ops) {
    if (auto failure = applier.apply_bounded(op.is_object() ? op.get_object() : kEmpty)) {
      if (failure->code == Errc::too_large) return api_error(Errc::too_large, failure->detail);
      // kube's words, then why: the same reason and code for clients, and a person can act.
      std::string message = std::string(kRejected) + ": " + failure->detail;
      if (failure_detail) *failure_detail = std::move(failure->detail);
      return api_error(Errc::invalid, std::move(message));
    }
  }
  return doc;
}

}  // namespace kwatch::apimachinery
