// CEL's types as the checker reasons about them (cel-spec langdef "Types"): the primitive
// types, list(T), map(K, V), optional_type(T), type(T), the library types (net.IP, ...), dyn,
// type parameters of overloads (`A`), and object types: a CRD schema's objects with their
// fields, so that `self.spec.replicas` is known to be an int and `self.spec.replica` is an
// undefined field.
//
// Types are immutable and shared (TypePtr); safe to read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cel/value.hpp"

namespace kwatch::cel {

struct Type;
using TypePtr = std::shared_ptr<const Type>;

enum class TypeKind : std::uint8_t {
  dyn,
  null_type,
  boolean,
  int64,
  uint64,
  float64,
  string,
  bytes,
  timestamp,
  duration,
  list,      // params[0]: element
  map,       // params[0]: key, params[1]: value
  optional,  // params[0]
  type,      // params[0]: the type it denotes (dyn when unknown)
  opaque,    // a library type by name: net.IP, kubernetes.Quantity, ...
  object,    // a schema's object: named fields, possibly more (preserve-unknown-fields)
  param,     // an overload's type parameter by name
  error,     // what a failed check gives; assignable to everything so errors do not cascade
};

struct Type {
  TypeKind kind = TypeKind::dyn;
  std::string name;              // opaque, object and param types
  std::vector<TypePtr> params;
  // object: its fields by CEL name; open when unknown fields may also be present (dyn).
  std::map<std::string, TypePtr, std::less<>> fields;
  // A field's JSON name where it differs from its CEL name (kube escapes `a-b` as `a__dash__b`).
  std::map<std::string, std::string, std::less<>> json_names;
  bool open = false;
  // dyn read from JSON as int or string (x-kubernetes-int-or-string).
  bool int_or_string = false;
  // list: set or map semantics (x-kubernetes-list-type) and, for map, its key fields.
  ListSemantics::Kind list_kind = ListSemantics::Kind::ordered;
  std::vector<std::string> list_keys;
  // Bounds a schema gives, for cost estimates: most elements of a list or map, longest string.
  std::optional<std::uint64_t> max_elements;
  std::optional<std::uint64_t> max_length;

  TypePtr field(std::string_view n) const;
};

namespace types {
TypePtr dyn();
TypePtr null_type();
TypePtr boolean();
TypePtr int64();
TypePtr uint64();
TypePtr float64();
TypePtr string();
TypePtr bytes();
TypePtr timestamp();
TypePtr duration();
TypePtr error();
TypePtr list(TypePtr element);
TypePtr map(TypePtr key, TypePtr value);
TypePtr optional(TypePtr inner);
TypePtr type_of(TypePtr denoted);
TypePtr opaque(std::string name);
TypePtr param(std::string name);
}  // namespace types

// How cel-go writes a type in messages: `int`, `list(string)`, `map(string, dyn)`,
// `optional_type(int)`, `type(int)`, `google.protobuf.Timestamp`, an object by its name.
std::string format_type(const Type& t);

// A signature in the registry's notation, `list(A), A -> int`: parameter types, then the result.
// Names: int uint double bool string bytes null_type dyn timestamp duration, list(T), map(K, V),
// optional(T), type(T), a single capital letter for a type parameter, anything else with a dot
// is a library type (net.IP). Throws std::invalid_argument on a malformed signature (a
// programming error in a library, found by the libraries' suite).
struct Signature {
  std::vector<TypePtr> params;
  TypePtr result;
};
Signature parse_signature(std::string_view text);

// A type an identifier may name ("int", "google.protobuf.Timestamp", "net.IP", ...): its
// canonical name, which outlives every program, and the type it denotes (list and map of dyn
// for "list" and "map"). A leading '.' is allowed, as in `.int`.
struct NamedType {
  std::string_view name;
  TypePtr type;
};
std::optional<NamedType> named_type(std::string_view name);

// The value kind a runtime argument of type `t` has, or nullopt for any (dyn, a parameter).
std::optional<ValueKind> value_kind_of(const Type& t);

// The type a value of kind `k` has at least (list(dyn) for a list, and so on); for the checker
// of constants and for `type()`.
TypePtr type_of_kind(ValueKind k);

// Binds type parameters while matching an argument type against a parameter type.
class TypeBindings {
 public:
  // Whether a value of type `arg` may be passed where `param` is expected, binding parameters.
  bool assignable(const TypePtr& param, const TypePtr& arg);
  // `t` with its bound parameters replaced (unbound ones become dyn).
  TypePtr substitute(const TypePtr& t) const;

 private:
  std::map<std::string, TypePtr, std::less<>> bound_;
};

// Whether two types are the same once dyn is taken to match anything.
bool same_type(const Type& a, const Type& b);

// The least common type of two (dyn when they differ).
TypePtr join(const TypePtr& a, const TypePtr& b);

}  // namespace kwatch::cel
