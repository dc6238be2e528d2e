// Kubernetes strategic merge patch (`application/strategic-merge-patch+json`), following
// k8s.io/apimachinery/pkg/util/strategicpatch (StrategicMergeMapPatch, the server side).
//
// Rules, per field of the patch:
// - null deletes the field; a field absent from the original takes the patch value;
// - objects merge recursively unless the field's strategy is `replace`;
// - lists are replaced, unless the schema declares strategy `merge`: lists of objects merge
//   element by element on the merge key, lists of primitives become the union;
// - directives: `$patch: replace|delete` in an object, `{"$patch": "delete", <key>: v}` and
//   `{"$patch": "replace"}` inside a merging list, `$retainKeys: [...]` (drops the original's
//   other fields), `$deleteFromPrimitiveList/<f>: [...]`, `$setElementOrder/<f>: [...]`;
// - order of merged lists as in Kubernetes: `$setElementOrder`, then the patch's order, then the
//   original's order.
// Deliberate differences from kube-apiserver, which decodes the result into typed Go structs:
// nulls inside values that are added or replace a value are dropped (the typed decoding drops
// them too); `$deleteFromPrimitiveList` on a missing list is a no-op and deletes even from a
// list without a declared merge strategy; failures kube reports as 500 are Errc::bad_request;
// merge-key values, set members and order entries are equal when their JSON values are (numbers
// by mathematical value: 1 and 1.0 are one key, where kube tells int64 from float64; 1 and "1"
// differ as in kube; objects regardless of member order). The typed decoding's refusal of a
// value of the wrong shape is StructuralSchema::go_conversion_error, which the registry asks
// after the merge.
//
// Cost: expected O(size of original + patch) time whatever the lists hold (list operations go
// through hash tables keyed per process, so crafted collisions cannot make them quadratic);
// recursion as deep as the documents.
//
// PatchSchema is a value type, immutable once built; the built-in ones are process-wide
// constants, safe to read from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/value.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::schema {

enum class PatchStrategy {
  merge,    // lists: merge (by merge_key, or set union for primitives); objects: merge (default)
  replace,  // replaced as a whole (the default for lists)
};

struct PatchRule {
  PatchStrategy strategy = PatchStrategy::merge;
  std::string merge_key;     // for lists of objects; empty for lists of primitives
  bool retain_keys = false;  // `patchStrategy:"...,retainKeys"` (informational when applying)
};

namespace detail {
struct PatchSchemaNode;
}

// A decoded JSON value as Go's %v (and %+v) prints it, as kube's messages show patches: maps as
// `map[k:v ...]` with sorted keys, lists as `[a b]`, strings bare, numbers as int64 and float64
// print, null as `<nil>`.
std::string go_print(const boost::json::value& v);

// Patch metadata per field path. Paths are dotted field names from the object root; `[]` after
// a field steps into the elements of that list: "spec.containers", "spec.containers[].ports".
class PatchSchema {
 public:
  PatchSchema();
  ~PatchSchema();
  PatchSchema(PatchSchema&&) noexcept;
  PatchSchema& operator=(PatchSchema&&) noexcept;

  PatchSchema& set(std::string_view path, PatchRule rule);
  // Strategy merge; with a merge key for lists of objects, without for primitive sets.
  PatchSchema& merge_list(std::string_view path, std::string merge_key = {});

  // The rule declared for `path`; indices such as "[2]" are accepted in place of "[]".
  const PatchRule* find(std::string_view path) const;
  // Every declared rule with its path ("spec.containers[].ports"), sorted by path.
  std::vector<std::pair<std::string, PatchRule>> rules() const;
  const detail::PatchSchemaNode* root() const { return root_.get(); }

 private:
  std::unique_ptr<detail::PatchSchemaNode> root_;
};

// Schema of a built-in kind's v1 (group "" or "core" for the core group), from the compiled-in
// kind data (schema/builtin_schemas.hpp), built once per kind. Every kind, known or not, gets
// `metadata.ownerReferences` (merge key uid) and `metadata.finalizers` (merged set). Writes use
// the kind's own `ResourceInfo::patch_schema`; this serves tools and tests.
const PatchSchema& builtin_patch_schema(std::string_view group, std::string_view kind);

// Applies `patch` (must be an object) to `original`. Errors: base::Errc::bad_request for malformed
// patches and unmergeable data (with the strategicpatch texts, e.g. "invalid patch format of
// retainKeys", "map: map[image:nginx] does not contain declared merge key: name"),
// base::Errc::invalid for lists of lists ("the server rejected our request due to an error in our
// request", as kube answers).
apimachinery::ApiResult<boost::json::value> apply_strategic_merge_patch(
    const boost::json::value& original, const boost::json::value& patch, const PatchSchema& schema);

}  // namespace kwatch::schema
