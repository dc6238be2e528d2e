#include "server/partial_metadata.hpp"

#include "watch/object_codec.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

namespace json = boost::json;

watch::ObjectPtr cached(std::string_view text) {
  watch::CachedObject::Parts parts;
  parts.key = "/registry/configmaps/default/a";
  parts.ns = "default";
  parts.name = "a";
  parts.json = text;
  parts.resource_version = 7;
  return watch::CachedObject::make(parts);
}

TEST(PartialMetadata, ACachedObjectIsRenderedOnceForEveryone) {
  auto object = cached(R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a",)"
                       R"("labels":{"k":"}"}},"data":{"x":"{\"metadata\":1}"}})");
  auto first = partial_object_metadata(object, "v1");
  auto again = partial_object_metadata(object, "v1");
  EXPECT_EQ(first.get(), again.get());  // the same rendering, shared
  EXPECT_EQ(first->json, R"({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",)"
                         R"("metadata":{"name":"a","labels":{"k":"}"}}})");
  EXPECT_EQ(first->resource_version, 7);
  EXPECT_EQ(first->name, "a");
  // Another version is made for its asker alone.
  auto beta = partial_object_metadata(object, "v1beta1");
  EXPECT_NE(beta.get(), partial_object_metadata(object, "v1beta1").get());
  EXPECT_EQ(json::parse(beta->json).at("apiVersion"), "meta.k8s.io/v1beta1");
}

TEST(PartialMetadata, TextKwatchDidNotWriteIsParsed) {
  // Escaped member names and no metadata at all still give the right answer.
  auto escaped = cached(R"({"kind":"X","\u006detadata":{"name":"b"}})");
  EXPECT_EQ(json::parse(partial_object_metadata(escaped, "v1")->json).at("metadata").at("name"),
            "b");
  auto none = cached(R"({"kind":"X"})");
  EXPECT_EQ(json::parse(partial_object_metadata(none, "v1")->json).at("metadata"),
            json::object());
  auto broken = cached("not json");
  EXPECT_EQ(json::parse(partial_object_metadata(broken, "v1")->json).at("metadata"),
            json::object());
}

TEST(PartialMetadata, ObjectsAndListsFromStorage) {
  auto list = json::parse(R"({"kind":"PodList","apiVersion":"v1",
    "metadata":{"resourceVersion":"9","continue":"c","remainingItemCount":3},
    "items":[{"kind":"Pod","metadata":{"name":"p"},"spec":{}},{"kind":"Pod"}]})");
  json::object out = partial_object_metadata_list(list.as_object(), "v1");
  EXPECT_EQ(out.at("kind"), "PartialObjectMetadataList");
  EXPECT_EQ(out.at("metadata"), list.at("metadata"));
  ASSERT_EQ(out.at("items").as_array().size(), 2u);
  EXPECT_EQ(out.at("items").at(0),
            json::parse(R"({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",)"
                        R"("metadata":{"name":"p"}})"));
  EXPECT_EQ(out.at("items").at(1).at("metadata"), json::object());
  auto empty = partial_object_metadata_list(json::parse(R"({"items":[]})").as_object(), "v1");
  EXPECT_TRUE(empty.at("items").as_array().empty());
}

TEST(PartialMetadata, MismatchesNameTheTypeAsKubeDoes) {
  kinds::ResourceInfo pod;
  pod.kind = "Pod";
  EXPECT_EQ(partial_metadata_mismatch(pod, true).message,
            "you requested PartialObjectMetadata, but the requested object is a list "
            "(*core.PodList)");
  kinds::ResourceInfo deploy;
  deploy.group = "apps";
  deploy.kind = "Deployment";
  EXPECT_EQ(partial_metadata_mismatch(deploy, false).message,
            "you requested PartialObjectMetadataList, but the requested object is not a list "
            "(*apps.Deployment)");
  kinds::ResourceInfo role;
  role.group = "rbac.authorization.k8s.io";
  role.kind = "Role";
  EXPECT_NE(partial_metadata_mismatch(role, false).message.find("(*rbac.Role)"),
            std::string::npos);
  kinds::ResourceInfo event;
  event.group = "events.k8s.io";
  event.kind = "Event";
  EXPECT_NE(partial_metadata_mismatch(event, true).message.find("(*core.EventList)"),
            std::string::npos);
  kinds::ResourceInfo widget;
  widget.group = "example.com";
  widget.kind = "Widget";
  widget.origin = kinds::KindOrigin::custom;
  EXPECT_NE(partial_metadata_mismatch(widget, false).message.find("(*unstructured.Unstructured)"),
            std::string::npos);
  EXPECT_EQ(partial_metadata_mismatch(widget, false).code, base::Errc::not_acceptable);
}

}  // namespace
}  // namespace kwatch::server
