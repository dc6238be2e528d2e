// CustomResourceDefinitions (apiextensions.k8s.io/v1): kube-apiserver's defaulting and
// validation of a CRD, the resources it serves, and the status its controllers write, following
// k8s.io/apiextensions-apiserver (pkg/apis/apiextensions/v1/defaults.go,
// pkg/apis/apiextensions/validation/validation.go, pkg/registry/customresourcedefinition,
// pkg/controller/{status,establish,finalizer}; Kubernetes 1.30-1.34). Causes carry kube's
// reasons, field paths and texts.
//
// Lifecycle of a CRD write, as kube-apiserver's CRD strategy and controllers run it:
//   default_custom_resource_definition(crd);
//   auto causes = validate_custom_resource_definition(crd, old);  // 422 Invalid unless empty
//   if (auto conflict = names_conflict(crd, scheme)) { ...NamesAccepted=False... }
//   crd = accepted_status(std::move(crd), now);   // NamesAccepted, Established, storedVersions
//   for (auto& info : custom_resources(crd, prefix).value()) scheme.add(std::move(info));
//
// Deliberate differences from kube:
// - kube converts a v1 CRD to its internal type before validating it, and that conversion moves
//   per-version schemas, subresources and printer columns that are identical in every version to
//   top-level fields, so kube reports their causes under spec.validation.openAPIV3Schema,
//   spec.subresources and spec.additionalPrinterColumns. kwatch always reports the version's
//   own path (spec.versions[i].schema.openAPIV3Schema, ...), where the client wrote the value.
// - Where kube prints a compound bad value (the versions list, a schema) as the JSON of its
//   internal Go struct, kwatch prints the JSON the client sent.
// - A schema's patterns are compiled by RE2, which expands Unicode classes (\pL) into UTF-8
//   byte ranges where Go keeps one instruction: a definition's distinct patterns may hold at most
//   PatternCache::kDefaultBudget RE2 instructions (each at most PatternCache::kMaxMemPerPattern
//   of program), past which the pattern is a Forbidden cause at its `pattern` field (kube accepts
//   `^\pL{100}$` on 200 properties; kwatch accepts it too, compiled once, but not 5 distinct ones).
//   Only writes are held to it: the CRD controller serves stored definitions with
//   PatternCache::for_stored(), so one accepted before the budget existed stays served.
// - spec.preserveUnknownFields must
//   be false; x-kubernetes-validations (CEL) rules are accepted unchecked (see
//   structural_schema.hpp); the KubernetesAPIApprovalPolicyConformant and NonStructuralSchema
//   conditions are not written.
//
// Pure functions on boost::json values: no I/O, no shared state; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"
#include "kinds/scheme.hpp"
#include "kinds/version_converter.hpp"
#include "schema/structural_schema.hpp"

#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::kinds {

// SetDefaults_CustomResourceDefinition: spec.names.singular = lowercase kind and
// spec.names.listKind = kind + "List" when empty, spec.conversion = {strategy: None} when absent,
// a conversion webhook service's port 443, and status.storedVersions = [the storage version]
// when empty.
void default_custom_resource_definition(boost::json::object& crd);

// kube's PrepareForCreate: whatever status the request carries is dropped for Go's zero status
// (`acceptedNames: {plural: "", kind: ""}`; the controllers write the accepted names and
// conditions); storedVersions starts as the storage version.
void reset_custom_resource_definition_status(boost::json::object& crd);

// ValidateCustomResourceDefinition (old == nullptr: a create) or
// ValidateCustomResourceDefinitionUpdate (old: the stored CRD), on a defaulted CRD: metadata.name,
// group, scope, names, versions (unique DNS-1035 names, exactly one storage version, a schema
// each, compiled by StructuralSchema::compile under spec.versions[i].schema.openAPIV3Schema,
// the status subresource's root-schema rule, deprecation warnings), subresources.scale paths,
// additionalPrinterColumns, selectableFields (checked against the version's schema), conversion,
// preserveUnknownFields, the api-approved.kubernetes.io annotation of *.k8s.io and
// *.kubernetes.io groups, and status.storedVersions as the strategy fills it (on create from the
// storage version, on update from the old CRD's status plus the storage version). On updates:
// spec.group and spec.names.plural are immutable, and spec.scope and spec.names.kind too once
// `old` is Established. Empty when valid.
std::vector<apimachinery::Cause> validate_custom_resource_definition(const boost::json::object& crd,
                                                       const boost::json::object* old);

// The resources a CRD serves: one ResourceInfo per version with served: true (in spec order),
// origin custom, keys under `storage_prefix` + "/<group>/<plural>/" as kube-apiserver stores
// custom resources (ResourceInfo::key_resource), strategic merge patch off, the version's
// compiled schema, subresources, printer columns and selectable fields ("spec.color"), and
// storage_version = the storage version's name. Defaults a copy of `crd` first; base::Errc::invalid
// with the causes of validate_custom_resource_definition(crd, nullptr) when it does not validate.
// The versions' patterns are compiled through `patterns` (null: a cache of its own), so a caller
// that offers it the cache of the definition's previous spec shares the unchanged ones.
// `stored`: the definition is already stored (served after a restart or an update): its CEL
// rules do not refuse it (one that does not compile fails at its objects' writes).
apimachinery::ApiResult<std::vector<ResourceInfo>> custom_resources(
    const boost::json::object& crd, const std::string& storage_prefix,
    std::shared_ptr<schema::PatternCache> patterns = nullptr, bool stored = false);

// spec.conversion.webhook of a (defaulted) definition whose strategy is Webhook; null otherwise.
std::shared_ptr<const ConversionWebhook> conversion_webhook_of(const boost::json::object& crd);

// Where a definition's objects are stored, read from its spec alone, without validating or
// compiling anything: a ResourceInfo of the storage version (group, plural, kind, scope, origin
// custom, keys under `storage_prefix` + "/<group>/<plural>/", owner = the CRD's name), enough to
// list and delete the objects of a definition being deleted whose resources are not served (its
// stored spec no longer validates, or its names clash). nullopt without a group or a plural.
std::optional<ResourceInfo> custom_resource_storage(const boost::json::object& crd,
                                                    const std::string& storage_prefix);

// Whether the CRD's status has the condition `type` ("Established") with status "True".
bool has_true_condition(const boost::json::object& crd, std::string_view type);

// The naming controller's check: whether a name of the CRD (plural, singular, a short name, kind,
// listKind) is already taken by another resource of the same group in `scheme` (built-in or
// custom; the CRD's own resources are ignored, and a name equal to the CRD's
// status.acceptedNames is kept). nullopt when every name is free, else the NamesAccepted=False
// condition's reason and message as kube writes them: {"KindConflict", "\"Ingress\" is already
// in use"}; when several names clash, the last one checked wins (plural, singular, shortNames,
// kind, listKind), as in kube.
std::optional<std::pair<std::string, std::string>> names_conflict(const boost::json::object& crd,
                                                                  const Scheme& scheme);

// The status kube's naming and establishing controllers leave on an accepted CRD:
// status.acceptedNames = spec.names, conditions NamesAccepted=True ("NoConflicts", "no conflicts
// found") and Established=True ("InitialNamesAccepted", "the initial names have been accepted"),
// and status.storedVersions holding the storage version. A condition whose status does not
// change keeps its lastTransitionTime; others get `now_rfc3339` ("2026-01-02T03:04:05Z").
boost::json::object accepted_status(boost::json::object crd, std::string_view now_rfc3339);

// The status of a CRD whose names clash (names_conflict's reason and message):
// NamesAccepted=False, and Established=False ("NotAccepted", "not all names are accepted") unless
// the CRD is already established. status.acceptedNames is left as it is.
boost::json::object rejected_names_status(boost::json::object crd, std::string_view reason,
                                          std::string_view message,
                                          std::string_view now_rfc3339);

// The finalizer's condition while the CRD's objects are deleted: Terminating=True,
// "InstanceDeletionInProgress", "CustomResource deletion is in progress".
void set_terminating(boost::json::object& crd, std::string_view now_rfc3339);

}  // namespace kwatch::kinds
