#include "registry/store_rules.hpp"

#include "apimachinery/json_equality.hpp"

#include "apimachinery/ip_address.hpp"
#include "registry/service_allocator.hpp"

#include "kinds/version_converter.hpp"

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

namespace kwatch::registry::detail {

namespace asio = boost::asio;

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
  if (obj && converts(info) && !info.conversion_webhook) (*obj)["apiVersion"] = info.api_version();
  return obj;
}

namespace {

// `objects` as `api_version` through `info`'s webhook.
asio::awaitable<ApiResult<std::vector<json::object>>> through_webhook(
    const ResourceInfo& info, std::vector<json::object> objects, std::string api_version,
    bool as_list) {
  if (!info.converter) {
    co_return api_error(Errc::internal, "Internal error occurred: conversion webhook for " +
                                            info.group + "/" + info.storage_version +
                                            ", Kind=" + info.kind + " is not set up yet");
  }
  co_return co_await info.converter->convert(std::move(objects), std::move(api_version), as_list);
}

}  // namespace

asio::awaitable<ApiResult<json::object>> converted_served_form(const ResourceInfo& info,
                                                               ApiResult<json::object> obj) {
  co_return co_await webhook_served(info, served_form(info, std::move(obj)));
}

asio::awaitable<ApiResult<json::object>> webhook_served(const ResourceInfo& info,
                                                        ApiResult<json::object> obj) {
  if (!obj || !info.converted_by_webhook()) co_return obj;
  std::vector<json::object> one;
  one.push_back(std::move(*obj));
  auto converted = co_await through_webhook(info, std::move(one), info.api_version(), false);
  if (!converted) co_return converted.error();
  co_return std::move(converted->front());
}

asio::awaitable<ApiResult<std::vector<json::object>>> convert_listed(
    const ResourceInfo& info, std::vector<json::object> objects) {
  if (!info.converted_by_webhook() || objects.empty()) co_return std::move(objects);
  // In reviews of at most 500 objects: one review and its answer stay bounded.
  constexpr std::size_t kPerReview = 500;
  std::vector<json::object> out;
  out.reserve(objects.size());
  for (std::size_t at = 0; at < objects.size(); at += kPerReview) {
    std::vector<json::object> part;
    for (std::size_t i = at; i < std::min(objects.size(), at + kPerReview); ++i) {
      part.push_back(std::move(objects[i]));
    }
    auto converted = co_await through_webhook(info, std::move(part), info.api_version(), true);
    if (!converted) co_return converted.error();
    for (auto& o : *converted) out.push_back(std::move(o));
  }
  co_return std::move(out);
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

asio::awaitable<ApiResult<std::string>> converted_storable(const ResourceInfo& info,
                                                           const std::string& name,
                                                           json::object& obj) {
  if (!info.converted_by_webhook()) co_return storable(info, name, obj);
  if (auto* meta = metadata_of(obj)) meta->erase("resourceVersion");
  std::vector<json::object> one;
  one.emplace_back(obj);
  auto converted = co_await through_webhook(info, std::move(one),
                                            info.group + "/" + info.storage_version, false);
  if (!converted) co_return converted.error();
  json::object& stored = converted->front();
  if (auto* meta = metadata_of(stored)) meta->erase("resourceVersion");
  if (info.hooks.to_stored) info.hooks.to_stored(stored);
  co_return serialize_checked(info, name, json::value(std::move(stored)));
}

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
      case NameRule::ip_address: errors = apimachinery::ip_errors(name); break;
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
std::optional<ApiError> settle_admitted(const ResourceInfo& info, const json::object& before,
                                        json::object& after, const WriteQuery& query,
                                        bool create) {
  if (after == before) return std::nullopt;
  for (const char* key : {"apiVersion", "kind"}) {
    if (const json::value* v = before.if_contains(key)) {
      after[key] = *v;
    } else {
      after.erase(key);
    }
  }
  const json::object* old_meta = metadata_of(before);
  json::value& meta_value = after["metadata"];
  if (!meta_value.is_object()) meta_value = json::object();
  json::object& meta = meta_value.get_object();
  const std::string old_name = string_field(old_meta, "name");
  const std::string new_name = string_field(&meta, "name");
  if (info.namespaced && string_field(&meta, "namespace") != string_field(old_meta, "namespace")) {
    return bad_request(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  if (!info.namespaced) meta.erase("namespace");
  if (!create && new_name != old_name) {
    return invalid(info, old_name,
                   {{"FieldValueInvalid",
                     "Invalid value: " + go_quoted(new_name) + ": field is immutable",
                     "metadata.name"}});
  }
  for (const char* field : {"uid", "creationTimestamp", "generation", "resourceVersion",
                            "deletionTimestamp", "deletionGracePeriodSeconds"}) {
    if (const json::value* v = old_meta != nullptr ? old_meta->if_contains(field) : nullptr) {
      meta[field] = *v;
    } else {
      meta.erase(field);
    }
  }
  WriteQuery quiet = query;
  quiet.field_validation = FieldValidation::ignore;
  quiet.duplicate_fields.clear();
  quiet.warnings = nullptr;
  return decode_and_default(info, after, quiet, create);
}

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
  if (info.schema && info.origin == KindOrigin::builtin) {
    // As Go decodes resource.Quantity (and writes it back): a malformed one is a decoding error.
    if (auto bad = info.schema->canonicalize_quantities(value)) {
      obj = std::move(value.get_object());
      return api_error(Errc::bad_request, info.kind + " in version \"" + info.version +
                                              "\" cannot be handled as a " + info.kind + ": " +
                                              *bad);
    }
  }
  if (info.schema) info.schema->apply_defaults(value);
  obj = std::move(value.get_object());
  if (info.hooks.set_defaults) info.hooks.set_defaults(obj);
  if (create && info.hooks.prepare_for_create) info.hooks.prepare_for_create(obj);
  if (create && info.hooks.record_requester && query.user) {
    info.hooks.record_requester(obj, *query.user);
  }
  return std::nullopt;
}

// Why a written object must not be stored: every rule it breaks (the schema's, then names and
// labels, then the kind's own) as one 422 Invalid; or, for a built-in kind holding a value of the
// wrong type, the 400 decoding error Go would have given (for the first such field).
std::optional<ApiError> check_written(const ResourceInfo& info, const std::string& name,
                                      json::object& obj, const json::object* old,
                                      std::vector<std::string>* warnings,
                                      std::string_view subresource) {
  std::vector<Cause> causes;
  if (info.schema) {
    json::value value(std::move(obj));
    causes = info.schema->validate(value, {}, old, warnings);
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
  if (old != nullptr && info.hooks.validate_update_path) {
    info.hooks.validate_update_path(obj, *old, subresource, causes);
  }
  if (causes.empty()) {
    // Stored as Go's JSON writes the kind's struct: with the structs that are no pointers and
    // the zero scalars of fields without omitempty (`status: {loadBalancer: {}}`, a node's
    // nodeInfo strings), added once the object is valid: a required field the body left out
    // is refused as missing, as kube's validation refuses its zero.
    if (info.origin == KindOrigin::builtin) write_zero_fields(info.api_version(), info.kind, obj);
    return std::nullopt;
  }
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

bool same_member(const json::object& a, const json::object& b, std::string_view key,
                 bool builtin) {
  const json::value* x = a.if_contains(key);
  const json::value* y = b.if_contains(key);
  if (builtin) {
    static const json::value null;
    // As Go's decoded objects compare: stored built-in objects hold Go's nulls (a Role's
    // `rules: null`), which a decoded body has dropped until the write puts them back.
    return apimachinery::json_equal_as_decoded(x != nullptr ? *x : null, y != nullptr ? *y : null);
  }
  return x == nullptr ? y == nullptr : y != nullptr && *x == *y;
}

// Whether an update changes what the kind's `metadata.generation` counts (GenerationRule).
bool desired_state_changed(const ResourceInfo& info, const json::object& old_obj,
                           const json::object& new_obj) {
  const bool builtin = info.origin == KindOrigin::builtin;
  switch (info.generation) {
    case GenerationRule::none:
      return false;
    case GenerationRule::spec:
    case GenerationRule::spec_on_update:
      return !same_member(old_obj, new_obj, "spec", builtin);
    case GenerationRule::content_and_labels: {
      const json::object* old_meta = metadata_of(old_obj);
      const json::object* new_meta = metadata_of(new_obj);
      static const json::object none;
      if (!same_member(old_meta ? *old_meta : none, new_meta ? *new_meta : none, "labels",
                       builtin)) {
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
  for (const auto& [key, value] : old_obj) {
    if (counted(key) && !same_member(old_obj, new_obj, key, builtin)) return true;
  }
  for (const auto& [key, value] : new_obj) {
    if (counted(key) && !old_obj.contains(key) && !(builtin && value.is_null())) return true;
  }
  return false;
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
  // The allocator's cluster IPs and IP families (a secondary address added or released, the
  // families worked out), unless the state written over asks for another primary address.
  const std::string ip = string_field(&spec, "clusterIP");
  if (ip.empty() || ip == string_field(&from, "clusterIP")) {
    for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) {
      if (const json::value* v = from.if_contains(f)) {
        spec[f] = *v;
      } else {
        spec.erase(f);
      }
    }
  }
  if (const json::value* health = from.if_contains("healthCheckNodePort");
      health != nullptr && (!spec.contains("healthCheckNodePort") ||
                            spec.at("healthCheckNodePort") == 0)) {
    spec["healthCheckNodePort"] = *health;
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

// An allocator's 422 causes as the Service's Invalid Status.
ApiError with_context(const ResourceInfo& info, const std::string& name, ApiError e) {
  if (e.code == Errc::invalid && !e.causes.empty()) return invalid(info, name, std::move(e.causes));
  return e;
}

// NamespaceLifecycle's refusal of a create in a namespace that is being deleted.
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

}  // namespace kwatch::registry::detail
