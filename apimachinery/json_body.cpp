#include "apimachinery/json_body.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <set>

namespace kwatch::apimachinery {

namespace json = boost::json;

ApiResult<json::value> parse_json_body(std::string_view body, json::storage_ptr sp) {
  if (body.empty()) return api_error(Errc::bad_request, "request body is empty");
  std::string problem;
  auto value = apimachinery::parse_json(body, &problem, std::move(sp));
  if (!value) {
    // A syntax error in Go's words; what Go would accept but kwatch does not (depth, UTF-8,
    // numbers out of range) in kwatch's.
    std::string go = go_json_syntax_error(body);
    return api_error(Errc::bad_request,
                     "couldn't get version/kind; json parse error: " + (go.empty() ? problem : go));
  }
  return std::move(*value);
}

namespace {

// Go's quoteChar: how its scanner names the byte it stumbled on.
std::string quote_char(unsigned char c) {
  if (c == '\'') return "'\\''";
  if (c == '"') return "'\"'";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string inner;
  switch (c) {
    case '\a': inner = "\\a"; break;
    case '\b': inner = "\\b"; break;
    case '\f': inner = "\\f"; break;
    case '\n': inner = "\\n"; break;
    case '\r': inner = "\\r"; break;
    case '\t': inner = "\\t"; break;
    case '\v': inner = "\\v"; break;
    case '\\': inner = "\\\\"; break;
    default:
      if (c < 0x20 || c == 0x7f) {
        inner = std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
      } else if (c < 0x80) {
        inner = std::string(1, static_cast<char>(c));
      } else if (c <= 0xa0 || c == 0xad) {
        // The byte read as the code point U+00XX, which is not printable.
        inner = std::string("\\u00") + kHex[c >> 4] + kHex[c & 15];
      } else {
        inner = std::string(1, static_cast<char>(0xc0 | (c >> 6))) +
                static_cast<char>(0x80 | (c & 0x3f));
      }
  }
  return "'" + inner + "'";
}

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Go's encoding/json scanner, as a loop over states: only what it needs to name the first error.
class GoScanner {
 public:
  std::string scan(std::string_view t) {
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!step(static_cast<unsigned char>(t[i]))) return error_;
    }
    // The end: a number may end here; anything else open is an unexpected end.
    if (state_ == State::end_top) return "";
    if (!step(' ')) return error_;
    return state_ == State::end_top ? "" : "unexpected end of JSON input";
  }

 private:
  enum class State {
    begin_value, begin_value_or_empty, begin_string_or_empty, begin_string, end_value, end_top,
    in_string, in_string_esc, in_string_esc_u, neg, zero, one, dot, dot0, e, e_sign, e0,
    literal,
  };
  enum class Parse { object_key, object_value, array_value };

  bool fail(unsigned char c, std::string_view context) {
    error_ = "invalid character " + quote_char(c) + " " + std::string(context);
    return false;
  }

  bool begin_value(unsigned char c) {
    if (json_space(static_cast<char>(c))) return true;
    switch (c) {
      case '{': stack_.push_back(Parse::object_key); state_ = State::begin_string_or_empty; return true;
      case '[': stack_.push_back(Parse::array_value); state_ = State::begin_value_or_empty; return true;
      case '"': state_ = State::in_string; return true;
      case '-': state_ = State::neg; return true;
      case '0': state_ = State::zero; return true;
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default:
        if (c >= '1' && c <= '9') {
          state_ = State::one;
          return true;
        }
        return fail(c, "looking for beginning of value");
    }
  }

  bool literal(std::string_view word) {
    word_ = word;
    matched_ = 1;
    state_ = State::literal;
    return true;
  }

  bool end_value(unsigned char c) {
    if (stack_.empty()) {
      state_ = State::end_top;
      return end_top(c);
    }
    state_ = State::end_value;
    if (json_space(static_cast<char>(c))) return true;
    switch (stack_.back()) {
      case Parse::object_key:
        if (c == ':') {
          stack_.back() = Parse::object_value;
          state_ = State::begin_value;
          return true;
        }
        return fail(c, "after object key");
      case Parse::object_value:
        if (c == ',') {
          stack_.back() = Parse::object_key;
          state_ = State::begin_string;
          return true;
        }
        if (c == '}') return pop();
        return fail(c, "after object key:value pair");
      case Parse::array_value:
        if (c == ',') {
          state_ = State::begin_value;
          return true;
        }
        if (c == ']') return pop();
        return fail(c, "after array element");
    }
    return true;
  }

  bool pop() {
    stack_.pop_back();
    state_ = stack_.empty() ? State::end_top : State::end_value;
    return true;
  }

  bool end_top(unsigned char c) {
    if (!json_space(static_cast<char>(c))) return fail(c, "after top-level value");
    return true;
  }

  static bool digit(unsigned char c) { return c >= '0' && c <= '9'; }
  static bool hex(unsigned char c) {
    return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }

  bool step(unsigned char c) {
    switch (state_) {
      case State::begin_value: return begin_value(c);
      case State::begin_value_or_empty:
        if (json_space(static_cast<char>(c))) return true;
        if (c == ']') return end_value(c);
        return begin_value(c);
      case State::begin_string_or_empty:
        if (json_space(static_cast<char>(c))) return true;
        if (c == '}') {
          stack_.back() = Parse::object_value;
          return end_value(c);
        }
        [[fallthrough]];
      case State::begin_string:
        if (json_space(static_cast<char>(c))) return true;
        if (c == '"') {
          state_ = State::in_string;
          return true;
        }
        return fail(c, "looking for beginning of object key string");
      case State::end_value: return end_value(c);
      case State::end_top: return end_top(c);
      case State::in_string:
        if (c == '"') {
          state_ = State::end_value;
          return true;
        }
        if (c == '\\') {
          state_ = State::in_string_esc;
          return true;
        }
        if (c < 0x20) return fail(c, "in string literal");
        return true;
      case State::in_string_esc:
        if (c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't' || c == '\\' || c == '/' ||
            c == '"') {
          state_ = State::in_string;
          return true;
        }
        if (c == 'u') {
          state_ = State::in_string_esc_u;
          hex_digits_ = 0;
          return true;
        }
        return fail(c, "in string escape code");
      case State::in_string_esc_u:
        if (!hex(c)) return fail(c, "in \\u hexadecimal character escape");
        if (++hex_digits_ == 4) state_ = State::in_string;
        return true;
      case State::neg:
        if (c == '0') {
          state_ = State::zero;
          return true;
        }
        if (c >= '1' && c <= '9') {
          state_ = State::one;
          return true;
        }
        return fail(c, "in numeric literal");
      case State::one:
        if (digit(c)) return true;
        [[fallthrough]];
      case State::zero:
        if (c == '.') {
          state_ = State::dot;
          return true;
        }
        if (c == 'e' || c == 'E') {
          state_ = State::e;
          return true;
        }
        return end_value(c);
      case State::dot:
        if (digit(c)) {
          state_ = State::dot0;
          return true;
        }
        return fail(c, "after decimal point in numeric literal");
      case State::dot0:
        if (digit(c)) return true;
        if (c == 'e' || c == 'E') {
          state_ = State::e;
          return true;
        }
        return end_value(c);
      case State::e:
        if (c == '+' || c == '-') {
          state_ = State::e_sign;
          return true;
        }
        [[fallthrough]];
      case State::e_sign:
        if (digit(c)) {
          state_ = State::e0;
          return true;
        }
        return fail(c, "in exponent of numeric literal");
      case State::e0:
        if (digit(c)) return true;
        return end_value(c);
      case State::literal:
        if (c != static_cast<unsigned char>(word_[matched_])) {
          return fail(c, "in literal " + std::string(word_) + " (expecting " +
                             quote_char(static_cast<unsigned char>(word_[matched_])) + ")");
        }
        if (++matched_ == word_.size()) state_ = State::end_value;
        return true;
    }
    return true;
  }

  State state_ = State::begin_value;
  std::vector<Parse> stack_;
  std::string error_;
  std::string_view word_;
  std::size_t matched_ = 0;
  int hex_digits_ = 0;
};

}  // namespace

std::string go_json_syntax_error(std::string_view text) { return GoScanner().scan(text); }

std::string summarize_body(std::string_view body, std::size_t max) {
  if (body.empty()) return "<empty>";
  const bool cut = body.size() > max;
  const std::string_view shown = body.substr(0, max);
  std::string out;
  if (body.front() == '{') {
    out = to_valid_utf8(shown);
  } else {
    static constexpr char kHex[] = "0123456789abcdef";
    for (unsigned char c : shown) {
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (cut) out += " ...";
  return out;
}

namespace {

// Walks a body's structure without building it, remembering each object's member names.
struct DuplicateFinder {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  struct Frame {
    bool array = false;
    std::size_t index = 0;       // arrays: the element being read
    std::string segment;         // how the parent names this value: ".key" or "[i]"
    std::string key;             // objects: the member being read
    std::set<std::string, std::less<>> keys;
  };
  std::vector<Frame> stack;
  std::string key_part;
  std::vector<std::string> found;

  std::string child_segment() const {
    if (stack.empty()) return {};
    const Frame& top = stack.back();
    if (top.array) return "[" + std::to_string(top.index) + "]";
    return "." + top.key;
  }
  std::string path_to(std::string_view last) const {
    std::string out;
    for (const auto& f : stack) out += f.segment;
    out += '.';
    out.append(last);
    return out.substr(out.starts_with('.') ? 1 : 0);
  }
  void value_done() {
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  }
  bool open(bool array) {
    Frame f;
    f.array = array;
    f.segment = child_segment();
    stack.push_back(std::move(f));
    return true;
  }
  bool close() {
    stack.pop_back();
    value_done();
    return true;
  }

  using ec = boost::system::error_code;
  bool on_document_begin(ec&) { return true; }
  bool on_document_end(ec&) { return true; }
  bool on_object_begin(ec&) { return open(false); }
  bool on_object_end(std::size_t, ec&) { return close(); }
  bool on_array_begin(ec&) { return open(true); }
  bool on_array_end(std::size_t, ec&) { return close(); }
  bool on_key_part(json::string_view s, std::size_t, ec&) {
    key_part.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, ec&) {
    key_part.append(s.data(), s.size());
    Frame& top = stack.back();
    if (!top.keys.insert(key_part).second) found.push_back(path_to(key_part));
    top.key = std::move(key_part);
    key_part.clear();
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, ec&) { return true; }
  bool on_string(json::string_view, std::size_t, ec&) { return scalar(); }
  bool on_number_part(json::string_view, ec&) { return true; }
  bool on_int64(std::int64_t, json::string_view, ec&) { return scalar(); }
  bool on_uint64(std::uint64_t, json::string_view, ec&) { return scalar(); }
  bool on_double(double, json::string_view, ec&) { return scalar(); }
  bool on_bool(bool, ec&) { return scalar(); }
  bool on_null(ec&) { return scalar(); }
  bool on_comment_part(json::string_view, ec&) { return true; }
  bool on_comment(json::string_view, ec&) { return true; }
  bool scalar() {
    value_done();
    return true;
  }
};

// Counts member names without remembering them.
struct KeyCounter {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  std::size_t keys = 0;

  using ec = boost::system::error_code;
  bool on_document_begin(ec&) { return true; }
  bool on_document_end(ec&) { return true; }
  bool on_object_begin(ec&) { return true; }
  bool on_object_end(std::size_t, ec&) { return true; }
  bool on_array_begin(ec&) { return true; }
  bool on_array_end(std::size_t, ec&) { return true; }
  bool on_key_part(json::string_view, std::size_t, ec&) { return true; }
  bool on_key(json::string_view, std::size_t, ec&) {
    ++keys;
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, ec&) { return true; }
  bool on_string(json::string_view, std::size_t, ec&) { return true; }
  bool on_number_part(json::string_view, ec&) { return true; }
  bool on_int64(std::int64_t, json::string_view, ec&) { return true; }
  bool on_uint64(std::uint64_t, json::string_view, ec&) { return true; }
  bool on_double(double, json::string_view, ec&) { return true; }
  bool on_bool(bool, ec&) { return true; }
  bool on_null(ec&) { return true; }
  bool on_comment_part(json::string_view, ec&) { return true; }
  bool on_comment(json::string_view, ec&) { return true; }
};

std::size_t members_of(const json::value& v) {
  std::size_t n = 0;
  if (const json::object* o = v.if_object()) {
    n += o->size();
    for (const auto& [key, member] : *o) n += members_of(member);
  } else if (const json::array* a = v.if_array()) {
    for (const auto& item : *a) n += members_of(item);
  }
  return n;
}

}  // namespace

std::vector<std::string> duplicate_fields(std::string_view body, const json::object& parsed) {
  // A parsed value keeps one member per name: as many members as names in the text means none
  // was repeated, which two passes without allocation tell (the usual case).
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth;
  json::basic_parser<KeyCounter> counter(options);
  boost::system::error_code ec;
  counter.write_some(false, body.data(), body.size(), ec);
  if (ec) return {};
  std::size_t members = parsed.size();
  for (const auto& [key, member] : parsed) members += members_of(member);
  if (counter.handler().keys == members) return {};
  return duplicate_fields(body);
}

std::vector<std::string> duplicate_fields(std::string_view body) {
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth;
  json::basic_parser<DuplicateFinder> parser(options);
  boost::system::error_code ec;
  parser.write_some(false, body.data(), body.size(), ec);
  if (ec) return {};
  return std::move(parser.handler().found);
}

}  // namespace kwatch::apimachinery
