#include "server/openapi_paths.hpp"

#include "kinds/scheme.hpp"
#include "schema/builtin_schemas.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>

namespace kwatch::server {

namespace json = boost::json;

namespace {

constexpr std::string_view kMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.";
constexpr std::string_view kRefPrefix = "#/components/schemas/";

json::object schema_ref(std::string_view definition) {
  return json::object{{"$ref", std::string(kRefPrefix) + std::string(definition)}};
}

// A query or path parameter with its description.
json::object parameter(std::string_view name, std::string_view in, std::string_view type,
                       std::string_view description) {
  json::object p{{"name", name}, {"in", in}};
  if (!description.empty()) p["description"] = description;
  if (in == "path") p["required"] = true;
  p["schema"] = json::object{{"type", type}, {"uniqueItems", true}};
  return p;
}

// A query parameter that is a field of the meta/v1 request options `options`, described as kube
// describes that field.
json::object option(std::string_view options, std::string_view name, std::string_view type) {
  const std::string definition = std::string(kMeta) + std::string(options);
  return parameter(name, "query", type, schema::builtin_description(definition, name));
}

// The query parameters of each verb, in kube's (alphabetical) order.
json::array list_parameters() {
  return json::array{option("ListOptions", "allowWatchBookmarks", "boolean"),
                     option("ListOptions", "continue", "string"),
                     option("ListOptions", "fieldSelector", "string"),
                     option("ListOptions", "labelSelector", "string"),
                     option("ListOptions", "limit", "integer"),
                     option("ListOptions", "resourceVersion", "string"),
                     option("ListOptions", "resourceVersionMatch", "string"),
                     option("ListOptions", "sendInitialEvents", "boolean"),
                     option("ListOptions", "timeoutSeconds", "integer"),
                     option("ListOptions", "watch", "boolean")};
}

json::array write_parameters(std::string_view options) {
  json::array out{option(options, "dryRun", "string"), option(options, "fieldManager", "string"),
                  option(options, "fieldValidation", "string")};
  if (options == "PatchOptions") out.push_back(option(options, "force", "boolean"));
  return out;
}

json::array delete_parameters(bool collection) {
  json::array out;
  auto add_list = [&](std::string_view name, std::string_view type) {
    if (collection) out.push_back(option("ListOptions", name, type));
  };
  add_list("continue", "string");
  out.push_back(option("DeleteOptions", "dryRun", "string"));
  add_list("fieldSelector", "string");
  out.push_back(option("DeleteOptions", "gracePeriodSeconds", "integer"));
  out.push_back(option("DeleteOptions", "ignoreStoreReadErrorWithClusterBreakingPotential", "boolean"));
  add_list("labelSelector", "string");
  add_list("limit", "integer");
  out.push_back(option("DeleteOptions", "orphanDependents", "boolean"));
  out.push_back(option("DeleteOptions", "propagationPolicy", "string"));
  add_list("resourceVersion", "string");
  add_list("resourceVersionMatch", "string");
  add_list("sendInitialEvents", "boolean");
  add_list("timeoutSeconds", "integer");
  return out;
}

json::object content(const json::object& schema, bool stream) {
  json::object out{{"application/json", json::object{{"schema", schema}}},
                   {"application/yaml", json::object{{"schema", schema}}}};
  if (stream) out["application/json;stream=watch"] = json::object{{"schema", schema}};
  return out;
}

json::object answer(std::string_view description, const json::object& schema, bool stream = false) {
  return json::object{{"description", description}, {"content", content(schema, stream)}};
}

json::object unauthorized() { return json::object{{"description", "Unauthorized"}}; }

struct Target {
  std::string gv;          // "CoreV1", "AppsV1"
  std::string tag;         // "core_v1"
  json::object gvk;        // x-kubernetes-group-version-kind
  std::string kind;        // in the operation IDs and descriptions
  std::string definition;  // the kind's
};

json::object operation(const Target& t, std::string_view verb, std::string_view rest,
                       std::string description, std::string_view action, json::array params,
                       json::object responses) {
  json::object op{{"tags", json::array{json::value(t.tag)}},
                  {"description", std::move(description)},
                  {"operationId", std::string(verb) + t.gv + std::string(rest)}};
  if (!params.empty()) op["parameters"] = std::move(params);
  op["responses"] = std::move(responses);
  op["x-kubernetes-action"] = action;
  op["x-kubernetes-group-version-kind"] = t.gvk;
  return op;
}

json::object body(const json::object& schema, bool required) {
  json::object b{{"content", json::object{{"*/*", json::object{{"schema", schema}}}}}};
  if (required) b["required"] = true;
  return b;
}

// The patch types a resource takes: custom resources have no strategic merge patch, and kubectl
// reads that list to choose how it patches (client-side apply of a custom resource must send a
// merge patch).
json::object patch_body(bool strategic) {
  json::object types;
  for (const char* t : {"application/apply-patch+yaml", "application/json-patch+json",
                        "application/merge-patch+json", "application/strategic-merge-patch+json"}) {
    if (!strategic && std::string_view(t) == "application/strategic-merge-patch+json") continue;
    types[t] = json::object{{"schema", schema_ref(std::string(kMeta) + "Patch")}};
  }
  return json::object{{"content", std::move(types)}, {"required", true}};
}

constexpr std::string_view kWatchListNote =
    ". deprecated: use the 'watch' parameter with a list operation instead.";
constexpr std::string_view kWatchNote =
    ". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single "
    "item with the 'fieldSelector' parameter.";

}  // namespace

std::string operation_id_part(std::string_view text, bool capitalize_first) {
  std::string out;
  bool capitalize = capitalize_first;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isalpha(c) || c == '_' || (i != 0 && std::isdigit(c))) {
      out.push_back(capitalize ? static_cast<char>(std::toupper(c)) : static_cast<char>(c));
      capitalize = false;
    } else {
      capitalize = true;
    }
  }
  return out;
}

json::object openapi_v3_paths(const std::vector<std::shared_ptr<const kinds::ResourceInfo>>& resources,
                              const DefinitionName& definition) {
  json::object paths;
  for (const auto& r : resources) {
    std::string group = r->group.empty() ? "core" : r->group;
    if (group.ends_with(".k8s.io")) group.resize(group.size() - 7);
    Target t;
    t.gv = operation_id_part(group, true) + operation_id_part(r->version, true);
    t.tag = operation_id_part(group, false) + "_" + operation_id_part(r->version, false);
    t.gvk = json::object{{"group", r->group}, {"kind", r->kind}, {"version", r->version}};
    t.kind = r->kind;
    t.definition = definition(*r);
    const json::object kind_ref = schema_ref(t.definition);
    const json::object list_ref = schema_ref(t.definition + "List");
    const json::object status_ref = schema_ref(std::string(kMeta) + "Status");
    const json::object event_ref = schema_ref(std::string(kMeta) + "WatchEvent");
    const std::string base = r->group.empty() ? "/api/" + r->version
                                              : "/apis/" + r->group + "/" + r->version;
    const std::string scope = r->namespaced ? "Namespaced" : "";
    const std::string ns_path = r->namespaced ? "/namespaces/{namespace}" : "";
    json::array collection_params;
    if (r->namespaced) {
      collection_params.push_back(parameter("namespace", "path", "string",
                                            "object name and auth scope, such as for teams and projects"));
    }
    collection_params.push_back(parameter(
        "pretty", "query", "string",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent "
        "indicates a browser or command-line HTTP tool (curl and wget)."));
    json::array object_params{parameter("name", "path", "string", "name of the " + r->kind)};
    for (const auto& p : collection_params) object_params.push_back(p);

    // The collection.
    json::object collection{
        {"get", operation(t, "list", scope + r->kind, "list or watch objects of kind " + r->kind,
                          "list", list_parameters(),
                          json::object{{"200", answer("OK", list_ref, true)},
                                       {"401", unauthorized()}})}};
    {
      json::object create = operation(
          t, "create", scope + r->kind, "create a " + r->kind, "post", write_parameters("CreateOptions"),
          json::object{{"200", answer("OK", kind_ref)}, {"201", answer("Created", kind_ref)},
                       {"202", answer("Accepted", kind_ref)}, {"401", unauthorized()}});
      create["requestBody"] = body(kind_ref, true);
      collection["post"] = std::move(create);
    }
    if (r->deletes_collections) {
      json::object del = operation(t, "delete", "Collection" + scope + r->kind,
                                   "delete collection of " + r->kind, "deletecollection",
                                   delete_parameters(true),
                                   json::object{{"200", answer("OK", status_ref)},
                                                {"401", unauthorized()}});
      del["requestBody"] = body(schema_ref(std::string(kMeta) + "DeleteOptions"), false);
      collection["delete"] = std::move(del);
    }
    collection["parameters"] = collection_params;
    paths[base + ns_path + "/" + r->resource] = std::move(collection);

    // One object.
    json::object object{{"get", operation(t, "read", scope + r->kind, "read the specified " + r->kind,
                                          "get", {}, json::object{{"200", answer("OK", kind_ref)},
                                                                  {"401", unauthorized()}})}};
    {
      json::object replace = operation(
          t, "replace", scope + r->kind, "replace the specified " + r->kind, "put",
          write_parameters("UpdateOptions"),
          json::object{{"200", answer("OK", kind_ref)}, {"201", answer("Created", kind_ref)},
                       {"401", unauthorized()}});
      replace["requestBody"] = body(kind_ref, true);
      object["put"] = std::move(replace);
      json::object patch = operation(
          t, "patch", scope + r->kind, "partially update the specified " + r->kind, "patch",
          write_parameters("PatchOptions"),
          json::object{{"200", answer("OK", kind_ref)}, {"201", answer("Created", kind_ref)},
                       {"401", unauthorized()}});
      patch["requestBody"] = patch_body(r->origin != kinds::KindOrigin::custom);
      object["patch"] = std::move(patch);
      const json::object& deleted = r->delete_returns_object ? kind_ref : status_ref;
      json::object del = operation(t, "delete", scope + r->kind, "delete a " + r->kind, "delete",
                                   delete_parameters(false),
                                   json::object{{"200", answer("OK", deleted)},
                                                {"202", answer("Accepted", deleted)},
                                                {"401", unauthorized()}});
      del["requestBody"] = body(schema_ref(std::string(kMeta) + "DeleteOptions"), false);
      object["delete"] = std::move(del);
    }
    object["parameters"] = object_params;
    paths[base + ns_path + "/" + r->resource + "/{name}"] = std::move(object);

    // Across namespaces, and the deprecated /watch/ paths.
    json::array pretty_only{collection_params.back()};
    if (r->namespaced) {
      paths[base + "/" + r->resource] = json::object{
          {"get", operation(t, "list", r->kind + "ForAllNamespaces",
                            "list or watch objects of kind " + r->kind, "list", list_parameters(),
                            json::object{{"200", answer("OK", list_ref, true)},
                                         {"401", unauthorized()}})},
          {"parameters", pretty_only}};
      paths[base + "/watch/" + r->resource] = json::object{
          {"get", operation(t, "watch", r->kind + "ListForAllNamespaces",
                            "watch individual changes to a list of " + r->kind + std::string(kWatchListNote),
                            "watchlist", list_parameters(),
                            json::object{{"200", answer("OK", event_ref, true)},
                                         {"401", unauthorized()}})},
          {"parameters", pretty_only}};
    }
    paths[base + "/watch" + ns_path + "/" + r->resource] = json::object{
        {"get", operation(t, "watch", scope + r->kind + "List",
                          "watch individual changes to a list of " + r->kind + std::string(kWatchListNote),
                          "watchlist", list_parameters(),
                          json::object{{"200", answer("OK", event_ref, true)},
                                       {"401", unauthorized()}})},
        {"parameters", collection_params}};
    paths[base + "/watch" + ns_path + "/" + r->resource + "/{name}"] = json::object{
        {"get", operation(t, "watch", scope + r->kind,
                          "watch changes to an object of kind " + r->kind + std::string(kWatchNote),
                          "watch", list_parameters(),
                          json::object{{"200", answer("OK", event_ref, true)},
                                       {"401", unauthorized()}})},
        {"parameters", object_params}};

    // Subresources with a body of their own: status (the kind) and scale (autoscaling/v1 Scale).
    struct Sub {
      std::string_view name, word, title;
      bool present;
    };
    const Sub subs[] = {{"status", "Status", "status", r->has_status},
                        {"scale", "Scale", "scale", r->scale.has_value()}};
    for (const Sub& s : subs) {
      if (!s.present) continue;
      Target st = t;
      json::object sub_ref = kind_ref;
      if (s.name == "scale") {
        st.gvk = json::object{{"group", "autoscaling"}, {"kind", "Scale"}, {"version", "v1"}};
        sub_ref = schema_ref("io.k8s.api.autoscaling.v1.Scale");
      }
      const std::string rest = scope + r->kind + std::string(s.word);
      json::object item{{"get", operation(st, "read", rest,
                                          "read " + std::string(s.title) + " of the specified " + r->kind,
                                          "get", {}, json::object{{"200", answer("OK", sub_ref)},
                                                                  {"401", unauthorized()}})}};
      json::object replace = operation(
          st, "replace", rest, "replace " + std::string(s.title) + " of the specified " + r->kind, "put",
          write_parameters("UpdateOptions"),
          json::object{{"200", answer("OK", sub_ref)}, {"201", answer("Created", sub_ref)},
                       {"401", unauthorized()}});
      replace["requestBody"] = body(sub_ref, true);
      item["put"] = std::move(replace);
      json::object patch = operation(
          st, "patch", rest, "partially update " + std::string(s.title) + " of the specified " + r->kind,
          "patch", write_parameters("PatchOptions"),
          json::object{{"200", answer("OK", sub_ref)}, {"201", answer("Created", sub_ref)},
                       {"401", unauthorized()}});
      patch["requestBody"] = patch_body(r->origin != kinds::KindOrigin::custom);
      item["patch"] = std::move(patch);
      const std::string named = s.name == "scale" ? std::string("Scale") : r->kind;
      json::array params{parameter("name", "path", "string", "name of the " + named)};
      for (const auto& p : collection_params) params.push_back(p);
      item["parameters"] = std::move(params);
      paths[base + ns_path + "/" + r->resource + "/{name}/" + std::string(s.name)] = std::move(item);
    }
  }
  return paths;
}

namespace {

// A v3 reference as v2 writes it.
json::value v2_ref(const json::value& schema) {
  json::value out = schema;
  if (json::object* o = out.if_object()) {
    if (json::value* r = o->if_contains("$ref"); r != nullptr && r->is_string()) {
      std::string text(r->get_string());
      if (text.starts_with(kRefPrefix)) text = "#/definitions/" + text.substr(kRefPrefix.size());
      *r = text;
    }
  }
  return out;
}

json::object v2_parameter(const json::object& p) {
  json::object out;
  if (const json::value* s = p.if_contains("schema"); s != nullptr && s->is_object()) {
    for (const auto& [k, v] : s->get_object()) out[k] = v;
  }
  for (const char* key : {"description", "name", "in", "required"}) {
    if (const json::value* v = p.if_contains(key)) out[key] = *v;
  }
  return out;
}

json::array v2_parameters(const json::value* params) {
  json::array out;
  if (params == nullptr || !params->is_array()) return out;
  for (const auto& p : params->get_array()) {
    if (p.is_object()) out.push_back(v2_parameter(p.get_object()));
  }
  return out;
}

}  // namespace

json::object openapi_v2_paths(const json::object& v3_paths) {
  json::object out;
  for (const auto& [path, item_value] : v3_paths) {
    const json::object* item = item_value.if_object();
    if (item == nullptr) continue;
    json::object v2_item;
    for (const auto& [method, op_value] : *item) {
      if (method == "parameters") {
        v2_item["parameters"] = v2_parameters(&op_value);
        continue;
      }
      const json::object* op = op_value.if_object();
      if (op == nullptr) continue;
      json::object v2;
      json::array consumes{"*/*"};
      json::array params;
      if (const json::value* rb = op->if_contains("requestBody"); rb != nullptr && rb->is_object()) {
        const json::object& content = rb->get_object().at("content").as_object();
        consumes.clear();
        json::value schema;
        for (const auto& [type, media] : content) {
          consumes.push_back(json::value(type));
          schema = v2_ref(media.as_object().at("schema"));
        }
        json::object b{{"name", "body"}, {"in", "body"}, {"schema", schema}};
        if (const json::value* req = rb->get_object().if_contains("required")) b["required"] = *req;
        params.push_back(std::move(b));
      }
      for (auto& p : v2_parameters(op->if_contains("parameters"))) params.push_back(std::move(p));
      json::array produces;
      json::object responses;
      for (const auto& [code, resp_value] : op->at("responses").as_object()) {
        const json::object& resp = resp_value.as_object();
        json::object r{{"description", resp.at("description")}};
        if (const json::value* c = resp.if_contains("content"); c != nullptr && c->is_object()) {
          for (const auto& [type, media] : c->get_object()) {
            if (std::find(produces.begin(), produces.end(), json::value(type)) == produces.end()) {
              produces.push_back(json::value(type));
            }
            r["schema"] = v2_ref(media.as_object().at("schema"));
          }
        }
        responses[code] = std::move(r);
      }
      v2["consumes"] = std::move(consumes);
      v2["description"] = op->at("description");
      v2["operationId"] = op->at("operationId");
      if (!params.empty()) v2["parameters"] = std::move(params);
      v2["produces"] = std::move(produces);
      v2["responses"] = std::move(responses);
      v2["schemes"] = json::array{"https"};
      v2["tags"] = op->at("tags");
      for (const auto& [key, value] : *op) {
        if (key.starts_with("x-kubernetes-")) v2[key] = value;
      }
      v2_item[method] = std::move(v2);
    }
    out[path] = std::move(v2_item);
  }
  return out;
}

}  // namespace kwatch::server
