#include "cel/types.hpp"

#include <stdexcept>

namespace kwatch::cel {

TypePtr Type::field(std::string_view n) const {
  auto it = fields.find(n);
  if (it == fields.end()) return nullptr;
  return it->second;
}

namespace types {
namespace {
TypePtr make(TypeKind kind, std::vector<TypePtr> params = {}, std::string name = {}) {
  auto t = std::make_shared<Type>();
  t->kind = kind;
  t->params = std::move(params);
  t->name = std::move(name);
  return t;
}
}  // namespace

TypePtr dyn() { static const TypePtr t = make(TypeKind::dyn); return t; }
TypePtr null_type() { static const TypePtr t = make(TypeKind::null_type); return t; }
TypePtr boolean() { static const TypePtr t = make(TypeKind::boolean); return t; }
TypePtr int64() { static const TypePtr t = make(TypeKind::int64); return t; }
TypePtr uint64() { static const TypePtr t = make(TypeKind::uint64); return t; }
TypePtr float64() { static const TypePtr t = make(TypeKind::float64); return t; }
TypePtr string() { static const TypePtr t = make(TypeKind::string); return t; }
TypePtr bytes() { static const TypePtr t = make(TypeKind::bytes); return t; }
TypePtr timestamp() { static const TypePtr t = make(TypeKind::timestamp); return t; }
TypePtr duration() { static const TypePtr t = make(TypeKind::duration); return t; }
TypePtr error() { static const TypePtr t = make(TypeKind::error); return t; }
TypePtr list(TypePtr element) { return make(TypeKind::list, {std::move(element)}); }
TypePtr map(TypePtr key, TypePtr value) {
  return make(TypeKind::map, {std::move(key), std::move(value)});
}
TypePtr optional(TypePtr inner) { return make(TypeKind::optional, {std::move(inner)}); }
TypePtr type_of(TypePtr denoted) { return make(TypeKind::type, {std::move(denoted)}); }
TypePtr opaque(std::string name) { return make(TypeKind::opaque, {}, std::move(name)); }
TypePtr param(std::string name) { return make(TypeKind::param, {}, std::move(name)); }
}  // namespace types

std::optional<NamedType> named_type(std::string_view name) {
  struct Entry {
    std::string_view name;
    TypePtr (*make)();
  };
  static constexpr Entry kNamed[] = {
      {"bool", types::boolean},
      {"int", types::int64},
      {"uint", types::uint64},
      {"double", types::float64},
      {"string", types::string},
      {"bytes", types::bytes},
      {"list", [] { return types::list(types::dyn()); }},
      {"map", [] { return types::map(types::dyn(), types::dyn()); }},
      {"null_type", types::null_type},
      {"type", [] { return types::type_of(types::dyn()); }},
      {"google.protobuf.Timestamp", types::timestamp},
      {"google.protobuf.Duration", types::duration},
      {"optional_type", [] { return types::optional(types::dyn()); }},
      {"net.IP", [] { return types::opaque("net.IP"); }},
      {"net.CIDR", [] { return types::opaque("net.CIDR"); }},
      {"kubernetes.Quantity", [] { return types::opaque("kubernetes.Quantity"); }},
      {"kubernetes.Semver", [] { return types::opaque("kubernetes.Semver"); }},
      {"kubernetes.URL", [] { return types::opaque("kubernetes.URL"); }},
      {"kubernetes.NamedFormat", [] { return types::opaque("kubernetes.NamedFormat"); }},
  };
  if (!name.empty() && name.front() == '.') name.remove_prefix(1);
  for (const Entry& e : kNamed) {
    if (e.name == name) return NamedType{e.name, e.make()};
  }
  return std::nullopt;
}

std::string format_type(const Type& t) {
  switch (t.kind) {
    case TypeKind::dyn: return "dyn";
    case TypeKind::null_type: return "null_type";
    case TypeKind::boolean: return "bool";
    case TypeKind::int64: return "int";
    case TypeKind::uint64: return "uint";
    case TypeKind::float64: return "double";
    case TypeKind::string: return "string";
    case TypeKind::bytes: return "bytes";
    case TypeKind::timestamp: return "google.protobuf.Timestamp";
    case TypeKind::duration: return "google.protobuf.Duration";
    case TypeKind::list: return "list(" + format_type(*t.params[0]) + ")";
    case TypeKind::map:
      return "map(" + format_type(*t.params[0]) + ", " + format_type(*t.params[1]) + ")";
    case TypeKind::optional: return "optional_type(" + format_type(*t.params[0]) + ")";
    case TypeKind::type:
      return t.params.empty() ? "type" : "type(" + format_type(*t.params[0]) + ")";
    case TypeKind::opaque:
    case TypeKind::object:
    case TypeKind::param: return t.name;
    case TypeKind::error: return "*error*";
  }
  return "?";
}

namespace {

class SignatureParser {
 public:
  explicit SignatureParser(std::string_view s) : s_(s) {}

  Signature run() {
    Signature sig;
    skip();
    if (!at("->")) {
      sig.params.push_back(type());
      skip();
      while (accept(',')) sig.params.push_back(type());
    }
    skip();
    if (!at("->")) fail();
    pos_ += 2;
    sig.result = type();
    skip();
    if (pos_ != s_.size()) fail();
    return sig;
  }

 private:
  [[noreturn]] void fail() const {
    throw std::invalid_argument("bad signature: " + std::string(s_));
  }
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool at(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  bool accept(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  TypePtr type() {
    skip();
    const std::size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '_' || s_[pos_] == '.')) {
      ++pos_;
    }
    const std::string_view name = s_.substr(start, pos_ - start);
    if (name.empty()) fail();
    if (accept('(')) {
      std::vector<TypePtr> params{type()};
      while (accept(',')) params.push_back(type());
      if (!accept(')')) fail();
      if (name == "list" && params.size() == 1) return types::list(params[0]);
      if (name == "map" && params.size() == 2) return types::map(params[0], params[1]);
      if (name == "optional" && params.size() == 1) return types::optional(params[0]);
      if (name == "type" && params.size() == 1) return types::type_of(params[0]);
      fail();
    }
    if (name == "int") return types::int64();
    if (name == "uint") return types::uint64();
    if (name == "double") return types::float64();
    if (name == "bool") return types::boolean();
    if (name == "string") return types::string();
    if (name == "bytes") return types::bytes();
    if (name == "null_type") return types::null_type();
    if (name == "dyn") return types::dyn();
    if (name == "timestamp") return types::timestamp();
    if (name == "duration") return types::duration();
    if (name == "type") return types::type_of(types::dyn());
    if (name.size() == 1 && name[0] >= 'A' && name[0] <= 'Z') return types::param(std::string(name));
    if (name.find('.') != std::string_view::npos) return types::opaque(std::string(name));
    fail();
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

bool is_loose(const Type& t) { return t.kind == TypeKind::dyn || t.kind == TypeKind::error; }

}  // namespace

Signature parse_signature(std::string_view text) { return SignatureParser(text).run(); }

std::optional<ValueKind> value_kind_of(const Type& t) {
  switch (t.kind) {
    case TypeKind::null_type: return ValueKind::null;
    case TypeKind::boolean: return ValueKind::boolean;
    case TypeKind::int64: return ValueKind::int64;
    case TypeKind::uint64: return ValueKind::uint64;
    case TypeKind::float64: return ValueKind::float64;
    case TypeKind::string: return ValueKind::string;
    case TypeKind::bytes: return ValueKind::bytes;
    case TypeKind::timestamp: return ValueKind::timestamp;
    case TypeKind::duration: return ValueKind::duration;
    case TypeKind::list: return ValueKind::list;
    case TypeKind::map:
    case TypeKind::object: return ValueKind::map;
    case TypeKind::optional: return ValueKind::optional;
    case TypeKind::type: return ValueKind::type;
    case TypeKind::opaque: return ValueKind::opaque;
    default: return std::nullopt;
  }
}

TypePtr type_of_kind(ValueKind k) {
  switch (k) {
    case ValueKind::null: return types::null_type();
    case ValueKind::boolean: return types::boolean();
    case ValueKind::int64: return types::int64();
    case ValueKind::uint64: return types::uint64();
    case ValueKind::float64: return types::float64();
    case ValueKind::string: return types::string();
    case ValueKind::bytes: return types::bytes();
    case ValueKind::timestamp: return types::timestamp();
    case ValueKind::duration: return types::duration();
    case ValueKind::list: return types::list(types::dyn());
    case ValueKind::map: return types::map(types::dyn(), types::dyn());
    case ValueKind::optional: return types::optional(types::dyn());
    case ValueKind::type: return types::type_of(types::dyn());
    default: return types::dyn();
  }
}

bool same_type(const Type& a, const Type& b) {
  if (is_loose(a) || is_loose(b)) return true;
  if (a.kind != b.kind) return false;
  if (a.kind == TypeKind::type) return true;  // type values compare whatever they denote
  if ((a.kind == TypeKind::opaque || a.kind == TypeKind::object) && a.name != b.name) return false;
  if (a.params.size() != b.params.size()) return false;
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    if (!same_type(*a.params[i], *b.params[i])) return false;
  }
  return true;
}

TypePtr join(const TypePtr& a, const TypePtr& b) {
  if (a->kind == TypeKind::error) return b;
  if (b->kind == TypeKind::error) return a;
  if (a->kind == TypeKind::dyn) return a;
  if (b->kind == TypeKind::dyn) return b;
  if (a->kind == b->kind && a->params.size() == b->params.size() &&
      (a->kind == TypeKind::list || a->kind == TypeKind::map || a->kind == TypeKind::optional ||
       a->kind == TypeKind::type)) {
    std::vector<TypePtr> params;
    for (std::size_t i = 0; i < a->params.size(); ++i) params.push_back(join(a->params[i], b->params[i]));
    auto t = std::make_shared<Type>(*a);
    t->params = std::move(params);
    return t;
  }
  if (same_type(*a, *b)) return a;
  return types::dyn();
}

bool TypeBindings::assignable(const TypePtr& param, const TypePtr& arg) {
  if (param->kind == TypeKind::param) {
    auto it = bound_.find(param->name);
    if (it == bound_.end()) {
      bound_.emplace(param->name, arg);
      return true;
    }
    // A parameter bound to dyn takes the first concrete type it meets (as a type variable
    // unifies); a dyn argument fits any binding.
    if (is_loose(*it->second)) {
      it->second = arg;
      return true;
    }
    if (is_loose(*arg)) return true;
    if (!same_type(*it->second, *arg)) return false;
    it->second = join(it->second, arg);
    return true;
  }
  if (is_loose(*param) || is_loose(*arg)) {
    // Still bind the parameters inside: list(A) against dyn binds A to dyn.
    for (const auto& p : param->params) assignable(p, types::dyn());
    return true;
  }
  if (param->kind != arg->kind) return false;
  if ((param->kind == TypeKind::opaque || param->kind == TypeKind::object) &&
      param->name != arg->name) {
    return false;
  }
  if (param->kind == TypeKind::type) return true;
  if (param->params.size() != arg->params.size()) return false;
  for (std::size_t i = 0; i < param->params.size(); ++i) {
    if (!assignable(param->params[i], arg->params[i])) return false;
  }
  return true;
}

TypePtr TypeBindings::substitute(const TypePtr& t) const {
  if (t->kind == TypeKind::param) {
    auto it = bound_.find(t->name);
    return it == bound_.end() ? types::dyn() : it->second;
  }
  if (t->params.empty()) return t;
  auto out = std::make_shared<Type>(*t);
  for (auto& p : out->params) p = substitute(p);
  return out;
}

}  // namespace kwatch::cel
