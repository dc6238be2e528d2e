#include "apimachinery/continue_token.hpp"

#include <gtest/gtest.h>

namespace kwatch::apimachinery {

using base::Errc;

namespace {

// Unpadded base64url, to build hand-made tokens.
std::string b64(std::string_view in) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    unsigned n = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 |
                 (unsigned char)in[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(n >> s) & 63];
  }
  if (in.size() - i == 1) {
    unsigned n = (unsigned char)in[i] << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
  } else if (in.size() - i == 2) {
    unsigned n = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
  }
  return out;
}

std::string decode_error(std::string_view token) {
  auto r = decode_continue(token);
  EXPECT_FALSE(r.has_value()) << token;
  if (r) return {};
  EXPECT_EQ(r.error().code, Errc::bad_request);
  return r.error().message;
}

TEST(ContinueToken, EncodesLikeKubeApiserver) {
  // base64.RawURLEncoding of {"v":"meta.k8s.io/v1","rv":12,"start":"default/b\u0000"}.
  EXPECT_EQ(encode_continue(12, std::string_view("default/b\0", 10)),
            b64(R"({"v":"meta.k8s.io/v1","rv":12,"start":"default/b\u0000"})"));
  EXPECT_EQ(encode_continue(5, "a"), "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NSwic3RhcnQiOiJhIn0");
}

TEST(ContinueToken, RoundTrips) {
  std::string key("ns/name\0", 8);
  auto r = decode_continue(encode_continue(42, key));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->rv, 42);
  EXPECT_EQ(r->start_key_relative, key);
}

TEST(ContinueToken, AcceptsANegativeRevisionForTheLatestState) {
  auto r = decode_continue(encode_continue(-1, "x"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rv, -1);
}

TEST(ContinueToken, AcceptsALeadingSlashAndStripsIt) {
  auto r = decode_continue(b64(R"({"v":"meta.k8s.io/v1","rv":3,"start":"/a/b"})"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->start_key_relative, "a/b");
}

TEST(ContinueToken, RejectsBadBase64) {
  EXPECT_EQ(decode_error("abc$"),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte "
            "3");
  EXPECT_EQ(decode_error("YWJj="),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte "
            "4");
  EXPECT_EQ(decode_error("YWJjZ"),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte "
            "4");
}

TEST(ContinueToken, RejectsNonJson) {
  auto msg = decode_error(b64("not json"));
  EXPECT_EQ(msg.rfind("invalid continue token: continue key is not valid: ", 0), 0u) << msg;
}

TEST(ContinueToken, RejectsAnUnknownVersion) {
  EXPECT_EQ(decode_error(b64(R"({"v":"v2","rv":3,"start":"a"})")),
            "invalid continue token: continue key is not valid: server does not recognize this "
            "encoded version v2");
}

TEST(ContinueToken, RejectsAZeroRevision) {
  EXPECT_EQ(decode_error(b64(R"({"v":"meta.k8s.io/v1","rv":0,"start":"a"})")),
            "invalid continue token: continue key is not valid: incorrect encoded start "
            "resourceVersion (version meta.k8s.io/v1)");
}

TEST(ContinueToken, RejectsAnEmptyStartKey) {
  EXPECT_EQ(decode_error(b64(R"({"v":"meta.k8s.io/v1","rv":3,"start":""})")),
            "invalid continue token: continue key is not valid: encoded start key empty (version "
            "meta.k8s.io/v1)");
}

TEST(ContinueToken, RejectsPathTraversal) {
  EXPECT_EQ(decode_error(b64(R"({"v":"meta.k8s.io/v1","rv":3,"start":"../secrets/x"})")),
            "invalid continue token: continue key is not valid: ../secrets/x");
  EXPECT_EQ(decode_error(b64(R"({"v":"meta.k8s.io/v1","rv":3,"start":"a//b"})")),
            "invalid continue token: continue key is not valid: a//b");
  EXPECT_EQ(decode_error(b64(R"({"v":"meta.k8s.io/v1","rv":3,"start":"a/./b"})")),
            "invalid continue token: continue key is not valid: a/./b");
}

TEST(ContinueToken, RejectsWronglyTypedFields) {
  EXPECT_EQ(decode_error(b64(R"({"v":"meta.k8s.io/v1","rv":"3","start":"a"})")),
            "invalid continue token: continue key is not valid: json: cannot unmarshal string "
            "into Go struct field continueToken.rv of type int64");
  EXPECT_EQ(decode_error(b64("[]")),
            "invalid continue token: continue key is not valid: json: cannot unmarshal array "
            "into Go value of type storage.continueToken");
}

}  // namespace
}  // namespace kwatch::apimachinery
