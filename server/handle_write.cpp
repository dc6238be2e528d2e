// The writes of a resource: create, update, the four patch types (server-side apply among them),
// delete of one object or of a collection; the RBAC escalation guard on writes of roles and
// bindings.
#include "server/api_handler.hpp"

#include "apimachinery/json_body.hpp"
#include "apimachinery/yaml_body.hpp"
#include "auth/rbac_escalation.hpp"
#include "auth/rbac_policy_source.hpp"
#include "registry/resource_store.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"
#include "server/partial_metadata.hpp"
#include "server/table.hpp"

#include <boost/json/serialize.hpp>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using kinds::ResourceInfo;

namespace {

// An answer in the form its request negotiated (server/media_type.hpp): as it is, a Table, or
// its metadata only; a Status stays a Status. A form that does not fit (an object asked for as a
// list, or a list as an object) is kube's 406.
ApiResult<json::object> in_form(const ResourceInfo& info, const OutputForm& form,
                                IncludeObject table_include, json::object object) {
  const json::value* kind = object.if_contains("kind");
  const bool status = kind != nullptr && kind->is_string() && kind->get_string() == "Status";
  if (status || form.transform == Transform::none) return object;
  const bool is_list = kind != nullptr && kind->is_string() && kind->get_string() == info.list_kind();
  switch (form.transform) {
    case Transform::table: {
      json::object table = to_table(info, object, std::chrono::system_clock::now(), table_include);
      table["apiVersion"] = "meta.k8s.io/" + std::string(form.meta_version);
      return table;
    }
    case Transform::partial_object_metadata:
      if (is_list) return partial_metadata_mismatch(info, true);
      return partial_object_metadata(object, form.meta_version);
    case Transform::partial_object_metadata_list:
      if (!is_list) return partial_metadata_mismatch(info, false);
      return partial_object_metadata_list(object, form.meta_version);
    case Transform::none: break;
  }
  return object;
}

}  // namespace

// A store's answer as the response: the object in the form the request asked for, with
// `ok_status`, or its error; a write's warnings and the revision it wrote (`write`'s, or
// `written_revision` for a delete), also when the answer's form does not fit.
ApiResponse ApiHandler::render(const Route& route, ApiResult<json::object> r, unsigned ok_status,
                               const registry::WriteQuery* write, std::int64_t written_revision) {
  const bool done = r.has_value();
  if (done) r = in_form(*route.info, route.form, route.table_include, std::move(*r));
  ApiResponse response = r ? json_response(ok_status, *r) : error_response(r.error());
  if (write != nullptr && write->warnings) response.warnings = std::move(*write->warnings);
  if (write != nullptr && write->audit_annotations) {
    response.audit_annotations = std::move(*write->audit_annotations);
  }
  if (write != nullptr && write->written_revision) written_revision = *write->written_revision;
  if (done) response.written_revision = written_revision;
  return response;
}

namespace {

// A delete's admission warnings and audit annotations, in its response.
ApiResponse with_admission_report(ApiResponse response, const registry::DeleteQuery& q) {
  if (q.warnings) response.warnings = std::move(*q.warnings);
  if (q.audit_annotations) response.audit_annotations = std::move(*q.audit_annotations);
  return response;
}

}  // namespace

asio::awaitable<ApiResponse> ApiHandler::serve_create(const ApiRequest& request, const Url& url,
                                                      Route& route) {
  const ResourceInfo& info = *route.info;
  const std::string& m = request.method;
  const bool named = !route.name.empty();
  route.verb = "create";
  if (named) co_return method_not_allowed(m);
  auto q = write_query(url, "", route.user);
  if (!q) co_return error_response(q.error());
  if (auto e = set_field_manager(*q, url, request, "CreateOptions", false)) {
    co_return error_response(*e);
  }
  auto body = parse_object(request, info.kind);
  if (!body) co_return error_response(body.error());
  find_duplicates(request, *body, *q);
  auto created = co_await store_->create(info, route.ns, std::move(*body), *q);
  co_return render(route, std::move(created), 201, &*q);
}

asio::awaitable<ApiResponse> ApiHandler::serve_update(const ApiRequest& request, const Url& url,
                                                      Route& route) {
  const ResourceInfo& info = *route.info;
  const std::string& m = request.method;
  const bool named = !route.name.empty();
  route.verb = "update";
  if (!named) co_return method_not_allowed(m);
  auto q = write_query(url, route.subresource, route.user);
  if (!q) co_return error_response(q.error());
  if (auto e = set_field_manager(*q, url, request, "UpdateOptions", false)) {
    co_return error_response(*e);
  }
  auto body = parse_object(request, info.kind);
  if (!body) co_return error_response(body.error());
  find_duplicates(request, *body, *q);
  auto updated = co_await store_->update(info, route.ns, route.name, std::move(*body), *q);
  co_return render(route, std::move(updated), 200, &*q);
}

// PATCH in the four patch types, server-side apply among them.
asio::awaitable<ApiResponse> ApiHandler::serve_patch(const ApiRequest& request, const Url& url,
                                                     Route& route) {
  const ResourceInfo& info = *route.info;
  const std::string& m = request.method;
  const bool named = !route.name.empty();
  route.verb = "patch";
  if (!named) co_return method_not_allowed(m);
  const std::string type = media_type(request.content_type);
  registry::PatchType patch_type;
  if (type == "application/json-patch+json") {
    patch_type = registry::PatchType::json;
  } else if (type == "application/merge-patch+json") {
    patch_type = registry::PatchType::merge;
  } else if (type == "application/strategic-merge-patch+json") {
    patch_type = registry::PatchType::strategic_merge;
  } else if (type == "application/apply-patch+yaml" || type == "application/apply-patch+json") {
    patch_type = registry::PatchType::apply;
  } else {
    co_return error_response({Errc::unsupported_media_type,
                              "the body of the request was in an unknown format - accepted "
                              "media types include: application/json-patch+json, "
                              "application/merge-patch+json, "
                              "application/strategic-merge-patch+json, "
                              "application/apply-patch+yaml",
                              {}});
  }
  auto q = write_query(url, route.subresource, route.user);
  if (!q) co_return error_response(q.error());
  const bool apply = patch_type == registry::PatchType::apply;
  if (auto e = set_field_manager(*q, url, request, "PatchOptions", apply)) {
    co_return error_response(*e);
  }
  auto patch = apply ? apimachinery::parse_yaml_body(request.body)
                     : apimachinery::parse_json_body(request.body);
  if (!patch) co_return error_response(patch.error());
  if (apply && !patch->is_object()) {
    co_return error_response(apimachinery::api_error(Errc::bad_request,
                                                 "error decoding YAML: the apply patch is not a map"));
  }
  if (apply) {
    bool created = false;
    auto r = co_await store_->apply(info, route.ns, route.name, std::move(patch->get_object()),
                                    *q, &created);
    co_return render(route, std::move(r), created ? 201 : 200, &*q);
  }
  auto patched =
      co_await store_->patch(info, route.ns, route.name, patch_type, std::move(*patch), *q);
  co_return render(route, std::move(patched), 200, &*q);
}

// DELETE of one object or of a collection.
asio::awaitable<ApiResponse> ApiHandler::serve_delete(const ApiRequest& request, const Url& url,
                                                      Route& route) {
  const ResourceInfo& info = *route.info;
  const bool named = !route.name.empty();
  if (!named && !info.deletes_collections) {
    // Namespaces: deleted one by one (kube routes no collection delete for them).
    route.verb = "deletecollection";
    co_return method_not_allowed(request.method);
  }
  auto q = delete_query(request, url, route.user);
  if (!q) co_return error_response(q.error());
  if (named) {
    route.verb = "delete";
    auto removed = co_await store_->remove(info, route.ns, route.name, *q);
    co_return with_admission_report(
        render(route, std::move(removed), 200, nullptr, *q->written_revision), *q);
  }
  route.verb = "deletecollection";
  auto lq = registry::compile_list_query(info, list_query(url));
  if (!lq) co_return error_response(lq.error());
  auto removed = co_await store_->remove_collection(info, route.ns, std::move(*lq), *q);
  co_return with_admission_report(
      render(route, std::move(removed), 200, nullptr, *q->written_revision), *q);
}

}  // namespace kwatch::server
