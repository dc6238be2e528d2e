#include "apimachinery/field_selector.hpp"

#include <gtest/gtest.h>

#include <map>

namespace kwatch::apimachinery {

using base::Errc;

namespace {

FieldSelector parse_ok(std::string_view text) {
  auto r = parse_field_selector(text);
  EXPECT_TRUE(r.has_value()) << text << ": " << (r ? "" : r.error().message);
  return r ? *r : FieldSelector{};
}

std::string parse_error(std::string_view text) {
  auto r = parse_field_selector(text);
  EXPECT_FALSE(r.has_value()) << text;
  if (r) return {};
  EXPECT_EQ(r.error().code, Errc::bad_request);
  return r.error().message;
}

FieldLookup lookup(std::map<std::string, std::string, std::less<>> fields) {
  return [fields = std::move(fields)](std::string_view f) -> std::optional<std::string> {
    auto it = fields.find(f);
    if (it == fields.end()) return std::nullopt;
    return it->second;
  };
}

TEST(FieldSelector, EmptyTextSelectsEverything) {
  auto s = parse_ok("");
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.matches(lookup({})));
  EXPECT_TRUE(parse_ok(",,").empty());
}

TEST(FieldSelector, EqualityAndInequalityCompareStrings) {
  auto pod = lookup({{"metadata.name", "web-0"}, {"status.phase", "Running"}});
  EXPECT_TRUE(parse_ok("metadata.name=web-0").matches(pod));
  EXPECT_TRUE(parse_ok("metadata.name==web-0").matches(pod));
  EXPECT_FALSE(parse_ok("metadata.name=web-1").matches(pod));
  EXPECT_TRUE(parse_ok("status.phase!=Pending").matches(pod));
  EXPECT_FALSE(parse_ok("status.phase!=Running").matches(pod));
  EXPECT_TRUE(parse_ok("metadata.name=web-0,status.phase=Running").matches(pod));
  EXPECT_FALSE(parse_ok("metadata.name=web-0,status.phase=Failed").matches(pod));
}

TEST(FieldSelector, AMissingFieldComparesAsEmpty) {
  auto pod = lookup({});
  EXPECT_TRUE(parse_ok("spec.nodeName=").matches(pod));
  EXPECT_TRUE(parse_ok("spec.nodeName!=node-1").matches(pod));
  EXPECT_FALSE(parse_ok("spec.nodeName=node-1").matches(pod));
}

TEST(FieldSelector, ValuesUnescapeBackslashCommaAndEquals) {
  auto s = parse_ok(R"(metadata.name=a\,b\=c\\d,x=y)");
  ASSERT_EQ(s.requirements().size(), 2u);
  EXPECT_EQ(s.exact_value("metadata.name"), R"(a,b=c\d)");
  EXPECT_EQ(s.exact_value("x"), "y");
  EXPECT_EQ(s.to_string(), R"(metadata.name=a\,b\=c\\d,x=y)");
}

TEST(FieldSelector, TheFirstOperatorSplitsTheTerm) {
  auto s = parse_ok("a!=b");
  ASSERT_EQ(s.requirements().size(), 1u);
  EXPECT_FALSE(s.requirements()[0].equals);
  EXPECT_EQ(s.requirements()[0].field, "a");
  EXPECT_EQ(s.requirements()[0].value, "b");
  EXPECT_EQ(parse_ok("a==b").requirements()[0].value, "b");
  EXPECT_EQ(parse_error("a=b=c"), "invalid field selector: unescapedRune character in value: 61");
}

TEST(FieldSelector, ExactValueIgnoresInequalities) {
  auto s = parse_ok("a!=x,b=y");
  EXPECT_EQ(s.exact_value("a"), std::nullopt);
  EXPECT_EQ(s.exact_value("b"), "y");
}

TEST(FieldSelector, FieldsListsEachFieldOnce) {
  auto s = parse_ok("spec.nodeName=n,metadata.name!=a,metadata.name!=b");
  EXPECT_EQ(s.fields(), (std::vector<std::string>{"metadata.name", "spec.nodeName"}));
}

TEST(FieldSelector, MalformedTermsAreRejectedWithKubernetesTexts) {
  EXPECT_EQ(parse_error("metadata.name"),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'");
  EXPECT_EQ(parse_error("a=x,b"), "invalid selector: 'a=x,b'; can't understand 'b'");
  EXPECT_EQ(parse_error(R"(a=x\y)"), R"(invalid field selector: invalid escape sequence: \y)");
  EXPECT_EQ(parse_error(R"(a=x\)"), R"(invalid field selector: invalid escape sequence: \)");
}

TEST(FieldSelector, ATermWithNeitherFieldNorValueIsDropped) {
  EXPECT_TRUE(parse_ok("=").empty());
}

TEST(FieldSelector, EscapeValueIsTheInverseOfParsing) {
  EXPECT_EQ(escape_field_value(R"(a,b=c\)"), R"(a\,b\=c\\)");
}

}  // namespace
}  // namespace kwatch::apimachinery
