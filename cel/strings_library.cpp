// The string extension library as kube enables it (cel-go ext.Strings, version 2): charAt,
// indexOf, lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim, join and
// strings.quote. Indexes count code points, as `size` does.
#include <cstdint>
#include <string>
#include <vector>

#include "cel/libraries.hpp"

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

void charge_for(EvalBudget& budget, std::string_view s) { budget.charge(s.size() / 10); }

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
  charge_for(budget, s);
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
  charge_for(budget, s);
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
  charge_for(budget, out);
  return Value::string(std::move(out));
}

Value quote(Args a, EvalBudget& budget) {
  charge_for(budget, a[0].as_text());
  std::string out = "\"";
  for (char32_t c : decode(a[0].as_text())) {
    switch (c) {
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      default: encode(out, (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF ? 0xFFFD : c);
    }
  }
  out += '"';
  return Value::string(std::move(out));
}

}  // namespace

void add_strings_library(FunctionRegistry& r) {
  r.add("charAt", "string_char_at_int", true, {K::string, K::int64}, char_at);
  r.add("indexOf", "string_index_of_string", true, {K::string, K::string}, index_of);
  r.add("indexOf", "string_index_of_string_int", true, {K::string, K::string, K::int64}, index_of);
  r.add("lastIndexOf", "string_last_index_of_string", true, {K::string, K::string}, last_index_of);
  r.add("lastIndexOf", "string_last_index_of_string_int", true, {K::string, K::string, K::int64},
        last_index_of);
  r.add("lowerAscii", "string_lower_ascii", true, {K::string}, ascii_case<false>);
  r.add("upperAscii", "string_upper_ascii", true, {K::string}, ascii_case<true>);
  r.add("replace", "string_replace_string_string", true, {K::string, K::string, K::string},
        replace);
  r.add("replace", "string_replace_string_string_int", true,
        {K::string, K::string, K::string, K::int64}, replace);
  r.add("split", "string_split_string", true, {K::string, K::string}, split);
  r.add("split", "string_split_string_int", true, {K::string, K::string, K::int64}, split);
  r.add("substring", "string_substring_int", true, {K::string, K::int64}, substring);
  r.add("substring", "string_substring_int_int", true, {K::string, K::int64, K::int64}, substring);
  r.add("trim", "string_trim", true, {K::string}, trim);
  r.add("join", "list_join", true, {K::list}, join);
  r.add("join", "list_join_string", true, {K::list, K::string}, join);
  r.add("strings.quote", "strings_quote", false, {K::string}, quote);
}

}  // namespace kwatch::cel
