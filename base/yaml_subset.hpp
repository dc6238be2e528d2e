// The YAML that configuration files such as kube's EncryptionConfiguration are written in, and
// JSON: block mappings and sequences (also a sequence at its key's indentation, and compact
// `- key: value` items), flow collections (`{}`, `[a, b]`, whole JSON documents, across lines),
// plain, 'single-' and "double-quoted" scalars, comments, one `---` document. Anything else
// (anchors, aliases, tags, block scalars `|` `>`, multi-line plain or quoted scalars, several
// documents) is refused with an error naming its line, never guessed at, and so are collections
// nested more than 128 levels deep.
//
// Pure functions over immutable values; safe from any thread.
#pragma once

#include <boost/system/result.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::base {

struct YamlMember;

// One node. Scalars keep their text as written (quotes removed, escapes applied); what a scalar
// means (a number, a boolean) is the reader's business. A key with no value is an empty,
// unquoted scalar (YAML's null).
struct YamlNode {
  enum class Kind { scalar, mapping, sequence };
  Kind kind = Kind::scalar;
  int line = 0;  // 1-based line the node starts on
  std::string scalar;
  bool quoted = false;
  std::vector<YamlMember> members;  // mapping, in document order; keys are unique
  std::vector<YamlNode> items;      // sequence

  bool is_null() const { return kind == Kind::scalar && !quoted && (scalar.empty() || scalar == "null" || scalar == "~"); }
  // The member named `key` of a mapping, or null.
  const YamlNode* find(std::string_view key) const;
};

struct YamlMember {
  std::string key;
  YamlNode value;
};

// Parses one document; an error reads "line N: what is wrong".
boost::system::result<YamlNode, std::string> parse_yaml_subset(std::string_view text);

}  // namespace kwatch::base
