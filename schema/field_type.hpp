// The shape of an object as server-side apply sees it (the model of kube's
// structured-merge-diff): which parts are structures with named fields, which are maps, which
// lists merge item by item (sets of scalars, lists keyed by some of their items' fields) and
// which are atomic (replaced as a whole, owned as one field), plus the operations apply needs on
// values of that shape: the field set of a value, the comparison of two values, the merge of an
// applied configuration into a live object and the removal of a set of fields.
//
// Types come from a structural schema (OpenAPI v3 with x-kubernetes-list-type,
// -list-map-keys, -map-type): `properties` make a structure, `additionalProperties` a map,
// `items` a list (atomic unless the schema says set or map), preserve-unknown-fields without
// properties a value of deduced shape (objects granular maps, lists atomic), anything else a
// scalar. A resource's `metadata` is kube's ObjectMeta (labels and annotations granular,
// finalizers a set, ownerReferences keyed by uid, managedFields atomic).
//
// FieldTypes is immutable once built and safe to share between threads; the value operations
// are pure functions.
#pragma once

#include "apimachinery/api_error.hpp"
#include "schema/field_set.hpp"

#include <boost/json/value.hpp>

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::schema {

struct FieldType {
  enum class Form : unsigned char { scalar, structure, map, list, deduced };
  Form form = Form::deduced;
  // Maps and structures: replaced and owned as a whole; lists: x-kubernetes-list-type atomic.
  bool atomic = false;
  // Structures: the declared fields, sorted by name.
  std::vector<std::pair<std::string, const FieldType*>> fields;
  // Map values, list items; structures: the type of undeclared fields (preserved unknown
  // fields), or nullptr when they have none.
  const FieldType* element = nullptr;
  // Lists of x-kubernetes-list-type map: the key fields and their defaults (null for none).
  // A list that is neither atomic nor keyed is a set.
  std::vector<std::string> keys;
  std::vector<boost::json::value> key_defaults;

  const FieldType* field(std::string_view name) const;
  bool granular_list() const { return form == Form::list && !atomic; }
};

class FieldTypes {
 public:
  // The types of a resource from its structural schema (metadata typed as ObjectMeta).
  static std::shared_ptr<const FieldTypes> of_resource(const boost::json::value& schema);
  const FieldType& root() const { return *root_; }

 private:
  FieldType* make(FieldType::Form form);
  const FieldType* from_schema(const boost::json::value& schema);
  const FieldType* object_meta();

  std::deque<FieldType> nodes_;
  const FieldType* root_ = nullptr;
  const FieldType* deduced_ = nullptr;
  const FieldType* scalar_ = nullptr;
};

// The fields `value` sets: its scalars and atomic parts, every map entry, every item of a
// granular list, and empty or null structure fields. base::Errc::bad_request when a granular list
// holds the same item twice, an item of a keyed list lacks a key without default, or a structure
// holds a field its schema does not declare, unless `allow_duplicates` (live objects, which may
// predate these rules: the first of duplicates counts).
apimachinery::ApiResult<FieldSet> field_set_of(const boost::json::value& value,
                                               const FieldType& type,
                                               bool allow_duplicates = false);
apimachinery::ApiResult<FieldSet> field_set_of(const boost::json::object& value,
                                               const FieldType& type,
                                               bool allow_duplicates = false);

// What changed from `before` to `after` (either may be null: absent). Removed and added
// structures, maps and list items are paths of their own besides their contents. The members
// of `skip` (field paths, e.g. metadata.managedFields) are passed over.
struct Comparison {
  FieldSet added;
  FieldSet modified;
  FieldSet removed;
  bool same() const { return added.empty() && modified.empty() && removed.empty(); }
};
Comparison compare(const boost::json::value* before, const boost::json::value* after,
                   const FieldType& type, const FieldSet* skip = nullptr);
// The same for two objects of `type` (a structure or map), without copying them into values.
Comparison compare(const boost::json::object& before, const boost::json::object& after,
                   const FieldType& type, const FieldSet* skip = nullptr);

// `config` merged into `live`: structures and maps field by field, granular lists item by item
// (the items both have in config's order, live's own items where they were), everything else
// taken from config. A null in config removes the field.
boost::json::value merge(const boost::json::value& live, const boost::json::value& config,
                         const FieldType& type);
// The same for two objects of `type` (a structure or map), without copying them into values.
boost::json::object merge(const boost::json::object& live, const boost::json::object& config,
                          const FieldType& type);

// `value` without the members of `set` (each with everything below it).
void remove_fields(boost::json::value& value, const FieldSet& set, const FieldType& type);
void remove_fields(boost::json::object& value, const FieldSet& set, const FieldType& type);

// `set` plus, as members, the structure fields its paths pass through ("spec" when it holds
// "spec.replicas"; map entries and list items stay as they are).
FieldSet with_named_fields(const FieldSet& set, const FieldType& type);

}  // namespace kwatch::schema
