// Fuzzes decode_continue. Properties: no crash or sanitizer report; a token that decodes to a
// non-empty start key re-encodes to a token that decodes to the same revision and key; and the
// key has no path traversal left (no "." or ".." segment, no leading or doubled '/').
// (A start key of "/" decodes to "" like in kube-apiserver, and "" is not encodable: the server
// never hands out a token for the prefix itself.)
#include "apimachinery/continue_token.hpp"
#include "test/fuzz/fuzz_support.hpp"

namespace {

bool traverses(std::string_view key) {
  if (key.starts_with('/') || key.ends_with('/')) return true;
  std::size_t i = 0;
  while (i <= key.size()) {
    auto j = key.find('/', i);
    if (j == std::string_view::npos) j = key.size();
    auto seg = key.substr(i, j - i);
    if (seg == "." || seg == "..") return true;
    if (seg.empty() && j < key.size()) return true;
    i = j + 1;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch::apimachinery;
  auto token = decode_continue(kwatch::fuzz::as_view(data, size));
  if (!token) {
    if (token.error().code != Errc::bad_request) kwatch::fuzz::fail("error is not bad_request");
    return 0;
  }
  if (token->rv == 0) kwatch::fuzz::fail("decoded a zero resourceVersion");
  if (token->start_key_relative.empty()) return 0;
  if (traverses(token->start_key_relative)) {
    kwatch::fuzz::fail("start key is not clean", token->start_key_relative);
  }
  const std::string encoded = encode_continue(token->rv, token->start_key_relative);
  auto back = decode_continue(encoded);
  if (!back) kwatch::fuzz::fail("re-encoded token does not decode", back.error().message);
  if (back->rv != token->rv || back->start_key_relative != token->start_key_relative) {
    kwatch::fuzz::fail("round trip changes the token", encoded);
  }
  return 0;
}
