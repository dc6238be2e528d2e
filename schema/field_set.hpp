// Sets of field paths, as server-side apply records who manages which part of an object
// (`metadata.managedFields[*].fieldsV1`).
//
// A path is a sequence of steps, each spelled as fieldsV1 spells it:
//   "f:<name>"        a field of an object ("f:spec", "f:app" inside labels);
//   "k:<json object>" the item of an associative list with these key values, members sorted by
//                     name: `k:{"containerPort":80,"protocol":"TCP"}`;
//   "v:<json value>"  the item of a set-list with this value: `v:"example.com/hold"`;
//   "i:<index>"       an item of a list by position (lists of unknown shape).
// A set is a trie of steps. A node may be a member (the path itself is in the set) and have
// children (paths below it); fieldsV1 writes membership of a node that has children as `".":{}`.
//
// FieldSet is a value type; const members are safe from any number of threads.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::schema {

using FieldPath = std::vector<std::string>;

// Steps, built from values. Key objects are serialized with their members sorted by name.
std::string field_step(std::string_view name);
std::string key_step(const boost::json::object& keys);
std::string value_step(const boost::json::value& value);
std::string index_step(std::size_t index);

// A path as kube prints it in conflicts: `.spec.containers[name="nginx"].image`,
// `.metadata.finalizers[="example.com/hold"]`, `.spec.ports[port=80,protocol="TCP"]`, `[0]`.
std::string path_string(const FieldPath& path);

// Orders steps: fields, then keys, then values, then indexes (by number), each by its text.
struct StepLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};

class FieldSet {
 public:
  // A map, not a sorted vector: sets are built from objects in their members' order, which a
  // client chooses, so each insertion must cost O(log n) whatever that order is.
  using Children = std::map<std::string, FieldSet, StepLess>;

  bool empty() const { return !member_ && children_.empty(); }
  bool operator==(const FieldSet& other) const = default;

  void insert(const FieldPath& path);
  bool has(const FieldPath& path) const;
  // The subset below one step of this node, or nullptr.
  const FieldSet* child(std::string_view step) const;
  bool member() const { return member_; }
  const Children& children() const { return children_; }

  // Members of this set or of `other`.
  FieldSet union_with(const FieldSet& other) const;
  // Members of this set that are not members of `other` (paths below other's members stay).
  FieldSet difference(const FieldSet& other) const;
  // Members of this set that are neither members of `other` nor below one of its members.
  FieldSet recursive_difference(const FieldSet& other) const;
  // Members of both.
  FieldSet intersection(const FieldSet& other) const;

  // Every member path, depth first, in step order.
  void for_each(const std::function<void(const FieldPath&)>& fn) const;
  std::size_t size() const;

  // fieldsV1 JSON, members and children in step order.
  boost::json::object to_fields_v1(boost::json::storage_ptr sp = {}) const;
  // Parses fieldsV1; nullopt with `error` set when a step or a value is malformed.
  static std::optional<FieldSet> from_fields_v1(const boost::json::value& v, std::string* error);

  // For builders: the node under `step`, created if absent.
  FieldSet& descend(const std::string& step);
  void set_member(bool member) { member_ = member; }

 private:
  void walk(FieldPath& prefix, const std::function<void(const FieldPath&)>& fn) const;
  const FieldSet* find(std::string_view step) const;
  void drop_empty();

  bool member_ = false;
  Children children_;
};

}  // namespace kwatch::schema
