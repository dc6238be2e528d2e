#include "cel/lexer.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>

namespace kwatch::cel {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_part(char c) { return is_ident_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {}

  Lexed run() {
    for (;;) {
      skip_space_and_comments();
      if (pos_ >= src_.size()) break;
      lex_one();
    }
    Token end;
    end.offset = src_.size();
    out_.tokens.push_back(std::move(end));
    return std::move(out_);
  }

 private:
  char peek(std::size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }

  void error(std::size_t at, std::string message) {
    out_.errors.push_back({at, std::move(message)});
  }

  void skip_space_and_comments() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++pos_;
      } else if (c == '/' && peek(1) == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n' && src_[pos_] != '\r') ++pos_;
      } else {
        break;
      }
    }
  }

  Token& push(TokenKind kind, std::size_t start) {
    Token t;
    t.kind = kind;
    t.offset = start;
    t.text = src_.substr(start, pos_ - start);
    out_.tokens.push_back(std::move(t));
    return out_.tokens.back();
  }

  void lex_one() {
    const std::size_t start = pos_;
    const char c = src_[pos_];
    if (is_ident_start(c)) return lex_word(start);
    if (is_digit(c) || (c == '.' && is_digit(peek(1)))) return lex_number(start);
    if (c == '"' || c == '\'') return lex_string(start, false, false);
    if (c == '`') return lex_quoted_identifier(start);
    lex_operator(start);
  }

  void lex_word(std::size_t start) {
    // A string prefix: r, b, or both in either order, directly before a quote.
    std::size_t p = pos_;
    bool raw = false, bytes = false;
    for (int i = 0; i < 2 && p < src_.size(); ++i) {
      const char c = src_[p];
      if ((c == 'r' || c == 'R') && !raw) {
        raw = true;
      } else if ((c == 'b' || c == 'B') && !bytes) {
        bytes = true;
      } else {
        break;
      }
      ++p;
      if (p < src_.size() && (src_[p] == '"' || src_[p] == '\'')) {
        pos_ = p;
        return lex_string(start, raw, bytes);
      }
    }
    while (pos_ < src_.size() && is_ident_part(src_[pos_])) ++pos_;
    const std::string_view word = src_.substr(start, pos_ - start);
    if (word == "true") {
      push(TokenKind::kw_true, start);
    } else if (word == "false") {
      push(TokenKind::kw_false, start);
    } else if (word == "null") {
      push(TokenKind::kw_null, start);
    } else if (word == "in") {
      push(TokenKind::kw_in, start);
    } else {
      push(TokenKind::identifier, start);
    }
  }

  void lex_number(std::size_t start) {
    // Hexadecimal: 0x digits, an optional u.
    if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X')) {
      pos_ += 2;
      const std::size_t digits = pos_;
      while (pos_ < src_.size() && hex_value(src_[pos_]) >= 0) ++pos_;
      std::uint64_t v = 0;
      auto [end, ec] =
          std::from_chars(src_.data() + digits, src_.data() + pos_, v, 16);
      const bool bad = digits == pos_ || ec != std::errc();
      return finish_integer(start, v, bad);
    }
    while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    bool is_double = false;
    if (peek() == '.' && is_digit(peek(1))) {
      is_double = true;
      ++pos_;
      while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      std::size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_double = true;
        pos_ = p;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      }
    }
    if (is_double) {
      const std::string text(src_.substr(start, pos_ - start));
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      Token& t = push(TokenKind::double_literal, start);
      t.number = v;
      if (end != text.c_str() + text.size()) error(start, "invalid double literal");
      return;
    }
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(src_.data() + start, src_.data() + pos_, v, 10);
    finish_integer(start, v, ec != std::errc());
  }

  void finish_integer(std::size_t start, std::uint64_t v, bool bad) {
    const bool unsigned_literal = peek() == 'u' || peek() == 'U';
    if (unsigned_literal) ++pos_;
    Token& t = push(unsigned_literal ? TokenKind::uint_literal : TokenKind::int_literal, start);
    t.magnitude = v;
    if (bad) {
      error(start, unsigned_literal ? "invalid uint literal" : "invalid int literal");
    }
  }

  // After the prefix, at the opening quote.
  void lex_string(std::size_t start, bool raw, bool bytes) {
    const char quote = src_[pos_];
    const bool triple = peek(1) == quote && peek(2) == quote;
    pos_ += triple ? 3 : 1;
    std::string value;
    bool closed = false;
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == quote && (!triple || (peek(1) == quote && peek(2) == quote))) {
        pos_ += triple ? 3 : 1;
        closed = true;
        break;
      }
      if (!triple && (c == '\n' || c == '\r')) break;
      if (c == '\\' && !raw) {
        if (!escape(value, bytes)) {
          // Skip the rest of the literal: one error for it.
          while (pos_ < src_.size() && src_[pos_] != quote && src_[pos_] != '\n') ++pos_;
          if (pos_ < src_.size() && src_[pos_] == quote) ++pos_;
          push(bytes ? TokenKind::bytes_literal : TokenKind::string_literal, start);
          return;
        }
        continue;
      }
      value.push_back(c);
      ++pos_;
    }
    Token& t = push(bytes ? TokenKind::bytes_literal : TokenKind::string_literal, start);
    t.value = std::move(value);
    if (!closed) error(start, "unterminated string literal");
  }

  // At a backslash: appends what the escape stands for; false (with an error) if it is invalid.
  bool escape(std::string& out, bool bytes) {
    const std::size_t at = pos_;
    const char e = peek(1);
    auto simple = [&](char v) {
      out.push_back(v);
      pos_ += 2;
      return true;
    };
    switch (e) {
      case '\\': return simple('\\');
      case '?': return simple('?');
      case '"': return simple('"');
      case '\'': return simple('\'');
      case '`': return simple('`');
      case 'a': return simple('\a');
      case 'b': return simple('\b');
      case 'f': return simple('\f');
      case 'n': return simple('\n');
      case 'r': return simple('\r');
      case 't': return simple('\t');
      case 'v': return simple('\v');
      default: break;
    }
    std::size_t digits = 0;
    int base = 16;
    if (e == 'x' || e == 'X') {
      digits = 2;
    } else if (e == 'u') {
      digits = 4;
    } else if (e == 'U') {
      digits = 8;
    } else if (e >= '0' && e <= '3') {
      digits = 3;
      base = 8;
    } else {
      error(at, "invalid escape sequence");
      return false;
    }
    if ((e == 'u' || e == 'U') && bytes) {
      error(at, "unicode escapes are not allowed in bytes literals");
      return false;
    }
    const std::size_t first = base == 8 ? pos_ + 1 : pos_ + 2;
    std::uint32_t cp = 0;
    for (std::size_t i = 0; i < digits; ++i) {
      const char d = first + i < src_.size() ? src_[first + i] : '\0';
      const int v = base == 8 ? (d >= '0' && d <= '7' ? d - '0' : -1) : hex_value(d);
      if (v < 0) {
        error(at, "invalid escape sequence");
        return false;
      }
      cp = cp * static_cast<std::uint32_t>(base) + static_cast<std::uint32_t>(v);
    }
    pos_ = first + digits;
    if (bytes && (e == 'x' || e == 'X' || base == 8)) {
      out.push_back(static_cast<char>(cp));  // an octet, not a code point
      return true;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      error(at, "invalid unicode code point");
      return false;
    }
    append_utf8(out, cp);
    return true;
  }

  void lex_quoted_identifier(std::size_t start) {
    ++pos_;
    std::string name;
    while (pos_ < src_.size() && src_[pos_] != '`') {
      const char c = src_[pos_];
      if (!(is_ident_part(c) || c == '.' || c == '-' || c == '/' || c == ' ')) break;
      name.push_back(c);
      ++pos_;
    }
    const bool closed = pos_ < src_.size() && src_[pos_] == '`';
    if (closed) ++pos_;
    Token& t = push(TokenKind::quoted_identifier, start);
    t.value = std::move(name);
    if (!closed || t.value.empty()) error(start, "invalid quoted identifier");
  }

  void lex_operator(std::size_t start) {
    const char c = src_[pos_];
    const char n = peek(1);
    auto two = [&](TokenKind kind) {
      pos_ += 2;
      push(kind, start);
    };
    auto one = [&](TokenKind kind) {
      pos_ += 1;
      push(kind, start);
    };
    switch (c) {
      case '|':
        if (n == '|') return two(TokenKind::logical_or);
        break;
      case '&':
        if (n == '&') return two(TokenKind::logical_and);
        break;
      case '=':
        if (n == '=') return two(TokenKind::equal);
        break;
      case '!': return n == '=' ? two(TokenKind::not_equal) : one(TokenKind::logical_not);
      case '<': return n == '=' ? two(TokenKind::less_equal) : one(TokenKind::less);
      case '>': return n == '=' ? two(TokenKind::greater_equal) : one(TokenKind::greater);
      case '?': return one(TokenKind::question);
      case ':': return one(TokenKind::colon);
      case '+': return one(TokenKind::plus);
      case '-': return one(TokenKind::minus);
      case '*': return one(TokenKind::star);
      case '/': return one(TokenKind::slash);
      case '%': return one(TokenKind::percent);
      case '.': return one(TokenKind::dot);
      case '[': return one(TokenKind::left_bracket);
      case ']': return one(TokenKind::right_bracket);
      case '(': return one(TokenKind::left_paren);
      case ')': return one(TokenKind::right_paren);
      case '{': return one(TokenKind::left_brace);
      case '}': return one(TokenKind::right_brace);
      case ',': return one(TokenKind::comma);
      default: break;
    }
    // One unexpected character (a whole UTF-8 sequence counts as one).
    std::size_t len = 1;
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0xF0) {
      len = 4;
    } else if (b >= 0xE0) {
      len = 3;
    } else if (b >= 0xC0) {
      len = 2;
    }
    pos_ = std::min(src_.size(), pos_ + len);
    error(start, "token recognition error at: '" + std::string(src_.substr(start, pos_ - start)) +
                     "'");
  }

  std::string_view src_;
  std::size_t pos_ = 0;
  Lexed out_;
};

}  // namespace

Lexed lex(std::string_view source) { return Lexer(source).run(); }

bool is_reserved_word(std::string_view word) {
  // Reserved to ease embedding CEL in other languages: never a variable or a global function,
  // though a field or a method may carry the name.
  constexpr std::string_view kReserved[] = {
      "as",  "break",  "const",  "continue",  "else",   "for", "function", "if",    "import",
      "let", "loop",   "package", "namespace", "return", "var", "void",     "while"};
  return std::find(std::begin(kReserved), std::end(kReserved), word) != std::end(kReserved);
}

std::string_view token_name(TokenKind kind) {
  switch (kind) {
    case TokenKind::end: return "end of input";
    case TokenKind::identifier: return "identifier";
    case TokenKind::quoted_identifier: return "quoted identifier";
    case TokenKind::int_literal: return "int literal";
    case TokenKind::uint_literal: return "uint literal";
    case TokenKind::double_literal: return "double literal";
    case TokenKind::string_literal: return "string literal";
    case TokenKind::bytes_literal: return "bytes literal";
    case TokenKind::kw_true: return "'true'";
    case TokenKind::kw_false: return "'false'";
    case TokenKind::kw_null: return "'null'";
    case TokenKind::kw_in: return "'in'";
    case TokenKind::question: return "'?'";
    case TokenKind::colon: return "':'";
    case TokenKind::logical_or: return "'||'";
    case TokenKind::logical_and: return "'&&'";
    case TokenKind::logical_not: return "'!'";
    case TokenKind::equal: return "'=='";
    case TokenKind::not_equal: return "'!='";
    case TokenKind::less: return "'<'";
    case TokenKind::less_equal: return "'<='";
    case TokenKind::greater: return "'>'";
    case TokenKind::greater_equal: return "'>='";
    case TokenKind::plus: return "'+'";
    case TokenKind::minus: return "'-'";
    case TokenKind::star: return "'*'";
    case TokenKind::slash: return "'/'";
    case TokenKind::percent: return "'%'";
    case TokenKind::dot: return "'.'";
    case TokenKind::left_bracket: return "'['";
    case TokenKind::right_bracket: return "']'";
    case TokenKind::left_paren: return "'('";
    case TokenKind::right_paren: return "')'";
    case TokenKind::left_brace: return "'{'";
    case TokenKind::right_brace: return "'}'";
    case TokenKind::comma: return "','";
  }
  return "?";
}

}  // namespace kwatch::cel
