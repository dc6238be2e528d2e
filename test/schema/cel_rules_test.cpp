// x-kubernetes-validations through StructuralSchema: compiled with the definition, run at every
// write, worded as kube words them.
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <string>

#include "schema/structural_schema.hpp"
#include "schema/structural_schema_tree.hpp"

namespace kwatch::schema {
namespace {

namespace json = boost::json;
using apimachinery::Cause;
using Schema = std::shared_ptr<const StructuralSchema>;

// A root schema whose `spec` has `spec_schema`'s properties and `spec_rules` (a JSON array).
std::string crd(std::string_view spec_properties, std::string_view spec_rules = "[]",
                std::string_view root_rules = "[]") {
  return R"({"type":"object","x-kubernetes-validations":)" + std::string(root_rules) +
         R"(,"properties":{"spec":{"type":"object","x-kubernetes-validations":)" +
         std::string(spec_rules) + R"(,"properties":)" + std::string(spec_properties) + "}}}";
}

constexpr std::string_view kReplicas =
    R"({"replicas":{"type":"integer"},"name":{"type":"string","maxLength":63}})";

Schema compile_ok(const std::string& schema) {
  auto r = StructuralSchema::compile(json::parse(schema));
  EXPECT_TRUE(r.has_value()) << schema << "\n" << (r ? "" : r.error().message);
  return r ? *r : nullptr;
}

// One line per cause: "<field>: <message>".
std::string lines(const std::vector<Cause>& causes) {
  std::string out;
  for (const auto& c : causes) out += c.field + ": " + c.message + "\n";
  return out;
}

std::string compile_errors(const std::string& schema) {
  auto r = StructuralSchema::compile(json::parse(schema));
  if (r) return "compiled";
  return lines(r.error().causes);
}

std::string validate(const Schema& s, std::string_view value, const char* old = nullptr,
                     std::vector<std::string>* warnings = nullptr) {
  if (!s) return "no schema";
  const json::value v = json::parse(value);
  json::value o;
  if (old != nullptr) o = json::parse(old);
  return lines(s->validate(v, {}, old != nullptr ? &o.get_object() : nullptr, warnings));
}

TEST(CelRules, AFailingRuleIsReportedAtItsNodeWithItsType) {
  const Schema s = compile_ok(crd(kReplicas, R"([{"rule": "self.replicas < 10"}])"));
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 3}})"), "");
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 30}})"),
            "spec: Invalid value: \"object\": failed rule: self.replicas < 10\n");
}

TEST(CelRules, MessagesReasonsAndFieldPathsShapeTheError) {
  const Schema s = compile_ok(crd(kReplicas, R"([
      {"rule": "self.replicas < 10", "message": " too many replicas "},
      {"rule": "self.name != 'x'", "messageExpression": "'name ' + self.name + ' is taken'",
       "reason": "FieldValueForbidden", "fieldPath": ".name"},
      {"rule": "self.replicas != 7", "reason": "FieldValueRequired"},
      {"rule": "self.replicas != 7", "reason": "FieldValueDuplicate", "message": "dropped"}])"));
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 30, "name": "x"}})"),
            "spec: Invalid value: \"object\": too many replicas\n"
            "spec.name: Forbidden: name x is taken\n");
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 7, "name": "y"}})"),
            "spec: Required value: failed rule: self.replicas != 7\n"
            "spec: Duplicate value: \"object\"\n");
}

TEST(CelRules, AMessageExpressionThatFailsFallsBackToTheMessage) {
  const Schema s = compile_ok(crd(kReplicas, R"([
      {"rule": "self.replicas < 10", "message": "static", "messageExpression": "self.name"}])"));
  // No name: the messageExpression errors (no such key), the message stands.
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 30}})"),
            "spec: Invalid value: \"object\": static\n");
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 30, "name": "   "}})"),
            "spec: Invalid value: \"object\": static\n");
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 30, "name": "dynamic"}})"),
            "spec: Invalid value: \"object\": dynamic\n");
}

TEST(CelRules, RulesRunAtEveryLevelWithKubesPaths) {
  const Schema s = compile_ok(crd(R"({
      "labels": {"type": "object", "additionalProperties": {"type": "string",
                 "x-kubernetes-validations": [{"rule": "self.size() < 4"}]}},
      "ports": {"type": "array", "items": {"type": "integer",
                 "x-kubernetes-validations": [{"rule": "self > 0"}]}}})",
                                  "[]", R"x([{"rule": "self.metadata.name.startsWith('a')"}])x"));
  EXPECT_EQ(validate(s, R"({"metadata": {"name": "bad"},
                            "spec": {"labels": {"app": "toolong"}, "ports": [80, -1]}})"),
            "<nil>: Invalid value: \"object\": failed rule: self.metadata.name.startsWith('a')\n"
            "spec.labels[app]: Invalid value: \"string\": failed rule: self.size() < 4\n"
            "spec.ports[1]: Invalid value: \"integer\": failed rule: self > 0\n");
}

TEST(CelRules, EvaluationErrorsAreWordedAsKubeWordsThem) {
  const Schema s = compile_ok(crd(kReplicas, R"([{"rule": "self.name.size() > 0"},
      {"rule": "self.replicas / (self.replicas - 1) > 0"}])"));
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 1}})"),
            "spec: Invalid value: \"object\": no such key: name evaluating rule: "
            "self.name.size() > 0\n"
            "spec: Invalid value: \"object\": division by zero evaluating rule: "
            "self.replicas / (self.replicas - 1) > 0\n");
}

TEST(CelRules, TransitionRulesCompareWithTheOldObject) {
  const Schema s = compile_ok(crd(kReplicas, R"([
      {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
      {"rule": "!oldSelf.hasValue() || self.replicas >= oldSelf.value().replicas",
       "optionalOldSelf": true, "message": "may not scale down"}])"));
  // Create: the plain transition rule does not run; the optional one sees none.
  EXPECT_EQ(validate(s, R"({"spec": {"name": "a", "replicas": 1}})"), "");
  EXPECT_EQ(validate(s, R"({"spec": {"name": "b", "replicas": 1}})",
                     R"({"spec": {"name": "a", "replicas": 2}})"),
            "spec: Invalid value: \"object\": name is immutable\n"
            "spec: Invalid value: \"object\": may not scale down\n");
  EXPECT_EQ(validate(s, R"({"spec": {"name": "a", "replicas": 3}})",
                     R"({"spec": {"name": "a", "replicas": 2}})"),
            "");
}

TEST(CelRules, MapListItemsCorrelateByTheirKeys) {
  const Schema s = compile_ok(crd(R"({"items": {"type": "array", "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object", "required": ["name"],
      "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
      "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size", "message": "shrunk"}]}}})"));
  // Reordered and one item new: only the item that shrank fails.
  EXPECT_EQ(validate(s, R"({"spec": {"items": [{"name": "b", "size": 1}, {"name": "c", "size": 1},
                                                {"name": "a", "size": 5}]}})",
                     R"({"spec": {"items": [{"name": "a", "size": 4}, {"name": "b", "size": 2}]}})"),
            "spec.items[0]: Invalid value: \"object\": shrunk\n");
}

TEST(CelRules, SetAndMapListsCompareWhateverTheirOrder) {
  const Schema s = compile_ok(crd(R"({
      "tags": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "set",
               "items": {"type": "string", "maxLength": 16}},
      "ports": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object",
                "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 16},
                "port": {"type": "integer"}}}}})",
                                  R"x([{"rule": "self.tags == oldSelf.tags", "message": "tags are immutable"},
      {"rule": "self.ports == oldSelf.ports", "message": "ports are immutable"},
      {"rule": "size(self.tags + ['a', 'b']) <= 3", "message": "a set adds what it lacks"}])x"));
  const char* old = R"({"spec": {"tags": ["a", "b", "c"], "ports": [{"name": "http", "port": 80},
      {"name": "https", "port": 443}]}})";
  // Reordered: the same set and the same map list (and the set's union stays at 3 elements).
  EXPECT_EQ(validate(s, R"({"spec": {"tags": ["c", "a", "b"], "ports": [{"name": "https", "port": 443},
      {"name": "http", "port": 80}]}})", old),
            "");
  EXPECT_EQ(validate(s, R"({"spec": {"tags": ["a", "b", "d"], "ports": [{"name": "https", "port": 443},
      {"name": "http", "port": 81}]}})", old),
            "spec: Invalid value: \"object\": tags are immutable\n"
            "spec: Invalid value: \"object\": ports are immutable\n");
}

TEST(CelRules, UnchangedValuesRatchetToWarnings) {
  const Schema s = compile_ok(crd(kReplicas, R"([{"rule": "self.replicas < 10"}])"));
  std::vector<std::string> warnings;
  // The spec is as it was: its rule's complaint becomes a warning.
  EXPECT_EQ(validate(s, R"({"metadata": {"labels": {"a": "b"}}, "spec": {"replicas": 30}})",
                     R"({"spec": {"replicas": 30}})", &warnings),
            "");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "spec: Invalid value: \"object\": failed rule: self.replicas < 10");
  // Changed: an error again.
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": 31}})", R"({"spec": {"replicas": 30}})"),
            "spec: Invalid value: \"object\": failed rule: self.replicas < 10\n");
}

TEST(CelRules, AValueOfTheWrongShapeIsNotRunThroughTheRules) {
  const Schema s = compile_ok(crd(kReplicas, R"([{"rule": "self.replicas < 10"}])"));
  EXPECT_EQ(validate(s, R"({"spec": {"replicas": "many"}})"),
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type "
            "integer: \"string\"\n"
            "<nil>: Invalid value: null: some validation rules were not checked because the "
            "object was invalid; correct the existing errors to complete validation\n");
}

TEST(CelRules, AnExpensiveRuleIsStoppedByThePerCallLimit) {
  // Within the definition's estimate (at most 100 items), past the per-evaluation limit at run
  // time when the list is full.
  const Schema s = compile_ok(crd(R"({"xs": {"type": "array", "maxItems": 100,
                                            "items": {"type": "integer"}}})",
      R"x([{"rule": "self.xs.all(a, self.xs.all(b, self.xs.all(c, a + b + c > 0)))"}])x"));
  std::string xs = "[";
  for (int i = 1; i <= 100; ++i) xs += (i > 1 ? "," : "") + std::to_string(i);
  xs += "]";
  EXPECT_EQ(validate(s, R"({"spec": {"xs": )" + xs + "}}"),
            "spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': "
            "no further validation rules will be run due to call cost exceeds limit for rule: "
            "self.xs.all(a, self.xs.all(b, self.xs.all(c, a + b + c > 0)))\n");
}

TEST(CelRules, PropertyNamesAreEscapedAsKubeEscapesThem) {
  const Schema s = compile_ok(crd(R"({"x-y": {"type": "integer"}, "namespace": {"type": "string"},
      "a.b": {"type": "integer"}})", R"([{"rule": "self.x__dash__y + self.a__dot__b < 3 && self.__namespace__ != ''"}])"));
  EXPECT_EQ(validate(s, R"({"spec": {"x-y": 1, "a.b": 1, "namespace": "n"}})"), "");
  EXPECT_EQ(validate(s, R"({"spec": {"x-y": 2, "a.b": 1, "namespace": "n"}})"),
            "spec: Invalid value: \"object\": failed rule: self.x__dash__y + self.a__dot__b < 3 "
            "&& self.__namespace__ != ''\n");
}

TEST(CelRules, TheDefinitionIsRefusedForRulesThatCannotRun) {
  EXPECT_EQ(compile_errors(crd(kReplicas, R"([{"rule": "self.replica > 1"}])")),
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
            "{\"Rule\":\"self.replica \\u003e 1\",\"Message\":\"\",\"MessageExpression\":\"\","
            "\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: "
            "ERROR: <input>:1:5: undefined field 'replica'\n | self.replica > 1\n | ....^\n");
  EXPECT_NE(compile_errors(crd(kReplicas, R"([{"rule": "self.replicas"}])"))
                .find("cel expression must evaluate to a bool"),
            std::string::npos);
  EXPECT_NE(compile_errors(crd(kReplicas, R"([{"rule": "true", "messageExpression": "1"}])"))
                .find("messageExpression must evaluate to a string"),
            std::string::npos);
  // Kube's environment refuses literals of mixed element types.
  EXPECT_NE(compile_errors(crd(kReplicas, R"([{"rule": "[1, 'a'].size() > 0"}])"))
                .find("expected type 'int' but found 'string'"),
            std::string::npos);
}

TEST(CelRules, TheRulesFieldsAreCheckedFirst) {
  EXPECT_EQ(compile_errors(crd(kReplicas, R"([{"rule": "  "},
      {"rule": "true", "reason": "Bogus"}, {"rule": "true", "fieldPath": ".nope"},
      {"rule": "true", "message": "a\nb"}, {"rule": "true\n&& true"}])")),
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Required value: "
            "rule is not specified\n"
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[1].reason: Unsupported "
            "value: \"Bogus\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", "
            "\"FieldValueInvalid\", \"FieldValueRequired\"\n"
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[2].fieldPath: Invalid "
            "value: \".nope\": must be a valid path\n"
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[3].message: Invalid value: "
            "\"a\\nb\": must not contain line breaks\n"
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[4].message: Required "
            "value: message must be specified if rule contains line breaks\n");
}

TEST(CelRules, RulesTooExpensiveForTheirBoundsAreRefused) {
  // An unbounded list of unbounded strings: matching each against a pattern is far past the
  // limit by kube's estimate; bounds bring it within.
  const std::string tags = R"({"tags": {"type": "array", "items": {"type": "string"}}})";
  EXPECT_EQ(compile_errors(crd(tags, R"x([{"rule": "self.tags.all(t, t.matches('^a'))"}])x")),
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: "
            "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the "
            "rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and "
            "strings are declared)\n"
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: "
            "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 "
            "schema\n"
            "openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for "
            "entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying "
            "the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and "
            "strings are declared)\n");
  // startsWith costs by its argument's size: 1048575 possible strings at 5 units each.
  EXPECT_EQ(compile_errors(crd(tags, R"x([{"rule": "self.tags.all(t, t.startsWith('a'))"}])x")),
            "compiled");
  EXPECT_EQ(compile_errors(crd(R"({"tags": {"type": "array", "maxItems": 100, "items":
      {"type": "string", "maxLength": 64}}})",
                               R"x([{"rule": "self.tags.all(t, t.matches('^a'))"}])x")),
            "compiled");
  // A map's keys count as size 0 in kube's estimate: a pattern over every key is affordable.
  EXPECT_EQ(compile_errors(crd(R"({"labels": {"type": "object", "additionalProperties":
      {"type": "string"}}})", R"x([{"rule": "self.labels.all(k, k.matches('^[a-z]+$'))"}])x")),
            "compiled");
  // A rule inside an unbounded list counts once per possible item.
  EXPECT_NE(compile_errors(crd(R"x({"tags": {"type": "array", "items": {"type": "string",
      "x-kubernetes-validations": [{"rule": "self.matches('^[a-z]+$')"}]}}})x"))
                .find("items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost "
                      "exceeds budget"),
            std::string::npos);
}

TEST(CelRules, AStoredDefinitionIsServedWhateverItsRules) {
  // Stored before its rules were checked: served, and the rule that cannot run says so at each
  // write instead.
  SchemaCompileOptions options;
  options.cel.stored = true;
  auto r = StructuralSchema::compile(
      json::parse(crd(kReplicas, R"([{"rule": "self.replica > 1"}, {"rule": "self.replicas < 10"}])")),
      options);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const std::string out = lines((*r)->validate(json::parse(R"({"spec": {"replicas": 30}})")));
  EXPECT_NE(out.find("spec: Invalid value: \"object\": rule compile error: compilation failed: "
                     "ERROR: <input>:1:5: undefined field 'replica'"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("spec: Invalid value: \"object\": failed rule: self.replicas < 10"),
            std::string::npos)
      << out;
}

TEST(CelRules, AnUnchangedSchemaIsNotHeldToThePerRuleLimitAgain) {
  const std::string expensive = crd(R"({"tags": {"type": "array", "items": {"type": "string"}}})",
                                    R"x([{"rule": "self.tags.all(t, t.matches('^a'))"}])x");
  SchemaCompileOptions options;
  options.cel.suppress_per_expression_cost = true;
  auto r = StructuralSchema::compile(json::parse(expensive), options);
  ASSERT_FALSE(r.has_value());
  // Only the schema's total is still enforced.
  for (const auto& c : r.error().causes) {
    EXPECT_EQ(c.message.find("estimated rule cost exceeds budget"), std::string::npos) << c.message;
  }
}

TEST(CelRules, OldSelfIsRefusedWhereNothingCorrelates) {
  EXPECT_EQ(compile_errors(crd(R"({"tags": {"type": "array", "maxItems": 10, "items": {
      "type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}})")),
            "openAPIV3Schema.properties[spec].properties[tags].items.x-kubernetes-validations[0]."
            "rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the "
            "uncorrelatable portion of the schema within "
            "openAPIV3Schema.properties[spec].properties[tags]\n");
  EXPECT_EQ(compile_errors(crd(kReplicas, R"([{"rule": "true", "optionalOldSelf": true}])")),
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].optionalOldSelf: "
            "Invalid value: true: may not be set if oldSelf is not used in rule\n");
}

// A node's rules that read only its own scalar fields are answered once per validation for
// items that agree on those fields (RuleRunner's memo): an item that differs in any of them, in
// presence or in value, is run again.
TEST(CelRules, ItemsAgreeingOnWhatTheirRulesReadShareOneAnswer) {
  const Schema s = compile_ok(crd(R"x({"items": {"type": "array", "maxItems": 64, "items": {
      "type": "object", "properties": {"kind": {"type": "string", "maxLength": 16},
        "n": {"type": "integer"}, "note": {"type": "string", "maxLength": 16},
        "alpha": {"type": "object", "properties": {"v": {"type": "string"}}},
        "bravo": {"type": "object", "properties": {"v": {"type": "string"}}}},
      "x-kubernetes-validations": [
        {"rule": "!(has(self.alpha) && self.kind != 'Alpha')"},
        {"rule": "!(has(self.bravo) && self.kind != 'Bravo')"},
        {"rule": "has(self.n) ? self.n <= 5 : true"}]}}})x"));
  const std::string good = R"({"kind": "Alpha", "alpha": {"v": "x"}, "n": 1, "note": "a"})";
  std::string items = "[";
  for (int i = 0; i < 8; ++i) items += good + ",";
  items += R"({"kind": "Bravo", "alpha": {"v": "x"}, "n": 1},)";   // 8: a value differs
  items += R"({"kind": "Alpha", "alpha": {"v": "y"}, "n": 7},)";   // 9: an int differs
  items += R"({"kind": "Alpha", "alpha": {}, "bravo": {}, "n": 1},)";  // 10: one more member
  items += R"({"kind": "Alpha", "alpha": {"v": "z"}, "n": 1, "note": "b"},)";  // 11: unread
  items += good + "]";
  EXPECT_EQ(validate(s, R"({"spec": {"items": )" + items + "}}"),
            "spec.items[8]: Invalid value: \"object\": failed rule: !(has(self.alpha) && "
            "self.kind != 'Alpha')\n"
            "spec.items[9]: Invalid value: \"object\": failed rule: has(self.n) ? self.n <= 5 : "
            "true\n"
            "spec.items[10]: Invalid value: \"object\": failed rule: !(has(self.bravo) && "
            "self.kind != 'Bravo')\n");
}

// The same for a list's own rules over its elements' fields: lists of one length whose
// elements agree on the fields the rules read share one answer; any difference is run again.
TEST(CelRules, ListsAgreeingOnTheirElementsFieldsShareOneAnswer) {
  const Schema s = compile_ok(crd(R"x({"groups": {"type": "array", "maxItems": 16, "items": {
      "type": "object", "properties": {"filters": {"type": "array", "maxItems": 8,
        "x-kubernetes-validations": [
          {"rule": "self.filter(f, f.type == 'A').size() <= 1"},
          {"rule": "!(self.exists(f, f.type == 'A') && self.exists(f, f.type == 'B'))"},
          {"rule": "self.all(f, !has(f.x) || f.type == 'X')"}],
        "items": {"type": "object", "properties": {"type": {"type": "string", "maxLength": 8},
          "name": {"type": "string", "maxLength": 8},
          "x": {"type": "object", "properties": {"v": {"type": "string"}}}}}}}}}})x"));
  const std::string good = R"({"filters": [{"type": "A", "name": "a"}, {"type": "C"}]})";
  std::string groups = "[";
  for (int i = 0; i < 4; ++i) groups += good + ",";
  groups += R"({"filters": [{"type": "A"}, {"type": "A"}]},)";               // 4: a value
  groups += R"({"filters": [{"type": "A"}, {"type": "B"}]},)";               // 5: a value
  groups += R"({"filters": [{"type": "A"}, {"type": "C", "x": {}}]},)";      // 6: presence
  groups += R"({"filters": [{"type": "A"}, {"type": "C"}, {"type": "A"}]},)";  // 7: length
  groups += R"({"filters": [{"type": "A", "name": "b"}, {"type": "C"}]}])";  // 8: unread
  EXPECT_EQ(validate(s, R"({"spec": {"groups": )" + groups + "}}"),
            "spec.groups[4].filters: Invalid value: \"array\": failed rule: self.filter(f, f.type "
            "== 'A').size() <= 1\n"
            "spec.groups[5].filters: Invalid value: \"array\": failed rule: !(self.exists(f, "
            "f.type == 'A') && self.exists(f, f.type == 'B'))\n"
            "spec.groups[6].filters: Invalid value: \"array\": failed rule: self.all(f, "
            "!has(f.x) || f.type == 'X')\n"
            "spec.groups[7].filters: Invalid value: \"array\": failed rule: self.filter(f, f.type "
            "== 'A').size() <= 1\n");
}

// Deeper reads key the same way: nested fields, a list's elements, a constant index, sizes.
// A comprehension over a map ranges over its keys, which no key holds: such a node is always
// run.
TEST(CelRules, ItemsAgreeingOnNestedReadsShareOneAnswer) {
  const Schema s = compile_ok(crd(R"x({"items": {"type": "array", "maxItems": 32, "items": {
      "type": "object", "properties": {
        "filters": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
          "rewrite": {"type": "object", "properties": {"path": {"type": "object", "properties": {
            "type": {"type": "string", "maxLength": 16}}}}}}}},
        "matches": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
          "path": {"type": "object", "properties": {"type": {"type": "string", "maxLength": 16},
            "value": {"type": "string", "maxLength": 16}}}}}},
        "meta": {"type": "object", "properties": {"labels": {"type": "object",
          "maxProperties": 4, "additionalProperties": {"type": "string", "maxLength": 8}}},
          "x-kubernetes-validations": [
            {"rule": "!has(self.labels) || self.labels.all(k, k.startsWith('x'))",
             "message": "labels"}]}},
      "x-kubernetes-validations": [
        {"rule": "(has(self.filters) && self.filters.exists_one(f, has(f.rewrite) && has(f.rewrite.path) && f.rewrite.path.type == 'Prefix')) ? (size(self.matches) == 1 && self.matches[0].path.type == 'PathPrefix') : true",
         "message": "prefix"}]}}})x"));
  const std::string filters = R"("filters": [{"rewrite": {"path": {"type": "Prefix"}}}])";
  const std::string good = "{" + filters + R"(,
      "matches": [{"path": {"type": "PathPrefix", "value": "/a"}}], "meta": {"labels": {"xa": "1"}}})";
  // Items 4 and 5 differ from it in one read each (the item's own size is read too).
  std::string items = "[";
  for (int i = 0; i < 4; ++i) items += good + ",";
  // 4: a value at a constant index
  const std::string meta = R"("meta": {"labels": {"xa": "1"}})";
  items += "{" + filters + R"(, "matches": [{"path": {"type": "Exact", "value": "/a"}}], )" + meta +
           "},";
  // 5: a list's length
  items += "{" + filters + R"(,
      "matches": [{"path": {"type": "PathPrefix", "value": "/a"}},
                  {"path": {"type": "PathPrefix", "value": "/a"}}], )" + meta +
           "},";
  // 6: a map of the same size with another key
  items += "{" + filters + R"(, "matches": [{"path": {"type": "PathPrefix", "value": "/a"}}],
      "meta": {"labels": {"ya": "1"}}},)";
  // 7: an element's nested value (the condition no longer holds: valid whatever the matches)
  items += R"({"filters": [{"rewrite": {"path": {"type": "Full"}}}], "matches": []},)";
  // 8: unread values differ
  items += "{" + filters + R"(, "matches": [{"path": {"type": "PathPrefix", "value": "/b"}}],
      "meta": {"labels": {"xb": "2"}}}])";
  EXPECT_EQ(validate(s, R"({"spec": {"items": )" + items + "}}"),
            "spec.items[4]: Invalid value: \"object\": prefix\n"
            "spec.items[5]: Invalid value: \"object\": prefix\n"
            "spec.items[6].meta: Invalid value: \"object\": labels\n");
}

// An answer kept for earlier items is given again only while the budget still holds its cost:
// identical items run out of budget at the same item as items that are all different.
TEST(CelRules, AKeptAnswerIsNotGivenPastTheBudget) {
  // Five rules of ~123k each per item at run time (a 25,000-character string matched by a
  // 198-character pattern): 15 items fit in the object's budget of 10,000,000, the 16th does
  // not. Each rule is within kube's estimate limits (at most 19 items).
  const std::string pattern = "^[a-z]+$|^" + std::string(188, 'b') + "$";
  std::string rules = "[";
  for (int i = 0; i < 5; ++i) {
    rules += std::string(i > 0 ? "," : "") + R"x({"rule": "self.v.matches(')x" + pattern + R"x(')"})x";
  }
  rules += "]";
  const Schema s = compile_ok(crd(R"({"items": {"type": "array", "maxItems": 19, "items": {
      "type": "object", "properties": {"v": {"type": "string", "maxLength": 25000}},
      "x-kubernetes-validations": )" + rules + "}}}"));
  const auto object = [](bool same) {
    std::string items = "[";
    for (int i = 0; i < 19; ++i) {
      const char last = same ? 'a' : static_cast<char>('a' + i);
      items += std::string(i > 0 ? "," : "") + R"({"v": ")" + std::string(24999, 'a') + last + "\"}";
    }
    return R"({"spec": {"items": )" + items + "]}}";
  };
  const std::string expected =
      "spec.items[15]: Invalid value: \"object\": validation failed due to running out of cost "
      "budget, no further validation rules will be run\n";
  EXPECT_EQ(validate(s, object(false)), expected);
  EXPECT_EQ(validate(s, object(true)), expected);
}

// The memo's bounds, seen through what the last validation on this thread did
// (detail::last_cel_memo_counts). Items that all differ in what their rules read: a node is
// looked up four times without a hit, then no more (each lookup costs a key and a search).
TEST(CelRules, ANodeWhoseItemsAllDifferStopsKeepingAnswers) {
  const Schema s = compile_ok(crd(R"x({"items": {"type": "array", "maxItems": 32, "items": {
      "type": "object", "properties": {"v": {"type": "string", "maxLength": 8}},
      "x-kubernetes-validations": [{"rule": "self.v.startsWith('a')"}]}}})x"));
  // Sixteen items: the first four take turns between two values; the rest take turns too
  // (`rest_distinct` false) or are all different.
  const auto items = [](bool rest_distinct) {
    std::string out = R"({"spec": {"items": [)";
    for (int i = 0; i < 16; ++i) {
      const std::string v = i < 4 || !rest_distinct ? "a" + std::to_string(i % 2)
                                                    : "ac" + std::to_string(i);
      out += std::string(i > 0 ? "," : "") + R"({"v": ")" + v + "\"}";
    }
    return out + "]}}";
  };
  std::string distinct = R"({"spec": {"items": [)";
  for (int i = 0; i < 16; ++i) {
    distinct += std::string(i > 0 ? "," : "") + R"({"v": "a)" + std::to_string(i) + "\"}";
  }
  distinct += "]}}";
  EXPECT_EQ(validate(s, distinct), "");
  detail::CelMemoCounts c = detail::last_cel_memo_counts();
  EXPECT_EQ(c.looked_up, 4u);
  EXPECT_EQ(c.misses, 4u);
  EXPECT_EQ(c.hits, 0u);
  // Two values taking turns: the second item misses, every later one hits.
  EXPECT_EQ(validate(s, items(false)), "");
  c = detail::last_cel_memo_counts();
  EXPECT_EQ(c.looked_up, 16u);
  EXPECT_EQ(c.misses, 2u);
  EXPECT_EQ(c.hits, 14u);
  // A node that has hit goes on to eight misses: items 0 and 1, then 4 to 9.
  EXPECT_EQ(validate(s, items(true)), "");
  c = detail::last_cel_memo_counts();
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.misses, 8u);
  EXPECT_EQ(c.looked_up, 10u);
}

// A value that cannot be keyed (here a list of more elements than a key holds) counts as a miss:
// such a node stops trying as one of distinct items does.
TEST(CelRules, AValueThatCannotBeKeyedCountsAsAMiss) {
  const Schema s = compile_ok(crd(R"x({"items": {"type": "array", "maxItems": 16, "items": {
      "type": "object", "properties": {"tags": {"type": "array", "maxItems": 100,
        "items": {"type": "string", "maxLength": 4}}},
      "x-kubernetes-validations": [{"rule": "self.tags.all(t, t.startsWith('a'))"}]}}})x"));
  std::string tags = "[";
  for (int i = 0; i < 70; ++i) tags += std::string(i > 0 ? "," : "") + "\"a\"";
  tags += "]";
  std::string object = R"({"spec": {"items": [)";
  for (int i = 0; i < 16; ++i) object += std::string(i > 0 ? "," : "") + R"({"tags": )" + tags + "}";
  object += "]}}";
  EXPECT_EQ(validate(s, object), "");
  const detail::CelMemoCounts c = detail::last_cel_memo_counts();
  EXPECT_EQ(c.looked_up, 4u);
  EXPECT_EQ(c.misses, 4u);
}

// At most 32 nodes of one schema keep answers (the thread's memo has a record for each):
// a 33rd and later are always run.
TEST(CelRules, AtMostThirtyTwoNodesKeepAnswers) {
  std::string properties = "{";
  std::string item = "{";
  for (int i = 0; i < 40; ++i) {
    const std::string name = "p" + std::to_string(i);
    properties += std::string(i > 0 ? "," : "") + "\"" + name +
                  R"(": {"type": "object", "properties": {"v": {"type": "string", "maxLength": 4}},
                  "x-kubernetes-validations": [{"rule": "self.v == 'a'"}]})";
    item += std::string(i > 0 ? "," : "") + "\"" + name + R"(": {"v": "a"})";
  }
  properties += "}";
  item += "}";
  const Schema s = compile_ok(crd(R"({"items": {"type": "array", "maxItems": 4, "items": {
      "type": "object", "properties": )" + properties + "}}}"));
  EXPECT_EQ(validate(s, R"({"spec": {"items": [)" + item + "," + item + "]}}"), "");
  const detail::CelMemoCounts c = detail::last_cel_memo_counts();
  EXPECT_EQ(c.looked_up, 64u);  // 32 nodes, two items each
  EXPECT_EQ(c.hits, 32u);
}

}  // namespace
}  // namespace kwatch::schema
