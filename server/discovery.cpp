#include "server/discovery.hpp"

#include "aggregator/api_service_proxy.hpp"
#include "apimachinery/json_members.hpp"
#include "apimachinery/kube_version.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/base64.hpp"
#include "base/sha256.hpp"

#include "kinds/api_service.hpp"
#include "kinds/subresources.hpp"
#include "schema/builtin_schemas.hpp"
#include "server/openapi_paths.hpp"
#include "server/openapi_v2.hpp"
#include "server/version.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>


#include <algorithm>
#include <functional>
#include <string_view>
#include <vector>

namespace kwatch::server {

namespace json = boost::json;
using kinds::ResourceInfo;
using kinds::Scheme;

namespace {

json::array strings(const std::vector<std::string>& values) {
  json::array out;
  for (const auto& v : values) out.push_back(json::string(v));
  return out;
}

json::object group_entry(const std::string& group, const std::string& version) {
  json::object gv{{"groupVersion", group + "/" + version}, {"version", version}};
  return json::object{{"name", group},
                      {"versions", json::array{gv}},
                      {"preferredVersion", gv}};
}

// Resources that are not stored but answered: the reviews (create only), in groups of their own,
// the core group's legacy `bindings` (server/handle_subresources.cpp), and the read-only
// `componentstatuses` (server/handle_component_status.cpp).
struct ReviewResource {
  const char* group;
  const char* resource;
  const char* kind;
  bool namespaced;
  bool read_only = false;  // get and list, not create
  const char* singular = "";
  const char* short_name = nullptr;
};
constexpr ReviewResource kReviews[] = {
    {"", "bindings", "Binding", true},
    {"", "componentstatuses", "ComponentStatus", false, true, "componentstatus", "cs"},
    {"authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", false},
    {"authentication.k8s.io", "tokenreviews", "TokenReview", false},
    {"authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", true},
    {"authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false},
    {"authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview", false},
    {"authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", false},
};


}  // namespace

namespace {

// The verbs of a stored resource, as discovery lists them.
json::array resource_verbs(const kinds::ResourceInfo& r) {
  json::array verbs{"create", "delete"};
  if (r.deletes_collections) verbs.push_back("deletecollection");
  for (const char* v : {"get", "list", "patch", "update", "watch"}) verbs.push_back(v);
  return verbs;
}

}  // namespace

std::string_view review_kind(std::string_view resource) {
  for (const auto& r : kReviews) {
    if (r.resource == resource) return r.kind;
  }
  return {};
}

namespace {

json::array review_entries(std::string_view group, std::string_view version) {
  json::array out;
  if (version != "v1") return out;
  for (const auto& review : kReviews) {
    if (group != review.group) continue;
    json::object entry{{"name", review.resource},
                       {"singularName", review.singular},
                       {"namespaced", review.namespaced},
                       {"kind", review.kind},
                       {"verbs", review.read_only ? json::array{"get", "list"}
                                                  : json::array{"create"}}};
    if (review.short_name != nullptr) entry["shortNames"] = json::array{review.short_name};
    out.push_back(std::move(entry));
  }
  return out;
}

json::array verb_list(const std::vector<std::string_view>& verbs) {
  json::array out;
  for (std::string_view v : verbs) out.emplace_back(v);
  return out;
}

}  // namespace

namespace {

// The group/version/kind objects of `r` are stored as: a custom resource's storage version;
// events.k8s.io's events live with the core group's (kube's cohabiting resources); another
// built-in resource in the first version of its group that serves it (autoscaling/v2 for
// autoscaling/v1's horizontalpodautoscalers).
std::string storage_group_version_kind(const Scheme& scheme, const kinds::ResourceInfo& r) {
  if (r.origin == kinds::KindOrigin::custom) {
    return r.group + "/" + (r.storage_version.empty() ? r.version : r.storage_version) + "/" +
           r.kind;
  }
  if (r.group == "events.k8s.io" && r.resource == "events") return "/v1/Event";
  for (const auto& gv : scheme.group_versions()) {
    if (gv.group == r.group && scheme.find(gv.group, gv.version, r.resource) != nullptr) {
      return r.group + "/" + gv.version + "/" + r.kind;
    }
  }
  return r.group + "/" + r.version + "/" + r.kind;
}

}  // namespace

std::string storage_version_hash(const Scheme& scheme, const kinds::ResourceInfo& r) {
  const std::string gvk = storage_group_version_kind(scheme, r);
  const base::Sha256 digest = base::sha256(gvk);
  return base::base64_encode(std::string_view(reinterpret_cast<const char*>(digest.data()), 8));
}

std::vector<kinds::GroupVersion> served_group_versions(const Scheme& scheme) {
  auto out = scheme.group_versions();
  for (const auto& review : kReviews) {
    bool known = false;
    for (const auto& gv : out) known = known || (gv.group == review.group && gv.version == "v1");
    if (!known) out.push_back({review.group, "v1"});
  }
  return out;
}

json::object api_versions(std::string_view server_address) {
  return json::object{
      {"kind", "APIVersions"},
      {"versions", json::array{"v1"}},
      {"serverAddressByClientCIDRs",
       json::array{json::object{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

namespace {

// The APIService priorities of a group/version, which discovery is ordered by: a remote
// APIService's own; for one served here, kube's table for built-in group/versions and 1000/100
// for a CustomResourceDefinition's (kinds/api_service.hpp); the aggregator's own group 20001, as
// kube-aggregator lists it first.
kinds::ApiServicePriority priority_of(const Scheme& scheme,
                                      const std::vector<aggregator::RemoteApiService>& remote,
                                      std::string_view group, std::string_view version) {
  for (const auto& r : remote) {
    if (r.group == group && r.version == version) {
      return {r.group_priority_minimum, r.version_priority};
    }
  }
  if (group == "apiregistration.k8s.io") return {20001, 15};
  if (auto p = kinds::builtin_api_service_priority(group, version)) return *p;
  for (const auto& r : scheme.resources(group, version)) {
    if (r->origin == kinds::KindOrigin::custom) return kinds::kCustomResourcePriority;
  }
  return {0, 0};
}

const json::string* group_name(const json::object& g) {
  const json::value* n = g.if_contains("name");
  if (n == nullptr) {
    const json::value* meta = g.if_contains("metadata");
    n = meta != nullptr && meta->is_object() ? meta->get_object().if_contains("name") : nullptr;
  }
  return n != nullptr ? n->if_string() : nullptr;
}

// Orders the groups of an APIGroupList (`aggregated` false) or an APIGroupDiscoveryList as
// kube does, and each group's versions: versions by versionPriority, then kube's version order;
// the legacy list's groups as kube-aggregator's /apis lists its APIServices (by
// groupPriorityMinimum, then by APIService name, "<version>.<group>"), the aggregated list's by
// the highest groupPriorityMinimum of their versions, then by name. The legacy list's preferred
// version is the first.
void order_groups(json::array& groups, bool aggregated, const Scheme& scheme,
                  const std::vector<aggregator::RemoteApiService>& remote) {
  struct Ranked {
    json::value group;
    std::int64_t priority;  // the group's
    std::string name;       // what ties are broken by
  };
  std::vector<Ranked> ranked;
  for (json::value& g : groups) {
    json::object* go = g.if_object();
    const json::string* name = go != nullptr ? group_name(*go) : nullptr;
    json::value* versions = go != nullptr ? go->if_contains("versions") : nullptr;
    if (name == nullptr || versions == nullptr || !versions->is_array()) {
      ranked.push_back(Ranked{std::move(g), INT64_MIN, ""});
      continue;
    }
    const std::string group(*name);
    const auto version_of = [](const json::value& v) {
      const json::value* text = v.is_object() ? v.get_object().if_contains("version") : nullptr;
      return text != nullptr && text->is_string() ? std::string_view(text->get_string())
                                                  : std::string_view();
    };
    // Each version's priorities looked up once (a lookup scans the remote list and the scheme).
    struct Version {
      kinds::ApiServicePriority priority;
      json::value entry;
    };
    std::vector<Version> found;
    for (json::value& v : versions->get_array()) {
      found.push_back(Version{priority_of(scheme, remote, group, version_of(v)), std::move(v)});
    }
    std::stable_sort(found.begin(), found.end(), [&](const Version& a, const Version& b) {
      if (a.priority.version_priority != b.priority.version_priority) {
        return a.priority.version_priority > b.priority.version_priority;
      }
      return apimachinery::compare_kube_aware_versions(version_of(a.entry), version_of(b.entry)) > 0;
    });
    json::array& list = versions->get_array();
    list.clear();
    Ranked r{json::value(), INT64_MIN, aggregated ? group : ""};
    for (Version& v : found) {
      const std::int64_t p = v.priority.group_priority_minimum;
      if (aggregated) {
        r.priority = std::max(r.priority, p);
      } else if (const std::string service = kinds::api_service_name(group, version_of(v.entry));
                 p > r.priority || (p == r.priority && service < r.name)) {
        // The group's first APIService in kube-aggregator's order places it.
        r.priority = p;
        r.name = service;
      }
      list.push_back(std::move(v.entry));
    }
    if (!aggregated && !list.empty()) (*go)["preferredVersion"] = list.front();
    r.group = std::move(g);
    ranked.push_back(std::move(r));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.name < b.name;
  });
  groups.clear();
  for (Ranked& r : ranked) groups.push_back(std::move(r.group));
}

const std::vector<aggregator::RemoteApiService> kNoRemote;

}  // namespace

void order_discovery(json::object& doc, const Scheme& scheme,
                     const std::vector<aggregator::RemoteApiService>& remote) {
  if (json::value* groups = doc.if_contains("groups"); groups != nullptr && groups->is_array()) {
    order_groups(groups->get_array(), false, scheme, remote);
  } else if (json::value* items = doc.if_contains("items"); items != nullptr && items->is_array()) {
    order_groups(items->get_array(), true, scheme, remote);
  }
}

// One APIGroup per group, its versions in kube's order; the first is the preferred one
// (autoscaling: v2, then v1).
json::array group_entries(const Scheme& scheme) {
  json::array groups;
  for (const auto& gv : served_group_versions(scheme)) {
    if (gv.group.empty()) continue;
    json::object* found = nullptr;
    for (auto& g : groups) {
      if (g.at("name") == json::value(gv.group)) found = &g.get_object();
    }
    if (found == nullptr) {
      groups.push_back(group_entry(gv.group, gv.version));
    } else {
      found->at("versions").get_array().push_back(
          json::object{{"groupVersion", gv.str()}, {"version", gv.version}});
    }
  }
  order_groups(groups, false, scheme, kNoRemote);
  return groups;
}

json::object api_group_list(const Scheme& scheme) {
  return json::object{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", group_entries(scheme)}};
}

std::optional<json::object> api_group(const Scheme& scheme, std::string_view group) {
  if (group.empty()) return std::nullopt;
  for (auto& g : group_entries(scheme)) {
    if (g.at("name") != json::value(group)) continue;
    json::object out = std::move(g.get_object());
    out["kind"] = "APIGroup";
    out["apiVersion"] = "v1";
    return out;
  }
  return std::nullopt;
}

std::optional<json::object> api_resource_list(const Scheme& scheme, std::string_view group,
                                              std::string_view version) {
  auto resources = scheme.resources(group, version);
  json::array list = review_entries(group, version);
  if (resources.empty() && list.empty()) return std::nullopt;
  for (const auto& r : resources) {
    json::object entry{{"name", r->resource},
                       {"singularName", r->singular},
                       {"namespaced", r->namespaced},
                       {"kind", r->kind},
                       {"verbs", resource_verbs(*r)}};
    if (!r->short_names.empty()) entry["shortNames"] = strings(r->short_names);
    if (!r->categories.empty()) entry["categories"] = strings(r->categories);
    entry["storageVersionHash"] = storage_version_hash(scheme, *r);
    list.push_back(std::move(entry));
    // Subresources by name, as kube lists them.
    auto subresources = kinds::subresources_of(*r);
    std::sort(subresources.begin(), subresources.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    for (const kinds::Subresource& sub : subresources) {
      json::object e{{"name", r->resource + "/" + std::string(sub.name)},
                     {"singularName", ""},
                     {"namespaced", r->namespaced}};
      if (!sub.group.empty()) {
        e["group"] = sub.group;
        e["version"] = sub.version;
      }
      e["kind"] = sub.kind.empty() ? std::string_view(r->kind) : sub.kind;
      e["verbs"] = verb_list(sub.verbs);
      list.push_back(std::move(e));
    }
  }
  std::string gv = group.empty() ? std::string(version)
                                 : std::string(group) + "/" + std::string(version);
  return json::object{{"kind", "APIResourceList"},
                      {"apiVersion", "v1"},
                      {"groupVersion", gv},
                      {"resources", list}};
}

json::object aggregated_discovery(const Scheme& scheme, bool core) {
  json::array items;
  for (const auto& gv : served_group_versions(scheme)) {
    if (gv.group.empty() != core) continue;
    json::array resources;
    for (const auto& entry : review_entries(gv.group, gv.version)) {
      const json::object& e = entry.as_object();
      json::object resource{
          {"resource", e.at("name")},
          {"responseKind", json::object{{"group", gv.group}, {"version", gv.version},
                                        {"kind", e.at("kind")}}},
          {"scope", e.at("namespaced").as_bool() ? "Namespaced" : "Cluster"},
          {"singularResource", e.at("singularName")},
          {"verbs", e.at("verbs")}};
      if (const json::value* s = e.if_contains("shortNames")) resource["shortNames"] = *s;
      resources.push_back(std::move(resource));
    }
    for (const auto& r : scheme.resources(gv.group, gv.version)) {
      json::object kind{{"group", r->group}, {"version", r->version}, {"kind", r->kind}};
      json::object entry{{"resource", r->resource},
                         {"responseKind", kind},
                         {"scope", r->namespaced ? "Namespaced" : "Cluster"},
                         {"singularResource", r->singular},
                         {"verbs", resource_verbs(*r)}};
      if (!r->short_names.empty()) entry["shortNames"] = strings(r->short_names);
      if (!r->categories.empty()) entry["categories"] = strings(r->categories);
      json::array subresources;
      for (const kinds::Subresource& sub : kinds::subresources_of(*r)) {
        json::object response =
            sub.kind.empty()
                ? kind
                : json::object{{"group", sub.group},
                               {"version", sub.version.empty() ? std::string_view("v1") : sub.version},
                               {"kind", sub.kind}};
        subresources.push_back(json::object{{"subresource", sub.name},
                                            {"responseKind", std::move(response)},
                                            {"verbs", verb_list(sub.verbs)}});
      }
      if (!subresources.empty()) entry["subresources"] = std::move(subresources);
      resources.push_back(std::move(entry));
    }
    json::object version{{"version", gv.version},
                         {"resources", std::move(resources)},
                         {"freshness", "Current"}};
    // One entry per group; a group served in several versions lists them all.
    json::object* group = nullptr;
    for (auto& item : items) {
      if (item.at("metadata").at("name") == json::value(gv.group)) group = &item.get_object();
    }
    if (group == nullptr) {
      items.push_back(json::object{
          {"metadata", json::object{{"name", gv.group}, {"creationTimestamp", nullptr}}},
          {"versions", json::array()}});
      group = &items.back().get_object();
    }
    group->at("versions").get_array().push_back(std::move(version));
  }
  order_groups(items, true, scheme, kNoRemote);
  return json::object{{"kind", "APIGroupDiscoveryList"},
                      {"apiVersion", "apidiscovery.k8s.io/v2"},
                      {"metadata", json::object()},
                      {"items", std::move(items)}};
}

json::object version_info() {
  return json::object{{"major", "1"},
                      {"minor", kKubernetesMinor},
                      {"gitVersion", std::string("v1.") + kKubernetesMinor + ".0-kwatch." +
                                         kKwatchVersion},
                      {"gitCommit", ""},
                      {"gitTreeState", "clean"},
                      {"buildDate", __DATE__},
                      {"goVersion", "none (kwatch, C++20)"},
                      {"compiler", "gcc"},
                      {"platform", "linux/amd64"}};
}

namespace {

std::string gv_path(std::string_view group, std::string_view version) {
  return group.empty() ? "api/" + std::string(version)
                       : "apis/" + std::string(group) + "/" + std::string(version);
}

// A custom resource's definition, named as kube names them: the group reversed, then version
// and kind (com.example.v1.Widget).
std::string definition_name(const kinds::ResourceInfo& r) {
  std::string name;
  std::string_view g = r.group;
  while (!g.empty()) {
    const auto dot = g.rfind('.');
    if (!name.empty()) name += '.';
    name += g.substr(dot == std::string_view::npos ? 0 : dot + 1);
    g = dot == std::string_view::npos ? std::string_view() : g.substr(0, dot);
  }
  return name + "." + r.version + "." + r.kind;
}

// A custom resource's list as kube's CRD builder publishes it.
json::object custom_resource_list_schema(const kinds::ResourceInfo& r) {
  const std::string kind_ref = "#/components/schemas/" + definition_name(r);
  return json::object{
      {"description", r.kind + "List is a list of " + r.kind},
      {"type", "object"},
      {"required", json::array{"items"}},
      {"properties",
       json::object{{"apiVersion", json::object{{"type", "string"}}},
                    {"items", json::object{{"type", "array"},
                                           {"items", json::object{{"$ref", kind_ref}}}}},
                    {"kind", json::object{{"type", "string"}}},
                    {"metadata", json::object{{"allOf", json::array{json::object{
                                     {"$ref", "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}}}}}}}},
      {"x-kubernetes-group-version-kind",
       json::array{json::object{{"group", r.group}, {"kind", r.kind + "List"}, {"version", r.version}}}}};
}

}  // namespace

std::optional<std::string> OpenApiDocuments::get(
    const Scheme& scheme, std::string_view path,
    const std::vector<aggregator::RemoteApiService>& remote) {
  std::shared_ptr<const std::map<std::string, std::string, std::less<>>> documents;
  std::shared_ptr<const json::object> v2_local;
  std::uint64_t local_generation = 0;
  {
    std::lock_guard lock(mutex_);
    if (generation_ != scheme.generation() || !documents_) {
      const std::uint64_t generation = scheme.generation();
      auto built = std::make_shared<std::map<std::string, std::string, std::less<>>>();
      json::object paths;
      json::object components;  // every group-version's, for the v2 document
      json::object operations;  // every group-version's paths, for the v2 document
      for (const auto& gv : scheme.group_versions()) {
        auto doc = openapi_v3_group_version(scheme, gv.group, gv.version);
        if (!doc) continue;
        if (const json::value* p = doc->if_contains("paths"); p && p->is_object()) {
          for (const auto& [path, item] : p->get_object()) operations.emplace(path, item);
        }
        if (const json::value* c = doc->if_contains("components"); c && c->is_object()) {
          if (const json::value* schemas = c->get_object().if_contains("schemas");
              schemas && schemas->is_object()) {
            for (const auto& [name, schema] : schemas->get_object()) components.emplace(name, schema);
          }
        }
        std::string text = json::serialize(*doc);
        // The hash lets clients cache a document until it changes.
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016zX", std::hash<std::string>{}(text));
        const std::string p = gv_path(gv.group, gv.version);
        paths[p] = json::object{{"serverRelativeURL", "/openapi/v3/" + p + "?hash=" + hex}};
        built->emplace(p, std::move(text));
      }
      built->emplace("", json::serialize(json::object{{"paths", std::move(paths)}}));
      json::object v2 = openapi_v2_document(components, version_info().at("gitVersion").as_string());
      v2["paths"] = openapi_v2_paths(operations);
      // Custom resources' definitions as kube's CRD builder makes them for v2.
      json::object& definitions = v2["definitions"].as_object();
      for (const auto& gv : scheme.group_versions()) {
        for (const auto& r : scheme.resources(gv.group, gv.version)) {
          if (!r->openapi_schema || !r->openapi_schema->is_object()) continue;
          definitions[definition_name(*r)] = custom_resource_v2_schema(
              r->openapi_schema->get_object(), r->group, r->version, r->kind);
        }
      }
      built->emplace(std::string(kV2Json), json::serialize(v2));
      built->emplace(std::string(kV2Protobuf), openapi_v2_protobuf(v2));
      documents_ = std::move(built);
      v2_ = std::make_shared<const json::object>(std::move(v2));
      generation_ = generation;
    }
    documents = documents_;
    v2_local = v2_;
    local_generation = generation_;
  }
  const bool v2 = path == kV2Json || path == kV2Protobuf;
  std::string key;  // the remote specs, by name and identity
  std::vector<const aggregator::RemoteApiService*> specs;
  for (const auto& r : remote) {
    if (!v2 || !r.openapi_v2) continue;
    specs.push_back(&r);
    key += r.name + "@" + std::to_string(reinterpret_cast<std::uintptr_t>(r.openapi_v2.get())) + ";";
  }
  if (!specs.empty()) {
    std::shared_ptr<const std::pair<std::string, std::string>> merged;
    {
      std::lock_guard lock(mutex_);
      if (merged_ && merged_key_ == key && merged_generation_ == local_generation) {
        merged = merged_;
      }
    }
    if (!merged) {
      std::sort(specs.begin(), specs.end(), [](const auto* a, const auto* b) {
        return a->name < b->name;
      });
      json::object doc = *v2_local;
      json::object& definitions = doc["definitions"].as_object();
      json::value& paths_value = doc["paths"];
      if (!paths_value.is_object()) paths_value = json::object();
      json::object& paths = paths_value.get_object();
      for (const auto* r : specs) {
        if (const json::object* defs = apimachinery::object_member(*r->openapi_v2, "definitions")) {
          for (const auto& [name, schema] : *defs) {
            if (!definitions.contains(name)) definitions.emplace(name, schema);
          }
        }
        if (const json::object* ps = apimachinery::object_member(*r->openapi_v2, "paths")) {
          for (const auto& [p, item] : *ps) {
            if (!paths.contains(p)) paths.emplace(p, item);
          }
        }
      }
      merged = std::make_shared<const std::pair<std::string, std::string>>(
          json::serialize(doc), openapi_v2_protobuf(doc));
      std::lock_guard lock(mutex_);
      merged_ = merged;
      merged_key_ = key;
      merged_generation_ = local_generation;
    }
    return path == kV2Json ? merged->first : merged->second;
  }
  auto it = documents->find(path);
  if (it == documents->end()) return std::nullopt;
  return it->second;
}

std::optional<json::object> openapi_v3_group_version(const Scheme& scheme, std::string_view group,
                                                     std::string_view version) {
  auto resources = scheme.resources(group, version);
  if (resources.empty()) return std::nullopt;
  json::object paths = openapi_v3_paths(resources, [](const kinds::ResourceInfo& r) {
    if (r.origin != kinds::KindOrigin::custom) {
      for (const auto& k : schema::KindSchemas::builtin().kinds()) {
        if (k.group == r.group && k.version == r.version && k.kind == r.kind) return k.definition;
      }
    }
    return definition_name(r);
  });
  json::object schemas = schema::KindSchemas::builtin().openapi_components(group, version);
  // ObjectMeta and what it refers to, for custom resources' metadata.
  static const json::object kMeta = [] {
    json::object out;
    for (const auto& [name, schema] : schema::KindSchemas::builtin().openapi_components("", "v1")) {
      if (name.starts_with("io.k8s.apimachinery.pkg.apis.meta.v1.")) out.emplace(name, schema);
    }
    return out;
  }();
  for (const auto& r : resources) {
    if (!r->openapi_schema || !r->openapi_schema->is_object()) continue;
    for (const auto& [name, schema] : kMeta) schemas.emplace(name, schema);
    json::object schema = r->openapi_schema->get_object();
    json::value& props = schema["properties"];
    if (!props.is_object()) props = json::object();
    props.get_object()["apiVersion"] = json::object{{"type", "string"}};
    props.get_object()["kind"] = json::object{{"type", "string"}};
    props.get_object()["metadata"] = json::object{
        {"allOf", json::array{json::object{
                      {"$ref", "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}}}}};
    schema["x-kubernetes-group-version-kind"] =
        json::array{json::object{{"group", r->group}, {"kind", r->kind}, {"version", r->version}}};
    schemas[definition_name(*r)] = std::move(schema);
    schemas[definition_name(*r) + "List"] = custom_resource_list_schema(*r);
  }
  return json::object{{"openapi", "3.0.0"},
                      {"info", json::object{{"title", "Kubernetes"}, {"version", "kwatch"}}},
                      {"paths", paths},
                      {"components", json::object{{"schemas", std::move(schemas)}}}};
}

namespace {

// The remote group/versions of `group` (every group when empty), by group, then versionPriority,
// then kube's version order.
std::vector<const aggregator::RemoteApiService*> remote_sorted(
    const std::vector<aggregator::RemoteApiService>& remote) {
  std::vector<const aggregator::RemoteApiService*> out;
  for (const auto& r : remote) out.push_back(&r);
  std::stable_sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    if (a->group_priority_minimum != b->group_priority_minimum) {
      return a->group_priority_minimum > b->group_priority_minimum;
    }
    if (a->group != b->group) return a->group < b->group;
    if (a->version_priority != b->version_priority) {
      return a->version_priority > b->version_priority;
    }
    return apimachinery::compare_kube_aware_versions(a->version, b->version) > 0;
  });
  return out;
}

json::object remote_group_entry(std::string_view group,
                                const std::vector<const aggregator::RemoteApiService*>& sorted) {
  json::array versions;
  for (const auto* r : sorted) {
    if (r->group != group) continue;
    versions.push_back(json::object{{"groupVersion", r->group + "/" + r->version},
                                    {"version", r->version}});
  }
  json::object entry{{"name", group}, {"versions", versions}};
  if (!versions.empty()) entry["preferredVersion"] = versions.front();
  return entry;
}

bool listed(const json::array& groups, std::string_view name) {
  for (const auto& g : groups) {
    const json::object* go = g.if_object();
    const json::value* n = go != nullptr ? go->if_contains("name") : nullptr;
    if (n == nullptr) {
      const json::value* meta = go != nullptr ? go->if_contains("metadata") : nullptr;
      n = meta != nullptr && meta->is_object() ? meta->get_object().if_contains("name") : nullptr;
    }
    if (n != nullptr && n->is_string() && n->get_string() == name) return true;
  }
  return false;
}

}  // namespace

void add_remote_groups(json::object& group_list,
                       const std::vector<aggregator::RemoteApiService>& remote) {
  json::value& groups = group_list["groups"];
  if (!groups.is_array()) return;
  const auto sorted = remote_sorted(remote);
  for (const auto* r : sorted) {
    if (r->group.empty() || listed(groups.get_array(), r->group)) continue;
    groups.get_array().push_back(remote_group_entry(r->group, sorted));
  }
}

std::optional<json::object> remote_api_group(
    std::string_view group, const std::vector<aggregator::RemoteApiService>& remote) {
  const auto sorted = remote_sorted(remote);
  json::object entry = remote_group_entry(group, sorted);
  if (entry.at("versions").as_array().empty()) return std::nullopt;
  entry["kind"] = "APIGroup";
  entry["apiVersion"] = "v1";
  return entry;
}

void add_remote_discovery(json::object& discovery_list,
                          const std::vector<aggregator::RemoteApiService>& remote) {
  json::value& items = discovery_list["items"];
  if (!items.is_array()) return;
  const auto sorted = remote_sorted(remote);
  for (const auto* r : sorted) {
    if (r->group.empty() || listed(items.get_array(), r->group)) continue;
    json::array versions;
    for (const auto* v : sorted) {
      if (v->group != r->group) continue;
      json::object version{{"version", v->version}};
      const json::array* list =
          v->resources ? apimachinery::array_member(v->resources.get(), "resources") : nullptr;
      if (v->available && list != nullptr) {
        // The extension's APIResourceList in the v2 form: "name/sub" entries are subresources.
        json::array resources;
        for (const auto& item : *list) {
          const json::object* ro = item.if_object();
          const std::string name = apimachinery::string_at(ro, "name");
          if (name.empty() || name.find('/') != std::string::npos) continue;
          json::object entry{
              {"resource", name},
              {"responseKind", json::object{{"group", v->group}, {"version", v->version},
                                            {"kind", apimachinery::string_at(ro, "kind")}}},
              {"scope", ro->contains("namespaced") && ro->at("namespaced").is_bool() &&
                                ro->at("namespaced").get_bool()
                            ? "Namespaced"
                            : "Cluster"},
              {"singularResource", apimachinery::string_at(ro, "singularName")}};
          for (const char* key : {"verbs", "shortNames", "categories"}) {
            if (const json::value* value = ro->if_contains(key)) entry[key] = *value;
          }
          json::array subresources;
          for (const auto& sub : *list) {
            const json::object* so = sub.if_object();
            const std::string sub_name = apimachinery::string_at(so, "name");
            if (!sub_name.starts_with(name + "/")) continue;
            json::object s{{"subresource", sub_name.substr(name.size() + 1)},
                           {"responseKind",
                            json::object{{"group", v->group}, {"version", v->version},
                                          {"kind", apimachinery::string_at(so, "kind")}}}};
            if (const json::value* verbs = so->if_contains("verbs")) s["verbs"] = *verbs;
            subresources.push_back(std::move(s));
          }
          if (!subresources.empty()) entry["subresources"] = std::move(subresources);
          resources.push_back(std::move(entry));
        }
        version["resources"] = std::move(resources);
        version["freshness"] = "Current";
      } else {
        version["freshness"] = "Stale";
      }
      versions.push_back(std::move(version));
    }
    items.get_array().push_back(json::object{
        {"metadata", json::object{{"name", r->group}, {"creationTimestamp", nullptr}}},
        {"versions", std::move(versions)}});
  }
}

void add_remote_openapi_paths(std::string& root,
                              const std::vector<aggregator::RemoteApiService>& remote) {
  if (remote.empty()) return;
  auto parsed = apimachinery::parse_json(root);
  if (!parsed || !parsed->is_object()) return;
  json::value& paths = parsed->get_object()["paths"];
  if (!paths.is_object()) return;
  for (const auto& r : remote) {
    if (r.group.empty()) continue;
    const std::string key = "apis/" + r.group + "/" + r.version;
    paths.get_object()[key] = json::object{{"serverRelativeURL", "/openapi/v3/" + key}};
  }
  root = json::serialize(*parsed);
}

}  // namespace kwatch::server
