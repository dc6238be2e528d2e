#include "registry/list_query.hpp"

#include "kinds/scheme.hpp"

#include <gtest/gtest.h>

namespace kwatch::registry {

using kinds::ResourceInfo;
using kinds::Scheme;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using apimachinery::encode_continue;

namespace {

const ResourceInfo& pods() {
  static const auto scheme = Scheme::builtin();
  return *scheme->find("", "v1", "pods");
}

std::string error_of(const ApiResult<CompiledListQuery>& r) {
  return r ? std::string() : r.error().message;
}

TEST(ListQuery, AnEmptyQueryIsAConsistentUnlimitedList) {
  auto q = compile_list_query(pods(), {});
  ASSERT_TRUE(q);
  EXPECT_FALSE(q->resource_version);
  EXPECT_EQ(q->limit, 0);
  EXPECT_FALSE(q->continue_token);
  EXPECT_FALSE(q->has_selector());
}

TEST(ListQuery, SelectorsAreParsedAndFieldsMustBeSelectable) {
  ListQuery raw;
  raw.label_selector = "app=web";
  raw.field_selector = "spec.nodeName=n1";
  auto q = compile_list_query(pods(), raw);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->has_selector());
  raw.field_selector = "spec.bogus=1";
  EXPECT_EQ(error_of(compile_list_query(pods(), raw)), "field label not supported: spec.bogus");
}

TEST(ListQuery, ResourceVersionRulesAreKubes) {
  ListQuery raw;
  raw.resource_version = "12";
  raw.resource_version_match = "Exact";
  auto q = compile_list_query(pods(), raw);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->resource_version, 12);
  EXPECT_EQ(q->match, ResourceVersionMatch::exact);
  raw.resource_version = "-1";
  EXPECT_EQ(error_of(compile_list_query(pods(), raw)), "invalid resource version: -1");
  raw.resource_version = "";
  EXPECT_EQ(error_of(compile_list_query(pods(), raw)),
            "resourceVersionMatch is forbidden unless resourceVersion is provided");
  raw.resource_version = "1";
  raw.resource_version_match = "Newest";
  EXPECT_EQ(error_of(compile_list_query(pods(), raw)), "unsupported resourceVersionMatch: Newest");
}

TEST(ListQuery, ContinueExcludesAResourceVersionAndMustDecode) {
  ListQuery raw;
  raw.continue_token = encode_continue(7, "default/a");
  raw.resource_version = "5";
  EXPECT_EQ(error_of(compile_list_query(pods(), raw)),
            "specifying resource version is not allowed when using continue");
  raw.resource_version = "0";
  auto q = compile_list_query(pods(), raw);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->continue_token->rv, 7);
  raw.continue_token = "garbage";
  EXPECT_FALSE(compile_list_query(pods(), raw));
  raw.continue_token = "";
  raw.limit = "-3";
  EXPECT_EQ(error_of(compile_list_query(pods(), raw)), "invalid value for limit: -3");
}

TEST(WatchQuery, SendInitialEventsNeedsNotOlderThanAndTheReverse) {
  ListQuery raw;
  raw.send_initial_events = "true";
  EXPECT_EQ(error_of(compile_watch_query(pods(), raw)),
            "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to "
            "NotOlderThan");
  raw.resource_version_match = "NotOlderThan";
  auto q = compile_watch_query(pods(), raw);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->send_initial_events);
  raw.send_initial_events = "";
  EXPECT_EQ(error_of(compile_watch_query(pods(), raw)),
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
  raw.send_initial_events = "maybe";
  EXPECT_EQ(error_of(compile_watch_query(pods(), raw)), "invalid value for sendInitialEvents: maybe");
}

TEST(WatchQuery, ANamedWatchSelectsTheNameAndTimeoutsAreClamped) {
  ListQuery raw;
  raw.timeout_seconds = "99999999999999";
  raw.allow_watch_bookmarks = "true";
  auto q = compile_watch_query(pods(), raw, "web-1");
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->has_selector());
  EXPECT_EQ(q->fields.fields(), std::vector<std::string>{"metadata.name"});
  EXPECT_EQ(q->timeout_seconds, std::int64_t{1} << 31);
  EXPECT_TRUE(q->allow_bookmarks);
  raw.timeout_seconds = "x";
  EXPECT_EQ(error_of(compile_watch_query(pods(), raw)), "invalid value for timeoutSeconds: x");
}

TEST(ListQuery, TooLargeResourceVersionIsAnAnsweredTimeout) {
  ApiError e = too_large_resource_version(10, 4);
  EXPECT_EQ(e.code, Errc::timeout);
  EXPECT_EQ(e.message, "Too large resource version: 10, current: 4");
  ASSERT_EQ(e.causes.size(), 1u);
  EXPECT_EQ(e.causes[0].type, "ResourceVersionTooLarge");
  EXPECT_EQ(e.retry_after_seconds, 1);
}

}  // namespace
}  // namespace kwatch::registry
