// A parsed CEL expression: the macro-expanded syntax tree cel-spec describes (constants, idents,
// selections, calls, list/map/message literals, comprehensions), kept flat: every node lives in
// one vector and names its children by index, so a tree is one allocation per node kind list and
// copies, walks and the compiler's passes never chase owning pointers.
//
// Operators are calls with cel-go's function names (`_+_`, `_[_]`, `_?_:_`, `@in`, `_?._`), so
// the checker and the evaluator resolve them as they resolve any function.
//
// Immutable once parsed; safe to read from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::cel {

using NodeId = std::uint32_t;
inline constexpr NodeId kNoNode = ~NodeId{0};

enum class NodeKind : std::uint8_t {
  constant,       // `constant`
  ident,          // `name`
  select,         // children[0].`name`; `test_only` for has()
  call,           // `name`(args); with `has_target` children[0] is the receiver
  list,           // children are the elements; `optional_at` marks `?e` elements
  map,            // children are key0, value0, key1, value1, ...; `optional_at` marks `?k: v`
  message,        // `name`{fields[i]: children[i]}; `optional_at` marks `?f: v`
  comprehension,  // children: range, init, condition, step, result
};

struct Constant {
  enum class Kind : std::uint8_t { null, boolean, int64, uint64, float64, string, bytes };
  Kind kind = Kind::null;
  bool boolean = false;
  std::int64_t int64 = 0;
  std::uint64_t uint64 = 0;
  double float64 = 0;
  std::string text;  // string (UTF-8) or bytes (octets)
};

struct Node {
  NodeKind kind = NodeKind::constant;
  bool test_only = false;
  bool has_target = false;
  std::uint32_t offset = 0;  // where the node's token starts in the source, in bytes
  Constant constant;
  std::string name;
  std::vector<NodeId> children;
  std::vector<std::string> fields;  // message literal field names
  std::vector<bool> optional_at;    // per element/entry/field, when any is optional
  // Comprehension variables; iter_var2 is empty for the one-variable forms.
  std::string iter_var, iter_var2, accu_var;

  // The receiver (when has_target) and arguments of a call.
  std::size_t arg_count() const { return children.size() - (has_target ? 1 : 0); }
  NodeId arg(std::size_t i) const { return children[i + (has_target ? 1 : 0)]; }
  bool is_optional(std::size_t i) const { return i < optional_at.size() && optional_at[i]; }
};

// Comprehension children by role.
enum ComprehensionPart : std::size_t { kRange, kInit, kCondition, kStep, kResult };

// The accumulator variable the macros name; `@` keeps it out of a user's namespace.
inline constexpr std::string_view kAccumulator = "@result";

struct Ast {
  std::vector<Node> nodes;
  NodeId root = kNoNode;
  std::string source;

  const Node& at(NodeId id) const { return nodes[id]; }
  // 1-based line and column (in code points) of a source offset, as CEL's messages give them.
  std::pair<std::size_t, std::size_t> line_column(std::size_t offset) const;
};

}  // namespace kwatch::cel
