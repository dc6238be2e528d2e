#include "auth/token_file.hpp"

#include <gtest/gtest.h>

namespace kwatch::auth {
namespace {

TEST(TokenFile, ParsesKubesCsvWithQuotedGroups) {
  auto f = TokenFile::parse("abc123,alice,uid-1,\"dev,ops\"\n"
                            "def456, bob, uid-2\n"
                            "\n"
                            "ghi789,carol,uid-3,admins\r\n",
                            "tokens.csv");
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ((*f)->size(), 3u);
  auto alice = (*f)->authenticate("abc123");
  ASSERT_TRUE(alice);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->uid, "uid-1");
  EXPECT_EQ(alice->groups, (std::vector<std::string>{"dev", "ops", "system:authenticated"}));
  auto bob = (*f)->authenticate("def456");
  ASSERT_TRUE(bob);
  EXPECT_EQ(bob->name, "bob");
  EXPECT_EQ(bob->groups, std::vector<std::string>{"system:authenticated"});
  EXPECT_EQ((*f)->authenticate("ghi789")->groups,
            (std::vector<std::string>{"admins", "system:authenticated"}));
  EXPECT_FALSE((*f)->authenticate("nope"));
  EXPECT_FALSE((*f)->authenticate(""));
}

TEST(TokenFile, ARecordWithTooFewColumnsIsRefusedNamingTheFile) {
  auto f = TokenFile::parse("abc,alice\n", "/etc/tokens.csv");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error(), "token file '/etc/tokens.csv' must have at least 3 columns (token, user "
                       "name, user uid), found 2");
  EXPECT_FALSE(TokenFile::parse("abc,\"alice,uid\n", "t"));
  EXPECT_FALSE(TokenFile::load("/nonexistent/kwatch-tokens.csv"));
}

TEST(TokenFile, ATokenListedTwiceKeepsItsFirstRecord) {
  auto f = TokenFile::parse("t,first,1\nt,second,2\n", "t");
  ASSERT_TRUE(f);
  EXPECT_EQ((*f)->authenticate("t")->name, "first");
}

TEST(BearerToken, TakesTheTokenOfABearerHeader) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer  abc "), "abc");
  EXPECT_FALSE(bearer_token("Basic YWxpY2U6cHc="));
  EXPECT_FALSE(bearer_token("Bearer "));
  EXPECT_FALSE(bearer_token("Bearerabc"));
  EXPECT_FALSE(bearer_token(""));
}

}  // namespace
}  // namespace kwatch::auth
