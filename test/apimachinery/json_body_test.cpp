#include "apimachinery/json_body.hpp"

#include <gtest/gtest.h>

namespace kwatch::apimachinery {


namespace {

using Paths = std::vector<std::string>;

TEST(DuplicateFields, AreReportedWithTheirPathsInKubesNotation) {
  EXPECT_EQ(duplicate_fields(R"({"metadata":{"name":"a","name":"b"}})"), Paths{"metadata.name"});
  EXPECT_EQ(duplicate_fields(R"({"spec":{"containers":[{"name":"a"},{"image":"x","image":"y"}]}})"),
            Paths{"spec.containers[1].image"});
  EXPECT_EQ(duplicate_fields(R"({"kind":"Pod","kind":"Pod","a":[[{"b":1,"b":2}]]})"),
            (Paths{"kind", "a[0][0].b"}));
}

TEST(DuplicateFields, SameNamesInDifferentObjectsAreNotDuplicates) {
  EXPECT_TRUE(duplicate_fields(R"({"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]})").empty());
  EXPECT_TRUE(duplicate_fields(R"({"a":[1,"x",null,true,{}],"b":2})").empty());
}

TEST(DuplicateFields, EscapedNamesCompareByTheirValue) {
  EXPECT_EQ(duplicate_fields(R"({"a":1,"\u0061":2})"), Paths{"a"});
}

TEST(DuplicateFields, ABodyThatDoesNotParseHasNone) {
  EXPECT_TRUE(duplicate_fields(R"({"a":1,"a":)").empty());
  EXPECT_TRUE(duplicate_fields("").empty());
}

TEST(DuplicateFields, OfAParsedBodyAreTheSame) {
  for (const char* text :
       {R"({"metadata":{"name":"a","name":"b"}})", R"({"a":{},"a":{}})",
        R"({"a":{"x":1},"a":{"y":1,"y":2}})", R"({"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]})",
        R"({"kind":"Pod","kind":"Pod","a":[[{"b":1,"b":2}]]})", R"({"a":1,"\u0061":2})",
        R"({"a":[1,"x",null,true,{}],"b":2})", R"({})"}) {
    auto parsed = parse_json_body(text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(duplicate_fields(text, parsed->as_object()), duplicate_fields(text)) << text;
  }
}

TEST(ParseJsonBody, KeepsTheLastOfDuplicateMembers) {
  auto v = parse_json_body(R"({"a":1,"a":2})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->as_object().at("a"), 2);
  EXPECT_EQ(v->as_object().size(), 1u);
}

}  // namespace
}  // namespace kwatch::apimachinery
