// What a compiled schema does to values: validation (with set and map list uniqueness through
// keyed hashes), pruning of unknown fields, and defaulting.
#include "schema/structural_schema_tree.hpp"

#include "apimachinery/json_equality.hpp"
#include "apimachinery/quantity.hpp"
#include "base/sip_hash.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <unordered_set>
#include <utility>

namespace kwatch::schema {

using apimachinery::Cause;
using apimachinery::go_quote;

namespace json = boost::json;

using detail::Additional;
using detail::as_double;
using detail::child;
using detail::drop_repeated_causes;
using detail::duplicate;
using detail::forbidden;
using detail::Format;
using detail::format_ok;
using detail::go_float;
using detail::index;
using detail::invalid;
using detail::is_go_int;
using detail::is_meta_field;
using detail::key;
using detail::kMaxValueDepth;
using detail::not_supported;
using detail::required;
using detail::SchemaNode;
using detail::sharp_v;
using detail::too_long;
using detail::too_many;
using detail::type_invalid;
using detail::value_repr;

namespace {

// ---- equality and hashing of values ----
//
// Set lists, map lists and uniqueItems are checked through hash tables, so the checks take
// expected linear time. The values are untrusted: the tables hash with SipHash-1-3 under a key
// drawn once per process, so crafted collisions cannot make them quadratic.

using base::SipHash;

// How two values compare. `strict` is Go's == and reflect.DeepEqual on decoded JSON: an int64
// and a float64 differ even when equal in value. `by_value` is the equality of their JSON
// encodings, which kube uses for compound set members and map-list keys: numbers by value.
enum class Equality { strict, by_value };

enum HashTag : std::uint8_t { kNullTag = 1, kBoolTag, kIntTag, kFloatTag, kStringTag, kArrayTag,
                              kObjectTag, kMemberTag, kDeepTag };

bool values_equal(const json::value& a, const json::value& b, Equality eq) {
  return apimachinery::json_equal_with(
      a, b,
      [eq](const json::value& x, const json::value& y) {
        const bool xi = is_go_int(x), yi = is_go_int(y);
        if (xi && yi) return x.get_int64() == y.get_int64();
        if (eq == Equality::strict && xi != yi) return false;
        return as_double(x) == as_double(y);
      },
      kMaxValueDepth);
}

// Consistent with values_equal under the same Equality: equal values hash alike.
std::uint64_t value_hash(const json::value& v, Equality eq, std::size_t depth = 0) {
  if (depth > kMaxValueDepth) return SipHash(kDeepTag).finish();
  switch (v.kind()) {
    case json::kind::null: return SipHash(kNullTag).finish();
    case json::kind::bool_: {
      SipHash h(kBoolTag);
      h.write_u64(v.get_bool());
      return h.finish();
    }
    case json::kind::string: {
      SipHash h(kStringTag);
      h.write_u64(v.get_string().size());
      h.write(v.get_string());
      return h.finish();
    }
    case json::kind::array: {
      SipHash h(kArrayTag);
      for (const auto& e : v.get_array()) h.write_u64(value_hash(e, eq, depth + 1));
      return h.finish();
    }
    case json::kind::object: {
      std::uint64_t sum = 0;  // member order does not matter
      for (const auto& kv : v.get_object()) {
        SipHash m(kMemberTag);
        m.write_u64(kv.key().size());
        m.write(kv.key());
        m.write_u64(value_hash(kv.value(), eq, depth + 1));
        sum += m.finish();
      }
      SipHash h(kObjectTag);
      h.write_u64(v.get_object().size());
      h.write_u64(sum);
      return h.finish();
    }
    default: {
      double d = as_double(v);
      bool go_int = is_go_int(v);
      // Strict: int64 and float64 hash apart. By value: every number hashes as its double
      // (equal values have equal doubles); -0 and 0 are one.
      SipHash h(eq == Equality::strict && go_int ? kIntTag : kFloatTag);
      if (eq == Equality::strict && go_int) {
        h.write_u64(static_cast<std::uint64_t>(v.get_int64()));
      } else {
        if (d == 0) d = 0;
        std::uint64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        h.write_u64(bits);
      }
      return h.finish();
    }
  }
}

// Finds repeated entries among n items in expected O(n): for each entry that repeats an
// earlier one, reports its position the first time the repetition happens (kube reports the
// second occurrence of every duplicated value, once).
template <class Hash, class Equal, class Report>
void find_duplicates(std::size_t n, Hash hash, Equal equal, Report report) {
  if (n <= 1) return;
  std::size_t cap = 4;
  while (cap < 2 * n) cap <<= 1;
  constexpr std::uint32_t kEmpty = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> slots(cap, kEmpty);
  std::vector<std::uint64_t> hashes(n);
  std::vector<std::uint8_t> seen(n, 0);  // times the first occurrence was seen again, capped
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t h = hash(i);
    hashes[i] = h;
    std::size_t s = h & (cap - 1);
    for (;; s = (s + 1) & (cap - 1)) {
      std::uint32_t j = slots[s];
      if (j == kEmpty) {
        slots[s] = static_cast<std::uint32_t>(i);
        break;
      }
      if (hashes[j] == h && equal(j, i)) {
        if (seen[j] == 0) report(i);
        seen[j] = 1;
        break;
      }
    }
  }
}

// ---- validation ----

// Where a walk is in the value. Rendered only when a cause or a pruned field needs it.
class ValuePath {
 public:
  enum class Step : std::uint8_t { property, map_key, item };

  ValuePath() { steps_.resize(32); }

  void push(Step s, std::string_view k) { slot() = {s, k, 0}; }
  void push_item(std::size_t i) { slot() = {Step::item, {}, i}; }
  void pop() { --depth_; }

  // kube-openapi's name: "spec.containers[0].name"; a map key after "." even at the root.
  std::string name() const {
    std::string out;
    for (std::size_t n = 0; n < depth_; ++n) {
      const Entry& s = steps_[n];
      switch (s.step) {
        case Step::property:
          if (!out.empty()) out += '.';
          out += s.key;
          break;
        case Step::map_key:
          out += '.';
          out += s.key;
          break;
        case Step::item:
          out += '[';
          out += std::to_string(s.index);
          out += ']';
          break;
      }
    }
    return out;
  }

  // field.Path under `prefix`: properties as children, map keys as [key], items as [i].
  std::string field_path(std::string_view prefix) const {
    std::string out(prefix);
    for (std::size_t n = 0; n < depth_; ++n) {
      const Entry& s = steps_[n];
      switch (s.step) {
        case Step::property:
          if (!out.empty()) out += '.';
          out += s.key;
          break;
        case Step::map_key:
          out += '[';
          out += s.key;
          out += ']';
          break;
        case Step::item:
          out += '[';
          out += std::to_string(s.index);
          out += ']';
          break;
      }
    }
    return out;
  }

  // Pruning's notation: keys after ".", items as [i].
  std::string pruned_path(std::string_view last) const {
    std::string out;
    for (std::size_t n = 0; n < depth_; ++n) {
      const Entry& s = steps_[n];
      if (s.step == Step::item) {
        out += '[';
        out += std::to_string(s.index);
        out += ']';
      } else {
        if (!out.empty()) out += '.';
        out += s.key;
      }
    }
    if (!out.empty()) out += '.';
    out += last;
    return out;
  }

 private:
  struct Entry {
    Step step;
    std::string_view key;
    std::size_t index;
  };
  Entry& slot() {
    if (depth_ == steps_.size()) steps_.resize(2 * depth_);
    return steps_[depth_++];
  }
  std::vector<Entry> steps_;
  std::size_t depth_ = 0;
};

std::size_t rune_count(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// swag.IsFloat64AJSONInteger.
bool is_json_integer(double f) {
  constexpr double kMax = 9007199254740991.0;  // 2^53 - 1
  return std::isfinite(f) && f >= -kMax && f <= kMax && std::trunc(f) == f;
}

std::int64_t to_int64(double d) {
  if (!(d > -9223372036854775808.0)) return std::numeric_limits<std::int64_t>::min();
  if (!(d < 9223372036854775808.0)) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(d);
}

enum class Kind : std::uint8_t { null, object, array, string, integer, number, boolean };

Kind kind_of(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return Kind::null;
    case json::kind::object: return Kind::object;
    case json::kind::array: return Kind::array;
    case json::kind::string: return Kind::string;
    case json::kind::int64: return Kind::integer;
    case json::kind::bool_: return Kind::boolean;
    default: return Kind::number;  // uint64 and double: float64 in kube's decoding
  }
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::null: return "null";
    case Kind::object: return "object";
    case Kind::array: return "array";
    case Kind::string: return "string";
    case Kind::integer: return "integer";
    case Kind::number: return "number";
    case Kind::boolean: return "boolean";
  }
  return "";
}

std::uint8_t kind_bit(Kind k) {
  switch (k) {
    case Kind::object: return detail::kObjectBit;
    case Kind::array: return detail::kArrayBit;
    case Kind::string: return detail::kStringBit;
    case Kind::integer: return detail::kIntegerBit;
    case Kind::number: return detail::kNumberBit;
    case Kind::boolean: return detail::kBooleanBit;
    case Kind::null: return 0;
  }
  return 0;
}

// The format go-openapi infers from a decoded value, for the type validator's format check.
const char* data_format(Kind k) {
  return k == Kind::integer ? "int64" : k == Kind::number ? "double" : "";
}

bool enum_equal(const json::value& data, const json::value& e) {
  if (data.is_null()) return false;  // kube-openapi never matches null against an enum
  return values_equal(data, e, Equality::by_value);
}

// kube-openapi's SchemaValidator, with apiextensions' conversion of its result into causes.
class Validator {
 public:
  Validator(std::string_view prefix, std::vector<Cause>& out) : prefix_(prefix), out_(&out) {}

  void check(const SchemaNode& n, const json::value& v, std::size_t depth) {
    if (depth > kMaxValueDepth) {
      add(invalid(field(), "\"\"",
                  name() + " nests more than " + std::to_string(kMaxValueDepth) + " levels"));
      return;
    }
    Kind k = kind_of(v);
    if (k == Kind::null) {
      if (n.type_bits != 0 && !n.nullable) type_error(n.type_name, "null");
      check_enum(n, v);
      return;
    }
    check_type(n, v, k);
    if (!n.all_of.empty() || !n.any_of.empty() || !n.one_of.empty() || n.not_) {
      check_junctors(n, v, depth);
    }
    switch (k) {
      case Kind::string: check_string(n, v.get_string()); break;
      case Kind::integer:
      case Kind::number: check_number(n, v); break;
      case Kind::array: check_array(n, v.get_array(), depth); break;
      default: break;
    }
    check_enum(n, v);
    if (k == Kind::object) check_object(n, v.get_object(), depth);
  }

 private:
  std::string name() const { return path_.name(); }
  std::string field_of(std::string_view name) const {
    if (!name.empty() && name[0] == '.') name.remove_prefix(1);
    if (prefix_.empty()) return name.empty() ? "<nil>" : std::string(name);
    if (name.empty()) return std::string(prefix_);
    std::string out(prefix_);
    out += '.';
    out += name;
    return out;
  }
  std::string field() const { return field_of(name()); }
  void add(Cause c) { out_->push_back(std::move(c)); }

  // errors.InvalidType: "<name> in body must be of type <type>: "<value>"".
  void type_error(std::string_view type, std::string_view value) {
    std::string n = name();
    add(type_invalid(field_of(n), go_quote(value),
                     n + " in body must be of type " + std::string(type) + ": " + go_quote(value)));
  }

  void check_type(const SchemaNode& n, const json::value& v, Kind k) {
    if (n.type_bits == 0 && n.format.empty()) return;
    bool contains = (n.type_bits & kind_bit(k)) != 0;
    bool float_int = k == Kind::number && (n.type_bits & detail::kIntegerBit) &&
                     is_json_integer(as_double(v));
    bool int_float = k == Kind::integer && (n.type_bits & detail::kNumberBit);
    if (k != Kind::string && k != Kind::array && !n.format.empty() &&
        !(contains || n.format == data_format(k) || float_int || int_float)) {
      type_error(n.format, data_format(k));
      return;
    }
    if (!(n.type_bits & (detail::kNumberBit | detail::kIntegerBit)) && !n.format.empty() &&
        (k == Kind::string || (k == Kind::array && n.type_bits == 0))) {
      return;  // a string with a format is checked by the format validator
    }
    if (!(contains || float_int || int_float)) type_error(n.type_name, kind_name(k));
  }

  // A composite error of kube-openapi: no field of its own.
  void composite(std::string message) {
    add(invalid(prefix_.empty() ? std::string("<nil>") : std::string(prefix_), "\"\"", message));
  }

  std::vector<Cause> run_branch(const SchemaNode& b, const json::value& v, std::size_t depth) {
    std::vector<Cause> branch;
    auto* saved = out_;
    out_ = &branch;
    check(b, v, depth + 1);
    out_ = saved;
    return branch;
  }
  void append(std::vector<Cause>&& causes) {
    for (auto& c : causes) out_->push_back(std::move(c));
  }

  void check_junctors(const SchemaNode& n, const json::value& v, std::size_t depth) {
    if (!n.any_of.empty()) {
      std::optional<std::vector<Cause>> best;
      bool matched = false;
      for (const auto* b : n.any_of) {
        auto r = run_branch(*b, v, depth);
        if (r.empty()) {
          matched = true;
          break;
        }
        if (!best || r.size() < best->size()) best = std::move(r);
      }
      if (!matched) {
        composite(go_quote(name()) + " must validate at least one schema (anyOf)");
        append(std::move(*best));
      }
    }
    if (!n.one_of.empty()) {
      std::optional<std::vector<Cause>> best;
      std::size_t valid = 0;
      for (const auto* b : n.one_of) {
        auto r = run_branch(*b, v, depth);
        if (r.empty()) {
          ++valid;
        } else if (valid == 0 && (!best || r.size() < best->size())) {
          best = std::move(r);
        }
      }
      if (valid != 1) {
        composite(go_quote(name()) + " must validate one and only one schema (oneOf). " +
                  (valid == 0 ? std::string("Found none valid")
                              : "Found " + std::to_string(valid) + " valid alternatives"));
        if (valid == 0 && best) append(std::move(*best));
      }
    }
    if (!n.all_of.empty()) {
      std::size_t valid = 0;
      for (const auto* b : n.all_of) {
        auto r = run_branch(*b, v, depth);
        if (r.empty()) ++valid;
        append(std::move(r));
      }
      if (valid != n.all_of.size()) {
        composite(go_quote(name()) + " must validate all the schemas (allOf)" +
                  (valid == 0 ? ". None validated" : ""));
      }
    }
    if (n.not_ && run_branch(*n.not_, v, depth).empty()) {
      composite(go_quote(name()) + " must not validate the schema (not)");
    }
  }

  // kube-openapi's string validator reports its first failure only; the format validator is
  // separate.
  void check_string(const SchemaNode& n, std::string_view s) {
    check_length_and_pattern(n, s);
    if (n.format_check != Format::none && !format_ok(n.format_check, s)) {
      type_error(n.format, s);
    }
  }
  void check_length_and_pattern(const SchemaNode& n, std::string_view s) {
    if (n.max_length || n.min_length) {
      auto runes = static_cast<std::int64_t>(rune_count(s));
      if (n.max_length && runes > *n.max_length) {
        add(too_long(field(), *n.max_length));
        return;
      }
      if (n.min_length && runes < *n.min_length) {
        std::string nm = name();
        add(invalid(field_of(nm), go_quote(s),
                    nm + " in body should be at least " + std::to_string(*n.min_length) +
                        " chars long"));
        return;
      }
    }
    if (n.regex && !re2::RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), *n.regex)) {
      std::string nm = name();
      add(invalid(field_of(nm), go_quote(s), nm + " in body should match '" + n.pattern + "'"));
    }
  }

  void check_number(const SchemaNode& n, const json::value& v) {
    bool go_int = is_go_int(v);
    std::string shown = go_int ? std::to_string(v.get_int64()) : go_float(as_double(v));
    if (n.multiple_of) {
      double f = *n.multiple_of;
      if (go_int && f >= 1 && f < 9.2e18 && std::trunc(f) == f) {
        auto factor = static_cast<std::int64_t>(f);
        if (v.get_int64() % factor != 0) {
          add(invalid(field(), shown,
                      name() + " in body should be a multiple of " + std::to_string(factor)));
        }
      } else if (f < 0) {
        add(invalid(field(), shown,
                    "factor MultipleOf declared for " + name() +
                        " must be positive: " + go_float(f)));
      } else {
        double d = as_double(v);
        double mult = f < 1 ? 1 / f * d : d / f;
        if (!is_json_integer(mult)) {
          add(invalid(field(), shown, name() + " in body should be a multiple of " + go_float(f)));
        }
      }
    }
    auto bound_text = [&](double b) {
      return go_int ? std::to_string(to_int64(b)) : go_float(b);
    };
    auto below = [&](double b, bool exclusive) {
      if (go_int) {
        auto x = v.get_int64();
        auto ib = to_int64(b);
        return exclusive ? x <= ib : x < ib;
      }
      double x = as_double(v);
      return exclusive ? x <= b : x < b;
    };
    auto above = [&](double b, bool exclusive) {
      if (go_int) {
        auto x = v.get_int64();
        auto ib = to_int64(b);
        return exclusive ? x >= ib : x > ib;
      }
      double x = as_double(v);
      return exclusive ? x >= b : x > b;
    };
    if (n.minimum && below(*n.minimum, n.exclusive_minimum)) {
      add(invalid(field(), shown,
                  name() + " in body should be greater than " +
                      (n.exclusive_minimum ? "" : "or equal to ") + bound_text(*n.minimum)));
    }
    if (n.maximum && above(*n.maximum, n.exclusive_maximum)) {
      add(invalid(field(), shown,
                  name() + " in body should be less than " +
                      (n.exclusive_maximum ? "" : "or equal to ") + bound_text(*n.maximum)));
    }
  }

  void check_array(const SchemaNode& n, const json::array& a, std::size_t depth) {
    if (n.items) {
      for (std::size_t i = 0; i < a.size(); ++i) {
        path_.push_item(i);
        check(*n.items, a[i], depth + 1);
        path_.pop();
      }
    }
    if (n.min_items && static_cast<std::int64_t>(a.size()) < *n.min_items) {
      add(invalid(field(), std::to_string(a.size()),
                  name() + " in body should have at least " + std::to_string(*n.min_items) +
                      " items"));
    }
    if (n.max_items && static_cast<std::int64_t>(a.size()) > *n.max_items) {
      add(too_many(field(), a.size(), *n.max_items));
    }
    if (n.unique_items) {
      bool dup = false;
      find_duplicates(
          a.size(), [&](std::size_t i) { return value_hash(a[i], Equality::strict); },
          [&](std::size_t i, std::size_t j) { return values_equal(a[i], a[j], Equality::strict); },
          [&](std::size_t) { dup = true; });
      if (dup) add(invalid(field(), "\"\"", name() + " in body shouldn't contain duplicates"));
    }
  }

  void check_enum(const SchemaNode& n, const json::value& v) {
    if (!n.has_enum) return;
    for (const auto& e : n.enum_values) {
      if (enum_equal(v, e)) return;
    }
    add(not_supported(field(), value_repr(v), n.enum_texts));
  }

  void check_object(const SchemaNode& n, const json::object& o, std::size_t depth) {
    if (n.min_properties && static_cast<std::int64_t>(o.size()) < *n.min_properties) {
      add(invalid(field(), std::to_string(o.size()),
                  name() + " in body should have at least " + std::to_string(*n.min_properties) +
                      " properties"));
      return;
    }
    if (n.max_properties && static_cast<std::int64_t>(o.size()) > *n.max_properties) {
      add(too_many(field(), o.size(), *n.max_properties));
      return;
    }
    for (const auto& kv : o) {
      if (const SchemaNode* p = n.property(kv.key())) {
        path_.push(ValuePath::Step::property, kv.key());
        check(*p, kv.value(), depth + 1);
        path_.pop();
      } else if (n.additional == Additional::schema) {
        path_.push(ValuePath::Step::map_key, kv.key());
        check(*n.additional_schema, kv.value(), depth + 1);
        path_.pop();
      } else if (n.additional == Additional::deny) {
        std::string nm = name();
        add(invalid(field_of(nm), go_quote(kv.key()),
                    nm + "." + std::string(kv.key()) + " in body is a forbidden property"));
      }
    }
    for (const auto& r : n.required) {
      if (!o.contains(r)) {
        std::string nm = name();
        add(required(field_of(nm.empty() ? r : nm + "." + r)));
      }
    }
  }

  std::string_view prefix_;
  std::vector<Cause>* out_;
  ValuePath path_;
};

// What kube checks after the schema validator: embedded resources' apiVersion and kind
// (objectmeta.Validate) and duplicates in set and map lists (listtype.ValidateListSetsAndMaps).
// Both walk the structural schema and name fields with field.Path.
class StructureChecker {
 public:
  explicit StructureChecker(std::string_view prefix) : prefix_(prefix) {}

  std::vector<Cause> embedded;
  std::vector<Cause> lists;

  void walk(const SchemaNode& s, const json::value& x, std::size_t depth) {
    if (depth > kMaxValueDepth) return;
    if (const auto* o = x.if_object()) {
      if (s.embedded) check_embedded(*o);
      for (const auto& kv : *o) {
        if (const SchemaNode* p = s.property(kv.key())) {
          path_.push(ValuePath::Step::property, kv.key());
          walk(*p, kv.value(), depth + 1);
          path_.pop();
        } else if (s.additional == Additional::schema) {
          path_.push(ValuePath::Step::map_key, kv.key());
          walk(*s.additional_schema, kv.value(), depth + 1);
          path_.pop();
        }
      }
    } else if (const auto* a = x.if_array()) {
      if (s.list_type && *s.list_type == "set") check_set(*a);
      if (s.list_type && *s.list_type == "map") check_map_list(s, *a);
      if (s.items) {
        for (std::size_t i = 0; i < a->size(); ++i) {
          path_.push_item(i);
          walk(*s.items, (*a)[i], depth + 1);
          path_.pop();
        }
      }
    }
  }

 private:
  std::string here() const { return path_.field_path(prefix_); }
  std::string here_child(std::string_view name) const { return child(here(), name); }
  std::string here_index(std::size_t i) const { return index(here(), i); }

  void check_embedded(const json::object& o) {
    if (!o.contains("apiVersion")) embedded.push_back(required(here_child("apiVersion")));
    if (!o.contains("kind")) embedded.push_back(required(here_child("kind")));
    for (const auto& kv : o) {
      std::string_view k = kv.key();
      const json::value& v = kv.value();
      if (k == "apiVersion") {
        const auto* s = v.if_string();
        if (!s) {
          embedded.push_back(invalid(here_child(k), value_repr(v), "must be a string"));
        } else if (s->empty()) {
          embedded.push_back(required(here_child(k)));
        } else if (std::count(s->begin(), s->end(), '/') > 1) {
          embedded.push_back(invalid(here_child(k), go_quote(*s),
                                     "unexpected GroupVersion string: " + std::string(*s)));
        }
      } else if (k == "kind") {
        const auto* s = v.if_string();
        if (!s) {
          embedded.push_back(invalid(here_child(k), value_repr(v), "must be a string"));
        } else if (s->empty()) {
          embedded.push_back(required(here_child(k)));
        } else if (auto errs = dns1035_label_errors(*s); !errs.empty()) {
          embedded.push_back(invalid(here_child(k), go_quote(*s),
                                     "may have mixed case, but should otherwise match: " + errs));
        }
      } else if (k == "metadata" && !v.is_object()) {
        embedded.push_back(invalid(here_child(k), value_repr(v), "must be an object"));
      }
    }
  }

  // IsDNS1035Label of the lower-cased kind, its messages joined with ",".
  static std::string dns1035_label_errors(std::string_view kind) {
    std::string lower(kind);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string errs;
    if (lower.size() > 63) errs = "must be no more than 63 characters";
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    bool ok = !lower.empty() && lower[0] >= 'a' && lower[0] <= 'z' && alnum(lower.back()) &&
              std::all_of(lower.begin(), lower.end(), [&](char c) { return alnum(c) || c == '-'; });
    if (!ok) {
      if (!errs.empty()) errs += ",";
      errs +=
          "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
          "with an alphabetic character, and end with an alphanumeric character (e.g. "
          "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    }
    return errs;
  }

  // validateListSet: scalars compare as Go values, compound members by their JSON.
  static Equality set_equality(const json::value& v) {
    return v.is_object() || v.is_array() ? Equality::by_value : Equality::strict;
  }
  static std::uint64_t member_hash(const json::value& v) {
    Equality eq = set_equality(v);
    return value_hash(v, eq) ^ (eq == Equality::by_value ? 0x9e3779b97f4a7c15ULL : 0);
  }
  static bool members_equal(const json::value& a, const json::value& b) {
    Equality eq = set_equality(a);
    return eq == set_equality(b) && values_equal(a, b, eq);
  }

  void check_set(const json::array& a) {
    find_duplicates(
        a.size(), [&](std::size_t i) { return member_hash(a[i]); },
        [&](std::size_t i, std::size_t j) { return members_equal(a[i], a[j]); },
        [&](std::size_t i) { lists.push_back(duplicate(here_index(i), value_repr(a[i]))); });
  }

  void check_map_list(const SchemaNode& s, const json::array& a) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_null() && !a[i].is_object()) {
        lists.push_back(invalid(here_index(i), value_repr(a[i]),
                                "must be an object for an array of list-type map"));
        return;
      }
    }
    const auto& keys = s.list_map_keys;
    if (a.size() <= 1 || keys.empty()) return;
    // The key field's value in item i, or nullptr when unspecified.
    auto field_of = [&](std::size_t i, const std::string& k) -> const json::value* {
      const auto* o = a[i].if_object();
      if (!o) return nullptr;
      auto it = o->find(k);
      return it == o->end() ? nullptr : &it->value();
    };
    auto key_text = [&](std::size_t i) {
      // %#v of the map of the key fields the item has, sorted by name.
      std::vector<const std::string*> names;
      for (const auto& k : keys) {
        if (field_of(i, k)) names.push_back(&k);
      }
      std::sort(names.begin(), names.end(), [](auto* x, auto* y) { return *x < *y; });
      std::string out = "map[string]interface {}{";
      for (std::size_t n = 0; n < names.size(); ++n) {
        if (n) out += ", ";
        out += go_quote(*names[n]);
        out += ':';
        out += sharp_v(*field_of(i, *names[n]));
      }
      return out + "}";
    };
    if (keys.size() == 1) {
      // One key: its values compare as set members do; an unspecified key is one more value.
      const std::string& k = keys[0];
      find_duplicates(
          a.size(),
          [&](std::size_t i) {
            const auto* f = field_of(i, k);
            return f ? member_hash(*f) : 0x51ed270b27c3a1f5ULL;
          },
          [&](std::size_t i, std::size_t j) {
            const auto* x = field_of(i, k);
            const auto* y = field_of(j, k);
            return x && y ? members_equal(*x, *y) : x == y;
          },
          [&](std::size_t i) { lists.push_back(duplicate(here_index(i), key_text(i))); });
      return;
    }
    // Several keys: maps of the specified key fields, compared by their JSON.
    find_duplicates(
        a.size(),
        [&](std::size_t i) {
          SipHash h(kObjectTag);
          for (const auto& k : keys) {
            const auto* f = field_of(i, k);
            h.write_u64(f ? value_hash(*f, Equality::by_value) : 0);
            h.write_u64(f != nullptr);
          }
          return h.finish();
        },
        [&](std::size_t i, std::size_t j) {
          for (const auto& k : keys) {
            const auto* x = field_of(i, k);
            const auto* y = field_of(j, k);
            if ((x == nullptr) != (y == nullptr)) return false;
            if (x && !values_equal(*x, *y, Equality::by_value)) return false;
          }
          return true;
        },
        [&](std::size_t i) { lists.push_back(duplicate(here_index(i), key_text(i))); });
  }

  std::string_view prefix_;
  ValuePath path_;
};

// ---- pruning ----

// pruning.PruneWithOptions: unknown fields out, their paths recorded when `paths` is given.
class Pruner {
 public:
  explicit Pruner(std::vector<std::string>* paths) : paths_(paths) {}
  std::size_t removed = 0;

  void prune(json::value& x, const SchemaNode* s, bool embedded, std::size_t depth) {
    if (depth > kMaxValueDepth) return;
    if (s && s->preserve_unknown) {
      keep_unknown(x, s, embedded, depth);
      return;
    }
    if (auto* o = x.if_object()) {
      if (!s) {
        for (const auto& kv : *o) record(kv.key());
        removed += o->size();
        o->clear();
        return;
      }
      std::vector<std::size_t> drop;
      std::size_t i = 0;
      for (auto& kv : *o) {
        std::string_view k = kv.key();
        if (embedded && is_meta_field(k)) {
          // kept as they are
        } else if (const SchemaNode* p = s->property(k)) {
          descend(kv.value(), k, p, depth);
        } else if (s->additional != Additional::absent) {
          descend(kv.value(), k, s->additional_schema, depth);
        } else {
          record(k);
          drop.push_back(i);
        }
        ++i;
      }
      if (!drop.empty()) {
        removed += drop.size();
        erase_members(*o, drop);
      }
    } else if (auto* a = x.if_array()) {
      const SchemaNode* items = s ? s->items : nullptr;
      for (std::size_t i = 0; i < a->size(); ++i) {
        path_.push_item(i);
        prune((*a)[i], items, items && items->embedded, depth + 1);
        path_.pop();
      }
    }
  }

  // Removes the members at the sorted positions `drop`, keeping the others' order: one pass.
  static void erase_members(json::object& o, const std::vector<std::size_t>& drop) {
    json::object kept(o.storage());
    kept.reserve(o.size() - drop.size());
    std::size_t i = 0, d = 0;
    for (auto& kv : o) {
      if (d < drop.size() && drop[d] == i) {
        ++d;
      } else {
        kept.emplace(kv.key(), std::move(kv.value()));
      }
      ++i;
    }
    o = std::move(kept);
  }

 private:
  void descend(json::value& v, std::string_view k, const SchemaNode* s, std::size_t depth) {
    path_.push(ValuePath::Step::property, k);
    prune(v, s, s && s->embedded, depth + 1);
    path_.pop();
  }

  // skipPrune: under x-kubernetes-preserve-unknown-fields unknown fields stay, known ones are
  // pruned by their own schemas.
  void keep_unknown(json::value& x, const SchemaNode* s, bool embedded, std::size_t depth) {
    if (!s || depth > kMaxValueDepth) return;
    if (auto* o = x.if_object()) {
      for (auto& kv : *o) {
        std::string_view k = kv.key();
        if (embedded && is_meta_field(k)) continue;
        if (const SchemaNode* p = s->property(k)) {
          descend(kv.value(), k, p, depth);
        } else if (s->additional != Additional::absent) {
          descend(kv.value(), k, s->additional_schema, depth);
        }
      }
    } else if (auto* a = x.if_array()) {
      for (std::size_t i = 0; i < a->size(); ++i) {
        path_.push_item(i);
        keep_unknown((*a)[i], s->items, s->items && s->items->embedded, depth + 1);
        path_.pop();
      }
    }
  }

  void record(std::string_view k) {
    if (paths_) paths_->push_back(path_.pruned_path(k));
  }

  std::vector<std::string>* paths_;
  ValuePath path_;
};

// ---- defaulting ----

// PruneNonNullableNullsWithoutDefaults and Default in one walk: at each object the nulls go
// first, then the defaults, then the walk descends (into the defaults just set too).
void apply_defaults_to(json::value& x, const SchemaNode* s, std::size_t depth) {
  if (!s || depth > kMaxValueDepth) return;
  if (auto* o = x.if_object()) {
    auto schema_for = [&](std::string_view k) -> const SchemaNode* {
      if (const SchemaNode* p = s->property(k)) return p;
      return s->additional == Additional::schema ? s->additional_schema : nullptr;
    };
    std::vector<std::size_t> drop;
    std::size_t i = 0;
    for (const auto& kv : *o) {
      if (kv.value().is_null()) {
        const SchemaNode* c = schema_for(kv.key());
        if (c && !c->nullable && !c->default_value) drop.push_back(i);
      }
      ++i;
    }
    if (!drop.empty()) Pruner::erase_members(*o, drop);
    for (auto pos : s->defaulted) {
      const auto& p = s->properties[pos];
      auto it = o->find(p.name);
      if (it == o->end()) {
        o->emplace(p.name, json::value(*p.node->default_value, o->storage()));
      } else if (it->value().is_null() && !p.node->nullable) {
        it->value() = json::value(*p.node->default_value, o->storage());
      }
    }
    for (auto& kv : *o) {
      if (const SchemaNode* p = s->property(kv.key())) {
        apply_defaults_to(kv.value(), p, depth + 1);
      } else if (s->additional == Additional::schema) {
        const SchemaNode* ap = s->additional_schema;
        if (kv.value().is_null() && !ap->nullable && ap->default_value) {
          kv.value() = json::value(*ap->default_value, o->storage());
        }
        apply_defaults_to(kv.value(), ap, depth + 1);
      }
    }
  } else if (auto* a = x.if_array()) {
    const SchemaNode* items = s->items;
    if (!items) return;
    for (auto& e : *a) {
      if (e.is_null() && !items->nullable && items->default_value) {
        e = json::value(*items->default_value, a->storage());
      }
      apply_defaults_to(e, items, depth + 1);
    }
  }
}

}  // namespace

namespace detail {

// structuraldefaulting.ValidateDefaults: every default must be pruned already and valid under
// its own schema (additionalProperties are not followed: their defaults are not checked).
void check_defaults(const SchemaNode& s, const std::string& path, bool resource_root,
                    bool inside_meta, std::vector<Cause>& out) {
  bool embedded = resource_root || s.embedded;
  if (embedded) inside_meta = false;
  if (s.default_value) {
    if (!inside_meta) {
      json::value copy = *s.default_value;
      Pruner p(nullptr);
      p.prune(copy, &s, embedded, 0);
      if (p.removed > 0) {
        out.push_back(invalid(child(path, "default"), value_repr(*s.default_value),
                              "must not have unknown fields"));
      }
    }
    std::string at = child(path, "default");
    Validator v(at, out);
    v.check(s, *s.default_value, 0);
  }
  if (s.items) check_defaults(*s.items, child(path, "items"), false, inside_meta, out);
  for (const auto& p : s.properties) {
    check_defaults(*p.node, key(child(path, "properties"), p.name), false,
                   inside_meta || (embedded && is_meta_field(p.name)), out);
  }
}

}  // namespace detail

// ---- the public entries ----

std::vector<Cause> StructuralSchema::validate(const json::value& value,
                                              std::string_view path_prefix,
                                              const json::object* old,
                                              std::vector<std::string>* warnings) const {
  std::vector<Cause> causes;
  Validator validator(path_prefix, causes);
  validator.check(*tree_->root, value, 0);
  StructureChecker structure(path_prefix);
  structure.walk(*tree_->root, value, 0);
  for (auto& c : structure.embedded) causes.push_back(std::move(c));
  for (auto& c : structure.lists) causes.push_back(std::move(c));
  drop_repeated_causes(causes);
  if (has_cel_rules_) {
    // kube does not run the rules over a value whose shape is already wrong: they would fail
    // on the mismatch rather than on what they check.
    const bool blocked = std::any_of(causes.begin(), causes.end(), [](const Cause& c) {
      return c.type == "FieldValueNotSupported" || c.type == "FieldValueRequired" ||
             c.type == "FieldValueTooLong" || c.type == "FieldValueTooMany" ||
             c.type == "FieldValueTypeInvalid";
    });
    if (blocked) {
      causes.push_back(invalid("<nil>", "null",
                               "some validation rules were not checked because the object was "
                               "invalid; correct the existing errors to complete validation"));
    } else {
      validate_cel_rules(*tree_->root, value, old, std::string(path_prefix), causes, warnings);
    }
  }
  return causes;
}

std::vector<std::string> StructuralSchema::prune(json::value& value) const {
  std::vector<std::string> paths;
  Pruner pruner(&paths);
  pruner.prune(value, tree_->root, true, 0);
  std::sort(paths.begin(), paths.end());
  return paths;
}

namespace {

// The reflect.Kind name Go gives a decoded JSON value (kube decodes whole numbers as int64).
std::string_view go_kind(const json::value& v) {
  switch (v.kind()) {
    case json::kind::bool_: return "bool";
    case json::kind::string: return "string";
    case json::kind::array: return "slice";
    case json::kind::object: return "map";
    case json::kind::double_: return "float64";
    case json::kind::uint64: return "uint64";
    default: return "int64";
  }
}

std::optional<std::string> conversion_error(const json::value& value, const SchemaNode* node,
                                            std::size_t depth) {
  if (node == nullptr || value.is_null() || depth > kMaxValueDepth) return std::nullopt;
  if (node->int_or_string || node->preserve_unknown) return std::nullopt;
  if (node->type == "object") {
    const bool is_struct = !node->properties.empty();
    const bool is_map = node->additional == Additional::schema || node->additional == Additional::allow;
    if (!value.is_object()) {
      if (is_struct) return "cannot restore struct from: " + std::string(go_kind(value));
      if (is_map) return "cannot restore map from " + std::string(go_kind(value));
      return std::nullopt;
    }
    const json::object& obj = value.get_object();
    if (is_struct) {
      for (const auto& p : node->properties) {
        if (const json::value* v = obj.if_contains(p.name)) {
          if (auto e = conversion_error(*v, p.node, depth + 1)) return e;
        }
      }
    } else if (node->additional == Additional::schema) {
      for (const auto& [k, v] : obj) {
        if (auto e = conversion_error(v, node->additional_schema, depth + 1)) return e;
      }
    }
    return std::nullopt;
  }
  if (node->type == "array") {
    if (!value.is_array()) return "cannot restore slice from " + std::string(go_kind(value));
    for (const auto& item : value.get_array()) {
      if (auto e = conversion_error(item, node->items, depth + 1)) return e;
    }
  }
  return std::nullopt;
}

// ObjectMeta, which the kinds' schemas leave to the scheme: its maps and lists in Go's field
// order (labels, annotations, ownerReferences, finalizers, managedFields).
std::optional<std::string> object_meta_error(const json::value& meta) {
  if (meta.is_null()) return std::nullopt;
  if (!meta.is_object()) return "cannot restore struct from: " + std::string(go_kind(meta));
  const json::object& m = meta.get_object();
  for (std::string_view key : {"labels", "annotations"}) {
    const json::value* v = m.if_contains(key);
    if (v != nullptr && !v->is_null() && !v->is_object()) {
      return "cannot restore map from " + std::string(go_kind(*v));
    }
  }
  for (std::string_view key : {"ownerReferences", "finalizers", "managedFields"}) {
    const json::value* v = m.if_contains(key);
    if (v == nullptr || v->is_null()) continue;
    if (!v->is_array()) return "cannot restore slice from " + std::string(go_kind(*v));
    if (key == "finalizers") continue;
    for (const auto& item : v->get_array()) {
      if (!item.is_null() && !item.is_object()) {
        return "cannot restore struct from: " + std::string(go_kind(item));
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> StructuralSchema::go_conversion_error(const json::value& value) const {
  // The embedded TypeMeta and ObjectMeta come first in every kind's Go type.
  if (const json::object* obj = value.if_object()) {
    if (const json::value* meta = obj->if_contains("metadata")) {
      if (auto e = object_meta_error(*meta)) return e;
    }
  }
  return conversion_error(value, tree_->root, 0);
}

void StructuralSchema::apply_defaults(json::value& value) const {
  apply_defaults_to(value, tree_->root, 0);
}

}  // namespace kwatch::schema

namespace kwatch::schema {

namespace detail {

bool mark_quantities_below(SchemaNode& n) {
  bool below = n.quantity;
  for (const auto& p : n.properties) {
    below = mark_quantities_below(const_cast<SchemaNode&>(*p.node)) || below;
  }
  if (n.additional_schema != nullptr) {
    below = mark_quantities_below(const_cast<SchemaNode&>(*n.additional_schema)) || below;
  }
  if (n.items != nullptr) below = mark_quantities_below(const_cast<SchemaNode&>(*n.items)) || below;
  n.quantities_below = below;
  return below;
}

}  // namespace detail

namespace {

// A JSON number's text as Quantity's UnmarshalJSON reads it (the shortest form of a double).
std::string number_text(const json::value& v) {
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  char buffer[64];
  const auto r = std::to_chars(buffer, buffer + sizeof buffer, v.get_double());
  return std::string(buffer, r.ptr);
}

bool canonicalize_quantities_at(const detail::SchemaNode& n, json::value& v, std::size_t depth,
                                std::string& error) {
  if (!n.quantities_below || v.is_null() || depth > StructuralSchema::kMaxValueDepth) return true;
  if (n.quantity) {
    std::string text;
    if (v.is_string()) {
      text = std::string(v.get_string());
    } else if (v.is_number()) {
      text = number_text(v);
    } else {
      error = std::string(apimachinery::kQuantityFormatError);  // Go parses the raw JSON text
      return false;
    }
    auto canonical = apimachinery::canonical_quantity(text, error, n.resource_list_value ? -3 : -9);
    if (!canonical) return false;
    if (!v.is_string() || v.get_string() != *canonical) v = json::string(*canonical);
    return true;
  }
  if (json::object* obj = v.if_object()) {
    for (auto& [key, member] : *obj) {
      const detail::SchemaNode* child = n.property(key);
      if (child == nullptr) child = n.additional_schema;
      if (child != nullptr && !canonicalize_quantities_at(*child, member, depth + 1, error)) {
        return false;
      }
    }
  } else if (json::array* arr = v.if_array(); arr != nullptr && n.items != nullptr) {
    for (auto& item : *arr) {
      if (!canonicalize_quantities_at(*n.items, item, depth + 1, error)) return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::string> StructuralSchema::canonicalize_quantities(json::value& value) const {
  if (!has_quantities_) return std::nullopt;
  std::string error;
  if (!canonicalize_quantities_at(*tree_->root, value, 0, error)) return error;
  return std::nullopt;
}

}  // namespace kwatch::schema
