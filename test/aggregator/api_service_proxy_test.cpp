// The identity headers the aggregator sends an extension server: extra keys escaped as client-go
// escapes them, which the request header authenticator (auth/) unescapes.
#include "aggregator/api_service_proxy.hpp"

#include <gtest/gtest.h>

namespace kwatch::aggregator {
namespace {

TEST(ApiServiceProxy, ExtraKeysAreEscapedAsClientGoEscapesThem) {
  EXPECT_EQ(escape_extra_key("scopes"), "scopes");
  EXPECT_EQ(escape_extra_key("example.com/foo"), "example.com%2Ffoo");
  EXPECT_EQ(escape_extra_key("a%b"), "a%25b") << "'%' itself, so that unescaping is exact";
  EXPECT_EQ(escape_extra_key("a b:c"), "a%20b%3Ac");
  EXPECT_EQ(escape_extra_key("token-char!#$&'*+-.^_`|~"), "token-char!#$&'*+-.^_`|~");
}

}  // namespace
}  // namespace kwatch::aggregator
