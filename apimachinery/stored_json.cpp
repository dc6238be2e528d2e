#include "apimachinery/stored_json.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/error.hpp>
#include <boost/json/value_stack.hpp>

#include <charconv>
#include <cmath>
#include <vector>

namespace kwatch::apimachinery {
namespace {

namespace json = boost::json;

// Length of the valid UTF-8 sequence at `s[i]`, 0 when there is none (overlong forms,
// surrogates and code points above U+10FFFF are invalid, as in RFC 3629).
std::size_t sequence_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c == 0xE0) {
    n = 3, lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    n = 3;
  } else if (c == 0xED) {
    n = 3, hi = 0x9F;
  } else if (c == 0xF0) {
    n = 4, lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    n = 4;
  } else if (c == 0xF4) {
    n = 4, hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

// Offset of the first byte that starts no valid sequence; s.size() when all are valid.
std::size_t first_invalid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

// A rule broken somewhere below the value being walked; `path` is built innermost first.
struct Problem {
  std::string what;
  std::vector<std::string> path;
};

std::string too_deep() {
  return "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
}

// `depth`: the number of objects and arrays enclosing `v`.
bool walk(const json::value& v, std::size_t depth, bool check_strings, Problem& p) {
  switch (v.kind()) {
    case json::kind::double_:
      if (std::isfinite(v.get_double())) return true;
      p.what = "number out of range";
      return false;
    case json::kind::string:
      if (!check_strings || is_valid_utf8(v.get_string())) return true;
      p.what = "invalid UTF-8 in a string";
      return false;
    case json::kind::array: {
      if (depth + 1 > kMaxJsonDepth) {
        p.what = too_deep();
        return false;
      }
      const json::array& a = v.get_array();
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!walk(a[i], depth + 1, check_strings, p)) {
          p.path.push_back("[" + std::to_string(i) + "]");
          return false;
        }
      }
      return true;
    }
    case json::kind::object: {
      if (depth + 1 > kMaxJsonDepth) {
        p.what = too_deep();
        return false;
      }
      for (const auto& [key, member] : v.get_object()) {
        if (check_strings && !is_valid_utf8(key)) {
          p.what = "invalid UTF-8 in a member name";
          p.path.push_back(std::string(key));
          return false;
        }
        if (!walk(member, depth + 1, check_strings, p)) {
          p.path.push_back(std::string(key));
          return false;
        }
      }
      return true;
    }
    default:
      return true;
  }
}

JsonProblem describe(const Problem& p) {
  JsonProblem out;
  for (auto it = p.path.rbegin(); it != p.path.rend(); ++it) {
    if (!it->starts_with('[') && !out.path.empty()) out.path += '.';
    out.path += to_valid_utf8(*it);
  }
  out.what = p.what;
  return out;
}

// Builds the value as Boost.JSON's own parser does, with two differences: doubles are converted
// from their text with std::from_chars, which rounds correctly (Boost 1.81's conversion can be an
// ulp off for long mantissas, so a value would drift each time it is read and written back), and
// a number that overflows a double is noted.
struct ValueBuilder {
  static constexpr std::size_t max_object_size = json::object::max_size();
  static constexpr std::size_t max_array_size = json::array::max_size();
  static constexpr std::size_t max_key_size = json::string::max_size();
  static constexpr std::size_t max_string_size = json::string::max_size();

  // The stack of values under construction starts in `temp` (no allocation for most objects).
  ValueBuilder(unsigned char* temp, std::size_t size) : st(json::storage_ptr(), temp, size) {}

  json::value_stack st;
  std::string number;  // the text of a number split over several parts
  bool non_finite = false;

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_object_begin(boost::system::error_code&) { return true; }
  bool on_object_end(std::size_t n, boost::system::error_code&) {
    st.push_object(n);
    return true;
  }
  bool on_array_begin(boost::system::error_code&) { return true; }
  bool on_array_end(std::size_t n, boost::system::error_code&) {
    st.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view s, boost::system::error_code&) {
    number.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, json::string_view, boost::system::error_code&) {
    number.clear();
    st.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, boost::system::error_code&) {
    number.clear();
    st.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view s, boost::system::error_code&) {
    std::string_view text(s.data(), s.size());
    if (!number.empty()) {
      number.append(text);
      text = number;
    }
    double exact = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), exact);
    // Out of range is either an overflow (Boost says infinity too) or an underflow (Boost's
    // zero or subnormal is as good as any).
    if (ec == std::errc() && end == text.data() + text.size()) d = exact;
    non_finite = non_finite || !std::isfinite(d);
    number.clear();
    st.push_double(d);
    return true;
  }
  bool on_bool(bool b, boost::system::error_code&) {
    st.push_bool(b);
    return true;
  }
  bool on_null(boost::system::error_code&) {
    st.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }
};

}  // namespace

bool is_valid_utf8(std::string_view text) { return first_invalid(text) == text.size(); }

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::optional<json::value> parse_json(std::string_view text, std::string* problem,
                                      json::storage_ptr sp) {
  json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  unsigned char temp[4096];
  json::basic_parser<ValueBuilder> parser(options, temp, sizeof temp);
  parser.handler().st.reset(std::move(sp));
  boost::system::error_code ec;
  const std::size_t consumed = parser.write_some(false, text.data(), text.size(), ec);
  if (!ec && consumed < text.size()) ec = json::error::extra_data;
  if (!ec && !parser.done()) ec = json::error::incomplete;
  if (ec) {
    if (problem != nullptr) {
      if (ec == json::error::too_deep) {
        *problem = too_deep();
      } else if (const std::size_t bad = first_invalid(text); bad < text.size()) {
        *problem = "invalid UTF-8 at byte " + std::to_string(bad);
      } else if (ec == json::error::incomplete || consumed >= text.size()) {
        *problem = "unexpected end of JSON input";
      } else {
        *problem = ec.message() + " at byte " + std::to_string(consumed);
      }
    }
    return std::nullopt;
  }
  json::value value = parser.handler().st.release();
  if (parser.handler().non_finite) {
    // Rare: walk the value to say where.
    Problem p;
    walk(value, 0, false, p);
    if (problem != nullptr) *problem = describe(p).message();
    return std::nullopt;
  }
  return value;
}

std::optional<JsonProblem> json_problem(const json::value& value) {
  Problem p;
  if (walk(value, 0, true, p)) return std::nullopt;
  return describe(p);
}

std::size_t json_depth(const json::value& value, std::size_t limit) {
  std::size_t deepest = 0;
  // Iterative, so that a value deeper than any limit cannot exhaust the stack here.
  struct Frame {
    const json::value* v;
    std::size_t depth;  // containers enclosing v
  };
  std::vector<Frame> stack{{&value, 0}};
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    if (!f.v->is_structured()) continue;
    const std::size_t level = f.depth + 1;
    deepest = std::max(deepest, level);
    if (level > limit) return deepest;
    if (const auto* a = f.v->if_array()) {
      for (const auto& e : *a) {
        if (e.is_structured()) stack.push_back({&e, level});
      }
    } else {
      for (const auto& [k, e] : f.v->get_object()) {
        if (e.is_structured()) stack.push_back({&e, level});
      }
    }
  }
  return deepest;
}

namespace {

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// From the opening quote at `at`: the index just past the closing quote, or npos.
std::size_t skip_string(std::string_view t, std::size_t at) {
  for (std::size_t i = at + 1; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// From the first character of a value at `at`: the index just past it, or npos. Containers are
// skipped by counting brackets outside strings (the text is trusted to be well formed; nothing is
// read out of bounds when it is not).
std::size_t skip_value(std::string_view t, std::size_t at) {
  if (at >= t.size()) return std::string_view::npos;
  if (t[at] == '"') return skip_string(t, at);
  if (t[at] != '{' && t[at] != '[') {
    std::size_t i = at;
    while (i < t.size() && t[i] != ',' && t[i] != '}' && t[i] != ']' && !json_space(t[i])) ++i;
    return i;
  }
  std::size_t depth = 0;
  for (std::size_t i = at; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') {
      i = skip_string(t, i);
      if (i == std::string_view::npos) return i;
      --i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::size_t skip_space(std::string_view t, std::size_t i) {
  while (i < t.size() && json_space(t[i])) ++i;
  return i;
}

}  // namespace

std::optional<std::string_view> member_text(std::string_view t, std::string_view key) {
  std::size_t i = skip_space(t, 0);
  if (i >= t.size() || t[i] != '{') return std::nullopt;
  i = skip_space(t, i + 1);
  if (i < t.size() && t[i] == '}') return std::nullopt;
  while (i < t.size()) {
    if (t[i] != '"') return std::nullopt;
    const std::size_t name_end = skip_string(t, i);
    if (name_end == std::string_view::npos) return std::nullopt;
    const std::string_view name = t.substr(i + 1, name_end - i - 2);
    if (name.find('\\') != std::string_view::npos) return std::nullopt;
    i = skip_space(t, name_end);
    if (i >= t.size() || t[i] != ':') return std::nullopt;
    const std::size_t value = skip_space(t, i + 1);
    const std::size_t value_end = skip_value(t, value);
    if (value_end == std::string_view::npos || value_end == value) return std::nullopt;
    if (name == key) return t.substr(value, value_end - value);
    i = skip_space(t, value_end);
    if (i >= t.size()) return std::nullopt;
    if (t[i] == '}') return std::nullopt;
    if (t[i] != ',') return std::nullopt;
    i = skip_space(t, i + 1);
  }
  return std::nullopt;
}

}  // namespace kwatch::apimachinery
