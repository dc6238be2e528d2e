// CEL's lexis (cel-spec, doc/langdef.md "Syntax"): identifiers, the reserved words, int, uint and
// double literals, quoted, triple-quoted, raw and bytes string literals with their escapes,
// backquoted field names, the operators and punctuation; whitespace and `//` comments between
// tokens. Literals are decoded here: a string token carries its code points as UTF-8, a bytes
// token its octets, a number its value (an int literal its magnitude: the parser applies a
// leading minus, so that -9223372036854775808 is expressible).
//
// Pure; no allocation beyond the tokens. Errors name the offset (in bytes) where they start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::cel {

enum class TokenKind {
  end,
  identifier,         // `text` is the name
  quoted_identifier,  // `a-b` in a field selection: `value` is the name without backquotes
  int_literal,        // `magnitude`
  uint_literal,       // `magnitude`
  double_literal,     // `number`
  string_literal,     // `value`: UTF-8
  bytes_literal,      // `value`: octets
  kw_true,
  kw_false,
  kw_null,
  kw_in,
  question,
  colon,
  logical_or,
  logical_and,
  logical_not,
  equal,
  not_equal,
  less,
  less_equal,
  greater,
  greater_equal,
  plus,
  minus,
  star,
  slash,
  percent,
  dot,
  left_bracket,
  right_bracket,
  left_paren,
  right_paren,
  left_brace,
  right_brace,
  comma,
};

struct Token {
  TokenKind kind = TokenKind::end;
  std::size_t offset = 0;  // where it starts in the source
  std::string_view text;   // as written
  std::uint64_t magnitude = 0;
  double number = 0;
  std::string value;
};

struct LexError {
  std::size_t offset = 0;
  std::string message;
};

struct Lexed {
  std::vector<Token> tokens;  // ends with a TokenKind::end token
  std::vector<LexError> errors;
};

// The tokens of `source`; on an error the lexer records it and goes on after the bad token, so
// that one pass reports what it can.
Lexed lex(std::string_view source);

// Whether `word` is one of the words CEL reserves (`if`, `package`, ...): the parser refuses it
// as an identifier or a global function; it may still name a field or a method.
bool is_reserved_word(std::string_view word);

// How a token kind is written, for messages ("'&&'", "identifier").
std::string_view token_name(TokenKind kind);

}  // namespace kwatch::cel
