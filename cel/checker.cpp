#include "cel/checker.hpp"

#include "cel/time.hpp"

#include <optional>
#include <utility>

namespace kwatch::cel {

namespace {

bool is_dyn_or_error(const Type& t) {
  return t.kind == TypeKind::dyn || t.kind == TypeKind::error;
}

class Checker {
 public:
  Checker(const Ast& ast, const std::vector<std::string>& variables,
          const std::vector<TypePtr>& variable_types, const FunctionRegistry& functions,
          const CheckOptions& options)
      : ast_(ast),
        variables_(variables),
        variable_types_(variable_types),
        functions_(functions),
        options_(options) {
    out_.types.assign(ast.nodes.size(), types::dyn());
  }

  Checked run() {
    out_.result = visit(ast_.root);
    return std::move(out_);
  }

 private:
  void error(NodeId at, std::string message) {
    out_.errors.push_back({ast_.at(at).offset, std::move(message)});
  }

  TypePtr set(NodeId id, TypePtr t) {
    out_.types[id] = t;
    return t;
  }

  // --- names ---
  std::optional<TypePtr> resolve(const std::string& name) const {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
      if (it->first == name) return it->second;
    }
    std::string_view plain = name;
    if (!plain.empty() && plain.front() == '.') plain.remove_prefix(1);
    for (std::size_t i = 0; i < variables_.size(); ++i) {
      if (variables_[i] == plain) {
        return i < variable_types_.size() && variable_types_[i] ? variable_types_[i]
                                                                : types::dyn();
      }
    }
    if (auto t = named_type(name)) return types::type_of(t->type);
    return std::nullopt;
  }

  bool is_local(const std::string& name) const {
    for (const auto& [local, type] : scope_) {
      if (local == name) return true;
    }
    return false;
  }

  std::string qualified(NodeId id) const {
    const Node& n = ast_.at(id);
    if (n.kind == NodeKind::ident) return is_local(n.name) ? std::string() : n.name;
    if (n.kind != NodeKind::select || n.test_only) return {};
    std::string prefix = qualified(n.children[0]);
    return prefix.empty() ? std::string() : prefix + "." + n.name;
  }

  // --- nodes ---
  TypePtr visit(NodeId id) {
    const Node& n = ast_.at(id);
    switch (n.kind) {
      case NodeKind::constant: return set(id, constant_type(n.constant));
      case NodeKind::ident: {
        if (auto t = resolve(n.name)) return set(id, *t);
        error(id, "undeclared reference to '" + n.name + "' (in container '')");
        return set(id, types::error());
      }
      case NodeKind::select: {
        if (!n.test_only) {
          if (auto q = qualified(id); !q.empty()) {
            if (auto t = resolve(q)) return set(id, *t);
          }
        }
        TypePtr field = select_field(id, n.children[0], n.name, false);
        return set(id, n.test_only ? types::boolean() : field);
      }
      case NodeKind::call: return set(id, call(id, n));
      case NodeKind::list: return set(id, list(n));
      case NodeKind::map: return set(id, map(n));
      case NodeKind::message: {
        for (NodeId c : n.children) visit(c);
        TypePtr type = options_.message_type ? options_.message_type(n.name) : nullptr;
        if (!type) {
          error(id, "undeclared reference to '" + n.name + "' (in container '')");
          return set(id, types::error());
        }
        if (type->kind == TypeKind::object && !type->open) {
          for (const std::string& field : n.fields) {
            if (!type->field(field)) error(id, "undefined field '" + field + "'");
          }
        }
        return set(id, type);
      }
      case NodeKind::comprehension: return set(id, comprehension(n));
    }
    return set(id, types::dyn());
  }

  static TypePtr constant_type(const Constant& c) {
    switch (c.kind) {
      case Constant::Kind::null: return types::null_type();
      case Constant::Kind::boolean: return types::boolean();
      case Constant::Kind::int64: return types::int64();
      case Constant::Kind::uint64: return types::uint64();
      case Constant::Kind::float64: return types::float64();
      case Constant::Kind::string: return types::string();
      case Constant::Kind::bytes: return types::bytes();
    }
    return types::dyn();
  }

  TypePtr select_field(NodeId at, NodeId operand, const std::string& field, bool optional) {
    TypePtr operand_type = visit(operand);
    bool was_optional = false;
    if (operand_type->kind == TypeKind::optional) {
      was_optional = true;
      operand_type = operand_type->params[0];
    }
    TypePtr result;
    switch (operand_type->kind) {
      case TypeKind::map: result = operand_type->params[1]; break;
      case TypeKind::object:
        result = operand_type->field(field);
        if (!result) {
          if (operand_type->open) {
            result = types::dyn();
          } else {
            error(at, "undefined field '" + field + "'");
            result = types::error();
          }
        }
        break;
      default:
        if (!is_dyn_or_error(*operand_type)) {
          error(at, "type '" + format_type(*operand_type) + "' does not support field selection");
        }
        result = types::dyn();
    }
    if (was_optional || optional) return types::optional(result);
    return result;
  }

  TypePtr expect_bool(NodeId arg, const TypePtr& t) {
    if (t->kind != TypeKind::boolean && !is_dyn_or_error(*t)) {
      error(arg, "expected type 'bool' but found '" + format_type(*t) + "'");
      return types::error();
    }
    return types::boolean();
  }

  TypePtr call(NodeId id, const Node& n) {
    std::string function = n.name;
    bool receiver = n.has_target;
    std::vector<NodeId> args(n.children.begin(), n.children.end());
    if (receiver) {
      const std::string ns = qualified(n.children[0]);
      if (!ns.empty() && !resolve(ns).has_value() &&
          functions_.has_function(ns + "." + function)) {
        function = ns + "." + function;
        receiver = false;
        args.erase(args.begin());
      }
    }
    if (!receiver && !function.empty() && function.front() == '.') function.erase(0, 1);

    if (function == "_?._" && !receiver && args.size() == 2) {
      const Node& field = ast_.at(args[1]);
      visit(args[1]);
      return select_field(id, args[0], field.constant.text, true);
    }

    std::vector<TypePtr> arg_types;
    for (NodeId a : args) arg_types.push_back(visit(a));

    if ((function == "_&&_" || function == "_||_") && !receiver) {
      TypePtr result = types::boolean();
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (expect_bool(args[i], arg_types[i])->kind == TypeKind::error) result = types::error();
      }
      return result;
    }

    if (!functions_.has_function(function)) {
      error(id, "undeclared reference to '" + function + "' (in container '')");
      return types::error();
    }
    TypePtr result;
    for (const Overload* o : functions_.find(function, receiver, args.size())) {
      TypeBindings bindings;
      bool ok = true;
      for (std::size_t i = 0; i < arg_types.size() && ok; ++i) {
        ok = bindings.assignable(o->signature.params[i], arg_types[i]);
      }
      if (!ok) continue;
      TypePtr r = bindings.substitute(o->signature.result);
      if (!result) {
        result = r;
      } else if (result->kind != TypeKind::dyn && !same_type(*result, *r)) {
        result = types::dyn();
      } else if (result->kind != TypeKind::dyn) {
        result = join(result, r);
      }
    }
    if (result) return result;
    for (const auto& t : arg_types) {
      if (t->kind == TypeKind::error) return types::error();  // reported where it arose
    }
    std::string signature;
    std::size_t first = 0;
    if (receiver) {
      signature = format_type(*arg_types[0]) + ".";
      first = 1;
    }
    signature += "(";
    for (std::size_t i = first; i < arg_types.size(); ++i) {
      if (i > first) signature += ", ";
      signature += format_type(*arg_types[i]);
    }
    signature += ")";
    error(id, "found no matching overload for '" + function + "' applied to '" + signature + "'");
    return types::error();
  }

  // The type of a literal's elements: joined, or a mismatch reported under homogeneity.
  TypePtr join_element(NodeId at, const TypePtr& so_far, const TypePtr& next) {
    if (!so_far) return next;
    if (options_.homogeneous_literals && !is_dyn_or_error(*so_far) && !is_dyn_or_error(*next) &&
        !same_type(*so_far, *next)) {
      error(at, "expected type '" + format_type(*so_far) + "' but found '" + format_type(*next) +
                    "'");
      return so_far;
    }
    return same_type(*so_far, *next) ? join(so_far, next) : types::dyn();
  }

  TypePtr unwrap_optional_entry(NodeId at, TypePtr t) {
    if (t->kind == TypeKind::optional) return t->params[0];
    if (!is_dyn_or_error(*t)) {
      error(at, "expected type '" + format_type(*types::optional(t)) + "' but found '" +
                    format_type(*t) + "'");
    }
    return t;
  }

  TypePtr list(const Node& n) {
    TypePtr element;
    for (std::size_t i = 0; i < n.children.size(); ++i) {
      TypePtr t = visit(n.children[i]);
      if (n.is_optional(i)) t = unwrap_optional_entry(n.children[i], t);
      element = join_element(n.children[i], element, t);
    }
    return types::list(element ? element : types::dyn());
  }

  TypePtr map(const Node& n) {
    TypePtr key, value;
    for (std::size_t i = 0; i + 1 < n.children.size(); i += 2) {
      TypePtr k = visit(n.children[i]);
      TypePtr v = visit(n.children[i + 1]);
      if (n.is_optional(i / 2)) v = unwrap_optional_entry(n.children[i + 1], v);
      key = join_element(n.children[i], key, k);
      value = join_element(n.children[i + 1], value, v);
    }
    return types::map(key ? key : types::dyn(), value ? value : types::dyn());
  }

  // Whether `t` still holds an unknown part (an empty literal's dyn) a step may fill in.
  static bool refinable(const Type& t) {
    if (t.kind == TypeKind::dyn) return true;
    for (const auto& p : t.params) {
      if (refinable(*p)) return true;
    }
    return false;
  }

  TypePtr comprehension(const Node& n) {
    const TypePtr range = visit(n.children[kRange]);
    TypePtr accu = visit(n.children[kInit]);
    TypePtr var1, var2;
    switch (range->kind) {
      case TypeKind::list:
        var1 = range->params[0];
        if (!n.iter_var2.empty()) {
          var2 = var1;
          var1 = types::int64();
        }
        break;
      case TypeKind::map:
        var1 = range->params[0];
        var2 = range->params[1];
        break;
      case TypeKind::dyn:
      case TypeKind::error:
      case TypeKind::param:
        var1 = var2 = types::dyn();
        break;
      default:
        error(n.children[kRange], "expression of type '" + format_type(*range) +
                                      "' cannot be range of a comprehension (must be list, map, "
                                      "or dynamic)");
        var1 = var2 = types::error();
    }
    scope_.emplace_back(n.accu_var, accu);
    scope_.emplace_back(n.iter_var, var1);
    if (!n.iter_var2.empty()) scope_.emplace_back(n.iter_var2, var2 ? var2 : types::dyn());
    const TypePtr condition = visit(n.children[kCondition]);
    expect_bool(n.children[kCondition], condition);
    const TypePtr step = visit(n.children[kStep]);
    if (!same_type(*accu, *step)) {
      error(n.children[kStep], "expected type '" + format_type(*accu) + "' but found '" +
                                   format_type(*step) + "'");
    } else if (refinable(*accu) && !refinable(*step)) {
      // `[].map(x, ...)`: the empty list's element type is what the step appends.
      accu = step;
    }
    scope_.pop_back();
    if (!n.iter_var2.empty()) scope_.pop_back();
    scope_.back().second = accu;
    const TypePtr result = visit(n.children[kResult]);
    scope_.pop_back();
    return result;
  }

  const Ast& ast_;
  const std::vector<std::string>& variables_;
  const std::vector<TypePtr>& variable_types_;
  const FunctionRegistry& functions_;
  const CheckOptions& options_;
  std::vector<std::pair<std::string, TypePtr>> scope_;
  Checked out_;
};

}  // namespace

namespace {

// The literal validators of CheckOptions::validate_literals, in node order.
void validate_literals(const Ast& ast, std::vector<SourceIssue>& errors) {
  for (const Node& n : ast.nodes) {
    if (n.kind != NodeKind::call || n.arg_count() == 0) continue;
    const Node& arg = ast.at(n.arg(0));
    if (arg.kind != NodeKind::constant || arg.constant.kind != Constant::Kind::string) continue;
    const std::string& text = arg.constant.text;
    bool valid = true;
    if (n.name == "matches") {
      std::string error;
      valid = compiled_pattern(text, error) != nullptr;
    } else if (n.name == "duration" && !n.has_target) {
      valid = parse_duration(text).has_value();
    } else if (n.name == "timestamp" && !n.has_target) {
      valid = parse_timestamp(text).has_value();
    } else {
      continue;
    }
    if (!valid) errors.push_back({arg.offset, "invalid " + n.name + " argument"});
  }
}

}  // namespace

Checked check(const Ast& ast, const std::vector<std::string>& variables,
              const std::vector<TypePtr>& variable_types, const FunctionRegistry& functions,
              const CheckOptions& options) {
  Checked checked = Checker(ast, variables, variable_types, functions, options).run();
  if (options.validate_literals && checked.errors.empty()) validate_literals(ast, checked.errors);
  return checked;
}

}  // namespace kwatch::cel
