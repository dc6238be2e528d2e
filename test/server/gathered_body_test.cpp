#include "server/gathered_body.hpp"

#include <gtest/gtest.h>

#include <string>

#include "watch/watch_types.hpp"

namespace kwatch::server {
namespace {

watch::ObjectPtr object(const std::string& json) {
  watch::CachedObject::Parts parts;
  parts.key = "/registry/configmaps/ns/x";
  parts.ns = "ns";
  parts.name = "x";
  parts.json = json;
  return watch::CachedObject::make(parts);
}

// A list of `n` items of about `size` bytes each, as the cache answers one.
ApiResponse list(int n, std::size_t size) {
  ApiResponse r;
  r.body = R"({"kind":"ConfigMapList","items":[)";
  for (int i = 0; i < n; ++i) {
    r.items.push_back(object(R"({"i":)" + std::to_string(i) + R"(,"v":")" +
                             std::string(size, 'a' + i % 26) + "\"}"));
  }
  r.tail = "]}";
  return r;
}

std::string assembled(const ApiResponse& r) {
  std::string out = r.body;
  for (std::size_t i = 0; i < r.items.size(); ++i) {
    if (i > 0) out += ',';
    out += r.items[i]->json;
  }
  return out + r.tail;
}

TEST(GatheredBody, ReadsTheListInOrderInStretchesOfAtMostMax) {
  for (int n : {0, 1, 2, 50}) {
    for (std::size_t max : {1u, 3u, 7u, 64u, 100000u}) {
      const ApiResponse r = list(n, 40);
      GatheredBody body(r);
      std::string out;
      while (!body.done()) {
        const std::string_view v = body.next(max);
        EXPECT_LE(v.size(), max);
        out += v;
      }
      EXPECT_TRUE(body.next(max).empty());
      EXPECT_EQ(out, assembled(r)) << n << " items, max " << max;
      // Done as soon as its last byte was read: no empty write after the last slice.
      GatheredBody again(r);
      std::size_t read = 0;
      while (read < out.size()) read += again.next(max).size();
      EXPECT_TRUE(again.done()) << n << " items, max " << max;
      EXPECT_EQ(GatheredBody::length(r), out.size());
    }
  }
}

TEST(GatheredBody, FillsSlicesOfExactlyTheLimitButTheLast) {
  const ApiResponse r = list(2000, 300);  // about 620 kB, a list the CPU flood reads
  for (std::size_t limit : {std::size_t{32 * 1024}, kWriteSlice}) {
    GatheredBody body(r);
    std::string out, slice;
    int slices = 0;
    while (!body.done()) {
      slice.clear();
      body.fill(slice, limit);
      if (!body.done()) {
        EXPECT_EQ(slice.size(), limit);
      }
      EXPECT_LE(slice.size(), limit);
      out += slice;
      ++slices;
    }
    EXPECT_EQ(out, assembled(r));
    EXPECT_EQ(slices, static_cast<int>((out.size() + limit - 1) / limit));
  }
}

TEST(GatheredBody, AnItemLargerThanTheLimitIsSplitAcrossSlices) {
  const ApiResponse r = list(3, 100000);
  GatheredBody body(r);
  std::string slice;
  body.fill(slice, 32 * 1024);
  EXPECT_EQ(slice.size(), 32u * 1024);
  EXPECT_EQ(slice.substr(0, r.body.size()), r.body);
}

}  // namespace
}  // namespace kwatch::server
