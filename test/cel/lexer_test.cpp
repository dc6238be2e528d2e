#include "cel/lexer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kwatch::cel {
namespace {

// The kinds of `source`'s tokens (without the end), failing the test on a lexing error.
std::vector<TokenKind> kinds(std::string_view source) {
  auto lexed = lex(source);
  EXPECT_TRUE(lexed.errors.empty()) << source << ": " << lexed.errors.front().message;
  std::vector<TokenKind> out;
  for (const auto& t : lexed.tokens) {
    if (t.kind != TokenKind::end) out.push_back(t.kind);
  }
  return out;
}

// The single literal token of `source`.
Token literal(std::string_view source) {
  auto lexed = lex(source);
  EXPECT_TRUE(lexed.errors.empty()) << source << ": "
                                    << (lexed.errors.empty() ? "" : lexed.errors[0].message);
  EXPECT_EQ(lexed.tokens.size(), 2u) << source;
  return lexed.tokens.front();
}

// The first error lexing `source` ("" when there is none).
std::string first_error(std::string_view source) {
  auto lexed = lex(source);
  return lexed.errors.empty() ? "" : lexed.errors.front().message;
}

using K = TokenKind;

TEST(CelLexer, OperatorsAndPunctuation) {
  EXPECT_EQ(kinds("a.b[0] && !c || d ? e : f"),
            (std::vector<K>{K::identifier, K::dot, K::identifier, K::left_bracket, K::int_literal,
                            K::right_bracket, K::logical_and, K::logical_not, K::identifier,
                            K::logical_or, K::identifier, K::question, K::identifier, K::colon,
                            K::identifier}));
  EXPECT_EQ(kinds("== != < <= > >= + - * / % in {} () ,"),
            (std::vector<K>{K::equal, K::not_equal, K::less, K::less_equal, K::greater,
                            K::greater_equal, K::plus, K::minus, K::star, K::slash, K::percent,
                            K::kw_in, K::left_brace, K::right_brace, K::left_paren,
                            K::right_paren, K::comma}));
  EXPECT_EQ(kinds("true false null // a comment\n x"),
            (std::vector<K>{K::kw_true, K::kw_false, K::kw_null, K::identifier}));
}

TEST(CelLexer, Numbers) {
  EXPECT_EQ(literal("0").kind, K::int_literal);
  EXPECT_EQ(literal("42").magnitude, 42u);
  EXPECT_EQ(literal("0x1F").magnitude, 31u);
  EXPECT_EQ(literal("7u").kind, K::uint_literal);
  EXPECT_EQ(literal("0xFFU").magnitude, 255u);
  EXPECT_EQ(literal("18446744073709551615u").magnitude, 18446744073709551615u);
  // The magnitude of the most negative int: the parser applies the minus.
  EXPECT_EQ(literal("9223372036854775808").magnitude, 9223372036854775808u);
  EXPECT_EQ(literal("0.0").kind, K::double_literal);
  EXPECT_DOUBLE_EQ(literal("2.5").number, 2.5);
  EXPECT_DOUBLE_EQ(literal(".5").number, 0.5);
  EXPECT_DOUBLE_EQ(literal("1e3").number, 1000.0);
  EXPECT_DOUBLE_EQ(literal("1.5E-2").number, 0.015);
  EXPECT_DOUBLE_EQ(literal("0e+0").number, 0.0);
  // A number then a member: `1.size()` is not a double.
  EXPECT_EQ(kinds("1.size()"), (std::vector<K>{K::int_literal, K::dot, K::identifier,
                                               K::left_paren, K::right_paren}));
  EXPECT_EQ(first_error("18446744073709551616"), "invalid int literal");
  EXPECT_EQ(first_error("18446744073709551616u"), "invalid uint literal");
  EXPECT_EQ(first_error("0x"), "invalid int literal");
}

TEST(CelLexer, StringsAndTheirEscapes) {
  EXPECT_EQ(literal(R"("")").value, "");
  EXPECT_EQ(literal(R"('""')").value, "\"\"");
  EXPECT_EQ(literal(R"('''x''x''')").value, "x''x");
  EXPECT_EQ(literal(R"("\"")").value, "\"");
  EXPECT_EQ(literal(R"("\\")").value, "\\");
  EXPECT_EQ(literal(R"(r"\\")").value, "\\\\");
  EXPECT_EQ(literal(R"(R'\d+')").value, "\\d+");
  EXPECT_EQ(literal(R"("\a\b\f\n\r\t\v\?\'\`")").value, "\a\b\f\n\r\t\v?'`");
  EXPECT_EQ(literal(R"("\303\277")").value, "\u00c3\u00bf");  // two code points
  EXPECT_EQ(literal(R"("\377")").value, "\u00ff");
  EXPECT_EQ(literal(R"("\xFF")").value, "\u00ff");
  EXPECT_EQ(literal(R"("\u00e9\U0001F600")").value, "\u00e9\U0001F600");
  EXPECT_EQ(literal("\"\"\"two\nlines\"\"\"").value, "two\nlines");
  EXPECT_EQ(literal("'caf\u00e9'").value, "caf\u00e9");
}

TEST(CelLexer, BytesAreOctets) {
  EXPECT_EQ(literal(R"(b"abc")").kind, K::bytes_literal);
  EXPECT_EQ(literal(R"(b"abc")").value, "abc");
  EXPECT_EQ(literal("b\"\u00ff\"").value, "\xc3\xbf");  // the UTF-8 of the character
  EXPECT_EQ(literal(R"(b"\303\277")").value, "\xc3\xbf");
  EXPECT_EQ(literal(R"(b"\377")").value, "\xff");  // one octet, not UTF-8
  EXPECT_EQ(literal(R"(B'\xFF')").value, "\xff");
  EXPECT_EQ(literal(R"(br'\x')").value, "\\x");
  EXPECT_EQ(literal(R"(Rb'\x')").value, "\\x");
  EXPECT_EQ(first_error(R"(b"\u00ff")"), "unicode escapes are not allowed in bytes literals");
}

TEST(CelLexer, IdentifiersAndReservedWords) {
  EXPECT_EQ(literal("_a9").text, "_a9");
  EXPECT_EQ(literal("rb").kind, K::identifier);  // a prefix without a quote is a name
  EXPECT_EQ(literal("bytes").kind, K::identifier);
  EXPECT_EQ(first_error("a.namespace"), "");
  EXPECT_TRUE(is_reserved_word("namespace"));
  EXPECT_FALSE(is_reserved_word("in"));
  EXPECT_EQ(literal("`a-b.c/d e`").value, "a-b.c/d e");
  EXPECT_EQ(first_error("`a!`"), "invalid quoted identifier");
}

TEST(CelLexer, BadInputIsReportedWhereItStarts) {
  auto lexed = lex("a # b");
  ASSERT_EQ(lexed.errors.size(), 1u);
  EXPECT_EQ(lexed.errors[0].offset, 2u);
  EXPECT_EQ(lexed.errors[0].message, "token recognition error at: '#'");
  EXPECT_EQ(first_error("'abc"), "unterminated string literal");
  EXPECT_EQ(first_error("'a\nb'"), "unterminated string literal");
  EXPECT_EQ(first_error(R"("\q")"), "invalid escape sequence");
  EXPECT_EQ(first_error(R"("\400")"), "invalid escape sequence");
  EXPECT_EQ(first_error(R"("\uD800")"), "invalid unicode code point");
  EXPECT_EQ(first_error(R"("\U00110000")"), "invalid unicode code point");
  EXPECT_EQ(first_error("a = b"), "token recognition error at: '='");
  EXPECT_EQ(first_error("a & b"), "token recognition error at: '&'");
  // Every token has an offset; the end is after the last byte.
  EXPECT_EQ(lex("ab + c").tokens.back().offset, 6u);
}

}  // namespace
}  // namespace kwatch::cel
