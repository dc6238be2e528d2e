#include "schema/structural_schema.hpp"

#include "apimachinery/json_equality.hpp"
#include "base/sip_hash.hpp"
#include "apimachinery/validation.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include <arpa/inet.h>
#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <unordered_set>
#include <utility>

namespace kwatch::schema {

using apimachinery::ApiError;
using apimachinery::go_quote;
using apimachinery::ApiResult;
using apimachinery::Cause;
using base::Errc;

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxValueDepth = StructuralSchema::kMaxValueDepth;
constexpr std::size_t kMaxSchemaDepth = StructuralSchema::kMaxSchemaDepth;

// ---- how Go prints values in kube's messages ----

// strconv.FormatFloat(f, 'g', -1, 64), which fmt's %v and %#v use: the shortest digits that
// round-trip, in %e form when the exponent is below -4 or at least 6 ("1e+06", "123456").
std::string go_float(double d) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view s(buf, static_cast<std::size_t>(r.ptr - buf));
  auto e = s.find('e');
  int exp = 0;
  std::from_chars(s.data() + e + (s[e + 1] == '+' ? 2 : 1), s.data() + s.size(), exp);
  if (exp < -4 || exp >= 6) return std::string(s);
  std::string out;
  std::string_view mant = s.substr(0, e);
  if (!mant.empty() && mant[0] == '-') {
    out += '-';
    mant.remove_prefix(1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  int dp = exp + 1;  // digits before the decimal point
  if (dp <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-dp), '0');
    out += digits;
  } else if (static_cast<std::size_t>(dp) >= digits.size()) {
    out += digits;
    out.append(static_cast<std::size_t>(dp) - digits.size(), '0');
  } else {
    out.append(digits, 0, static_cast<std::size_t>(dp));
    out += '.';
    out.append(digits, static_cast<std::size_t>(dp), std::string::npos);
  }
  return out;
}

// encoding/json's text for a float64: fixed notation unless tiny or huge ("1e-7", "1e+21").
std::string go_json_float(double d) {
  char buf[512];
  double a = std::fabs(d);
  if (a != 0 && (a < 1e-6 || a >= 1e21)) {
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    auto n = s.size();
    if (n >= 4 && s[n - 4] == 'e' && s[n - 3] == '-' && s[n - 2] == '0') s.erase(n - 2, 1);
    return s;
  }
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

// A JSON number the way kube's decoder holds it: int64 when it fits, float64 otherwise.
bool is_go_int(const json::value& v) { return v.is_int64(); }
double as_double(const json::value& v) {
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return v.get_double();
}

// %#v of an unstructured value: map[string]interface {}{"a":1}, []interface {}{"x"}.
void append_sharp_v(std::string& out, const json::value& v, std::size_t depth) {
  if (depth > 32) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case json::kind::null: out += "interface {}(nil)"; break;
    case json::kind::bool_: out += v.get_bool() ? "true" : "false"; break;
    case json::kind::int64: out += std::to_string(v.get_int64()); break;
    case json::kind::uint64:
    case json::kind::double_: out += go_float(as_double(v)); break;
    case json::kind::string: out += go_quote(v.get_string()); break;
    case json::kind::array: {
      out += "[]interface {}{";
      bool first = true;
      for (const auto& e : v.get_array()) {
        if (!first) out += ", ";
        first = false;
        append_sharp_v(out, e, depth + 1);
      }
      out += '}';
      break;
    }
    case json::kind::object: {
      // fmt prints map entries sorted by key.
      std::vector<const json::key_value_pair*> members;
      for (const auto& kv : v.get_object()) members.push_back(&kv);
      std::sort(members.begin(), members.end(),
                [](auto* a, auto* b) { return a->key() < b->key(); });
      out += "map[string]interface {}{";
      bool first = true;
      for (const auto* kv : members) {
        if (!first) out += ", ";
        first = false;
        out += go_quote(kv->key());
        out += ':';
        append_sharp_v(out, kv->value(), depth + 1);
      }
      out += '}';
      break;
    }
  }
}

std::string sharp_v(const json::value& v) {
  std::string out;
  append_sharp_v(out, v, 0);
  return out;
}

// The bad value as field.Error.ErrorBody prints it: strings quoted, simple types with %v,
// compound values with %#v, nil as null.
std::string value_repr(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::string: return go_quote(v.get_string());
    case json::kind::array:
    case json::kind::object: return sharp_v(v);
    default: return sharp_v(v);
  }
}

// An enum value in "supported values": strings as they are, anything else as JSON.
std::string enum_value_text(const json::value& v) {
  switch (v.kind()) {
    case json::kind::string: return std::string(v.get_string());
    case json::kind::int64: return std::to_string(v.get_int64());
    case json::kind::uint64:
    case json::kind::double_: return go_json_float(as_double(v));
    default: return json::serialize(v);
  }
}

std::string quote_strings(const std::vector<std::string>& v) {
  std::string out = "[]string{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += go_quote(v[i]);
  }
  return out + "}";
}

// ---- causes, as field.Error builds them ----

Cause make_cause(const char* type, std::string body, std::string field) {
  return Cause{type, std::move(body), std::move(field)};
}
Cause invalid(std::string field, const std::string& value, std::string_view detail) {
  std::string body = "Invalid value: " + value;
  if (!detail.empty()) {
    body += ": ";
    body += detail;
  }
  return make_cause("FieldValueInvalid", std::move(body), std::move(field));
}
Cause type_invalid(std::string field, const std::string& value, std::string_view detail) {
  std::string body = "Invalid value: " + value;
  body += ": ";
  body += detail;
  return make_cause("FieldValueTypeInvalid", std::move(body), std::move(field));
}
Cause required(std::string field, std::string_view detail = {}) {
  std::string body = "Required value";
  if (!detail.empty()) {
    body += ": ";
    body += detail;
  }
  return make_cause("FieldValueRequired", std::move(body), std::move(field));
}
Cause forbidden(std::string field, std::string_view detail) {
  return make_cause("FieldValueForbidden", "Forbidden: " + std::string(detail), std::move(field));
}
Cause not_supported(std::string field, const std::string& value,
                    const std::vector<std::string>& supported) {
  std::string body = "Unsupported value: " + value;
  if (!supported.empty()) {
    body += ": supported values: ";
    for (std::size_t i = 0; i < supported.size(); ++i) {
      if (i) body += ", ";
      body += go_quote(supported[i]);
    }
  }
  return make_cause("FieldValueNotSupported", std::move(body), std::move(field));
}
Cause too_long(std::string field, std::int64_t max) {
  return make_cause("FieldValueTooLong",
                    "Too long: may not be more than " + std::to_string(max) +
                        (max == 1 ? " byte" : " bytes"),
                    std::move(field));
}
Cause too_many(std::string field, std::size_t actual, std::int64_t max) {
  return make_cause("FieldValueTooMany",
                    "Too many: " + std::to_string(actual) + ": must have at most " +
                        std::to_string(max) + " items",
                    std::move(field));
}
Cause duplicate(std::string field, const std::string& value) {
  return make_cause("FieldValueDuplicate", "Duplicate value: " + value, std::move(field));
}

// Paths of a CRD's schema: field.Path's Child, Key and Index.
std::string child(const std::string& p, std::string_view name) {
  if (p.empty()) return std::string(name);
  std::string out = p;
  out += '.';
  out += name;
  return out;
}
std::string key(const std::string& p, std::string_view k) {
  std::string out = p;
  out += '[';
  out += k;
  out += ']';
  return out;
}
std::string index(const std::string& p, std::size_t i) {
  return p + "[" + std::to_string(i) + "]";
}

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

}  // namespace

// ---- the compiled schema ----

namespace detail {

enum TypeBit : std::uint8_t {
  kObjectBit = 1,
  kArrayBit = 2,
  kStringBit = 4,
  kIntegerBit = 8,
  kNumberBit = 16,
  kBooleanBit = 32,
};

enum class Format : std::uint8_t {
  none,  // absent, dropped, or accepted unchecked
  byte, date, date_time, uuid, uuid3, uuid4, uuid5, ipv4, ipv6, cidr, mac, hostname, hexcolor,
  bsonobjectid,
};

enum class Additional : std::uint8_t { absent, allow, deny, schema };

struct SchemaNode {
  // Generic
  std::string type;  // as written, "" when absent
  std::string format;  // after kube's stripping of unsupported formats
  std::string written_format;
  bool nullable = false;
  bool has_title = false, has_description = false, has_external_docs = false;
  std::optional<json::value> default_value;
  Additional additional = Additional::absent;
  const SchemaNode* additional_schema = nullptr;
  const SchemaNode* items = nullptr;
  struct Property {
    std::string name;
    const SchemaNode* node;
  };
  std::vector<Property> properties;        // declaration order
  std::vector<std::uint32_t> defaulted;    // positions of properties with a default

  // Extensions
  bool preserve_unknown = false;
  bool preserve_false = false;  // x-kubernetes-preserve-unknown-fields: false
  bool embedded = false;
  bool int_or_string = false;
  std::optional<std::string> list_type, map_type;
  std::vector<std::string> list_map_keys;
  bool has_x_validations = false;

  // Value validation
  std::optional<double> minimum, maximum, multiple_of;
  bool exclusive_minimum = false, exclusive_maximum = false;
  std::optional<std::int64_t> min_length, max_length, min_items, max_items, min_properties,
      max_properties;
  std::string pattern;
  std::shared_ptr<const re2::RE2> regex;  // shared with the definition's PatternCache
  std::string pattern_error;  // Go's text for a pattern RE2 refused
  bool unique_items = false;
  bool has_enum = false;
  std::vector<json::value> enum_values;
  std::vector<std::string> enum_texts;
  std::vector<std::string> required;
  std::vector<const SchemaNode*> all_of, any_of, one_of;
  const SchemaNode* not_ = nullptr;

  // Keywords kube does not support (refused by compile()).
  bool has_id = false, has_schema = false, has_ref = false, has_pattern_properties = false,
       has_dependencies = false, has_additional_items = false, has_definitions = false,
       items_is_array = false;

  // Derived
  std::size_t keyword_count = 0;  // recognized keywords present
  std::size_t meta_forbidden_keywords = 0;  // keywords a root `metadata` schema may not have
  std::uint8_t type_bits = 0;
  std::string type_name;  // "integer,string" for int-or-string
  Format format_check = Format::none;

  // The schema of property `name`, or nullptr: every member of every object walked is looked
  // up here, so a few properties are scanned (lengths first) and more go through a table.
  const SchemaNode* property(std::string_view name) const {
    if (slots.empty()) {
      for (const auto& p : properties) {
        if (p.name.size() == name.size() && !name.empty() && p.name[0] == name[0] &&
            std::memcmp(p.name.data(), name.data(), name.size()) == 0) {
          return p.node;
        }
        if (name.empty() && p.name.empty()) return p.node;
      }
      return nullptr;
    }
    std::size_t mask = slots.size() - 1;
    for (std::size_t i = std::hash<std::string_view>{}(name) & mask;; i = (i + 1) & mask) {
      std::uint32_t at = slots[i];
      if (at == kNoSlot) return nullptr;
      if (properties[at].name == name) return properties[at].node;
    }
  }
  static constexpr std::uint32_t kNoSlot = 0xffffffff;
  std::vector<std::uint32_t> slots;  // open addressing over `properties`, when there are many
  void index_properties() {
    if (properties.size() <= 8) return;
    std::size_t cap = 16;
    while (cap < 2 * properties.size()) cap <<= 1;
    slots.assign(cap, kNoSlot);
    for (std::uint32_t p = 0; p < properties.size(); ++p) {
      std::size_t i = std::hash<std::string_view>{}(properties[p].name) & (cap - 1);
      while (slots[i] != kNoSlot) i = (i + 1) & (cap - 1);
      slots[i] = p;
    }
  }
  bool only_type(std::string_view t) const { return keyword_count == 1 && type == t; }
};

struct SchemaTree {
  std::deque<SchemaNode> nodes;
  const SchemaNode* root = nullptr;
};

}  // namespace detail

namespace {

using detail::Additional;
using detail::Format;
using detail::SchemaNode;
using detail::SchemaTree;

bool is_meta_field(std::string_view k) {
  return k == "apiVersion" || k == "kind" || k == "metadata";
}

// ---- string formats kube checks ----

bool all_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

bool is_base64(std::string_view s) {
  // govalidator's pattern: whole quartets, padding only at the end; the empty string fails.
  if (s.size() < 4 || s.size() % 4 != 0) return false;
  std::size_t pad = 0;
  if (s.back() == '=') pad = s[s.size() - 2] == '=' ? 2 : 1;
  for (std::size_t i = 0; i < s.size() - pad; ++i) {
    char c = s[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/')) return false;
  }
  return true;
}

bool two_digits(std::string_view s, std::size_t at, int& out) {
  if (!std::isdigit(static_cast<unsigned char>(s[at])) ||
      !std::isdigit(static_cast<unsigned char>(s[at + 1]))) {
    return false;
  }
  out = (s[at] - '0') * 10 + (s[at + 1] - '0');
  return true;
}

// time.Parse("2006-01-02", s) == nil.
bool is_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  int y = 0;
  for (int i = 0; i < 4; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    y = y * 10 + (s[i] - '0');
  }
  int m = 0, d = 0;
  if (!two_digits(s, 5, m) || !two_digits(s, 8, d)) return false;
  if (m < 1 || m > 12 || d < 1) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int days = kDays[m - 1];
  if (m == 2 && (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) days = 29;
  return d <= days;
}

// strfmt.IsDateTime: a date, 't', then hh:mm:ss, an optional fraction, and 'z' or an offset,
// compared case-insensitively.
bool is_date_time(std::string_view s) {
  if (s.size() < 4) return false;
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto t = lower.find('t');
  if (t == std::string::npos) return false;
  if (!is_date(std::string_view(lower).substr(0, t))) return false;
  std::string_view rest = std::string_view(lower).substr(t + 1);
  rest = rest.substr(0, rest.find('t'));
  static const re2::RE2 kTime(
      R"(^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$)");
  std::string h, m, sec;
  if (!re2::RE2::PartialMatch(re2::StringPiece(rest.data(), rest.size()), kTime, &h, &m, &sec)) {
    return false;
  }
  return h <= "23" && m <= "59" && sec <= "59";
}

bool is_ipv4_text(const std::string& s) {
  in_addr a;
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}
bool is_ipv6_text(const std::string& s) {
  in6_addr a;
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}
// net.ParseIP(s) != nil.
bool is_ip(const std::string& s) { return is_ipv4_text(s) || is_ipv6_text(s); }

bool is_cidr(std::string_view s) {
  auto slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  std::string ip(s.substr(0, slash));
  std::string_view bits = s.substr(slash + 1);
  int max = is_ipv4_text(ip) ? 32 : is_ipv6_text(ip) ? 128 : -1;
  if (max < 0 || bits.empty() || bits.size() > 3) return false;
  int n = 0;
  for (char c : bits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    n = n * 10 + (c - '0');
  }
  return n <= max;
}

// net.ParseMAC: 6, 8 or 20 octets as hex pairs separated by ':' or '-', or as dotted groups of
// four hex digits.
bool is_mac(std::string_view s) {
  if (s.size() < 14) return false;
  auto octets_ok = [](std::size_t n) { return n == 6 || n == 8 || n == 20; };
  if (s[2] == ':' || s[2] == '-') {
    if ((s.size() + 1) % 3 != 0) return false;
    std::size_t n = (s.size() + 1) / 3;
    if (!octets_ok(n)) return false;
    for (std::size_t i = 0; i < n; ++i) {
      if (!all_hex(s.substr(3 * i, 2))) return false;
      if (i + 1 < n && s[3 * i + 2] != s[2]) return false;
    }
    return true;
  }
  if (s[4] == '.') {
    if ((s.size() + 1) % 5 != 0) return false;
    std::size_t groups = (s.size() + 1) / 5;
    if (!octets_ok(groups * 2)) return false;
    for (std::size_t i = 0; i < groups; ++i) {
      if (!all_hex(s.substr(5 * i, 4))) return false;
      if (i + 1 < groups && s[5 * i + 4] != '.') return false;
    }
    return true;
  }
  return false;
}

// strfmt.IsHostname: go-openapi's HostnamePattern, then at most 255 bytes and labels of at
// most 63. The pattern's letters and symbols (\p{L}, \p{S}) are taken as any non-ASCII
// character: RE2 would need a DFA of hundreds of megabytes for the pattern as written.
bool is_hostname(std::string_view s) {
  if (s.empty() || s.size() > 255) return false;
  // Splits a label into characters (UTF-8 sequences); a character is "word" unless it is ASCII
  // other than a letter or digit.
  struct Char {
    bool word;
    bool hyphen;
  };
  auto chars = [](std::string_view label) {
    std::vector<Char> out;
    for (std::size_t i = 0; i < label.size();) {
      auto c = static_cast<unsigned char>(label[i]);
      if (c < 0x80) {
        out.push_back({std::isalnum(c) != 0, c == '-'});
        ++i;
      } else {
        out.push_back({true, false});
        ++i;
        while (i < label.size() && (static_cast<unsigned char>(label[i]) & 0xC0) == 0x80) ++i;
      }
    }
    return out;
  };
  std::vector<std::string_view> labels;
  for (std::size_t start = 0;;) {
    auto dot = s.find('.', start);
    labels.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  for (auto label : labels) {
    if (label.size() > 63) return false;
  }
  // The last label: a word character, then 1..62 of (optional '-', word character); a lone
  // label: a word character, an optional '-', then up to 62 word characters.
  auto last = chars(labels.back());
  if (last.empty() || !last[0].word) return false;
  if (labels.size() == 1) {
    std::size_t i = 1;
    if (i < last.size() && last[i].hyphen) ++i;
    if (last.size() - i > 62) return false;
    for (; i < last.size(); ++i) {
      if (!last[i].word) return false;
    }
    return true;
  }
  std::size_t groups = 0;
  for (std::size_t i = 1; i < last.size(); ++groups) {
    if (last[i].hyphen) ++i;
    if (i >= last.size() || !last[i].word) return false;
    ++i;
  }
  if (groups < 1 || groups > 62) return false;
  // Every other label: word characters at both ends, word characters or '-' between, 1..63.
  for (std::size_t l = 0; l + 1 < labels.size(); ++l) {
    auto c = chars(labels[l]);
    if (c.empty() || c.size() > 63 || !c.front().word || !c.back().word) return false;
    for (const auto& ch : c) {
      if (!ch.word && !ch.hyphen) return false;
    }
  }
  return true;
}

bool format_ok(Format f, std::string_view s) {
  switch (f) {
    case Format::none: return true;
    case Format::byte: return is_base64(s);
    case Format::date: return is_date(s);
    case Format::date_time: return is_date_time(s);
    case Format::uuid:
    case Format::uuid3:
    case Format::uuid4:
    case Format::uuid5: {
      static const re2::RE2 kUuid(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$)");
      static const re2::RE2 kUuid3(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$)");
      static const re2::RE2 kUuid4(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$)");
      static const re2::RE2 kUuid5(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$)");
      const re2::RE2& re = f == Format::uuid    ? kUuid
                           : f == Format::uuid3 ? kUuid3
                           : f == Format::uuid4 ? kUuid4
                                                : kUuid5;
      return re2::RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), re);
    }
    case Format::ipv4: {
      std::string t(s);
      return is_ip(t) && t.find('.') != std::string::npos;
    }
    case Format::ipv6: {
      std::string t(s);
      return is_ip(t) && t.find(':') != std::string::npos;
    }
    case Format::cidr: return is_cidr(s);
    case Format::mac: return is_mac(s);
    case Format::hostname: return is_hostname(s);
    case Format::hexcolor: {
      std::string_view h = s;
      if (!h.empty() && h[0] == '#') h.remove_prefix(1);
      return (h.size() == 3 || h.size() == 6) && all_hex(h);
    }
    case Format::bsonobjectid: return s.size() == 24 && all_hex(s);
  }
  return true;
}

// The formats kube keeps for strings (apiextensions' supported formats, names without '-'),
// and the ones this engine checks.
Format string_format(std::string_view normalized, bool& supported) {
  struct Entry {
    std::string_view name;
    Format check;
  };
  static constexpr Entry kFormats[] = {
      {"bsonobjectid", Format::bsonobjectid}, {"uri", Format::none},
      {"email", Format::none},                {"hostname", Format::hostname},
      {"ipv4", Format::ipv4},                 {"ipv6", Format::ipv6},
      {"cidr", Format::cidr},                 {"mac", Format::mac},
      {"uuid", Format::uuid},                 {"uuid3", Format::uuid3},
      {"uuid4", Format::uuid4},               {"uuid5", Format::uuid5},
      {"isbn", Format::none},                 {"isbn10", Format::none},
      {"isbn13", Format::none},               {"creditcard", Format::none},
      {"ssn", Format::none},                  {"hexcolor", Format::hexcolor},
      {"rgbcolor", Format::none},             {"byte", Format::byte},
      {"password", Format::none},             {"date", Format::date},
      {"duration", Format::none},             {"datetime", Format::date_time},
      {"quantity", Format::none},
  };
  for (const auto& e : kFormats) {
    if (e.name == normalized) {
      supported = true;
      return e.check;
    }
  }
  supported = false;
  return Format::none;
}

// Go's regexp/syntax error text for a pattern RE2 refused.
std::string go_regexp_error(const re2::RE2& re, const std::string& pattern) {
  const char* code = "unexpected error";
  switch (re.error_code()) {
    case re2::RE2::ErrorBadEscape: code = "invalid escape sequence"; break;
    case re2::RE2::ErrorBadCharClass: code = "invalid character class"; break;
    case re2::RE2::ErrorBadCharRange: code = "invalid character class range"; break;
    case re2::RE2::ErrorMissingBracket: code = "missing closing ]"; break;
    case re2::RE2::ErrorMissingParen: code = "missing closing )"; break;
    case re2::RE2::ErrorUnexpectedParen: code = "unexpected )"; break;
    case re2::RE2::ErrorTrailingBackslash: code = "trailing backslash at end of expression"; break;
    case re2::RE2::ErrorRepeatArgument: code = "missing argument to repetition operator"; break;
    case re2::RE2::ErrorRepeatSize: code = "invalid repeat count"; break;
    case re2::RE2::ErrorRepeatOp: code = "invalid nested repetition operator"; break;
    case re2::RE2::ErrorBadPerlOp: code = "invalid or unsupported Perl syntax"; break;
    case re2::RE2::ErrorBadUTF8: code = "invalid UTF-8"; break;
    case re2::RE2::ErrorBadNamedCapture: code = "invalid named capture"; break;
    case re2::RE2::ErrorPatternTooLarge: code = "expression too large"; break;
    default: break;
  }
  std::string arg = re.error_arg().empty() ? pattern : re.error_arg();
  return std::string("error parsing regexp: ") + code + ": `" + arg + "`";
}

}  // namespace

// ---- compile: JSON to schema nodes ----

namespace {

std::string short_repr(const json::value& v) {
  std::string s = value_repr(v);
  if (s.size() > 100) s = s.substr(0, 97) + "...";
  return s;
}

// Reads a schema's JSON into nodes. A keyword of the wrong JSON type is a cause in `shape`:
// kube-apiserver fails to decode such a CRD (400); here it is one cause per keyword.
class Parser {
 public:
  Parser(SchemaTree& tree, PatternCache& patterns) : tree_(tree), patterns_(patterns) {}

  std::vector<Cause> shape;
  bool unsupported = false;  // a keyword kube's NewStructural refuses

  const SchemaNode* parse(const json::value& j, const std::string& path, std::size_t depth) {
    if (depth > kMaxSchemaDepth) {
      shape.push_back(invalid(path, "\"\"",
                              "must not nest more than " + std::to_string(kMaxSchemaDepth) +
                                  " schemas"));
      return nullptr;
    }
    const auto* obj = j.if_object();
    if (!obj) {
      shape.push_back(invalid(path, short_repr(j), "must be an object"));
      return nullptr;
    }
    SchemaNode& n = tree_.nodes.emplace_back();
    for (const auto& kv : *obj) read_keyword(n, kv.key(), kv.value(), path, depth);
    finish(n, path);
    return &n;
  }

 private:
  void wrong(const std::string& path, std::string_view k, const json::value& v,
             std::string_view want) {
    shape.push_back(invalid(child(path, k), short_repr(v), std::string("must be ") += want));
  }
  bool read_string(std::string& out, const std::string& path, std::string_view k,
                   const json::value& v) {
    if (const auto* s = v.if_string()) {
      out = std::string(*s);
      return true;
    }
    wrong(path, k, v, "a string");
    return false;
  }
  bool read_bool(bool& out, const std::string& path, std::string_view k, const json::value& v) {
    if (v.is_bool()) {
      out = v.get_bool();
      return true;
    }
    wrong(path, k, v, "a boolean");
    return false;
  }
  void read_number(std::optional<double>& out, const std::string& path, std::string_view k,
                   const json::value& v) {
    if (v.is_number()) {
      out = as_double(v);
    } else {
      wrong(path, k, v, "a number");
    }
  }
  void read_int(std::optional<std::int64_t>& out, const std::string& path, std::string_view k,
                const json::value& v) {
    if (v.is_int64()) {
      out = v.get_int64();
    } else {
      wrong(path, k, v, "an integer");
    }
  }
  bool read_strings(std::vector<std::string>& out, const std::string& path, std::string_view k,
                    const json::value& v) {
    const auto* a = v.if_array();
    if (!a) {
      wrong(path, k, v, "an array of strings");
      return false;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* s = (*a)[i].if_string();
      if (!s) {
        shape.push_back(invalid(index(child(path, k), i), short_repr((*a)[i]), "must be a string"));
        continue;
      }
      out.emplace_back(*s);
    }
    return true;
  }
  void read_schemas(std::vector<const SchemaNode*>& out, const std::string& path,
                    std::string_view k, const json::value& v, std::size_t depth) {
    const auto* a = v.if_array();
    if (!a) {
      wrong(path, k, v, "an array of schemas");
      return;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      if (const auto* s = parse((*a)[i], index(child(path, k), i), depth + 1)) out.push_back(s);
    }
  }

  void read_keyword(SchemaNode& n, std::string_view k, const json::value& v,
                    const std::string& path, std::size_t depth) {
    // Keywords a root `metadata` schema may carry: type, default, properties, example,
    // externalDocs (kube drops the last two from structural schemas).
    bool meta_ok = k == "type" || k == "default" || k == "properties" || k == "example" ||
                   k == "externalDocs";
    bool known = true;
    if (k == "type") {
      read_string(n.type, path, k, v);
    } else if (k == "format") {
      read_string(n.written_format, path, k, v);
    } else if (k == "title") {
      std::string ignored;
      n.has_title = read_string(ignored, path, k, v);
    } else if (k == "description") {
      std::string ignored;
      n.has_description = read_string(ignored, path, k, v);
    } else if (k == "nullable") {
      read_bool(n.nullable, path, k, v);
    } else if (k == "default") {
      if (!v.is_null()) n.default_value.emplace(v);  // `default: null` is no default
    } else if (k == "example") {
      // ignored, as in kube's structural schemas
    } else if (k == "externalDocs") {
      if (v.is_object()) {
        n.has_external_docs = true;
      } else {
        wrong(path, k, v, "an object");
      }
    } else if (k == "properties") {
      const auto* o = v.if_object();
      if (!o) {
        wrong(path, k, v, "an object");
      } else {
        for (const auto& p : *o) {
          if (const auto* s = parse(p.value(), key(child(path, k), p.key()), depth + 1)) {
            n.properties.push_back({std::string(p.key()), s});
          }
        }
      }
    } else if (k == "additionalProperties") {
      if (v.is_bool()) {
        n.additional = v.get_bool() ? Additional::allow : Additional::deny;
      } else if (v.is_object()) {
        n.additional_schema = parse(v, child(path, k), depth + 1);
        if (n.additional_schema) n.additional = Additional::schema;
      } else {
        wrong(path, k, v, "a boolean or an object");
      }
    } else if (k == "items") {
      if (v.is_array()) {
        n.items_is_array = true;
        unsupported = true;
      } else {
        n.items = parse(v, child(path, k), depth + 1);
      }
    } else if (k == "required") {
      read_strings(n.required, path, k, v);
    } else if (k == "enum") {
      if (const auto* a = v.if_array()) {
        n.has_enum = !a->empty();
        for (const auto& e : *a) n.enum_values.push_back(e);
      } else {
        wrong(path, k, v, "an array");
      }
    } else if (k == "minimum") {
      read_number(n.minimum, path, k, v);
    } else if (k == "maximum") {
      read_number(n.maximum, path, k, v);
    } else if (k == "multipleOf") {
      read_number(n.multiple_of, path, k, v);
    } else if (k == "exclusiveMinimum") {
      read_bool(n.exclusive_minimum, path, k, v);
    } else if (k == "exclusiveMaximum") {
      read_bool(n.exclusive_maximum, path, k, v);
    } else if (k == "minLength") {
      read_int(n.min_length, path, k, v);
    } else if (k == "maxLength") {
      read_int(n.max_length, path, k, v);
    } else if (k == "minItems") {
      read_int(n.min_items, path, k, v);
    } else if (k == "maxItems") {
      read_int(n.max_items, path, k, v);
    } else if (k == "minProperties") {
      read_int(n.min_properties, path, k, v);
    } else if (k == "maxProperties") {
      read_int(n.max_properties, path, k, v);
    } else if (k == "uniqueItems") {
      read_bool(n.unique_items, path, k, v);
    } else if (k == "pattern") {
      if (read_string(n.pattern, path, k, v) && !n.pattern.empty()) {
        const PatternCache::Compiled& compiled = patterns_.compile(n.pattern);
        n.regex = compiled.regex;
        n.pattern_error = compiled.error;
        if (!compiled.refused.empty()) shape.push_back(forbidden(child(path, k), compiled.refused));
      }
    } else if (k == "allOf") {
      read_schemas(n.all_of, path, k, v, depth);
    } else if (k == "anyOf") {
      read_schemas(n.any_of, path, k, v, depth);
    } else if (k == "oneOf") {
      read_schemas(n.one_of, path, k, v, depth);
    } else if (k == "not") {
      n.not_ = parse(v, child(path, k), depth + 1);
    } else if (k == "x-kubernetes-preserve-unknown-fields") {
      bool b = false;
      if (read_bool(b, path, k, v)) {
        n.preserve_unknown = b;
        n.preserve_false = !b;
        if (!b) unsupported = true;
      }
    } else if (k == "x-kubernetes-embedded-resource") {
      read_bool(n.embedded, path, k, v);
    } else if (k == "x-kubernetes-int-or-string") {
      read_bool(n.int_or_string, path, k, v);
    } else if (k == "x-kubernetes-list-type") {
      std::string s;
      if (read_string(s, path, k, v)) n.list_type = std::move(s);
    } else if (k == "x-kubernetes-map-type") {
      std::string s;
      if (read_string(s, path, k, v)) n.map_type = std::move(s);
    } else if (k == "x-kubernetes-list-map-keys") {
      read_strings(n.list_map_keys, path, k, v);
    } else if (k == "x-kubernetes-validations") {
      // CEL rules: accepted, not enforced.
      n.has_x_validations = v.is_array() && !v.get_array().empty();
    } else if (k == "id") {
      n.has_id = true;
      unsupported = true;
    } else if (k == "$schema") {
      n.has_schema = true;
      unsupported = true;
    } else if (k == "$ref") {
      n.has_ref = true;
      unsupported = true;
    } else if (k == "patternProperties") {
      n.has_pattern_properties = v.is_object() && !v.get_object().empty();
      unsupported |= n.has_pattern_properties;
    } else if (k == "dependencies") {
      n.has_dependencies = !v.is_null();
      unsupported |= n.has_dependencies;
    } else if (k == "additionalItems") {
      n.has_additional_items = !v.is_null();
      unsupported |= n.has_additional_items;
    } else if (k == "definitions") {
      n.has_definitions = v.is_object() && !v.get_object().empty();
      unsupported |= n.has_definitions;
    } else {
      known = false;  // dropped, as kube's decoding drops unknown fields
    }
    if (known) {
      ++n.keyword_count;
      if (!meta_ok) ++n.meta_forbidden_keywords;
    }
  }

  static void finish(SchemaNode& n, const std::string& /*path*/) {
    static constexpr std::pair<std::string_view, std::uint8_t> kTypes[] = {
        {"object", detail::kObjectBit},   {"array", detail::kArrayBit},
        {"string", detail::kStringBit},   {"integer", detail::kIntegerBit},
        {"number", detail::kNumberBit},   {"boolean", detail::kBooleanBit},
    };
    if (n.int_or_string) {
      n.type_bits = detail::kIntegerBit | detail::kStringBit;
      n.type_name = "integer,string";
    } else if (!n.type.empty()) {
      for (const auto& [name, bit] : kTypes) {
        if (n.type == name) n.type_bits = bit;
      }
      n.type_name = n.type;
    }
    // kube's StripUnsupportedFormatsPostProcess.
    if (!n.written_format.empty()) {
      std::string_view schema_type = n.int_or_string ? std::string_view{} : n.type;
      if (schema_type.empty() || schema_type == "string") {
        std::string normalized;
        for (char c : n.written_format) {
          if (c != '-') normalized += c;
        }
        bool supported = false;
        Format check = string_format(normalized, supported);
        if (supported) {
          n.format = n.written_format;
          n.format_check = check;
        }
      } else if (schema_type == "integer") {
        if (n.written_format == "int32" || n.written_format == "int64") n.format = n.written_format;
      } else if (schema_type == "number") {
        if (n.written_format == "float" || n.written_format == "double") {
          n.format = n.written_format;
        }
      }
    }
    n.index_properties();
    for (std::uint32_t i = 0; i < n.properties.size(); ++i) {
      if (n.properties[i].node->default_value) n.defaulted.push_back(i);
    }
    for (const auto& e : n.enum_values) n.enum_texts.push_back(enum_value_text(e));
  }

  SchemaTree& tree_;
  PatternCache& patterns_;
};

}  // namespace

// ---- compile: kube's rules for a CRD version's schema ----

namespace {

// Both halves of kube's CRD schema validation: ValidateCustomResourceDefinitionOpenAPISchema
// (`schema`, in traversal order) and ValidateStructural (`structural`, sorted as kube sorts it).
class Checker {
 public:
  explicit Checker(const SchemaCompileOptions& options) : options_(options) {}

  std::vector<Cause> structural;
  std::vector<Cause> schema;

  struct Ssv {  // kube's specStandardValidatorV3 context
    bool allow_defaults = true;
    std::string defaults_reason;
    bool inside_meta = false;
  };

  void crd(const SchemaNode* n, const std::string& path, const Ssv& ssv, bool is_root) {
    if (!n) return;
    ssv_validate(*n, path, ssv);
    if (n->unique_items && !options_.allow_unique_items) {
      schema.push_back(forbidden(child(path, "uniqueItems"),
                                 "uniqueItems cannot be set to true since the runtime complexity "
                                 "becomes quadratic"));
    }
    if (n->additional != Additional::absent) {
      if (!n->properties.empty() &&
          (n->additional == Additional::deny || n->additional == Additional::schema)) {
        schema.push_back(forbidden(child(path, "additionalProperties"),
                                   "additionalProperties and properties are mutual exclusive"));
      }
      Ssv sub = ssv;
      if (ssv.inside_meta) {
        forbid_defaults(sub, "inside additionalProperties applying to object metadata");
      }
      crd(n->additional_schema, child(path, "additionalProperties"), sub, false);
    }
    for (const auto& p : n->properties) {
      Ssv sub = ssv;
      if ((is_root || n->embedded) && is_meta_field(p.name)) {
        sub.inside_meta = true;
        if (is_root) forbid_defaults(sub, "in top-level " + p.name);
      }
      crd(p.node, key(child(path, "properties"), p.name), sub, false);
    }
    crd(n->not_, child(path, "not"), ssv, false);
    for (std::size_t i = 0; i < n->all_of.size(); ++i) {
      crd(n->all_of[i], index(child(path, "allOf"), i), ssv, false);
    }
    for (std::size_t i = 0; i < n->one_of.size(); ++i) {
      crd(n->one_of[i], index(child(path, "oneOf"), i), ssv, false);
    }
    for (std::size_t i = 0; i < n->any_of.size(); ++i) {
      crd(n->any_of[i], index(child(path, "anyOf"), i), ssv, false);
    }
    crd(n->items, child(path, "items"), ssv, false);
    if (n->preserve_false) {
      schema.push_back(invalid(child(path, "x-kubernetes-preserve-unknown-fields"), "false",
                               "must be true or undefined"));
    }
    list_and_map_types(*n, path);
  }

  void ssv_validate(const SchemaNode& n, const std::string& path, const Ssv& ssv) {
    static const std::vector<std::string> kTypes = {"array",  "boolean", "integer",
                                                    "number", "object",  "string"};
    if (!n.type.empty() && std::find(kTypes.begin(), kTypes.end(), n.type) == kTypes.end()) {
      schema.push_back(not_supported(child(path, "type"), go_quote(n.type), kTypes));
    }
    if (n.default_value && !ssv.allow_defaults) {
      std::string detail = "must not be set";
      if (!ssv.defaults_reason.empty()) detail += " " + ssv.defaults_reason;
      schema.push_back(forbidden(child(path, "default"), detail));
    }
    if (n.has_id) schema.push_back(forbidden(child(path, "id"), "id is not supported"));
    if (n.has_additional_items) {
      schema.push_back(
          forbidden(child(path, "additionalItems"), "additionalItems is not supported"));
    }
    if (n.has_pattern_properties) {
      schema.push_back(
          forbidden(child(path, "patternProperties"), "patternProperties is not supported"));
    }
    if (n.has_definitions) {
      schema.push_back(forbidden(child(path, "definitions"), "definitions is not supported"));
    }
    if (n.has_dependencies) {
      schema.push_back(forbidden(child(path, "dependencies"), "dependencies is not supported"));
    }
    if (n.has_ref) schema.push_back(forbidden(child(path, "$ref"), "$ref is not supported"));
    if (n.type == "null") {
      schema.push_back(forbidden(child(path, "type"),
                                 "type cannot be set to null, use nullable as an alternative"));
    }
    if (n.items_is_array) {
      schema.push_back(
          forbidden(child(path, "items"), "items must be a schema object and not an array"));
    }
    if (ssv.inside_meta && n.embedded) {
      schema.push_back(forbidden(child(path, "x-kubernetes-embedded-resource"),
                                 "must not be used inside of resource meta"));
    }
  }

  void list_and_map_types(const SchemaNode& n, const std::string& path) {
    if (n.map_type && n.type != "object") {
      if (n.type.empty()) {
        schema.push_back(required(child(path, "type"),
                                  "must be object if x-kubernetes-map-type is specified"));
      } else {
        schema.push_back(invalid(child(path, "type"), go_quote(n.type),
                                 "must be object if x-kubernetes-map-type is specified"));
      }
    }
    if (n.map_type && *n.map_type != "atomic" && *n.map_type != "granular") {
      schema.push_back(not_supported(child(path, "x-kubernetes-map-type"), go_quote(*n.map_type),
                                     {"atomic", "granular"}));
    }
    if (n.list_type && n.type != "array") {
      if (n.type.empty()) {
        schema.push_back(required(child(path, "type"),
                                  "must be array if x-kubernetes-list-type is specified"));
      } else {
        schema.push_back(invalid(child(path, "type"), go_quote(n.type),
                                 "must be array if x-kubernetes-list-type is specified"));
      }
    } else if (n.list_type && *n.list_type == "set" && n.items) {
      const SchemaNode& is = *n.items;
      if (is.type == "array" && is.list_type && *is.list_type != "atomic") {
        schema.push_back(invalid(child(child(path, "items"), "x-kubernetes-list-type"),
                                 go_quote(*is.list_type),
                                 "must be atomic as item of a list with "
                                 "x-kubernetes-list-type=set"));
      } else if (is.type == "object" && (!is.map_type || *is.map_type != "atomic")) {
        // kube prints the items' list type here, not their map type.
        schema.push_back(invalid(child(child(path, "items"), "x-kubernetes-map-type"),
                                 is.list_type ? go_quote(*is.list_type) : "null",
                                 "must be atomic as item of a list with "
                                 "x-kubernetes-list-type=set"));
      }
    }
    if (n.list_type && *n.list_type != "atomic" && *n.list_type != "set" &&
        *n.list_type != "map") {
      schema.push_back(not_supported(child(path, "x-kubernetes-list-type"),
                                     go_quote(*n.list_type), {"atomic", "set", "map"}));
    }
    if (!n.list_map_keys.empty()) {
      if (!n.list_type) {
        schema.push_back(required(child(path, "x-kubernetes-list-type"),
                                  "must be map if x-kubernetes-list-map-keys is non-empty"));
      } else if (*n.list_type != "map") {
        schema.push_back(invalid(child(path, "x-kubernetes-list-type"), go_quote(*n.list_type),
                                 "must be map if x-kubernetes-list-map-keys is non-empty"));
      }
    }
    if (n.list_type && *n.list_type == "map") {
      if (n.list_map_keys.empty()) {
        schema.push_back(required(child(path, "x-kubernetes-list-map-keys"),
                                  "must not be empty if x-kubernetes-list-type is map"));
      }
      if (!n.items && !n.items_is_array) {
        schema.push_back(required(child(path, "items"),
                                  "must have a schema if x-kubernetes-list-type is map"));
      }
      if (n.items && n.items->type != "object") {
        schema.push_back(invalid(child(child(path, "items"), "type"), go_quote(n.items->type),
                                 "must be object if parent array's x-kubernetes-list-type is map"));
      }
      if (n.items && n.items->type == "object") {
        std::vector<std::string_view> seen;
        for (const auto& k : n.list_map_keys) {
          if (const SchemaNode* p = n.items->property(k)) {
            if (p->type == "array" || p->type == "object") {
              schema.push_back(invalid(
                  child(key(child(child(path, "items"), "properties"), k), "type"),
                  go_quote(n.items->type),
                  "must be a scalar type if parent array's x-kubernetes-list-type is map"));
            }
          } else {
            schema.push_back(invalid(child(path, "x-kubernetes-list-map-keys"),
                                     quote_strings(n.list_map_keys),
                                     "entries must all be names of item properties"));
          }
          if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
            schema.push_back(invalid(child(path, "x-kubernetes-list-map-keys"),
                                     quote_strings(n.list_map_keys),
                                     "must not contain duplicate entries"));
          }
          seen.push_back(k);
        }
      }
    }
    // validateMapListKeysMapSet
    if (n.items && n.list_type && (*n.list_type == "set" || *n.list_type == "map")) {
      if (n.items->nullable) {
        schema.push_back(forbidden(child(child(path, "items"), "nullable"),
                                   "cannot be nullable when x-kubernetes-list-type is " +
                                       *n.list_type));
      }
      if (*n.list_type == "map") {
        for (const auto& k : n.list_map_keys) {
          const SchemaNode* p = n.items->property(k);
          if (!p) continue;
          bool is_required = std::find(n.items->required.begin(), n.items->required.end(), k) !=
                             n.items->required.end();
          std::string pp = key(child(child(path, "items"), "properties"), k);
          if (!is_required && !p->default_value) {
            schema.push_back(required(child(pp, "default"),
                                      "this property is in x-kubernetes-list-map-keys, so it must "
                                      "have a default or be a required property"));
          }
          if (p->nullable) {
            schema.push_back(forbidden(child(pp, "nullable"),
                                       "this property is in x-kubernetes-list-map-keys, so it "
                                       "cannot be nullable"));
          }
        }
      }
    }
  }

  // ---- ValidateStructural ----

  enum class Level { root, item, field };

  void invariants(const SchemaNode* n, Level lvl, const std::string& path) {
    if (!n) return;
    const SchemaNode& s = *n;
    if (s.type == "array" && !s.items) {
      structural.push_back(required(child(path, "items"), "must be specified"));
    }
    invariants(s.items, Level::item, child(path, "items"));
    for (const auto& p : s.properties) {
      invariants(p.node, Level::field, key(child(path, "properties"), p.name));
    }
    if (s.additional != Additional::absent) {
      if (lvl == Level::root) {
        structural.push_back(
            forbidden(child(path, "additionalProperties"), "must not be used at the root"));
      }
      invariants(s.additional_schema, Level::field, child(path, "additionalProperties"));
    }
    if (s.int_or_string && s.preserve_unknown) {
      structural.push_back(invalid(child(path, "x-kubernetes-preserve-unknown-fields"), "true",
                                   "must be false if x-kubernetes-int-or-string is true"));
    }
    if (s.int_or_string && s.embedded) {
      structural.push_back(invalid(child(path, "x-kubernetes-embedded-resource"), "true",
                                   "must be false if x-kubernetes-int-or-string is true"));
    }
    value_validation(s, int_or_string_any_of(s), int_or_string_all_of(s), lvl, path);

    bool check_metadata = lvl == Level::root || s.embedded;
    if (s.embedded && s.type != "object") {
      if (s.type.empty()) {
        structural.push_back(required(child(path, "type"),
                                      "must be object if x-kubernetes-embedded-resource is true"));
      } else {
        structural.push_back(invalid(child(path, "type"), go_quote(s.type),
                                     "must be object if x-kubernetes-embedded-resource is true"));
      }
    } else if (s.type.empty() && !s.int_or_string && !s.preserve_unknown) {
      const char* detail = lvl == Level::root   ? "must not be empty at the root"
                           : lvl == Level::item ? "must not be empty for specified array items"
                                                : "must not be empty for specified object fields";
      structural.push_back(required(child(path, "type"), detail));
    }
    if (s.embedded && s.additional != Additional::absent) {
      structural.push_back(forbidden(child(path, "additionalProperties"),
                                     "must not be used if x-kubernetes-embedded-resource is set"));
    }
    if (lvl == Level::root && !s.type.empty() && s.type != "object") {
      structural.push_back(
          invalid(child(path, "type"), go_quote(s.type), "must be object at the root"));
    }
    if (check_metadata) {
      for (const char* f : {"kind", "apiVersion"}) {
        const SchemaNode* p = s.property(f);
        if (p && p->type != "string") {
          structural.push_back(invalid(child(key(child(path, "properties"), f), "type"),
                                       go_quote(p->type), "must be string"));
        }
      }
    }
    if (const SchemaNode* meta = s.property("metadata")) {
      metadata_invariants(*meta, check_metadata, lvl, key(child(path, "properties"), "metadata"));
    }
    if (s.embedded && !s.preserve_unknown && s.properties.empty()) {
      structural.push_back(required(child(path, "properties"),
                                    "must not be empty if x-kubernetes-embedded-resource is true "
                                    "without x-kubernetes-preserve-unknown-fields"));
    }
  }

  void metadata_invariants(const SchemaNode& s, bool check_metadata, Level lvl,
                           const std::string& path) {
    if (check_metadata && s.type != "object") {
      structural.push_back(invalid(child(path, "type"), go_quote(s.type), "must be object"));
    }
    if (lvl != Level::root) return;
    // Only name and generateName may be restricted; type and default are checked elsewhere.
    bool other_properties = false;
    for (const auto& p : s.properties) {
      if (p.name != "name" && p.name != "generateName") other_properties = true;
    }
    if (other_properties || s.meta_forbidden_keywords > 0) {
      structural.push_back(forbidden(path,
                                     "must not specify anything other than name and "
                                     "generateName, but metadata is implicitly specified"));
    }
  }

  static bool int_or_string_pair(const std::vector<const SchemaNode*>& any_of) {
    return any_of.size() == 2 && any_of[0]->only_type("integer") && any_of[1]->only_type("string");
  }
  static bool int_or_string_any_of(const SchemaNode& s) { return int_or_string_pair(s.any_of); }
  static bool int_or_string_all_of(const SchemaNode& s) {
    return !s.all_of.empty() && int_or_string_pair(s.all_of[0]->any_of);
  }

  void value_validation(const SchemaNode& v, bool skip_any_of, bool skip_first_all_of_any_of,
                        Level lvl, const std::string& path) {
    if (!skip_any_of) {
      for (std::size_t i = 0; i < v.any_of.size(); ++i) {
        nested(v.any_of[i], false, lvl, index(child(path, "anyOf"), i));
      }
    }
    for (std::size_t i = 0; i < v.all_of.size(); ++i) {
      nested(v.all_of[i], skip_first_all_of_any_of && i == 0, lvl, index(child(path, "allOf"), i));
    }
    for (std::size_t i = 0; i < v.one_of.size(); ++i) {
      nested(v.one_of[i], false, lvl, index(child(path, "oneOf"), i));
    }
    nested(v.not_, false, lvl, child(path, "not"));
    if (!v.pattern_error.empty()) {
      structural.push_back(invalid(child(path, "pattern"), go_quote(v.pattern),
                                   "must be a valid regular expression, but isn't: " +
                                       v.pattern_error));
    }
  }

  void nested(const SchemaNode* n, bool skip_any_of, Level lvl, const std::string& path) {
    if (!n) return;
    const SchemaNode& v = *n;
    value_validation(v, skip_any_of, false, lvl, path);
    nested(v.items, false, lvl, child(path, "items"));
    for (const auto& p : v.properties) {
      nested(p.node, false, Level::field, key(child(path, "properties"), p.name));
    }
    auto forbid = [&](bool set, const char* what, const char* detail) {
      if (set) structural.push_back(forbidden(child(path, what), detail));
    };
    forbid(!v.type.empty(), "type", "must be empty to be structural");
    forbid(v.additional != Additional::absent, "additionalProperties",
           "must be undefined to be structural");
    forbid(v.default_value.has_value(), "default", "must be undefined to be structural");
    forbid(v.has_title, "title", "must be empty to be structural");
    forbid(v.has_description, "description", "must be empty to be structural");
    forbid(v.nullable, "nullable", "must be false to be structural");
    forbid(v.has_external_docs, "externalDocs", "must be undefined to be structural");
    forbid(v.preserve_unknown, "x-kubernetes-preserve-unknown-fields",
           "must be false to be structural");
    forbid(v.embedded, "x-kubernetes-embedded-resource", "must be false to be structural");
    forbid(v.int_or_string, "x-kubernetes-int-or-string", "must be false to be structural");
    forbid(!v.list_map_keys.empty(), "x-kubernetes-list-map-keys",
           "must be empty to be structural");
    forbid(v.list_type.has_value(), "x-kubernetes-list-type", "must be undefined to be structural");
    forbid(v.map_type.has_value(), "x-kubernetes-map-type", "must be undefined to be structural");
    forbid(v.has_x_validations, "x-kubernetes-validations", "must be empty to be structural");
    if (v.property("metadata")) {
      structural.push_back(forbidden(key(child(path, "properties"), "metadata"),
                                     "must not be specified in a nested context"));
    }
  }

  // validateStructuralCompleteness: what the root's junctors name must exist in the schema.
  void completeness(const SchemaNode& root, const std::string& path) {
    junctor_completeness(root, &root, path, path);
  }

 private:
  static void forbid_defaults(Ssv& ssv, std::string reason) {
    ssv.allow_defaults = false;
    ssv.defaults_reason = std::move(reason);
  }

  void junctor_completeness(const SchemaNode& v, const SchemaNode* s, const std::string& s_path,
                            const std::string& v_path) {
    nested_completeness(v.not_, s, s_path, child(v_path, "not"));
    for (std::size_t i = 0; i < v.all_of.size(); ++i) {
      nested_completeness(v.all_of[i], s, s_path, index(child(v_path, "allOf"), i));
    }
    for (std::size_t i = 0; i < v.any_of.size(); ++i) {
      nested_completeness(v.any_of[i], s, s_path, index(child(v_path, "anyOf"), i));
    }
    for (std::size_t i = 0; i < v.one_of.size(); ++i) {
      nested_completeness(v.one_of[i], s, s_path, index(child(v_path, "oneOf"), i));
    }
  }

  void nested_completeness(const SchemaNode* v, const SchemaNode* s, const std::string& s_path,
                           const std::string& v_path) {
    if (!v) return;
    if (!s) {
      structural.push_back(required(s_path, "because it is defined in " + v_path));
      return;
    }
    junctor_completeness(*v, s, s_path, v_path);
    nested_completeness(v->items, s->items, child(s_path, "items"), child(v_path, "items"));
    for (const auto& p : v->properties) {
      std::string sp = key(child(s_path, "properties"), p.name);
      std::string vp = key(child(v_path, "properties"), p.name);
      if (const SchemaNode* sf = s->property(p.name)) {
        nested_completeness(p.node, sf, sp, vp);
      } else {
        structural.push_back(required(sp, "because it is defined in " + vp));
      }
    }
  }

  const SchemaCompileOptions& options_;
};

}  // namespace

// ---- validation ----

namespace {

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

std::string aggregate_message(const std::vector<Cause>& causes) {
  // utilerrors.NewAggregate's text: one error as itself, several in brackets.
  std::string out;
  if (causes.size() > 1) out += '[';
  for (std::size_t i = 0; i < causes.size(); ++i) {
    if (i) out += ", ";
    out += causes[i].field + ": " + causes[i].message;
  }
  if (causes.size() > 1) out += ']';
  return out;
}

void drop_repeated_causes(std::vector<Cause>& causes) {
  if (causes.size() < 2) return;
  std::unordered_set<std::string> seen;
  std::vector<Cause> unique;
  unique.reserve(causes.size());
  for (auto& c : causes) {
    if (seen.insert(c.type + '\0' + c.field + '\0' + c.message).second) {
      unique.push_back(std::move(c));
    }
  }
  causes = std::move(unique);
}

}  // namespace

// ---- public API ----

StructuralSchema::StructuralSchema(std::unique_ptr<detail::SchemaTree> tree)
    : tree_(std::move(tree)) {}
StructuralSchema::~StructuralSchema() = default;

const PatternCache::Compiled& PatternCache::compile(const std::string& pattern) {
  auto found = compiled_.find(pattern);
  if (found != compiled_.end()) return found->second;
  Compiled out;
  std::shared_ptr<const re2::RE2> re;
  if (auto offered = offered_.find(pattern); offered != offered_.end()) {
    re = offered->second;
  } else {
    re2::RE2::Options options;
    options.set_log_errors(false);
    options.set_max_mem(max_mem_);
    re = std::make_shared<const re2::RE2>(pattern, options);
  }
  if (re->ok()) {
    const auto size = static_cast<std::size_t>(std::max(re->ProgramSize(), 0));
    if (size > budget_ - used_) {
      out.refused = "compiled patterns of this definition would need " +
                    std::to_string(used_ + size) + " RE2 instructions, over the budget of " +
                    std::to_string(budget_) + " (this pattern needs " + std::to_string(size) +
                    "; Unicode classes such as \\pL under large repetition counts are the usual "
                    "cause: use fewer distinct patterns, smaller counts or maxLength)";
    } else {
      used_ += size;
      out.regex = std::move(re);
    }
  } else if (re->error_code() == re2::RE2::ErrorPatternTooLarge) {
    // RE2's program (Go's regexp keeps a Unicode class as one instruction; RE2 expands it to
    // UTF-8 byte ranges) outgrew max_mem: not an invalid pattern, a too expensive one.
    out.refused = "pattern compiles to a program larger than " + std::to_string(max_mem_ >> 20) +
                  " MiB; Unicode classes such as \\pL under large repetition counts are the usual "
                  "cause: use smaller counts or maxLength";
  } else {
    out.error = go_regexp_error(*re, pattern);
  }
  return compiled_.emplace(pattern, std::move(out)).first->second;
}

void PatternCache::offer(const PatternCache& previous) {
  for (const auto& [pattern, compiled] : previous.compiled_) {
    if (compiled.regex) offered_.emplace(pattern, compiled.regex);
  }
}

ApiResult<std::shared_ptr<const StructuralSchema>> StructuralSchema::compile(
    const json::value& schema, const SchemaCompileOptions& options) {
  auto tree = std::make_unique<SchemaTree>();
  std::shared_ptr<PatternCache> patterns =
      options.patterns ? options.patterns : std::make_shared<PatternCache>();
  Parser parser(*tree, *patterns);
  const SchemaNode* root = parser.parse(schema, options.path, 0);
  using Result = ApiResult<std::shared_ptr<const StructuralSchema>>;
  auto refuse = [&](std::vector<Cause> causes) -> Result {
    std::string message = aggregate_message(causes);
    return ApiError(Errc::invalid, std::move(message), std::move(causes));
  };
  if (!parser.shape.empty() || !root) return refuse(std::move(parser.shape));

  Checker checker(options);
  std::vector<Cause> causes;
  if (root->nullable) {
    causes.push_back(
        forbidden(child(options.path, "nullable"), "nullable cannot be true at the root"));
  }
  if (!parser.unsupported) {
    // NewStructural refuses the unsupported keywords; ValidateStructural runs only without them.
    checker.invariants(root, Checker::Level::root, options.path);
    checker.completeness(*root, options.path);
    std::stable_sort(checker.structural.begin(), checker.structural.end(),
                     [](const Cause& a, const Cause& b) {
                       return a.field + ": " + a.message < b.field + ": " + b.message;
                     });
  }
  checker.crd(root, options.path, Checker::Ssv{}, true);
  for (auto& c : checker.structural) causes.push_back(std::move(c));
  for (auto& c : checker.schema) causes.push_back(std::move(c));
  if (causes.empty() && parser.unsupported) {
    // Only `$schema` gets here: the other unsupported keywords have causes of their own.
    causes.push_back(invalid(options.path, "\"\"", "OpenAPIV3Schema 'schema' is not supported"));
  }
  if (causes.empty()) check_defaults(*root, options.path, true, false, causes);
  if (!causes.empty()) {
    drop_repeated_causes(causes);
    return refuse(std::move(causes));
  }
  tree->root = root;
  return std::shared_ptr<const StructuralSchema>(new StructuralSchema(std::move(tree)));
}

std::vector<Cause> StructuralSchema::validate(const json::value& value,
                                              std::string_view path_prefix) const {
  std::vector<Cause> causes;
  Validator validator(path_prefix, causes);
  validator.check(*tree_->root, value, 0);
  StructureChecker structure(path_prefix);
  structure.walk(*tree_->root, value, 0);
  for (auto& c : structure.embedded) causes.push_back(std::move(c));
  for (auto& c : structure.lists) causes.push_back(std::move(c));
  drop_repeated_causes(causes);
  return causes;
}

std::vector<std::string> StructuralSchema::prune(json::value& value) const {
  std::vector<std::string> paths;
  Pruner pruner(&paths);
  pruner.prune(value, tree_->root, true, 0);
  std::sort(paths.begin(), paths.end());
  return paths;
}

void StructuralSchema::apply_defaults(json::value& value) const {
  apply_defaults_to(value, tree_->root, 0);
}

std::string unknown_field_message(std::string_view path) {
  return "unknown field " + go_quote(path);
}

}  // namespace kwatch::schema
