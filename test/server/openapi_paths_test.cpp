#include "server/openapi_paths.hpp"

#include "kinds/scheme.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

namespace json = boost::json;

std::shared_ptr<const kinds::ResourceInfo> resource(std::string group, std::string kind,
                                                    std::string plural, bool namespaced) {
  auto r = std::make_shared<kinds::ResourceInfo>();
  r->group = std::move(group);
  r->version = "v1";
  r->kind = std::move(kind);
  r->resource = std::move(plural);
  r->namespaced = namespaced;
  return r;
}

std::string definition(const kinds::ResourceInfo& r) { return "def." + r.kind; }

TEST(OpenApiPaths, OperationIdPartsAsKubeMakesThem) {
  EXPECT_EQ(operation_id_part("rbac.authorization", true), "RbacAuthorization");
  EXPECT_EQ(operation_id_part("rbac.authorization", false), "rbacAuthorization");
  EXPECT_EQ(operation_id_part("v1beta1", true), "V1beta1");
  EXPECT_EQ(operation_id_part("stable.example.com", true), "StableExampleCom");
  // A leading digit is dropped and capitalizes what follows, as in kube.
  EXPECT_EQ(operation_id_part("1x-y", false), "XY");
}

TEST(OpenApiPaths, NamespacedResourceHasKubesOperations) {
  auto cm = std::make_shared<kinds::ResourceInfo>(*resource("", "ConfigMap", "configmaps", true));
  cm->deletes_collections = false;
  json::object paths = openapi_v3_paths({cm}, definition);
  ASSERT_TRUE(paths.contains("/api/v1/namespaces/{namespace}/configmaps"));
  const json::object& collection = paths.at("/api/v1/namespaces/{namespace}/configmaps").as_object();
  EXPECT_EQ(collection.at("get").at("operationId"), "listCoreV1NamespacedConfigMap");
  EXPECT_EQ(collection.at("post").at("operationId"), "createCoreV1NamespacedConfigMap");
  EXPECT_EQ(collection.at("post").at("x-kubernetes-action"), "post");
  // A resource without deletecollection has no DELETE on its collection.
  EXPECT_FALSE(collection.contains("delete"));
  const json::object& named = paths.at("/api/v1/namespaces/{namespace}/configmaps/{name}").as_object();
  EXPECT_EQ(named.at("get").at("operationId"), "readCoreV1NamespacedConfigMap");
  EXPECT_EQ(named.at("put").at("operationId"), "replaceCoreV1NamespacedConfigMap");
  EXPECT_EQ(named.at("patch").at("operationId"), "patchCoreV1NamespacedConfigMap");
  EXPECT_EQ(named.at("delete").at("operationId"), "deleteCoreV1NamespacedConfigMap");
  EXPECT_EQ(named.at("delete").at("description"), "delete a ConfigMap");
  EXPECT_EQ(paths.at("/api/v1/configmaps").at("get").at("operationId"),
            "listCoreV1ConfigMapForAllNamespaces");
  EXPECT_EQ(paths.at("/api/v1/watch/configmaps").at("get").at("operationId"),
            "watchCoreV1ConfigMapListForAllNamespaces");
  EXPECT_EQ(paths.at("/api/v1/watch/namespaces/{namespace}/configmaps/{name}").at("get").at("operationId"),
            "watchCoreV1NamespacedConfigMap");
  // Parameters carry kube's descriptions of the request options' fields.
  bool watch_described = false;
  for (const auto& p : collection.at("get").at("parameters").as_array()) {
    if (p.at("name") == "watch") {
      watch_described = p.at("description") ==
                        "Watch for changes to the described resources and return them as a "
                        "stream of add, update, and remove notifications. Specify resourceVersion.";
    }
  }
  EXPECT_TRUE(watch_described);
}

TEST(OpenApiPaths, ClusterScopedWithSubresourcesAndCollectionDelete) {
  auto ns = std::make_shared<kinds::ResourceInfo>(*resource("apps", "Widget", "widgets", false));
  ns->has_status = true;
  ns->deletes_collections = true;
  json::object paths = openapi_v3_paths({ns}, definition);
  EXPECT_FALSE(paths.contains("/apis/apps/v1/watch/widgets/{name}/status"));
  EXPECT_EQ(paths.at("/apis/apps/v1/widgets").at("delete").at("operationId"),
            "deleteAppsV1CollectionWidget");
  EXPECT_EQ(paths.at("/apis/apps/v1/widgets/{name}/status").at("patch").at("operationId"),
            "patchAppsV1WidgetStatus");
  EXPECT_EQ(paths.at("/apis/apps/v1/widgets/{name}/status").at("get").at("description"),
            "read status of the specified Widget");
  EXPECT_FALSE(paths.contains("/apis/apps/v1/widgets/{name}/scale"));
}

TEST(OpenApiPaths, SwaggerTwoForm) {
  json::object v2 = openapi_v2_paths(openapi_v3_paths({resource("", "Pod", "pods", true)}, definition));
  const json::object& create = v2.at("/api/v1/namespaces/{namespace}/pods").at("post").as_object();
  const json::array& params = create.at("parameters").as_array();
  ASSERT_FALSE(params.empty());
  EXPECT_EQ(params[0], json::parse(R"({"name":"body","in":"body","schema":{"$ref":"#/definitions/def.Pod"},"required":true})"));
  EXPECT_EQ(params[1].at("type"), "string");
  EXPECT_EQ(params[1].at("in"), "query");
  EXPECT_EQ(create.at("responses").at("201").at("schema").at("$ref"), "#/definitions/def.Pod");
  EXPECT_EQ(create.at("schemes"), json::array{"https"});
  const json::object& patch = v2.at("/api/v1/namespaces/{namespace}/pods/{name}").at("patch").as_object();
  EXPECT_EQ(patch.at("consumes").as_array().size(), 4u);
  // A custom resource takes no strategic merge patch, which kubectl reads to choose its patch.
  auto cr = std::make_shared<kinds::ResourceInfo>(*resource("example.com", "Widget", "widgets", true));
  cr->origin = kinds::KindOrigin::custom;
  json::object cr_paths = openapi_v3_paths({cr}, definition);
  const json::object& types = cr_paths.at("/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
                                  .at("patch").at("requestBody").at("content").as_object();
  EXPECT_FALSE(types.contains("application/strategic-merge-patch+json"));
  EXPECT_TRUE(types.contains("application/merge-patch+json"));
  EXPECT_EQ(v2.at("/api/v1/namespaces/{namespace}/pods").at("parameters").as_array()[0].at("type"),
            "string");
}

}  // namespace
}  // namespace kwatch::server
