// The string extension library as kube enables it (cel-go ext.Strings, version 2): charAt,
// indexOf, lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim, join,
// strings.quote and format. Indexes count code points, as `size` does.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cel/time.hpp"

#include "cel/libraries.hpp"
#include "cel/literal.hpp"

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;
using K = ValueKind;

std::vector<char32_t> decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (i + len > s.size()) len = 1;
    char32_t cp = len == 1 ? b : (b & (0x7F >> len));
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void encode(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode(const std::vector<char32_t>& cps, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) encode(out, cps[i]);
  return out;
}

Value out_of_range(std::int64_t i) {
  return Value::error("index out of range: " + std::to_string(i));
}

// kube's cost of a string function: a tenth (or `tenths_per` tenths) per code point of its
// receiver, rounded up.
void charge_for(EvalBudget& budget, std::string_view s, std::uint64_t tenths_per = 1) {
  budget.call_cost(tenths(code_point_count(s), tenths_per));
}

Value char_at(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  const auto cps = decode(a[0].as_text());
  const std::int64_t i = a[1].as_int();
  if (i < 0 || static_cast<std::uint64_t>(i) > cps.size()) return out_of_range(i);
  if (static_cast<std::size_t>(i) == cps.size()) return Value::string("");
  return Value::string(encode(cps, static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1));
}

bool matches_at(const std::vector<char32_t>& s, const std::vector<char32_t>& sub, std::size_t i) {
  for (std::size_t j = 0; j < sub.size(); ++j) {
    if (s[i + j] != sub[j]) return false;
  }
  return true;
}

Value index_of(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  const std::int64_t offset = a.size() > 2 ? a[2].as_int() : 0;
  if (offset < 0) return out_of_range(offset);
  const auto s = decode(a[0].as_text());
  const auto sub = decode(a[1].as_text());
  const auto n = static_cast<std::int64_t>(s.size());
  if (sub.empty()) return Value::int64(offset > n ? n : offset);
  if (offset >= n) return Value::int64(-1);
  for (std::int64_t i = offset; i + static_cast<std::int64_t>(sub.size()) <= n; ++i) {
    if (matches_at(s, sub, static_cast<std::size_t>(i))) return Value::int64(i);
  }
  return Value::int64(-1);
}

Value last_index_of(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  const auto s = decode(a[0].as_text());
  const auto sub = decode(a[1].as_text());
  const auto n = static_cast<std::int64_t>(s.size());
  std::int64_t offset;
  if (a.size() > 2) {
    offset = a[2].as_int();
    if (offset < 0) return out_of_range(offset);
  } else {
    if (sub.empty()) return Value::int64(n);
    if (a[0].as_text().size() < a[1].as_text().size()) return Value::int64(-1);
    offset = n - 1;
  }
  if (sub.empty()) return Value::int64(offset > n ? n : offset);
  if (offset >= n) return Value::int64(-1);
  const auto m = static_cast<std::int64_t>(sub.size());
  if (offset > n - m) offset = n - m;
  for (std::int64_t i = offset; i >= 0; --i) {
    if (matches_at(s, sub, static_cast<std::size_t>(i))) return Value::int64(i);
  }
  return Value::int64(-1);
}

template <bool Upper>
Value ascii_case(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  std::string s(a[0].as_text());
  for (char& c : s) {
    if (Upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!Upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return Value::string(std::move(s));
}

// Go's strings.Replace: at most n replacements (all when n < 0); an empty `old` matches before
// every code point and at the end.
Value replace(Args a, EvalBudget& budget) {
  const std::string_view s = a[0].as_text(), from = a[1].as_text(), to = a[2].as_text();
  std::int64_t n = a.size() > 3 ? a[3].as_int() : -1;
  charge_for(budget, s, 2);
  std::string out;
  if (n == 0) return a[0];
  if (from.empty()) {
    const auto cps = decode(s);
    for (std::size_t i = 0; i <= cps.size(); ++i) {
      if (n != 0) {
        out += to;
        if (n > 0) --n;
      }
      if (i < cps.size()) encode(out, cps[i]);
    }
    return Value::string(std::move(out));
  }
  std::size_t pos = 0;
  while (n != 0) {
    const std::size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos)).append(to);
    pos = at + from.size();
    if (n > 0) --n;
  }
  out.append(s.substr(pos));
  return Value::string(std::move(out));
}

// Go's strings.SplitN: at most n parts (all when n < 0, none when n == 0); an empty separator
// splits between code points.
Value split(Args a, EvalBudget& budget) {
  const std::string_view s = a[0].as_text(), sep = a[1].as_text();
  const std::int64_t n = a.size() > 2 ? a[2].as_int() : -1;
  charge_for(budget, s, 2);
  std::vector<Value> parts;
  if (n == 0) return Value::list(std::move(parts));
  if (sep.empty()) {
    const auto cps = decode(s);
    for (std::size_t i = 0; i < cps.size(); ++i) {
      if (n > 0 && static_cast<std::int64_t>(parts.size()) == n - 1) {
        parts.push_back(Value::string(encode(cps, i, cps.size())));
        break;
      }
      parts.push_back(Value::string(encode(cps, i, i + 1)));
    }
    return Value::list(std::move(parts));
  }
  std::size_t pos = 0;
  for (;;) {
    if (n > 0 && static_cast<std::int64_t>(parts.size()) == n - 1) break;
    const std::size_t at = s.find(sep, pos);
    if (at == std::string_view::npos) break;
    parts.push_back(Value::string(std::string(s.substr(pos, at - pos))));
    pos = at + sep.size();
  }
  parts.push_back(Value::string(std::string(s.substr(pos))));
  return Value::list(std::move(parts));
}

Value substring(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  const auto cps = decode(a[0].as_text());
  const auto n = static_cast<std::int64_t>(cps.size());
  const std::int64_t start = a[1].as_int();
  const std::int64_t end = a.size() > 2 ? a[2].as_int() : n;
  if (a.size() > 2 && start > end) {
    return Value::error("invalid substring range. start: " + std::to_string(start) +
                        ", end: " + std::to_string(end));
  }
  if (start < 0 || start > n) return out_of_range(start);
  if (end < 0 || end > n) return out_of_range(end);
  return Value::string(encode(cps, static_cast<std::size_t>(start), static_cast<std::size_t>(end)));
}

bool is_space(char32_t c) {
  switch (c) {
    case '\t': case '\n': case '\v': case '\f': case '\r': case ' ': case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

Value trim(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  const auto cps = decode(a[0].as_text());
  std::size_t from = 0, to = cps.size();
  while (from < to && is_space(cps[from])) ++from;
  while (to > from && is_space(cps[to - 1])) --to;
  return Value::string(encode(cps, from, to));
}

Value join(Args a, EvalBudget& budget) {
  const ListValue& l = a[0].as_list();
  const std::string_view sep = a.size() > 1 ? a[1].as_text() : std::string_view();
  std::string out;
  for (std::size_t i = 0; i < l.size(); ++i) {
    const Value v = l.at(i);
    if (!v.is(K::string)) return Value::error("join: invalid input: " + std::string(v.type_name()));
    if (i > 0) out += sep;
    out += v.as_text();
  }
  charge_for(budget, out, 2);
  return Value::string(std::move(out));
}

Value quote(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  std::string out = "\"";
  for (char32_t c : decode(a[0].as_text())) {
    if (append_simple_escape(out, c)) continue;
    encode(out, (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF ? 0xFFFD : c);
  }
  out += '"';
  return Value::string(std::move(out));
}

// --- format ---
// `"%s is %d".format([a, b])`: the clauses %s %d %f %e %b %o %x %X (with `.N` precision for %f
// and %e) and `%%`, worded as cel-go's ext.Strings version 2 formats them.

struct FormatError {
  std::string message;
};

std::string printf_double(const char* spec, int precision, double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char fmt[16];
  std::snprintf(fmt, sizeof fmt, "%%.%d%s", precision, spec);
  const int n = std::snprintf(nullptr, 0, fmt, d);
  std::string out(static_cast<std::size_t>(n), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, d);
  return out;
}

// Digits of `v` in base 2, 8 or 16 with a leading minus for negative ints, as Go prints them.
std::string in_base(const Value& v, unsigned base, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  bool negative = false;
  std::uint64_t u;
  if (v.is(K::int64)) {
    negative = v.as_int() < 0;
    u = negative ? 0 - static_cast<std::uint64_t>(v.as_int()) : static_cast<std::uint64_t>(v.as_int());
  } else {
    u = v.as_uint();
  }
  std::string out;
  do {
    out += digits[u % base];
    u /= base;
  } while (u != 0);
  if (negative) out += '-';
  std::reverse(out.begin(), out.end());
  return out;
}

std::string format_s(const Value& v);

// An element of a list or map under %s: written so that it reads back as CEL.
std::string format_element(const Value& v) {
  switch (v.kind()) {
    case K::string: return quote_text(v.as_text(), false);
    case K::bytes: return quote_text(v.as_text(), true);
    case K::float64: {
      const std::string s = printf_double("f", 6, v.as_double());
      return std::isfinite(v.as_double()) ? s : "\"" + s + "\"";
    }
    case K::timestamp: return "timestamp(\"" + format_timestamp(v.as_seconds()) + "\")";
    case K::duration: return "duration(\"" + format_duration(v.as_seconds()) + "\")";
    case K::type: return "type(" + std::string(v.as_text()) + ")";
    default: return format_s(v);
  }
}

std::string format_s(const Value& v) {
  switch (v.kind()) {
    case K::null: return "null";
    case K::boolean: return v.as_bool() ? "true" : "false";
    case K::int64: return std::to_string(v.as_int());
    case K::uint64: return std::to_string(v.as_uint());
    case K::float64: return double_to_string(v.as_double());
    case K::string:
    case K::bytes:
    case K::type: return std::string(v.as_text());
    case K::timestamp: return format_timestamp(v.as_seconds());
    case K::duration: return format_duration(v.as_seconds());
    case K::list: {
      const ListValue& l = v.as_list();
      std::string out = "[";
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out += ", ";
        out += format_element(l.at(i));
      }
      return out + "]";
    }
    case K::map: {
      const MapValue& m = v.as_map();
      std::vector<std::pair<std::string, std::string>> pairs;
      for (std::size_t i = 0; i < m.size(); ++i) {
        const Value key = m.key_at(i);
        pairs.emplace_back(format_element(key), format_element(m.value_at(i)));
      }
      std::sort(pairs.begin(), pairs.end());
      std::string out = "{";
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        if (i > 0) out += ", ";
        out += pairs[i].first + ":" + pairs[i].second;
      }
      return out + "}";
    }
    default:
      throw FormatError{"string clause can only be used on strings, bools, bytes, ints, doubles, "
                        "maps, lists, types, durations, and timestamps, was given " +
                        std::string(v.type_name())};
  }
}

double as_double_for_format(const Value& v, const char* clause) {
  switch (v.kind()) {
    case K::float64: return v.as_double();
    case K::int64: return static_cast<double>(v.as_int());
    case K::uint64: return static_cast<double>(v.as_uint());
    case K::string:
      if (v.as_text() == "NaN") return NAN;
      if (v.as_text() == "Infinity") return INFINITY;
      if (v.as_text() == "-Infinity") return -INFINITY;
      [[fallthrough]];
    default:
      throw FormatError{std::string(clause) + " clause can only be used on doubles, was given " +
                        std::string(v.type_name())};
  }
}

std::string format_clause(char clause, int precision, const Value& v) {
  switch (clause) {
    case 's': return format_s(v);
    case 'd':
      if (v.is(K::int64) || v.is(K::uint64)) return format_s(v);
      if (v.is(K::float64) && !std::isfinite(v.as_double())) {
        return printf_double("f", 0, v.as_double());
      }
      throw FormatError{"decimal clause can only be used on integers, was given " +
                        std::string(v.type_name())};
    case 'f': return printf_double("f", precision, as_double_for_format(v, "fixed-point"));
    case 'e': return printf_double("e", precision, as_double_for_format(v, "scientific"));
    case 'b':
      if (v.is(K::boolean)) return v.as_bool() ? "1" : "0";
      if (v.is(K::int64) || v.is(K::uint64)) return in_base(v, 2, false);
      throw FormatError{"only integers and bools can be formatted as binary, was given " +
                        std::string(v.type_name())};
    case 'o':
      if (v.is(K::int64) || v.is(K::uint64)) return in_base(v, 8, false);
      throw FormatError{"octal clause can only be used on integers, was given " +
                        std::string(v.type_name())};
    case 'x':
    case 'X': {
      const bool upper = clause == 'X';
      if (v.is(K::int64) || v.is(K::uint64)) return in_base(v, 16, upper);
      if (v.is(K::string) || v.is(K::bytes)) {
        std::string out;
        char buf[4];
        for (char c : v.as_text()) {
          std::snprintf(buf, sizeof buf, upper ? "%02X" : "%02x", static_cast<unsigned char>(c));
          out += buf;
        }
        return out;
      }
      throw FormatError{"only integers, byte buffers, and strings can be formatted as hex, was "
                        "given " + std::string(v.type_name())};
    }
    default: throw FormatError{"internal"};
  }
}

Value format(Args a, EvalBudget& budget) {
  const std::string_view f = a[0].as_text();
  const ListValue& args = a[1].as_list();
  std::string out;
  std::size_t next_arg = 0;
  try {
    for (std::size_t i = 0; i < f.size();) {
      if (f[i] != '%') {
        out += f[i++];
        continue;
      }
      if (i + 1 < f.size() && f[i + 1] == '%') {
        out += '%';
        i += 2;
        continue;
      }
      if (next_arg >= args.size()) {
        return Value::error("index " + std::to_string(next_arg) + " out of range");
      }
      if (i + 1 >= f.size()) return Value::error("unexpected end of string");
      std::size_t p = i + 1;
      int precision = 6;
      if (f[p] == '.') {
        ++p;
        const std::size_t digits_start = p;
        while (p < f.size() && f[p] >= '0' && f[p] <= '9') ++p;
        if (p >= f.size()) {
          return Value::error("could not parse formatting clause: error while parsing precision: "
                              "could not find end of precision specifier");
        }
        const std::string digits(f.substr(digits_start, p - digits_start));
        // Capped: a precision asks for that many digits of output.
        precision = digits.empty() ? 0 : static_cast<int>(std::min<long>(std::stol(digits.substr(0, 6)), 1000));
      }
      const char clause = f[p];
      if (std::string_view("sdfeboxX").find(clause) == std::string_view::npos) {
        return Value::error(std::string("could not parse formatting clause: unrecognized "
                                        "formatting clause \"") + clause + "\"");
      }
      try {
        out += format_clause(clause, precision, args.at(next_arg));
      } catch (const FormatError& e) {
        return Value::error("error during formatting: " + e.message);
      }
      ++next_arg;
      i = p + 1;
    }
  } catch (const FormatError& e) {
    return Value::error(e.message);
  }
  charge_for(budget, f);
  return Value::string(std::move(out));
}

}  // namespace

void add_strings_library(FunctionRegistry& r) {
  r.add("format", "string_format", true, "string, list(dyn) -> string", format);
  r.add("charAt", "string_char_at_int", true, "string, int -> string", char_at);
  r.add("indexOf", "string_index_of_string", true, "string, string -> int", index_of);
  r.add("indexOf", "string_index_of_string_int", true, "string, string, int -> int", index_of);
  r.add("lastIndexOf", "string_last_index_of_string", true, "string, string -> int", last_index_of);
  r.add("lastIndexOf", "string_last_index_of_string_int", true, "string, string, int -> int", last_index_of);
  r.add("lowerAscii", "string_lower_ascii", true, "string -> string", ascii_case<false>);
  r.add("upperAscii", "string_upper_ascii", true, "string -> string", ascii_case<true>);
  r.add("replace", "string_replace_string_string", true, "string, string, string -> string", replace);
  r.add("replace", "string_replace_string_string_int", true, "string, string, string, int -> string", replace);
  r.add("split", "string_split_string", true, "string, string -> list(string)", split);
  r.add("split", "string_split_string_int", true, "string, string, int -> list(string)", split);
  r.add("substring", "string_substring_int", true, "string, int -> string", substring);
  r.add("substring", "string_substring_int_int", true, "string, int, int -> string", substring);
  r.add("trim", "string_trim", true, "string -> string", trim);
  r.add("join", "list_join", true, "list(string) -> string", join);
  r.add("join", "list_join_string", true, "list(string), string -> string", join);
  r.add("strings.quote", "strings_quote", false, "string -> string", quote);
}

}  // namespace kwatch::cel
