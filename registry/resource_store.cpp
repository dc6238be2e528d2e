#include "registry/resource_store.hpp"

#include "registry/service_allocator.hpp"

#include "apimachinery/continue_token.hpp"
#include "schema/field_type.hpp"
#include "apimachinery/field_selector.hpp"
#include "apimachinery/json_patch.hpp"
#include "apimachinery/json_path.hpp"
#include "apimachinery/label_selector.hpp"
#include "schema/managed_fields.hpp"
#include "apimachinery/merge_patch.hpp"
#include "schema/protobuf_decoder.hpp"
#include "schema/strategic_merge_patch.hpp"
#include "schema/structural_schema.hpp"
#include "base/timestamps.hpp"
#include "apimachinery/validation.hpp"
#include "storage/storage.hpp"
#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/uuid.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <chrono>
#include <ctime>
#include <random>

namespace kwatch::registry {

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

namespace asio = boost::asio;
namespace json = boost::json;
using storage::KeyValue;

namespace {

// ---- Status-shaped errors, worded as kube-apiserver words them. ----

std::string qualified_resource(const ResourceInfo& info) {
  return info.group.empty() ? info.resource : info.resource + "." + info.group;
}

ApiError detailed(const ResourceInfo& info, Errc code, std::string name, std::string message) {
  ApiError e{code, std::move(message), {}};
  e.name = std::move(name);
  e.group = info.group;
  e.kind = info.resource;
  return e;
}

ApiError not_found(const ResourceInfo& info, const std::string& name) {
  return not_found_error(info, name);
}

ApiError already_exists(const ResourceInfo& info, const std::string& name) {
  return detailed(info, Errc::already_exists, name,
                  qualified_resource(info) + " \"" + name + "\" already exists");
}

ApiError conflict(const ResourceInfo& info, const std::string& name, const std::string& why) {
  return detailed(info, Errc::conflict, name,
                  "Operation cannot be fulfilled on " + qualified_resource(info) + " \"" + name +
                      "\": " + why);
}

constexpr const char* kModified =
    "the object has been modified; please apply your changes to the latest version and try again";

ApiError invalid(const ResourceInfo& info, const std::string& name, std::vector<Cause> causes) {
  // Named by its group and kind, as kube names it: `Deployment.apps "web" is invalid: ...`.
  return invalid_error(info.group, info.kind, name, std::move(causes));
}

ApiError bad_request(std::string message) { return api_error(Errc::bad_request, std::move(message)); }

ApiError from_storage(const ResourceInfo& info, const std::string& name,
                      boost::system::error_code ec) {
  if (ec == Errc::not_found) return not_found(info, name);
  if (ec == Errc::already_exists) return already_exists(info, name);
  if (ec == Errc::conflict) return conflict(info, name, kModified);
  if (ec == Errc::gone) return api_error(Errc::gone, "The resourceVersion for the provided "
                                                     "list is too old.");
  if (ec == Errc::unavailable) return api_error(Errc::unavailable, "storage is unavailable");
  if (ec == Errc::timeout) return api_error(Errc::timeout, "storage request timed out");
  if (ec == Errc::too_large) {
    return api_error(Errc::too_large, "Request entity too large: the object is larger than "
                                      "storage accepts (etcd's --max-request-bytes, 1.5 MiB "
                                      "unless configured otherwise)");
  }
  if (ec.category() == base::errc_category()) {
    return api_error(static_cast<Errc>(ec.value()), ec.message());
  }
  return api_error(Errc::internal, ec.message());
}

// ---- Object metadata. ----

json::object* metadata_of(json::object& obj) { return object_member(obj, "metadata"); }

const json::object* metadata_of(const json::object& obj) { return object_member(obj, "metadata"); }

std::string string_field(const json::object* obj, std::string_view field) {
  if (obj == nullptr) return {};
  auto it = obj->find(field);
  if (it == obj->end() || !it->value().is_string()) return {};
  return std::string(it->value().get_string());
}

std::string random_suffix(std::size_t n) {
  // The alphabet of Kubernetes' generateName: no vowels, no confusable digits.
  static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(kAlphabet[rng() % kAlphabet.size()]);
  return out;
}



ApiError invalid(const ResourceInfo& info, const std::string& name, std::vector<Cause> causes);

// The stored form of an object about to be written, or why it must not be: nothing is committed
// that the server could not read back (apimachinery/stored_json.hpp) or that exceeds the size
// limit. A custom resource served by several versions is stored as its storage version and served as
// the version asked for (conversion strategy None: only apiVersion changes).
bool converts(const ResourceInfo& info) {
  return info.origin == KindOrigin::custom && !info.storage_version.empty() &&
         info.storage_version != info.version;
}

ApiResult<json::object> served_form(const ResourceInfo& info, ApiResult<json::object> obj) {
  if (obj && info.hooks.to_served) info.hooks.to_served(*obj);
  if (obj && converts(info)) (*obj)["apiVersion"] = info.api_version();
  return obj;
}

// Whether the stored form of an object is other than the object with its resourceVersion erased.
bool stored_differently(const ResourceInfo& info) {
  return converts(info) || static_cast<bool>(info.hooks.to_stored);
}

ApiResult<std::string> serialize_checked(const ResourceInfo& info, const std::string& name,
                                         const json::value& value) {
  if (auto problem = apimachinery::json_problem(value)) {
    return invalid(info, name, {{"FieldValueInvalid", "Invalid value: " + problem->what,
                                 problem->path}});
  }
  std::string text = json::serialize(value);
  if (text.size() > apimachinery::kMaxObjectBytes) {
    return api_error(Errc::too_large, "Request entity too large: the object is " +
                                          std::to_string(text.size()) + " bytes, the limit is " +
                                          std::to_string(apimachinery::kMaxObjectBytes));
  }
  return text;
}

// `obj` loses its metadata.resourceVersion (the write gives it the new one); a kind stored in
// another form than it is served in is converted on a copy.
ApiResult<std::string> storable(const ResourceInfo& info, const std::string& name,
                                json::object& obj) {
  if (auto* meta = metadata_of(obj)) meta->erase("resourceVersion");
  if (stored_differently(info)) {
    json::object stored(obj, obj.storage());
    if (converts(info)) stored["apiVersion"] = info.group + "/" + info.storage_version;
    if (info.hooks.to_stored) info.hooks.to_stored(stored);
    return serialize_checked(info, name, json::value(std::move(stored)));
  }
  json::value value(std::move(obj));
  auto text = serialize_checked(info, name, value);
  obj = std::move(value.get_object());
  return text;
}


// What a dry run's update function returns to end guaranteed_update before it writes.
const boost::system::error_code kDryRunDone =
    boost::system::errc::make_error_code(boost::system::errc::operation_canceled);

// What kube-apiserver calls a corrupt object: stored, but it cannot be decoded.
ApiError unreadable(const storage::KeyValue& kv, const std::string& problem) {
  return api_error(Errc::internal,
                   "Internal error occurred: the object stored at " +
                       apimachinery::to_valid_utf8(kv.key) + " cannot be decoded (" + problem +
                       "); only deleting it with the option "
                       "ignoreStoreReadErrorWithClusterBreakingPotential=true is possible");
}

// Checks what every object must satisfy before it is written.
std::vector<Cause> validate_object(const ResourceInfo& info, const json::object& obj,
                                   const json::object* old) {
  std::vector<Cause> causes;
  const json::object* meta = metadata_of(obj);
  const std::string name = string_field(meta, "name");
  auto invalid_value = [&](std::string field, std::string_view value, const std::string& msg) {
    causes.push_back({"FieldValueInvalid",
                      "Invalid value: \"" + std::string(value) + "\": " + msg, std::move(field)});
  };
  if (name.empty()) {
    causes.push_back({"FieldValueRequired", "Required value: name or generateName is required",
                      "metadata.name"});
  } else {
    std::vector<std::string> errors;
    switch (info.name_rule) {
      case NameRule::dns_label: errors = dns1123_label_errors(name); break;
      case NameRule::dns_subdomain: errors = dns1123_subdomain_errors(name); break;
      case NameRule::path_segment: errors = path_segment_errors(name); break;
    }
    for (const auto& e : errors) invalid_value("metadata.name", name, e);
  }
  if (meta != nullptr) {
    if (auto it = meta->find("labels"); it != meta->end() && !it->value().is_null()) {
      if (!it->value().is_object()) {
        causes.push_back({"FieldValueTypeInvalid", "Invalid value: must be an object",
                          "metadata.labels"});
      } else {
        for (const auto& [k, v] : it->value().get_object()) {
          for (const auto& e : qualified_name_errors(k)) {
            invalid_value("metadata.labels", k, e);
          }
          if (!v.is_string()) {
            causes.push_back({"FieldValueTypeInvalid", "Invalid value: label values must be strings",
                              "metadata.labels"});
            continue;
          }
          for (const auto& e : label_value_errors(v.get_string())) {
            invalid_value("metadata.labels", v.get_string(), e);
          }
        }
      }
    }
    if (auto it = meta->find("annotations"); it != meta->end() && !it->value().is_null()) {
      if (!it->value().is_object()) {
        causes.push_back({"FieldValueTypeInvalid", "Invalid value: must be an object",
                          "metadata.annotations"});
      } else {
        // kube's TotalAnnotationSizeLimitB: keys and values together.
        constexpr std::size_t kMaxAnnotationBytes = 256 * 1024;
        std::size_t total = 0;
        for (const auto& [k, v] : it->value().get_object()) {
          for (const auto& e : qualified_name_errors(k)) {
            invalid_value("metadata.annotations", k, e);
          }
          total += k.size();
          if (!v.is_string()) {
            causes.push_back({"FieldValueTypeInvalid",
                              "Invalid value: annotation values must be strings",
                              "metadata.annotations"});
          } else {
            total += v.get_string().size();
          }
        }
        if (total > kMaxAnnotationBytes) {
          causes.push_back({"FieldValueTooLong",
                            "Too long: must have at most " + std::to_string(kMaxAnnotationBytes) +
                                " bytes",
                            "metadata.annotations"});
        }
      }
    }
  }
  if (info.hooks.validate) info.hooks.validate(obj, old, causes);
  return causes;
}

// The members of ObjectMeta; any other key under metadata is an unknown field.
bool known_metadata_field(std::string_view key) {
  static constexpr std::string_view kFields[] = {
      "name",     "generateName",      "namespace",  "selfLink",
      "uid",      "resourceVersion",   "generation", "creationTimestamp",
      "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
      "ownerReferences",   "finalizers", "managedFields"};
  for (auto f : kFields) {
    if (f == key) return true;
  }
  return false;
}

std::string go_quoted(std::string_view text) { return json::serialize(json::string(text)); }

// What kube-apiserver's decoder and defaulter do to a written object, before validation: fields
// the kind does not know are dropped (and refused or warned about, as fieldValidation asks),
// then the schema's defaults and the kind's defaulting apply. A built-in kind's value of the
// wrong type is a decoding error (400), as when Go decodes it into its struct.
std::optional<ApiError> decode_and_default(const ResourceInfo& info, json::object& obj,
                                           const WriteQuery& query, bool create) {
  std::vector<std::string> problems;
  for (const auto& path : query.duplicate_fields) {
    problems.push_back("duplicate field " + go_quoted(path));
  }
  if (auto* meta = metadata_of(obj)) {
    std::vector<std::string> unknown;
    for (const auto& [key, value] : *meta) {
      if (!known_metadata_field(key)) unknown.emplace_back(key);
    }
    for (const auto& key : unknown) {
      meta->erase(key);
      problems.push_back(unknown_field_message("metadata." + key));
    }
    // ObjectMeta's maps and lists are omitempty: kube's objects never hold them empty (a patch
    // that removes the last label leaves no `labels: {}`).
    for (const char* key : {"labels", "annotations", "ownerReferences", "finalizers"}) {
      const json::value* v = meta->if_contains(key);
      if (v != nullptr && (v->is_null() || (v->is_object() && v->get_object().empty()) ||
                           (v->is_array() && v->get_array().empty()))) {
        meta->erase(key);
      }
    }
  }
  if (info.origin == KindOrigin::builtin) {
    // What Go's JSON would leave out once the body is in the kind's struct.
    omit_empty_fields(info.group.empty() ? info.version : info.group + "/" + info.version,
                      info.kind, obj);
  }
  json::value value(std::move(obj));
  if (info.schema) {
    for (const auto& path : info.schema->prune(value)) {
      problems.push_back(unknown_field_message(path));
    }
  }
  if (!problems.empty()) {
    if (query.field_validation == FieldValidation::strict) {
      std::string message = info.kind + " in version \"" + info.version +
                            "\" cannot be handled as a " + info.kind + ": strict decoding error: ";
      for (std::size_t i = 0; i < problems.size(); ++i) {
        if (i > 0) message += ", ";
        message += problems[i];
      }
      obj = std::move(value.get_object());
      return api_error(Errc::bad_request, std::move(message));
    }
    if (query.field_validation == FieldValidation::warn && query.warnings) {
      for (auto& p : problems) query.warnings->push_back(std::move(p));
    }
  }
  if (info.schema) info.schema->apply_defaults(value);
  obj = std::move(value.get_object());
  if (info.hooks.set_defaults) info.hooks.set_defaults(obj);
  if (create && info.hooks.prepare_for_create) info.hooks.prepare_for_create(obj);
  return std::nullopt;
}

// Why a written object must not be stored: every rule it breaks (the schema's, then names and
// labels, then the kind's own) as one 422 Invalid; or, for a built-in kind holding a value of the
// wrong type, the 400 decoding error Go would have given (for the first such field).
std::optional<ApiError> check_written(const ResourceInfo& info, const std::string& name,
                                      json::object& obj, const json::object* old) {
  std::vector<Cause> causes;
  if (info.schema) {
    json::value value(std::move(obj));
    causes = info.schema->validate(value);
    obj = std::move(value.get_object());
  }
  if (info.origin == KindOrigin::builtin) {
    for (const auto& cause : causes) {
      if (cause.type != "FieldValueTypeInvalid") continue;
      std::string detail = cause.message;
      // "Invalid value: <v>: <field> in body must be of type <t>: <v>": what follows the value.
      if (auto pos = detail.find(": " + cause.field); pos != std::string::npos) {
        detail = detail.substr(pos + 2);
      }
      return api_error(Errc::bad_request, info.kind + " in version \"" + info.version +
                                              "\" cannot be handled as a " + info.kind + ": " +
                                              detail);
    }
  }
  for (auto& c : validate_object(info, obj, old)) causes.push_back(std::move(c));
  if (causes.empty()) return std::nullopt;
  return invalid(info, name, std::move(causes));
}

// Rejects a body whose apiVersion/kind disagree with the endpoint, and fills them when absent.
ApiResult<void> check_type(const ResourceInfo& info, json::object& obj) {
  const std::string api_version = string_field(&obj, "apiVersion");
  const std::string kind = string_field(&obj, "kind");
  if (!api_version.empty() && api_version != info.api_version()) {
    return bad_request("the API version in the data (" + api_version +
                       ") does not match the expected API version (" + info.api_version() + ")");
  }
  if (!kind.empty() && kind != info.kind) {
    return bad_request("the kind in the data (" + kind + ") does not match the expected kind (" +
                       info.kind + ")");
  }
  obj["apiVersion"] = info.api_version();
  obj["kind"] = info.kind;
  return {};
}

ApiResult<json::object*> ensure_metadata(json::object& obj) {
  auto it = obj.find("metadata");
  if (it == obj.end() || it->value().is_null()) {
    obj["metadata"] = json::object();
    it = obj.find("metadata");
  }
  if (!it->value().is_object()) return bad_request("metadata must be an object");
  return &it->value().get_object();
}

bool same_member(const json::object& a, const json::object& b, std::string_view key) {
  const json::value* x = a.if_contains(key);
  const json::value* y = b.if_contains(key);
  return x == nullptr ? y == nullptr : y != nullptr && *x == *y;
}

// Whether an update changes what the kind's `metadata.generation` counts (GenerationRule).
bool desired_state_changed(const ResourceInfo& info, const json::object& old_obj,
                           const json::object& new_obj) {
  switch (info.generation) {
    case GenerationRule::none:
      return false;
    case GenerationRule::spec:
    case GenerationRule::spec_on_update:
      return !same_member(old_obj, new_obj, "spec");
    case GenerationRule::content_and_labels: {
      const json::object* old_meta = metadata_of(old_obj);
      const json::object* new_meta = metadata_of(new_obj);
      static const json::object none;
      if (!same_member(old_meta ? *old_meta : none, new_meta ? *new_meta : none, "labels")) {
        return true;
      }
      break;
    }
    case GenerationRule::content:
      break;
  }
  auto counted = [&](std::string_view key) {
    return key != "metadata" && !(info.has_status && key == "status");
  };
  std::size_t old_count = 0;
  for (const auto& [key, value] : old_obj) {
    if (!counted(key)) continue;
    ++old_count;
    const json::value* now = new_obj.if_contains(key);
    if (now == nullptr || *now != value) return true;
  }
  std::size_t new_count = 0;
  for (const auto& [key, value] : new_obj) new_count += counted(key) ? 1 : 0;
  return new_count != old_count;
}

// Finalizers an update adds to an object that is being deleted: kube forbids new ones.
std::vector<Cause> added_finalizers(const json::object& obj, const json::object& old) {
  const json::object* old_meta = metadata_of(old);
  if (old_meta == nullptr || !old_meta->contains("deletionTimestamp")) return {};
  const json::value* before = old_meta->if_contains("finalizers");
  const json::object* meta = metadata_of(obj);
  const json::value* after = meta != nullptr ? meta->if_contains("finalizers") : nullptr;
  if (after == nullptr || !after->is_array()) return {};
  for (const auto& f : after->get_array()) {
    bool known = false;
    if (before != nullptr && before->is_array()) {
      for (const auto& b : before->get_array()) known = known || b == f;
    }
    if (!known) {
      return {{"FieldValueForbidden",
               "Forbidden: no new finalizers can be added if the object is being deleted, found "
               "new finalizers " + json::serialize(*after),
               "metadata.finalizers"}};
    }
  }
  return {};
}

// The cluster IP and node ports `planned` got, into `next` where it has none (an update that
// omits them keeps them).
void carry_service_allocations(json::object& next, const json::object& planned) {
  json::value* spec_v = next.if_contains("spec");
  const json::value* planned_v = planned.if_contains("spec");
  if (spec_v == nullptr || !spec_v->is_object() || planned_v == nullptr || !planned_v->is_object()) {
    return;
  }
  json::object& spec = spec_v->get_object();
  const json::object& from = planned_v->get_object();
  const json::value* ip = spec.if_contains("clusterIP");
  if (ip == nullptr || (ip->is_string() && ip->get_string().empty())) {
    for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) {
      if (const json::value* v = from.if_contains(f)) spec[f] = *v;
    }
  }
  json::value* ports = spec.if_contains("ports");
  const json::value* planned_ports = from.if_contains("ports");
  if (ports == nullptr || !ports->is_array() || planned_ports == nullptr || !planned_ports->is_array()) {
    return;
  }
  for (auto& p : ports->get_array()) {
    json::object* port = p.if_object();
    if (port == nullptr || (port->contains("nodePort") && port->at("nodePort") != 0)) continue;
    for (const auto& q : planned_ports->get_array()) {
      const json::object* pq = q.if_object();
      if (pq != nullptr && pq->if_contains("nodePort") && pq->if_contains("port") &&
          port->if_contains("port") && pq->at("port") == port->at("port") &&
          (string_field(pq, "protocol").empty() ? "TCP" : string_field(pq, "protocol")) ==
              (string_field(port, "protocol").empty() ? "TCP" : string_field(port, "protocol"))) {
        (*port)["nodePort"] = pq->at("nodePort");
      }
    }
  }
}

bool is_service(const ResourceInfo& info) {
  return info.group.empty() && info.resource == "services";
}

// An allocator's 422 causes as the Service's Invalid Status.
ApiError with_context(const ResourceInfo& info, const std::string& name, ApiError e) {
  if (e.code == Errc::invalid && !e.causes.empty()) return invalid(info, name, std::move(e.causes));
  return e;
}

// NamespaceLifecycle's refusal of a create in a namespace that is being deleted.
ApiError namespace_terminating(const ResourceInfo& info, const std::string& name,
                               const std::string& ns) {
  const std::string subject =
      name.empty() ? qualified_resource(info) : qualified_resource(info) + " \"" + name + "\"";
  ApiError e = detailed(info, Errc::forbidden, name,
                        subject + " is forbidden: unable to create new content in namespace " + ns +
                            " because it is being terminated");
  e.causes.push_back({"NamespaceTerminating", "namespace " + ns + " is being terminated",
                      "metadata.namespace"});
  return e;
}

// The Status a delete answers with when it has no object to return.
json::object success_status(const ResourceInfo& info, const std::string& name,
                            const std::string& uid) {
  json::object details{{"name", name}, {"kind", info.resource}};
  if (!info.group.empty()) details["group"] = info.group;
  if (!uid.empty()) details["uid"] = uid;
  return apimachinery::success_status(std::move(details));
}

std::string list_start_key(const ResourceInfo& info, const std::string& ns,
                           const ContinueToken& token) {
  (void)ns;
  return info.key_prefix() + token.start_key_relative;
}

// Ephemeral containers change only through pods/ephemeralcontainers, which changes nothing
// else (kube's dropNonEphemeralContainerUpdates); other writes keep the stored ones.
void keep_pod_halves(json::object& obj, const json::object& existing, const WriteQuery& query) {
  if (query.subresource == "binding") return;
  const bool ephemeral = query.subresource == "ephemeralcontainers";
  const json::value* from_spec = (ephemeral ? obj : existing).if_contains("spec");
  const json::value* containers = from_spec != nullptr && from_spec->is_object()
                                      ? from_spec->get_object().if_contains("ephemeralContainers")
                                      : nullptr;
  json::value taken = containers != nullptr ? *containers : json::value();
  if (ephemeral) obj = existing;
  json::value& spec = obj["spec"];
  if (!spec.is_object()) spec = json::object();
  if (containers != nullptr) {
    spec.get_object()["ephemeralContainers"] = std::move(taken);
  } else {
    spec.get_object().erase("ephemeralContainers");
  }
}

// Where a write's field ownership is recorded: the kind's types, version and subresource; the
// main resource does not write the status of a kind that has a status subresource, /status
// does not write the spec.
FieldManagerScope manager_scope(const ResourceInfo& info, const WriteQuery& query) {
  static const std::shared_ptr<const FieldTypes> kDeduced = FieldTypes::of_resource(json::object());
  FieldManagerScope scope;
  scope.type = &(info.field_types ? info.field_types : kDeduced)->root();
  scope.api_version = info.api_version();
  scope.subresource = query.tracked_subresource.empty() ? query.subresource : query.tracked_subresource;
  if (info.has_status) {
    scope.reset.insert({field_step(query.subresource == "status" ? "spec" : "status")});
  }
  scope.now = base::now_rfc3339();
  return scope;
}

}  // namespace

ApiResult<json::object> apply_configuration(const ResourceInfo& info, const json::object* current,
                                            const json::object& config, const WriteQuery& query) {
  return apply_configuration(current, config, query.field_manager, query.force,
                             manager_scope(info, query));
}

ApiError not_found_error(const ResourceInfo& info, const std::string& name) {
  return detailed(info, Errc::not_found, name,
                  qualified_resource(info) + " \"" + name + "\" not found");
}

ResourceStore::ResourceStore(std::shared_ptr<storage::Storage> storage,
                             std::shared_ptr<Scheme> scheme,
                             std::shared_ptr<const StateCache> state_cache)
    : storage_(std::move(storage)),
      scheme_(std::move(scheme)),
      state_cache_(std::move(state_cache)) {}

ApiResult<json::object> ResourceStore::decode(const KeyValue& kv, json::storage_ptr sp) {
  if (!kv.read_error.empty()) return unreadable(kv, kv.read_error);  // e.g. failed to decrypt
  std::string problem;
  auto v = apimachinery::parse_json(kv.value, &problem, std::move(sp));
  if (!v) return unreadable(kv, problem);
  if (!v->is_object()) return unreadable(kv, "not a JSON object");
  json::object& obj = v->get_object();
  auto meta = ensure_metadata(obj);
  if (!meta) return unreadable(kv, "metadata is not an object");
  (**meta)["resourceVersion"] = std::to_string(kv.mod_revision);
  return std::move(obj);
}

asio::awaitable<ApiResult<void>> ResourceStore::check_namespace(const ResourceInfo& info,
                                                                const std::string& ns,
                                                                const std::string& name) {
  if (!info.namespaced) co_return ApiResult<void>{};
  auto namespaces = scheme_->find("", "v1", "namespaces");
  auto r = co_await storage_->get(namespaces->key("", ns));
  if (!r) co_return from_storage(*namespaces, ns, r.error());
  // NamespaceLifecycle: nothing new in a namespace that is being deleted.
  auto namespace_obj = decode(*r);
  if (namespace_obj && metadata_of(*namespace_obj) != nullptr &&
      metadata_of(*namespace_obj)->contains("deletionTimestamp")) {
    co_return namespace_terminating(info, name, ns);
  }
  co_return ApiResult<void>{};
}

asio::awaitable<ApiResult<json::object>> ResourceStore::get(const ResourceInfo& info,
                                                            std::string ns, std::string name,
                                                            std::string resource_version) {
  std::int64_t revision = 0;
  if (!resource_version.empty() && resource_version != "0") {
    auto rv = parse_resource_version(resource_version);
    if (!rv) co_return bad_request("invalid resource version: " + resource_version);
    auto current = co_await storage_->current_revision();
    if (!current) co_return from_storage(info, name, current.error());
    if (*rv > *current) co_return too_large_resource_version(*rv, *current);
  }
  auto r = co_await storage_->get(info.key(ns, name), revision);
  if (!r) co_return from_storage(info, name, r.error());
  co_return served_form(info, decode(*r));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::list(const ResourceInfo& info,
                                                             std::string ns,
                                                             CompiledListQuery query) {
  const LabelSelector* labels = &query.labels;
  const FieldSelector* fields = &query.fields;
  const std::string prefix = info.namespace_prefix(ns);
  storage::ListOptions options;
  options.prefix = prefix;
  std::int64_t revision = 0;
  if (query.continue_token) {
    options.start_key = list_start_key(info, ns, *query.continue_token);
    if (options.start_key.compare(0, prefix.size(), prefix) != 0) {
      co_return bad_request("continue key is not valid: the key does not belong to this list");
    }
    revision = query.continue_token->rv;
  } else if (query.resource_version && *query.resource_version != 0) {
    auto current = co_await storage_->current_revision();
    if (!current) co_return from_storage(info, "", current.error());
    if (*query.resource_version > *current) {
      co_return too_large_resource_version(*query.resource_version, *current);
    }
    if (query.match == ResourceVersionMatch::exact) revision = *query.resource_version;
  }

  const bool filtered = !labels->empty() || !fields->empty();
  json::array items;
  std::string last_key;
  bool more = false;
  std::int64_t remaining = 0;
  std::int64_t read_revision = revision;
  for (;;) {
    options.revision = read_revision;
    options.limit = query.limit > 0 ? query.limit - static_cast<std::int64_t>(items.size()) : 0;
    if (query.limit > 0 && filtered) options.limit = std::max<std::int64_t>(options.limit, 256);
    auto page = co_await storage_->list(options);
    if (!page) {
      if (page.error() == Errc::gone && query.continue_token) {
        co_return api_error(Errc::gone,
                            "The provided continue parameter is too old to display a consistent "
                            "list result. You can start a new list without the continue "
                            "parameter.");
      }
      if (page.error() == Errc::gone) {
        co_return api_error(Errc::gone, "too old resource version: " +
                                            std::to_string(read_revision));
      }
      co_return from_storage(info, "", page.error());
    }
    read_revision = page->revision;
    std::size_t consumed = 0;
    for (auto& kv : page->kvs) {
      ++consumed;
      last_key = kv.key;
      auto obj = served_form(info, decode(kv));
      if (!obj) {
        // One unreadable object must not hide all the others from every client that lists.
        spdlog::warn("list {}: skipping {}: {}", info.resource, apimachinery::to_valid_utf8(kv.key),
                     obj.error().message);
        continue;
      }
      if (filtered) {
        const json::object* meta = metadata_of(*obj);
        const json::value* lbl = meta != nullptr ? meta->if_contains("labels") : nullptr;
        if (!labels->matches(lbl != nullptr ? lbl->if_object() : nullptr)) continue;
        const json::object& o = *obj;
        bool ok = fields->matches([&](std::string_view field) -> std::optional<std::string> {
          return info.field_value(o, field);
        });
        if (!ok) continue;
      }
      items.push_back(std::move(*obj));
      if (query.limit > 0 && static_cast<std::int64_t>(items.size()) >= query.limit) break;
    }
    const bool page_left_keys = consumed < page->kvs.size() || page->more;
    if (query.limit > 0 && static_cast<std::int64_t>(items.size()) >= query.limit) {
      more = page_left_keys;
      remaining = page->count - static_cast<std::int64_t>(consumed);
      break;
    }
    if (!page->more) break;
    options.start_key = last_key + '\0';
  }

  json::object list;
  list["kind"] = info.list_kind();
  list["apiVersion"] = info.api_version();
  json::object meta;
  meta["resourceVersion"] = std::to_string(read_revision);
  if (more) {
    meta["continue"] =
        encode_continue(read_revision, last_key.substr(info.key_prefix().size()) + '\0');
    if (!filtered) meta["remainingItemCount"] = remaining;
  }
  list["metadata"] = std::move(meta);
  list["items"] = std::move(items);
  co_return list;
}

asio::awaitable<ApiResult<json::object>> ResourceStore::create(const ResourceInfo& info,
                                                               std::string ns, json::object body,
                                                               WriteQuery query) {
  if (info.terminating && info.terminating->load()) {
    co_return api_error(Errc::method_not_allowed,
                        "create not allowed while custom resource definition is terminating");
  }
  if (auto t = check_type(info, body); !t) co_return t.error();
  auto meta_r = ensure_metadata(body);
  if (!meta_r) co_return meta_r.error();
  json::object& meta = **meta_r;
  if (!string_field(&meta, "resourceVersion").empty()) {
    co_return bad_request("resourceVersion should not be set on objects to be created");
  }
  if (info.namespaced) {
    const std::string body_ns = string_field(&meta, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      co_return bad_request(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  std::string name = string_field(&meta, "name");
  const std::string generate_name = string_field(&meta, "generateName");
  const bool generated = name.empty() && !generate_name.empty();
  if (generated) {
    // Kubernetes keeps generated names within 63 characters: trim the prefix, not the suffix.
    name = generate_name.substr(0, std::min<std::size_t>(generate_name.size(), 58)) +
           random_suffix(5);
    meta["name"] = name;
  }
  meta["uid"] = base::new_uuid();
  meta["creationTimestamp"] = base::now_rfc3339();
  if (info.generation != GenerationRule::none &&
      info.generation != GenerationRule::spec_on_update) {
    meta["generation"] = 1;
  }
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  if (auto e = decode_and_default(info, body, query, /*create=*/true)) co_return std::move(*e);
  if (auto e = check_written(info, name.empty() ? generate_name : name, body, nullptr)) {
    co_return std::move(*e);
  }
  if (query.admit) {
    if (auto e = query.admit(nullptr, body)) co_return std::move(*e);
  }
  const std::string admitted_name = generated ? std::string() : name;
  if (auto ok = co_await check_namespace(info, ns, admitted_name); !ok) co_return ok.error();
  if (!query.applied) track_update(nullptr, body, query.field_manager, manager_scope(info, query));
  std::optional<ServiceReservation> reserved;
  if (services_ && is_service(info)) {
    auto r = co_await services_->allocate(body, ns, name, nullptr);
    if (!r) co_return with_context(info, name, r.error());
    reserved = std::move(*r);
  }
  auto text = storable(info, name, body);
  if (!text) {
    if (reserved) co_await services_->release(std::move(*reserved));
    co_return text.error();
  }
  if (query.dry_run) {
    // A dry run shows what would be allocated and keeps none of it.
    if (reserved) co_await services_->release(std::move(*reserved));
    auto existing = co_await storage_->get(info.key(ns, name));
    if (existing) co_return already_exists(info, name);
    co_return body;
  }
  auto r = co_await storage_->create(info.key(ns, name), std::move(*text));
  if (!r && reserved) co_await services_->release(std::move(*reserved));
  if (!r) co_return from_storage(info, name, r.error());
  // Not `meta`: inserting into `body` above may have moved the metadata object.
  body["metadata"].get_object()["resourceVersion"] = std::to_string(r->mod_revision);
  co_return body;
}

asio::awaitable<ApiResult<json::object>> ResourceStore::write_update(
    const ResourceInfo& info, std::string ns, std::string name, WriteQuery query,
    std::function<ApiResult<json::object>(const json::object& current)> mutate) {
  if (!services_ || !is_service(info) || !query.subresource.empty()) {
    co_return co_await guarded_update(info, std::move(ns), std::move(name), std::move(query),
                                      std::move(mutate));
  }
  // A Service's cluster IP and node ports are worked out (kept, checked, allocated) from the
  // state the update starts from, before the guarded write, which then carries them.
  auto current = co_await storage_->get(info.key(ns, name));
  if (!current) co_return from_storage(info, name, current.error());
  auto existing = served_form(info, decode(*current));
  if (!existing) co_return existing.error();
  auto planned = mutate(*existing);
  if (!planned) co_return planned.error();
  auto reserved = co_await services_->allocate(*planned, ns, name, &*existing);
  if (!reserved) co_return with_context(info, name, reserved.error());
  auto shared_planned = std::make_shared<json::object>(std::move(*planned));
  MutateFn carrying = [mutate, shared_planned](const json::object& state) -> ApiResult<json::object> {
    auto next = mutate(state);
    if (next) carry_service_allocations(*next, *shared_planned);
    return next;
  };
  auto r = co_await guarded_update(info, ns, name, query, std::move(carrying));
  if (!r || query.dry_run) {
    co_await services_->release(std::move(*reserved));
  } else {
    co_await services_->release_unused(*existing, &*r, ns, name);
  }
  co_return r;
}

ApiResult<json::object> update_object(const ResourceInfo& info, const std::string& ns,
                                      const std::string& name, const json::object& existing,
                                      std::int64_t revision, json::object next,
                                      WriteQuery& query) {
  json::object& obj = next;
  // The request: its kind, its metadata, the version it was read at, its name and namespace.
  if (auto t = check_type(info, obj); !t) return t.error();
  auto meta_r = ensure_metadata(obj);
  if (!meta_r) return meta_r.error();
  json::object& meta = **meta_r;
  const json::object& old_meta = *metadata_of(existing);
  // Optimistic concurrency: a resourceVersion in the new object must be the current one.
  const std::string rv = string_field(&meta, "resourceVersion");
  if (!rv.empty() && rv != std::to_string(revision)) {
    return conflict(info, name, kModified);
  }
  const std::string body_name = string_field(&meta, "name");
  if (!body_name.empty() && body_name != name) {
    return bad_request("the name of the object (" + body_name +
                       ") does not match the name on the URL (" + name + ")");
  }
  if (info.namespaced) {
    const std::string body_ns = string_field(&meta, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      return bad_request(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
  }
  // Server-managed metadata survives every update.
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp", "generation",
                            "deletionTimestamp", "deletionGracePeriodSeconds"}) {
    if (auto it = old_meta.find(field); it != old_meta.end()) {
      meta[field] = it->value();
    } else {
      meta.erase(field);
    }
  }
  if (info.group.empty() && info.resource == "pods") keep_pod_halves(obj, existing, query);
  // The status subresource and the main resource each own their half of the object (a
  // binding, which sets the node and the PodScheduled condition, writes both).
  if (info.has_status && query.subresource != "binding") {
    const bool status_write = query.subresource == "status";
    json::object base = status_write ? existing : obj;
    const json::object& from = status_write ? obj : existing;
    if (auto it = from.find("status"); it != from.end()) {
      base["status"] = it->value();
    } else {
      base.erase("status");
    }
    if (status_write) {
      base["metadata"] = obj["metadata"];
    }
    obj = std::move(base);
  }
  if (info.group.empty() && info.resource == "namespaces") {
    // spec.finalizers change only through the finalize subresource, which changes nothing
    // else of the spec or status.
    const bool finalize = query.subresource == "finalize";
    json::object base = finalize ? existing : obj;
    const json::object& from = finalize ? obj : existing;
    const json::value* from_spec = from.if_contains("spec");
    const json::value* finalizers =
        from_spec != nullptr && from_spec->is_object() ? from_spec->get_object().if_contains("finalizers")
                                                       : nullptr;
    json::value& spec = base["spec"];
    if (!spec.is_object()) spec = json::object();
    if (finalizers != nullptr) {
      spec.get_object()["finalizers"] = *finalizers;
    } else {
      spec.get_object().erase("finalizers");
    }
    if (finalize) base["metadata"] = obj["metadata"];
    obj = std::move(base);
  }
  // Mutation: decoding and defaults, the kind's own preparation, the generation.
  if (auto e = decode_and_default(info, obj, query, /*create=*/false)) return std::move(*e);
  if (info.hooks.prepare_for_update && query.subresource != "status") {
    info.hooks.prepare_for_update(obj, existing);
  }
  json::object& final_meta = obj["metadata"].get_object();
  if (desired_state_changed(info, existing, obj)) {
    const json::value* g = old_meta.if_contains("generation");
    std::int64_t gen = g != nullptr && g->is_int64() ? g->get_int64() : 0;
    final_meta["generation"] = gen + 1;
  }
  // Validation: the kind's rules (a binding is no update of the pod's spec by its users: only
  // the rules of any pod apply), then validating admission (the RBAC escalation guard).
  const json::object* old_for_rules = query.subresource == "binding" ? nullptr : &existing;
  if (auto e = check_written(info, name, obj, old_for_rules)) return std::move(*e);
  if (query.admit) {
    if (auto e = query.admit(&existing, obj)) return std::move(*e);
  }
  if (auto causes = added_finalizers(obj, existing); !causes.empty()) {
    return invalid(info, name, std::move(causes));
  }
  // Last, the managers of the fields this update set (server-side apply tracks its own).
  if (!query.applied) track_update(&existing, obj, query.field_manager, manager_scope(info, query));
  return next;
}

asio::awaitable<ApiResult<json::object>> ResourceStore::guarded_update(
    const ResourceInfo& info, std::string ns, std::string name, WriteQuery query,
    MutateFn mutate) {
  std::optional<ApiError> failure;
  std::optional<json::object> written;  // what the last attempt made (or kept)
  bool finalized = false;  // the update removed the last finalizer of an object being deleted
  // An attempt that is retried (the state it started from was stale) warns only once.
  const std::size_t warnings_before = query.warnings ? query.warnings->size() : 0;
  // The objects of this write (the state it starts from, the one it makes) come from one arena,
  // released with the last of them (the response).
  json::storage_ptr arena = json::make_shared_resource<json::monotonic_resource>(8192);
  const std::string key = info.key(ns, name);
  // The watch cache's copy of the object saves a read; storage is told only its revision.
  std::optional<json::object> cached;
  std::optional<KeyValue> suggested;
  if (auto hit = state_cache_ ? state_cache_->lookup(info, key) : std::nullopt) {
    auto v = apimachinery::parse_json(*hit->json, nullptr, arena);
    if (v && v->is_object()) {
      cached = std::move(v->get_object());
      suggested.emplace();
      suggested->key = key;
      suggested->mod_revision = hit->mod_revision;
    }
  }
  auto try_update = [&](const KeyValue* current) -> storage::Storage::UpdateResult {
    failure.reset();
    written.reset();
    finalized = false;
    if (query.warnings) query.warnings->resize(warnings_before);
    if (current == nullptr) {
      failure = not_found(info, name);
      return Errc::not_found;
    }
    auto existing = [&]() -> ApiResult<json::object> {
      if (cached && current->value.empty() && current->read_error.empty()) {
        json::object suggestion = std::move(*cached);  // tried once
        cached.reset();
        return served_form(info, std::move(suggestion));
      }
      return served_form(info, decode(*current, arena));
    }();
    if (!existing) {
      failure = existing.error();
      return Errc::internal;
    }
    auto next = mutate(*existing);
    if (!next) {
      failure = next.error();
      return next.error().code;
    }
    auto made = update_object(info, ns, name, *existing, current->mod_revision, std::move(*next),
                              query);
    if (!made) {
      failure = made.error();
      return failure->code;
    }
    json::object& obj = *made;
    finalized = deletion_complete(info, obj);
    // A dry run stops before the write (even of stale bytes, which an unchanged value would
    // not prevent) with a code no storage returns.
    if (!query.dry_run && equal_but_metadata_member(obj, *existing, "resourceVersion")) {
      written = std::move(*existing);
      return std::nullopt;
    }
    auto text = storable(info, name, obj);
    if (!text) {
      failure = text.error();
      return text.error().code;
    }
    written = std::move(obj);
    if (query.dry_run) {
      (*written)["metadata"].get_object()["resourceVersion"] =
          std::to_string(current->mod_revision);
      return kDryRunDone;
    }
    return std::optional<std::string>(std::move(*text));
  };
  // A named std::function: GCC 12 destroys a converted temporary in a co_await twice.
  storage::Storage::UpdateFn update_fn = try_update;
  auto r = co_await storage_->guaranteed_update(key, std::move(update_fn), std::move(suggested));
  if (!r && r.error() == kDryRunDone && written) co_return std::move(*written);
  if (!r) {
    if (failure) co_return *failure;
    co_return from_storage(info, name, r.error());
  }
  if (query.dry_run && written) co_return std::move(*written);
  if (finalized) {
    // Nothing holds the object any more: the deletion it waited for happens now.
    auto d = co_await storage_->delete_if(key, r->mod_revision);
    if (!d) co_return from_storage(info, name, d.error());
  }
  // The answer is what was written (or kept), unless the stored form is another one.
  if (!written || stored_differently(info)) co_return served_form(info, decode(*r));
  (*written)["metadata"].get_object()["resourceVersion"] = std::to_string(r->mod_revision);
  co_return std::move(*written);
}

asio::awaitable<ApiResult<json::object>> ResourceStore::update(const ResourceInfo& info,
                                                               std::string ns, std::string name,
                                                               json::object body,
                                                               WriteQuery query) {
  auto shared_body = std::make_shared<json::object>(std::move(body));
  MutateFn mutate = [shared_body](const json::object& current) -> ApiResult<json::object> {
    return json::object(*shared_body, current.storage());  // in the write's arena
  };
  co_return co_await write_update(info, std::move(ns), std::move(name), query, std::move(mutate));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::patch(const ResourceInfo& info,
                                                              std::string ns, std::string name,
                                                              PatchType type, json::value patch,
                                                              WriteQuery query) {
  if (type != PatchType::json && !patch.is_object()) {
    co_return bad_request("patch body must be a JSON object");
  }
  if (type == PatchType::apply) {
    co_return co_await apply(info, std::move(ns), std::move(name), std::move(patch.get_object()),
                             std::move(query), nullptr);
  }
  if (type == PatchType::json && !patch.is_array()) {
    co_return bad_request("json patch must be a JSON array of operations");
  }
  if (type == PatchType::strategic_merge && info.origin == KindOrigin::custom) {
    // kube-apiserver serves custom resources without strategic merge patch.
    co_return api_error(Errc::unsupported_media_type,
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml");
  }
  auto shared_patch = std::make_shared<json::value>(std::move(patch));
  MutateFn mutate = [shared_patch, type, &info](const json::object& current) {
    return apply_patch(info, type, current, *shared_patch);
  };
  co_return co_await write_update(info, std::move(ns), std::move(name), query, std::move(mutate));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::bind(const ResourceInfo& info,
                                                             std::string ns, std::string name,
                                                             json::object binding,
                                                             WriteQuery query) {
  const json::object* meta = metadata_of(binding);
  const std::string binding_name = string_field(meta, "name");
  if (!binding_name.empty() && binding_name != name) {
    co_return bad_request("name in URL does not match name in Binding object");
  }
  const json::object* target = object_member(binding, "target");
  const std::string kind(string_member(target, "kind"));
  const std::string node(string_member(target, "name"));
  std::vector<Cause> causes;
  if (!kind.empty() && kind != "Node") {
    causes.push_back({"FieldValueNotSupported",
                      "Unsupported value: " + go_quoted(kind) + ": supported values: \"Node\"",
                      "target.kind"});
  }
  if (node.empty()) causes.push_back({"FieldValueRequired", "Required value", "target.name"});
  if (!causes.empty()) co_return invalid_error("", "Binding", name, std::move(causes));
  json::object annotations;
  if (meta != nullptr) {
    if (const json::object* a = object_member(*meta, "annotations")) annotations = *a;
  }
  const std::string uid = string_field(meta, "uid");
  auto refused = [name](std::string why) {
    ApiError e(Errc::conflict,
               "Operation cannot be fulfilled on pods/binding " + go_quoted(name) + ": " + why);
    e.name = name;
    e.kind = "pods/binding";
    return e;
  };
  MutateFn mutate = [=](const json::object& current) -> ApiResult<json::object> {
    json::object pod = current;
    json::object& pod_meta = pod["metadata"].as_object();
    if (!uid.empty() && uid != string_field(&pod_meta, "uid")) {
      return refused("Precondition failed: UID in precondition: " + uid +
                     ", UID in object meta: " + string_field(&pod_meta, "uid"));
    }
    if (pod_meta.contains("deletionTimestamp")) {
      return refused("pod " + name + " is being deleted, cannot be assigned to a host");
    }
    json::value& spec = pod["spec"];
    if (!spec.is_object()) spec = json::object();
    const std::string assigned(string_member(&spec.get_object(), "nodeName"));
    if (!assigned.empty()) {
      return refused("pod " + name + " is already assigned to node " + go_quoted(assigned));
    }
    spec.get_object()["nodeName"] = node;
    if (!annotations.empty()) {
      json::value& a = pod_meta["annotations"];
      if (!a.is_object()) a = json::object();
      for (const auto& [k, v] : annotations) a.get_object()[k] = v;
    }
    // The PodScheduled condition turns True (its transition time when it changes).
    json::value& status = pod["status"];
    if (!status.is_object()) status = json::object();
    auto [scheduled, changed] =
        set_condition(status.get_object(), "PodScheduled", "True", base::now_rfc3339());
    if (changed) {
      scheduled.erase("reason");
      scheduled.erase("message");
    }
    scheduled["lastProbeTime"] = nullptr;
    return pod;
  };
  query.subresource = "binding";
  co_return co_await write_update(info, std::move(ns), std::move(name), std::move(query),
                                  std::move(mutate));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::apply(const ResourceInfo& info,
                                                              std::string ns, std::string name,
                                                              json::object config,
                                                              WriteQuery query, bool* created) {
  if (created != nullptr) *created = false;
  auto meta_r = ensure_metadata(config);
  if (!meta_r) co_return meta_r.error();
  const std::string body_name = string_field(*meta_r, "name");
  if (!body_name.empty() && body_name != name) {
    co_return bad_request("the name of the object (" + body_name +
                          ") does not match the name on the URL (" + name + ")");
  }
  (**meta_r)["name"] = name;
  query.applied = true;
  auto shared_config = std::make_shared<const json::object>(std::move(config));
  MutateFn mutate = [shared_config, query, &info](const json::object& current) {
    return apply_configuration(info, &current, *shared_config, query);
  };
  for (int attempt = 0;; ++attempt) {
    auto updated = co_await write_update(info, ns, name, query, mutate);
    if (updated || updated.error().code != Errc::not_found || !query.subresource.empty() ||
        attempt == 3) {
      co_return updated;
    }
    // Absent: the object is made from the configuration alone.
    auto made = apply_configuration(info, nullptr, *shared_config, query);
    if (!made) co_return made.error();
    auto r = co_await create(info, ns, std::move(*made), query);
    if (r || r.error().code != Errc::already_exists) {
      if (r && created != nullptr) *created = true;
      co_return r;
    }
    // Created by someone else meanwhile: apply to theirs.
  }
}

ApiResult<json::object> apply_patch(const ResourceInfo& info, PatchType type,
                                    const json::object& current, const json::value& patch) {
  json::value patched;
  switch (type) {
    case PatchType::merge:
      patched = apply_merge_patch(current, patch);
      break;
    case PatchType::json: {
      auto r = apply_json_patch(json::value(current), patch);
      if (!r) return r.error();
      patched = std::move(*r);
      break;
    }
    case PatchType::apply:
      return bad_request("an apply patch needs its field manager: ResourceStore::apply");
    case PatchType::strategic_merge: {
      const PatchSchema& schema =
          info.patch_schema ? *info.patch_schema : builtin_patch_schema(info.group, info.kind);
      auto r = apply_strategic_merge_patch(current, patch, schema);
      if (!r) return r.error();
      patched = std::move(*r);
      break;
    }
  }
  if (!patched.is_object()) return bad_request("patched object is not a JSON object");
  return std::move(patched.get_object());
}

asio::awaitable<ApiResult<json::object>> ResourceStore::remove(const ResourceInfo& info,
                                                               std::string ns, std::string name,
                                                               DeleteQuery query) {
  if (info.group.empty() && info.resource == "namespaces" && is_immortal_namespace(name)) {
    co_return detailed(info, Errc::forbidden, name,
                       "namespaces \"" + name + "\" is forbidden: this namespace may not be deleted");
  }
  const std::string key = info.key(ns, name);
  for (;;) {
    auto current = co_await storage_->get(key);
    if (!current) co_return from_storage(info, name, current.error());
    auto obj = served_form(info, decode(*current));
    if (!obj && query.ignore_read_errors) {
      spdlog::warn("deleting {}, which cannot be decoded, as asked "
                   "(ignoreStoreReadErrorWithClusterBreakingPotential)",
                   apimachinery::to_valid_utf8(key));
      if (query.dry_run) co_return success_status(info, name, "");
      auto d = co_await storage_->delete_if(key, current->mod_revision);
      if (!d) co_return from_storage(info, name, d.error());
      if (!d->succeeded) continue;  // changed under us: it may be readable now
      co_return success_status(info, name, "");
    }
    if (!obj) co_return obj.error();
    const std::string uid = string_field(metadata_of(*obj), "uid");
    if (query.uid && *query.uid != uid) {
      co_return conflict(info, name,
                         "Precondition failed: UID in precondition: " + *query.uid +
                             ", UID in object meta: " + uid);
    }
    if (query.resource_version &&
        *query.resource_version != std::to_string(current->mod_revision)) {
      co_return conflict(info, name,
                         "Precondition failed: ResourceVersion in precondition: " +
                             *query.resource_version + ", ResourceVersion in object meta: " +
                             std::to_string(current->mod_revision));
    }
    DeletionPlan plan = plan_deletion(info, std::move(*obj), query, garbage_collection_,
                                      std::chrono::system_clock::now());
    if (plan.action == DeletionPlan::Action::keep) co_return std::move(plan.object);
    if (plan.action == DeletionPlan::Action::write) {
      // The object stays, marked as being deleted, until what holds it lets go.
      if (query.dry_run) co_return std::move(plan.object);
      auto text = storable(info, name, plan.object);
      if (!text) co_return text.error();
      auto w = co_await storage_->put_if(key, current->mod_revision, std::move(*text));
      if (!w) co_return from_storage(info, name, w.error());
      if (!w->succeeded) continue;  // changed under us: decide again on the new state
      plan.object["metadata"].get_object()["resourceVersion"] = std::to_string(w->revision);
      co_return std::move(plan.object);
    }
    if (!query.dry_run) {
      auto d = co_await storage_->delete_if(key, current->mod_revision);
      if (!d) co_return from_storage(info, name, d.error());
      if (!d->succeeded) {
        if (d->kv.mod_revision == 0) co_return not_found(info, name);
        continue;  // changed under us: check the preconditions against the new state
      }
      plan.object["metadata"].get_object()["resourceVersion"] = std::to_string(d->revision);
      if (services_ && is_service(info)) {
        co_await services_->release_unused(plan.object, nullptr, ns, name);
      }
    }
    if (!info.delete_returns_object) co_return success_status(info, name, uid);
    co_return std::move(plan.object);
  }
}

asio::awaitable<ApiResult<json::object>> ResourceStore::remove_collection(const ResourceInfo& info,
                                                                          std::string ns,
                                                                          CompiledListQuery query,
                                                                          DeleteQuery del) {
  query.limit = 0;
  query.continue_token.reset();
  auto listed = co_await list(info, ns, query);
  if (!listed) co_return listed.error();
  // The answer is the list as it was, as kube's deletecollection gives it.
  for (const auto& item : (*listed)["items"].get_array()) {
    const json::object* meta = metadata_of(item.get_object());
    auto r = co_await remove(info, string_field(meta, "namespace"), string_field(meta, "name"),
                             del);
    if (!r && r.error().code != Errc::not_found) co_return r.error();  // gone meanwhile: fine
  }
  (*listed)["metadata"].get_object().erase("continue");
  (*listed)["metadata"].get_object().erase("remainingItemCount");
  co_return std::move(*listed);
}

namespace {

// The string form of the scale's label selector: as the object holds it (custom resources), or
// of a label selector (apps/v1 workloads) or label map (ReplicationController), as
// labels.Selector.String() writes it.
std::string scale_selector(const ScaleSubresource& s, const json::object& obj) {
  if (s.label_selector_path.empty()) return {};
  const json::value* sel = find_field(obj, s.label_selector_path);
  if (sel == nullptr) return {};
  switch (s.selector_form) {
    case ScaleSelector::text:
      return sel->is_string() ? std::string(sel->get_string()) : std::string();
    case ScaleSelector::label_selector: {
      if (!sel->is_object()) return {};
      auto parsed = label_selector_from_json(sel->get_object());
      return parsed ? parsed->to_string() : std::string();
    }
    case ScaleSelector::label_map:
      return sel->is_object() ? label_selector_from_map(sel->get_object()).to_string()
                              : std::string();
  }
  return {};
}

// The autoscaling/v1 Scale of `obj`, as kube-apiserver builds it for a workload or a custom
// resource.
json::object scale_of(const ResourceInfo& info, const json::object& obj) {
  const ScaleSubresource& s = *info.scale;
  const json::object* meta = metadata_of(obj);
  json::object scale_meta;
  for (const char* f : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (meta != nullptr && meta->contains(f)) scale_meta[f] = meta->at(f);
  }
  // autoscaling/v1 omits zero replicas from the spec and an empty selector from the status.
  json::object spec;
  if (const json::value* r = find_field(obj, s.spec_replicas_path);
      r != nullptr && r->is_int64() && r->get_int64() != 0) {
    spec["replicas"] = *r;
  }
  json::object status{{"replicas", 0}};
  if (const json::value* r = find_field(obj, s.status_replicas_path); r != nullptr && r->is_int64()) {
    status["replicas"] = *r;
  }
  if (std::string selector = scale_selector(s, obj); !selector.empty()) {
    status["selector"] = std::move(selector);
  }
  return json::object{{"kind", "Scale"},
                      {"apiVersion", "autoscaling/v1"},
                      {"metadata", std::move(scale_meta)},
                      {"spec", std::move(spec)},
                      {"status", std::move(status)}};
}

}  // namespace

asio::awaitable<ApiResult<json::object>> ResourceStore::scale(const ResourceInfo& info,
                                                              std::string ns, std::string name,
                                                              ScaleFn mutate, WriteQuery query) {
  if (!info.scale) co_return not_found(info, name);
  if (!mutate) {
    std::string any_version;  // named: GCC 12 destroys a converted temporary twice
    auto obj = co_await get(info, ns, name, std::move(any_version));
    if (!obj) co_return obj.error();
    co_return scale_of(info, *obj);
  }
  auto shared = std::make_shared<ScaleFn>(std::move(mutate));
  MutateFn update = [shared, &info, name](const json::object& current) -> ApiResult<json::object> {
    auto next = (*shared)(scale_of(info, current));
    if (!next) return next.error();
    const json::value* replicas = next->contains("spec") && next->at("spec").is_object()
                                      ? next->at("spec").get_object().if_contains("replicas")
                                      : nullptr;
    if (replicas == nullptr || !replicas->is_int64() || replicas->get_int64() < 0) {
      return invalid(info, name, {{"FieldValueInvalid",
                                   "Invalid value: " + (replicas ? json::serialize(*replicas)
                                                                 : std::string("null")) +
                                       ": must be greater than or equal to 0",
                                   "spec.replicas"}});
    }
    json::object obj = current;
    set_field(obj, info.scale->spec_replicas_path, *replicas);
    // The Scale's resourceVersion is the object's: a stale one is a conflict.
    const json::object* scale_meta = metadata_of(*next);
    const std::string rv = string_field(scale_meta, "resourceVersion");
    json::object& meta = obj["metadata"].get_object();
    if (!rv.empty()) meta["resourceVersion"] = rv;
    return obj;
  };
  query.tracked_subresource = "scale";
  query.subresource.clear();
  auto r = co_await write_update(info, std::move(ns), std::move(name), query, std::move(update));
  if (!r) co_return r.error();
  co_return scale_of(info, *r);
}

asio::awaitable<ApiResult<void>> ResourceStore::ping(std::chrono::milliseconds timeout) {
  auto executor = co_await asio::this_coro::executor;
  // The signal and the timer outlive this frame: the timer's handler may run after it returned.
  auto cancel = std::make_shared<asio::cancellation_signal>();
  auto timer = std::make_shared<asio::steady_timer>(executor, timeout);
  timer->async_wait([cancel, timer](boost::system::error_code ec) {
    if (!ec) cancel->emit(asio::cancellation_type::terminal);
  });
  auto r = co_await asio::co_spawn(
      executor, storage_->current_revision(),
      asio::bind_cancellation_slot(cancel->slot(), asio::use_awaitable));
  timer->cancel();
  if (!r && r.error() == asio::error::operation_aborted) {
    co_return ApiError(Errc::unavailable,
                       "storage: no answer within " + std::to_string(timeout.count()) + " ms");
  }
  if (!r) co_return ApiError(Errc::unavailable, "storage: " + r.error().message());
  co_return ApiResult<void>{};
}

asio::awaitable<ApiResult<void>> ResourceStore::ensure_namespace(std::string name) {
  auto info = scheme_->find("", "v1", "namespaces");
  json::object body{{"apiVersion", "v1"}, {"kind", "Namespace"},
                    {"metadata", json::object{{"name", name}}}};
  co_return co_await ensure(*info, std::move(body));
}

asio::awaitable<ApiResult<void>> ResourceStore::ensure(const ResourceInfo& info, json::object body) {
  // Named arguments: GCC 12 mis-destroys a braced temporary passed to a coroutine.
  WriteQuery query;
  std::string ns = info.namespaced ? string_field(metadata_of(body), "namespace") : std::string();
  // Looked up before and after: a create of what exists may fail on something else before the
  // name (a Service's cluster IP is already allocated, to the Service itself), also when another
  // replica created it between the lookup and the create.
  const std::string name = string_field(metadata_of(body), "name");
  auto exists = [&]() -> asio::awaitable<bool> {
    std::string get_ns = ns, get_name = name, any_version;
    co_return (co_await get(info, std::move(get_ns), std::move(get_name), std::move(any_version)))
        .has_value();
  };
  if (co_await exists()) co_return ApiResult<void>{};
  std::string create_ns = ns;
  auto r = co_await create(info, std::move(create_ns), std::move(body), std::move(query));
  if (r || r.error().code == Errc::already_exists) co_return ApiResult<void>{};
  const bool created_elsewhere = co_await exists();
  if (!created_elsewhere) co_return r.error();
  co_return ApiResult<void>{};
}

}  // namespace kwatch::registry
