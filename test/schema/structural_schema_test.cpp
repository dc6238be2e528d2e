#include "schema/structural_schema.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace kwatch::schema {

using apimachinery::Cause;
using base::Errc;

namespace {

namespace json = boost::json;
using Schema = std::shared_ptr<const StructuralSchema>;

// Boost.JSON parses 32 levels by default; the deep cases need more.
json::value parse(std::string_view text) {
  json::parse_options options;
  options.max_depth = 1000;
  return json::parse(text, {}, options);
}

Schema compile_ok(std::string_view schema, SchemaCompileOptions options = {}) {
  auto r = StructuralSchema::compile(parse(schema), options);
  EXPECT_TRUE(r.has_value()) << schema << "\n" << (r ? "" : r.error().message);
  return r ? *r : nullptr;
}

std::vector<Cause> compile_causes(std::string_view schema, SchemaCompileOptions options = {}) {
  auto r = StructuralSchema::compile(parse(schema), options);
  EXPECT_FALSE(r.has_value()) << schema;
  if (r) return {};
  EXPECT_EQ(r.error().code, Errc::invalid);
  return r.error().causes;
}

// One line per cause: "<field> | <type> | <message>".
std::string text(const std::vector<Cause>& causes) {
  std::string out;
  for (const auto& c : causes) out += c.field + " | " + c.type + " | " + c.message + "\n";
  return out;
}

std::string validate(const Schema& s, std::string_view value, std::string_view prefix = {}) {
  if (!s) return "no schema";
  return text(s->validate(parse(value), prefix));
}

// Wraps a schema for `spec.x` in a root schema.
std::string spec_with(std::string_view x_schema) {
  return R"({"type":"object","properties":{"spec":{"type":"object","properties":{"x":)" +
         std::string(x_schema) + "}}}}";
}
std::string spec_value(std::string_view x) { return R"({"spec":{"x":)" + std::string(x) + "}}"; }

// ---- types ----

TEST(StructuralSchemaTypes, ReportsAWrongTypeWithKubesMessage) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object","properties":{
      "replicas":{"type":"integer"}}}}})");
  EXPECT_EQ(validate(s, R"({"spec":{"replicas":"string"}})"),
            "spec.replicas | FieldValueTypeInvalid | Invalid value: \"string\": spec.replicas in "
            "body must be of type integer: \"string\"\n");
  EXPECT_EQ(validate(s, R"({"spec":{"replicas":3}})"), "");
}

TEST(StructuralSchemaTypes, NamesEveryKindOfWrongValue) {
  auto s = compile_ok(spec_with(R"({"type":"string"})"));
  for (auto [value, kind] : std::vector<std::pair<const char*, const char*>>{
           {"1", "integer"}, {"1.5", "number"}, {"true", "boolean"}, {"[]", "array"},
           {"{}", "object"}, {"null", "null"}}) {
    EXPECT_EQ(validate(s, spec_value(value)),
              std::string("spec.x | FieldValueTypeInvalid | Invalid value: \"") + kind +
                  "\": spec.x in body must be of type string: \"" + kind + "\"\n")
        << value;
  }
}

TEST(StructuralSchemaTypes, AcceptsIntegralNumbersAsIntegersAndIntegersAsNumbers) {
  auto i = compile_ok(spec_with(R"({"type":"integer"})"));
  EXPECT_EQ(validate(i, spec_value("3.0")), "");
  EXPECT_EQ(validate(i, spec_value("1e3")), "");
  EXPECT_NE(validate(i, spec_value("3.5")), "");
  EXPECT_NE(validate(i, spec_value("18446744073709551615")), "");  // beyond 2^53: a float
  auto n = compile_ok(spec_with(R"({"type":"number"})"));
  EXPECT_EQ(validate(n, spec_value("3")), "");
  EXPECT_EQ(validate(n, spec_value("3.25")), "");
}

TEST(StructuralSchemaTypes, AcceptsNullOnlyWhenNullable) {
  auto s = compile_ok(spec_with(R"({"type":"string"})"));
  EXPECT_EQ(validate(s, spec_value("null")),
            "spec.x | FieldValueTypeInvalid | Invalid value: \"null\": spec.x in body must be of "
            "type string: \"null\"\n");
  auto n = compile_ok(spec_with(R"({"type":"string","nullable":true,"minLength":3})"));
  EXPECT_EQ(validate(n, spec_value("null")), "");
}

TEST(StructuralSchemaTypes, IntOrStringTakesIntegersAndStringsOnly) {
  auto s = compile_ok(spec_with(R"({"x-kubernetes-int-or-string":true})"));
  EXPECT_EQ(validate(s, spec_value("80")), "");
  EXPECT_EQ(validate(s, spec_value("\"http\"")), "");
  EXPECT_EQ(validate(s, spec_value("true")),
            "spec.x | FieldValueTypeInvalid | Invalid value: \"boolean\": spec.x in body must be "
            "of type integer,string: \"boolean\"\n");
}

TEST(StructuralSchemaTypes, NeverTakesAnArrayForAString) {
  // kube-openapi lets any array through a string with a format; kwatch does not.
  auto s = compile_ok(spec_with(R"({"type":"string","format":"date-time"})"));
  EXPECT_EQ(validate(s, spec_value("[1]")),
            "spec.x | FieldValueTypeInvalid | Invalid value: \"array\": spec.x in body must be of "
            "type string: \"array\"\n");
}

TEST(StructuralSchemaTypes, ReportsANonStringValueOfAFormattedStringByTheFormat) {
  auto s = compile_ok(spec_with(R"({"type":"string","format":"date-time"})"));
  EXPECT_EQ(validate(s, spec_value("5")),
            "spec.x | FieldValueTypeInvalid | Invalid value: \"int64\": spec.x in body must be of "
            "type date-time: \"int64\"\n");
}

// ---- enum ----

TEST(StructuralSchemaEnum, ListsTheSupportedValues) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object","properties":{
      "restartPolicy":{"type":"string","enum":["Always","OnFailure","Never"]}}}}})");
  EXPECT_EQ(validate(s, R"({"spec":{"restartPolicy":"Sometimes"}})"),
            "spec.restartPolicy | FieldValueNotSupported | Unsupported value: \"Sometimes\": "
            "supported values: \"Always\", \"OnFailure\", \"Never\"\n");
  EXPECT_EQ(validate(s, R"({"spec":{"restartPolicy":"Never"}})"), "");
}

TEST(StructuralSchemaEnum, QuotesNonStringValuesAsJson) {
  auto s = compile_ok(spec_with(R"({"type":"number","enum":[1,2.5,1e-7]})"));
  EXPECT_EQ(validate(s, spec_value("3")),
            "spec.x | FieldValueNotSupported | Unsupported value: 3: supported values: \"1\", "
            "\"2.5\", \"1e-7\"\n");
  EXPECT_EQ(validate(s, spec_value("1.0")), "");  // numbers compare by value
  EXPECT_EQ(validate(s, spec_value("2.5")), "");
}

TEST(StructuralSchemaEnum, NeverMatchesNullEvenWhenNullable) {
  auto s = compile_ok(spec_with(R"({"type":"string","nullable":true,"enum":["a"]})"));
  EXPECT_EQ(validate(s, spec_value("null")),
            "spec.x | FieldValueNotSupported | Unsupported value: null: supported values: "
            "\"a\"\n");
}

TEST(StructuralSchemaEnum, ComparesObjectsAndArraysByContent) {
  auto s = compile_ok(spec_with(R"({"type":"object","x-kubernetes-preserve-unknown-fields":true,
      "enum":[{"a":[1,"b"]}]})"));
  EXPECT_EQ(validate(s, spec_value(R"({"a":[1,"b"]})")), "");
  EXPECT_EQ(validate(s, spec_value(R"({"a":[1]})")),
            "spec.x | FieldValueNotSupported | Unsupported value: map[string]interface "
            "{}{\"a\":[]interface {}{1}}: supported values: \"{\\\"a\\\":[1,\\\"b\\\"]}\"\n");
}

// ---- required ----

TEST(StructuralSchemaRequired, ReportsEveryMissingField) {
  auto s = compile_ok(R"({"type":"object","required":["spec"],"properties":{
      "spec":{"type":"object","required":["a","b"],"properties":{
        "a":{"type":"string"},"b":{"type":"string"}}}}})");
  EXPECT_EQ(validate(s, "{}"), "spec | FieldValueRequired | Required value\n");
  EXPECT_EQ(validate(s, R"({"spec":{}})"),
            "spec.a | FieldValueRequired | Required value\n"
            "spec.b | FieldValueRequired | Required value\n");
  EXPECT_EQ(validate(s, R"({"spec":{"a":"x","b":"y"}})"), "");
}

TEST(StructuralSchemaRequired, PrefixesFieldsWithTheCallersPath) {
  auto s = compile_ok(R"({"type":"object","required":["a"],"properties":{"a":{"type":"string"}}})");
  EXPECT_EQ(validate(s, "{}", "spec.template"),
            "spec.template.a | FieldValueRequired | Required value\n");
}

// ---- strings ----

TEST(StructuralSchemaStrings, CountsMaxLengthInRunes) {
  auto s = compile_ok(spec_with(R"({"type":"string","maxLength":5})"));
  EXPECT_EQ(validate(s, spec_value("\"h\u00e9llo\"")), "");  // 5 runes, 6 bytes
  EXPECT_EQ(validate(s, spec_value("\"h\u00e9llo!\"")),
            "spec.x | FieldValueTooLong | Too long: may not be more than 5 bytes\n");
}

TEST(StructuralSchemaStrings, ReportsMinLength) {
  auto s = compile_ok(spec_with(R"({"type":"string","minLength":1})"));
  EXPECT_EQ(validate(s, spec_value("\"\"")),
            "spec.x | FieldValueInvalid | Invalid value: \"\": spec.x in body should be at least 1 "
            "chars long\n");
}

TEST(StructuralSchemaStrings, MatchesPatternsWithInlineFlagsAnywhereInTheString) {
  auto s = compile_ok(spec_with(R"({"type":"string","pattern":"(?i)^[a-z]+$"})"));
  EXPECT_EQ(validate(s, spec_value("\"MixedCase\"")), "");
  EXPECT_EQ(validate(s, spec_value("\"ab1\"")),
            "spec.x | FieldValueInvalid | Invalid value: \"ab1\": spec.x in body should match "
            "'(?i)^[a-z]+$'\n");
  auto unanchored = compile_ok(spec_with(R"({"type":"string","pattern":"[0-9]"})"));
  EXPECT_EQ(validate(unanchored, spec_value("\"abc1def\"")), "");
}

TEST(StructuralSchemaStrings, ReportsOnlyTheFirstOfLengthAndPattern) {
  auto s = compile_ok(spec_with(R"({"type":"string","maxLength":2,"pattern":"^[a-z]*$"})"));
  EXPECT_EQ(validate(s, spec_value("\"ABCD\"")),
            "spec.x | FieldValueTooLong | Too long: may not be more than 2 bytes\n");
}

// ---- formats ----

TEST(StructuralSchemaFormats, ChecksTheStringFormatsKubeChecks) {
  struct Case {
    const char* format;
    const char* good;
    const char* bad;
  };
  for (const auto& c : std::vector<Case>{
           {"date-time", "2026-11-23T10:00:00Z", "2026-11-23 10:00"},
           {"date-time", "2026-11-23t10:00:00.123+01:00", "2026-11-23T25:00:00Z"},
           {"date", "2024-02-29", "2023-02-29"},
           {"byte", "aGVsbG8=", "not base64!"},
           {"uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"},
           {"ipv4", "192.168.0.1", "192.168.0.256"},
           {"ipv6", "fe80::1", "192.168.0.1"},
           {"cidr", "10.0.0.0/8", "10.0.0.0/33"},
           {"mac", "00:00:5e:00:53:01", "00:00:5e:00:53"},
           {"hostname", "example.com", "-bad-.com"},
           {"hexcolor", "#ffaa00", "#ffaa0"},
       }) {
    auto s = compile_ok(spec_with(std::string(R"({"type":"string","format":")") + c.format + "\"}"));
    EXPECT_EQ(validate(s, spec_value(std::string("\"") + c.good + "\"")), "") << c.format;
    EXPECT_EQ(validate(s, spec_value(std::string("\"") + c.bad + "\"")),
              std::string("spec.x | FieldValueTypeInvalid | Invalid value: \"") + c.bad +
                  "\": spec.x in body must be of type " + c.format + ": \"" + c.bad + "\"\n")
        << c.format;
  }
}

TEST(StructuralSchemaFormats, RefusesAnEmptyStringAsByteAsKubeDoes) {
  auto s = compile_ok(spec_with(R"({"type":"string","format":"byte"})"));
  EXPECT_NE(validate(s, spec_value("\"\"")), "");
}

TEST(StructuralSchemaFormats, LeavesNumericFormatsAndUnknownFormatsUnchecked) {
  auto i = compile_ok(spec_with(R"({"type":"integer","format":"int32"})"));
  EXPECT_EQ(validate(i, spec_value("99999999999")), "");
  auto f = compile_ok(spec_with(R"({"type":"number","format":"float"})"));
  EXPECT_EQ(validate(f, spec_value("1e300")), "");
  auto u = compile_ok(spec_with(R"({"type":"string","format":"my-own-format"})"));
  EXPECT_EQ(validate(u, spec_value("\"anything\"")), "");
  auto uri = compile_ok(spec_with(R"({"type":"string","format":"uri"})"));
  EXPECT_EQ(validate(uri, spec_value("\"not checked\"")), "");
}

// ---- numbers ----

TEST(StructuralSchemaNumbers, ReportsBoundsInclusiveAndExclusive) {
  auto s = compile_ok(spec_with(R"({"type":"integer","minimum":0,"maximum":10})"));
  EXPECT_EQ(validate(s, spec_value("-3")),
            "spec.x | FieldValueInvalid | Invalid value: -3: spec.x in body should be greater "
            "than or equal to 0\n");
  EXPECT_EQ(validate(s, spec_value("11")),
            "spec.x | FieldValueInvalid | Invalid value: 11: spec.x in body should be less than "
            "or equal to 10\n");
  EXPECT_EQ(validate(s, spec_value("0")), "");
  EXPECT_EQ(validate(s, spec_value("10")), "");
  auto e = compile_ok(spec_with(
      R"({"type":"number","minimum":0.5,"exclusiveMinimum":true,"maximum":1e6,"exclusiveMaximum":true})"));
  EXPECT_EQ(validate(e, spec_value("0.5")),
            "spec.x | FieldValueInvalid | Invalid value: 0.5: spec.x in body should be greater "
            "than 0.5\n");
  EXPECT_EQ(validate(e, spec_value("1000000.0")),
            "spec.x | FieldValueInvalid | Invalid value: 1e+06: spec.x in body should be less "
            "than 1e+06\n");
  EXPECT_EQ(validate(e, spec_value("0.75")), "");
}

TEST(StructuralSchemaNumbers, ChecksMultipleOf) {
  auto s = compile_ok(spec_with(R"({"type":"number","multipleOf":0.5})"));
  EXPECT_EQ(validate(s, spec_value("2.5")), "");
  EXPECT_EQ(validate(s, spec_value("2.25")),
            "spec.x | FieldValueInvalid | Invalid value: 2.25: spec.x in body should be a "
            "multiple of 0.5\n");
  auto i = compile_ok(spec_with(R"({"type":"integer","multipleOf":3})"));
  EXPECT_EQ(validate(i, spec_value("9")), "");
  EXPECT_EQ(validate(i, spec_value("10")),
            "spec.x | FieldValueInvalid | Invalid value: 10: spec.x in body should be a multiple "
            "of 3\n");
}

// ---- arrays ----

TEST(StructuralSchemaArrays, NamesItemsByIndexAtEveryLevel) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object","properties":{
      "containers":{"type":"array","items":{"type":"object","properties":{
        "ports":{"type":"array","items":{"type":"object","properties":{
          "containerPort":{"type":"integer"}}}}}}}}}}})");
  EXPECT_EQ(validate(s, R"({"spec":{"containers":[{"ports":[{"containerPort":80},
                                                            {"containerPort":"eighty"}]}]}})"),
            "spec.containers[0].ports[1].containerPort | FieldValueTypeInvalid | Invalid value: "
            "\"string\": spec.containers[0].ports[1].containerPort in body must be of type "
            "integer: \"string\"\n");
}

TEST(StructuralSchemaArrays, ReportsItemCounts) {
  auto s = compile_ok(spec_with(R"({"type":"array","items":{"type":"string"},"minItems":1,
                                    "maxItems":2})"));
  EXPECT_EQ(validate(s, spec_value("[]")),
            "spec.x | FieldValueInvalid | Invalid value: 0: spec.x in body should have at least 1 "
            "items\n");
  EXPECT_EQ(validate(s, spec_value(R"(["a","b","c"])")),
            "spec.x | FieldValueTooMany | Too many: 3: must have at most 2 items\n");
}

TEST(StructuralSchemaArrays, ChecksUniqueItemsWhenAllowed) {
  SchemaCompileOptions allow;
  allow.allow_unique_items = true;
  auto s = compile_ok(spec_with(R"({"type":"array","uniqueItems":true,
                                    "items":{"x-kubernetes-preserve-unknown-fields":true}})"),
                      allow);
  EXPECT_EQ(validate(s, spec_value(R"([1,"1",{"a":1},{"a":2}])")), "");
  EXPECT_EQ(validate(s, spec_value("[1,1.0]")), "");  // int64 and float64 differ, as in Go
  EXPECT_EQ(validate(s, spec_value(R"([{"a":1,"b":2},{"b":2,"a":1}])")),
            "spec.x | FieldValueInvalid | Invalid value: \"\": spec.x in body shouldn't contain "
            "duplicates\n");
}

// ---- objects ----

TEST(StructuralSchemaObjects, ValidatesMapValuesWithKubeOpenapiNames) {
  auto s = compile_ok(R"({"type":"object","properties":{"metadata":{"type":"object"},
      "spec":{"type":"object","properties":{
        "labels":{"type":"object","additionalProperties":{"type":"string","maxLength":3}}}}}})");
  EXPECT_EQ(validate(s, R"({"spec":{"labels":{"app":"web","tier":7}}})"),
            "spec.labels.tier | FieldValueTypeInvalid | Invalid value: \"integer\": "
            "spec.labels.tier in body must be of type string: \"integer\"\n");
}

TEST(StructuralSchemaObjects, ReportsPropertyCountsAndStopsThere) {
  auto s = compile_ok(spec_with(R"({"type":"object","minProperties":2,"maxProperties":3,
      "additionalProperties":{"type":"string"}})"));
  EXPECT_EQ(validate(s, spec_value(R"({"a":1})")),
            "spec.x | FieldValueInvalid | Invalid value: 1: spec.x in body should have at least 2 "
            "properties\n");
  EXPECT_EQ(validate(s, spec_value(R"({"a":"","b":"","c":"","d":""})")),
            "spec.x | FieldValueTooMany | Too many: 4: must have at most 3 items\n");
}

TEST(StructuralSchemaObjects, ForbidsPropertiesWhenAdditionalPropertiesIsFalse) {
  auto s = compile_ok(spec_with(R"({"type":"object","additionalProperties":false})"));
  EXPECT_EQ(validate(s, spec_value(R"({"bogus":1})")),
            "spec.x | FieldValueInvalid | Invalid value: \"bogus\": spec.x.bogus in body is a "
            "forbidden property\n");
}

TEST(StructuralSchemaObjects, ReportsEveryBadFieldNotJustTheFirst) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object",
      "required":["image"],"properties":{
        "replicas":{"type":"integer","minimum":0},
        "restartPolicy":{"type":"string","enum":["Always","Never"]},
        "ports":{"type":"array","items":{"type":"object","properties":{
          "containerPort":{"type":"integer"}}}}}}}})");
  auto causes = s->validate(json::parse(R"({"spec":{"replicas":-3,"restartPolicy":"Sometimes",
      "ports":[{"containerPort":"eighty"}]}})"));
  ASSERT_EQ(causes.size(), 4u) << text(causes);
  EXPECT_EQ(causes[0].field, "spec.replicas");
  EXPECT_EQ(causes[1].field, "spec.restartPolicy");
  EXPECT_EQ(causes[2].field, "spec.ports[0].containerPort");
  EXPECT_EQ(causes[3].field, "spec.image");
}

// ---- junctors ----

TEST(StructuralSchemaJunctors, ReportsAFailedAnyOfWithItsClosestBranch) {
  auto s = compile_ok(spec_with(R"({"type":"string","anyOf":[{"maxLength":2},{"pattern":"^x"}]})"));
  EXPECT_EQ(validate(s, spec_value("\"x123\"")), "");
  EXPECT_EQ(validate(s, spec_value("\"abc\"")),
            "<nil> | FieldValueInvalid | Invalid value: \"\": \"spec.x\" must validate at least "
            "one schema (anyOf)\n"
            "spec.x | FieldValueTooLong | Too long: may not be more than 2 bytes\n");
  EXPECT_EQ(validate(s, spec_value("\"abc\""), "body").substr(0, 5), "body ");
}

TEST(StructuralSchemaJunctors, CountsValidOneOfBranches) {
  auto s = compile_ok(spec_with(R"({"type":"object","properties":{"a":{"type":"string"},
      "b":{"type":"string"}},"oneOf":[{"required":["a"]},{"required":["b"]}]})"));
  EXPECT_EQ(validate(s, spec_value(R"({"a":"x"})")), "");
  EXPECT_EQ(validate(s, spec_value(R"({"a":"x","b":"y"})")),
            "<nil> | FieldValueInvalid | Invalid value: \"\": \"spec.x\" must validate one and "
            "only one schema (oneOf). Found 2 valid alternatives\n");
  EXPECT_EQ(validate(s, spec_value("{}")),
            "<nil> | FieldValueInvalid | Invalid value: \"\": \"spec.x\" must validate one and "
            "only one schema (oneOf). Found none valid\n"
            "spec.x.a | FieldValueRequired | Required value\n");
}

TEST(StructuralSchemaJunctors, ReportsAllOfAndNot) {
  auto s = compile_ok(spec_with(
      R"({"type":"integer","allOf":[{"minimum":1},{"maximum":5}],"not":{"enum":[3]}})"));
  EXPECT_EQ(validate(s, spec_value("2")), "");
  EXPECT_EQ(validate(s, spec_value("3")),
            "<nil> | FieldValueInvalid | Invalid value: \"\": \"spec.x\" must not validate the "
            "schema (not)\n");
  EXPECT_EQ(validate(s, spec_value("9")),
            "spec.x | FieldValueInvalid | Invalid value: 9: spec.x in body should be less than or "
            "equal to 5\n"
            "<nil> | FieldValueInvalid | Invalid value: \"\": \"spec.x\" must validate all the "
            "schemas (allOf)\n");
}

// ---- list and map types ----

TEST(StructuralSchemaListTypes, ReportsDuplicatesInASetOncePerValue) {
  auto s = compile_ok(spec_with(R"({"type":"array","x-kubernetes-list-type":"set",
                                    "items":{"type":"string"}})"));
  EXPECT_EQ(validate(s, spec_value(R"(["a","b","a","a","b","c"])")),
            "spec.x[2] | FieldValueDuplicate | Duplicate value: \"a\"\n"
            "spec.x[4] | FieldValueDuplicate | Duplicate value: \"b\"\n");
}

TEST(StructuralSchemaListTypes, ReportsDuplicateKeysInAMapList) {
  auto s = compile_ok(spec_with(R"({"type":"array","x-kubernetes-list-type":"map",
      "x-kubernetes-list-map-keys":["name"],"items":{"type":"object","required":["name"],
      "properties":{"name":{"type":"string"},"value":{"type":"string"}}}})"));
  EXPECT_EQ(validate(s, spec_value(R"([{"name":"a"},{"name":"b"},{"name":"a","value":"v"}])")),
            "spec.x[2] | FieldValueDuplicate | Duplicate value: map[string]interface "
            "{}{\"name\":\"a\"}\n");
  EXPECT_EQ(validate(s, spec_value(R"([{"name":"a"},"b"])")),
            "spec.x[1] | FieldValueTypeInvalid | Invalid value: \"string\": spec.x[1] in body "
            "must be of type object: \"string\"\n"
            "spec.x[1] | FieldValueInvalid | Invalid value: \"b\": must be an object for an array "
            "of list-type map\n");
}

TEST(StructuralSchemaListTypes, ComparesSeveralMapKeysTogether) {
  auto s = compile_ok(spec_with(R"({"type":"array","x-kubernetes-list-type":"map",
      "x-kubernetes-list-map-keys":["port","protocol"],"items":{"type":"object",
      "required":["port"],"properties":{"port":{"type":"integer"},
      "protocol":{"type":"string","default":"TCP"}}}})"));
  EXPECT_EQ(validate(s, spec_value(R"([{"port":80,"protocol":"TCP"},{"port":80,"protocol":"UDP"}])")),
            "");
  EXPECT_EQ(validate(s, spec_value(R"([{"port":80,"protocol":"TCP"},{"protocol":"TCP","port":80}])")),
            "spec.x[1] | FieldValueDuplicate | Duplicate value: map[string]interface "
            "{}{\"port\":80, \"protocol\":\"TCP\"}\n");
}

TEST(StructuralSchemaListTypes, NamesMapKeysInBracketsOnTheWayToAList) {
  auto s = compile_ok(spec_with(R"({"type":"object","additionalProperties":{"type":"array",
      "x-kubernetes-list-type":"set","items":{"type":"integer"}}})"));
  EXPECT_EQ(validate(s, spec_value(R"({"web":[1,2,1]})")),
            "spec.x[web][2] | FieldValueDuplicate | Duplicate value: 1\n");
}

// ---- embedded resources ----

TEST(StructuralSchemaEmbedded, RequiresApiVersionAndKind) {
  auto s = compile_ok(spec_with(R"({"type":"object","x-kubernetes-embedded-resource":true,
                                    "x-kubernetes-preserve-unknown-fields":true})"));
  EXPECT_EQ(validate(s, spec_value(R"({"apiVersion":"v1","kind":"Pod","metadata":{}})")), "");
  EXPECT_EQ(validate(s, spec_value(R"({"metadata":{}})")),
            "spec.x.apiVersion | FieldValueRequired | Required value\n"
            "spec.x.kind | FieldValueRequired | Required value\n");
  EXPECT_EQ(validate(s, spec_value(R"({"apiVersion":"a/b/c","kind":"Bad_Kind"})")),
            "spec.x.apiVersion | FieldValueInvalid | Invalid value: \"a/b/c\": unexpected "
            "GroupVersion string: a/b/c\n"
            "spec.x.kind | FieldValueInvalid | Invalid value: \"Bad_Kind\": may have mixed case, "
            "but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric "
            "characters or '-', start with an alphabetic character, and end with an alphanumeric "
            "character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
            "'[a-z]([-a-z0-9]*[a-z0-9])?')\n");
}

// ---- pruning ----

TEST(StructuralSchemaPruning, RemovesUnknownFieldsAndNamesThemAsKubeDoes) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object","properties":{
      "replicas":{"type":"integer"},
      "containers":{"type":"array","items":{"type":"object","properties":{
        "name":{"type":"string"}}}}}}}})");
  auto v = json::parse(R"({"apiVersion":"v1","kind":"Thing","metadata":{"name":"a","bogus":1},
      "bogusTop":1,"spec":{"replicas":1,"bogus":{"deep":1},
      "containers":[{"name":"a","bogus":2},{"name":"b"}]}})");
  auto pruned = s->prune(v);
  EXPECT_EQ(pruned, (std::vector<std::string>{"bogusTop", "spec.bogus", "spec.containers[0].bogus"}));
  EXPECT_EQ(v, json::parse(R"({"apiVersion":"v1","kind":"Thing","metadata":{"name":"a","bogus":1},
      "spec":{"replicas":1,"containers":[{"name":"a"},{"name":"b"}]}})"));
  EXPECT_EQ(unknown_field_message(pruned[1]), "unknown field \"spec.bogus\"");
}

TEST(StructuralSchemaPruning, KeepsTheOrderOfTheRemainingFields) {
  auto s = compile_ok(R"({"type":"object","properties":{"b":{"type":"string"},
                                                          "a":{"type":"string"}}})");
  auto v = json::parse(R"({"b":"1","x":0,"a":"2","y":0})");
  s->prune(v);
  EXPECT_EQ(json::serialize(v), R"({"b":"1","a":"2"})");
}

TEST(StructuralSchemaPruning, KeepsWhatPreserveUnknownFieldsCoversButPrunesKnownChildren) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object",
      "x-kubernetes-preserve-unknown-fields":true,"properties":{
        "known":{"type":"object","properties":{"a":{"type":"string"}}}}}}})");
  auto v = json::parse(R"({"spec":{"free":{"any":[1,{"x":2}]},"known":{"a":"1","b":2}}})");
  EXPECT_EQ(s->prune(v), std::vector<std::string>{"spec.known.b"});
  EXPECT_EQ(v, json::parse(R"({"spec":{"free":{"any":[1,{"x":2}]},"known":{"a":"1"}}})"));
}

TEST(StructuralSchemaPruning, KeepsTypeAndObjectMetaOfEmbeddedResources) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object","properties":{
      "template":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{
        "spec":{"type":"object","properties":{"a":{"type":"string"}}}}}}}}})");
  auto v = json::parse(R"({"spec":{"template":{"apiVersion":"v1","kind":"Pod",
      "metadata":{"labels":{"x":"y"}},"spec":{"a":"1","b":2},"extra":1}}})");
  EXPECT_EQ(s->prune(v), (std::vector<std::string>{"spec.template.extra", "spec.template.spec.b"}));
  EXPECT_EQ(v, json::parse(R"({"spec":{"template":{"apiVersion":"v1","kind":"Pod",
      "metadata":{"labels":{"x":"y"}},"spec":{"a":"1"}}}})"));
}

TEST(StructuralSchemaPruning, FollowsMapValuesAndKeepsScalarsUnderAdditionalPropertiesTrue) {
  auto s = compile_ok(R"({"type":"object","properties":{"m":{"type":"object",
      "additionalProperties":{"type":"object","properties":{"a":{"type":"string"}}}},
      "free":{"type":"object","additionalProperties":true}}})");
  auto v = json::parse(R"({"m":{"k1":{"a":"x","b":1}},"free":{"s":"kept","o":{"gone":1}}})");
  EXPECT_EQ(s->prune(v), (std::vector<std::string>{"free.o.gone", "m.k1.b"}));
  EXPECT_EQ(v, json::parse(R"({"m":{"k1":{"a":"x"}},"free":{"s":"kept","o":{}}})"));
}

// ---- defaulting ----

TEST(StructuralSchemaDefaults, SetsAbsentFieldsRecursivelyInsideNewDefaults) {
  auto s = compile_ok(R"({"type":"object","properties":{"spec":{"type":"object","default":{},
      "properties":{
        "replicas":{"type":"integer","default":1},
        "strategy":{"type":"object","default":{},"properties":{
          "type":{"type":"string","default":"RollingUpdate"}}},
        "ports":{"type":"array","items":{"type":"object","properties":{
          "protocol":{"type":"string","default":"TCP"}}}}}}}})");
  auto v = json::parse("{}");
  s->apply_defaults(v);
  EXPECT_EQ(v, json::parse(R"({"spec":{"replicas":1,"strategy":{"type":"RollingUpdate"}}})"));
  auto w = json::parse(R"({"spec":{"replicas":5,"ports":[{"containerPort":80},{"protocol":"UDP"}]}})");
  s->apply_defaults(w);
  EXPECT_EQ(w, json::parse(R"({"spec":{"replicas":5,"ports":[{"containerPort":80,"protocol":"TCP"},
      {"protocol":"UDP"}],"strategy":{"type":"RollingUpdate"}}})"));
}

TEST(StructuralSchemaDefaults, HandlesNullsAsKubeDoes) {
  auto s = compile_ok(R"({"type":"object","properties":{
      "withDefault":{"type":"string","default":"d"},
      "nullableWithDefault":{"type":"string","nullable":true,"default":"d"},
      "plain":{"type":"string"},
      "nullable":{"type":"string","nullable":true},
      "list":{"type":"array","items":{"type":"string","default":"item"}},
      "map":{"type":"object","additionalProperties":{"type":"string","default":"value"}}}})");
  auto v = json::parse(R"({"withDefault":null,"nullableWithDefault":null,"plain":null,
      "nullable":null,"list":["a",null],"map":{"k":null}})");
  s->apply_defaults(v);
  EXPECT_EQ(v, json::parse(R"({"withDefault":"d","nullableWithDefault":null,"nullable":null,
      "list":["a","item"],"map":{"k":"value"}})"));
}

TEST(StructuralSchemaDefaults, CopiesDefaultsIntoTheValuesStorage) {
  auto s = compile_ok(R"({"type":"object","properties":{"o":{"type":"object",
      "x-kubernetes-preserve-unknown-fields":true,"default":{"a":[1,2,{"b":"c"}]}}}})");
  json::value v = json::object{};
  s->apply_defaults(v);
  s.reset();  // the defaults must not borrow from the schema
  EXPECT_EQ(v, json::parse(R"({"o":{"a":[1,2,{"b":"c"}]}})"));
}

// ---- schemas refused ----

TEST(StructuralSchemaCompile, RefusesMissingTypesWithKubesMessages) {
  EXPECT_EQ(text(compile_causes(R"({"properties":{"spec":{"properties":{"a":{}}},
      "list":{"type":"array","items":{}}}})")),
            "openAPIV3Schema.properties[list].items.type | FieldValueRequired | Required value: "
            "must not be empty for specified array items\n"
            "openAPIV3Schema.properties[spec].properties[a].type | FieldValueRequired | Required "
            "value: must not be empty for specified object fields\n"
            "openAPIV3Schema.properties[spec].type | FieldValueRequired | Required value: must not "
            "be empty for specified object fields\n"
            "openAPIV3Schema.type | FieldValueRequired | Required value: must not be empty at the "
            "root\n");
}

TEST(StructuralSchemaCompile, UsesTheCallersPath) {
  SchemaCompileOptions o;
  o.path = "spec.versions[0].schema.openAPIV3Schema";
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{"spec":{"description":"x"}}})", o)),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type | FieldValueRequired | "
            "Required value: must not be empty for specified object fields\n");
}

TEST(StructuralSchemaCompile, RefusesArraysWithoutItemsAndPropertiesWithAdditionalProperties) {
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{"l":{"type":"array"},
      "m":{"type":"object","properties":{"a":{"type":"string"}},
           "additionalProperties":{"type":"string"}}}})")),
            "openAPIV3Schema.properties[l].items | FieldValueRequired | Required value: must be "
            "specified\n"
            "openAPIV3Schema.properties[m].additionalProperties | FieldValueForbidden | Forbidden: "
            "additionalProperties and properties are mutual exclusive\n");
}

TEST(StructuralSchemaCompile, RefusesAdditionalPropertiesAndOtherTypesAtTheRoot) {
  EXPECT_EQ(text(compile_causes(R"({"type":"string"})")),
            "openAPIV3Schema.type | FieldValueInvalid | Invalid value: \"string\": must be object "
            "at the root\n");
  EXPECT_EQ(text(compile_causes(R"({"type":"object","additionalProperties":{"type":"string"}})")),
            "openAPIV3Schema.additionalProperties | FieldValueForbidden | Forbidden: must not be "
            "used at the root\n");
  EXPECT_EQ(text(compile_causes(R"({"type":"object","nullable":true})")),
            "openAPIV3Schema.nullable | FieldValueForbidden | Forbidden: nullable cannot be true "
            "at the root\n");
}

TEST(StructuralSchemaCompile, RefusesStructureInsideJunctors) {
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{"a":{"type":"string",
      "anyOf":[{"type":"string","default":"x"},{"maxLength":3}]}}})")),
            "openAPIV3Schema.properties[a].anyOf[0].default | FieldValueForbidden | Forbidden: "
            "must be undefined to be structural\n"
            "openAPIV3Schema.properties[a].anyOf[0].type | FieldValueForbidden | Forbidden: must be "
            "empty to be structural\n");
}

TEST(StructuralSchemaCompile, AcceptsTheIntOrStringPatterns) {
  compile_ok(spec_with(R"({"x-kubernetes-int-or-string":true,
                           "anyOf":[{"type":"integer"},{"type":"string"}]})"));
  compile_ok(spec_with(R"({"x-kubernetes-int-or-string":true,"allOf":[
      {"anyOf":[{"type":"integer"},{"type":"string"}]},{"pattern":"^[0-9]+%?$"}]})"));
}

TEST(StructuralSchemaCompile, RefusesJunctorsNamingFieldsTheSchemaLacks) {
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{"a":{"type":"string"}},
      "anyOf":[{"properties":{"b":{"minLength":1}}}]})")),
            "openAPIV3Schema.properties[b] | FieldValueRequired | Required value: because it is "
            "defined in openAPIV3Schema.anyOf[0].properties[b]\n");
}

TEST(StructuralSchemaCompile, RestrictsMetadataToNameAndGenerateName) {
  compile_ok(R"({"type":"object","properties":{"metadata":{"type":"object","properties":{
      "name":{"type":"string","maxLength":20}}}}})");
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{"metadata":{"type":"object",
      "properties":{"labels":{"type":"object"}}}}})")),
            "openAPIV3Schema.properties[metadata] | FieldValueForbidden | Forbidden: must not "
            "specify anything other than name and generateName, but metadata is implicitly "
            "specified\n");
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{"metadata":{"type":"object",
      "default":{"name":"x"}}}})")),
            "openAPIV3Schema.properties[metadata].default | FieldValueForbidden | Forbidden: must "
            "not be set in top-level metadata\n");
}

// An object schema of `count` string properties p0, p1, ..., the i-th with pattern(i).
template <typename Pattern>
std::string properties_with_patterns(std::size_t count, Pattern pattern) {
  std::string out = R"({"type":"object","properties":{)";
  for (std::size_t i = 0; i < count; ++i) {
    if (i) out += ',';
    out += "\"p" + std::to_string(i) + R"(":{"type":"string","pattern":")" + pattern(i) + "\"}";
  }
  return out + "}}";
}

TEST(StructuralSchemaCompile, ARepeatedPatternIsCompiledOnceAndSharedAcrossSchemas) {
  auto patterns = std::make_shared<PatternCache>();
  SchemaCompileOptions options;
  options.patterns = patterns;
  // 200 properties with RE2's costliest kind of pattern: 119,302 instructions each.
  const std::string schema =
      properties_with_patterns(200, [](std::size_t) { return R"(^\\pL{100}$)"; });
  const auto started = std::chrono::steady_clock::now();
  auto v1 = compile_ok(schema, options);
  auto v2 = compile_ok(schema, options);  // another version of the same definition
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(v1 && v2);
  EXPECT_EQ(patterns->distinct(), 1u);
  EXPECT_EQ(patterns->instructions(), 119'302u);
  // Compiled 400 times this took 40 s; once, well under one (generous for sanitizer builds).
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_TRUE(v1->validate(parse(R"({"p7":")" + std::string(100, 'x') + "\"}")).empty());
  EXPECT_EQ(v2->validate(parse(R"({"p7":"x1"})")).size(), 1u);
}

TEST(StructuralSchemaCompile, PatternsPastTheDefinitionsBudgetAreForbiddenAtTheirField) {
  // Distinct patterns: 4 fit in the budget (4 x 119,302 instructions), the 5th does not.
  auto causes = compile_causes(properties_with_patterns(6, [](std::size_t i) {
    return R"(^\\pL{)" + std::to_string(100 - i) + "}$";
  }));
  ASSERT_EQ(causes.size(), 2u) << text(causes);
  EXPECT_EQ(causes[0].field, "openAPIV3Schema.properties[p4].pattern");
  EXPECT_EQ(causes[0].type, "FieldValueForbidden");
  EXPECT_NE(causes[0].message.find("over the budget of 500000"), std::string::npos)
      << causes[0].message;
  EXPECT_EQ(causes[1].field, "openAPIV3Schema.properties[p5].pattern");
}

TEST(StructuralSchemaCompile, APatternLargerThanItsMaxMemIsForbidden) {
  // 339,022 instructions, 2.6 MiB of program: past RE2's max_mem of 4 MiB for the compile.
  auto causes = compile_causes(
      spec_with(R"({"type":"string","pattern":"^[\\p{L}\\p{N}]{0,253}[\\p{L}\\p{N}]{0,253}$"})"));
  ASSERT_EQ(causes.size(), 1u) << text(causes);
  EXPECT_EQ(causes[0].field, "openAPIV3Schema.properties[spec].properties[x].pattern");
  EXPECT_EQ(causes[0].type, "FieldValueForbidden");
  EXPECT_NE(causes[0].message.find("larger than 4 MiB"), std::string::npos) << causes[0].message;
}

TEST(StructuralSchemaCompile, StoredDefinitionsCompileUnderTheLimitsTheyWereAcceptedWith) {
  SchemaCompileOptions options;
  options.patterns = PatternCache::for_stored();
  // Past the budget of a write, and a pattern past the 4 MiB of a write: a definition stored
  // before the budget existed is still served.
  auto s = compile_ok(properties_with_patterns(6, [](std::size_t i) {
    return i == 5 ? std::string(R"(^[\\p{L}\\p{N}]{0,253}$)")
                  : R"(^\\pL{)" + std::to_string(100 - i) + "}$";
  }), options);
  ASSERT_TRUE(s);
  EXPECT_GT(options.patterns->instructions(), PatternCache::kDefaultBudget);
  EXPECT_TRUE(s->validate(parse(R"({"p5":"abc123"})")).empty());
}

TEST(StructuralSchemaCompile, APatternCacheReusesWhatItsPredecessorCompiledAndForgetsTheRest) {
  auto before = std::make_shared<PatternCache>();
  SchemaCompileOptions options;
  options.patterns = before;
  compile_ok(properties_with_patterns(2, [](std::size_t i) { return i ? "^b$" : R"(^\\pL{50}$)"; }),
             options);
  ASSERT_EQ(before->distinct(), 2u);
  auto after = std::make_shared<PatternCache>();
  after->offer(*before);
  options.patterns = after;
  auto s = compile_ok(properties_with_patterns(1, [](std::size_t) { return R"(^\\pL{50}$)"; }),
                      options);
  after->forget_offered();
  EXPECT_EQ(after->distinct(), 1u);
  PatternCache just_b;
  just_b.compile("^b$");
  EXPECT_EQ(after->instructions(), before->instructions() - just_b.instructions());
  EXPECT_EQ(s->validate(parse(R"({"p0":"b"})")).size(), 1u);
}

TEST(StructuralSchemaCompile, RefusesABadRegexWithGosError) {
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"string","pattern":"([a-z"})"))),
            "openAPIV3Schema.properties[spec].properties[x].pattern | FieldValueInvalid | Invalid "
            "value: \"([a-z\": must be a valid regular expression, but isn't: error parsing "
            "regexp: missing closing ]: `[a-z`\n");
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"string","pattern":"a**"})"))),
            "openAPIV3Schema.properties[spec].properties[x].pattern | FieldValueInvalid | Invalid "
            "value: \"a**\": must be a valid regular expression, but isn't: error parsing regexp: "
            "invalid nested repetition operator: `**`\n");
}

TEST(StructuralSchemaCompile, RefusesUnsupportedKeywords) {
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{
      "a":{"$ref":"#/definitions/x"},"b":{"type":"object","patternProperties":{"^x":{}}},
      "c":{"type":"string","x-kubernetes-preserve-unknown-fields":false}}})")),
            "openAPIV3Schema.properties[a].$ref | FieldValueForbidden | Forbidden: $ref is not "
            "supported\n"
            "openAPIV3Schema.properties[b].patternProperties | FieldValueForbidden | Forbidden: "
            "patternProperties is not supported\n"
            "openAPIV3Schema.properties[c].x-kubernetes-preserve-unknown-fields | "
            "FieldValueInvalid | Invalid value: false: must be true or undefined\n");
}

TEST(StructuralSchemaCompile, RefusesUniqueItemsUnlessAllowed) {
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"array","items":{"type":"string"},
                                              "uniqueItems":true})"))),
            "openAPIV3Schema.properties[spec].properties[x].uniqueItems | FieldValueForbidden | "
            "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes "
            "quadratic\n");
}

TEST(StructuralSchemaCompile, RefusesInconsistentListAndMapTypes) {
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"array","x-kubernetes-list-type":"map",
      "x-kubernetes-list-map-keys":["name","missing"],"items":{"type":"object",
      "properties":{"name":{"type":"string"}}}})"))),
            "openAPIV3Schema.properties[spec].properties[x].x-kubernetes-list-map-keys | "
            "FieldValueInvalid | Invalid value: []string{\"name\", \"missing\"}: entries must all "
            "be names of item properties\n"
            "openAPIV3Schema.properties[spec].properties[x].items.properties[name].default | "
            "FieldValueRequired | Required value: this property is in x-kubernetes-list-map-keys, "
            "so it must have a default or be a required property\n");
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"string","x-kubernetes-list-type":"bag",
      "x-kubernetes-map-type":"atomic"})"))),
            "openAPIV3Schema.properties[spec].properties[x].type | FieldValueInvalid | Invalid "
            "value: \"string\": must be object if x-kubernetes-map-type is specified\n"
            "openAPIV3Schema.properties[spec].properties[x].type | FieldValueInvalid | Invalid "
            "value: \"string\": must be array if x-kubernetes-list-type is specified\n"
            "openAPIV3Schema.properties[spec].properties[x].x-kubernetes-list-type | "
            "FieldValueNotSupported | Unsupported value: \"bag\": supported values: \"atomic\", "
            "\"set\", \"map\"\n");
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"array","x-kubernetes-list-map-keys":["a"],
      "items":{"type":"string"}})"))),
            "openAPIV3Schema.properties[spec].properties[x].x-kubernetes-list-type | "
            "FieldValueRequired | Required value: must be map if x-kubernetes-list-map-keys is "
            "non-empty\n");
}

TEST(StructuralSchemaCompile, RefusesDefaultsThatDoNotValidateOrAreNotPruned) {
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{"spec":{"type":"object",
      "properties":{"replicas":{"type":"integer","minimum":1,"default":0},
        "o":{"type":"object","properties":{"a":{"type":"string"}},"default":{"a":"x","b":1}}}}}})")),
            "openAPIV3Schema.properties[spec].properties[replicas].default | FieldValueInvalid | "
            "Invalid value: 0:  in body should be greater than or equal to 1\n"
            "openAPIV3Schema.properties[spec].properties[o].default | FieldValueInvalid | Invalid "
            "value: map[string]interface {}{\"a\":\"x\", \"b\":1}: must not have unknown fields\n");
}

TEST(StructuralSchemaCompile, RefusesKeywordsOfTheWrongJsonType) {
  EXPECT_EQ(text(compile_causes(R"({"type":5,"properties":[],"minLength":1.5,"required":"a"})")),
            "openAPIV3Schema.type | FieldValueInvalid | Invalid value: 5: must be a string\n"
            "openAPIV3Schema.properties | FieldValueInvalid | Invalid value: []interface {}{}: "
            "must be an object\n"
            "openAPIV3Schema.minLength | FieldValueInvalid | Invalid value: 1.5: must be an "
            "integer\n"
            "openAPIV3Schema.required | FieldValueInvalid | Invalid value: \"a\": must be an array "
            "of strings\n");
}

TEST(StructuralSchemaCompile, RefusesAnEmbeddedResourceThatIsNotAnObject) {
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"string",
      "x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true})"))),
            "openAPIV3Schema.properties[spec].properties[x].type | FieldValueInvalid | Invalid "
            "value: \"string\": must be object if x-kubernetes-embedded-resource is true\n");
}

TEST(StructuralSchemaCompile, RefusesBadTypeMetaAndEmbeddedResourceShapes) {
  EXPECT_EQ(text(compile_causes(R"({"type":"object","properties":{
      "kind":{"type":"integer"},
      "e":{"type":"object","x-kubernetes-embedded-resource":true,
           "additionalProperties":{"type":"string"}}}})")),
            "openAPIV3Schema.properties[e].additionalProperties | FieldValueForbidden | Forbidden: "
            "must not be used if x-kubernetes-embedded-resource is set\n"
            "openAPIV3Schema.properties[e].properties | FieldValueRequired | Required value: must "
            "not be empty if x-kubernetes-embedded-resource is true without "
            "x-kubernetes-preserve-unknown-fields\n"
            "openAPIV3Schema.properties[kind].type | FieldValueInvalid | Invalid value: "
            "\"integer\": must be string\n");
}

TEST(StructuralSchemaCompile, RefusesTheSchemaKeywordOnlyWhenNothingElseIsWrong) {
  EXPECT_EQ(text(compile_causes(R"({"$schema":"http://json-schema.org/draft-04/schema#",
                                    "type":"object"})")),
            "openAPIV3Schema | FieldValueInvalid | Invalid value: \"\": OpenAPIV3Schema 'schema' "
            "is not supported\n");
}

TEST(StructuralSchemaCompile, ValidatesDefaultsOfIntOrStringAndEnums) {
  compile_ok(spec_with(R"({"x-kubernetes-int-or-string":true,"default":"25%"})"));
  EXPECT_EQ(text(compile_causes(spec_with(R"({"type":"string","enum":["a","b"],"default":"c"})"))),
            "openAPIV3Schema.properties[spec].properties[x].default | FieldValueNotSupported | "
            "Unsupported value: \"c\": supported values: \"a\", \"b\"\n");
}

TEST(StructuralSchemaCompile, ReturnsAnInvalidErrorWithKubesAggregateMessage) {
  auto r = StructuralSchema::compile(parse(R"({"type":"object","properties":{"a":{},"b":{}}})"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_EQ(r.error().message,
            "[openAPIV3Schema.properties[a].type: Required value: must not be empty for specified "
            "object fields, openAPIV3Schema.properties[b].type: Required value: must not be empty "
            "for specified object fields]");
}

TEST(StructuralSchemaObjects, ValidatesMetadataNameAgainstTheSchema) {
  auto s = compile_ok(R"({"type":"object","properties":{"metadata":{"type":"object",
      "properties":{"name":{"type":"string","maxLength":5}}}}})");
  EXPECT_EQ(validate(s, R"({"metadata":{"name":"toolong"}})"),
            "metadata.name | FieldValueTooLong | Too long: may not be more than 5 bytes\n");
}

TEST(StructuralSchemaPruning, PrunesEmbeddedResourcesInsideLists) {
  auto s = compile_ok(R"({"type":"object","properties":{"items":{"type":"array","items":{
      "type":"object","x-kubernetes-embedded-resource":true,"properties":{
        "spec":{"type":"object","properties":{"a":{"type":"string"}}}}}}}})");
  auto v = parse(R"({"items":[{"apiVersion":"v1","kind":"A","metadata":{"x":1},"spec":{"a":"1","b":2}},
                              {"apiVersion":"v1","kind":"B","other":3}]})");
  EXPECT_EQ(s->prune(v), (std::vector<std::string>{"items[0].spec.b", "items[1].other"}));
  EXPECT_EQ(v, parse(R"({"items":[{"apiVersion":"v1","kind":"A","metadata":{"x":1},"spec":{"a":"1"}},
                                  {"apiVersion":"v1","kind":"B"}]})"));
}

// ---- a realistic custom resource ----

constexpr const char* kWidgetSchema = R"({
  "type": "object",
  "properties": {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
    "spec": {
      "type": "object",
      "required": ["image", "ports"],
      "properties": {
        "image": {"type": "string", "pattern": "(?i)^[a-z0-9./:-]+$", "maxLength": 128},
        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 100,
                     "default": 1},
        "restartPolicy": {"type": "string", "enum": ["Always", "OnFailure", "Never"],
                          "default": "Always"},
        "targetPort": {"x-kubernetes-int-or-string": true,
                       "anyOf": [{"type": "integer"}, {"type": "string"}],
                       "pattern": "^[a-z0-9-]+$"},
        "ports": {
          "type": "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
          "items": {
            "type": "object",
            "required": ["containerPort"],
            "properties": {
              "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
              "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"], "default": "TCP"},
              "name": {"type": "string", "maxLength": 15}
            }
          }
        },
        "schedule": {"type": "object", "nullable": true, "properties": {
          "cron": {"type": "string", "minLength": 1},
          "timeZone": {"type": "string", "nullable": true}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "selector": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "x-kubernetes-preserve-unknown-fields": true},
        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "strategy": {"type": "object", "default": {}, "properties": {
          "type": {"type": "string", "default": "RollingUpdate"},
          "maxSurge": {"x-kubernetes-int-or-string": true, "default": "25%"}}}
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "readyReplicas": {"type": "integer"},
        "conditions": {
          "type": "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["type"],
          "items": {"type": "object", "required": ["type", "status"], "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "lastTransitionTime": {"type": "string", "format": "date-time"}}}
        }
      }
    }
  }
})";

TEST(StructuralSchemaRealistic, PrunesDefaultsAndAcceptsAGoodObject) {
  auto s = compile_ok(kWidgetSchema);
  auto v = json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget",
      "metadata":{"name":"w","labels":{"app":"w"}},
      "spec":{"image":"Registry.Example.com/App:1.0","targetPort":"http",
        "ports":[{"containerPort":80},{"containerPort":80,"protocol":"UDP"}],
        "schedule":null,"tags":["a","b"],"selector":{"app":"w"},
        "template":{"apiVersion":"v1","kind":"Pod","metadata":{},"spec":{"anything":true}},
        "config":{"free":{"form":[1,2]}},"typo":1},
      "status":{"conditions":[{"type":"Ready","status":"True",
                               "lastTransitionTime":"2026-11-23T10:00:00Z"}]}})");
  EXPECT_EQ(s->prune(v), std::vector<std::string>{"spec.typo"});
  s->apply_defaults(v);
  EXPECT_EQ(text(s->validate(v)), "");
  const auto& spec = v.at("spec");
  EXPECT_EQ(spec.at("replicas"), 1);
  EXPECT_EQ(spec.at("restartPolicy"), "Always");
  EXPECT_EQ(spec.at("ports").at(0).at("protocol"), "TCP");
  EXPECT_EQ(spec.at("strategy"), json::parse(R"({"type":"RollingUpdate","maxSurge":"25%"})"));
  EXPECT_TRUE(spec.at("schedule").is_null());  // nullable: kept
}

TEST(StructuralSchemaRealistic, ListsEveryViolationOfABadObject) {
  auto s = compile_ok(kWidgetSchema);
  auto v = json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},
      "spec":{"image":"bad image!","replicas":-3,"restartPolicy":"Sometimes","targetPort":"Bad_Port",
        "ports":[{"containerPort":"eighty"},{"containerPort":70000,"protocol":"TCP"},
                 {"containerPort":70000,"protocol":"TCP"}],
        "tags":["a","a"],"selector":{"app":5},"template":{"kind":"Pod"}},
      "status":{"conditions":[{"type":"Ready","status":"Maybe","lastTransitionTime":"yesterday"},
                              {"type":"Ready","status":"True"}]}})");
  s->prune(v);
  s->apply_defaults(v);
  EXPECT_EQ(text(s->validate(v)),
            "spec.image | FieldValueInvalid | Invalid value: \"bad image!\": spec.image in body "
            "should match '(?i)^[a-z0-9./:-]+$'\n"
            "spec.replicas | FieldValueInvalid | Invalid value: -3: spec.replicas in body should be "
            "greater than or equal to 0\n"
            "spec.restartPolicy | FieldValueNotSupported | Unsupported value: \"Sometimes\": "
            "supported values: \"Always\", \"OnFailure\", \"Never\"\n"
            "spec.targetPort | FieldValueInvalid | Invalid value: \"Bad_Port\": spec.targetPort in "
            "body should match '^[a-z0-9-]+$'\n"
            "spec.ports[0].containerPort | FieldValueTypeInvalid | Invalid value: \"string\": "
            "spec.ports[0].containerPort in body must be of type integer: \"string\"\n"
            "spec.ports[1].containerPort | FieldValueInvalid | Invalid value: 70000: "
            "spec.ports[1].containerPort in body should be less than or equal to 65535\n"
            "spec.ports[2].containerPort | FieldValueInvalid | Invalid value: 70000: "
            "spec.ports[2].containerPort in body should be less than or equal to 65535\n"
            "spec.selector.app | FieldValueTypeInvalid | Invalid value: \"integer\": "
            "spec.selector.app in body must be of type string: \"integer\"\n"
            "status.conditions[0].status | FieldValueNotSupported | Unsupported value: \"Maybe\": "
            "supported values: \"True\", \"False\", \"Unknown\"\n"
            "status.conditions[0].lastTransitionTime | FieldValueTypeInvalid | Invalid value: "
            "\"yesterday\": status.conditions[0].lastTransitionTime in body must be of type "
            "date-time: \"yesterday\"\n"
            "spec.template.apiVersion | FieldValueRequired | Required value\n"
            "spec.ports[2] | FieldValueDuplicate | Duplicate value: map[string]interface "
            "{}{\"containerPort\":70000, \"protocol\":\"TCP\"}\n"
            "spec.tags[1] | FieldValueDuplicate | Duplicate value: \"a\"\n"
            "status.conditions[1] | FieldValueDuplicate | Duplicate value: map[string]interface "
            "{}{\"type\":\"Ready\"}\n");
}

// ---- deep and large inputs ----

json::value nested_objects(std::size_t depth, const char* key) {
  json::value v = json::object{{"leaf", "x"}};
  for (std::size_t i = 0; i < depth; ++i) {
    json::object o;
    o.emplace(key, std::move(v));
    v = std::move(o);
  }
  return v;
}

TEST(StructuralSchemaLimits, HandlesAHundredLevelsOfSchemaAndValue) {
  std::string schema = R"({"type":"object","properties":{"leaf":{"type":"string"}}})";
  for (int i = 0; i < 100; ++i) {
    schema = R"({"type":"object","properties":{"n":)" + schema + "}}";
  }
  auto s = compile_ok(schema);
  auto v = nested_objects(100, "n");
  EXPECT_EQ(text(s->validate(v)), "");
  auto bad = v;
  json::value* at = &bad;
  for (int i = 0; i < 100; ++i) at = &at->as_object()["n"];
  at->as_object()["leaf"] = 1;
  at->as_object()["bogus"] = 1;
  auto pruned = s->prune(bad);
  ASSERT_EQ(pruned.size(), 1u);
  EXPECT_EQ(pruned[0].size(), 100 * 2 + 5);  // "n." x 100, then "bogus"
  EXPECT_EQ(s->validate(bad).size(), 1u);
}

TEST(StructuralSchemaLimits, RefusesSchemasNestedDeeperThanTheLimit) {
  json::value schema = json::object{{"type", "string"}};
  for (std::size_t i = 0; i < StructuralSchema::kMaxSchemaDepth + 5; ++i) {
    schema = json::object{{"type", "object"}, {"properties", json::object{{"n", std::move(schema)}}}};
  }
  auto r = StructuralSchema::compile(schema);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().causes.at(0).message.find("must not nest more than 128 schemas"),
            std::string::npos);
}

json::value nested_arrays(std::size_t depth) {
  json::value deep = json::array{};
  for (std::size_t i = 0; i < depth; ++i) {
    json::array a;
    a.emplace_back(std::move(deep));
    deep = std::move(a);
  }
  return deep;
}

TEST(StructuralSchemaLimits, BoundsEveryWalkOnValuesDeeperThanStorageAllows) {
  // Walks that follow the schema stop with it; walks into schemaless values (set members
  // compared and hashed, arrays pruned under additionalProperties: true) stop at the limit.
  auto s = compile_ok(R"({"type":"object","x-kubernetes-preserve-unknown-fields":true,
      "properties":{"a":{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}},
        "set":{"type":"array","x-kubernetes-list-type":"set",
               "items":{"x-kubernetes-preserve-unknown-fields":true}},
        "free":{"type":"object","additionalProperties":true}}})");
  json::value v = json::object{};
  v.as_object().emplace("a", nested_arrays(1000));
  v.as_object().emplace("b", nested_objects(1000, "x"));
  json::array set;
  set.emplace_back(nested_arrays(1000));
  set.emplace_back(nested_arrays(1000));
  v.as_object().emplace("set", std::move(set));
  json::object free;
  free.emplace("deep", nested_arrays(1000));
  v.as_object().emplace("free", std::move(free));
  auto copy = v;
  EXPECT_TRUE(s->prune(v).empty());
  s->apply_defaults(v);
  EXPECT_EQ(v, copy);
  // Members beyond the limit never compare equal, so no duplicate is claimed.
  EXPECT_EQ(text(s->validate(v)), "");
}

TEST(StructuralSchemaLimits, ChecksHugeSetsAndMapListsInLinearTime) {
  auto s = compile_ok(R"({"type":"object","properties":{
      "set":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
      "map":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
             "items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}}})");
  constexpr int kN = 200'000;
  json::array set, map;
  set.reserve(kN);
  map.reserve(kN);
  for (int i = 0; i < kN; ++i) {
    std::string name = "item-" + std::to_string(i % (kN / 2));  // every value twice
    set.emplace_back(name);
    map.emplace_back(json::object{{"name", name}});
  }
  json::value v = json::object{{"set", std::move(set)}, {"map", std::move(map)}};
  auto start = std::chrono::steady_clock::now();
  auto causes = s->validate(v);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(causes.size(), static_cast<std::size_t>(kN));  // kN/2 in each list
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(StructuralSchemaLimits, IsSafeToUseFromSeveralThreads) {
  auto s = compile_ok(kWidgetSchema);
  auto bad = json::parse(R"({"spec":{"image":"x y","ports":[{"containerPort":0}]}})");
  auto expected = text(s->validate(bad));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        if (text(s->validate(bad)) != expected) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace kwatch::schema
