#include "server/table.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

namespace json = boost::json;
using namespace std::chrono;

// The cells of the one row of a built-in kind's (v1 of `group`) table of `object` at `now`.
auto cells_at(system_clock::time_point now) {
  return [scheme = kinds::Scheme::builtin(), now](const char* group, const char* resource,
                                                     const char* object) {
    auto obj = json::parse(object).as_object();
    return to_table(*scheme->find(group, "v1", resource), obj, now, IncludeObject::metadata)
        .at("rows")
        .at(0)
        .at("cells");
  };
}

TEST(Table, HumanDurationMatchesKubectlAges) {
  EXPECT_EQ(base::human_duration(seconds(5)), "5s");
  EXPECT_EQ(base::human_duration(seconds(119)), "119s");
  EXPECT_EQ(base::human_duration(seconds(150)), "2m30s");
  EXPECT_EQ(base::human_duration(minutes(45)), "45m");
  EXPECT_EQ(base::human_duration(hours(5) + minutes(3)), "5h3m");
  EXPECT_EQ(base::human_duration(hours(30)), "30h");
  EXPECT_EQ(base::human_duration(hours(24 * 3 + 2)), "3d2h");
  EXPECT_EQ(base::human_duration(hours(24 * 400)), "400d");
}

TEST(Table, PodListBecomesRowsWithReadyAndStatus) {
  auto scheme = kinds::Scheme::builtin();
  auto pods = scheme->find("", "v1", "pods");
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

TEST(Table, FlowSchemaRowsComeInTheOrderRequestsMeetThem) {
  auto scheme = kinds::Scheme::builtin();
  auto schemas = scheme->find("flowcontrol.apiserver.k8s.io", "v1", "flowschemas");
  ASSERT_NE(schemas, nullptr);
  auto list = json::parse(R"({"kind":"FlowSchemaList","metadata":{},"items":[
    {"metadata":{"name":"late"},"spec":{"priorityLevelConfiguration":{"name":"p"},"matchingPrecedence":900}},
    {"metadata":{"name":"b"},"spec":{"priorityLevelConfiguration":{"name":"p"},"matchingPrecedence":100}},
    {"metadata":{"name":"a"},"spec":{"priorityLevelConfiguration":{"name":"p"},"matchingPrecedence":100,
     "distinguisherMethod":{"type":"ByUser"}}}]})").as_object();
  auto table = to_table(*schemas, list, system_clock::now(), IncludeObject::none);
  std::vector<std::string> names;
  for (const auto& row : table.at("rows").as_array()) {
    names.emplace_back(row.at("cells").at(0).as_string());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "late"}));
  const auto& first = table.at("rows").at(0).at("cells").as_array();
  EXPECT_EQ(first.at(1), "p");
  EXPECT_EQ(first.at(2), 100);
  EXPECT_EQ(first.at(3), "ByUser");
  EXPECT_EQ(first.at(5), "?");
}

TEST(Table, RowsCarryTheMetadataTheWholeObjectOrNothingAsAsked) {
  auto scheme = kinds::Scheme::builtin();
  auto cms = scheme->find("", "v1", "configmaps");
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
  auto scheme = kinds::Scheme::builtin();
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

TEST(Table, WorkloadAndStorageKindsPrintAsKubesPrinters) {
  auto cells = cells_at(system_clock::from_time_t(1767225600 + 300));
  // A job that started 5 minutes ago and has not finished: its duration runs to now.
  EXPECT_EQ(cells("batch", "jobs", R"({"metadata":{"name":"pi","creationTimestamp":"2026-01-01T00:00:00Z"},
      "spec":{"completions":3,"parallelism":1,"selector":{"matchLabels":{"a":"b"}},
              "template":{"spec":{"containers":[{"name":"pi","image":"perl"}]}}},
      "status":{"succeeded":1,"startTime":"2026-01-01T00:00:00Z"}})"),
            json::parse(R"(["pi","Running","1/3","5m","5m","pi","perl","a=b"])"));
  EXPECT_EQ(cells("batch", "jobs", R"({"metadata":{"name":"done"},"spec":{"parallelism":2},
      "status":{"succeeded":2,"startTime":"2026-01-01T00:00:00Z",
                "completionTime":"2026-01-01T00:00:30Z",
                "conditions":[{"type":"Complete","status":"True"}]}})"),
            json::parse(R"(["done","Complete","2/1 of 2","30s","<unknown>","","","<none>"])"));
  EXPECT_EQ(cells("apps", "daemonsets", R"({"metadata":{"name":"agent"},
      "spec":{"selector":{"matchLabels":{"app":"agent"}},"template":{"spec":{
              "nodeSelector":{"os":"linux"},"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}}},
      "status":{"desiredNumberScheduled":3,"currentNumberScheduled":2,"numberReady":1}})"),
            json::parse(R"(["agent",3,2,1,0,0,"os=linux","<unknown>","a,b","x,y","app=agent"])"));
  EXPECT_EQ(cells("storage.k8s.io", "storageclasses", R"({"metadata":{"name":"fast",
      "annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},"provisioner":"csi.x"})"),
            json::parse(R"j(["fast (default)","csi.x","Delete","Immediate",false,"<unknown>"])j"));
  EXPECT_EQ(cells("", "persistentvolumes", R"({"metadata":{"name":"pv1"},"spec":{
      "capacity":{"storage":"5Gi"},"accessModes":["ReadWriteMany","ReadWriteOnce"],
      "persistentVolumeReclaimPolicy":"Retain","storageClassName":"manual","volumeMode":"Filesystem",
      "claimRef":{"namespace":"default","name":"data"}},"status":{"phase":"Bound"}})"),
            json::parse(R"(["pv1","5Gi","RWO,RWX","Retain","Bound","default/data","manual","<unset>","","<unknown>","Filesystem"])"));
  EXPECT_EQ(cells("apps", "controllerrevisions", R"({"metadata":{"name":"web-1",
      "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"web","uid":"u","controller":true}]},
      "revision":1})"),
            json::parse(R"(["web-1","statefulset.apps/web",1,"<unknown>"])"));
  EXPECT_EQ(cells("networking.k8s.io", "ingresses", R"({"metadata":{"name":"ing"},"spec":{
      "rules":[{"host":"a.example"},{},{"host":"b.example"},{"host":"c.example"},{"host":"d.example"}],
      "tls":[{"hosts":["a.example"]}]},
      "status":{"loadBalancer":{"ingress":[{"ip":"10.0.0.2"},{"hostname":"lb.example"},{"ip":"10.0.0.1"}]}}})"),
            json::parse(R"(["ing","<none>","a.example,b.example,c.example + 2 more...","10.0.0.1,10.0.0.2,lb.example","80, 443","<unknown>"])"));
}

TEST(Table, EndpointsPrintEveryAddressWithEveryPortTheFirstThree) {
  auto cells = cells_at(system_clock::from_time_t(1767225600 + 60));
  EXPECT_EQ(cells("", "endpoints", R"({"metadata":{"name":"none"}})"),
            json::parse(R"(["none","<none>","<unknown>"])"));
  EXPECT_EQ(cells("", "endpoints", R"({"metadata":{"name":"web"},"subsets":[
      {"addresses":[{"ip":"10.0.0.5"},{"ip":"fd00::1"}],"ports":[{"port":80},{"name":"m","port":9090}]}]})"),
            json::parse(R"(["web","10.0.0.5:80,[fd00::1]:80,10.0.0.5:9090 + 1 more...","<unknown>"])"));
  // A headless subset without ports shows its addresses alone.
  EXPECT_EQ(cells("", "endpoints", R"({"metadata":{"name":"h"},"subsets":[
      {"addresses":[{"ip":"10.0.0.7"}]},{"addresses":[{"ip":"10.0.0.8"}],"ports":[{"port":53}]}]})"),
            json::parse(R"(["h","10.0.0.7,10.0.0.8:53","<unknown>"])"));
  // Kinds without a printer of their own: kube's default table.
  EXPECT_EQ(cells("rbac.authorization.k8s.io", "clusterroles",
                  R"({"metadata":{"name":"view","creationTimestamp":"2026-01-01T00:00:00Z"}})"),
            json::parse(R"(["view","2026-01-01T00:00:00Z"])"));
}

TEST(Table, ACustomResourceGetsNameThenItsPrinterColumns) {
  kinds::ResourceInfo info;
  info.kind = "Widget";
  info.origin = kinds::KindOrigin::custom;
  auto column = [](std::string name, std::string type, std::string path) {
    kinds::PrinterColumn c;
    c.name = std::move(name);
    c.type = std::move(type);
    c.json_path = std::move(path);
    return c;
  };
  info.printer_columns = {column("Color", "string", ".spec.color"),
                          column("Replicas", "integer", ".spec.replicas"),
                          column("Items", "string", ".spec.items"),
                          column("Age", "date", ".metadata.creationTimestamp")};
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
