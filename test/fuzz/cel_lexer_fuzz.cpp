// Fuzzes cel::lex. Properties: no crash or sanitizer report; the tokens end with one end token
// at the source's length; every token lies within the source, in order, without overlapping;
// every error's offset is within the source.
#include "cel/lexer.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch::cel;
  const std::string_view source = kwatch::fuzz::as_view(data, size);
  const Lexed lexed = lex(source);
  if (lexed.tokens.empty() || lexed.tokens.back().kind != TokenKind::end ||
      lexed.tokens.back().offset != source.size()) {
    kwatch::fuzz::fail("the tokens do not end with the end token at the source's length");
  }
  std::size_t after = 0;  // where the previous token ended
  for (const Token& t : lexed.tokens) {
    if (t.kind == TokenKind::end) break;
    if (t.offset < after || t.offset + t.text.size() > source.size() ||
        t.text.data() != source.data() + t.offset) {
      kwatch::fuzz::fail("a token lies outside the source or overlaps the previous one");
    }
    after = t.offset + t.text.size();
  }
  for (const LexError& e : lexed.errors) {
    if (e.offset > source.size()) kwatch::fuzz::fail("an error's offset is past the source");
  }
  return 0;
}
