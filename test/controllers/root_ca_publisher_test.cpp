#include "controllers/root_ca_publisher.hpp"

#include "test/controllers/controller_fixture.hpp"

#include <boost/json/serialize.hpp>

#include <string>

namespace kwatch::controllers {
namespace {

namespace json = boost::json;

constexpr const char* kBundle = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
constexpr const char* kDescription =
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.";

class RootCaPublisherTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    namespaces_ = scheme_->find("", "v1", "namespaces");
    configmaps_ = scheme_->find("", "v1", "configmaps");
  }

  void TearDown() override {
    if (publisher_) publisher_->stop();
    ControllerTest::TearDown();
  }

  void start_publisher() {
    publisher_ = std::make_shared<RootCaPublisher>(*scheme_, store_, cachers_, kBundle);
    publisher_->start(ioc_.get_executor());
  }

  void create_namespace(const std::string& name, const std::string& finalizers = "") {
    std::string meta = R"({"name":")" + name + "\"";
    if (!finalizers.empty()) meta += R"(,"finalizers":[")" + finalizers + "\"]";
    create(*namespaces_, R"({"apiVersion":"v1","kind":"Namespace","metadata":)" + meta + "}}",
           "");
  }

  std::optional<json::object> root_ca(const std::string& ns) {
    return get(*configmaps_, "kube-root-ca.crt", ns);
  }

  // Whether the namespace holds kube-root-ca.crt as kube's publisher writes it.
  bool published(const std::string& ns) {
    auto cm = root_ca(ns);
    if (!cm) return false;
    const json::object* annotations =
        cm->at("metadata").as_object().if_contains("annotations")
            ? &cm->at("metadata").at("annotations").as_object()
            : nullptr;
    return cm->if_contains("data") && cm->at("data") == json::object{{"ca.crt", kBundle}} &&
           annotations != nullptr && annotations->if_contains("kubernetes.io/description") &&
           annotations->at("kubernetes.io/description") == kDescription;
  }

  std::shared_ptr<const kinds::ResourceInfo> namespaces_, configmaps_;
  std::shared_ptr<RootCaPublisher> publisher_;
};

// Namespaces there at start and namespaces made later get the bundle, with kube's description.
TEST_F(RootCaPublisherTest, EveryNamespaceGetsTheBundle) {
  create_namespace("early");
  start_publisher();
  EXPECT_TRUE(eventually([&] { return published("early") && published("t"); }));
  create_namespace("late");
  EXPECT_TRUE(eventually([&] { return published("late"); }));
}

// A deleted kube-root-ca.crt comes back; changed data and a removed description are written
// back, and what else a client added (a label) is kept.
TEST_F(RootCaPublisherTest, ChangesAndDeletionsAreUndone) {
  start_publisher();
  ASSERT_TRUE(eventually([&] { return published("t"); }));
  remove(*configmaps_, "kube-root-ca.crt");
  ASSERT_TRUE(eventually([&] { return published("t"); })) << "not created again";
  update(*configmaps_, "kube-root-ca.crt", [](json::object& cm) {
    cm["data"] = json::object{{"ca.crt", "forged"}, {"extra", "x"}};
    cm["metadata"].as_object()["labels"] = json::object{{"keep", "me"}};
  });
  ASSERT_TRUE(eventually([&] { return published("t"); })) << "the data is not written back";
  EXPECT_EQ(root_ca("t")->at("metadata").at("labels"), json::object({{"keep", "me"}}));
  update(*configmaps_, "kube-root-ca.crt", [](json::object& cm) {
    cm["metadata"].as_object()["annotations"].as_object().erase("kubernetes.io/description");
  });
  EXPECT_TRUE(eventually([&] { return published("t"); })) << "the description is not put back";
}

// A namespace being deleted gets none (kube's create is refused there and not tried again).
TEST_F(RootCaPublisherTest, ANamespaceBeingDeletedGetsNone) {
  create_namespace("dying", "example.com/hold");
  remove(*namespaces_, "dying", registry::Propagation::background, "");
  ASSERT_TRUE(get(*namespaces_, "dying", "")->at("metadata").as_object().contains(
      "deletionTimestamp"));
  create_namespace("later");
  start_publisher();
  // Namespaces are synced in name order: once "later" has it, "dying" was looked at.
  ASSERT_TRUE(eventually([&] { return published("later"); }));
  EXPECT_FALSE(root_ca("dying").has_value());
}

// Two replicas publishing different bundles would write over each other without end: each
// writes back ever less often (a hold doubling from 1 s), instead of a write per write.
TEST_F(RootCaPublisherTest, ReplicasWithDifferentBundlesBackOff) {
  start_publisher();
  auto other = std::make_shared<RootCaPublisher>(*scheme_, store_, cachers_, "another bundle");
  other->start(ioc_.get_executor());
  auto hold = [&] { return std::max(publisher_->hold_of("t"), other->hold_of("t")); };
  EXPECT_TRUE(eventually([&] { return hold() >= std::chrono::seconds(2); },
                         std::chrono::milliseconds(15000)))
      << "the fight is not held back";
  other->stop();
}

}  // namespace
}  // namespace kwatch::controllers
