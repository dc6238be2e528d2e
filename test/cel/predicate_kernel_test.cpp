// The predicate kernel answers exactly what the evaluator answers: the same value and the same
// cost, also when the budget runs out (at every limit below what the expression costs), and the
// evaluator's own answer when it does not decide. Every expression of the table runs over every
// object, with and without the kernel.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>
#include <vector>

#include "cel/checker.hpp"
#include "cel/json_value.hpp"
#include "cel/libraries.hpp"
#include "cel/literal.hpp"
#include "cel/parser.hpp"
#include "cel/predicate_kernel.hpp"
#include "cel/program.hpp"

namespace kwatch::cel {
namespace {

TypePtr object_type(std::map<std::string, TypePtr, std::less<>> fields) {
  auto t = std::make_shared<Type>();
  t->kind = TypeKind::object;
  t->name = "obj";
  t->fields = std::move(fields);
  return t;
}

struct Case {
  const char* source;
  bool kernel;  // whether the kernel takes it
};

// Guards in the shapes CRD rules use, and what the kernel must leave to the evaluator.
const Case kCases[] = {
    {"!(has(self.cors) && self.type != 'CORS')", true},
    {"!(!has(self.cors) && self.type == 'CORS')", true},
    {"!!has(self.cors)", true},
    {"self.type in ['Exact', 'PathPrefix'] ? self.value.startsWith('/') : true", true},
    {"(self.type in ['Exact','PathPrefix']) ? !self.value.contains('//') : true", true},
    {"self.type in ['Exact', 'PathPrefix'] || self.type == 'RegularExpression'", true},
    // One test of a slot, made twice: answered once per object, charged each time.
    {"self.type == 'CORS' || self.type != 'CORS'", true},
    {"self.type != 'RequestHeaderModifier' ? true : self.type == 'RequestHeaderModifier'", true},
    {"self.value.matches('^/[a-z]+$')", true},
    {"self.value.matches('[')", true},                 // an invalid pattern: an error
    {"has(self.cors.origin) || self.type == 'X'", true},  // has() through a missing field
    {"self.cors.origin == 'a' || true", true},            // an error the evaluator absorbs
    {"true || self.cors.origin == 'a'", true},
    {"self.n > 2 && self.n <= 10", true},
    {"self.n + 1 > 2", true},                              // a call as a value
    {"self.n + 9223372036854775807 > 0", true},            // overflow: an error
    {"self.ratio < 1.5", true},
    {"self.ratio == double(self.n)", true},                // two fields, a conversion
    {"size(self.value) > 3", true},
    {"self.value.size() == 0 ? false : self.value.endsWith('/')", true},
    {"self.tags.exists(t, t == 'a')", true},
    {"self.tags.all(t, t != 'b')", true},
    {"self.tags.all(t, t != 'a')", true},                  // stops at the first
    {"self.tags.exists_one(t, t.startsWith('a'))", true},
    {"self.tags.filter(t, t != 'b').size() <= 1", true},
    {"self.items.all(i, has(i.origin) && i.origin != '')", true},
    {"self.items.exists(i, i.origin == 'x')", true},       // a missing field: an error
    {"self.items.filter(i, has(i.origin)).size() == 2", true},
    {"size(self.tags.filter(t, t.startsWith('a'))) >= 1", true},
    {"self.tags.filter(t, t != 'a') == ['b']", true},
    {"self.items.exists_one(i, self.items.exists(j, j == i))", true},  // nested
    {"self.items.all(i, self.tags.exists_one(t, has(i.origin) && t == i.origin))", true},
    {"self.tags.map(t, t + 'x').size() > 0", false},       // map
    {"self.tags.all(i, t, t != '')", false},               // two variables
    {"self.labels.all(k, k != '')", true},                 // a map's keys
    {"self.labels.exists(k, self.labels[k] == 'b')", false},  // an index by a variable
    {"self.labels.filter(k, k.size() > 0).size() == 1", true},
    {"self.tags[0] == 'a'", true},                         // an index (out of range: an error)
    {"self.items[1].origin == 'b'", true},                 // an index, then a field
    {"size(self.items) == 2 && size(self.labels) >= 1", true},
    {"self.items.size() > 1 || self.tags.size() == 0", true},
    {"self.labels['a'] == 'b'", true},                     // a map's key (missing: an error)
    {"'a' in self.tags && !('*' in self.tags)", true},     // a list that is no constant
    {"(has(self.cors) || self.n > 1) == (self.value == '')", true},  // conditions as values
    {"(size(self.tags) > 0 ? size(self.tags[0]) : 0) + (size(self.tags) > 1 ? 1 : 0) <= 3",
     true},
    {"(self.n > 1 ? self.value : 'x') == 'x'", false},     // an attribute as a branch
    {"[self.type] == ['CORS']", false},                    // a list that is not a constant
    // String methods on the field's text; long strings: their cost counts code points.
    {"self.value.contains('HeaderModifier') || self.type.endsWith('Modifi\u00e9r')", true},
    {"has(self.cors) && self.cors.origin.startsWith('a')", true},
    {"self.value.matches('^[A-Za-z\u00e9]+$')", true},
    {"!has(self.loooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooong) || size(self.loooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooong) > 1", true},
    // Long strings compared: their cost counts code points.
    {"self.type != 'RequestHeaderModifier'", true},
    {"self.type == 'ResponseHeaderModifi\u00e9r' || self.value == 'RequestHeaderModifier'", true},
};

const char* kObjects[] = {
    R"({"type": "CORS", "cors": {"origin": "a"}, "value": "/abc", "n": 3, "ratio": 3.0,
        "tags": ["a"], "items": [{"origin": "a"}, {"origin": "b"}], "labels": {"a": "b"}})",
    R"({"type": "CORS", "value": "//x/", "n": 11, "ratio": 1.0, "tags": [],
        "items": [{"origin": "x"}, {}, {"origin": ""}], "labels": {"": "x"}})",
    R"({"tags": ["a", "ab", "b", "a"], "items": [{"origin": "ab"}, {"origin": "b"}]})",
    R"({"tags": ["b"], "items": []})",
    R"({"type": "Exact", "cors": {}, "value": "abc", "n": 9223372036854775807})",
    R"({"type": "RegularExpression", "value": "", "ratio": 0.5})",
    R"({"cors": null})",
    R"({"type": 5, "value": ["x"], "cors": "a", "tags": {"a": 1}})",  // not what the schema says
    R"({})",
    R"({"type": "ResponseHeaderModifier", "value": "RequestHeaderModifier", "loooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooong": "ab"})",
    R"({"type": "RequestHeaderModifier", "value": "RequestHeaderModifie\u00e9\u00e9\u00e9"})",
    R"({"type": "ResponseHeaderModifi\u00e9r", "value": "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"})",
};

// An expression that would spend far more than its limit stops near the limit, as the
// evaluator does, rather than running to its end first: a million steps here.
TEST(PredicateKernel, StopsNearTheLimit) {
  const TypePtr self = object_type({{"xs", types::list(types::int64())}});
  const Parsed parsed = parse("self.xs.all(a, self.xs.all(b, a + b > -1))");
  const Checked checked = check(parsed.ast, {"self"}, {self}, kubernetes_functions());
  ASSERT_TRUE(checked.errors.empty());
  Declarations decls{{"self"}, &kubernetes_functions()};
  decls.node_types = &checked.types;
  const Program program = Program::compile(parsed.ast, decls);
  ASSERT_TRUE(program.has_predicate_kernel());
  boost::json::array xs;
  for (int i = 0; i < 1000; ++i) xs.push_back(i);
  const boost::json::value doc = boost::json::object{{"xs", std::move(xs)}};
  JsonArena arena;
  const Value vars[] = {json_view(doc, self.get(), arena)};
  std::uint64_t cost = 0;
  EXPECT_FALSE(program.decide(vars, 10'000, cost).has_value());
  EXPECT_LE(cost, 10'100u);  // a little past the limit: where the loop looked
  const EvalResult r = program.run(vars, 10'000);
  ASSERT_TRUE(r.value.is_error());
  EXPECT_EQ(r.value.as_text(), "operation cancelled: actual cost limit exceeded");
}

TypePtr table_type() {
  const TypePtr cors = object_type({{"origin", types::string()}});
  return object_type({{"type", types::string()},
                      {"cors", cors},
                      {"value", types::string()},
                      {"n", types::int64()},
                      {"ratio", types::float64()},
                      {"tags", types::list(types::string())},
                      {"items", types::list(cors)},
                      {"labels", types::map(types::string(), types::string())},
                      // A name too long for a slot: read from the object, never a slot.
                      {"loooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooong", types::string()}});
}

std::string outcome(const EvalResult& r) {
  return (r.value.is_error() ? "error: " + std::string(r.value.as_text())
                             : format_literal(r.value)) +
         " cost " + std::to_string(r.cost);
}

TEST(PredicateKernel, AnswersWhatTheEvaluatorAnswers) {
  const TypePtr self = table_type();
  for (const Case& c : kCases) {
    const Parsed parsed = parse(c.source);
    ASSERT_TRUE(parsed.errors.empty()) << c.source;
    const Checked checked = check(parsed.ast, {"self"}, {self}, kubernetes_functions());
    ASSERT_TRUE(checked.errors.empty()) << c.source << ": " << checked.errors[0].message;
    Declarations decls{{"self"}, &kubernetes_functions()};
    decls.node_types = &checked.types;
    const Program fast = Program::compile(parsed.ast, decls);
    decls.predicate_kernel = false;
    const Program plain = Program::compile(parsed.ast, decls);
    EXPECT_EQ(fast.has_predicate_kernel(), c.kernel) << c.source;
    EXPECT_FALSE(plain.has_predicate_kernel());
    for (const char* text : kObjects) {
      const boost::json::value doc = boost::json::parse(text);
      JsonArena arena;
      const Value vars[] = {json_view(doc, self.get(), arena)};
      const EvalResult expected = plain.run(vars, UINT64_MAX);
      EXPECT_EQ(outcome(fast.run(vars, UINT64_MAX)), outcome(expected))
          << c.source << " over " << text;
      // With any smaller budget, both stop at the same charge, having spent the same.
      for (std::uint64_t limit = 0; limit < expected.cost; ++limit) {
        EXPECT_EQ(outcome(fast.run(vars, limit)), outcome(plain.run(vars, limit)))
            << c.source << " over " << text << " (limit " << limit << ")";
      }
    }
  }
}

// The expressions of one schema node share a table of self's fields, found once per object:
// with the slots filled, each decides what the evaluator answers, at every limit; without them
// (an object too large to fill) as before. Run as one batch, the guards stop at the first that
// does not hold, having charged what each one before it cost.
TEST(PredicateKernel, FieldSlotsAnswerWhatTheEvaluatorAnswers) {
  const TypePtr self = table_type();
  FieldSlots slots;
  std::vector<Program> fast, plain;
  std::vector<std::string> sources;
  for (const Case& c : kCases) {
    const Parsed parsed = parse(c.source);
    const Checked checked = check(parsed.ast, {"self"}, {self}, kubernetes_functions());
    ASSERT_TRUE(checked.errors.empty()) << c.source;
    Declarations decls{{"self"}, &kubernetes_functions()};
    decls.node_types = &checked.types;
    decls.self_fields = &slots;
    fast.push_back(Program::compile(parsed.ast, decls));
    decls.self_fields = nullptr;
    decls.predicate_kernel = false;
    plain.push_back(Program::compile(parsed.ast, decls));
    sources.push_back(c.source);
  }
  // type, cors, value, n, ratio, tags, items, labels: one slot each, shared.
  EXPECT_EQ(slots.size(), 8u);
  std::vector<std::string> objects(std::begin(kObjects), std::end(kObjects));
  {
    // More members than a table fills: the fields are found one by one.
    boost::json::object big = boost::json::parse(kObjects[0]).as_object();
    for (int i = 0; i < 20; ++i) big["x" + std::to_string(i)] = i;
    objects.push_back(boost::json::serialize(big));
  }
  for (const std::string& text : objects) {
    const boost::json::value doc = boost::json::parse(text);
    JsonArena arena;
    const Value vars[] = {json_view(doc, self.get(), arena)};
    SelfFields filled;
    SelfFields* fields = nullptr;
    if (doc.is_object() && filled.fill(slots, doc.as_object(), arena)) fields = &filled;
    EXPECT_EQ(fields != nullptr, doc.as_object().size() <= FieldSlots::kMaxMembers);
    std::vector<PredicateKernel::Guard> guards;
    for (std::size_t i = 0; i < fast.size(); ++i) {
      guards.push_back({fast[i].predicate_kernel(), false});
      const EvalResult expected = plain[i].run(vars, UINT64_MAX);
      // Every limit up to the cost, and none: a kernel that charged more than the evaluator
      // would pass unseen under the limits alone (it stops, and the evaluator answers).
      std::vector<std::uint64_t> limits;
      for (std::uint64_t limit = 0; limit <= expected.cost; ++limit) limits.push_back(limit);
      limits.push_back(UINT64_MAX);
      for (const std::uint64_t limit : limits) {
        std::uint64_t cost = 0;
        const auto held = fast[i].decide(vars, limit, cost, fields);
        if (!held) continue;  // the evaluator's to answer
        const EvalResult r = plain[i].run(vars, limit);
        EXPECT_EQ((*held ? "true" : "false") + std::string(" cost ") + std::to_string(cost),
                  outcome(r))
            << sources[i] << " over " << text << " (limit " << limit << ")";
      }
    }
    // The batch, from each start, against the guards one by one.
    for (std::size_t from = 0; from < guards.size(); ++from) {
      for (const std::uint64_t budget : {std::uint64_t{3}, std::uint64_t{40}, UINT64_MAX}) {
        std::uint64_t left = budget;
        const std::size_t stop = PredicateKernel::run_while_true(
            guards, from, PredicateKernel::locals_needed(guards), vars, fields, 25, left);
        std::uint64_t want_left = budget;
        std::size_t want_stop = from;
        for (; want_stop < guards.size(); ++want_stop) {
          std::uint64_t cost = 0;
          const auto held = fast[want_stop].decide(vars, std::min<std::uint64_t>(25, want_left),
                                                   cost, fields);
          if (!held || !*held) break;
          want_left -= std::min(want_left, cost);
        }
        EXPECT_EQ(stop, want_stop) << text << " from " << from << " budget " << budget;
        EXPECT_EQ(left, want_left) << text << " from " << from << " budget " << budget;
      }
    }
  }
}

// A list node's rules reach into its JSON when the caller gives it (`self[0].origin`,
// `self.size()`): each guard alone, at every budget, answers what the evaluator answers.
TEST(PredicateKernel, PathsIntoAJsonListAnswerWhatTheEvaluatorAnswers) {
  const TypePtr self = types::list(object_type({{"origin", types::string()}}));
  const char* sources[] = {
      "self.size() > 1",
      "size(self) == 0 ? true : has(self[0].origin)",
      "self[0].origin == 'a'",
      "(self.size() > 1 ? self[1].origin.size() : 0) + (self.size() > 0 ? 1 : 0) <= 3",
      "self[2].origin == ''",
      "self.all(x, has(x.origin)) && self.size() >= 0",
  };
  const char* lists[] = {R"([{"origin": "a"}, {"origin": "bcd"}])", "[]",
                         R"([{}, {"origin": ""}, {"origin": ""}])", "[null]",
                         R"([{"origin": 5}])", R"({"a": 1})"};
  for (const char* source : sources) {
    const Parsed parsed = parse(source);
    const Checked checked = check(parsed.ast, {"self"}, {self}, kubernetes_functions());
    ASSERT_TRUE(checked.errors.empty()) << source;
    Declarations decls{{"self"}, &kubernetes_functions()};
    decls.node_types = &checked.types;
    const Program fast = Program::compile(parsed.ast, decls);
    ASSERT_TRUE(fast.has_predicate_kernel()) << source;
    decls.predicate_kernel = false;
    const Program plain = Program::compile(parsed.ast, decls);
    const PredicateKernel::Guard guards[] = {{fast.predicate_kernel(), false}};
    for (const char* text : lists) {
      const boost::json::value doc = boost::json::parse(text);
      JsonArena arena;
      const Value vars[] = {json_view(doc, self.get(), arena)};
      const PredicateKernel::JsonVariable json{&doc, self.get(), &arena};
      const EvalResult expected = plain.run(vars, UINT64_MAX);
      for (std::uint64_t budget = 0; budget <= expected.cost + 1; ++budget) {
        const EvalResult r = plain.run(vars, budget);
        const bool held = r.value.is(ValueKind::boolean) && r.value.as_bool();
        std::uint64_t left = budget;
        const std::size_t stop = PredicateKernel::run_while_true(
            guards, 0, PredicateKernel::locals_needed(guards), vars, nullptr, UINT64_MAX, left,
            &json);
        EXPECT_EQ(stop, held ? 1u : 0u) << source << " over " << text << " budget " << budget;
        EXPECT_EQ(budget - left, held ? r.cost : 0) << source << " over " << text;
      }
    }
  }
}

// The table's bounds: at most kMaxSlots fields of one type, none of another type, none of 64
// bytes or more; fill() finds each slot's member (null when absent or JSON null) and refuses
// an object of more than kMaxMembers members.
TEST(FieldSlots, BoundsAndFill) {
  const TypePtr self = table_type();
  const TypePtr other = table_type();
  FieldSlots slots;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < FieldSlots::kMaxSlots + 8; ++i) names.push_back("f" + std::to_string(i));
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::uint8_t slot = slots.slot(self.get(), names[i]);
    EXPECT_EQ(slot, i < FieldSlots::kMaxSlots ? i : FieldSlots::kNone) << names[i];
  }
  EXPECT_EQ(slots.slot(self.get(), "f3"), 3u);  // the same name, the same slot
  EXPECT_EQ(slots.slot(other.get(), "f0"), FieldSlots::kNone);
  FieldSlots fresh;
  EXPECT_EQ(fresh.slot(self.get(), std::string(64, 'x')), FieldSlots::kNone);
  EXPECT_EQ(fresh.slot(self.get(), "f1"), 0u);
  EXPECT_EQ(fresh.slot(self.get(), "f2"), 1u);
  const boost::json::value* out[FieldSlots::kMaxSlots];
  const boost::json::object doc = boost::json::parse(R"({"f2": 1, "f1": null, "g": 2})").as_object();
  ASSERT_TRUE(fresh.fill(doc, std::span(out, fresh.size())));
  EXPECT_EQ(out[0], nullptr);  // f1 is null
  ASSERT_NE(out[1], nullptr);
  EXPECT_EQ(out[1]->as_int64(), 1);
  boost::json::object big;
  for (std::size_t i = 0; i <= FieldSlots::kMaxMembers; ++i) big["m" + std::to_string(i)] = 1;
  EXPECT_FALSE(fresh.fill(big, std::span(out, fresh.size())));
}

// A guard marked to skip is not run; one without a kernel stops the batch.
TEST(PredicateKernel, BatchSkipsAndStops) {
  const TypePtr self = table_type();
  const Parsed parsed = parse("self.n > 100");  // false for the object below
  const Checked checked = check(parsed.ast, {"self"}, {self}, kubernetes_functions());
  ASSERT_TRUE(checked.errors.empty());
  Declarations decls{{"self"}, &kubernetes_functions()};
  decls.node_types = &checked.types;
  const Program failing = Program::compile(parsed.ast, decls);
  const boost::json::value doc = boost::json::parse(R"({"n": 3})");
  JsonArena arena;
  const Value vars[] = {json_view(doc, self.get(), arena)};
  std::uint64_t budget = 100;
  const PredicateKernel::Guard skipped[] = {{failing.predicate_kernel(), true},
                                            {nullptr, false}};
  EXPECT_EQ(PredicateKernel::run_while_true(skipped, 0, 0, vars, nullptr, 100, budget), 1u);
  EXPECT_EQ(budget, 100u);
  const PredicateKernel::Guard run[] = {{failing.predicate_kernel(), false}};
  EXPECT_EQ(PredicateKernel::run_while_true(run, 0, 0, vars, nullptr, 100, budget), 0u);
  EXPECT_EQ(budget, 100u);
  // A guard with a comprehension needs its variable: given none, the batch leaves it to the
  // caller; given what locals_needed says, it runs.
  const Parsed loop = parse("self.tags.all(t, t != 'x')");
  const Checked loop_checked = check(loop.ast, {"self"}, {self}, kubernetes_functions());
  ASSERT_TRUE(loop_checked.errors.empty());
  decls.node_types = &loop_checked.types;
  const Program holding = Program::compile(loop.ast, decls);
  const PredicateKernel::Guard looping[] = {{holding.predicate_kernel(), false}};
  const boost::json::value tagged = boost::json::parse(R"({"tags": ["a", "b"]})");
  const Value tagged_vars[] = {json_view(tagged, self.get(), arena)};
  const std::uint32_t needed = PredicateKernel::locals_needed(looping);
  EXPECT_GE(needed, 1u);  // the iteration variable (and the accumulator's slot)
  EXPECT_EQ(
      PredicateKernel::run_while_true(looping, 0, needed - 1, tagged_vars, nullptr, 100, budget),
      0u);
  EXPECT_EQ(budget, 100u);
  EXPECT_EQ(PredicateKernel::run_while_true(looping, 0, needed, tagged_vars, nullptr, 100, budget),
            1u);
  EXPECT_LT(budget, 100u);
}

}  // namespace
}  // namespace kwatch::cel
