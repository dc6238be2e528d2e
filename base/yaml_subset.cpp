#include "base/yaml_subset.hpp"

#include <cstdint>
#include <set>
#include <string>

namespace kwatch::base {

const YamlNode* YamlNode::find(std::string_view key) const {
  for (const auto& m : members) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

namespace {

// Thrown only inside the parser and caught at its entry point, where it becomes the error value:
// a recursive descent is much plainer when a failure deep inside it can simply stop it.
struct Failure {
  std::size_t line;  // 0-based
  std::string message;
};

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_flow_indicator(char c) { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'; }

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) {
    if (text.starts_with("\xef\xbb\xbf")) text.remove_prefix(3);  // a UTF-8 byte order mark
    while (!text.empty() || lines_.empty()) {
      auto nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      lines_.push_back(line);
      if (nl == std::string_view::npos) break;
      text.remove_prefix(nl + 1);
    }
  }

  YamlNode document() {
    li_ = next_content(0);
    if (li_ < lines_.size() && lines_[li_].starts_with("%")) {
      fail(li_, "YAML directives are not supported");
    }
    if (li_ < lines_.size() && is_marker(lines_[li_], "---")) {
      col_ = 3;
      skip_spaces();
      if (!at_line_end()) fail(li_, "content after --- is not supported; start it on a new line");
      advance_line();
    }
    if (li_ >= lines_.size()) fail(lines_.empty() ? 0 : lines_.size() - 1, "the document is empty");
    YamlNode root = block_node();
    if (li_ < lines_.size()) {
      if (is_marker(lines_[li_], "---")) fail(li_, "only one YAML document is supported");
      if (!is_marker(lines_[li_], "...")) {
        fail(li_, "unexpected content after the document (check the indentation)");
      }
      li_ = next_content(li_ + 1);
      if (li_ < lines_.size()) fail(li_, "content after the end of the document (...)");
    }
    return root;
  }

 private:
  [[noreturn]] static void fail(std::size_t line, std::string message) {
    throw Failure{line, std::move(message)};
  }

  static bool is_marker(std::string_view line, std::string_view marker) {
    if (!line.starts_with(marker)) return false;
    return line.size() == marker.size() || is_space(line[marker.size()]);
  }

  // Whether a line holds anything but spaces and a comment.
  bool content_line(std::size_t li) const {
    for (char c : lines_[li]) {
      if (c == '#') return false;
      if (!is_space(c)) return true;
    }
    return false;
  }

  std::size_t next_content(std::size_t li) const {
    while (li < lines_.size() && !content_line(li)) ++li;
    return li;
  }

  std::size_t indent_of(std::size_t li) const {
    std::size_t n = 0;
    const auto& line = lines_[li];
    while (n < line.size() && line[n] == ' ') ++n;
    if (n < line.size() && line[n] == '\t') fail(li, "tabs cannot indent YAML; use spaces");
    return n;
  }

  // Moves to the next line with content, at its indentation (or past the end).
  void advance_line() {
    li_ = next_content(li_ + 1);
    col_ = li_ < lines_.size() ? indent_of(li_) : 0;
  }

  std::string_view line() const { return lines_[li_]; }
  bool at_line_end() const {
    return col_ >= line().size() || (line()[col_] == '#' && (col_ == 0 || is_space(line()[col_ - 1])));
  }
  void skip_spaces() {
    while (col_ < line().size() && is_space(line()[col_])) ++col_;
  }
  // After a value: only spaces and a comment may follow on its line.
  void finish_line() {
    skip_spaces();
    if (!at_line_end()) fail(li_, "unexpected text after the value: \"" + std::string(line().substr(col_)) + "\"");
    advance_line();
  }

  // "---" or "..." at the start of the current line: the document ends here.
  bool document_marker() const {
    return col_ == 0 && (is_marker(line(), "---") || is_marker(line(), "..."));
  }

  bool sequence_entry_at(std::size_t col) const {
    const auto& l = line();
    return col < l.size() && l[col] == '-' && (col + 1 == l.size() || is_space(l[col + 1]));
  }

  static void refuse_indicator(std::size_t li, char c) {
    switch (c) {
      case '&': fail(li, "anchors (&) are not supported");
      case '*': fail(li, "aliases (*) are not supported; quote a value starting with *, e.g. '*.*'");
      case '!': fail(li, "tags (!) are not supported");
      case '|':
      case '>': fail(li, "block scalars (| and >) are not supported; use a quoted string");
      case '?': fail(li, "complex keys (?) are not supported");
      case '%':
      case '@':
      case '`': fail(li, std::string("a plain value cannot start with ") + c + "; quote it");
      default: break;
    }
  }

  // A block node starting at (li_, col_): the column is its indentation.
  YamlNode block_node() {
    const std::string_view l = line();
    const char c = l[col_];
    if (sequence_entry_at(col_)) return block_sequence(col_);
    if (c == '{' || c == '[') {
      YamlNode n = flow_node();
      finish_line();
      return n;
    }
    refuse_indicator(li_, c);
    if (key_end(col_) != std::string_view::npos) return block_mapping(col_);
    YamlNode n = block_scalar();
    return n;
  }

  // Where the ':' ending a mapping key that starts at `col` is, or npos if the line holds none.
  std::size_t key_end(std::size_t col) const {
    const std::string_view l = line();
    std::size_t i = col;
    if (l[i] == '"' || l[i] == '\'') {
      const char q = l[i++];
      while (i < l.size()) {
        if (q == '"' && l[i] == '\\') {
          i += 2;
          continue;
        }
        if (l[i] == q) {
          if (q == '\'' && i + 1 < l.size() && l[i + 1] == '\'') {
            i += 2;
            continue;
          }
          break;
        }
        ++i;
      }
      if (i >= l.size()) return std::string_view::npos;
      ++i;
      while (i < l.size() && is_space(l[i])) ++i;
      return i < l.size() && l[i] == ':' && (i + 1 == l.size() || is_space(l[i + 1]))
                 ? i
                 : std::string_view::npos;
    }
    for (; i < l.size(); ++i) {
      if (l[i] == '#' && i > col && is_space(l[i - 1])) return std::string_view::npos;
      if (l[i] == ':' && (i + 1 == l.size() || is_space(l[i + 1]))) return i;
    }
    return std::string_view::npos;
  }

  YamlNode block_sequence(std::size_t indent) {
    const Nested nested(*this, li_);
    YamlNode seq;
    seq.kind = YamlNode::Kind::sequence;
    seq.line = static_cast<int>(li_) + 1;
    for (;;) {
      const std::size_t item_line = li_;
      col_ = indent + 1;
      skip_spaces();
      if (at_line_end()) {
        advance_line();
        if (li_ < lines_.size() && col_ > indent) {
          seq.items.push_back(block_node());
        } else {
          YamlNode null;
          null.line = static_cast<int>(item_line) + 1;
          seq.items.push_back(std::move(null));
        }
      } else {
        seq.items.push_back(block_node());
      }
      if (li_ >= lines_.size() || col_ < indent || document_marker()) break;
      if (col_ > indent) fail(li_, "unexpected indentation (multi-line values are not supported)");
      if (!sequence_entry_at(col_)) break;  // a key of the mapping this sequence is a value of
    }
    return seq;
  }

  YamlNode block_mapping(std::size_t indent) {
    const Nested nested(*this, li_);
    YamlNode map;
    map.kind = YamlNode::Kind::mapping;
    map.line = static_cast<int>(li_) + 1;
    std::set<std::string, std::less<>> keys;
    for (;;) {
      const std::size_t key_line = li_;
      const std::size_t end = key_end(col_);
      if (end == std::string_view::npos) {
        fail(li_, "expected \"key: value\" at the indentation of the mapping above");
      }
      std::string key;
      if (line()[col_] == '"' || line()[col_] == '\'') {
        key = quoted_scalar();
      } else {
        std::string_view k = line().substr(col_, end - col_);
        while (!k.empty() && is_space(k.back())) k.remove_suffix(1);
        if (k.empty()) fail(li_, "a mapping key is empty");
        refuse_indicator(li_, k.front());
        key = std::string(k);
      }
      if (!keys.insert(key).second) fail(li_, "duplicate key \"" + key + "\"");
      col_ = end + 1;
      skip_spaces();
      YamlNode value;
      if (at_line_end()) {
        advance_line();
        if (li_ < lines_.size() && col_ > indent) {
          value = block_node();
        } else if (li_ < lines_.size() && col_ == indent && sequence_entry_at(col_)) {
          value = block_sequence(indent);  // "key:\n- item": the sequence may sit at the key's column
        } else {
          value.line = static_cast<int>(key_line) + 1;  // null
        }
      } else {
        value = inline_value();
      }
      map.members.push_back(YamlMember{std::move(key), std::move(value)});
      if (li_ >= lines_.size() || col_ < indent || document_marker()) break;
      if (col_ > indent) fail(li_, "unexpected indentation (multi-line values are not supported)");
      if (sequence_entry_at(col_)) fail(li_, "a sequence item where a mapping key was expected");
    }
    return map;
  }

  // A value on its key's line.
  YamlNode inline_value() {
    const char c = line()[col_];
    if (c == '{' || c == '[') {
      YamlNode n = flow_node();
      finish_line();
      return n;
    }
    if (sequence_entry_at(col_)) fail(li_, "a sequence cannot start on its key's line");
    refuse_indicator(li_, c);
    if (key_end(col_) != std::string_view::npos) {
      fail(li_, "a mapping cannot start on its key's line; put it on the next line, indented");
    }
    return block_scalar();
  }

  // A scalar that ends its line: quoted, or plain up to a comment.
  YamlNode block_scalar() {
    YamlNode n;
    n.line = static_cast<int>(li_) + 1;
    const char c = line()[col_];
    if (c == '"' || c == '\'') {
      n.scalar = quoted_scalar();
      n.quoted = true;
      finish_line();
      return n;
    }
    refuse_indicator(li_, c);
    const std::string_view l = line();
    std::size_t end = col_;
    while (end < l.size() && !(l[end] == '#' && is_space(l[end - 1]))) ++end;
    std::string_view text = l.substr(col_, end - col_);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    n.scalar = std::string(text);
    col_ = end;
    finish_line();
    return n;
  }

  // A quoted scalar at (li_, col_), on one line; leaves col_ after the closing quote.
  std::string quoted_scalar() {
    const std::string_view l = line();
    const char q = l[col_++];
    std::string out;
    for (;;) {
      if (col_ >= l.size()) {
        fail(li_, "unterminated quoted string (quoted strings cannot span lines here)");
      }
      const char c = l[col_++];
      if (c == q) {
        if (q == '\'' && col_ < l.size() && l[col_] == '\'') {
          out += '\'';
          ++col_;
          continue;
        }
        return out;
      }
      if (q == '"' && c == '\\') {
        if (col_ >= l.size()) fail(li_, "unterminated escape in a quoted string");
        const char e = l[col_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case ' ': out += ' '; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't':
          case '\t': out += '\t'; break;
          case '0': out += '\0'; break;
          case 'a': out += '\a'; break;
          case 'v': out += '\v'; break;
          case 'e': out += '\x1b'; break;
          case 'x':
          case 'u':
          case 'U': {
            const std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (col_ + digits > l.size()) fail(li_, "short \\" + std::string(1, e) + " escape");
            std::uint32_t cp = 0;
            for (std::size_t i = 0; i < digits; ++i) {
              const char h = l[col_ + i];
              cp <<= 4;
              if (h >= '0' && h <= '9') {
                cp |= static_cast<std::uint32_t>(h - '0');
              } else if (h >= 'a' && h <= 'f') {
                cp |= static_cast<std::uint32_t>(h - 'a' + 10);
              } else if (h >= 'A' && h <= 'F') {
                cp |= static_cast<std::uint32_t>(h - 'A' + 10);
              } else {
                fail(li_, "invalid hexadecimal digit in a \\" + std::string(1, e) + " escape");
              }
            }
            col_ += digits;
            if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
              fail(li_, "escape names no Unicode character");
            }
            append_utf8(out, cp);
            break;
          }
          default:
            fail(li_, std::string("unknown escape \\") + e + " in a double-quoted string");
        }
        continue;
      }
      out += c;
    }
  }

  // ---- Flow collections: character by character, across lines. ----

  // Skips spaces, line ends and comments; false at the end of the input.
  bool skip_flow_space() {
    for (;;) {
      if (li_ >= lines_.size()) return false;
      if (at_line_end()) {
        ++li_;
        col_ = 0;
        continue;
      }
      if (is_space(line()[col_])) {
        ++col_;
        continue;
      }
      return true;
    }
  }

  void expect_more(std::size_t open_line, const char* what) {
    if (!skip_flow_space()) fail(open_line, std::string("unterminated ") + what);
  }

  YamlNode flow_node() {
    const Nested nested(*this, li_);
    const std::size_t open_line = li_;
    const char c = line()[col_];
    YamlNode n;
    n.line = static_cast<int>(li_) + 1;
    if (c == '{') {
      n.kind = YamlNode::Kind::mapping;
      ++col_;
      std::set<std::string, std::less<>> keys;
      for (;;) {
        expect_more(open_line, "flow mapping ({ without })");
        if (line()[col_] == '}') {
          ++col_;
          return n;
        }
        const std::size_t key_line = li_;
        YamlNode key = flow_scalar(/*key=*/true);
        expect_more(open_line, "flow mapping ({ without })");
        if (line()[col_] != ':') fail(li_, "expected : after the key \"" + key.scalar + "\"");
        ++col_;
        if (!keys.insert(key.scalar).second) fail(key_line, "duplicate key \"" + key.scalar + "\"");
        expect_more(open_line, "flow mapping ({ without })");
        YamlNode value;
        value.line = static_cast<int>(li_) + 1;
        if (line()[col_] != ',' && line()[col_] != '}') value = flow_node();
        n.members.push_back(YamlMember{std::move(key.scalar), std::move(value)});
        expect_more(open_line, "flow mapping ({ without })");
        if (line()[col_] == ',') {
          ++col_;
        } else if (line()[col_] != '}') {
          fail(li_, "expected , or } in a flow mapping");
        }
      }
    }
    if (c == '[') {
      n.kind = YamlNode::Kind::sequence;
      ++col_;
      for (;;) {
        expect_more(open_line, "flow sequence ([ without ])");
        if (line()[col_] == ']') {
          ++col_;
          return n;
        }
        n.items.push_back(flow_node());
        expect_more(open_line, "flow sequence ([ without ])");
        if (line()[col_] == ',') {
          ++col_;
        } else if (line()[col_] != ']') {
          fail(li_, "expected , or ] in a flow sequence");
        }
      }
    }
    return flow_scalar(/*key=*/false);
  }

  YamlNode flow_scalar(bool key) {
    YamlNode n;
    n.line = static_cast<int>(li_) + 1;
    const char c = line()[col_];
    if (c == '"' || c == '\'') {
      n.scalar = quoted_scalar();
      n.quoted = true;
      return n;
    }
    refuse_indicator(li_, c);
    if (is_flow_indicator(c) || c == ':') fail(li_, std::string("expected a value, found ") + c);
    const std::string_view l = line();
    std::size_t end = col_;
    while (end < l.size()) {
      const char d = l[end];
      if (is_flow_indicator(d)) break;
      if (d == '#' && is_space(l[end - 1])) break;
      if (d == ':' && (end + 1 == l.size() || is_space(l[end + 1]) || is_flow_indicator(l[end + 1]) ||
                       key)) {
        break;
      }
      ++end;
    }
    std::string_view text = l.substr(col_, end - col_);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    n.scalar = std::string(text);
    col_ = end;
    return n;
  }

  // Collections inside collections, counted so that no document can recurse the parser (or
  // whoever walks its result) off the stack.
  static constexpr std::size_t kMaxDepth = 128;
  struct Nested {
    Parser& parser;
    Nested(Parser& p, std::size_t line) : parser(p) {
      if (++parser.depth_ > kMaxDepth) {
        fail(line, "collections nested more than " + std::to_string(kMaxDepth) + " levels deep");
      }
    }
    ~Nested() { --parser.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;
  };
  std::size_t depth_ = 0;

  std::vector<std::string_view> lines_;
  std::size_t li_ = 0;
  std::size_t col_ = 0;
};

}  // namespace

boost::system::result<YamlNode, std::string> parse_yaml_subset(std::string_view text) {
  try {
    Parser parser(text);
    return parser.document();
  } catch (const Failure& f) {
    return "line " + std::to_string(f.line + 1) + ": " + f.message;
  }
}

}  // namespace kwatch::base
