#include "server/api_handler.hpp"

#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "storage/memory_storage.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace kwatch::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

class ApiHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = storage::MemoryStorage::open({});
    ASSERT_TRUE(storage);
    storage_ = std::move(*storage);
    auto scheme = kinds::Scheme::builtin();
    store_ = std::make_shared<registry::ResourceStore>(storage_, scheme);
    handler_ = std::make_shared<ApiHandler>(scheme, store_, std::make_shared<Metrics>(),
                                            "127.0.0.1:0");
    run([this]() -> asio::awaitable<void> {
      for (const char* ns : {"default", "other"}) {
        auto r = co_await store_->ensure_namespace(ns);
        EXPECT_TRUE(r);
      }
    });
  }

  template <class F>
  void run(F f) {
    asio::io_context ioc;
    bool done = false;
    asio::co_spawn(ioc, f(), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    ioc.run_for(std::chrono::seconds(10));
    ASSERT_TRUE(done) << "handler did not finish within the deadline";
  }

  static ApiRequest request(std::string method, std::string target, std::string body = "",
                            std::string content_type = "application/json",
                            std::string accept = "") {
    ApiRequest req;
    req.method = std::move(method);
    req.target = std::move(target);
    req.content_type = std::move(content_type);
    req.accept = std::move(accept);
    req.body = std::move(body);
    req.user_agent = "test";
    return req;
  }

  ApiResponse call(std::string method, std::string target, std::string body = "",
                   std::string content_type = "application/json", std::string accept = "") {
    ApiResponse out;
    ApiRequest req = request(std::move(method), std::move(target), std::move(body),
                             std::move(content_type), std::move(accept));
    run([&]() -> asio::awaitable<void> { out = co_await handler_->handle(req); });
    return out;
  }

  json::value call_json(std::string method, std::string target, std::string body = "",
                        unsigned expect = 200,
                        std::string content_type = "application/json") {
    auto r = call(std::move(method), std::move(target), std::move(body), std::move(content_type));
    EXPECT_EQ(r.status, expect) << r.body;
    return json::parse(r.body);
  }

  static std::string cm(const std::string& name, const std::string& labels = "{}") {
    return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
           R"(","labels":)" + labels + R"(},"data":{"k":"v"}})";
  }

  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<ApiHandler> handler_;
};

constexpr const char* kCM = "/api/v1/namespaces/default/configmaps";

TEST_F(ApiHandlerTest, CreateFillsServerManagedMetadataAndGetReturnsTheSameResourceVersion) {
  auto created = call_json("POST", kCM, cm("a"), 201);
  const auto& meta = created.at("metadata");
  EXPECT_EQ(meta.at("namespace"), "default");
  EXPECT_EQ(meta.at("uid").as_string().size(), 36u);
  EXPECT_TRUE(meta.as_object().contains("creationTimestamp"));
  EXPECT_FALSE(meta.as_object().contains("generation"));  // ConfigMaps count none
  auto got = call_json("GET", std::string(kCM) + "/a");
  EXPECT_EQ(got.at("metadata").at("resourceVersion"), meta.at("resourceVersion"));
  EXPECT_EQ(got.at("data").at("k"), "v");
}

// The revision a write committed comes from the store as a number (not read back from the
// answer): a create's and an update's is their object's resourceVersion; a delete answered with
// a Status has one too; a dry run and a read have none.
TEST_F(ApiHandlerTest, AWriteReportsTheRevisionItCommitted) {
  auto rv = [](const ApiResponse& r) {
    const json::value body = json::parse(r.body);
    return std::stoll(std::string(body.at("metadata").at("resourceVersion").as_string()));
  };
  auto created = call("POST", kCM, cm("rev"));
  ASSERT_EQ(created.status, 201u) << created.body;
  EXPECT_EQ(created.written_revision, rv(created));
  auto updated = call("PUT", std::string(kCM) + "/rev", cm("rev", R"({"a":"b"})"));
  ASSERT_EQ(updated.status, 200u) << updated.body;
  EXPECT_EQ(updated.written_revision, rv(updated));
  EXPECT_GT(updated.written_revision, created.written_revision);
  EXPECT_EQ(call("GET", std::string(kCM) + "/rev").written_revision, 0);
  EXPECT_EQ(call("POST", std::string(kCM) + "?dryRun=All", cm("dry")).written_revision, 0);
  auto removed = call("DELETE", std::string(kCM) + "/rev");
  ASSERT_EQ(removed.status, 200u) << removed.body;
  EXPECT_EQ(json::parse(removed.body).at("kind"), "Status");
  EXPECT_GT(removed.written_revision, updated.written_revision);
}

TEST_F(ApiHandlerTest, GenerateNameGivesEachObjectItsOwnName) {
  const std::string body =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"gen-"}})";
  auto a = call_json("POST", kCM, body, 201);
  auto b = call_json("POST", kCM, body, 201);
  std::string na(a.at("metadata").at("name").as_string());
  std::string nb(b.at("metadata").at("name").as_string());
  EXPECT_EQ(na.rfind("gen-", 0), 0u);
  EXPECT_EQ(na.size(), 9u);
  EXPECT_NE(na, nb);
}

TEST_F(ApiHandlerTest, UpdateWithStaleResourceVersionConflictsAndCurrentOneSucceeds) {
  auto created = call_json("POST", kCM, cm("a"), 201);
  created.at("data").as_object()["k"] = "v2";
  auto updated = call_json("PUT", std::string(kCM) + "/a", json::serialize(created));
  EXPECT_NE(updated.at("metadata").at("resourceVersion"),
            created.at("metadata").at("resourceVersion"));
  auto conflict = call_json("PUT", std::string(kCM) + "/a", json::serialize(created), 409);
  EXPECT_EQ(conflict.at("reason"), "Conflict");
  EXPECT_EQ(conflict.at("details").at("kind"), "configmaps");
  // Without a resourceVersion the update is unconditional.
  created.at("metadata").as_object().erase("resourceVersion");
  created.at("data").as_object()["k"] = "v3";
  auto forced = call_json("PUT", std::string(kCM) + "/a", json::serialize(created));
  EXPECT_EQ(forced.at("data").at("k"), "v3");
  EXPECT_EQ(forced.at("metadata").at("uid"), updated.at("metadata").at("uid"));
}

TEST_F(ApiHandlerTest, UpdateThatChangesNothingKeepsTheResourceVersion) {
  auto created = call_json("POST", kCM, cm("a"), 201);
  auto same = call_json("PUT", std::string(kCM) + "/a", json::serialize(created));
  EXPECT_EQ(same.at("metadata").at("resourceVersion"),
            created.at("metadata").at("resourceVersion"));
}

// A state cache frozen at whatever the test put in it: it goes stale as soon as storage moves.
class FrozenStateCache final : public registry::StateCache {
 public:
  std::optional<State> lookup(const kinds::ResourceInfo&,
                              const std::string& key) const override {
    ++lookups;
    auto it = objects.find(key);
    if (it == objects.end()) return std::nullopt;
    return it->second;
  }
  void remember(const std::string& key, const json::value& object) {
    State state;
    auto text = std::make_shared<const std::string>(json::serialize(object));
    state.json = std::shared_ptr<const std::string_view>(text, &views.emplace_back(*text));
    state.mod_revision =
        std::stoll(std::string(object.at("metadata").at("resourceVersion").as_string()));
    objects[key] = state;
  }
  std::map<std::string, State> objects;
  std::deque<std::string_view> views;  // what the states' pointers point at
  mutable int lookups = 0;
};

TEST_F(ApiHandlerTest, UpdatesStartingFromAStaleCachedStateDecideOnTheCurrentOne) {
  auto cache = std::make_shared<FrozenStateCache>();
  auto scheme = kinds::Scheme::builtin();
  store_ = std::make_shared<registry::ResourceStore>(storage_, scheme, cache);
  handler_ = std::make_shared<ApiHandler>(scheme, store_, std::make_shared<Metrics>(),
                                          "127.0.0.1:0");
  const std::string url = std::string(kCM) + "/a";
  auto v1 = call_json("POST", kCM, cm("a"), 201);
  cache->remember("/registry/configmaps/default/a", v1);

  // The cache is current: the update applies to it.
  v1.at("data").as_object()["k"] = "v2";
  auto v2 = call_json("PUT", url, json::serialize(v1));
  EXPECT_EQ(v2.at("data").at("k"), "v2");
  EXPECT_EQ(cache->lookups, 1);

  // The cache still holds v1. The current resourceVersion is accepted, not refused by the copy.
  v2.at("data").as_object()["k"] = "v3";
  auto v3 = call_json("PUT", url, json::serialize(v2));
  EXPECT_EQ(v3.at("data").at("k"), "v3");
  EXPECT_EQ(v3.at("metadata").at("uid"), v1.at("metadata").at("uid"));
  // v1's resourceVersion matches the stale copy but not storage: a conflict.
  auto conflict = call_json("PUT", url, json::serialize(v1), 409);
  EXPECT_EQ(conflict.at("reason"), "Conflict");
  // A patch applies to the current object, not to the stale copy.
  auto patched = call_json("PATCH", url, R"({"data":{"p":"1"}})", 200,
                           "application/merge-patch+json");
  EXPECT_EQ(patched.at("data").at("k"), "v3");
  EXPECT_EQ(patched.at("data").at("p"), "1");
  // Writing the current object back changes nothing, even though it differs from the copy.
  auto same = call_json("PUT", url, json::serialize(patched));
  EXPECT_EQ(same.at("metadata").at("resourceVersion"), patched.at("metadata").at("resourceVersion"));
  // Deleted since the copy was taken: not found.
  call_json("DELETE", url);
  auto gone = call_json("PUT", url, json::serialize(v1), 404);
  EXPECT_EQ(gone.at("reason"), "NotFound");
  EXPECT_GE(cache->lookups, 6);
}

TEST_F(ApiHandlerTest, ListPagesWithContinueAndCountsRemainingItems) {
  for (int i = 0; i < 5; ++i) call_json("POST", kCM, cm("c" + std::to_string(i)), 201);
  auto first = call_json("GET", std::string(kCM) + "?limit=2");
  EXPECT_EQ(first.at("items").as_array().size(), 2u);
  EXPECT_EQ(first.at("metadata").at("remainingItemCount"), 3);
  std::string token(first.at("metadata").at("continue").as_string());
  // A write between pages does not show up: later pages read at the first page's revision.
  call_json("POST", kCM, cm("c9"), 201);
  std::vector<std::string> names;
  for (const auto& item : first.at("items").as_array()) {
    names.emplace_back(item.at("metadata").at("name").as_string());
  }
  while (!token.empty()) {
    auto page = call_json("GET", std::string(kCM) + "?limit=2&continue=" + token);
    EXPECT_EQ(page.at("metadata").at("resourceVersion"),
              first.at("metadata").at("resourceVersion"));
    for (const auto& item : page.at("items").as_array()) {
      names.emplace_back(item.at("metadata").at("name").as_string());
    }
    auto* next = page.at("metadata").as_object().if_contains("continue");
    token = next ? std::string(next->as_string()) : "";
  }
  EXPECT_EQ(names, (std::vector<std::string>{"c0", "c1", "c2", "c3", "c4"}));
}

TEST_F(ApiHandlerTest, ListFiltersByLabelAndFieldSelectors) {
  call_json("POST", kCM, cm("a", R"({"app":"web","tier":"front"})"), 201);
  call_json("POST", kCM, cm("b", R"({"app":"web"})"), 201);
  call_json("POST", kCM, cm("c", R"({"app":"db"})"), 201);
  auto names = [&](const std::string& query) {
    auto list = call_json("GET", std::string(kCM) + "?" + query);
    std::vector<std::string> out;
    for (const auto& item : list.at("items").as_array()) {
      out.emplace_back(item.at("metadata").at("name").as_string());
    }
    return out;
  };
  EXPECT_EQ(names("labelSelector=app%3Dweb"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(names("labelSelector=app%3Dweb,!tier"), (std::vector<std::string>{"b"}));
  EXPECT_EQ(names("labelSelector=app+in+(db,x)"), (std::vector<std::string>{"c"}));
  EXPECT_EQ(names("fieldSelector=metadata.name%21%3Da"), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(names("labelSelector=app%3Dweb&limit=1").size(), 1u);
}

TEST_F(ApiHandlerTest, ClusterWideListSpansNamespaces) {
  call_json("POST", kCM, cm("a"), 201);
  call_json("POST", "/api/v1/namespaces/other/configmaps", cm("b"), 201);
  auto list = call_json("GET", "/api/v1/configmaps");
  EXPECT_EQ(list.at("items").as_array().size(), 2u);
  EXPECT_EQ(list.at("kind"), "ConfigMapList");
}

TEST_F(ApiHandlerTest, DeleteAnswersAStatusOrThePodAtTheDeleteRevision) {
  auto created = call_json("POST", kCM, cm("a"), 201);
  auto deleted = call_json("DELETE", std::string(kCM) + "/a");
  EXPECT_EQ(deleted.at("kind"), "Status");
  EXPECT_EQ(deleted.at("status"), "Success");
  EXPECT_EQ(deleted.at("details").at("name"), "a");
  EXPECT_EQ(deleted.at("details").at("kind"), "configmaps");
  EXPECT_EQ(deleted.at("details").at("uid"), created.at("metadata").at("uid"));
  const std::string pod =
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},
          "spec":{"containers":[{"name":"c","image":"i"}]}})";
  auto created_pod = call_json("POST", "/api/v1/namespaces/default/pods", pod, 201);
  auto deleted_pod = call_json("DELETE", "/api/v1/namespaces/default/pods/p");
  EXPECT_EQ(deleted_pod.at("kind"), "Pod");
  EXPECT_NE(deleted_pod.at("metadata").at("resourceVersion"),
            created_pod.at("metadata").at("resourceVersion"));
  auto missing = call_json("GET", std::string(kCM) + "/a", "", 404);
  EXPECT_EQ(missing.at("reason"), "NotFound");
  EXPECT_EQ(missing.at("message"), "configmaps \"a\" not found");
}

TEST_F(ApiHandlerTest, DeletingANamespaceMakesItTerminatingAndClosedToNewObjects) {
  // Emptying it is the namespace controller's work (e2e deletion suite).
  call_json("POST", "/api/v1/namespaces/other/configmaps", cm("b"), 201);
  auto ns = call_json("DELETE", "/api/v1/namespaces/other");
  EXPECT_EQ(ns.at("status").at("phase"), "Terminating");
  EXPECT_TRUE(ns.at("metadata").as_object().contains("deletionTimestamp"));
  auto refused = call_json("POST", "/api/v1/namespaces/other/configmaps", cm("c"), 403);
  EXPECT_EQ(refused.at("message"),
            "configmaps \"c\" is forbidden: unable to create new content in namespace other "
            "because it is being terminated");
  EXPECT_EQ(refused.at("details").at("causes").at(0).at("reason"), "NamespaceTerminating");
  auto immortal = call_json("DELETE", "/api/v1/namespaces/default", "", 403);
  EXPECT_EQ(immortal.at("message"), "namespaces \"default\" is forbidden: this namespace may not be deleted");
}

TEST_F(ApiHandlerTest, DeleteOptionsOfTheWrongTypeAreABadRequestInGosWords) {
  call_json("POST", kCM, cm("a"), 201);
  const std::string path = std::string(kCM) + "/a";
  auto err = call_json("DELETE", path, R"({"gracePeriodSeconds":"soon"})", 400);
  EXPECT_EQ(err.at("message"), "json: cannot unmarshal string into Go struct field "
                               "DeleteOptions.gracePeriodSeconds of type int64");
  err = call_json("DELETE", path, R"({"preconditions":{"uid":7}})", 400);
  EXPECT_EQ(err.at("message"), "json: cannot unmarshal number into Go struct field "
                               "DeleteOptions.preconditions.uid of type types.UID");
  err = call_json("DELETE", path, R"({"dryRun":["Maybe"]})", 400);
  EXPECT_EQ(err.at("message"), "Invalid dryRun value: Maybe; supported values: All");
  err = call_json("POST", "/api/v1/namespaces/default/pods/a/eviction",
                  R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"a"},
                      "deleteOptions":{"orphanDependents":"yes"}})",
                  400);
  EXPECT_EQ(err.at("message"), "json: cannot unmarshal string into Go struct field "
                               "DeleteOptions.orphanDependents of type bool");
  // null is unset; the object is still there for a delete with nothing wrong.
  call_json("DELETE", path, R"({"gracePeriodSeconds":null,"preconditions":null})", 200);
}

TEST_F(ApiHandlerTest, EmptyMetadataMapsAndListsAreNotKept) {
  auto created = call_json("POST", kCM,
                           R"({"metadata":{"name":"m","labels":{"a":"1"},"annotations":{},
                               "finalizers":[],"ownerReferences":null}})",
                           201);
  EXPECT_FALSE(created.at("metadata").as_object().contains("annotations"));
  EXPECT_FALSE(created.at("metadata").as_object().contains("finalizers"));
  EXPECT_FALSE(created.at("metadata").as_object().contains("ownerReferences"));
  // Removing the last label leaves no `labels: {}` (what kubectl diff would show).
  auto patched = call_json("PATCH", std::string(kCM) + "/m", R"({"metadata":{"labels":{"a":null}}})",
                           200, "application/merge-patch+json");
  EXPECT_FALSE(patched.at("metadata").as_object().contains("labels"));
}

TEST_F(ApiHandlerTest, DeleteCollectionHonoursSelectors) {
  call_json("POST", kCM, cm("a", R"({"x":"1"})"), 201);
  call_json("POST", kCM, cm("b", R"({"x":"2"})"), 201);
  auto deleted = call_json("DELETE", std::string(kCM) + "?labelSelector=x%3D1");
  EXPECT_EQ(deleted.at("items").as_array().size(), 1u);
  EXPECT_EQ(call_json("GET", kCM).at("items").as_array().size(), 1u);
}

TEST_F(ApiHandlerTest, MainResourceUpdatesKeepStatusAndStatusSubresourceKeepsSpec) {
  const std::string pod =
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},
          "spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Pending"}})";
  auto created = call_json("POST", "/api/v1/namespaces/default/pods", pod, 201);
  auto with_status = created;
  with_status.at("status").as_object()["phase"] = "Running";
  with_status.at("spec").as_object()["nodeName"] = "n1";
  auto after_status = call_json("PUT", "/api/v1/namespaces/default/pods/p/status",
                                json::serialize(with_status));
  EXPECT_EQ(after_status.at("status").at("phase"), "Running");
  EXPECT_FALSE(after_status.at("spec").as_object().contains("nodeName"));
  // Pods count no generations in kube 1.32.
  EXPECT_FALSE(after_status.at("metadata").as_object().contains("generation"));
  auto main = after_status;
  main.at("status").as_object()["phase"] = "Failed";
  // A container's image is one of the few fields of a pod's spec an update may change.
  main.at("spec").at("containers").at(0).as_object()["image"] = "i2";
  auto after_main = call_json("PUT", "/api/v1/namespaces/default/pods/p", json::serialize(main));
  EXPECT_EQ(after_main.at("status").at("phase"), "Running");
  EXPECT_EQ(after_main.at("spec").at("containers").at(0).at("image"), "i2");
  EXPECT_FALSE(after_main.at("metadata").as_object().contains("generation"));
}

TEST_F(ApiHandlerTest, WorkloadsServeAScaleWithTheirSelectorAsAString) {
  const char* rs = R"({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web"},
      "spec":{"selector":{"matchLabels":{"app":"web"},
                          "matchExpressions":[{"key":"tier","operator":"In","values":["b","a"]}]},
              "template":{"metadata":{"labels":{"app":"web","tier":"a"}},
                          "spec":{"containers":[{"name":"c","image":"x"}]}}}})";
  call_json("POST", "/apis/apps/v1/namespaces/default/replicasets", rs, 201);
  const std::string scale = "/apis/apps/v1/namespaces/default/replicasets/web/scale";
  auto got = call_json("GET", scale);
  EXPECT_EQ(got.at("kind"), "Scale");
  EXPECT_EQ(got.at("apiVersion"), "autoscaling/v1");
  EXPECT_EQ(got.at("spec").at("replicas"), 1);
  EXPECT_EQ(got.at("status"), json::parse(R"j({"replicas":0,"selector":"app=web,tier in (a,b)"})j"));
  auto patched = call_json("PATCH", scale, R"({"spec":{"replicas":3}})", 200,
                           "application/merge-patch+json");
  EXPECT_EQ(patched.at("spec").at("replicas"), 3);
  EXPECT_EQ(call_json("GET", "/apis/apps/v1/namespaces/default/replicasets/web")
                .at("spec").at("replicas"),
            3);
  // Scaled to zero, autoscaling/v1 leaves spec.replicas out.
  auto zero = call_json("PATCH", scale, R"({"spec":{"replicas":0}})", 200,
                        "application/merge-patch+json");
  EXPECT_EQ(zero.at("spec"), json::object());

  const char* rc = R"({"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"old"},
      "spec":{"template":{"metadata":{"labels":{"tier":"back","app":"old"}},
                          "spec":{"containers":[{"name":"c","image":"x"}]}}}})";
  call_json("POST", "/api/v1/namespaces/default/replicationcontrollers", rc, 201);
  auto rc_scale = call_json("GET", "/api/v1/namespaces/default/replicationcontrollers/old/scale");
  EXPECT_EQ(rc_scale.at("status").at("selector"), "app=old,tier=back");

  auto resources = call_json("GET", "/apis/apps/v1");
  std::vector<std::string> names;
  for (const auto& r : resources.at("resources").as_array()) {
    names.emplace_back(r.at("name").as_string());
  }
  for (const char* sub : {"deployments/scale", "replicasets/scale", "statefulsets/scale"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), sub), names.end()) << sub;
  }
  EXPECT_EQ(std::find(names.begin(), names.end(), "daemonsets/scale"), names.end());
}

TEST_F(ApiHandlerTest, PatchTypesApplyToTheCurrentObject) {
  call_json("POST", kCM, cm("a"), 201);
  auto merged = call_json("PATCH", std::string(kCM) + "/a", R"({"data":{"n":"1","k":null}})", 200,
                          "application/merge-patch+json");
  EXPECT_EQ(merged.at("data"), json::parse(R"({"n":"1"})"));
  auto patched = call_json("PATCH", std::string(kCM) + "/a",
                           R"([{"op":"add","path":"/data/m","value":"2"}])", 200,
                           "application/json-patch+json");
  EXPECT_EQ(patched.at("data").at("m"), "2");
  auto smp = call_json("PATCH", std::string(kCM) + "/a", R"({"metadata":{"labels":{"l":"v"}}})",
                       200, "application/strategic-merge-patch+json");
  EXPECT_EQ(smp.at("metadata").at("labels").at("l"), "v");
  EXPECT_EQ(smp.at("data").at("m"), "2");
}

TEST_F(ApiHandlerTest, DryRunCreatesNothing) {
  call_json("POST", std::string(kCM) + "?dryRun=All", cm("a"), 201);
  call_json("GET", std::string(kCM) + "/a", "", 404);
}

// An authorizer that allows everything and counts what it is asked (a delegated one, whose every
// question may be a SubjectAccessReview to another server).
class CountingAuthorizer : public auth::DelegatedAuthorizer {
 public:
  asio::awaitable<auth::DelegatedDecision> authorize(const auth::RequestAttributes& a) override {
    asked.push_back(a.resource_request ? a.verb + " " + a.resource : a.verb + " " + a.path);
    co_return auth::DelegatedDecision{true};
  }
  std::vector<std::string> asked;
};

// As the HTTP server serves a request: its head admitted (authentication, impersonation,
// authorization) before the body is read, then the request served. Each request is authorized
// once, as kube's filter authorizes it: what the head was allowed is not asked again.
TEST_F(ApiHandlerTest, ARequestAdmittedOnItsHeadIsAuthorizedOnce) {
  auto authorizer = std::make_shared<CountingAuthorizer>();
  auth::AccessOptions access;
  access.anonymous = true;
  access.delegated_authorization = authorizer;
  handler_->set_access(access);
  const auto served = [&](std::string method, std::string target, std::string body) {
    ApiRequest req = request(std::move(method), std::move(target), std::move(body));
    ApiResponse out;
    run([&]() -> asio::awaitable<void> {
      const bool admitted = co_await handler_->admit_head(req);
      EXPECT_TRUE(admitted);
      out = co_await handler_->handle(req);
    });
    return out.status;
  };
  EXPECT_EQ(served("POST", kCM, cm("a")), 201u);
  EXPECT_EQ(served("GET", std::string(kCM) + "/a", ""), 200u);
  EXPECT_EQ(served("GET", "/version", ""), 200u);
  EXPECT_EQ(served("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                   R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
                       "spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}})"),
            201u);
  EXPECT_EQ(authorizer->asked,
            (std::vector<std::string>{"create configmaps", "get configmaps", "get /version",
                                      "create selfsubjectaccessreviews"}));
  // Served without an admitted head (a caller that skips admit_head), it is authorized then.
  authorizer->asked.clear();
  EXPECT_EQ(call("GET", std::string(kCM) + "/a").status, 200u);
  EXPECT_EQ(authorizer->asked, (std::vector<std::string>{"get configmaps"}));
}

TEST_F(ApiHandlerTest, DiscoveryListsBuiltinResourcesWithVerbsAndShortNames) {
  auto core = call_json("GET", "/api/v1");
  bool found = false;
  for (const auto& r : core.at("resources").as_array()) {
    if (r.at("name") == "pods") {
      found = true;
      EXPECT_EQ(r.at("shortNames").at(0), "po");
      EXPECT_EQ(r.at("namespaced"), true);
      EXPECT_EQ(r.at("kind"), "Pod");
    }
  }
  EXPECT_TRUE(found);
  auto groups = call_json("GET", "/apis");
  // apps, batch, networking.k8s.io, discovery.k8s.io, policy, scheduling.k8s.io,
  // storage.k8s.io, node.k8s.io, coordination.k8s.io, events.k8s.io, rbac.authorization.k8s.io,
  // apiextensions.k8s.io, admissionregistration.k8s.io, apiregistration.k8s.io, autoscaling
  // (once, for v2 and v1), certificates.k8s.io, flowcontrol.apiserver.k8s.io, resource.k8s.io,
  // and the review groups authentication.k8s.io and authorization.k8s.io.
  EXPECT_EQ(groups.at("groups").as_array().size(), 20u);
  auto reviews = call_json("GET", "/apis/authentication.k8s.io/v1");
  EXPECT_EQ(reviews.at("resources").at(1).at("name"), "tokenreviews");
  EXPECT_EQ(reviews.at("resources").at(1).at("verbs"), json::array{"create"});
  auto apps = call_json("GET", "/apis/apps/v1");
  EXPECT_EQ(apps.at("resources").at(0).at("name"), "deployments");
  EXPECT_EQ(call_json("GET", "/version").at("major"), "1");
}

// kube's values: the hash of the group/version/kind objects are stored as.
TEST_F(ApiHandlerTest, DiscoveryGivesEachStoredResourceKubesStorageVersionHash) {
  const auto hash_of = [&](const std::string& path, std::string_view name) -> std::string {
    const json::value listed = call_json("GET", path);
    for (const auto& r : listed.at("resources").as_array()) {
      if (r.at("name").as_string() == name) {
        const json::value* h = r.as_object().if_contains("storageVersionHash");
        return h != nullptr ? std::string(h->as_string()) : std::string("none");
      }
    }
    return "missing";
  };
  EXPECT_EQ(hash_of("/api/v1", "pods"), "xPOwRZ+Yhw8=");
  EXPECT_EQ(hash_of("/api/v1", "configmaps"), "qFsyl6wFWjQ=");
  EXPECT_EQ(hash_of("/api/v1", "namespaces"), "Q3oi5N2YM8M=");
  EXPECT_EQ(hash_of("/apis/apps/v1", "deployments"), "8aSe+NMegvE=");
  // Stored with the core group's events, and in autoscaling/v2 whatever the version served.
  EXPECT_EQ(hash_of("/apis/events.k8s.io/v1", "events"), hash_of("/api/v1", "events"));
  EXPECT_EQ(hash_of("/api/v1", "events"), "r2yiGXH7wu8=");
  EXPECT_EQ(hash_of("/apis/autoscaling/v1", "horizontalpodautoscalers"),
            hash_of("/apis/autoscaling/v2", "horizontalpodautoscalers"));
  // Subresources and reviews are not stored as themselves.
  EXPECT_EQ(hash_of("/api/v1", "pods/status"), "none");
  EXPECT_EQ(hash_of("/apis/authentication.k8s.io/v1", "tokenreviews"), "none");
}

// kube's namespace storage has no collection delete: discovery does not offer it, and a DELETE
// of the collection is 405 (not every namespace gone at once).
TEST_F(ApiHandlerTest, NamespacesAreNotDeletedAsACollection) {
  const json::value core = call_json("GET", "/api/v1");
  for (const auto& r : core.at("resources").as_array()) {
    const auto& verbs = r.at("verbs").as_array();
    const bool collection = std::find(verbs.begin(), verbs.end(), json::value("deletecollection")) !=
                            verbs.end();
    if (r.at("name") == "namespaces") EXPECT_FALSE(collection);
    if (r.at("name") == "configmaps") EXPECT_TRUE(collection);
  }
  auto r = call("DELETE", "/api/v1/namespaces");
  EXPECT_EQ(r.status, 405u) << r.body;
  EXPECT_EQ(json::parse(r.body).at("reason"), "MethodNotAllowed");
  EXPECT_EQ(call_json("GET", "/api/v1/namespaces/default").at("metadata").at("name"), "default");
}

TEST_F(ApiHandlerTest, OpenApiAdvertisesServerSideFieldValidationForPatch) {
  auto root = call_json("GET", "/openapi/v3");
  std::string url(root.at("paths").at("apis/apps/v1").at("serverRelativeURL").as_string());
  auto doc = call_json("GET", url);
  const auto& patch =
      doc.at("paths").at("/apis/apps/v1/namespaces/{namespace}/deployments/{name}").at("patch");
  EXPECT_EQ(patch.at("x-kubernetes-group-version-kind").at("kind"), "Deployment");
  // kubectl looks for the fieldValidation parameter among the operation's (kube's order:
  // dryRun, fieldManager, fieldValidation, force).
  std::vector<std::string> names;
  for (const auto& p : patch.at("parameters").as_array()) {
    names.emplace_back(p.at("name").as_string());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"dryRun", "fieldManager", "fieldValidation", "force"}));
}

TEST_F(ApiHandlerTest, TableIsServedWhenAskedFor) {
  call_json("POST", kCM, cm("a"), 201);
  auto r = call("GET", kCM, "", "",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
  ASSERT_EQ(r.status, 200u);
  auto table = json::parse(r.body);
  EXPECT_EQ(table.at("kind"), "Table");
  EXPECT_EQ(table.at("columnDefinitions").at(1).at("name"), "Data");
  EXPECT_EQ(table.at("rows").at(0).at("cells").at(0), "a");
}

// client-go's metadata client (garbage collectors, namespace controllers, metadata informers).
TEST_F(ApiHandlerTest, MetadataOnlyAnswersKeepOnlyTheMetadata) {
  const std::string one = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;"
                          "g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;"
                          "g=meta.k8s.io;v=v1,application/json";
  const std::string list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                           "application/json";
  auto created = call("POST", kCM, cm("a", R"({"team":"x"})"), "application/json", one);
  ASSERT_EQ(created.status, 201u) << created.body;
  auto c = json::parse(created.body);
  EXPECT_EQ(c.at("kind"), "PartialObjectMetadata");
  EXPECT_EQ(c.at("apiVersion"), "meta.k8s.io/v1");
  EXPECT_EQ(c.at("metadata").at("labels").at("team"), "x");
  EXPECT_EQ(c.as_object().size(), 3u) << created.body;  // no data
  call_json("POST", kCM, cm("b"), 201);

  auto got = call("GET", std::string(kCM) + "/a", "", "", one);
  ASSERT_EQ(got.status, 200u) << got.body;
  auto g = json::parse(got.body);
  EXPECT_EQ(g.at("kind"), "PartialObjectMetadata");
  EXPECT_EQ(g.at("metadata").at("name"), "a");
  EXPECT_EQ(g.at("metadata").at("uid"), c.at("metadata").at("uid"));
  EXPECT_FALSE(g.as_object().contains("data"));

  auto listed = call("GET", std::string(kCM) + "?limit=1", "", "", list);
  ASSERT_EQ(listed.status, 200u) << listed.body;
  auto l = json::parse(listed.body);
  EXPECT_EQ(l.at("kind"), "PartialObjectMetadataList");
  EXPECT_EQ(l.at("apiVersion"), "meta.k8s.io/v1");
  EXPECT_FALSE(l.at("metadata").at("resourceVersion").as_string().empty());
  EXPECT_FALSE(l.at("metadata").at("continue").as_string().empty());
  ASSERT_EQ(l.at("items").as_array().size(), 1u);
  EXPECT_EQ(l.at("items").at(0).at("kind"), "PartialObjectMetadata");
  EXPECT_EQ(l.at("items").at(0).at("apiVersion"), "meta.k8s.io/v1");
  EXPECT_EQ(l.at("items").at(0).at("metadata").at("name"), "a");
  EXPECT_FALSE(l.at("items").at(0).as_object().contains("data"));

  // v1beta1, as older clients ask.
  auto beta = call("GET", std::string(kCM) + "/a", "", "",
                   "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1");
  EXPECT_EQ(json::parse(beta.body).at("apiVersion"), "meta.k8s.io/v1beta1");

  // The form must fit the answer: kube's 406s.
  auto not_list = call("GET", std::string(kCM) + "/a", "", "",
                       "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
  EXPECT_EQ(not_list.status, 406u);
  EXPECT_EQ(json::parse(not_list.body).at("message"),
            "you requested PartialObjectMetadataList, but the requested object is not a list "
            "(*core.ConfigMap)");
  EXPECT_EQ(json::parse(not_list.body).at("reason"), "NotAcceptable");
  auto is_list = call("GET", kCM, "", "",
                      "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
  EXPECT_EQ(is_list.status, 406u);
  EXPECT_EQ(json::parse(is_list.body).at("message"),
            "you requested PartialObjectMetadata, but the requested object is a list "
            "(*core.ConfigMapList)");
  // A form kwatch cannot make at all, with nothing else accepted.
  auto unknown = call("GET", std::string(kCM) + "/a", "", "",
                      "application/json;as=Pod;g=meta.k8s.io;v=v1");
  EXPECT_EQ(unknown.status, 406u);
  EXPECT_EQ(json::parse(unknown.body).at("reason"), "NotAcceptable");
  // A Status stays a Status.
  auto deleted = call("DELETE", std::string(kCM) + "/b", "", "application/json", one);
  ASSERT_EQ(deleted.status, 200u) << deleted.body;
  EXPECT_EQ(json::parse(deleted.body).at("kind"), "Status");
  auto missing = call("GET", std::string(kCM) + "/b", "", "", one);
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(json::parse(missing.body).at("kind"), "Status");
}

TEST_F(ApiHandlerTest, TooLargeResourceVersionIsATimeoutWithTheKubeCause) {
  auto r = call_json("GET", std::string(kCM) + "?resourceVersion=999999", "", 504);
  EXPECT_EQ(r.at("reason"), "Timeout");
  EXPECT_EQ(r.at("details").at("causes").at(0).at("reason"), "ResourceVersionTooLarge");
  EXPECT_EQ(r.at("details").at("retryAfterSeconds"), 1);
}

TEST_F(ApiHandlerTest, ExactListReadsAnOlderRevision) {
  auto a = call_json("POST", kCM, cm("a"), 201);
  call_json("POST", kCM, cm("b"), 201);
  std::string rv(a.at("metadata").at("resourceVersion").as_string());
  auto list = call_json("GET", std::string(kCM) + "?resourceVersion=" + rv +
                                   "&resourceVersionMatch=Exact");
  EXPECT_EQ(list.at("items").as_array().size(), 1u);
  EXPECT_EQ(list.at("metadata").at("resourceVersion").as_string(), rv);
}

// ---- Poisoned objects: nothing is committed that the server cannot read back. ----

TEST_F(ApiHandlerTest, NumbersOutOfRangeAreRefusedBeforeAnyWrite) {
  const std::string body =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"inf"},"x":1e999})";
  auto r = call_json("POST", kCM, body, 400);
  EXPECT_EQ(r.at("reason"), "BadRequest");
  EXPECT_NE(r.at("message").as_string().find("x: number out of range"), std::string::npos);
  call_json("GET", std::string(kCM) + "/inf", "", 404);

  auto created = call_json("POST", kCM, cm("a"), 201);
  // A dry run is held to the same rules as the write it stands for.
  const std::string half(1600 * 1024, 'x');
  call_json("PATCH", std::string(kCM) + "/a?dryRun=All",
            R"({"data":{"p":")" + half + R"(","q":")" + half + R"("}})", 413,
            "application/merge-patch+json");
  call_json("PATCH", std::string(kCM) + "/a", R"({"data":{"x":1e999}})", 400,
            "application/merge-patch+json");
  call_json("PUT", std::string(kCM) + "/a",
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"y":-1e400})", 400);
  auto after = call_json("GET", std::string(kCM) + "/a");
  EXPECT_EQ(after.at("metadata").at("resourceVersion"),
            created.at("metadata").at("resourceVersion"));
}

TEST_F(ApiHandlerTest, APatchNestingPastTheDepthLimitIsRefusedAndNothingIsWritten) {
  auto created = call_json("POST", kCM, cm("a"), 201);
  auto nested = [](int levels) {
    std::string v = "1";
    for (int i = 0; i < levels; ++i) v = R"({"a":)" + v + "}";
    return v;
  };
  std::string below = "/x";
  for (int i = 0; i < 59; ++i) below += "/a";
  const std::string patch = R"([{"op":"add","path":"/x","value":)" + nested(60) +
                            R"(},{"op":"add","path":")" + below + R"(","value":)" + nested(60) +
                            "}]";
  auto r = call_json("PATCH", std::string(kCM) + "/a", patch, 422,
                     "application/json-patch+json");
  EXPECT_EQ(r.at("reason"), "Invalid");
  // A merge patch of the same depth cannot even be sent: the body itself is too deep.
  std::string deep = R"({"x":)" + nested(120) + "}";
  call_json("PATCH", std::string(kCM) + "/a", deep, 400, "application/merge-patch+json");
  auto after = call_json("GET", std::string(kCM) + "/a");
  EXPECT_EQ(after.at("metadata").at("resourceVersion"),
            created.at("metadata").at("resourceVersion"));
}

TEST_F(ApiHandlerTest, PatchResultsAreBoundedAndStopEarly) {
  auto created = call_json("POST", kCM, cm("a"), 201);
  // 22 copies of the whole object into itself (a 782-byte request that once stored 87 MB).
  std::string ops = "[";
  for (int i = 0; i < 22; ++i) {
    if (i > 0) ops += ",";
    ops += R"({"op":"copy","from":"","path":"/data/k)" + std::to_string(i) + R"("})";
  }
  ops += "]";
  auto r = call_json("PATCH", std::string(kCM) + "/a", ops, 422, "application/json-patch+json");
  EXPECT_EQ(r.at("reason"), "Invalid");
  // A merge patch whose result is over the object limit: 413, as for a body over the limit.
  const std::string half(1600 * 1024, 'x');
  call_json("PATCH", std::string(kCM) + "/a", R"({"data":{"p":")" + half + R"("}})", 200,
            "application/merge-patch+json");
  auto big = call_json("PATCH", std::string(kCM) + "/a",
                       R"({"data":{"q":")" + half + R"("}})", 413,
                       "application/merge-patch+json");
  EXPECT_EQ(big.at("reason"), "RequestEntityTooLarge");
  auto after = call_json("GET", std::string(kCM) + "/a");
  EXPECT_FALSE(after.at("data").as_object().contains("q"));
}

TEST_F(ApiHandlerTest, StatusMessagesStayValidJsonWhateverTheRequestHeld) {
  // A kind with invalid UTF-8 in a protobuf body is quoted back, sanitized.
  std::string pb = std::string("k8s\0", 4);
  auto field = [](int n, const std::string& b) {
    return std::string(1, static_cast<char>(n << 3 | 2)) + std::string(1, static_cast<char>(b.size())) + b;
  };
  pb += field(1, field(1, "v1") + field(2, "Bad\xff\xfeKind")) + field(2, "");
  auto r = call("POST", kCM, pb, "application/vnd.kubernetes.protobuf");
  EXPECT_EQ(r.status, 415u);
  boost::system::error_code ec;
  auto v = json::parse(r.body, ec);
  ASSERT_FALSE(ec) << r.body;
  EXPECT_EQ(v.at("reason"), "UnsupportedMediaType");
}

class UnreadableObjectTest : public ApiHandlerTest {
 protected:
  // Writes bytes kwatch itself would never write, straight into storage.
  void put_raw(const std::string& name, const std::string& bytes) {
    run([&]() -> asio::awaitable<void> {
      auto r = co_await storage_->put_if("/registry/configmaps/default/" + name, 0, bytes);
      EXPECT_TRUE(r && r->succeeded);
    });
  }
};

TEST_F(UnreadableObjectTest, IsA500ThatSaysHowToDeleteItAndDoesNotBreakLists) {
  call_json("POST", kCM, cm("good"), 201);
  put_raw("inf", R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"inf"},"x":Infinity})");
  put_raw("deep", R"({"metadata":{"name":"deep"},"x":)" + std::string(200, '[') +
                      std::string(200, ']') + "}");
  put_raw("utf8", "{\"metadata\":{\"name\":\"utf8\"},\"x\":\"\xff\"}");
  for (const char* name : {"inf", "deep", "utf8"}) {
    const std::string path = std::string(kCM) + "/" + name;
    auto r = call_json("GET", path, "", 500);
    EXPECT_EQ(r.at("reason"), "InternalError");
    EXPECT_NE(r.at("message").as_string().find("ignoreStoreReadErrorWithClusterBreakingPotential"),
              std::string::npos);
    call_json("PUT", path, cm(name), 500);
    call_json("PATCH", path, R"({"data":{"k":"v2"}})", 500, "application/merge-patch+json");
    // A plain delete cannot check what it deletes; as kube-apiserver, it needs the option.
    call_json("DELETE", path, "", 500);
  }
  // Lists read from storage skip what cannot be read and show the rest.
  auto list = call_json("GET", kCM);
  ASSERT_EQ(list.at("items").as_array().size(), 1u);
  EXPECT_EQ(list.at("items").at(0).at("metadata").at("name"), "good");

  auto deleted = call_json(
      "DELETE", std::string(kCM) + "/inf?ignoreStoreReadErrorWithClusterBreakingPotential=true");
  EXPECT_EQ(deleted.at("status"), "Success");
  call_json("DELETE", std::string(kCM) + "/deep", R"({"kind":"DeleteOptions","apiVersion":"v1",
      "ignoreStoreReadErrorWithClusterBreakingPotential":true})");
  call_json("DELETE", std::string(kCM) + "/utf8?ignoreStoreReadErrorWithClusterBreakingPotential=true&dryRun=All");
  call_json("GET", std::string(kCM) + "/inf", "", 404);
  call_json("GET", std::string(kCM) + "/deep", "", 404);
  call_json("GET", std::string(kCM) + "/utf8", "", 500);  // dry run: still there
  // The option changes nothing for an object that can be read.
  auto good = call_json(
      "DELETE", std::string(kCM) + "/good?ignoreStoreReadErrorWithClusterBreakingPotential=true");
  EXPECT_EQ(good.at("details").at("name"), "good");
  // The name is free again.
  call_json("POST", kCM, cm("inf"), 201);
}

// Records the thread each update starts on (an update asks the state cache first).
class ThreadRecorder : public registry::StateCache {
 public:
  std::optional<State> lookup(const kinds::ResourceInfo&,
                              const std::string&) const override {
    std::lock_guard lock(mutex_);
    threads_.push_back(std::this_thread::get_id());
    return std::nullopt;
  }
  std::thread::id last() const {
    std::lock_guard lock(mutex_);
    return threads_.empty() ? std::thread::id() : threads_.back();
  }

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::thread::id> threads_;
};

TEST_F(ApiHandlerTest, PatchesAndLargeBodiesRunOnTheComputeExecutorOthersInline) {
  asio::thread_pool compute(1);
  std::thread::id compute_thread;
  asio::post(compute, [&] { compute_thread = std::this_thread::get_id(); });
  auto recorder = std::make_shared<ThreadRecorder>();
  auto scheme = kinds::Scheme::builtin();
  store_ = std::make_shared<registry::ResourceStore>(storage_, scheme, recorder);
  ComputeOptions options;
  options.executor = compute.get_executor();
  options.large_body_bytes = 4096;
  handler_ = std::make_shared<ApiHandler>(scheme, store_, std::make_shared<Metrics>(),
                                          "127.0.0.1:0", nullptr, WatchOptions{}, options);
  auto created = call_json("POST", kCM, cm("a"), 201);
  const std::string path = std::string(kCM) + "/a";

  call_json("PATCH", path, R"({"data":{"k":"v2"}})", 200, "application/merge-patch+json");
  EXPECT_EQ(recorder->last(), compute_thread);

  created.at("data").as_object()["k"] = "small";
  created.at("metadata").as_object().erase("resourceVersion");
  call_json("PUT", path, json::serialize(created));
  EXPECT_EQ(recorder->last(), std::this_thread::get_id());

  created.at("data").as_object()["k"] = std::string(8192, 'x');
  call_json("PUT", path, json::serialize(created));
  EXPECT_EQ(recorder->last(), compute_thread);
  compute.join();
}

}  // namespace
}  // namespace kwatch::server
