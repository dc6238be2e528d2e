// The rules ResourceStore applies to objects, shared by its files (resource_store*.cpp): errors
// worded as kube-apiserver words them, metadata, the stored and served forms, decoding with
// defaults, validation, and what survives an update. Internal to registry/; pure functions.
#pragma once

#include "apimachinery/continue_token.hpp"
#include "apimachinery/field_selector.hpp"
#include "apimachinery/json_patch.hpp"
#include "apimachinery/json_path.hpp"
#include "apimachinery/label_selector.hpp"
#include "apimachinery/merge_patch.hpp"
#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/validation.hpp"
#include "base/timestamps.hpp"
#include "base/uuid.hpp"
#include "kinds/scheme.hpp"
#include "registry/resource_store.hpp"
#include "schema/field_type.hpp"
#include "schema/managed_fields.hpp"
#include "schema/protobuf_decoder.hpp"
#include "schema/strategic_merge_patch.hpp"
#include "schema/structural_schema.hpp"
#include "storage/storage.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::registry::detail {

// The names the store's files use, declared once for all of them.
using kinds::GenerationRule;
using kinds::KindOrigin;
using kinds::NameRule;
using kinds::ResourceInfo;
using kinds::ScaleSelector;
using kinds::ScaleSubresource;
using kinds::Scheme;
using schema::apply_configuration;
using schema::apply_strategic_merge_patch;
using schema::builtin_patch_schema;
using schema::field_step;
using schema::FieldManagerScope;
using schema::FieldTypes;
using schema::omit_empty_fields;
using schema::PatchSchema;
using schema::track_update;
using schema::unknown_field_message;
using schema::write_zero_fields;
using apimachinery::ApiError;
using apimachinery::api_error;
using apimachinery::encode_continue;
using apimachinery::invalid_error;
using apimachinery::set_condition;
using apimachinery::set_field;
using apimachinery::ApiResult;
using apimachinery::Cause;
using apimachinery::ContinueToken;
using base::Errc;
using apimachinery::FieldSelector;
using apimachinery::LabelSelector;
using apimachinery::apply_json_patch;
using apimachinery::apply_merge_patch;
using apimachinery::dns1123_label_errors;
using apimachinery::dns1123_subdomain_errors;
using apimachinery::equal_but_metadata_member;
using apimachinery::find_field;
using apimachinery::label_selector_from_json;
using apimachinery::label_selector_from_map;
using apimachinery::label_value_errors;
using apimachinery::object_member;
using apimachinery::path_segment_errors;
using apimachinery::qualified_name_errors;
using apimachinery::string_member;
using storage::KeyValue;
namespace json = boost::json;

std::string qualified_resource(const ResourceInfo& info);

ApiError detailed(const ResourceInfo& info, Errc code, std::string name, std::string message);

ApiError not_found(const ResourceInfo& info, const std::string& name);

ApiError already_exists(const ResourceInfo& info, const std::string& name);

ApiError conflict(const ResourceInfo& info, const std::string& name, const std::string& why);

inline constexpr const char* kModified =
    "the object has been modified; please apply your changes to the latest version and try again";

ApiError invalid(const ResourceInfo& info, const std::string& name, std::vector<Cause> causes);

ApiError bad_request(std::string message);

ApiError from_storage(const ResourceInfo& info, const std::string& name,
                      boost::system::error_code ec);

json::object* metadata_of(json::object& obj);

const json::object* metadata_of(const json::object& obj);

std::string string_field(const json::object* obj, std::string_view field);

std::string random_suffix(std::size_t n);

// The stored form of an object about to be written, or why it must not be: nothing is committed
// that the server could not read back (apimachinery/stored_json.hpp) or that exceeds the size
// limit. A custom resource served by several versions is stored as its storage version and served as
// the version asked for (conversion strategy None: only apiVersion changes).
bool converts(const ResourceInfo& info);

ApiResult<json::object> served_form(const ResourceInfo& info, ApiResult<json::object> obj);

// A version converted by the definition's webhook (ResourceInfo::converted_by_webhook): then
// served_form leaves its objects in the storage version, and the awaitable forms below convert
// them (kinds/version_converter.hpp).
// served_form, then, for a webhook-converted version, the webhook's conversion.
boost::asio::awaitable<ApiResult<json::object>> converted_served_form(const ResourceInfo& info,
                                                                      ApiResult<json::object> obj);
// The webhook's conversion alone, of an object served_form already made.
boost::asio::awaitable<ApiResult<json::object>> webhook_served(const ResourceInfo& info,
                                                               ApiResult<json::object> obj);

// `objects` (storage version) as `info`'s version through its webhook, as one list conversion.
boost::asio::awaitable<ApiResult<std::vector<json::object>>> convert_listed(
    const ResourceInfo& info, std::vector<json::object> objects);

// Whether the stored form of an object is other than the object with its resourceVersion erased.
bool stored_differently(const ResourceInfo& info);

ApiResult<std::string> serialize_checked(const ResourceInfo& info, const std::string& name,
                                         const json::value& value);

// `obj` loses its metadata.resourceVersion (the write gives it the new one); a kind stored in
// another form than it is served in is converted on a copy.
ApiResult<std::string> storable(const ResourceInfo& info, const std::string& name,
                                json::object& obj);
// storable, converting through the definition's webhook when `info` calls one.
boost::asio::awaitable<ApiResult<std::string>> converted_storable(const ResourceInfo& info,
                                                                  const std::string& name,
                                                                  json::object& obj);

// What a dry run's update function returns to end guaranteed_update before it writes.
inline const boost::system::error_code kDryRunDone =
    boost::system::errc::make_error_code(boost::system::errc::operation_canceled);

// What kube-apiserver calls a corrupt object: stored, but it cannot be decoded.
ApiError unreadable(const storage::KeyValue& kv, const std::string& problem);

// Checks what every object must satisfy before it is written.
std::vector<Cause> validate_object(const ResourceInfo& info, const json::object& obj,
                                   const json::object* old);

// The members of ObjectMeta; any other key under metadata is an unknown field.
bool known_metadata_field(std::string_view key);

std::string go_quoted(std::string_view text);

// What kube-apiserver's decoder and defaulter do to a written object, before validation: fields
// the kind does not know are dropped (and refused or warned about, as fieldValidation asks),
// then the schema's defaults and the kind's defaulting apply. A built-in kind's value of the
// wrong type is a decoding error (400), as when Go decodes it into its struct.
std::optional<ApiError> decode_and_default(const ResourceInfo& info, json::object& obj,
                                           const WriteQuery& query, bool create);

// Why a written object must not be stored: every rule it breaks (the schema's, then names and
// labels, then the kind's own) as one 422 Invalid; or, for a built-in kind holding a value of the
// wrong type, the 400 decoding error Go would have given (for the first such field). A valid
// built-in object gets the zero scalars Go's JSON writes (write_zero_fields).
// On an update, `old` is the object replaced (oldSelf of CRD rules); the complaints of CRD rules
// about values the update left unchanged go to `warnings` (may be null); `subresource` is the
// path the update was written through (KindHooks::validate_update_path).
std::optional<ApiError> check_written(const ResourceInfo& info, const std::string& name,
                                      json::object& obj, const json::object* old,
                                      std::vector<std::string>* warnings = nullptr,
                                      std::string_view subresource = {});

// What mutating admission changed is made an object again (kube's BeforeCreate/BeforeUpdate
// after its admission chain): its kind and the metadata the server manages (uid,
// creationTimestamp, generation, resourceVersion, deletion fields) are put back as they were in
// `before` (the object before admission), a cluster-scoped object loses a namespace, a name an
// update changed is refused (422, immutable), a namespace changed is refused (400, as a body's
// namespace that differs from the URL's), and what a plugin added that the kind does not know is
// pruned and defaults apply (decode_and_default, quietly).
std::optional<ApiError> settle_admitted(const ResourceInfo& info, const json::object& before,
                                        json::object& after, const WriteQuery& query, bool create);

// Rejects a body whose apiVersion/kind disagree with the endpoint, and fills them when absent.
ApiResult<void> check_type(const ResourceInfo& info, json::object& obj);

ApiResult<json::object*> ensure_metadata(json::object& obj);

// Whether `key` holds the same in both; `builtin`: as Go's decoded objects compare, a null
// member being one left out.
bool same_member(const json::object& a, const json::object& b, std::string_view key,
                 bool builtin = false);

// Whether an update changes what the kind's `metadata.generation` counts (GenerationRule).
bool desired_state_changed(const ResourceInfo& info, const json::object& old_obj,
                           const json::object& new_obj);

// Finalizers an update adds to an object that is being deleted: kube forbids new ones.
std::vector<Cause> added_finalizers(const json::object& obj, const json::object& old);

// The cluster IP and node ports `planned` got, into `next` where it has none (an update that
// omits them keeps them).
void carry_service_allocations(json::object& next, const json::object& planned);

// An allocator's 422 causes as the Service's Invalid Status.
ApiError with_context(const ResourceInfo& info, const std::string& name, ApiError e);

// The Status a delete answers with when it has no object to return.
json::object success_status(const ResourceInfo& info, const std::string& name,
                            const std::string& uid);

std::string list_start_key(const ResourceInfo& info, const std::string& ns,
                           const ContinueToken& token);

// Where a write's field ownership is recorded: the kind's types, version and subresource; the
// main resource does not write the status of a kind that has a status subresource, /status
// does not write the spec.
FieldManagerScope manager_scope(const ResourceInfo& info, const WriteQuery& query);

}  // namespace kwatch::registry::detail
