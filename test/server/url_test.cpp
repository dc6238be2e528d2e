#include "server/url.hpp"

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

TEST(Url, SplitsPathIntoSegmentsAndDecodesQuery) {
  auto url = parse_url("/api/v1/namespaces/default/pods?labelSelector=app%3Dweb%2Ctier+in+(a)&limit=5");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->segments, (std::vector<std::string>{"api", "v1", "namespaces", "default", "pods"}));
  EXPECT_EQ(url->param("labelSelector"), "app=web,tier in (a)");
  EXPECT_EQ(url->param("limit"), "5");
  EXPECT_FALSE(url->param("watch"));
}

TEST(Url, ParameterWithoutValueIsPresentAndEmpty) {
  auto url = parse_url("/api/v1/pods?watch");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->param("watch"), "");
}

TEST(Url, MalformedEscapesAreRejected) {
  EXPECT_FALSE(parse_url("/api/%zz"));
  EXPECT_FALSE(parse_url("/api/%4"));
  EXPECT_FALSE(parse_url("/api?x=%"));
}

TEST(Url, EmptySegmentsAreDropped) {
  auto url = parse_url("//api///v1/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->segments, (std::vector<std::string>{"api", "v1"}));
}

}  // namespace
}  // namespace kwatch::server
