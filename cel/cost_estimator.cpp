#include "cel/cost_estimator.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::cel {

namespace {

constexpr std::uint64_t kMax = UINT64_MAX;

std::uint64_t add(std::uint64_t a, std::uint64_t b) { return a > kMax - b ? kMax : a + b; }
std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMax / b ? kMax : a * b;
}
// ceil(n * tenths / 10), saturating.
std::uint64_t factor(std::uint64_t n, std::uint64_t tenths) {
  if (n == kMax) return kMax;
  const std::uint64_t m = mul(n, tenths);
  return m == kMax ? kMax : (m + 9) / 10;
}

CostEstimate operator+(CostEstimate a, CostEstimate b) {
  return {add(a.min, b.min), add(a.max, b.max)};
}

struct Size {
  std::uint64_t min = 0;
  std::uint64_t max = kMax;
};
constexpr Size kUnknown{};

CostEstimate scaled(Size s, std::uint64_t tenths) { return {factor(s.min, tenths), factor(s.max, tenths)}; }
// ceil(n / 4): a pattern's cost per code point.
std::uint64_t quarter(std::uint64_t n) { return n == kMax ? kMax : n / 4 + (n % 4 != 0); }

// Matching a text of size `text` against a pattern of size `pattern`.
CostEstimate regex_estimate(Size text, Size pattern) {
  const CostEstimate t = scaled(Size{add(text.min, 1), add(text.max, 1)}, 1);
  return {mul(t.min, quarter(pattern.min)), mul(t.max, quarter(pattern.max))};
}
CostEstimate fixed(std::uint64_t n) { return {n, n}; }

// The size a value of type `t` has at most: a string's length, a collection's element count,
// 1 for a scalar.
std::optional<Size> size_of_type(const Type& t) {
  switch (t.kind) {
    case TypeKind::string:
    case TypeKind::bytes:
      if (t.max_length) return Size{0, *t.max_length};
      return std::nullopt;
    case TypeKind::list:
    case TypeKind::map:
      if (t.max_elements) return Size{0, *t.max_elements};
      return std::nullopt;
    case TypeKind::boolean:
    case TypeKind::int64:
    case TypeKind::uint64:
    case TypeKind::float64:
    case TypeKind::duration:
    case TypeKind::timestamp:
    case TypeKind::null_type: return Size{1, 1};
    case TypeKind::dyn:
      // A value of unknown type that an environment bounds (kube's DRA device attributes: at
      // most 64 bytes, the size kube's estimator gives them).
      if (t.max_length) return Size{0, *t.max_length};
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::uint64_t code_points(std::string_view s) {
  std::uint64_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

class Estimator {
 public:
  Estimator(const Ast& ast, const Checked& checked) : ast_(ast), checked_(checked) {
    sizes_.assign(ast.nodes.size(), std::nullopt);
  }

  CostEstimate cost(NodeId id) {
    const Node& n = ast_.at(id);
    switch (n.kind) {
      case NodeKind::constant: return {};
      case NodeKind::ident: return fixed(1);
      case NodeKind::select: {
        if (n.test_only) return cost(n.children[0]);  // has(): free in kube
        CostEstimate c = cost(n.children[0]);
        const TypeKind k = type(n.children[0]).kind;
        if (k == TypeKind::map || k == TypeKind::object || k == TypeKind::param) c = c + fixed(1);
        return c;
      }
      case NodeKind::list: {
        CostEstimate c = fixed(10);
        for (NodeId e : n.children) c = c + cost(e);
        sizes_[id] = Size{n.children.size(), n.children.size()};
        return c;
      }
      case NodeKind::map: {
        CostEstimate c = fixed(30);
        for (NodeId e : n.children) c = c + cost(e);
        sizes_[id] = Size{n.children.size() / 2, n.children.size() / 2};
        return c;
      }
      case NodeKind::message: {
        CostEstimate c = fixed(40);
        for (NodeId e : n.children) c = c + cost(e);
        return c;
      }
      case NodeKind::comprehension: return comprehension(id, n);
      case NodeKind::call: return call(id, n);
    }
    return {};
  }

 private:
  const Type& type(NodeId id) const {
    static const Type dyn;
    const auto& t = checked_.types[id];
    return t ? *t : dyn;
  }

  Size size(NodeId id) {
    if (sizes_[id]) return *sizes_[id];
    const Node& n = ast_.at(id);
    if (n.kind == NodeKind::constant) {
      if (n.constant.kind == Constant::Kind::string) {
        const auto cp = code_points(n.constant.text);
        return {cp, cp};
      }
      if (n.constant.kind == Constant::Kind::bytes) return {n.constant.text.size(), n.constant.text.size()};
      return {1, 1};
    }
    if (auto s = size_of_type(type(id))) return *s;
    return kUnknown;
  }

  // The size of the elements of collection `id` (its list element or map value type).
  Size element_size(NodeId id) {
    const Type& t = type(id);
    if ((t.kind == TypeKind::list || t.kind == TypeKind::map) && !t.params.empty()) {
      if (auto s = size_of_type(*t.params.back())) return *s;
    }
    return kUnknown;
  }

  CostEstimate comprehension(NodeId id, const Node& n) {
    CostEstimate c = cost(n.children[kRange]) + cost(n.children[kInit]);
    const Node& range = ast_.at(n.children[kRange]);
    const bool bind = range.kind == NodeKind::list && range.children.empty() &&
                      n.iter_var == "#unused";
    if (bind) {
      c = c + cost(n.children[kResult]);
      sizes_[id] = size(n.children[kResult]);
      return c;
    }
    const CostEstimate loop = cost(n.children[kCondition]) + cost(n.children[kStep]);
    c = c + cost(n.children[kResult]);
    const Size count = size(n.children[kRange]);
    return c + CostEstimate{mul(count.min, loop.min), mul(count.max, loop.max)};
  }

  CostEstimate call(NodeId id, const Node& n) {
    std::vector<CostEstimate> arg_costs;
    CostEstimate sum;
    for (NodeId c : n.children) {
      arg_costs.push_back(cost(c));
      sum = sum + arg_costs.back();
    }
    const std::string& f = n.name;
    const std::size_t args = n.children.size();
    const auto arg = [&](std::size_t i) { return n.children[i]; };
    const auto is_text = [&](std::size_t i) {
      const TypeKind k = type(arg(i)).kind;
      return k == TypeKind::string || k == TypeKind::bytes;
    };

    if (f == "dyn" && args == 1) {
      sizes_[id] = size(arg(0));
      return fixed(1) + sum;
    }
    if ((f == "_&&_" || f == "_||_") && args == 2) {
      return {arg_costs[0].min, add(arg_costs[0].max, arg_costs[1].max)};
    }
    if (f == "_?_:_" && args == 3) {
      const Size a = size(arg(1)), b = size(arg(2));
      sizes_[id] = Size{std::min(a.min, b.min), std::max(a.max, b.max)};
      return arg_costs[0] + CostEstimate{std::min(arg_costs[1].min, arg_costs[2].min),
                                         std::max(arg_costs[1].max, arg_costs[2].max)};
    }
    if (f == "_==_" || f == "_!=_" ||
        ((f == "_<_" || f == "_<=_" || f == "_>_" || f == "_>=_") && args == 2 && is_text(0))) {
      const std::uint64_t smallest = std::min(size(arg(0)).max, size(arg(1)).max);
      return CostEstimate{smallest > 0 ? 1u : 0u, factor(smallest, 1)} + sum;
    }
    if ((f == "_[_]" || f == "_[?_]") && args == 2) {
      sizes_[id] = element_size(arg(0));
      return fixed(1) + sum;
    }
    if (f == "@in" && args == 2) {
      if (type(arg(1)).kind == TypeKind::list) {
        const Size s = size(arg(1));
        return CostEstimate{s.min, s.max} + sum;
      }
      return fixed(1) + sum;
    }
    if (f == "_+_" && args == 2) {
      const TypeKind k = type(arg(0)).kind;
      if (k == TypeKind::string || k == TypeKind::bytes || k == TypeKind::list) {
        const Size a = size(arg(0)), b = size(arg(1));
        const Size total{add(a.min, b.min), add(a.max, b.max)};
        sizes_[id] = total;
        if (k == TypeKind::list) return fixed(1) + sum;
        return scaled(total, 1) + sum;
      }
      return fixed(1) + sum;
    }
    if (n.has_target && args >= 1) {
      // Methods: arg(0) is the receiver.
      const Size t = size(arg(0));
      if ((f == "startsWith" || f == "endsWith") && args == 2) return scaled(size(arg(1)), 1) + sum;
      if ((f == "matches" || f == "find" || f == "findAll") && args >= 2) {
        return regex_estimate(t, size(arg(1))) + sum;
      }
      if (f == "contains" && args == 2 && is_text(0)) {
        const CostEstimate a = scaled(t, 1), b = scaled(size(arg(1)), 1);
        return CostEstimate{mul(a.min, b.min), mul(a.max, b.max)} + sum;
      }
      if ((f == "lowerAscii" || f == "upperAscii" || f == "substring" || f == "trim" ||
           f == "charAt" || f == "format") && is_text(0)) {
        if (f != "charAt" && f != "format") sizes_[id] = t;
        return scaled(t, 1) + sum;
      }
      if ((f == "indexOf" || f == "lastIndexOf") && is_text(0)) return scaled(t, 1) + sum;
      if ((f == "replace" || f == "split") && is_text(0)) {
        if (f == "split") sizes_[id] = t;
        return scaled(t, 2) + sum;
      }
      if (f == "join" && type(arg(0)).kind == TypeKind::list) {
        const Size e = element_size(arg(0));
        const Size sep = args > 1 ? size(arg(1)) : Size{0, 0};
        const std::uint64_t count = t.max;
        const std::uint64_t total =
            add(mul(count, e.max), mul(sep.max, count > 0 ? count - 1 : 0));
        return scaled(Size{0, total}, 1) + sum;
      }
      if ((f == "isSorted" || f == "sum" || f == "max" || f == "min" || f == "indexOf" ||
           f == "lastIndexOf") &&
          type(arg(0)).kind == TypeKind::list) {
        std::uint64_t per = 1;
        const Type& list = type(arg(0));
        if (!list.params.empty() && (list.params[0]->kind == TypeKind::string ||
                                     list.params[0]->kind == TypeKind::bytes)) {
          per = add(1, factor(element_size(arg(0)).max, 1));
        }
        return CostEstimate{mul(t.min, per), mul(t.max, per)} + sum;
      }
    } else {
      if ((f == "string" || f == "bytes" || f == "strings.quote") && args == 1 && is_text(0)) {
        return scaled(size(arg(0)), 1) + sum;
      }
      if ((f == "ip" || f == "cidr" || f == "isIP" || f == "isCIDR" || f == "quantity" ||
           f == "isQuantity" || f == "semver" || f == "isSemver") && args == 1 && is_text(0)) {
        return scaled(size(arg(0)), 1) + sum;
      }
      if (f == "ip.isCanonical" && args == 1) return scaled(size(arg(0)), 2) + sum;
      if (f == "matches" && args == 2) return regex_estimate(size(arg(0)), size(arg(1))) + sum;
      if ((f == "sets.contains" || f == "sets.intersects" || f == "sets.equivalent") &&
          args == 2) {
        const Size a = size(arg(0)), b = size(arg(1));
        const std::uint64_t k = f == "sets.equivalent" ? 2 : 1;
        return CostEstimate{add(mul(mul(a.min, b.min), k), 1), add(mul(mul(a.max, b.max), k), 1)} +
               sum;
      }
      if (f == "size" && args == 1) return fixed(1) + sum;
    }
    return fixed(1) + sum;
  }

  const Ast& ast_;
  const Checked& checked_;
  std::vector<std::optional<Size>> sizes_;
};

}  // namespace

CostEstimate estimate_cost(const Ast& ast, const Checked& checked) {
  Estimator e(ast, checked);
  return e.cost(ast.root);
}

}  // namespace kwatch::cel
