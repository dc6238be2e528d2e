#include "base/uuid.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace kwatch::base {
namespace {

TEST(Uuid, IsAVersion4UuidInLowercaseHex) {
  const std::regex shape("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (int i = 0; i < 200; ++i) {
    const std::string id = new_uuid();
    EXPECT_TRUE(std::regex_match(id, shape)) << id;
  }
}

TEST(Uuid, NoTwoAlike) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) EXPECT_TRUE(seen.insert(new_uuid()).second);
}

}  // namespace
}  // namespace kwatch::base
