// Schemas of the built-in Kubernetes kinds kwatch serves, from the compact form in
// schema/schemas/builtin.json (written by scripts/gen_builtin_schemas.py from the
// python3-kubernetes models plus schema/schemas/overlay.json, compiled into the library).
//
// The compact form:
//   {"kinds": [{"group": "", "version": "v1", "kind": "Pod", "definition": "io.k8s.api.core.v1.Pod"}, ...],
//    "definitions": {"<OpenAPI definition name>": {"required": [...], "fields": {"<json name>": <field>}}}}
// A field is a type string or an object with "type" and optional "list" (atomic|set|map), "keys"
// (list-map keys), "map" (atomic|granular), "patch" (merge|replace|retainKeys|merge,retainKeys),
// "mergeKey", "enum", "minimum", "maximum", "default", "format". Type strings: string, boolean,
// integer, int32, int64, number, date-time, byte, int-or-string, quantity, any, "[]T", "map[T]",
// or a definition name (anything with a dot).
//
// Defaults in the data are only those kube's Go defaulting applies as well (the protocol of
// container and service ports, TCP, a list-map key).
//
// From the data, per kind: a structural schema (every definition inlined) for
// StructuralSchema::compile, the OpenAPI v3 component schemas kube-apiserver serves under
// /openapi/v3/<group-version>, and the strategic-merge-patch schema.
//
// Ownership and threads: immutable after load(); every const member is safe to call from any
// number of threads at once. builtin() is a process-wide constant built on first use.
#pragma once

#include "apimachinery/api_error.hpp"
#include "schema/strategic_merge_patch.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::schema {

class KindSchemas {
 public:
  // The form compiled into kwatch (schema/schemas/builtin.json).
  static const KindSchemas& builtin();

  // Parses a compact form. base::Errc::invalid with a message naming the definition and field on an
  // unknown type string, a dangling reference, or a malformed attribute.
  static apimachinery::ApiResult<std::shared_ptr<const KindSchemas>> load(
      std::string_view compact_json);

  ~KindSchemas();
  KindSchemas(const KindSchemas&) = delete;
  KindSchemas& operator=(const KindSchemas&) = delete;

  // The definition name of a kind ("" or "core" for the core group), or nullptr.
  const std::string* definition(std::string_view group, std::string_view version,
                                std::string_view kind) const;

  // Every kind of the form, in its order, as {group, version, kind}.
  struct Kind {
    std::string group;
    std::string version;
    std::string kind;
    std::string definition;
  };
  const std::vector<Kind>& kinds() const;

  // A structural schema (plain OpenAPI v3 that StructuralSchema::compile accepts with
  // allow_unique_items) of the whole kind: every definition inlined, "metadata" as
  // {"type":"object"} (ObjectMeta is checked elsewhere), apiVersion/kind as strings, list and
  // map types, enums, minimum/maximum and defaults kept; quantity and any as
  // x-kubernetes-preserve-unknown-fields, int-or-string as x-kubernetes-int-or-string, byte and
  // date-time as strings of that format; no descriptions. A definition reached again on its own
  // path becomes an object preserving unknown fields. nullopt for unknown kinds.
  std::optional<boost::json::value> structural_schema(std::string_view group,
                                                      std::string_view version,
                                                      std::string_view kind) const;

  // OpenAPI v3 component schemas as kube-apiserver serves them under /openapi/v3/<gv>
  // components.schemas: every definition reachable from the kinds of group/version, keyed by
  // definition name; object fields refer to definitions as {"allOf":[{"$ref":"#/components/schemas/<name>"}]}
  // (plain {"$ref"} inside items/additionalProperties); each kind's definition carries
  // "x-kubernetes-group-version-kind"; x-kubernetes-list-type/-list-map-keys/-map-type/
  // -patch-strategy/-patch-merge-key as kube writes them; every component has a "type".
  // Empty for a group/version without kinds.
  boost::json::object openapi_components(std::string_view group, std::string_view version) const;

  // The strategic-merge-patch schema of a kind from the fields' "patch"/"mergeKey" (paths like
  // "spec.containers", "spec.containers[].ports"); every kind, known or not, also gets
  // metadata.ownerReferences (merge key uid) and metadata.finalizers (merge), as
  // builtin_patch_schema does.
  PatchSchema patch_schema(std::string_view group, std::string_view version,
                           std::string_view kind) const;

  struct Data;

 private:
  explicit KindSchemas(std::unique_ptr<Data> data);
  std::unique_ptr<Data> data_;
};

// kube's description (its doc comment) of `definition`'s field `field`, or of the type itself
// for "" (schema/schemas/descriptions.json: the built-in definitions, each kind's list type,
// meta/v1 Patch, and the request options ListOptions, GetOptions, CreateOptions, UpdateOptions,
// PatchOptions, DeleteOptions whose fields are the operations' query parameters); empty when
// there is none.
std::string_view builtin_description(std::string_view definition, std::string_view field = "");

}  // namespace kwatch::schema
