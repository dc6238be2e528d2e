#include "server/table.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

namespace json = boost::json;
using namespace std::chrono;

TEST(Table, HumanDurationMatchesKubectlAges) {
  EXPECT_EQ(human_duration(seconds(5)), "5s");
  EXPECT_EQ(human_duration(seconds(119)), "119s");
  EXPECT_EQ(human_duration(seconds(150)), "2m30s");
  EXPECT_EQ(human_duration(minutes(45)), "45m");
  EXPECT_EQ(human_duration(hours(5) + minutes(3)), "5h3m");
  EXPECT_EQ(human_duration(hours(30)), "30h");
  EXPECT_EQ(human_duration(hours(24 * 3 + 2)), "3d2h");
  EXPECT_EQ(human_duration(hours(24 * 400)), "400d");
}

TEST(Table, PodListBecomesRowsWithReadyAndStatus) {
  auto scheme = registry::Scheme::builtin();
  const auto* pods = scheme->find("", "v1", "pods");
  auto list = json::parse(R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},
    "items":[{"metadata":{"name":"a","creationTimestamp":"2026-01-01T00:00:00Z"},
              "spec":{"containers":[{"name":"c"},{"name":"d"}]},
              "status":{"phase":"Running","containerStatuses":[{"ready":true,"restartCount":2}]}}]})")
                  .as_object();
  auto now = system_clock::from_time_t(1767225600 + 90);  // 90 s after creation
  auto table = to_table(*pods, list, now, IncludeObject::metadata);
  EXPECT_EQ(table.at("kind"), "Table");
  EXPECT_EQ(table.at("metadata").at("resourceVersion"), "7");
  const auto& row = table.at("rows").at(0).at("cells").as_array();
  EXPECT_EQ(row.at(0), "a");
  EXPECT_EQ(row.at(1), "1/2");
  EXPECT_EQ(row.at(2), "Running");
  EXPECT_EQ(row.at(3), "2");
  EXPECT_EQ(row.at(4), "90s");
  EXPECT_EQ(table.at("rows").at(0).at("object").at("metadata").at("name"), "a");
}

TEST(Table, RowsCarryTheMetadataTheWholeObjectOrNothingAsAsked) {
  auto scheme = registry::Scheme::builtin();
  const auto* cms = scheme->find("", "v1", "configmaps");
  auto cm = json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},
    "data":{"k":"v"}})").as_object();
  auto now = system_clock::from_time_t(1767225600);
  auto whole = to_table(*cms, cm, now, IncludeObject::object);
  EXPECT_EQ(whole.at("rows").at(0).at("object"), cm);
  auto none = to_table(*cms, cm, now, IncludeObject::none);
  EXPECT_FALSE(none.at("rows").at(0).as_object().contains("object"));
  EXPECT_EQ(parse_include_object(""), IncludeObject::metadata);
  EXPECT_EQ(parse_include_object("Object"), IncludeObject::object);
  EXPECT_EQ(parse_include_object("object"), std::nullopt);
}

TEST(Table, BuiltinKindsShowTheirColumnsWithKubectlsPlaceholders) {
  auto scheme = registry::Scheme::builtin();
  auto now = system_clock::from_time_t(1767225600 + 60);
  auto svc = json::parse(R"({"metadata":{"name":"web","creationTimestamp":"2026-01-01T00:00:00Z"},
    "spec":{"type":"ClusterIP","ports":[{"port":80,"protocol":"TCP"},{"port":53,"protocol":"UDP"}]}})")
                 .as_object();
  auto table = to_table(*scheme->find("", "v1", "services"), svc, now, IncludeObject::metadata);
  EXPECT_EQ(table.at("rows").at(0).at("cells"),
            json::parse(R"(["web","ClusterIP","<none>","<none>","80/TCP,53/UDP","60s","<none>"])"));
  auto cm = json::parse(R"({"metadata":{"name":"c"},"data":{"a":"1","b":"2"},"binaryData":{"c":"eA=="}})")
                .as_object();
  table = to_table(*scheme->find("", "v1", "configmaps"), cm, now, IncludeObject::metadata);
  EXPECT_EQ(table.at("rows").at(0).at("cells"), json::parse(R"(["c",3,"<unknown>"])"));
}

TEST(Table, ACustomResourceGetsNameThenItsPrinterColumns) {
  registry::ResourceInfo info;
  info.kind = "Widget";
  info.origin = registry::KindOrigin::custom;
  info.printer_columns = {{"Color", "string", "", "", ".spec.color"},
                          {"Replicas", "integer", "", "", ".spec.replicas"},
                          {"Items", "string", "", "", ".spec.items"},
                          {"Age", "date", "", "", ".metadata.creationTimestamp"}};
  auto obj = json::parse(R"({"metadata":{"name":"w","creationTimestamp":"2026-01-01T00:00:00Z"},
    "spec":{"color":"red","items":[1,2]}})")
                 .as_object();
  auto table = to_table(info, obj, system_clock::from_time_t(1767225600 + 5), IncludeObject::metadata);
  EXPECT_EQ(table.at("columnDefinitions").at(0).at("name"), "Name");
  EXPECT_EQ(table.at("rows").at(0).at("cells"), json::parse(R"(["w","red",null,"[1,2]","5s"])"));
  info.printer_columns.clear();
  table = to_table(info, obj, system_clock::from_time_t(1767225600 + 5), IncludeObject::metadata);
  EXPECT_EQ(table.at("rows").at(0).at("cells"), json::parse(R"(["w","5s"])"));
}

}  // namespace
}  // namespace kwatch::server
