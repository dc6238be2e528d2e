#include "client/watch_stream.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kwatch::client {
namespace {

std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

TEST(ChunkedDecoder, DecodesChunksSplitAtEveryByte) {
  const std::string body = chunk("hello ") + chunk("world\n") + "0\r\n\r\n";
  ChunkedDecoder d;
  std::string out;
  for (char c : body) ASSERT_TRUE(d.feed(std::string_view(&c, 1), out));
  EXPECT_EQ(out, "hello world\n");
  EXPECT_TRUE(d.done());
  EXPECT_EQ(d.truncation(), "");
}

TEST(ChunkedDecoder, ExtensionsAndTrailersAreSkipped) {
  ChunkedDecoder d;
  std::string out;
  ASSERT_TRUE(d.feed("5;name=value\r\nabcde\r\n0\r\nX-Trailer: 1\r\n\r\n", out));
  EXPECT_EQ(out, "abcde");
  EXPECT_TRUE(d.done());
}

TEST(ChunkedDecoder, MalformedFramingIsAnErrorNamingIt) {
  std::string out;
  {
    ChunkedDecoder d;
    auto r = d.feed("zz\r\n", out);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("invalid chunk size"), std::string::npos) << r.error();
    EXPECT_FALSE(d.feed("1\r\na\r\n", out)) << "a failed decoder stays failed";
  }
  {
    ChunkedDecoder d;
    auto r = d.feed("3\r\nabcdef\r\n", out);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("longer than its size"), std::string::npos) << r.error();
  }
  {
    ChunkedDecoder d(1024);
    auto r = d.feed("100000\r\n", out);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("over the limit"), std::string::npos) << r.error();
  }
  {
    ChunkedDecoder d;
    auto r = d.feed(std::string(10000, '1'), out);
    ASSERT_FALSE(r) << "a size line cannot grow without bound";
  }
  {
    ChunkedDecoder d;
    ASSERT_TRUE(d.feed("0\r\n\r\n", out));
    EXPECT_FALSE(d.feed("1\r\na\r\n", out)) << "nothing may follow the last chunk";
  }
}

TEST(ChunkedDecoder, AConnectionThatClosesEarlyIsTruncatedNotDone) {
  ChunkedDecoder d;
  std::string out;
  ASSERT_TRUE(d.feed("a\r\n0123", out));
  EXPECT_FALSE(d.done());
  EXPECT_NE(d.truncation().find("middle of a chunk (6 bytes missing)"), std::string::npos)
      << d.truncation();
  ChunkedDecoder between;
  ASSERT_TRUE(between.feed(chunk("x"), out));
  EXPECT_EQ(between.truncation(), "the connection closed without the last chunk");
}

TEST(EventDecoder, EventsSplitAnywhereComeOutWhole) {
  const std::string text =
      R"({"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"}}})"
      "\n"
      R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"9"}}})"
      "\r\n\n"
      R"({"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"10"}}})"
      "\n";
  for (std::size_t step : {1u, 3u, 64u, 4096u}) {
    EventDecoder d;
    std::vector<WatchEvent> events;
    for (std::size_t i = 0; i < text.size(); i += step) {
      ASSERT_TRUE(d.feed(std::string_view(text).substr(i, step), events));
    }
    ASSERT_EQ(events.size(), 3u) << "step " << step;
    EXPECT_EQ(events[0].type, EventType::added);
    EXPECT_EQ(events[0].resource_version(), "7");
    EXPECT_EQ(events[1].type, EventType::bookmark);
    EXPECT_EQ(events[1].resource_version(), "9");
    EXPECT_EQ(events[2].type, EventType::deleted);
    EXPECT_EQ(d.pending(), 0u);
  }
}

TEST(EventDecoder, AnErrorEventCarriesItsStatus) {
  EventDecoder d;
  std::vector<WatchEvent> events;
  ASSERT_TRUE(d.feed(R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"
                     "\n",
                     events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::error);
  EXPECT_EQ(events[0].object.at("code").as_int64(), 410);
  EXPECT_EQ(events[0].resource_version(), "");
}

TEST(EventDecoder, BadEventsAreErrorsThatNameWhatIsWrong) {
  struct Case {
    std::string line;
    std::string says;
  };
  const std::vector<Case> cases = {
      {R"({"type":"ADDED","object":{"metadata":)", "not JSON"},
      {R"(["ADDED"])", "not a JSON object"},
      {R"({"object":{}})", "without a type"},
      {R"({"type":"RENAMED","object":{}})", "unknown event type \"RENAMED\""},
      {R"({"type":"ADDED","object":"text"})", "without an object"},
      {R"({"type":"ADDED"})", "without an object"},
  };
  for (const auto& c : cases) {
    EventDecoder d;
    std::vector<WatchEvent> events;
    auto r = d.feed(c.line + "\n", events);
    ASSERT_FALSE(r) << c.line;
    EXPECT_NE(r.error().find(c.says), std::string::npos) << c.line << " -> " << r.error();
    EXPECT_TRUE(events.empty());
    EXPECT_FALSE(d.feed("{}\n", events)) << "a failed decoder stays failed";
  }
}

TEST(EventDecoder, AnEventWithoutEndIsBoundedInMemory) {
  EventDecoder d(1024);
  std::vector<WatchEvent> events;
  ASSERT_TRUE(d.feed(std::string(1000, ' '), events));
  auto r = d.feed(std::string(100, ' '), events);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("longer than 1024 bytes"), std::string::npos) << r.error();
  EventDecoder line_at_once(1024);
  EXPECT_FALSE(line_at_once.feed(std::string(2000, 'x') + "\n", events));
}

TEST(EventDecoder, DeeplyNestedObjectsAreAccepted) {
  std::string object = "{}";
  for (int i = 0; i < 100; ++i) object = R"({"a":)" + object + "}";
  auto event = decode_event(R"({"type":"ADDED","object":)" + object + "}");
  ASSERT_TRUE(event) << event.error();
}

}  // namespace
}  // namespace kwatch::client
