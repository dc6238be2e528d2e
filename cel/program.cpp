#include "cel/program.hpp"

#include "cel/predicate_kernel.hpp"
#include "cel/program_steps.hpp"

#include <algorithm>
#include <memory>
#include <cmath>
#include <optional>
#include <utility>

#include "cel/literal.hpp"

#include <boost/container/small_vector.hpp>

namespace kwatch::cel {

namespace {

using Step = Program::Step;
using Hot = Program::Hot;

class Compiler {
 public:
  Compiler(const Ast& ast, const Declarations& decls, std::vector<SourceIssue>* undeclared)
      : ast_(ast), decls_(decls), undeclared_(undeclared) {}

  std::vector<Step> steps;
  std::uint32_t locals = 0;

  std::uint32_t compile(NodeId id) {
    const Node& n = ast_.at(id);
    Step s;
    switch (n.kind) {
      case NodeKind::constant: s = constant(n.constant); break;
      case NodeKind::ident:
        s = ident(n.name);
        if (s.op == Op::error) note_undeclared(n.offset, n.name);
        break;
      case NodeKind::select: {
        if (!n.test_only) {
          if (auto q = qualified(id); !q.empty()) {
            if (auto resolved = resolve_name(q)) {
              s = std::move(*resolved);
              break;
            }
          }
        }
        s.op = n.test_only ? Op::has : Op::select;
        s.constant = Value::string(n.name);
        s.children = {compile(n.children[0])};
        if (decls_.node_types != nullptr && n.children[0] < decls_.node_types->size()) {
          const TypePtr& operand = (*decls_.node_types)[n.children[0]];
          if (operand && operand->kind == TypeKind::object) {
            const auto f = operand->fields.find(n.name);
            if (f != operand->fields.end()) {
              s.field_type = f->second;
              s.owner = operand;
              auto j = operand->json_names.find(n.name);
              s.json_name = j == operand->json_names.end() ? std::string_view(f->first)
                                                           : std::string_view(j->second);
            }
          }
        }
        break;
      }
      case NodeKind::call: s = call(id, n); break;
      case NodeKind::list:
        s.op = Op::list;
        for (NodeId c : n.children) s.children.push_back(compile(c));
        s.optional_at = n.optional_at;
        break;
      case NodeKind::map:
        s.op = Op::map;
        for (NodeId c : n.children) s.children.push_back(compile(c));
        s.optional_at = n.optional_at;
        break;
      case NodeKind::message:
        if (!decls_.message_literals) {
          s.op = Op::error;
          s.constant = Value::error("unknown type: " + n.name);
          break;
        }
        // A map of the fields: each name a constant step before its value.
        s.op = Op::map;
        for (std::size_t i = 0; i < n.children.size(); ++i) {
          Step key;
          key.op = Op::constant;
          key.constant = Value::string(n.fields[i]);
          steps.push_back(std::move(key));
          s.children.push_back(static_cast<std::uint32_t>(steps.size() - 1));
          s.children.push_back(compile(n.children[i]));
        }
        s.optional_at = n.optional_at;
        break;
      case NodeKind::comprehension: s = comprehension(n); break;
    }
    steps.push_back(std::move(s));
    return static_cast<std::uint32_t>(steps.size() - 1);
  }

 private:
  static Step constant(const Constant& c) {
    Step s;
    s.op = Op::constant;
    switch (c.kind) {
      case Constant::Kind::null: break;
      case Constant::Kind::boolean: s.constant = Value::boolean(c.boolean); break;
      case Constant::Kind::int64: s.constant = Value::int64(c.int64); break;
      case Constant::Kind::uint64: s.constant = Value::uint64(c.uint64); break;
      case Constant::Kind::float64: s.constant = Value::float64(c.float64); break;
      case Constant::Kind::string: s.constant = Value::string(c.text); break;
      case Constant::Kind::bytes: s.constant = Value::bytes(c.text); break;
    }
    return s;
  }

  std::optional<Step> resolve_name(const std::string& name) {
    Step s;
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
      if (it->first == name) {
        s.op = Op::local;
        s.slot = it->second;
        return s;
      }
    }
    std::string_view plain = name;
    if (!plain.empty() && plain.front() == '.') plain.remove_prefix(1);
    for (std::size_t i = 0; i < decls_.variables.size(); ++i) {
      if (decls_.variables[i] == plain) {
        s.op = Op::variable;
        s.slot = static_cast<std::uint32_t>(i);
        return s;
      }
    }
    if (auto t = named_type(name)) {
      s.op = Op::constant;
      s.constant = Value::type(t->name);
      return s;
    }
    return std::nullopt;
  }

  Step ident(const std::string& name) {
    if (auto s = resolve_name(name)) return std::move(*s);
    Step s;
    s.op = Op::error;
    s.constant = Value::error("no such attribute: " + name);
    return s;
  }

  // `a.b.c` when the node is a chain of selections on an identifier that is not a local.
  std::string qualified(NodeId id) const {
    const Node& n = ast_.at(id);
    if (n.kind == NodeKind::ident) {
      for (const auto& [local, slot] : scope_) {
        if (local == n.name) return {};
      }
      return n.name;
    }
    if (n.kind != NodeKind::select || n.test_only) return {};
    std::string prefix = qualified(n.children[0]);
    if (prefix.empty()) return {};
    return prefix + "." + n.name;
  }

  static Op operator_op(std::string_view f) {
    if (f == "_&&_") return Op::logical_and;
    if (f == "_||_") return Op::logical_or;
    if (f == "_?_:_") return Op::conditional;
    if (f == "@not_strictly_false") return Op::not_strictly_false;
    if (f == "_==_") return Op::equals;
    if (f == "_!=_") return Op::not_equals;
    if (f == "_<_") return Op::less;
    if (f == "_<=_") return Op::less_equal;
    if (f == "_>_") return Op::greater;
    if (f == "_>=_") return Op::greater_equal;
    if (f == "@in") return Op::in;
    if (f == "!_") return Op::logical_not;
    if (f == "_[_]") return Op::index;
    if (f == "_?._") return Op::opt_select;
    if (f == "_[?_]") return Op::opt_index;
    return Op::call;
  }

  Step call(NodeId id, const Node& n) {
    Step s;
    const FunctionRegistry& fns = *decls_.functions;
    std::string function = n.name;
    bool receiver = n.has_target;
    std::vector<NodeId> args(n.children.begin(), n.children.end());
    // `math.greatest(x)`: a method call on a name that is no variable may be a namespaced
    // global function.
    if (receiver) {
      const std::string ns = qualified(n.children[0]);
      if (!ns.empty() && !resolve_name(ns).has_value() && fns.has_function(ns + "." + function)) {
        function = ns + "." + function;
        receiver = false;
        args.erase(args.begin());
      }
    }
    if (!receiver && !function.empty() && function.front() == '.') function.erase(0, 1);
    s.op = receiver ? Op::call : operator_op(function);
    // The macros' `@result + [x]`: append in place when the accumulator is the comprehension's.
    if (function == "_+_" && !receiver && !accumulators_.empty()) {
      const Node& left = ast_.at(args[0]);
      const Node& right = ast_.at(args[1]);
      if (left.kind == NodeKind::ident && left.name == accumulators_.back().first &&
          right.kind == NodeKind::list && right.optional_at.empty()) {
        s.op = Op::append_to_accumulator;
        s.slot = accumulators_.back().second;
        for (NodeId c : right.children) s.children.push_back(compile(c));
        s.name = function;
        return s;
      }
    }
    (void)id;
    s.name = function;
    for (NodeId c : args) s.children.push_back(compile(c));
    if (s.op == Op::call) {
      s.overloads = fns.find(function, receiver, args.size());
      if (s.overloads.empty() && !fns.has_function(function)) {
        note_undeclared(n.offset, function);
        s.op = Op::error;
        s.constant = Value::error("no such overload: " + function);
        s.children.clear();
      }
    }
    return s;
  }

  Step comprehension(const Node& n) {
    Step s;
    s.op = Op::comprehension;
    s.children.push_back(compile(n.children[kRange]));
    s.children.push_back(compile(n.children[kInit]));
    s.accu = locals++;
    s.slot = locals++;
    s.two_vars = !n.iter_var2.empty();
    if (s.two_vars) s.slot2 = locals++;
    // The accumulator is in scope for condition, step and result; the iteration variables for
    // condition and step.
    scope_.emplace_back(n.accu_var, s.accu);
    accumulators_.emplace_back(n.accu_var, s.accu);
    scope_.emplace_back(n.iter_var, s.slot);
    if (s.two_vars) scope_.emplace_back(n.iter_var2, s.slot2);
    s.children.push_back(compile(n.children[kCondition]));
    s.children.push_back(compile(n.children[kStep]));
    scope_.pop_back();
    if (s.two_vars) scope_.pop_back();
    accumulators_.pop_back();
    s.children.push_back(compile(n.children[kResult]));
    scope_.pop_back();
    return s;
  }

  void note_undeclared(std::size_t offset, const std::string& name) {
    if (undeclared_ == nullptr) return;
    undeclared_->push_back(
        {offset, "undeclared reference to '" + name + "' (in container '')"});
  }

  const Ast& ast_;
  const Declarations& decls_;
  std::vector<SourceIssue>* undeclared_;
  std::vector<std::pair<std::string, std::uint32_t>> scope_;
  std::vector<std::pair<std::string, std::uint32_t>> accumulators_;
};

}  // namespace

// cel-go writes the key as Go's %v does: a string without quotes.
Value no_such_key(const Value& key) {
  return Value::error("no such key: " +
                      (key.is(ValueKind::string) ? std::string(key.as_text()) : format_literal(key)));
}

std::uint64_t string_comparison_cost(std::string_view a, std::string_view b) {
  // Short strings cost 1 (empty ones 0) whatever their code points: no need to count them.
  const std::size_t shorter = std::min(a.size(), b.size());
  if (shorter <= 10) return shorter > 0 ? 1 : 0;
  return tenths(std::min(code_point_count(a), code_point_count(b)), 1);
}

std::uint64_t comparison_cost(const Value& a, const Value& b) {
  if (a.is(ValueKind::string) && b.is(ValueKind::string)) {
    return string_comparison_cost(a.as_text(), b.as_text());
  }
  const auto size = [](const Value& v) -> std::uint64_t {
    switch (v.kind()) {
      case ValueKind::string: return code_point_count(v.as_text());
      case ValueKind::bytes: return v.as_text().size();
      case ValueKind::list: return v.as_list().size();
      case ValueKind::map: return v.as_map().size();
      default: return 1;
    }
  };
  return tenths(std::min(size(a), size(b)), 1);
}

Value in_container(const Value& element, const Value& container) {
  if (container.is(ValueKind::list)) {
    const ListValue& l = container.as_list();
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (equal(l.at(i), element)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (container.is(ValueKind::map)) {
    return Value::boolean(container.as_map().find(element).has_value());
  }
  const Value args[] = {element, container};
  return no_such_overload("@in", args);
}

Program::Compiled::Compiled() = default;
Program::Compiled::~Compiled() = default;

namespace {

class Evaluator {
 public:
  Evaluator(const std::vector<Step>& steps, const std::vector<Hot>& hot,
            std::span<const Value> variables, std::uint32_t locals, std::uint64_t limit)
      : budget(limit), locals_(locals), steps_(steps), hot_(hot), variables_(variables) {}

  EvalBudget budget;
  boost::container::small_vector<Value, 8> locals_;

  // Costs follow cel-go's runtime tracking (kube's budget is counted in its units): reading a
  // variable and each selection or index costs 1, constants and has() nothing, a call what its
  // function charges (1 unless the function says otherwise), list and map literals 10 and 30,
  // and `&&`, `||`, `?:` and the comprehension itself nothing beyond what they evaluate.
  Value eval(std::uint32_t id) { return eval(id, true); }

  // `charged` false: an attribute read that cel-go does not count (a bare variable as a branch
  // of `?:`, an identifier used as an index).
  Value eval(std::uint32_t id, bool charged) {
    const Hot& h = hot_[id];
    switch (h.op) {
      case Op::constant: return h.constant->borrowed();
      case Op::variable:
        if (charged) budget.charge(1);
        if (h.slot >= variables_.size()) return Value::error("no such attribute");
        return variables_[h.slot];
      case Op::local:
        if (charged) budget.charge(1);
        return locals_[h.slot];
      case Op::error: return h.cold->constant;
      case Op::select: return select_step(h, charged);
      case Op::has: return has_step(h);
      case Op::logical_and:
      case Op::logical_or: return logic(h);
      case Op::conditional: return conditional(h);
      case Op::not_strictly_false: return not_strictly_false(h);
      case Op::equals:
      case Op::not_equals: return equality(h);
      case Op::less:
      case Op::less_equal:
      case Op::greater:
      case Op::greater_equal: return relation(h, *h.cold);
      case Op::in: return in_step(h);
      case Op::logical_not: return logical_not(h);
      case Op::index: return index_step(h);
      case Op::opt_select:
      case Op::opt_index: return optional_step(h);
      case Op::call: return call(*h.cold);
      case Op::list: return list(*h.cold);
      case Op::map: return map(*h.cold);
      case Op::comprehension: return comprehension(*h.cold);
      case Op::append_to_accumulator: return append(*h.cold);
    }
    return Value::error("internal error: unknown step");
  }

 private:
  // One function a step kind, out of eval, so that eval's own frame stays small: it is entered
  // at every step.
  [[gnu::noinline]] Value select_step(const Hot& h, bool charged) {
    Value operand = eval(h.c[0], charged);
    if (charged) budget.charge(1);
    if (h.field_type != nullptr && operand.is(ValueKind::map)) return field(operand, h, false);
    return select(operand, *h.constant, false);
  }

  [[gnu::noinline]] Value has_step(const Hot& h) {
    Value operand = eval(h.c[0]);
    if (h.field_type != nullptr && operand.is(ValueKind::map)) return field(operand, h, true);
    return select(operand, *h.constant, true);
  }

  [[gnu::noinline]] Value conditional(const Hot& h) {
    Value c = eval(h.c[0]);
    if (c.is_error()) return c;
    if (!c.is(ValueKind::boolean)) return no_such_overload("_?_:_", {&c, 1});
    const std::uint32_t branch = h.c[c.as_bool() ? 1 : 2];
    return eval(branch, !hot_[branch].attribute);
  }

  [[gnu::noinline]] Value not_strictly_false(const Hot& h) {
    Value v = eval(h.c[0]);
    budget.charge(1);
    return Value::boolean(!v.is(ValueKind::boolean) || v.as_bool());
  }

  [[gnu::noinline]] Value equality(const Hot& h) {
    Value a = eval(h.c[0]);
    if (a.is_error()) return a;
    Value b = eval(h.c[1]);
    if (b.is_error()) return b;
    budget.charge(comparison_cost(a, b));
    return Value::boolean(equal(a, b) == (h.op == Op::equals));
  }

  [[gnu::noinline]] Value in_step(const Hot& h) {
    Value a = eval(h.c[0]);
    if (a.is_error()) return a;
    Value b = eval(h.c[1]);
    if (b.is_error()) return b;
    // A constant list is a set lookup, free in cel-go's optimized programs.
    if (hot_[h.c[1]].op != Op::constant) budget.charge(b.is(ValueKind::list) ? b.as_list().size() : 1);
    return in_container(a, b);
  }

  [[gnu::noinline]] Value logical_not(const Hot& h) {
    Value a = eval(h.c[0]);
    if (a.is_error()) return a;
    budget.charge(1);
    if (!a.is(ValueKind::boolean)) return no_such_overload("!_", {&a, 1});
    return Value::boolean(!a.as_bool());
  }

  [[gnu::noinline]] Value index_step(const Hot& h) {
    Value a = eval(h.c[0]);
    if (a.is_error()) return a;
    Value b = eval(h.c[1], !hot_[h.c[1]].attribute);
    if (b.is_error()) return b;
    budget.charge(1);
    return index(a, b);
  }

  [[gnu::noinline]] Value optional_step(const Hot& h) {
    Value a = eval(h.c[0]);
    if (a.is_error()) return a;
    Value b = eval(h.c[1]);
    if (h.op == Op::opt_index && b.is_error()) return b;
    budget.charge(1);
    return optional_access(a, b, h.op == Op::opt_select);
  }

  // A variable, or selections on one: what cel-go reads as an attribute.
  bool is_attribute(std::uint32_t id) const { return hot_[id].attribute; }

  // A schema object's field, found by its JSON name.
  static Value field(const Value& operand, const Hot& h, bool test_only) {
    if (test_only) return Value::boolean(operand.as_map().has_field(h.json_name, h.field_type));
    auto found = operand.as_map().find_field(h.json_name, h.field_type);
    if (!found) return no_such_key(*h.constant);
    return std::move(*found);
  }

  Value select(const Value& operand, const Value& field, bool test_only) {
    if (operand.is_error()) return operand;
    if (operand.is(ValueKind::map)) {
      auto found = operand.as_map().find(field);
      if (test_only) return Value::boolean(found.has_value());
      if (!found) return no_such_key(field);
      return std::move(*found);
    }
    if (operand.is(ValueKind::optional)) {
      // Selecting on an optional is an optional selection on its value: a missing field makes
      // none rather than an error.
      if (test_only) {
        const Value* inner = operand.optional_value();
        return inner == nullptr ? Value::boolean(false) : select(*inner, field, true);
      }
      return optional_access(operand, field, true);
    }
    return Value::error("type '" + std::string(operand.type_name()) +
                        "' does not support field selection");
  }

  [[gnu::noinline]] Value logic(const Hot& h) {
    const bool is_and = h.op == Op::logical_and;
    Value a = eval(h.c[0]);
    // A decisive left side ends it; otherwise the right side decides, and an error on one
    // side gives way to a decisive other side.
    if (a.is(ValueKind::boolean) && a.as_bool() != is_and) return a;
    Value b = eval(h.c[1]);
    if (b.is(ValueKind::boolean) && b.as_bool() != is_and) return b;
    if (a.is(ValueKind::boolean) && b.is(ValueKind::boolean)) return a;
    if (a.is_error()) return a;
    if (b.is_error()) return b;
    const Value* both[] = {&a, &b};
    (void)both;
    return Value::error(std::string("no such overload: ") + (is_and ? "_&&_" : "_||_") + "(" +
                        std::string(a.type_name()) + ", " + std::string(b.type_name()) + ")");
  }

  [[gnu::noinline]] Value relation(const Hot& h, const Step& s) {
    Value a = eval(h.c[0]);
    if (a.is_error()) return a;
    Value b = eval(h.c[1]);
    if (b.is_error()) return b;
    budget.charge(comparison_cost(a, b));
    const int c = compare(a, b);
    if (c == 2) return Value::boolean(false);  // NaN: every comparison is false
    if (c == 3) {
      const Value args[] = {a, b};
      return no_such_overload(s.name, args);
    }
    switch (h.op) {
      case Op::less: return Value::boolean(c < 0);
      case Op::less_equal: return Value::boolean(c <= 0);
      case Op::greater: return Value::boolean(c > 0);
      default: return Value::boolean(c >= 0);
    }
  }

  static std::optional<std::int64_t> list_index(const Value& i) {
    switch (i.kind()) {
      case ValueKind::int64: return i.as_int();
      case ValueKind::uint64:
        if (i.as_uint() > static_cast<std::uint64_t>(INT64_MAX)) return INT64_MAX;
        return static_cast<std::int64_t>(i.as_uint());
      case ValueKind::float64: {
        const double d = i.as_double();
        if (!(d >= -9e18 && d <= 9e18) || std::trunc(d) != d) return std::nullopt;
        return static_cast<std::int64_t>(d);
      }
      default: return std::nullopt;
    }
  }

  Value index(const Value& container, const Value& key) {
    if (container.is(ValueKind::list)) {
      const auto i = list_index(key);
      if (!i) {
        if (key.is(ValueKind::float64)) {
          return Value::error("unsupported index value " + format_literal(key) + " in list");
        }
        const Value args[] = {container, key};
        return no_such_overload("_[_]", args);
      }
      const ListValue& l = container.as_list();
      if (*i < 0 || static_cast<std::uint64_t>(*i) >= l.size()) {
        return Value::error("index '" + std::to_string(*i) + "' out of range in list size '" +
                            std::to_string(l.size()) + "'");
      }
      return l.at(static_cast<std::size_t>(*i));
    }
    if (container.is(ValueKind::map)) {
      if (!valid_key(key) && !key.is(ValueKind::float64)) {
        return Value::error("unsupported key type");
      }
      auto found = container.as_map().find(key);
      if (!found) return no_such_key(key);
      return std::move(*found);
    }
    if (container.is(ValueKind::optional)) return optional_access(container, key, false);
    const Value args[] = {container, key};
    return no_such_overload("_[_]", args);
  }

  // `a.?f` (by_field) and `a[?k]`: an optional of what is there, or none.
  Value optional_access(const Value& container, const Value& key, bool by_field) {
    if (container.is(ValueKind::optional)) {
      const Value* inner = container.optional_value();
      if (inner == nullptr) return container;
      return optional_access(*inner, key, by_field);
    }
    if (container.is(ValueKind::map)) {
      auto found = container.as_map().find(key);
      if (!found) return Value::optional_none();
      return Value::optional_of(std::move(*found));
    }
    if (container.is(ValueKind::list) && !by_field) {
      const auto i = list_index(key);
      const ListValue& l = container.as_list();
      if (!i) return index(container, key);
      if (*i < 0 || static_cast<std::uint64_t>(*i) >= l.size()) return Value::optional_none();
      return Value::optional_of(l.at(static_cast<std::size_t>(*i)));
    }
    if (by_field) return select(container, key, false);
    return index(container, key);
  }

  [[gnu::noinline]] Value call(const Step& s) {
    SmallValues<4> args(s.children.size());
    for (std::size_t i = 0; i < s.children.size(); ++i) {
      args[i] = eval(s.children[i]);
      if (args[i].is_error()) return args[i];
    }
    Value r;
    if (call_overload(s.overloads, args.view(), budget, r)) return r;
    budget.charge(1);
    return no_such_overload(s.name, args.view());
  }

  Value list(const Step& s) {
    budget.charge(10);
    std::vector<Value> items;
    items.reserve(s.children.size());
    for (std::size_t i = 0; i < s.children.size(); ++i) {
      Value v = eval(s.children[i]);
      if (v.is_error()) return v;
      if (i < s.optional_at.size() && s.optional_at[i]) {
        if (!v.is(ValueKind::optional)) {
          return Value::error("cannot initialize optional list element from non-optional value " +
                              format_literal(v));
        }
        if (v.optional_value() != nullptr) items.push_back(*v.optional_value());
        continue;
      }
      items.push_back(std::move(v));
    }
    return Value::list(std::move(items));
  }

  Value map(const Step& s) {
    budget.charge(30);
    auto m = std::make_shared<OwnedMap>();
    for (std::size_t i = 0; i + 1 < s.children.size(); i += 2) {
      Value k = eval(s.children[i]);
      if (k.is_error()) return k;
      Value v = eval(s.children[i + 1]);
      if (v.is_error()) return v;
      if (!valid_key(k)) return Value::error("unsupported key type");
      if (i / 2 < s.optional_at.size() && s.optional_at[i / 2]) {
        if (!v.is(ValueKind::optional)) {
          return Value::error("cannot initialize optional entry '" + format_literal(k) +
                              "' from non-optional value " + format_literal(v));
        }
        if (v.optional_value() == nullptr) continue;
        Value inner = *v.optional_value();
        v = std::move(inner);
      }
      if (!m->insert(k, std::move(v))) {
        return Value::error("Failed with repeated key: " + format_literal(k));
      }
    }
    return Value::map(std::shared_ptr<const MapValue>(std::move(m)));
  }

  [[gnu::noinline]] Value comprehension(const Step& s) {
    Value range = eval(s.children[0]);
    if (range.is_error()) return range;
    const bool is_list = range.is(ValueKind::list);
    if (!is_list && !range.is(ValueKind::map)) {
      return Value::error("cannot iterate over '" + std::string(range.type_name()) + "'");
    }
    locals_[s.accu] = eval(s.children[1]);
    const std::size_t size = is_list ? range.as_list().size() : range.as_map().size();
    for (std::size_t i = 0; i < size; ++i) {
      if (is_list) {
        if (s.two_vars) {
          locals_[s.slot] = Value::int64(static_cast<std::int64_t>(i));
          locals_[s.slot2] = range.as_list().at(i);
        } else {
          locals_[s.slot] = range.as_list().at(i);
        }
      } else {
        locals_[s.slot] = range.as_map().key_at(i);
        if (s.two_vars) locals_[s.slot2] = range.as_map().value_at(i);
      }
      Value go = eval(s.children[2]);
      if (go.is_error()) return go;
      if (go.is(ValueKind::boolean) && !go.as_bool()) break;
      Value next = eval(s.children[3]);
      locals_[s.accu] = std::move(next);
    }
    Value result = eval(s.children[4]);
    locals_[s.accu] = Value();
    return result;
  }

  Value append(const Step& s) {
    Value accu = std::move(locals_[s.slot]);
    locals_[s.slot] = Value();
    if (accu.is_error()) return accu;
    budget.charge(12);  // the accumulator read, the one-element list literal, the `+`
    std::vector<Value> extra;
    extra.reserve(s.children.size());
    for (std::uint32_t c : s.children) {
      Value v = eval(c);
      if (v.is_error()) return v;
      extra.push_back(std::move(v));
    }
    if (!accu.is(ValueKind::list)) {
      const Value args[] = {accu, Value::list(std::move(extra))};
      return no_such_overload("_+_", args);
    }
    if (OwnedList* owned = OwnedList::mutable_from(accu)) {
      for (auto& v : extra) owned->items().push_back(std::move(v));
      return accu;
    }
    const ListValue& l = accu.as_list();
    std::vector<Value> items;
    items.reserve(l.size() + extra.size());
    for (std::size_t i = 0; i < l.size(); ++i) items.push_back(l.at(i));
    for (auto& v : extra) items.push_back(std::move(v));
    return Value::list(std::move(items));
  }

  const std::vector<Step>& steps_;
  const std::vector<Hot>& hot_;
  std::span<const Value> variables_;
};

// The packed form of `steps`.
std::vector<Hot> pack(const std::vector<Step>& steps) {
  std::vector<Hot> hot(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    Hot& h = hot[i];
    h.op = s.op;
    h.slot = s.slot;
    h.constant = &s.constant;
    h.field_type = s.field_type.get();
    h.json_name = s.json_name;
    for (std::size_t k = 0; k < 3 && k < s.children.size(); ++k) h.c[k] = s.children[k];
    h.cold = &s;
    // Children come before their parents, so theirs is known.
    h.attribute = s.op == Op::variable || s.op == Op::local ||
                  (s.op == Op::select && hot[s.children[0]].attribute);
  }
  return hot;
}

}  // namespace

namespace {

// What cel-go's optimized programs compute once: list and map literals of constants, and the
// type conversions of a constant (`double(5)`, `duration('1s')`). Steps are in post-order, so
// one pass folds bottom-up. A conversion that fails stays, to fail when evaluated.
void fold_constants(std::vector<Step>& steps) {
  static constexpr std::string_view kConversions[] = {
      "int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration", "dyn"};
  for (std::uint32_t i = 0; i < steps.size(); ++i) {
    Step& s = steps[i];
    bool foldable = false;
    if (s.op == Op::list || s.op == Op::map) {
      foldable = s.optional_at.empty();
    } else if (s.op == Op::call && s.children.size() == 1) {
      foldable = std::find(std::begin(kConversions), std::end(kConversions), s.name) !=
                 std::end(kConversions);
    }
    if (!foldable) continue;
    for (std::uint32_t c : s.children) foldable = foldable && steps[c].op == Op::constant;
    if (!foldable) continue;
    const std::vector<Hot> hot = pack(steps);
    Evaluator e(steps, hot, {}, 0, UINT64_MAX);
    Value v = e.eval(i);
    if (v.is_error()) continue;
    Step folded;
    folded.op = Op::constant;
    folded.constant = std::move(v);
    s = std::move(folded);
  }
}

}  // namespace

Program Program::compile(const Ast& ast, const Declarations& declarations,
                         std::vector<SourceIssue>* undeclared) {
  Compiler c(ast, declarations, undeclared);
  Program p;
  p.root_ = c.compile(ast.root);
  p.locals_ = c.locals;
  fold_constants(c.steps);
  auto compiled = std::make_shared<Compiled>();
  compiled->steps = std::move(c.steps);
  compiled->hot = pack(compiled->steps);
  if (declarations.predicate_kernel) {
    compiled->kernel =
        PredicateKernel::build(compiled->steps, p.root_, declarations.self_fields);
  }
  p.compiled_ = std::move(compiled);
  return p;
}

bool Program::has_predicate_kernel() const { return compiled_->kernel != nullptr; }

const PredicateKernel* Program::predicate_kernel() const { return compiled_->kernel.get(); }

EvalResult Program::evaluate(std::span<const Value> variables, std::uint64_t cost_limit) const {
  EvalResult out = run(variables, cost_limit);
  out.constants = compiled_;
  return out;
}

std::optional<bool> Program::decide(std::span<const Value> variables, std::uint64_t cost_limit,
                                    std::uint64_t& cost, SelfFields* self) const {
  if (compiled_->kernel == nullptr) return std::nullopt;
  const auto decided = compiled_->kernel->run(variables, cost_limit, cost, self);
  if (decided != PredicateKernel::Outcome::is_true &&
      decided != PredicateKernel::Outcome::is_false) {
    return std::nullopt;
  }
  return decided == PredicateKernel::Outcome::is_true;
}

EvalResult Program::run(std::span<const Value> variables, std::uint64_t cost_limit) const {
  EvalResult out;
  if (compiled_->kernel != nullptr) {
    switch (compiled_->kernel->run(variables, cost_limit, out.cost)) {
      case PredicateKernel::Outcome::is_true: out.value = Value::boolean(true); return out;
      case PredicateKernel::Outcome::is_false: out.value = Value::boolean(false); return out;
      case PredicateKernel::Outcome::over_limit:
        out.value = Value::error("operation cancelled: actual cost limit exceeded");
        return out;
      case PredicateKernel::Outcome::undecided: out.cost = 0; break;
    }
  }
  Evaluator e(compiled_->steps, compiled_->hot, variables, locals_, cost_limit);
  try {
    out.value = e.eval(root_);
  } catch (const CostLimitExceeded&) {
    out.value = Value::error("operation cancelled: actual cost limit exceeded");
  }
  out.cost = e.budget.spent();
  return out;
}

}  // namespace kwatch::cel
