#include "cel/parser.hpp"

#include <limits>
#include <utility>

#include "cel/lexer.hpp"

namespace kwatch::cel {

namespace {

std::size_t count_code_points(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

// Thrown to abandon a parse: too deep, too many errors, or the first syntax error (a recursive
// descent parser without error recovery reports the first; the rest are usually its echoes).
struct Abandon {};

class Parser {
 public:
  Parser(std::string_view source, const ParseOptions& options, std::vector<Token> tokens)
      : options_(options), tokens_(std::move(tokens)) {
    ast_.source = std::string(source);
  }

  Parsed run() {
    try {
      ast_.root = expr();
      if (peek().kind != TokenKind::end) syntax_error(peek(), "<EOF>");
    } catch (const Abandon&) {
    }
    Parsed out;
    out.ast = std::move(ast_);
    out.errors = std::move(errors_);
    return out;
  }

 private:
  // --- tokens ---
  const Token& peek(std::size_t ahead = 0) const {
    const std::size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool accept(TokenKind kind) {
    if (peek().kind != kind) return false;
    next();
    return true;
  }
  const Token& expect(TokenKind kind, std::string_view expecting) {
    if (peek().kind != kind) syntax_error(peek(), expecting);
    return next();
  }

  static std::string shown(const Token& t) {
    if (t.kind == TokenKind::end) return "<EOF>";
    return std::string(t.text);
  }

  [[noreturn]] void syntax_error(const Token& t, std::string_view expecting) {
    std::string message = "Syntax error: mismatched input '" + shown(t) + "'";
    if (!expecting.empty()) message += " expecting " + std::string(expecting);
    errors_.push_back({t.offset, std::move(message)});
    throw Abandon{};
  }
  // A macro's complaint: recorded, and the parse goes on (as cel-go's does).
  NodeId report(std::size_t offset, std::string message) {
    errors_.push_back({offset, std::move(message)});
    if (errors_.size() >= 100) throw Abandon{};
    return constant_node(offset, Constant{});
  }

  struct Depth {
    Parser& p;
    explicit Depth(Parser& parser, std::size_t extra = 0) : p(parser) {
      if (++p.depth_ + extra > p.options_.max_recursion_depth) p.too_deep();
    }
    ~Depth() { --p.depth_; }
  };
  [[noreturn]] void too_deep() {
    errors_.push_back({peek().offset, "max recursion depth exceeded"});
    throw Abandon{};
  }
  // A left-recursive rule's chain (`a + b + c`, `a.b.c`) nests in cel-go's parse tree as deeply
  // as its length; count it the same way so that one limit covers both shapes.
  void chain_step(std::size_t& chain) {
    if (depth_ + ++chain > options_.max_recursion_depth) too_deep();
  }

  // --- nodes ---
  NodeId add(Node n) {
    ast_.nodes.push_back(std::move(n));
    return static_cast<NodeId>(ast_.nodes.size() - 1);
  }
  NodeId constant_node(std::size_t offset, Constant c) {
    Node n;
    n.kind = NodeKind::constant;
    n.offset = static_cast<std::uint32_t>(offset);
    n.constant = std::move(c);
    return add(std::move(n));
  }
  NodeId bool_node(std::size_t offset, bool v) {
    Constant c;
    c.kind = Constant::Kind::boolean;
    c.boolean = v;
    return constant_node(offset, std::move(c));
  }
  NodeId int_node(std::size_t offset, std::int64_t v) {
    Constant c;
    c.kind = Constant::Kind::int64;
    c.int64 = v;
    return constant_node(offset, std::move(c));
  }
  NodeId string_node(std::size_t offset, std::string v) {
    Constant c;
    c.kind = Constant::Kind::string;
    c.text = std::move(v);
    return constant_node(offset, std::move(c));
  }
  NodeId ident_node(std::size_t offset, std::string name) {
    Node n;
    n.kind = NodeKind::ident;
    n.offset = static_cast<std::uint32_t>(offset);
    n.name = std::move(name);
    return add(std::move(n));
  }
  NodeId call_node(std::size_t offset, std::string function, std::vector<NodeId> args,
                   NodeId target = kNoNode) {
    Node n;
    n.kind = NodeKind::call;
    n.offset = static_cast<std::uint32_t>(offset);
    n.name = std::move(function);
    if (target != kNoNode) {
      n.has_target = true;
      n.children.push_back(target);
    }
    n.children.reserve(n.children.size() + args.size());
    for (NodeId a : args) n.children.push_back(a);
    return add(std::move(n));
  }
  NodeId list_node(std::size_t offset, std::vector<NodeId> elements) {
    Node n;
    n.kind = NodeKind::list;
    n.offset = static_cast<std::uint32_t>(offset);
    n.children = std::move(elements);
    return add(std::move(n));
  }
  NodeId accu(std::size_t offset) { return ident_node(offset, std::string(kAccumulator)); }
  NodeId comprehension(std::size_t offset, NodeId range, std::string iter_var,
                       std::string iter_var2, std::string accu_var, NodeId init,
                       NodeId condition, NodeId step, NodeId result) {
    Node n;
    n.kind = NodeKind::comprehension;
    n.offset = static_cast<std::uint32_t>(offset);
    n.children = {range, init, condition, step, result};
    n.iter_var = std::move(iter_var);
    n.iter_var2 = std::move(iter_var2);
    n.accu_var = std::move(accu_var);
    return add(std::move(n));
  }
  NodeId copy(NodeId id) {
    Node n = ast_.nodes[id];
    for (auto& c : n.children) c = copy(c);
    return add(std::move(n));
  }

  // --- grammar ---
  NodeId expr() {
    Depth d(*this);
    const NodeId cond = or_expr();
    if (peek().kind != TokenKind::question) return cond;
    const std::size_t at = next().offset;
    const NodeId yes = or_expr();
    expect(TokenKind::colon, "':'");
    const NodeId no = expr();
    return call_node(at, "_?_:_", {cond, yes, no});
  }

  // `||` and `&&` chains are balanced (as cel-go builds them) so that a long chain does not
  // make a deep tree for the evaluator.
  NodeId balanced(const std::string& function, std::vector<NodeId>& terms,
                  std::vector<std::size_t>& offsets, std::size_t lo, std::size_t hi) {
    if (lo == hi) return terms[lo];
    const std::size_t mid = (lo + hi + 1) / 2;
    const NodeId left = balanced(function, terms, offsets, lo, mid - 1);
    const NodeId right = balanced(function, terms, offsets, mid, hi);
    return call_node(offsets[mid - 1], function, {left, right});
  }
  NodeId logic_chain(TokenKind op, const std::string& function, NodeId (Parser::*term)()) {
    std::vector<NodeId> terms{(this->*term)()};
    std::vector<std::size_t> offsets;
    while (peek().kind == op) {
      offsets.push_back(next().offset);
      terms.push_back((this->*term)());
    }
    return balanced(function, terms, offsets, 0, terms.size() - 1);
  }
  NodeId or_expr() { return logic_chain(TokenKind::logical_or, "_||_", &Parser::and_expr); }
  NodeId and_expr() { return logic_chain(TokenKind::logical_and, "_&&_", &Parser::relation); }

  static const char* relation_function(TokenKind k) {
    switch (k) {
      case TokenKind::less: return "_<_";
      case TokenKind::less_equal: return "_<=_";
      case TokenKind::greater: return "_>_";
      case TokenKind::greater_equal: return "_>=_";
      case TokenKind::equal: return "_==_";
      case TokenKind::not_equal: return "_!=_";
      case TokenKind::kw_in: return "@in";
      default: return nullptr;
    }
  }
  NodeId relation() {
    NodeId left = additive();
    std::size_t chain = 0;
    while (const char* f = relation_function(peek().kind)) {
      chain_step(chain);
      const std::size_t at = next().offset;
      const NodeId right = additive();
      left = call_node(at, f, {left, right});
    }
    return left;
  }
  NodeId additive() {
    NodeId left = multiplicative();
    std::size_t chain = 0;
    for (;;) {
      const TokenKind k = peek().kind;
      if (k != TokenKind::plus && k != TokenKind::minus) return left;
      chain_step(chain);
      const std::size_t at = next().offset;
      const NodeId right = multiplicative();
      left = call_node(at, k == TokenKind::plus ? "_+_" : "_-_", {left, right});
    }
  }
  NodeId multiplicative() {
    NodeId left = unary();
    std::size_t chain = 0;
    for (;;) {
      const TokenKind k = peek().kind;
      const char* f = k == TokenKind::star    ? "_*_"
                      : k == TokenKind::slash ? "_/_"
                      : k == TokenKind::percent ? "_%_"
                                              : nullptr;
      if (f == nullptr) return left;
      chain_step(chain);
      const std::size_t at = next().offset;
      const NodeId right = unary();
      left = call_node(at, f, {left, right});
    }
  }

  NodeId unary() {
    const TokenKind k = peek().kind;
    if (k == TokenKind::logical_not || k == TokenKind::minus) {
      // A minus directly before a number is the literal's sign (so that the smallest int is
      // expressible), unless the number is selected from or indexed: `-1.foo()` negates.
      if (k == TokenKind::minus && (peek(1).kind == TokenKind::int_literal ||
                                    peek(1).kind == TokenKind::double_literal)) {
        const TokenKind after = peek(2).kind;
        if (after != TokenKind::dot && after != TokenKind::left_bracket) return member();
      }
      const std::size_t at = peek().offset;
      std::size_t count = 0;
      while (peek().kind == k) {
        next();
        ++count;
      }
      const NodeId operand = member();
      if (count % 2 == 0) return operand;
      return macro_or_call(at, k == TokenKind::logical_not ? "!_" : "-_", {operand});
    }
    return member();
  }

  std::string field_name() {
    const Token& t = peek();
    if (t.kind == TokenKind::identifier) return std::string(next().text);
    if (t.kind == TokenKind::quoted_identifier) return next().value;
    // A keyword in a selector position is still not a field name.
    syntax_error(t, "{IDENTIFIER, ESC_IDENTIFIER}");
  }

  NodeId member() {
    NodeId operand = primary();
    std::size_t chain = 0;
    for (;;) {
      const TokenKind k = peek().kind;
      if (k == TokenKind::dot) {
        chain_step(chain);
        const std::size_t at = next().offset;
        if (accept(TokenKind::question)) {
          const std::size_t name_at = peek().offset;
          std::string name = field_name();
          const NodeId field = string_node(name_at, std::move(name));
          operand = call_node(at, "_?._", {operand, field});
          continue;
        }
        const bool plain = peek().kind == TokenKind::identifier;
        std::string name = field_name();
        if (plain && peek().kind == TokenKind::left_paren) {
          const std::size_t open = next().offset;
          std::vector<NodeId> args = expr_list(TokenKind::right_paren);
          operand = macro_or_call(open, std::move(name), std::move(args), operand);
          continue;
        }
        Node n;
        n.kind = NodeKind::select;
        n.offset = static_cast<std::uint32_t>(at);
        n.name = std::move(name);
        n.children = {operand};
        operand = add(std::move(n));
      } else if (k == TokenKind::left_bracket) {
        chain_step(chain);
        const std::size_t at = next().offset;
        const bool optional = accept(TokenKind::question);
        const NodeId index = expr();
        expect(TokenKind::right_bracket, "']'");
        operand = call_node(at, optional ? "_[?_]" : "_[_]", {operand, index});
      } else {
        return operand;
      }
    }
  }

  // Arguments up to `close` (consumed); an empty list is allowed.
  std::vector<NodeId> expr_list(TokenKind close) {
    std::vector<NodeId> out;
    if (accept(close)) return out;
    for (;;) {
      out.push_back(expr());
      if (accept(close)) return out;
      expect(TokenKind::comma, close == TokenKind::right_paren ? "{',', ')'}" : "{',', ']'}");
    }
  }

  NodeId primary() {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::int_literal:
      case TokenKind::uint_literal:
      case TokenKind::double_literal:
      case TokenKind::string_literal:
      case TokenKind::bytes_literal:
      case TokenKind::kw_true:
      case TokenKind::kw_false:
      case TokenKind::kw_null:
        return literal(false);
      case TokenKind::minus:
        next();
        return literal(true);
      case TokenKind::left_paren: {
        next();
        const NodeId inner = expr();
        expect(TokenKind::right_paren, "')'");
        return inner;
      }
      case TokenKind::left_bracket: return list_literal();
      case TokenKind::left_brace: return map_literal();
      case TokenKind::dot:
      case TokenKind::identifier: return name_or_call();
      default: syntax_error(t, "");
    }
  }

  NodeId literal(bool negative) {
    const Token& t = next();
    Constant c;
    switch (t.kind) {
      case TokenKind::int_literal: {
        constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
        if (t.magnitude > kMax + (negative ? 1 : 0)) {
          return report(t.offset, "invalid int literal");
        }
        c.kind = Constant::Kind::int64;
        c.int64 = negative ? static_cast<std::int64_t>(0 - t.magnitude)
                           : static_cast<std::int64_t>(t.magnitude);
        break;
      }
      case TokenKind::uint_literal:
        c.kind = Constant::Kind::uint64;
        c.uint64 = t.magnitude;
        break;
      case TokenKind::double_literal:
        c.kind = Constant::Kind::float64;
        c.float64 = negative ? -t.number : t.number;
        break;
      case TokenKind::string_literal:
        c.kind = Constant::Kind::string;
        c.text = t.value;
        break;
      case TokenKind::bytes_literal:
        c.kind = Constant::Kind::bytes;
        c.text = t.value;
        break;
      case TokenKind::kw_true:
      case TokenKind::kw_false:
        c.kind = Constant::Kind::boolean;
        c.boolean = t.kind == TokenKind::kw_true;
        break;
      case TokenKind::kw_null: break;
      default: syntax_error(t, "");
    }
    return constant_node(negative ? t.offset - 1 : t.offset, std::move(c));
  }

  NodeId list_literal() {
    const std::size_t at = next().offset;
    Node n;
    n.kind = NodeKind::list;
    n.offset = static_cast<std::uint32_t>(at);
    while (!accept(TokenKind::right_bracket)) {
      const bool optional = accept(TokenKind::question);
      n.children.push_back(expr());
      n.optional_at.push_back(optional);
      if (accept(TokenKind::right_bracket)) break;
      expect(TokenKind::comma, "{',', ']'}");
    }
    trim_optional(n);
    return add(std::move(n));
  }

  NodeId map_literal() {
    const std::size_t at = next().offset;
    Node n;
    n.kind = NodeKind::map;
    n.offset = static_cast<std::uint32_t>(at);
    while (!accept(TokenKind::right_brace)) {
      const bool optional = accept(TokenKind::question);
      const NodeId key = expr();
      expect(TokenKind::colon, "':'");
      const NodeId value = expr();
      n.children.push_back(key);
      n.children.push_back(value);
      n.optional_at.push_back(optional);
      if (accept(TokenKind::right_brace)) break;
      expect(TokenKind::comma, "{',', '}'}");
    }
    trim_optional(n);
    return add(std::move(n));
  }

  static void trim_optional(Node& n) {
    bool any = false;
    for (bool b : n.optional_at) any = any || b;
    if (!any) n.optional_at.clear();
  }

  // `name`, `.name`, `a.b.c{...}` (a message literal), `name(args)`.
  NodeId name_or_call() {
    const std::size_t at = peek().offset;
    std::string name;
    if (accept(TokenKind::dot)) name = ".";
    const Token& id = expect(TokenKind::identifier, "IDENTIFIER");
    name += id.text;
    if (peek().kind == TokenKind::left_paren) {
      if (is_reserved_word(id.text)) report(id.offset, "reserved identifier: " + std::string(id.text));
      const std::size_t open = next().offset;
      std::vector<NodeId> args = expr_list(TokenKind::right_paren);
      return macro_or_call(open, std::move(name), std::move(args));
    }
    // A qualified name followed by `{` is a message literal: look ahead over `.ident` pairs.
    std::size_t ahead = 0;
    while (peek(ahead).kind == TokenKind::dot && peek(ahead + 1).kind == TokenKind::identifier) {
      ahead += 2;
    }
    if (peek(ahead).kind == TokenKind::left_brace) {
      for (std::size_t i = 0; i < ahead; i += 2) {
        next();
        name += ".";
        name += next().text;
      }
      return message_literal(std::move(name));
    }
    if (is_reserved_word(id.text)) {
      return report(id.offset, "reserved identifier: " + std::string(id.text));
    }
    return ident_node(at, std::move(name));
  }

  NodeId message_literal(std::string type_name) {
    const std::size_t at = next().offset;  // `{`
    Node n;
    n.kind = NodeKind::message;
    n.offset = static_cast<std::uint32_t>(at);
    n.name = std::move(type_name);
    while (!accept(TokenKind::right_brace)) {
      const bool optional = accept(TokenKind::question);
      n.fields.push_back(field_name());
      expect(TokenKind::colon, "':'");
      n.children.push_back(expr());
      n.optional_at.push_back(optional);
      if (accept(TokenKind::right_brace)) break;
      expect(TokenKind::comma, "{',', '}'}");
    }
    trim_optional(n);
    return add(std::move(n));
  }

  // --- macros ---
  std::string simple_name(NodeId arg) const {
    const Node& n = ast_.nodes[arg];
    return n.kind == NodeKind::ident ? n.name : std::string();
  }
  bool is_accumulator(const std::string& name) const {
    return name == kAccumulator || name == "__result__";
  }

  NodeId macro_or_call(std::size_t at, std::string function, std::vector<NodeId> args,
                       NodeId target = kNoNode) {
    const std::size_t argc = args.size();
    if (target == kNoNode) {
      if (function == "has" && argc == 1) {
        const Node& a = ast_.nodes[args[0]];
        if (a.kind != NodeKind::select) {
          return report(a.offset, "invalid argument to has() macro");
        }
        ast_.nodes[args[0]].test_only = true;
        return args[0];
      }
      return call_node(at, std::move(function), std::move(args));
    }
    const bool receiver_is_cel = simple_name(target) == "cel";
    if (function == "bind" && argc == 3 && receiver_is_cel) {
      const std::string var = simple_name(args[0]);
      if (var.empty()) {
        return report(ast_.nodes[args[0]].offset,
                      "cel.bind() variable names must be simple identifiers");
      }
      return comprehension(at, list_node(at, {}), "#unused", "", var, args[1],
                           bool_node(at, false), ident_node(at, var), args[2]);
    }
    if ((function == "all" || function == "exists" || function == "exists_one" ||
         function == "existsOne") &&
        (argc == 2 || argc == 3)) {
      return quantifier(at, function, target, args);
    }
    if ((function == "map" && (argc == 2 || argc == 3)) || (function == "filter" && argc == 2)) {
      return map_or_filter(at, function, target, args);
    }
    if ((function == "transformList" || function == "transformMap" ||
         function == "transformMapEntry") &&
        (argc == 3 || argc == 4)) {
      return transform(at, function, target, args);
    }
    if ((function == "optMap" || function == "optFlatMap") && argc == 2) {
      const std::string var = simple_name(args[0]);
      if (var.empty()) {
        return report(ast_.nodes[args[0]].offset,
                      function + "() variable name must be a simple identifier");
      }
      const NodeId has_value = call_node(at, "hasValue", {}, target);
      const NodeId value = call_node(at, "value", {}, copy(target));
      NodeId bound = comprehension(at, list_node(at, {}), "#unused", "", var, value,
                                   bool_node(at, false), ident_node(at, var), args[1]);
      if (function == "optMap") bound = call_node(at, "optional.of", {bound});
      return call_node(at, "_?_:_", {has_value, bound, call_node(at, "optional.none", {})});
    }
    return call_node(at, std::move(function), std::move(args), target);
  }

  // The iteration variables of a one- or two-variable form, or an error node.
  bool iteration_vars(const std::vector<NodeId>& args, std::size_t count, std::string& v1,
                      std::string& v2, NodeId& error, const char* not_simple) {
    v1 = simple_name(args[0]);
    if (v1.empty()) {
      error = report(ast_.nodes[args[0]].offset, not_simple);
      return false;
    }
    if (count == 2) {
      v2 = simple_name(args[1]);
      if (v2.empty()) {
        error = report(ast_.nodes[args[1]].offset, not_simple);
        return false;
      }
      if (v1 == v2) {
        error = report(ast_.nodes[args[1]].offset, "duplicate variable name: " + v1);
        return false;
      }
    }
    if (is_accumulator(v1) || (count == 2 && is_accumulator(v2))) {
      error = report(ast_.nodes[args[is_accumulator(v1) ? 0 : 1]].offset,
                     "iteration variable overwrites accumulator variable");
      return false;
    }
    return true;
  }

  NodeId quantifier(std::size_t at, const std::string& function, NodeId target,
                    const std::vector<NodeId>& args) {
    const std::size_t vars = args.size() - 1;
    std::string v1, v2;
    NodeId error = kNoNode;
    if (!iteration_vars(args, vars, v1, v2, error, "argument must be a simple name")) {
      return error;
    }
    const std::string accu_name(kAccumulator);
    const NodeId predicate = args.back();
    NodeId init, condition, step, result;
    if (function == "all") {
      init = bool_node(at, true);
      condition = call_node(at, "@not_strictly_false", {accu(at)});
      step = call_node(at, "_&&_", {accu(at), predicate});
      result = accu(at);
    } else if (function == "exists") {
      init = bool_node(at, false);
      condition =
          call_node(at, "@not_strictly_false", {call_node(at, "!_", {accu(at)})});
      step = call_node(at, "_||_", {accu(at), predicate});
      result = accu(at);
    } else {
      init = int_node(at, 0);
      condition = bool_node(at, true);
      step = call_node(at, "_?_:_",
                       {predicate, call_node(at, "_+_", {accu(at), int_node(at, 1)}), accu(at)});
      result = call_node(at, "_==_", {accu(at), int_node(at, 1)});
    }
    return comprehension(at, target, v1, v2, accu_name, init, condition, step, result);
  }

  NodeId map_or_filter(std::size_t at, const std::string& function, NodeId target,
                       const std::vector<NodeId>& args) {
    std::string v, unused;
    NodeId error = kNoNode;
    const char* not_simple = "argument is not an identifier";
    if (!iteration_vars(args, 1, v, unused, error, not_simple)) return error;
    NodeId step;
    if (function == "filter") {
      step = call_node(at, "_+_", {accu(at), list_node(at, {ident_node(at, v)})});
      step = call_node(at, "_?_:_", {args[1], step, accu(at)});
    } else {
      step = call_node(at, "_+_", {accu(at), list_node(at, {args.back()})});
      if (args.size() == 3) step = call_node(at, "_?_:_", {args[1], step, accu(at)});
    }
    return comprehension(at, target, v, "", std::string(kAccumulator), list_node(at, {}),
                         bool_node(at, true), step, accu(at));
  }

  NodeId transform(std::size_t at, const std::string& function, NodeId target,
                   const std::vector<NodeId>& args) {
    std::string v1, v2;
    NodeId error = kNoNode;
    if (!iteration_vars(args, 2, v1, v2, error, "argument must be a simple name")) return error;
    const NodeId value = args.back();
    NodeId step;
    NodeId init;
    if (function == "transformList") {
      init = list_node(at, {});
      step = call_node(at, "_+_", {accu(at), list_node(at, {value})});
    } else {
      Node m;
      m.kind = NodeKind::map;
      m.offset = static_cast<std::uint32_t>(at);
      init = add(std::move(m));
      step = function == "transformMap"
                 ? call_node(at, "cel.@mapInsert", {accu(at), ident_node(at, v1), value})
                 : call_node(at, "cel.@mapInsert", {accu(at), value});
    }
    if (args.size() == 4) step = call_node(at, "_?_:_", {args[2], step, accu(at)});
    return comprehension(at, target, v1, v2, std::string(kAccumulator), init,
                         bool_node(at, true), step, accu(at));
  }

  const ParseOptions& options_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
  Ast ast_;
  std::vector<SourceIssue> errors_;
};

}  // namespace

std::pair<std::size_t, std::size_t> Ast::line_column(std::size_t offset) const {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < source.size(); ++i) {
    const char c = source[i];
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return {line, column};
}

Parsed parse(std::string_view source, const ParseOptions& options) {
  Parsed out;
  const std::size_t size = count_code_points(source);
  if (size > options.max_code_points) {
    out.errors.push_back({0, "expression code point size exceeds limit: size: " +
                                 std::to_string(size) + ", limit " +
                                 std::to_string(options.max_code_points)});
    return out;
  }
  Lexed lexed = lex(source);
  if (!lexed.errors.empty()) {
    for (auto& e : lexed.errors) {
      out.errors.push_back({e.offset, "Syntax error: " + std::move(e.message)});
    }
    return out;
  }
  return Parser(source, options, std::move(lexed.tokens)).run();
}

std::string format_issues(std::string_view source, const std::vector<SourceIssue>& issues) {
  std::string out;
  for (const auto& issue : issues) {
    // The line holding the offset, and the column in code points.
    std::size_t line_start = 0, line = 1;
    for (std::size_t i = 0; i < issue.offset && i < source.size(); ++i) {
      if (source[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    std::size_t line_end = source.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = source.size();
    const std::string_view text = source.substr(line_start, line_end - line_start);
    const std::size_t upto = std::min(issue.offset, source.size()) - line_start;
    const std::size_t column = count_code_points(text.substr(0, upto));
    if (!out.empty()) out += '\n';
    out += "ERROR: <input>:" + std::to_string(line) + ":" + std::to_string(column + 1) + ": " +
           issue.message;
    if (text.size() > 16384) continue;
    out += "\n | ";
    for (char c : text) out += c == '\t' ? ' ' : c;
    out += "\n | ";
    // A wide dot under a multi-byte character keeps the caret under the right one.
    for (std::size_t i = 0; i < upto;) {
      const auto b = static_cast<unsigned char>(text[i]);
      const std::size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      out += len > 1 ? "\xEF\xBC\x8E" : ".";
      i += len;
    }
    const bool wide = upto < text.size() && static_cast<unsigned char>(text[upto]) >= 0x80;
    out += wide ? "\xEF\xBC\xBE" : "^";
  }
  return out;
}

}  // namespace kwatch::cel
