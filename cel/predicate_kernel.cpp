#include "cel/predicate_kernel.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <utility>

#include <boost/json.hpp>
#include <re2/re2.h>

#include "cel/functions.hpp"
#include "cel/json_value.hpp"

namespace kwatch::cel {

namespace {

enum class Kind : std::uint8_t {
  // conditions
  boolean,      // a constant true or false
  logical_and,  // a && b
  logical_or,   // a || b
  conditional,  // a ? b : c
  has,          // has(path): the path's last selection tested
  compare,      // a op b over values: ==, !=, <, <=, >, >=, in
  call,         // a call over values that answers a bool
  all,          // range.all(x, b)
  exists,       // range.exists(x, b)
  exists_one,   // range.exists_one(x, b)
  // values
  constant,
  attribute,    // a variable and selections on it
  value_call,   // a call over values, as a value
  filter,       // range.filter(x, b)
  filter_size,  // size(range.filter(x, b)): the count, no list made
  value_conditional,  // a ? b : c with values b and c
  condition_value,    // the condition a as a bool value
};

// A string method on a schema string field with a constant argument, decided on the JSON text.
// size: of a string field's text; length: of a JSON array or object (size() of a list or map);
// add_int: `_+_` whose operands turn out to be ints.
enum class Method : std::uint8_t {
  none, contains, starts_with, ends_with, matches, size, length, add_int
};

// One selection: a schema object's field by JSON name (typed) or a map key (untyped).
struct Selection {
  std::string_view json_name;
  const Type* field_type = nullptr;  // null: untyped, look `name` up as a key
  const Value* name = nullptr;       // the field's name; an index's constant key
  bool index = false;                // `[key]` rather than `.name`
  const Type* owner = nullptr;       // typed: the object type that has the field
};

}  // namespace

// One run's state; named outside the anonymous namespace because Node (a member of the public
// class) points to functions that take it.
struct RunState {
  const PredicateKernel::Node* nodes = nullptr;
  std::span<const Value> variables;
  std::uint64_t cost = 0;
  // Past it the evaluator stops: every charge checks it, so an expensive expression costs no
  // more here than the evaluator would let it.
  std::uint64_t limit = UINT64_MAX;
  bool over = false;  // the limit was passed: the outcome is the evaluator's cancellation
  Value* locals = nullptr;  // comprehension variables by slot
  SelfFields* self = nullptr;  // variable 0's fields, when the caller found them (field_slots.hpp)
  const PredicateKernel::JsonVariable* json0 = nullptr;  // variable 0's JSON, when given
  // A comprehension variable that stands for an element of a JSON list read as a typed list:
  // the element in the JSON; its Value (in locals) is made only when something asks for it.
  struct LocalJson {
    const boost::json::value* json = nullptr;  // null: the variable is its Value in locals
    const Type* type = nullptr;
    JsonArena* arena = nullptr;
    bool made = false;  // locals[slot] holds its view
  };
  LocalJson* local_json = nullptr;  // by slot, beside locals (null: every variable a Value)
};

namespace {

// One charge of `units`, as the evaluator makes it; false (and `over`) past the limit, with the
// cost the evaluator would have spent when it stopped.
bool charge(RunState& st, std::uint64_t units) {
  st.cost += units;
  if (st.cost <= st.limit) return true;
  st.over = true;
  return false;
}

// `count` charges of 1 in a row (a variable and its selections, `!`s): past the limit the
// evaluator stops at the first one over it.
bool charge_each(RunState& st, std::uint64_t count) {
  if (st.cost + count <= st.limit) {
    st.cost += count;
    return true;
  }
  st.cost = st.limit + 1;
  st.over = true;
  return false;
}

// Comprehension variable `slot` as JSON, or null when it is a Value.
const RunState::LocalJson* local_json(const RunState& st, std::uint32_t slot) {
  if (st.local_json == nullptr || st.local_json[slot].json == nullptr) return nullptr;
  return &st.local_json[slot];
}

// Comprehension variable `slot` as a Value: a JSON element's view is made on first use.
const Value& local_value(RunState& st, std::uint32_t slot) {
  if (st.local_json != nullptr) {
    RunState::LocalJson& lj = st.local_json[slot];
    if (lj.json != nullptr && !lj.made) {
      st.locals[slot] = json_view(*lj.json, lj.type, *lj.arena);
      lj.made = true;
    }
  }
  return st.locals[slot];
}

}  // namespace

using ConditionFn = PredicateKernel::Outcome (*)(RunState&, const PredicateKernel::Node&);

struct PredicateKernel::Node {
  Kind kind = Kind::boolean;
  ConditionFn run = nullptr;  // a condition's own function (one call site per parent kind)
  std::uint8_t nots = 0;      // how many `!` apply to this condition's outcome
  Op op = Op::constant;  // compare: which
  bool value = false;    // boolean; compare `in`: charge the container's size
  std::uint32_t a = 0, b = 0, c = 0;
  // compare ==, != (and `in` a constant list) of a schema string field (a) with string
  // constants (b): decided on the JSON text, without values.
  bool string_field = false;
  std::uint64_t constant_code_points = 0;  // compare ==, != of a string field: the constant's
  std::uint8_t test = FieldSlots::kNone;   // compare of a slot's string: its FieldSlots::test
  const Value* constant = nullptr;
  Method method = Method::none;            // call: a string method with a constant argument
  std::shared_ptr<const re2::RE2> pattern;  // ... matches: the constant pattern, compiled
  std::vector<std::string_view> texts;     // compare `in` a constant list of strings
  std::uint32_t slot = 0;            // attribute, has: the variable; comprehensions: x
  bool local = false;                // attribute, has: `slot` is a comprehension's variable
  // attribute, has: the slot of path[0] when the path starts with a field of variable 0
  std::uint8_t field = FieldSlots::kNone;
  std::vector<Selection> path;       // attribute, has: the selections (has: the last is tested)
  std::vector<std::uint32_t> args;   // call, value_call
  const std::vector<const Overload*>* overloads = nullptr;
};

namespace {

using Node = PredicateKernel::Node;
using Outcome = PredicateKernel::Outcome;
using Step = Program::Step;

// Whether a call is size(): every overload measures its argument (a string's code points, a
// list's or map's length) rather than reading its value.
bool measures(const Node& n) {
  if (n.overloads == nullptr || n.overloads->empty()) return false;
  return std::all_of(n.overloads->begin(), n.overloads->end(),
                     [](const Overload* o) { return o->id.starts_with("size_"); });
}

class Builder {
 public:
  Builder(const std::vector<Step>& steps, FieldSlots* slots) : steps_(steps), slots_(slots) {}

  std::vector<Node> nodes;

  // The node of a condition at step `i`, or nullopt when the kernel cannot take it.
  std::optional<std::uint32_t> condition(std::uint32_t i) {
    const Step& s = steps_[i];
    Node n;
    switch (s.op) {
      case Op::constant:
        if (!s.constant.is(ValueKind::boolean)) return std::nullopt;
        n.kind = Kind::boolean;
        n.value = s.constant.as_bool();
        return add(std::move(n));
      case Op::logical_not: {
        // `!` is no node of its own: it flips its operand's outcome (and costs 1).
        auto a = condition(s.children[0]);
        if (!a || nodes[*a].nots == UINT8_MAX) return std::nullopt;
        ++nodes[*a].nots;
        return a;
      }
      case Op::logical_and:
      case Op::logical_or: {
        auto a = condition(s.children[0]);
        auto b = a ? condition(s.children[1]) : std::nullopt;
        if (!b) return std::nullopt;
        n.kind = s.op == Op::logical_and ? Kind::logical_and : Kind::logical_or;
        n.a = *a;
        n.b = *b;
        return add(std::move(n));
      }
      case Op::conditional:
        return conditional(s, Kind::conditional, [&](std::uint32_t c) { return condition(c); });
      case Op::has: {
        if (!attribute_path(s.children[0], n)) return std::nullopt;
        n.path.push_back(selection(s));
        n.kind = Kind::has;
        give_field_slot(n);
        return add(std::move(n));
      }
      case Op::equals:
      case Op::not_equals:
      case Op::less:
      case Op::less_equal:
      case Op::greater:
      case Op::greater_equal:
      case Op::in: {
        auto a = value(s.children[0]);
        auto b = a ? value(s.children[1]) : std::nullopt;
        if (!b) return std::nullopt;
        n.kind = Kind::compare;
        // `x in list` with a list that is not a constant charges the list's size.
        n.value = s.op == Op::in && steps_[s.children[1]].op != Op::constant;
        n.string_field = string_field(*a, *b, s.op);
        if (n.string_field && s.op != Op::in) {
          n.constant_code_points = code_point_count(nodes[*b].constant->as_text());
        }
        if (n.string_field && s.op == Op::in) {
          const ListValue& list = nodes[*b].constant->as_list();
          for (std::size_t k = 0; k < list.size(); ++k) n.texts.push_back(list.at(k).as_text());
        }
        if (const Node& f = nodes[*a]; n.string_field && slots_ != nullptr && !f.local &&
                                       f.field != FieldSlots::kNone && f.path.size() == 1) {
          const std::string_view one = s.op == Op::in ? std::string_view()
                                                      : nodes[*b].constant->as_text();
          n.test = s.op == Op::in ? slots_->test(f.field, true, n.texts)
                                  : slots_->test(f.field, false, std::span(&one, 1));
        }
        n.op = s.op;
        n.a = *a;
        n.b = *b;
        return add(std::move(n));
      }
      case Op::call:
        if (!call_args(s, n)) return std::nullopt;
        n.kind = Kind::call;
        string_method(n);
        return add(std::move(n));
      case Op::comprehension: {
        const auto kind = macro(s);
        if (!kind || *kind == Kind::filter) return std::nullopt;
        return comprehension(s, *kind);
      }
      default: return std::nullopt;
    }
  }

  std::uint32_t locals = 0;  // how many comprehension slots the kernel's runs need

 private:
  std::optional<std::uint32_t> value(std::uint32_t i) {
    const Step& s = steps_[i];
    Node n;
    if (s.op == Op::constant) {
      n.kind = Kind::constant;
      n.constant = &s.constant;
      return add(std::move(n));
    }
    if (s.op == Op::call) {
      if (s.name == "size" && s.children.size() == 1 &&
          steps_[s.children[0]].op == Op::comprehension &&
          macro(steps_[s.children[0]]) == Kind::filter) {
        const auto f = comprehension(steps_[s.children[0]], Kind::filter);
        if (!f) return std::nullopt;
        nodes[*f].kind = Kind::filter_size;
        return f;
      }
      if (!call_args(s, n)) return std::nullopt;
      n.kind = Kind::value_call;
      string_size(n);
      if (n.args.size() == 2 && s.name == "_+_" && !n.overloads->empty() &&
          (*n.overloads)[0]->id == "add_int64") {
        n.method = Method::add_int;
      }
      return add(std::move(n));
    }
    if (s.op == Op::comprehension) {
      const auto kind = macro(s);
      if (kind != Kind::filter) return std::nullopt;
      return comprehension(s, *kind);
    }
    if (s.op == Op::conditional) {
      // The evaluator does not charge a branch that is an attribute: such branches stay out.
      const Op t = steps_[s.children[1]].op;
      const Op f = steps_[s.children[2]].op;
      const auto attribute = [](Op op) {
        return op == Op::variable || op == Op::local || op == Op::select || op == Op::index;
      };
      if (attribute(t) || attribute(f)) return std::nullopt;
      return conditional(s, Kind::value_conditional, [&](std::uint32_t c) { return value(c); });
    }
    if (s.op == Op::logical_and || s.op == Op::logical_or || s.op == Op::logical_not ||
        s.op == Op::has || s.op == Op::equals || s.op == Op::not_equals || s.op == Op::less ||
        s.op == Op::less_equal || s.op == Op::greater || s.op == Op::greater_equal ||
        s.op == Op::in) {
      auto a = condition(i);
      if (!a) return std::nullopt;
      n.kind = Kind::condition_value;
      n.a = *a;
      return add(std::move(n));
    }
    if (!attribute_path(i, n)) return std::nullopt;
    n.kind = Kind::attribute;
    give_field_slot(n);
    return add(std::move(n));
  }

  // `a ? b : c` with the branches made by `branch` (as conditions, or as values).
  template <class Branch>
  std::optional<std::uint32_t> conditional(const Step& s, Kind kind, Branch branch) {
    auto a = condition(s.children[0]);
    auto b = a ? branch(s.children[1]) : std::nullopt;
    auto c = b ? branch(s.children[2]) : std::nullopt;
    if (!c) return std::nullopt;
    Node n;
    n.kind = kind;
    n.a = *a;
    n.b = *b;
    n.c = *c;
    return add(std::move(n));
  }

  bool call_args(const Step& s, Node& n) {
    if (s.overloads.empty()) return false;
    for (std::uint32_t c : s.children) {
      auto v = value(c);
      if (!v) return false;
      n.args.push_back(*v);
    }
    n.overloads = &s.overloads;
    return true;
  }

  // Which macro a comprehension is, as the parser expands them (parser.cpp): `all`, `exists`,
  // `exists_one` and `filter` with one iteration variable; nullopt for anything else.
  std::optional<Kind> macro(const Step& s) const {
    if (s.two_vars || s.children.size() != 5) return std::nullopt;
    const Step& init = steps_[s.children[1]];
    const Step& cond = steps_[s.children[2]];
    const Step& step = steps_[s.children[3]];
    const Step& result = steps_[s.children[4]];
    const auto is_accu = [&](std::uint32_t i) {
      return steps_[i].op == Op::local && steps_[i].slot == s.accu;
    };
    const auto is_constant = [&](const Step& c, const Value& v) {
      return c.op == Op::constant && c.constant.kind() == v.kind() && equal(c.constant, v);
    };
    const Value yes = Value::boolean(true);
    if (init.op == Op::constant && init.constant.is(ValueKind::boolean) &&
        cond.op == Op::not_strictly_false && is_accu(s.children[4])) {
      if (init.constant.as_bool() && is_accu(cond.children[0]) &&
          step.op == Op::logical_and && is_accu(step.children[0])) {
        return Kind::all;
      }
      if (!init.constant.as_bool() && steps_[cond.children[0]].op == Op::logical_not &&
          is_accu(steps_[cond.children[0]].children[0]) && step.op == Op::logical_or &&
          is_accu(step.children[0])) {
        return Kind::exists;
      }
      return std::nullopt;
    }
    if (!is_constant(cond, yes) || step.op != Op::conditional) return std::nullopt;
    const Step& taken = steps_[step.children[1]];
    if (!is_accu(step.children[2])) return std::nullopt;
    if (is_constant(init, Value::int64(0)) && taken.op == Op::call && taken.name == "_+_" &&
        taken.children.size() == 2 && is_accu(taken.children[0]) &&
        is_constant(steps_[taken.children[1]], Value::int64(1)) && result.op == Op::equals &&
        is_accu(result.children[0]) &&
        is_constant(steps_[result.children[1]], Value::int64(1))) {
      return Kind::exists_one;
    }
    if (init.op == Op::constant && init.constant.is(ValueKind::list) &&
        init.constant.as_list().size() == 0 && taken.op == Op::append_to_accumulator &&
        taken.slot == s.accu && taken.children.size() == 1 &&
        steps_[taken.children[0]].op == Op::local && steps_[taken.children[0]].slot == s.slot &&
        is_accu(s.children[4])) {
      return Kind::filter;
    }
    return std::nullopt;
  }

  std::optional<std::uint32_t> comprehension(const Step& s, Kind kind) {
    // The predicate: the step's right side (all, exists) or its condition (the others).
    const Step& step = steps_[s.children[3]];
    const std::uint32_t predicate =
        kind == Kind::all || kind == Kind::exists ? step.children[1] : step.children[0];
    auto range = value(s.children[0]);
    auto b = range ? condition(predicate) : std::nullopt;
    if (!b) return std::nullopt;
    Node n;
    n.kind = kind;
    n.a = *range;
    n.b = *b;
    n.slot = s.slot;
    locals = std::max(locals, s.slot + 1);
    return add(std::move(n));
  }

  // A call of contains, startsWith, endsWith or matches on a schema string field with a
  // constant string argument: n.method, and what the call's cost needs of the constant.
  void string_method(Node& n) const {
    if (n.overloads->size() != 1 || n.args.size() != 2) return;
    const Node& field = nodes[n.args[0]];
    const Node& arg = nodes[n.args[1]];
    if (field.kind != Kind::attribute || field.path.empty() || arg.kind != Kind::constant ||
        !arg.constant->is(ValueKind::string)) {
      return;
    }
    const Selection& last = field.path.back();
    if (last.index || last.field_type == nullptr || last.field_type->kind != TypeKind::string) {
      return;
    }
    const std::string& id = (*n.overloads)[0]->id;
    const std::string_view text = arg.constant->as_text();
    n.constant = arg.constant;
    n.constant_code_points = code_point_count(text);
    if (id == "contains_string") {
      n.method = Method::contains;
    } else if (id == "starts_with_string") {
      n.method = Method::starts_with;
    } else if (id == "ends_with_string") {
      n.method = Method::ends_with;
    } else if (id == "matches_string") {
      std::string error;
      n.pattern = compiled_pattern(text, error);
      if (n.pattern) n.method = Method::matches;  // else the call's error, as the evaluator's
    }
  }

  // size(x) or x.size() of a schema string field, or of a list or map: n.method.
  void string_size(Node& n) const {
    if (n.args.size() != 1) return;
    const Node& field = nodes[n.args[0]];
    if (field.kind != Kind::attribute) return;
    if (measures(n)) n.method = Method::length;
    if (field.path.empty()) return;
    const Selection& last = field.path.back();
    if (last.index || last.field_type == nullptr || last.field_type->kind != TypeKind::string) {
      return;
    }
    for (const Overload* o : *n.overloads) {
      if (o->id == "size_string") n.method = Method::size;
    }
  }

  // Whether `a op b` compares a schema string field with string constants.
  bool string_field(std::uint32_t a, std::uint32_t b, Op op) const {
    const Node& field = nodes[a];
    const Node& constant = nodes[b];
    if (field.kind != Kind::attribute || field.path.empty() || constant.kind != Kind::constant) {
      return false;
    }
    const Selection& last = field.path.back();
    if (last.index || last.field_type == nullptr || last.field_type->kind != TypeKind::string) {
      return false;
    }
    if (op == Op::equals || op == Op::not_equals) return constant.constant->is(ValueKind::string);
    if (op != Op::in || !constant.constant->is(ValueKind::list)) return false;
    const ListValue& list = constant.constant->as_list();
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list.at(i).is(ValueKind::string)) return false;
    }
    return true;
  }

  // A variable (or a comprehension's) and selections on it, into n.slot and n.path.
  bool attribute_path(std::uint32_t i, Node& n) {
    const Step& s = steps_[i];
    if (s.op == Op::variable || s.op == Op::local) {
      n.slot = s.slot;
      n.local = s.op == Op::local;
      return true;
    }
    if (s.op == Op::index) {
      const Step& key = steps_[s.children[1]];
      if (key.op != Op::constant || !attribute_path(s.children[0], n)) return false;
      n.path.push_back(Selection{{}, nullptr, &key.constant, true});
      return true;
    }
    if (s.op != Op::select) return false;
    if (!attribute_path(s.children[0], n)) return false;
    n.path.push_back(selection(s));
    return true;
  }

  static Selection selection(const Step& s) {
    return Selection{s.json_name, s.field_type.get(), &s.constant, false, s.owner.get()};
  }

  // A path that starts with a schema field of variable 0 reads it from its slot.
  void give_field_slot(Node& n) {
    if (slots_ == nullptr || n.local || n.slot != 0 || n.path.empty()) return;
    const Selection& first = n.path[0];
    if (first.index || first.field_type == nullptr || first.owner == nullptr) return;
    n.field = slots_->slot(first.owner, first.json_name);
  }

  std::uint32_t add(Node n) {
    nodes.push_back(std::move(n));
    return static_cast<std::uint32_t>(nodes.size() - 1);
  }

  const std::vector<Step>& steps_;
  FieldSlots* slots_;
};

Outcome condition(RunState& st, std::uint32_t i) {
  const Node& n = st.nodes[i];
  Outcome r = n.run(st, n);
  if (n.nots != 0 && r != Outcome::undecided) {
    // The evaluator charges each `!` once its operand is known.
    if (!charge_each(st, n.nots)) return Outcome::undecided;
    if ((n.nots & 1) != 0) r = r == Outcome::is_true ? Outcome::is_false : Outcome::is_true;
  }
  return r;
}

Outcome decided(bool b) { return b ? Outcome::is_true : Outcome::is_false; }

Outcome run_boolean(RunState&, const Node& n) { return decided(n.value); }

// `&&` and `||` in the evaluator's order: a decisive left side ends it; otherwise the right
// decides. An undecided side leaves the whole undecided, even where the other side would absorb
// an error (`error || true`): what the evaluator would have spent on it, or whether it is an
// error at all, is not known here.
template <Outcome Decisive>
Outcome run_logic(RunState& st, const Node& n) {
  const Outcome a = condition(st, n.a);
  if (a == Outcome::undecided || a == Decisive) return a;
  return condition(st, n.b);
}

Outcome run_conditional(RunState& st, const Node& n) {
  const Outcome a = condition(st, n.a);
  if (a == Outcome::undecided) return a;
  return condition(st, a == Outcome::is_true ? n.b : n.c);
}

// Where a walk along a path is: a Value, or a place in a JSON document (read as `type`) that
// becomes a Value only when something other than a schema field is asked of it.
struct Cursor {
  Value value;
  const boost::json::value* json = nullptr;
  const Type* type = nullptr;
  JsonArena* arena = nullptr;

  // The JSON object under the cursor, when it is read as a schema object.
  const boost::json::object* schema_object() {
    if (json != nullptr) {
      return type != nullptr && type->kind == TypeKind::object ? json->if_object() : nullptr;
    }
    if (!value.is(ValueKind::map)) return nullptr;
    const JsonBacking* b = value.as_map().json_backing();
    if (b == nullptr) return nullptr;
    arena = b->arena;
    return b->object;
  }

  Value& materialize() {
    if (json != nullptr) {
      value = json_view(*json, type, *arena);
      json = nullptr;
    }
    return value;
  }
};

// The variable and the first `count` selections of n.path, charged as the evaluator charges
// them: 1 for the variable, 1 for each selection. A schema field of a JSON object is found in
// the JSON (a null member is absent, as the view reads it).
bool follow(RunState& st, const Node& n, std::size_t count, Cursor& at) {
  if (!n.local && n.slot >= st.variables.size()) return false;
  if (!charge_each(st, 1 + count)) return false;
  const RunState::LocalJson* element = n.local ? local_json(st, n.slot) : nullptr;
  const Value& base = n.local ? (element != nullptr && count > 0 ? st.locals[n.slot]
                                                                 : local_value(st, n.slot))
                              : st.variables[n.slot];
  std::size_t k = 0;
  // A JSON-backed variable is not copied: the walk starts in its JSON, at the field's slot
  // when the caller found the fields.
  if (count > 0 && element != nullptr) {
    // An element of a JSON list: the walk starts in it.
    at.json = element->json;
    at.type = element->type;
    at.arena = element->arena;
  } else if (count > 0 && n.field != FieldSlots::kNone && st.self != nullptr) {
    const boost::json::value* member = st.self->member(n.field);
    if (member == nullptr) return false;
    at.json = member;
    at.type = n.path[0].field_type;
    at.arena = st.self->arena();
    k = 1;
  } else if (count > 0 && n.path[0].field_type != nullptr && !n.path[0].index &&
             base.is(ValueKind::map)) {
    if (const JsonBacking* b = base.as_map().json_backing()) {
      const boost::json::value* member = find_member(*b->object, n.path[0].json_name);
      if (member == nullptr || member->is_null()) return false;
      at.json = member;
      at.type = n.path[0].field_type;
      at.arena = b->arena;
      k = 1;
    }
  }
  if (at.json != nullptr) {
    // started in the JSON above
  } else if (k == 0 && count > 0 && !n.local && n.slot == 0 && st.json0 != nullptr) {
    // A path into variable 0 whose JSON the caller gave (a list: `self[0].matches`).
    at.json = st.json0->value;
    at.type = st.json0->type;
    at.arena = st.json0->arena;
  } else if (k == 0) {
    at.value = base;
  }
  for (; k < count; ++k) {
    const Selection& s = n.path[k];
    if (s.field_type != nullptr && !s.index) {
      if (const boost::json::object* obj = at.schema_object()) {
        const boost::json::value* member = find_member(*obj, s.json_name);
        if (member == nullptr || member->is_null()) return false;
        at.json = member;
        at.type = s.field_type;
        continue;
      }
    }
    if (s.index && at.json != nullptr && at.type != nullptr && at.type->kind == TypeKind::list &&
        !at.type->params.empty() && s.name->is(ValueKind::int64)) {
      // `[i]` of a JSON array read as a list: the element, in the JSON, as the list's view
      // would give it.
      const boost::json::array* arr = at.json->if_array();
      const std::int64_t i = s.name->as_int();
      if (arr == nullptr) return false;
      if (i < 0 || static_cast<std::uint64_t>(i) >= arr->size()) return false;
      at.json = &(*arr)[static_cast<std::size_t>(i)];
      at.type = at.type->params[0].get();
      continue;
    }
    Value& out = at.materialize();
    if (s.index) {
      // `[key]` on a list (an int in range) or a map (a key it has); else the evaluator's.
      if (out.is(ValueKind::list) && s.name->is(ValueKind::int64)) {
        const std::int64_t i = s.name->as_int();
        if (i < 0 || static_cast<std::uint64_t>(i) >= out.as_list().size()) return false;
        out = out.as_list().at(static_cast<std::size_t>(i));
        continue;
      }
      if (!out.is(ValueKind::map) || !s.name->is(ValueKind::string)) return false;
      auto found = out.as_map().find(*s.name);
      if (!found) return false;
      out = std::move(*found);
      continue;
    }
    if (!out.is(ValueKind::map)) return false;
    auto found = s.field_type != nullptr ? out.as_map().find_field(s.json_name, s.field_type)
                                         : out.as_map().find(*s.name);
    if (!found) return false;
    out = std::move(*found);
  }
  return true;
}

bool follow(RunState& st, const Node& n, std::size_t count, Value& out) {
  if (count == 1 && n.field != FieldSlots::kNone && st.self != nullptr) {
    // self.x as a value: the view made once for all the node's rules.
    if (n.slot >= st.variables.size() || !charge_each(st, 2)) return false;
    if (st.self->member(n.field) == nullptr) return false;
    out = st.self->value(n.field, n.path[0].field_type);
    return true;
  }
  Cursor at;
  if (!follow(st, n, count, at)) return false;
  out = std::move(at.materialize());
  return true;
}

Outcome run_has(RunState& st, const Node& n) {
  Cursor at;
  if (!follow(st, n, n.path.size() - 1, at)) return Outcome::undecided;
  const Selection& last = n.path.back();
  if (last.field_type != nullptr) {
    if (const boost::json::object* obj = at.schema_object()) {
      const boost::json::value* v = find_member(*obj, last.json_name);
      return decided(v != nullptr && !v->is_null());
    }
  }
  const Value& operand = at.materialize();
  if (!operand.is(ValueKind::map)) return Outcome::undecided;
  return decided(last.field_type != nullptr
                     ? operand.as_map().has_field(last.json_name, last.field_type)
                     : operand.as_map().find(*last.name).has_value());
}

bool value(RunState& st, std::uint32_t i, Value& out);
bool run_filter(RunState& st, const Node& n, Value& out);
const boost::json::string* string_field_text(RunState& st, const Node& field);
std::uint64_t text_code_points(RunState& st, const Node& field, std::string_view text);

bool call(RunState& st, const Node& n, Value& out) {
  SmallValues<4> args(n.args.size());
  for (std::size_t k = 0; k < n.args.size(); ++k) {
    if (!value(st, n.args[k], args[k])) return false;
  }
  // Charged as the evaluator charges a call; no overload is the evaluator's error.
  EvalBudget budget(UINT64_MAX);
  if (!call_overload(*n.overloads, args.view(), budget, out)) return false;
  return charge(st, budget.spent()) && !out.is_error();
}

bool value(RunState& st, std::uint32_t i, Value& out) {
  const Node& n = st.nodes[i];
  switch (n.kind) {
    case Kind::constant: out = n.constant->borrowed(); return true;
    case Kind::attribute: return follow(st, n, n.path.size(), out);
    case Kind::value_call:
      if (n.method == Method::size) {
        // size() of a string field's JSON text: its code points, one unit for the call.
        const std::uint64_t before = st.cost;
        if (const boost::json::string* js = string_field_text(st, st.nodes[n.args[0]])) {
          if (!charge(st, 1)) return false;
          out = Value::int64(static_cast<std::int64_t>(text_code_points(
              st, st.nodes[n.args[0]], std::string_view(js->data(), js->size()))));
          return true;
        }
        if (st.over) return false;
        st.cost = before;  // not a JSON string: the call over values, from the start
      }
      if (n.method == Method::length) {
        // size() of a JSON array or object: its length, one unit for the call.
        const std::uint64_t before = st.cost;
        Cursor at;
        const Node& arg = st.nodes[n.args[0]];
        const bool whole = arg.path.empty() && !arg.local && arg.slot == 0 && st.json0 != nullptr;
        if (whole && charge_each(st, 1)) {
          at.json = st.json0->value;  // variable 0 itself (`self.size()`), charged as read
        } else if (whole || !follow(st, arg, arg.path.size(), at)) {
          at.json = nullptr;
        }
        if (at.json != nullptr && at.json->is_structured()) {
          if (!charge(st, 1)) return false;
          const auto* arr = at.json->if_array();
          out = Value::int64(static_cast<std::int64_t>(arr != nullptr ? arr->size()
                                                                      : at.json->get_object().size()));
          return true;
        }
        if (st.over) return false;
        st.cost = before;  // a value of another kind: the call over values, from the start
      }
      if (n.method == Method::add_int) {
        // Two ints (Gateway API's sum of sixteen sizes): added here, charged as the call is.
        Value args[2];
        if (!value(st, n.args[0], args[0]) || !value(st, n.args[1], args[1])) return false;
        if (args[0].is(ValueKind::int64) && args[1].is(ValueKind::int64)) {
          std::int64_t r;
          if (!charge(st, 1)) return false;
          if (__builtin_add_overflow(args[0].as_int(), args[1].as_int(), &r)) return false;
          out = Value::int64(r);
          return true;
        }
        EvalBudget budget(UINT64_MAX);
        if (!call_overload(*n.overloads, std::span<const Value>(args, 2), budget, out)) return false;
        return charge(st, budget.spent()) && !out.is_error();
      }
      return call(st, n, out);
    case Kind::filter:
    case Kind::filter_size: return run_filter(st, n, out);
    case Kind::value_conditional: {
      const Outcome a = condition(st, n.a);
      if (a == Outcome::undecided) return false;
      return value(st, a == Outcome::is_true ? n.b : n.c, out);
    }
    case Kind::condition_value: {
      const Outcome a = condition(st, n.a);
      if (a == Outcome::undecided) return false;
      out = Value::boolean(a == Outcome::is_true);
      return true;
    }
    default: return false;
  }
}

// The text of a schema string field (charged as the evaluator reads it), or null when it is
// not there as a JSON string.
const boost::json::string* string_field_text(RunState& st, const Node& field) {
  if (field.path.size() == 1 && field.field != FieldSlots::kNone && st.self != nullptr) {
    if (field.slot >= st.variables.size() || !charge_each(st, 2)) return nullptr;
    const boost::json::value* v = st.self->member(field.field);
    return v != nullptr ? v->if_string() : nullptr;
  }
  Cursor at;
  if (!follow(st, field, field.path.size(), at) || at.json == nullptr) return nullptr;
  return at.json->if_string();
}

// The code points of a string field's text: counted once per object for a slot's.
std::uint64_t text_code_points(RunState& st, const Node& field, std::string_view text) {
  if (st.self != nullptr && !field.local && field.field != FieldSlots::kNone &&
      field.path.size() == 1) {
    return st.self->code_points(field.field, text);
  }
  return code_point_count(text);
}

// contains, startsWith, endsWith, matches on the field's JSON text, charged as the library's
// functions charge (functions.cpp).
Outcome run_string_method(RunState& st, const Node& n, std::string_view text) {
  const std::string_view arg = n.constant->as_text();
  const std::uint64_t code_points = text_code_points(st, st.nodes[n.args[0]], text);
  switch (n.method) {
    case Method::contains:
      if (!charge(st, tenths(code_points, 1) * tenths(n.constant_code_points, 1))) {
        return Outcome::undecided;
      }
      return decided(text.find(arg) != std::string_view::npos);
    case Method::starts_with:
      if (!charge(st, tenths(code_points, 1))) return Outcome::undecided;
      return decided(text.starts_with(arg));
    case Method::ends_with:
      if (!charge(st, tenths(code_points, 1))) return Outcome::undecided;
      return decided(text.ends_with(arg));
    case Method::matches:
      if (!charge(st, tenths(code_points + 1, 1) * ((n.constant_code_points + 3) / 4))) {
        return Outcome::undecided;
      }
      // PartialMatch without its argument handling: no submatches are asked for.
      return decided(n.pattern->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(),
                                      re2::RE2::UNANCHORED, nullptr, 0));
    case Method::none:
    case Method::size:
    case Method::length:
    case Method::add_int: break;
  }
  return Outcome::undecided;
}

Outcome run_call(RunState& st, const Node& n) {
  if (n.method != Method::none) {
    const std::uint64_t before = st.cost;
    if (const boost::json::string* js = string_field_text(st, st.nodes[n.args[0]])) {
      return run_string_method(st, n, std::string_view(js->data(), js->size()));
    }
    if (st.over) return Outcome::undecided;
    st.cost = before;  // not a JSON string: the call over values, from the start
  }
  Value r;
  if (!call(st, n, r) || !r.is(ValueKind::boolean)) return Outcome::undecided;
  return decided(r.as_bool());
}

// A schema string field against string constants, on the JSON text when the field is there as
// a string (else as values): what the evaluator charges, the field's path and the comparisons.
Outcome compare_values(RunState& st, const Node& n, Value& a);

// string_comparison_cost(text, constant) where the constant has `code_points`, counting the
// text's only when they differ and both are long.
std::uint64_t string_constant_cost(std::string_view text, std::string_view constant,
                                   std::uint64_t code_points, bool same) {
  if (std::min(text.size(), constant.size()) <= 10) return string_comparison_cost(text, constant);
  return tenths(same ? code_points : std::min(code_point_count(text), code_points), 1);
}

// A string field's text (the field already charged) against the node's string constants:
// ==, != (charged as the evaluator compares strings) or `in` a constant list (free).
// A slot's test is answered once per object (SelfFields::tested): the node's other rules that
// make it are charged the same and given the same answer.
Outcome compare_text(RunState& st, const Node& n, const boost::json::string& js) {
  SelfFields::TestAnswer answer;
  const bool cached = n.test != FieldSlots::kNone && st.self != nullptr;
  if (const SelfFields::TestAnswer* known = cached ? st.self->tested(n.test) : nullptr) {
    answer = *known;
  } else {
    const std::string_view text(js.data(), js.size());
    if (n.op == Op::in) {
      answer = {std::find(n.texts.begin(), n.texts.end(), text) != n.texts.end(), 0};
    } else {
      const std::string_view constant = st.nodes[n.b].constant->as_text();
      const bool same = text == constant;
      answer = {same, string_constant_cost(text, constant, n.constant_code_points, same)};
    }
    if (cached) st.self->remember(n.test, answer);
  }
  if (n.op == Op::in) return decided(answer.same);  // a constant list: nothing charged
  if (!charge(st, answer.cost)) return Outcome::undecided;
  return decided(answer.same == (n.op == Op::equals));
}

Outcome run_compare(RunState& st, const Node& n) {
  if (n.string_field) {
    const Node& field = st.nodes[n.a];
    Cursor at;
    if (!follow(st, field, field.path.size(), at)) return Outcome::undecided;
    if (at.json == nullptr || !at.json->is_string()) return compare_values(st, n, at.materialize());
    return compare_text(st, n, at.json->get_string());
  }
  Value a;
  if (!value(st, n.a, a)) return Outcome::undecided;
  return compare_values(st, n, a);
}

Outcome compare_values(RunState& st, const Node& n, Value& a) {
  Value b;
  if (!value(st, n.b, b)) return Outcome::undecided;
  if (a.is(ValueKind::int64) && b.is(ValueKind::int64) && n.op != Op::in) {
    // Two ints (a count against a bound): one unit, as comparison_cost says.
    if (!charge(st, 1)) return Outcome::undecided;
    const std::int64_t x = a.as_int();
    const std::int64_t y = b.as_int();
    switch (n.op) {
      case Op::equals: return decided(x == y);
      case Op::not_equals: return decided(x != y);
      case Op::less: return decided(x < y);
      case Op::less_equal: return decided(x <= y);
      case Op::greater: return decided(x > y);
      default: return decided(x >= y);
    }
  }
  switch (n.op) {
    case Op::equals:
    case Op::not_equals:
      if (!charge(st, comparison_cost(a, b))) return Outcome::undecided;
      return decided(equal(a, b) == (n.op == Op::equals));
    case Op::in: {
      if (n.value && !charge(st, b.is(ValueKind::list) ? b.as_list().size() : 1)) {
        return Outcome::undecided;
      }
      const Value v = in_container(a, b);
      if (!v.is(ValueKind::boolean)) return Outcome::undecided;
      return decided(v.as_bool());
    }
    default: {
      if (!charge(st, comparison_cost(a, b))) return Outcome::undecided;
      const int c = cel::compare(a, b);
      if (c == 3) return Outcome::undecided;  // no such overload
      if (c == 2) return Outcome::is_false;   // NaN
      return decided(n.op == Op::less         ? c < 0
                     : n.op == Op::less_equal ? c <= 0
                     : n.op == Op::greater    ? c > 0
                                              : c >= 0);
    }
  }
}

// The range of a comprehension: a list's elements or a map's keys, as the evaluator iterates;
// or the elements of a JSON array read as a typed list, which the variable stands for in the
// JSON (no views made unless something asks for one).
struct Range {
  const ListValue* list = nullptr;
  const MapValue* map = nullptr;
  const boost::json::array* json = nullptr;
  const Type* element = nullptr;
  JsonArena* arena = nullptr;
  std::size_t size() const {
    return json != nullptr ? json->size() : list != nullptr ? list->size() : map->size();
  }
  explicit operator bool() const { return json != nullptr || list != nullptr || map != nullptr; }

  // Comprehension variable `slot` := element i.
  void bind(RunState& st, std::uint32_t slot, std::size_t i) const {
    if (json != nullptr) {
      st.local_json[slot] = RunState::LocalJson{&(*json)[i], element, arena, false};
      return;
    }
    st.locals[slot] = list != nullptr ? list->at(i) : map->key_at(i);
    if (st.local_json != nullptr) st.local_json[slot].json = nullptr;
  }
};

Range range_of(RunState& st, const Node& n, Value& holder) {
  const Node& r = st.nodes[n.a];
  if (r.kind == Kind::attribute && st.local_json != nullptr) {
    // The range's path, charged as value() charges it, ending in the JSON where it can.
    Cursor at;
    const RunState::LocalJson* element = r.local ? local_json(st, r.slot) : nullptr;
    if (r.path.empty() && (element != nullptr || (!r.local && r.slot == 0 && st.json0 != nullptr))) {
      if (!charge_each(st, 1)) return {};
      at.json = element != nullptr ? element->json : st.json0->value;
      at.type = element != nullptr ? element->type : st.json0->type;
      at.arena = element != nullptr ? element->arena : st.json0->arena;
    } else if (!follow(st, r, r.path.size(), at)) {
      return {};
    }
    if (at.json != nullptr && at.type != nullptr && at.type->kind == TypeKind::list &&
        !at.type->params.empty()) {
      if (const boost::json::array* arr = at.json->if_array()) {
        return {nullptr, nullptr, arr, at.type->params[0].get(), at.arena};
      }
    }
    holder = std::move(at.materialize());
  } else if (!value(st, n.a, holder)) {
    return {};
  }
  if (holder.is(ValueKind::list)) return {&holder.as_list(), nullptr};
  if (holder.is(ValueKind::map)) return {nullptr, &holder.as_map()};
  return {};
}

// all and exists, charged as the evaluator charges their expansion: per element the loop's
// condition (`@not_strictly_false(accu)`: 2; with exists' `!`: 3), the step's read of the
// accumulator (1) and the predicate; once more the condition when the loop stops early; and
// the result's read of the accumulator (1).
template <bool All>
Outcome run_quantifier(RunState& st, const Node& n) {
  Value holder;
  const Range range = range_of(st, n, holder);
  if (!range) return Outcome::undecided;
  constexpr std::uint64_t kCondition = All ? 2 : 3;
  const Outcome going = All ? Outcome::is_true : Outcome::is_false;
  Outcome accu = going;
  const std::size_t size = range.size();
  for (std::size_t i = 0; i < size; ++i) {
    if (!charge_each(st, kCondition)) return Outcome::undecided;
    if (accu != going) break;
    range.bind(st, n.slot, i);
    if (!charge_each(st, 1)) return Outcome::undecided;
    accu = condition(st, n.b);
    if (accu == Outcome::undecided) return accu;
  }
  if (!charge_each(st, 1)) return Outcome::undecided;
  return accu;
}

// exists_one: per element the predicate, and 2 (`accu + 1`) for each that holds; then the
// result's `accu == 1` (2).
Outcome run_exists_one(RunState& st, const Node& n) {
  Value holder;
  const Range range = range_of(st, n, holder);
  if (!range) return Outcome::undecided;
  std::uint64_t count = 0;
  const std::size_t size = range.size();
  for (std::size_t i = 0; i < size; ++i) {
    range.bind(st, n.slot, i);
    const Outcome p = condition(st, n.b);
    if (p == Outcome::undecided) return p;
    if (p == Outcome::is_true) {
      if (!charge_each(st, 2)) return Outcome::undecided;  // the read of accu, the `+`
      ++count;
    }
  }
  if (!charge_each(st, 2)) return Outcome::undecided;  // the read of accu, the `==`
  return decided(count == 1);
}

// filter: per element the predicate, and 13 for each kept (`accu + [x]`: 12, the read of x: 1);
// then the result's read of the accumulator (1).
bool run_filter(RunState& st, const Node& n, Value& out) {
  Value holder;
  const Range range = range_of(st, n, holder);
  if (!range) return false;
  const bool count_only = n.kind == Kind::filter_size;
  std::int64_t count = 0;
  std::vector<Value> kept;
  const std::size_t size = range.size();
  for (std::size_t i = 0; i < size; ++i) {
    range.bind(st, n.slot, i);
    const Outcome p = condition(st, n.b);
    if (p == Outcome::undecided) return false;
    if (p == Outcome::is_true) {
      // The append (12), then the read of x (1).
      if (!charge(st, 12) || !charge_each(st, 1)) return false;
      ++count;
      if (!count_only) kept.push_back(local_value(st, n.slot));
    }
  }
  if (!charge_each(st, 1)) return false;
  if (count_only) {
    // size() of the list: one call.
    if (!charge(st, 1)) return false;
    out = Value::int64(count);
    return true;
  }
  out = Value::list(std::move(kept));
  return true;
}

ConditionFn function_of(Kind k);

// Whether `n` selects one schema field of self (from its slot) or of a comprehension variable
// (an element of a JSON list, or a JSON object): `x.f`, tested by has() or read.
bool one_field(const Node& n) {
  if (n.path.size() != 1 || n.path[0].index || n.path[0].field_type == nullptr) return false;
  return n.field != FieldSlots::kNone || n.local;
}

// That field's JSON: `found` false when it cannot be read this way (then nothing is known);
// else the member, null when absent or JSON null. Nothing charged.
const boost::json::value* one_field_json(const RunState& st, const Node& n, bool& found) {
  found = false;
  if (n.field != FieldSlots::kNone) {
    if (st.self == nullptr || n.slot >= st.variables.size()) return nullptr;
    found = true;
    return st.self->member(n.field);
  }
  if (const RunState::LocalJson* element = local_json(st, n.slot)) {
    // An element of a JSON list read as schema objects: the member in the JSON.
    if (element->type == nullptr || element->type->kind != TypeKind::object) return nullptr;
    const boost::json::object* obj = element->json->if_object();
    if (obj == nullptr) return nullptr;
    found = true;
    const boost::json::value* member = find_member(*obj, n.path[0].json_name);
    return member != nullptr && !member->is_null() ? member : nullptr;
  }
  const Value& base = st.locals[n.slot];
  if (!base.is(ValueKind::map)) return nullptr;
  const JsonBacking* b = base.as_map().json_backing();
  if (b == nullptr) return nullptr;
  found = true;
  const boost::json::value* member = find_member(*b->object, n.path[0].json_name);
  return member != nullptr && !member->is_null() ? member : nullptr;
}

// has(x.f) of one field: the variable (1), and the member.
Outcome run_has_field(RunState& st, const Node& n) {
  bool found = false;
  const boost::json::value* member = one_field_json(st, n, found);
  if (!found) return run_has(st, n);
  if (!charge_each(st, 1)) return Outcome::undecided;
  return decided(member != nullptr);
}

// x.f == 'c', != 'c' or in ['a', 'b'] of one string field there as a string: what
// run_compare does.
Outcome run_compare_field(RunState& st, const Node& n) {
  const Node& field = st.nodes[n.a];
  bool found = false;
  const boost::json::value* v = one_field_json(st, field, found);
  if (v == nullptr || !v->is_string()) return run_compare(st, n);
  if (!charge_each(st, 2)) return Outcome::undecided;  // the variable and the selection
  return compare_text(st, n, v->get_string());
}

// The function of node i, specialised where the node reads one field of self or of a
// comprehension variable.
ConditionFn function_of(const std::vector<Node>& nodes, std::size_t i) {
  const Node& n = nodes[i];
  if (n.kind == Kind::has && one_field(n)) return run_has_field;
  if (n.kind == Kind::compare && n.string_field && one_field(nodes[n.a])) {
    return run_compare_field;
  }
  return function_of(n.kind);
}

ConditionFn function_of(Kind k) {
  switch (k) {
    case Kind::boolean: return run_boolean;
    case Kind::logical_and: return run_logic<Outcome::is_false>;
    case Kind::logical_or: return run_logic<Outcome::is_true>;
    case Kind::conditional: return run_conditional;
    case Kind::has: return run_has;
    case Kind::compare: return run_compare;
    case Kind::call: return run_call;
    case Kind::all: return run_quantifier<true>;
    case Kind::exists: return run_quantifier<false>;
    case Kind::exists_one: return run_exists_one;
    default: return nullptr;
  }
}

// What the nodes read (PredicateKernel::Reads).
PredicateKernel::Reads reads_of(const std::vector<Node>& nodes) {
  PredicateKernel::Reads r;
  for (const Node& n : nodes) {
    if (n.kind != Kind::has && n.kind != Kind::attribute) continue;
    // Read from a slot: variable 0's field by its first selection.
    const bool slotted = !n.local && n.field != FieldSlots::kNone && !n.path.empty();
    if (!slotted && !n.local) r.whole |= std::uint32_t{1} << std::min<std::uint32_t>(n.slot, 31);
  }
  return r;
}

// PredicateKernel::read_into: the kernel's tree from its root, with the comprehension variables
// bound to the ReadSet nodes of the elements they range over.
class ReadCollector {
 public:
  ReadCollector(const std::vector<Node>& nodes, ReadSet& set) : nodes_(nodes), set_(set) {}

  static constexpr std::size_t kLocals = 16;
  using Env = std::array<std::int32_t, kLocals>;  // slot -> element node, -1 unbound

  // How a value is used: compared or passed (its scalar value matters), or only measured.
  enum class Use : std::uint8_t { value, size };

  bool condition(std::uint32_t i, const Env& env) {
    const Node& n = nodes_[i];
    switch (n.kind) {
      case Kind::boolean: return true;
      case Kind::logical_and:
      case Kind::logical_or: return condition(n.a, env) && condition(n.b, env);
      case Kind::conditional:
        return condition(n.a, env) && condition(n.b, env) && condition(n.c, env);
      case Kind::has: return path(n, env).has_value();
      case Kind::compare: return value(n.a, env, Use::value) && value(n.b, env, Use::value);
      case Kind::call: return args(n, env);
      case Kind::all:
      case Kind::exists:
      case Kind::exists_one: return comprehension(n, env);
      default: return false;
    }
  }

 private:
  bool value(std::uint32_t i, const Env& env, Use use) {
    const Node& n = nodes_[i];
    switch (n.kind) {
      case Kind::constant: return true;
      case Kind::attribute: {
        const auto at = path(n, env);
        if (!at) return false;
        if (use == Use::value) {
          set_.read_value(*at);
        } else {
          set_.read_size(*at);
        }
        return true;
      }
      case Kind::value_call: return args(n, env);
      case Kind::filter_size: return comprehension(n, env);
      case Kind::value_conditional:
        return condition(n.a, env) && value(n.b, env, use) && value(n.c, env, use);
      case Kind::condition_value: return condition(n.a, env);
      default: return false;  // a filter's list
    }
  }

  // A call's arguments: size() measures, anything else reads values.
  bool args(const Node& n, const Env& env) {
    const bool sizes = measures(n);
    for (const std::uint32_t a : n.args) {
      if (!value(a, env, sizes ? Use::size : Use::value)) return false;
    }
    return true;
  }

  bool comprehension(const Node& n, const Env& env) {
    const Node& range = nodes_[n.a];
    if (range.kind != Kind::attribute || n.slot >= kLocals) return false;
    const auto at = path(range, env);
    if (!at) return false;
    Env inner = env;
    inner[n.slot] = static_cast<std::int32_t>(set_.child(*at, ReadSet::Step::element));
    return condition(n.b, inner);
  }

  // The set's node for the variable and selections of an attribute or has().
  std::optional<std::uint32_t> path(const Node& n, const Env& env) {
    std::uint32_t at = 0;
    if (n.local) {
      if (n.slot >= kLocals || env[n.slot] < 0) return std::nullopt;
      at = static_cast<std::uint32_t>(env[n.slot]);
    } else if (n.slot != 0) {
      return std::nullopt;  // oldSelf
    }
    for (const Selection& s : n.path) {
      if (s.index) {
        if (s.name == nullptr || !s.name->is(ValueKind::int64)) return std::nullopt;
        at = set_.child(at, ReadSet::Step::index, {}, s.name->as_int());
      } else if (s.field_type != nullptr) {
        at = set_.child(at, ReadSet::Step::field, s.json_name);
      } else if (s.name != nullptr && s.name->is(ValueKind::string)) {
        at = set_.child(at, ReadSet::Step::field, s.name->as_text());
      } else {
        return std::nullopt;
      }
    }
    return at;
  }

  const std::vector<Node>& nodes_;
  ReadSet& set_;
};

}  // namespace

constexpr std::size_t kStackLocals = 8;

PredicateKernel::PredicateKernel() = default;
PredicateKernel::~PredicateKernel() = default;

std::unique_ptr<const PredicateKernel> PredicateKernel::build(const std::vector<Step>& steps,
                                                              std::uint32_t root,
                                                              FieldSlots* slots) {
  Builder b(steps, slots);
  const auto top = b.condition(root);
  if (!top) return nullptr;
  auto kernel = std::make_unique<PredicateKernel>();
  kernel->nodes_ = std::move(b.nodes);
  for (std::size_t i = 0; i < kernel->nodes_.size(); ++i) {
    kernel->nodes_[i].run = function_of(kernel->nodes_, i);
  }
  kernel->root_ = *top;
  kernel->locals_ = b.locals;
  kernel->reads_ = reads_of(kernel->nodes_);
  return kernel;
}

PredicateKernel::Outcome PredicateKernel::run(std::span<const Value> variables,
                                              std::uint64_t limit, std::uint64_t& cost,
                                              SelfFields* self) const {
  RunState st;
  st.nodes = nodes_.data();
  st.variables = variables;
  st.limit = limit;
  st.self = self;
  Outcome out;
  if (locals_ == 0) {
    out = condition(st, root_);  // most guards: no comprehension, no variables to make
  } else {
    // Comprehension variables, on the stack (as many as there are slots).
    SmallValues<kStackLocals> locals(locals_);
    st.locals = locals.data();
    RunState::LocalJson local_json[kStackLocals];
    if (locals_ <= kStackLocals) st.local_json = local_json;
    out = condition(st, root_);
  }
  cost = st.cost;
  if (st.over) return Outcome::over_limit;
  return out;
}

bool PredicateKernel::read_into(ReadSet& set) const {
  ReadCollector::Env env;
  env.fill(-1);
  if (!ReadCollector(nodes_, set).condition(root_, env)) set.unusable();
  return set.usable();
}

std::uint32_t PredicateKernel::locals_needed(std::span<const Guard> guards) {
  std::uint32_t slots = 0;
  for (const Guard& g : guards) {
    if (g.kernel != nullptr) slots = std::max(slots, g.kernel->locals_);
  }
  return slots;
}

std::size_t PredicateKernel::run_while_true(std::span<const Guard> guards, std::size_t from,
                                            std::uint32_t slots,
                                            std::span<const Value> variables, SelfFields* self,
                                            std::uint64_t per_call, std::uint64_t& budget,
                                            const JsonVariable* json) {
  SmallValues<kStackLocals> locals(slots);
  RunState st;
  st.variables = variables;
  st.self = self;
  st.json0 = json != nullptr && json->value != nullptr ? json : nullptr;
  st.locals = locals.data();
  RunState::LocalJson local_json[kStackLocals];
  if (slots != 0 && slots <= kStackLocals) st.local_json = local_json;
  for (std::size_t i = from; i < guards.size(); ++i) {
    const Guard& g = guards[i];
    if (g.skip) continue;
    const PredicateKernel* k = g.kernel;
    if (k == nullptr || k->locals_ > slots) return i;
    st.nodes = k->nodes_.data();
    st.cost = 0;
    st.limit = std::min(per_call, budget);
    const Outcome out = condition(st, k->root_);
    if (out != Outcome::is_true || st.over) return i;
    budget -= std::min(budget, st.cost);
  }
  return guards.size();
}

}  // namespace kwatch::cel
