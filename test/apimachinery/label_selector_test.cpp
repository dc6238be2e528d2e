#include "apimachinery/label_selector.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::apimachinery {

using base::Errc;

namespace {

namespace json = boost::json;

LabelSelector parse_ok(std::string_view text) {
  auto r = parse_label_selector(text);
  EXPECT_TRUE(r.has_value()) << text << ": " << (r ? "" : r.error().message);
  return r ? *r : LabelSelector{};
}

std::string parse_error(std::string_view text) {
  auto r = parse_label_selector(text);
  EXPECT_FALSE(r.has_value()) << text;
  if (r) return {};
  EXPECT_EQ(r.error().code, Errc::bad_request);
  return r.error().message;
}

bool matches(std::string_view selector, std::string_view labels_json) {
  auto labels = json::parse(labels_json).as_object();
  return parse_ok(selector).matches(&labels);
}

TEST(LabelSelector, EmptyTextSelectsEverything) {
  auto s = parse_ok("");
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.matches(nullptr));
  EXPECT_TRUE(parse_ok("  \t ").empty());
}

TEST(LabelSelector, EqualityOperatorsMatchExactValues) {
  EXPECT_TRUE(matches("app=web", R"({"app":"web"})"));
  EXPECT_TRUE(matches("app==web", R"({"app":"web"})"));
  EXPECT_FALSE(matches("app=web", R"({"app":"db"})"));
  EXPECT_FALSE(matches("app=web", R"({})"));
  EXPECT_TRUE(matches("app!=web", R"({"app":"db"})"));
  EXPECT_TRUE(matches("app!=web", R"({})"));
  EXPECT_FALSE(matches("app!=web", R"({"app":"web"})"));
}

TEST(LabelSelector, AMissingLabelMapBehavesLikeNoLabels) {
  EXPECT_FALSE(parse_ok("app=web").matches(nullptr));
  EXPECT_TRUE(parse_ok("app!=web").matches(nullptr));
  EXPECT_TRUE(parse_ok("!app").matches(nullptr));
}

TEST(LabelSelector, SetOperatorsMatchMembership) {
  EXPECT_TRUE(matches("env in (prod,staging)", R"({"env":"prod"})"));
  EXPECT_FALSE(matches("env in (prod,staging)", R"({"env":"dev"})"));
  EXPECT_FALSE(matches("env in (prod)", R"({})"));
  EXPECT_TRUE(matches("env notin (prod,staging)", R"({"env":"dev"})"));
  EXPECT_TRUE(matches("env notin (prod)", R"({})"));
  EXPECT_FALSE(matches("env notin (prod)", R"({"env":"prod"})"));
}

TEST(LabelSelector, ExistenceOperatorsLookOnlyAtKeys) {
  EXPECT_TRUE(matches("app", R"({"app":""})"));
  EXPECT_FALSE(matches("app", R"({"other":"x"})"));
  EXPECT_TRUE(matches("!app", R"({"other":"x"})"));
  EXPECT_FALSE(matches("!app", R"({"app":"x"})"));
}

TEST(LabelSelector, NumericComparisonsUseGreaterAndLessSigns) {
  EXPECT_TRUE(matches("tier>5", R"({"tier":"6"})"));
  EXPECT_FALSE(matches("tier>5", R"({"tier":"5"})"));
  EXPECT_FALSE(matches("tier>5", R"({"tier":"abc"})"));
  EXPECT_FALSE(matches("tier>5", R"({})"));
  EXPECT_TRUE(matches("tier<5", R"({"tier":"-3"})"));
  EXPECT_FALSE(matches("tier<5", R"({"tier":"10"})"));
}

TEST(LabelSelector, CommaMeansAndAndBlanksAreTolerated) {
  auto s = parse_ok(" app = web ,  env in ( prod , dev ) , !canary ");
  EXPECT_EQ(s.requirements().size(), 3u);
  json::object l = json::parse(R"({"app":"web","env":"dev"})").as_object();
  EXPECT_TRUE(s.matches(&l));
  l["canary"] = "yes";
  EXPECT_FALSE(s.matches(&l));
}

TEST(LabelSelector, EmptyValuesAreAllowedWhereKubernetesAllowsThem) {
  EXPECT_TRUE(matches("app=", R"({"app":""})"));
  EXPECT_TRUE(matches("app in ()", R"({"app":""})"));
  auto s = parse_ok("x in (foo,,baz),y,z notin ()");
  ASSERT_EQ(s.requirements().size(), 3u);
  EXPECT_EQ(s.requirements()[0].values, (std::vector<std::string>{"", "baz", "foo"}));
  EXPECT_EQ(s.to_string(), "x in (,baz,foo),y,z notin ()");
  EXPECT_EQ(parse_ok("a in (x,)").requirements()[0].values, (std::vector<std::string>{"", "x"}));
}

TEST(LabelSelector, KeywordsAreValuesInsideParentheses) {
  EXPECT_TRUE(matches("x in (in,notin)", R"({"x":"notin"})"));
  EXPECT_TRUE(matches("x=in", R"({"x":"in"})"));
}

TEST(LabelSelector, RequirementsAreSortedByKeyAndPrintCanonically) {
  auto s = parse_ok("z=1,a!=2,m notin (b,a),!d,k,n>3");
  EXPECT_EQ(s.to_string(), "a!=2,!d,k,m notin (a,b),n>3,z=1");
  EXPECT_EQ(parse_ok("app==web").to_string(), "app==web");
}

TEST(LabelSelector, ExactValueReportsSingleValuedEqualities) {
  auto s = parse_ok("app=web,env in (prod),tier in (a,b),x!=y");
  EXPECT_EQ(s.exact_value("app"), "web");
  EXPECT_EQ(s.exact_value("env"), "prod");
  EXPECT_EQ(s.exact_value("tier"), std::nullopt);
  EXPECT_EQ(s.exact_value("x"), std::nullopt);
  EXPECT_EQ(s.exact_value("nope"), std::nullopt);
}

TEST(LabelSelector, NonStringLabelValuesCountAsAbsent) {
  EXPECT_FALSE(matches("app", R"({"app":1})"));
}

TEST(LabelSelector, PrefixedKeysAreAccepted) {
  EXPECT_TRUE(matches("app.kubernetes.io/name=web", R"({"app.kubernetes.io/name":"web"})"));
}

TEST(LabelSelector, SyntaxErrorsCarryTheKubernetesText) {
  EXPECT_EQ(parse_error("app=web,"), "found '', expected: identifier after ','");
  EXPECT_EQ(parse_error(",app"), "found ',', expected: !, identifier, or 'end of string'");
  EXPECT_EQ(parse_error("app web"),
            "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt");
  EXPECT_EQ(parse_error("app gt 5"),
            "unable to parse requirement: found 'gt', expected: in, notin, =, ==, !=, gt, lt");
  EXPECT_EQ(parse_error("app in a"), "unable to parse requirement: found 'a' expected: '('");
  EXPECT_EQ(parse_error("app in (a b)"),
            "unable to parse requirement: found 'b', expected: ',' or ')'");
  EXPECT_EQ(parse_error("app in (=)"),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier");
  EXPECT_EQ(parse_error("app=(x)"), "unable to parse requirement: found '(', expected: identifier");
  EXPECT_EQ(parse_error("!app=x"), "found '=', expected: ',' or 'end of string'");
  EXPECT_EQ(parse_error("!"), "unable to parse requirement: found '', expected: identifier");
  EXPECT_EQ(parse_error("a=b c"), "found 'c', expected: ',' or 'end of string'");
}

TEST(LabelSelector, InvalidKeysAndValuesAreRejected) {
  EXPECT_EQ(parse_error("-app=x"),
            "unable to parse requirement: <nil>: Invalid value: \"-app\": name part must consist "
            "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')");
  EXPECT_EQ(parse_error("app=a@b"),
            "unable to parse requirement: values[0][app]: Invalid value: \"a@b\": a valid label "
            "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
            "or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
  EXPECT_EQ(parse_error("n>abc"),
            "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' "
            "operators, the value must be an integer");
  // strconv.ParseInt accepts "-5", the label value rules do not.
  EXPECT_EQ(parse_error("n<-5").rfind("unable to parse requirement: values[0][n]: Invalid value: \"-5\": a valid label", 0), 0u);
  auto both = parse_error("n<a@");
  EXPECT_EQ(both.rfind("unable to parse requirement: [values[0]: Invalid value: \"a@\": for 'Gt', "
                       "'Lt' operators, the value must be an integer, values[0][n]: Invalid value: "
                       "\"a@\": a valid label", 0), 0u)
      << both;
}


// ---- metav1.LabelSelector and label maps (a workload's selector, as Scale.status.selector) ----

std::string from_json(std::string_view selector_json) {
  auto r = label_selector_from_json(json::parse(selector_json).as_object());
  if (!r) return "error: " + r.error().message;
  return r->to_string();
}

TEST(LabelSelectorFromJson, MatchLabelsAndExpressionsBecomeOneSelectorSortedByKey) {
  EXPECT_EQ(from_json(R"({"matchLabels":{"tier":"front","app":"web"}})"), "app=web,tier=front");
  EXPECT_EQ(from_json(R"({"matchLabels":{"app":"x"},
      "matchExpressions":[{"key":"tier","operator":"In","values":["b","a"]},
                          {"key":"env","operator":"NotIn","values":["prod"]},
                          {"key":"gpu","operator":"Exists"},
                          {"key":"spot","operator":"DoesNotExist"}]})"),
            "app=x,env notin (prod),gpu,!spot,tier in (a,b)");
}

TEST(LabelSelectorFromJson, AnEmptySelectorSelectsEverything) {
  auto r = label_selector_from_json(json::object());
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(r->to_string(), "");
  auto labels = json::parse(R"({"any":"thing"})").as_object();
  EXPECT_TRUE(r->matches(&labels));
}

TEST(LabelSelectorFromJson, ItMatchesAsTheQueryFormDoes) {
  auto r = label_selector_from_json(
      json::parse(R"({"matchLabels":{"app":"web"},
                      "matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]}]})")
          .as_object());
  ASSERT_TRUE(r.has_value());
  auto yes = json::parse(R"({"app":"web","tier":"a","x":"y"})").as_object();
  auto no = json::parse(R"({"app":"web","tier":"c"})").as_object();
  EXPECT_TRUE(r->matches(&yes));
  EXPECT_FALSE(r->matches(&no));
}

TEST(LabelSelectorFromJson, AnUnknownOperatorOrABadKeyIsAnErrorWithKubesText) {
  EXPECT_EQ(from_json(R"({"matchExpressions":[{"key":"a","operator":"Near","values":["x"]}]})"),
            "error: \"Near\" is not a valid label selector operator");
  EXPECT_EQ(from_json(R"({"matchExpressions":[{"key":"a","operator":"In"}]})"),
            "error: values: Invalid value: []string(nil): for 'in', 'notin' operators, values "
            "set can't be empty");
  EXPECT_EQ(from_json(R"({"matchLabels":{"bad key":"x"}})").rfind("error: key: Invalid value: "
                                                                  "\"bad key\"", 0),
            0u);
}

TEST(LabelSelectorFromMap, APlainLabelMapIsEqualityRequirementsSortedByKey) {
  auto labels = json::parse(R"({"tier":"back","app":"legacy"})").as_object();
  EXPECT_EQ(label_selector_from_map(labels).to_string(), "app=legacy,tier=back");
  EXPECT_EQ(label_selector_from_map(json::object()).to_string(), "");
}

}  // namespace
}  // namespace kwatch::apimachinery
