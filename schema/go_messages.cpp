// How kube words what it refuses: Go's printing of values (%v, %#v, encoding/json floats) and
// field.Error's causes and paths, for the structural-schema passes.
#include "schema/structural_schema_tree.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_set>

namespace kwatch::schema::detail {

using apimachinery::Cause;
using apimachinery::go_quote;

namespace json = boost::json;

namespace {

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

Cause make_cause(const char* type, std::string body, std::string field) {
  return Cause{type, std::move(body), std::move(field)};
}

}  // namespace

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
Cause required(std::string field, std::string_view detail) {
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

}  // namespace kwatch::schema::detail
