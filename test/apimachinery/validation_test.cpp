#include "apimachinery/validation.hpp"

#include <gtest/gtest.h>

namespace kwatch::apimachinery {


namespace {

using Errors = std::vector<std::string>;

constexpr const char* kSubdomainMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

TEST(Validation, AcceptsValidSubdomains) {
  EXPECT_TRUE(dns1123_subdomain_errors("example.com").empty());
  EXPECT_TRUE(dns1123_subdomain_errors("a").empty());
  EXPECT_TRUE(dns1123_subdomain_errors("0-a.b-1").empty());
  EXPECT_TRUE(dns1123_subdomain_errors(std::string(253, 'a')).empty());
}

TEST(Validation, RejectsAnUppercaseSubdomainWithTheKubernetesMessage) {
  EXPECT_EQ(dns1123_subdomain_errors("Foo"), Errors{kSubdomainMsg});
  EXPECT_EQ(dns1123_subdomain_errors(""), Errors{kSubdomainMsg});
  EXPECT_EQ(dns1123_subdomain_errors("a..b"), Errors{kSubdomainMsg});
  EXPECT_EQ(dns1123_subdomain_errors("-a"), Errors{kSubdomainMsg});
  EXPECT_EQ(dns1123_subdomain_errors("a-"), Errors{kSubdomainMsg});
}

TEST(Validation, ReportsBothLengthAndFormatOfAnOverlongSubdomain) {
  auto errs = dns1123_subdomain_errors(std::string(254, 'a'));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "must be no more than 253 characters");
  errs = dns1123_subdomain_errors(std::string(254, 'A'));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[1], kSubdomainMsg);
}

TEST(Validation, LabelsRejectDotsWithTheirOwnMessage) {
  EXPECT_TRUE(dns1123_label_errors("my-name").empty());
  EXPECT_EQ(dns1123_label_errors("a.b"), Errors{"must not contain dots"});
  EXPECT_EQ(dns1123_label_errors("A")[0],
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
  EXPECT_EQ(dns1123_label_errors(std::string(64, 'a')),
            Errors{"must be no more than 63 characters"});
}

TEST(Validation, QualifiedNamesAcceptPrefixesAndMixedCase) {
  EXPECT_TRUE(qualified_name_errors("app").empty());
  EXPECT_TRUE(qualified_name_errors("MyName").empty());
  EXPECT_TRUE(qualified_name_errors("app.kubernetes.io/name").empty());
  EXPECT_TRUE(qualified_name_errors("a_b-c.d").empty());
}

TEST(Validation, QualifiedNameErrorsNameTheFailingPart) {
  EXPECT_EQ(qualified_name_errors("/a"), Errors{"prefix part must be non-empty"});
  auto errs = qualified_name_errors("a/");
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0], "name part must be non-empty");
  EXPECT_EQ(errs[1],
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
            "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')");
  errs = qualified_name_errors("Foo.com/bar");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rfind("prefix part a lowercase RFC 1123 subdomain", 0), 0u);
  errs = qualified_name_errors("a/b/c");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0],
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
  EXPECT_EQ(qualified_name_errors(std::string(64, 'a')),
            Errors{"name part must be no more than 63 characters"});
}

TEST(Validation, LabelValuesMayBeEmpty) {
  EXPECT_TRUE(label_value_errors("").empty());
  EXPECT_TRUE(label_value_errors("v1.2_3-x").empty());
  EXPECT_EQ(label_value_errors("-a"),
            Errors{"a valid label must be an empty string or consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                   "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                   "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"});
  EXPECT_EQ(label_value_errors(std::string(64, 'a')),
            Errors{"must be no more than 63 characters"});
}

TEST(Validation, FieldInvalidMessagesQuoteTheValueLikeGo) {
  EXPECT_EQ(field_invalid_message("metadata.name", "Foo", "bad"),
            "metadata.name: Invalid value: \"Foo\": bad");
  EXPECT_EQ(go_quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(go_quote(std::string_view("\x01", 1)), "\"\\x01\"");
}

}  // namespace
}  // namespace kwatch::apimachinery
