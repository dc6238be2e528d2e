#include "apimachinery/label_selector.hpp"

#include "apimachinery/validation.hpp"

#include <boost/json/object.hpp>

#include <algorithm>
#include <charconv>
#include <set>

namespace kwatch::apimachinery {
namespace {

// The lexer and parser follow k8s.io/apimachinery/pkg/labels/selector.go token by token, because
// clients see its error texts verbatim.
enum class Tok {
  error,
  end,
  close_par,
  comma,
  bang,
  double_equals,
  equals,
  greater_than,
  identifier,
  in,
  less_than,
  not_equals,
  not_in,
  open_par,
};

struct Item {
  Tok tok;
  std::string literal;
};

std::optional<Tok> keyword(std::string_view s) {
  if (s == ")") return Tok::close_par;
  if (s == ",") return Tok::comma;
  if (s == "!") return Tok::bang;
  if (s == "==") return Tok::double_equals;
  if (s == "=") return Tok::equals;
  if (s == ">") return Tok::greater_than;
  if (s == "in") return Tok::in;
  if (s == "<") return Tok::less_than;
  if (s == "!=") return Tok::not_equals;
  if (s == "notin") return Tok::not_in;
  if (s == "(") return Tok::open_par;
  return std::nullopt;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_special(char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

std::vector<Item> scan(std::string_view s) {
  std::vector<Item> items;
  std::size_t pos = 0;
  while (true) {
    while (pos < s.size() && is_blank(s[pos])) ++pos;
    if (pos >= s.size()) {
      items.push_back({Tok::end, ""});
      return items;
    }
    if (is_special(s[pos])) {
      // Longest run of special characters that still forms a token ("!=" but "=" then "(").
      std::optional<Item> last;
      std::size_t end = pos;
      while (end < s.size() && is_special(s[end])) {
        auto candidate = s.substr(pos, end - pos + 1);
        if (auto t = keyword(candidate)) {
          last = Item{*t, std::string(candidate)};
        } else if (last) {
          break;
        }
        ++end;
      }
      if (!last) {
        items.push_back({Tok::error, "error expected: keyword found '" +
                                         std::string(s.substr(pos, end - pos)) + "'"});
        pos = end;
      } else {
        pos += last->literal.size();
        items.push_back(std::move(*last));
      }
      continue;
    }
    std::size_t end = pos;
    while (end < s.size() && !is_special(s[end]) && !is_blank(s[end])) ++end;
    auto word = s.substr(pos, end - pos);
    pos = end;
    auto t = keyword(word);
    items.push_back({t ? *t : Tok::identifier, std::string(word)});
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

// utilerrors.NewAggregate(...).Error(): one message as is, several as "[a, b]" (deduplicated).
std::string aggregate(const std::vector<std::string>& errs) {
  std::vector<std::string> unique;
  for (const auto& e : errs) {
    if (std::find(unique.begin(), unique.end(), e) == unique.end()) unique.push_back(e);
  }
  if (unique.size() == 1) return unique.front();
  return "[" + join(unique, ", ") + "]";
}

// strconv.ParseInt(s, 10, 64).
std::optional<std::int64_t> parse_int64(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec != std::errc{} || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string validate_key(std::string_view key, std::string_view path) {
  auto errs = qualified_name_errors(key);
  if (errs.empty()) return {};
  return field_invalid_message(path, key, join(errs, "; "));
}

// NewRequirement's checks of the values (the key was checked already).
std::string check_requirement(const LabelRequirement& r) {
  std::vector<std::string> errs;
  if (r.op == LabelOperator::greater_than || r.op == LabelOperator::less_than) {
    for (std::size_t i = 0; i < r.values.size(); ++i) {
      if (!parse_int64(r.values[i])) {
        errs.push_back(field_invalid_message("values[" + std::to_string(i) + "]", r.values[i],
                                             "for 'Gt', 'Lt' operators, the value must be an "
                                             "integer"));
      }
    }
  }
  for (std::size_t i = 0; i < r.values.size(); ++i) {
    auto verrs = label_value_errors(r.values[i]);
    if (!verrs.empty()) {
      errs.push_back(field_invalid_message("values[" + std::to_string(i) + "][" + r.key + "]",
                                           r.values[i], join(verrs, "; ")));
    }
  }
  return errs.empty() ? std::string{} : aggregate(errs);
}

class Parser {
 public:
  explicit Parser(std::string_view text) : items_(scan(text)) {}

  ApiResult<std::vector<LabelRequirement>> parse() {
    std::vector<LabelRequirement> reqs;
    while (true) {
      auto [tok, lit] = lookahead(true);
      switch (tok) {
        case Tok::identifier:
        case Tok::bang: {
          LabelRequirement r;
          if (auto err = parse_requirement(r); !err.empty()) {
            return fail("unable to parse requirement: " + err);
          }
          reqs.push_back(std::move(r));
          auto [t, l] = consume(true);
          if (t == Tok::end) return reqs;
          if (t == Tok::comma) {
            auto [t2, l2] = lookahead(true);
            if (t2 != Tok::identifier && t2 != Tok::bang) {
              return fail("found '" + l2 + "', expected: identifier after ','");
            }
            break;
          }
          return fail("found '" + l + "', expected: ',' or 'end of string'");
        }
        case Tok::end:
          return reqs;
        default:
          return fail("found '" + lit + "', expected: !, identifier, or 'end of string'");
      }
    }
  }

 private:
  static ApiError fail(std::string message) {
    return api_error(Errc::bad_request, std::move(message));
  }

  // In a value position `in` and `notin` are plain identifiers ("x in (in)").
  static Tok as_value(Tok t) { return t == Tok::in || t == Tok::not_in ? Tok::identifier : t; }

  std::pair<Tok, std::string> lookahead(bool values) const {
    const auto& it = items_[pos_];
    return {values ? as_value(it.tok) : it.tok, it.literal};
  }

  std::pair<Tok, std::string> consume(bool values) {
    const auto& it = items_[pos_];
    if (pos_ + 1 < items_.size()) ++pos_;
    return {values ? as_value(it.tok) : it.tok, it.literal};
  }

  // Returns an error text, empty on success.
  std::string parse_requirement(LabelRequirement& r) {
    auto [tok, lit] = consume(true);
    std::optional<LabelOperator> op;
    if (tok == Tok::bang) {
      op = LabelOperator::does_not_exist;
      std::tie(tok, lit) = consume(true);
    }
    if (tok != Tok::identifier) return "found '" + lit + "', expected: identifier";
    // The parser validates the key without a field path; Go prints a nil path as "<nil>".
    if (auto err = validate_key(lit, "<nil>"); !err.empty()) return err;
    r.key = lit;
    auto next = lookahead(true).first;
    if (next == Tok::end || next == Tok::comma) {
      if (!op) op = LabelOperator::exists;
    }
    if (op) {
      r.op = *op;
      return {};
    }
    auto [otok, olit] = consume(false);
    switch (otok) {
      case Tok::in: r.op = LabelOperator::in; break;
      case Tok::equals: r.op = LabelOperator::equals; break;
      case Tok::double_equals: r.op = LabelOperator::double_equals; break;
      case Tok::greater_than: r.op = LabelOperator::greater_than; break;
      case Tok::less_than: r.op = LabelOperator::less_than; break;
      case Tok::not_in: r.op = LabelOperator::not_in; break;
      case Tok::not_equals: r.op = LabelOperator::not_equals; break;
      default:
        return "found '" + olit + "', expected: in, notin, =, ==, !=, gt, lt";
    }
    std::set<std::string> values;
    std::string err = (r.op == LabelOperator::in || r.op == LabelOperator::not_in)
                          ? parse_values(values)
                          : parse_exact_value(values);
    if (!err.empty()) return err;
    r.values.assign(values.begin(), values.end());
    return check_requirement(r);
  }

  std::string parse_values(std::set<std::string>& s) {
    auto [tok, lit] = consume(true);
    if (tok != Tok::open_par) return "found '" + lit + "' expected: '('";
    std::tie(tok, lit) = lookahead(true);
    switch (tok) {
      case Tok::identifier:
      case Tok::comma: {
        if (auto err = parse_identifiers_list(s); !err.empty()) return err;
        if (consume(true).first != Tok::close_par) return "found '" + lit + "', expected: ')'";
        return {};
      }
      case Tok::close_par:
        consume(true);
        s.insert("");
        return {};
      default:
        return "found '" + lit + "', expected: ',', ')' or identifier";
    }
  }

  // A (possibly empty) comma-separated list of (possibly empty) identifiers: "(a,,b)", "(,)".
  std::string parse_identifiers_list(std::set<std::string>& s) {
    while (true) {
      auto [tok, lit] = consume(true);
      switch (tok) {
        case Tok::identifier: {
          s.insert(lit);
          auto [t2, l2] = lookahead(true);
          if (t2 == Tok::comma) continue;
          if (t2 == Tok::close_par) return {};
          return "found '" + l2 + "', expected: ',' or ')'";
        }
        case Tok::comma: {
          if (s.empty()) s.insert("");
          auto t2 = lookahead(true).first;
          if (t2 == Tok::close_par) {
            s.insert("");
            return {};
          }
          if (t2 == Tok::comma) {
            consume(true);
            s.insert("");
          }
          break;
        }
        default:
          return "found '" + lit + "', expected: ',', or identifier";
      }
    }
  }

  std::string parse_exact_value(std::set<std::string>& s) {
    auto t = lookahead(true).first;
    if (t == Tok::end || t == Tok::comma) {
      s.insert("");
      return {};
    }
    auto [tok, lit] = consume(true);
    if (tok == Tok::identifier) {
      s.insert(lit);
      return {};
    }
    return "found '" + lit + "', expected: identifier";
  }


  std::vector<Item> items_;
  std::size_t pos_ = 0;
};

}  // namespace

bool LabelRequirement::matches(std::optional<std::string_view> value) const {
  auto has = [&](std::string_view v) {
    return std::find(values.begin(), values.end(), v) != values.end();
  };
  switch (op) {
    case LabelOperator::in:
    case LabelOperator::equals:
    case LabelOperator::double_equals:
      return value && has(*value);
    case LabelOperator::not_in:
    case LabelOperator::not_equals:
      return !value || !has(*value);
    case LabelOperator::exists:
      return value.has_value();
    case LabelOperator::does_not_exist:
      return !value.has_value();
    case LabelOperator::greater_than:
    case LabelOperator::less_than: {
      if (!value || values.size() != 1) return false;
      auto lhs = parse_int64(*value);
      auto rhs = parse_int64(values.front());
      if (!lhs || !rhs) return false;
      return op == LabelOperator::greater_than ? *lhs > *rhs : *lhs < *rhs;
    }
  }
  return false;
}

LabelSelector::LabelSelector(std::vector<LabelRequirement> requirements)
    : requirements_(std::move(requirements)) {
  std::stable_sort(requirements_.begin(), requirements_.end(),
                   [](const auto& a, const auto& b) { return a.key < b.key; });
}

bool LabelSelector::matches(const boost::json::object* labels) const {
  for (const auto& r : requirements_) {
    std::optional<std::string_view> value;
    if (labels) {
      if (auto it = labels->find(r.key); it != labels->end() && it->value().is_string()) {
        value = std::string_view(it->value().get_string());
      }
    }
    if (!r.matches(value)) return false;
  }
  return true;
}

std::optional<std::string> LabelSelector::exact_value(std::string_view key) const {
  for (const auto& r : requirements_) {
    if (r.key != key) continue;
    switch (r.op) {
      case LabelOperator::equals:
      case LabelOperator::double_equals:
      case LabelOperator::in:
        if (r.values.size() == 1) return r.values.front();
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string LabelSelector::to_string() const {
  std::string out;
  for (const auto& r : requirements_) {
    if (!out.empty()) out += ',';
    if (r.op == LabelOperator::does_not_exist) out += '!';
    out += r.key;
    switch (r.op) {
      case LabelOperator::exists:
      case LabelOperator::does_not_exist:
        continue;
      case LabelOperator::equals: out += '='; break;
      case LabelOperator::double_equals: out += "=="; break;
      case LabelOperator::not_equals: out += "!="; break;
      case LabelOperator::in: out += " in ("; break;
      case LabelOperator::not_in: out += " notin ("; break;
      case LabelOperator::greater_than: out += '>'; break;
      case LabelOperator::less_than: out += '<'; break;
    }
    out += join(r.values, ",");
    if (r.op == LabelOperator::in || r.op == LabelOperator::not_in) out += ')';
  }
  return out;
}

ApiResult<LabelSelector> label_selector_from_json(const boost::json::object& selector) {
  std::vector<LabelRequirement> reqs;
  auto invalid = [](std::string message) { return api_error(Errc::invalid, std::move(message)); };
  if (const auto* labels = selector.if_contains("matchLabels"); labels && !labels->is_null()) {
    if (!labels->is_object()) return invalid("matchLabels must be a map of strings");
    for (const auto& [key, value] : labels->get_object()) {
      if (!value.is_string()) return invalid("matchLabels must be a map of strings");
      if (auto e = validate_key(key, "key"); !e.empty()) return invalid(e);
      LabelRequirement r{std::string(key), LabelOperator::equals, {std::string(value.get_string())}};
      if (auto e = check_requirement(r); !e.empty()) return invalid(e);
      reqs.push_back(std::move(r));
    }
  }
  if (const auto* exprs = selector.if_contains("matchExpressions"); exprs && !exprs->is_null()) {
    if (!exprs->is_array()) return invalid("matchExpressions must be a list");
    for (const auto& e : exprs->get_array()) {
      const auto* expr = e.if_object();
      if (expr == nullptr) return invalid("matchExpressions must be a list of requirements");
      const auto* key = expr->if_contains("key");
      const auto* op = expr->if_contains("operator");
      const std::string k = key != nullptr && key->is_string() ? std::string(key->get_string()) : "";
      const std::string o = op != nullptr && op->is_string() ? std::string(op->get_string()) : "";
      LabelRequirement r{k, LabelOperator::exists, {}};
      if (o == "In") {
        r.op = LabelOperator::in;
      } else if (o == "NotIn") {
        r.op = LabelOperator::not_in;
      } else if (o == "Exists") {
        r.op = LabelOperator::exists;
      } else if (o == "DoesNotExist") {
        r.op = LabelOperator::does_not_exist;
      } else {
        return invalid(go_quote(o) + " is not a valid label selector operator");
      }
      if (auto err = validate_key(k, "key"); !err.empty()) return invalid(err);
      std::set<std::string> values;
      if (const auto* vs = expr->if_contains("values"); vs != nullptr && vs->is_array()) {
        for (const auto& v : vs->get_array()) {
          if (v.is_string()) values.insert(std::string(v.get_string()));
        }
      }
      r.values.assign(values.begin(), values.end());
      // NewRequirement: In and NotIn need values, Exists and DoesNotExist take none.
      const bool set_op = r.op == LabelOperator::in || r.op == LabelOperator::not_in;
      if (set_op && r.values.empty()) {
        return invalid("values: Invalid value: []string(nil): for 'in', 'notin' operators, "
                       "values set can't be empty");
      }
      if (!set_op && !r.values.empty()) {
        std::string listed;
        for (const auto& v : r.values) listed += (listed.empty() ? "" : ", ") + go_quote(v);
        return invalid("values: Invalid value: []string{" + listed +
                       "}: values set must be empty for exists and does not exist");
      }
      if (auto err = check_requirement(r); !err.empty()) return invalid(err);
      reqs.push_back(std::move(r));
    }
  }
  return LabelSelector(std::move(reqs));
}

LabelSelector label_selector_from_map(const boost::json::object& labels) {
  std::vector<LabelRequirement> reqs;
  for (const auto& [key, value] : labels) {
    if (!value.is_string()) continue;
    reqs.push_back({std::string(key), LabelOperator::equals, {std::string(value.get_string())}});
  }
  return LabelSelector(std::move(reqs));
}

ApiResult<LabelSelector> parse_label_selector(std::string_view text) {
  Parser parser(text);
  auto reqs = parser.parse();
  if (!reqs) return reqs.error();
  return LabelSelector(std::move(*reqs));
}

}  // namespace kwatch::apimachinery
