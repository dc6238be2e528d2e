#include "server/request_options.hpp"

#include "apimachinery/cbor.hpp"
#include "apimachinery/json_body.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/base64.hpp"
#include "kinds/scheme.hpp"
#include "schema/managed_fields.hpp"
#include "schema/protobuf_decoder.hpp"

#include <boost/json/monotonic_resource.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using kinds::ResourceInfo;

namespace {

// A DeleteOptions that kube's ValidateDeleteOptions refuses: 422 naming the field.
apimachinery::ApiError invalid_delete_options(std::string cause_type, std::string message) {
  apimachinery::ApiError e(Errc::invalid,
                       "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: " + message,
                       {{std::move(cause_type), std::move(message), "propagationPolicy"}});
  e.group = "meta.k8s.io";
  e.kind = "DeleteOptions";
  return e;
}

// A JSON value's type as Go's decoder names it in its errors.
std::string_view json_type_name(const json::value& v) {
  if (v.is_string()) return "string";
  if (v.is_bool()) return "bool";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  return "number";
}

}  // namespace

// A boolean query parameter as kube's parameter codec reads it: absent, "0" or any case of
// "false" is false; anything else (an empty value too) is true.
bool truthy(const std::optional<std::string>& v) {
  if (!v || *v == "0") return false;
  return !(v->size() == 5 && std::equal(v->begin(), v->end(), "false", [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == b;
  }));
}

// The media type without parameters, lowercased.
std::string media_type(std::string_view content_type) {
  std::string out(content_type.substr(0, content_type.find(';')));
  while (!out.empty() && out.back() == ' ') out.pop_back();
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A body in CBOR (apimachinery/cbor.hpp): an object whose byte strings become base64 where its
// kind has a Go []byte field and must be UTF-8 text everywhere else, and which then keeps the
// rules of a JSON body (apimachinery/stored_json.hpp); null reads as an empty object, as in JSON.
template <class Unrecognized>
ApiResult<json::object> parse_cbor_object(std::string_view body, const Unrecognized& unrecognized) {
  std::string why;
  apimachinery::CborByteStrings byte_strings;
  json::value v = apimachinery::parse_cbor(body, why, &byte_strings);
  if (!why.empty()) return unrecognized("cbor: " + why);
  if (v.is_null()) return json::object();
  if (!v.is_object()) return unrecognized("cbor: the body is no map to read apiVersion and kind from");
  json::object& obj = v.get_object();
  auto name = [&](std::string_view key) {
    const json::value* m = obj.if_contains(key);
    return m != nullptr && m->is_string() ? std::string(m->get_string()) : std::string();
  };
  apimachinery::CborByteStrings go_bytes;
  schema::collect_byte_strings(name("apiVersion"), name("kind"), obj, go_bytes);
  for (const json::value* s : byte_strings) {
    auto* value = const_cast<json::value*>(s);
    if (go_bytes.contains(s)) {
      *value = json::string(base::base64_encode(value->get_string()));
    }
  }
  // Everything else keeps a JSON body's rules (depth, UTF-8 text, numbers).
  if (auto problem = apimachinery::json_problem(v)) {
    return unrecognized("cbor: " + problem->message());
  }
  return std::move(obj);
}

// A request's object is allocated from an arena of its own, released with the last object made
// from it (the response).
ApiResult<json::object> parse_object(const ApiRequest& request, std::string_view kind) {
  const std::string type = media_type(request.content_type);
  if (type == schema::kProtobufMediaType) return schema::decode_protobuf_object(request.body);
  const bool cbor = type == apimachinery::kCborMediaType;
  if (!type.empty() && type != "application/json" && type != "*/*" && !cbor) {
    return apimachinery::api_error(Errc::unsupported_media_type,
                               "the body of the request was in an unknown format - accepted "
                               "media types include: application/json, "
                               "application/vnd.kubernetes.protobuf, application/cbor");
  }
  // A body that does not decode, as kube-apiserver's decoder says it: why, and how it starts.
  const auto unrecognized = [&](std::string_view why) {
    return apimachinery::api_error(
        Errc::bad_request, "the object provided is unrecognized (must be of type " +
                               std::string(kind) + "): " + std::string(why) + " (" +
                               apimachinery::summarize_body(request.body) + ")");
  };
  if (cbor) return parse_cbor_object(request.body, unrecognized);
  auto v = apimachinery::parse_json_body(
      request.body, json::make_shared_resource<json::monotonic_resource>(request.body.size() * 2));
  if (!v) {
    if (request.body.empty()) return v.error();
    return unrecognized(v.error().message);
  }
  // `null` decodes into Go's zero object: an empty one.
  if (v->is_null()) return json::object(v->storage());
  if (!v->is_object()) {
    // What Go's decoder says when the body is no object to read apiVersion and kind from.
    return unrecognized(std::string("couldn't get version/kind; json parse error: json: cannot "
                                    "unmarshal ") + std::string(json_type_name(*v)) +
                        " into Go value of type struct { APIVersion string "
                        "\"json:\\\"apiVersion,omitempty\\\"\"; Kind string "
                        "\"json:\\\"kind,omitempty\\\"\" }");
  }
  return std::move(v->get_object());
}

ApiResult<registry::WriteQuery> write_query(const Url& url, const std::string& subresource,
                                            const apimachinery::UserInfo& user) {
  registry::WriteQuery q;
  q.subresource = subresource;
  q.user = std::make_shared<const apimachinery::UserInfo>(user);
  q.written_revision = std::make_shared<std::int64_t>(0);
  for (auto [it, end] = url.query.equal_range("dryRun"); it != end; ++it) {
    if (it->second == "All") {
      q.dry_run = true;
    } else if (!it->second.empty()) {
      return apimachinery::api_error(Errc::bad_request, "Invalid dryRun value: " + it->second +
                                                         "; supported values: All");
    }
  }
  const std::string fv = url.param("fieldValidation").value_or("");
  q.requested_field_validation = fv;
  if (fv == "Ignore") {
    q.field_validation = registry::FieldValidation::ignore;
  } else if (fv == "Strict") {
    q.field_validation = registry::FieldValidation::strict;
  } else if (fv == "Warn" || fv.empty()) {
    q.field_validation = registry::FieldValidation::warn;
  } else {
    return apimachinery::api_error(Errc::bad_request,
                               "fieldValidation must be one of Ignore, Warn or Strict, got " + fv);
  }
  q.warnings = std::make_shared<std::vector<std::string>>();
  q.audit_annotations = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  return q;
}

// Who a write is recorded under (fieldManager, else the User-Agent's product) and, for apply
// patches, `force`; 422 for what kube's options validation refuses. `options` names the
// request's options kind in errors.
std::optional<ApiError> set_field_manager(registry::WriteQuery& q, const Url& url,
                                          const ApiRequest& request, const std::string& options,
                                          bool apply) {
  const std::optional<std::string> manager = url.param("fieldManager");
  q.field_manager = manager ? *manager : schema::manager_from_user_agent(request.user_agent);
  q.requested_field_manager = manager.value_or("");
  if (auto e = schema::check_field_manager(manager.value_or(""), apply, options)) return e;
  if (auto force = url.param("force")) {
    if (!apply) {
      ApiError e(Errc::invalid,
                 options + ".meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified "
                           "for non-apply patch",
                 {{"FieldValueForbidden", "Forbidden: may not be specified for non-apply patch",
                   "force"}});
      e.group = "meta.k8s.io";
      e.kind = options;
      return e;
    }
    // Go's strconv.ParseBool, as kube decodes the parameter (Python clients send "True").
    static constexpr std::string_view kTrue[] = {"1", "t", "T", "TRUE", "true", "True"};
    static constexpr std::string_view kFalse[] = {"0", "f", "F", "FALSE", "false", "False"};
    if (std::find(std::begin(kTrue), std::end(kTrue), *force) != std::end(kTrue)) {
      q.force = true;
    } else if (std::find(std::begin(kFalse), std::end(kFalse), *force) == std::end(kFalse)) {
      return apimachinery::api_error(Errc::bad_request, "invalid value for force: " + *force);
    }
  }
  return std::nullopt;
}

// The list and watch parameters as sent; registry/list_query.hpp checks them.
registry::ListQuery list_query(const Url& url) {
  registry::ListQuery q;
  q.label_selector = url.param("labelSelector").value_or("");
  q.field_selector = url.param("fieldSelector").value_or("");
  q.limit = url.param("limit").value_or("");
  q.continue_token = url.param("continue").value_or("");
  q.resource_version = url.param("resourceVersion").value_or("");
  q.resource_version_match = url.param("resourceVersionMatch").value_or("");
  q.send_initial_events = url.param("sendInitialEvents").value_or("");
  // A bare `allowWatchBookmarks` asks for them too.
  if (auto b = url.param("allowWatchBookmarks")) q.allow_watch_bookmarks = b->empty() ? "true" : *b;
  q.timeout_seconds = url.param("timeoutSeconds").value_or("");
  return q;
}

// The fields of a DeleteOptions object (a DELETE's body, an Eviction's deleteOptions) into `q`;
// `propagation` is left for check_propagation. A value of the wrong type is a 400 in the words of
// Go's decoder; null is unset.
std::optional<ApiError> read_delete_options(const json::object& opts, registry::DeleteQuery& q,
                                            std::optional<std::string>& propagation) {
  auto wrong = [](const json::value& v, std::string_view field, std::string_view go_type) {
    return apimachinery::api_error(Errc::bad_request,
                               "json: cannot unmarshal " + std::string(json_type_name(v)) +
                                   " into Go struct field DeleteOptions." + std::string(field) +
                                   " of type " + std::string(go_type));
  };
  auto member = [&](const json::object& o, std::string_view key) -> const json::value* {
    const json::value* v = o.if_contains(key);
    return v != nullptr && !v->is_null() ? v : nullptr;
  };
  if (const json::value* pre = member(opts, "preconditions")) {
    if (!pre->is_object()) return wrong(*pre, "preconditions", "v1.Preconditions");
    if (const json::value* uid = member(pre->get_object(), "uid")) {
      if (!uid->is_string()) return wrong(*uid, "preconditions.uid", "types.UID");
      q.uid = std::string(uid->get_string());
    }
    if (const json::value* rv = member(pre->get_object(), "resourceVersion")) {
      if (!rv->is_string()) return wrong(*rv, "preconditions.resourceVersion", "string");
      q.resource_version = std::string(rv->get_string());
    }
  }
  if (const json::value* ignore =
          member(opts, "ignoreStoreReadErrorWithClusterBreakingPotential")) {
    if (!ignore->is_bool()) {
      return wrong(*ignore, "ignoreStoreReadErrorWithClusterBreakingPotential", "bool");
    }
    if (ignore->get_bool()) q.ignore_read_errors = true;
  }
  if (const json::value* dry = member(opts, "dryRun")) {
    if (!dry->is_array()) return wrong(*dry, "dryRun", "[]string");
    for (const auto& d : dry->get_array()) {
      if (!d.is_string()) return wrong(d, "dryRun", "string");
      if (d.get_string() == "All") {
        q.dry_run = true;
      } else {
        return apimachinery::api_error(Errc::bad_request,
                                   "Invalid dryRun value: " + std::string(d.get_string()) +
                                       "; supported values: All");
      }
    }
  }
  if (const json::value* p = member(opts, "propagationPolicy")) {
    if (!p->is_string()) return wrong(*p, "propagationPolicy", "v1.DeletionPropagation");
    propagation = std::string(p->get_string());
  }
  if (const json::value* o = member(opts, "orphanDependents")) {
    if (!o->is_bool()) return wrong(*o, "orphanDependents", "bool");
    q.orphan_dependents = o->get_bool();
  }
  if (const json::value* g = member(opts, "gracePeriodSeconds")) {
    if (!g->is_int64()) return wrong(*g, "gracePeriodSeconds", "int64");
    q.grace_period_seconds = g->get_int64();
  }
  return std::nullopt;
}

// The propagation policy, as kube's ValidateDeleteOptions checks it.
std::optional<ApiError> check_propagation(registry::DeleteQuery& q,
                                          const std::optional<std::string>& propagation) {
  if (!propagation) return std::nullopt;
  q.propagation = registry::parse_propagation(*propagation);
  if (!q.propagation) {
    return invalid_delete_options(
        "FieldValueNotSupported",
        "Unsupported value: \"" + *propagation +
            "\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"");
  }
  if (q.orphan_dependents) {
    return invalid_delete_options(
        "FieldValueInvalid", "Invalid value: \"" + *propagation +
                                 "\": orphanDependents and deletionPropagation cannot be both set");
  }
  return std::nullopt;
}

ApiResult<registry::DeleteQuery> delete_query(const ApiRequest& request, const Url& url,
                                              const apimachinery::UserInfo& user) {
  registry::DeleteQuery q;
  auto w = write_query(url, "", user);
  if (!w) return w.error();
  q.dry_run = w->dry_run;
  q.user = std::move(w->user);
  q.written_revision = std::move(w->written_revision);
  q.warnings = std::move(w->warnings);
  q.audit_annotations = std::move(w->audit_annotations);
  q.ignore_read_errors = truthy(url.param("ignoreStoreReadErrorWithClusterBreakingPotential"));
  // DeleteOptions come as query parameters, as a body, or both (the body wins).
  std::optional<std::string> propagation = url.param("propagationPolicy");
  if (auto o = url.param("orphanDependents")) q.orphan_dependents = truthy(o);
  if (auto g = url.param("gracePeriodSeconds")) {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(g->data(), g->data() + g->size(), n);
    if (ec != std::errc() || end != g->data() + g->size()) {
      return apimachinery::api_error(Errc::bad_request, "invalid gracePeriodSeconds: " + *g);
    }
    q.grace_period_seconds = n;
  }
  if (!request.body.empty()) {
    auto parsed = parse_object(request, "DeleteOptions");  // JSON, or protobuf (typed Go clients)
    if (!parsed) return parsed.error();
    if (auto e = read_delete_options(*parsed, q, propagation)) return *e;
  }
  if (auto e = check_propagation(q, propagation)) return *e;
  return q;
}

// Duplicate members of a JSON body matter only when fieldValidation reports them.
void find_duplicates(const ApiRequest& request, const json::object& body,
                     registry::WriteQuery& query) {
  if (query.field_validation == registry::FieldValidation::ignore) return;
  // Not JSON text: protobuf has no duplicates, CBOR's are refused as it is read.
  const std::string type = media_type(request.content_type);
  if (type == schema::kProtobufMediaType || type == apimachinery::kCborMediaType) return;
  query.duplicate_fields = apimachinery::duplicate_fields(request.body, body);
}

// The verb of a request that names no resource, as kube's authorizer sees it.
std::string lowercase_verb(const std::string& method) {
  if (method == "HEAD") return "get";
  std::string out = method;
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// kube's verb for a request of a resource, from its method and the path's shape.
std::string resource_verb(const std::string& method, bool named, bool watch) {
  if (method == "GET" || method == "HEAD") return watch ? "watch" : named ? "get" : "list";
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return named ? "delete" : "deletecollection";
  return lowercase_verb(method);
}

// kube's RequestInfo for a resource request: the verb from the method and the shape of the
// path (a name or not, a watch or not).
auth::RequestAttributes resource_attributes(const ApiRequest& request, const Url& url,
                                                const ResourceInfo& info, const std::string& ns,
                                                const std::string& name,
                                                const std::string& subresource, bool watch_prefix,
                                                const auth::UserInfo& user) {
  auth::RequestAttributes a;
  a.user = user;
  a.api_group = info.group;
  a.api_version = info.version;
  a.resource = info.resource;
  a.subresource = subresource;
  a.namespace_ = info.namespaced ? ns : std::string();
  a.name = name;
  const bool named = !name.empty();
  const std::string& m = request.method;
  const bool watch = watch_prefix || truthy(url.param("watch"));
  // The namespace of a namespace is itself (kube's RequestInfo): `view` bound in `team` may get
  // the namespace `team`.
  if (info.group.empty() && info.resource == "namespaces" && named) a.namespace_ = name;
  a.verb = resource_verb(m, named, watch);
  // A list or watch of one name (fieldSelector=metadata.name=x, as `kubectl get x -w` sends) is
  // authorized for that name, so resourceNames grants cover it.
  if ((a.verb == "list" || a.verb == "watch") && !named) {
    if (auto selector = url.param("fieldSelector")) {
      auto parsed = apimachinery::parse_field_selector(*selector);
      auto exact = parsed ? parsed->exact_value("metadata.name") : std::nullopt;
      if (exact && !exact->empty() && *exact != "." && *exact != ".." &&
          exact->find_first_of("/%") == std::string::npos) {
        a.name = *exact;
      }
    }
  }
  return a;
}

// kubectl asks for aggregated discovery first and takes the legacy documents otherwise.
bool wants_aggregated_discovery(const ApiRequest& request) {
  return request.accept.find("as=APIGroupDiscoveryList") != std::string::npos &&
         request.accept.find("g=apidiscovery.k8s.io") != std::string::npos &&
         request.accept.find("v=v2;") != std::string::npos;
}

}  // namespace kwatch::server
