#include "controllers/namespace_controller.hpp"

#include "test/controllers/controller_fixture.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <string>

namespace kwatch::controllers {
namespace {

namespace json = boost::json;

class NamespaceControllerTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    namespaces_ = scheme_->find("", "v1", "namespaces");
    configmaps_ = scheme_->find("", "v1", "configmaps");
    service_accounts_ = scheme_->find("", "v1", "serviceaccounts");
  }

  void start_controller() {
    start(std::make_shared<NamespaceController>(scheme_, store_, cachers_, storage_));
  }

  void create_namespace(const std::string& name) {
    create(*namespaces_, R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + name +
                             R"("}})",
           "");
  }

  bool exists(const kinds::ResourceInfo& info, const std::string& name, const std::string& in) {
    return get(info, name, in).has_value();
  }

  std::shared_ptr<const kinds::ResourceInfo> namespaces_, configmaps_, service_accounts_;
};

// A deleted namespace is emptied, then its `kubernetes` finalizer goes, and with it the namespace.
TEST_F(NamespaceControllerTest, ADeletedNamespaceIsEmptiedThenGoes) {
  create_namespace("gone");
  create(*configmaps_, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}})",
         "gone");
  start_controller();
  remove(*namespaces_, "gone", registry::Propagation::background, "");
  ASSERT_TRUE(eventually([&] { return !exists(*namespaces_, "gone", ""); }))
      << "the namespace is still there";
  EXPECT_FALSE(exists(*configmaps_, "c", "gone"));
}

// What a finalizer of its own holds keeps the namespace Terminating, with a condition that says
// so; once it lets go, the namespace goes.
TEST_F(NamespaceControllerTest, AnObjectHeldByItsFinalizerKeepsTheNamespace) {
  create_namespace("held");
  create(*configmaps_,
         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c",
             "finalizers":["example.com/hold"]}})",
         "held");
  start_controller();
  remove(*namespaces_, "held", registry::Propagation::background, "");
  auto waiting_for_finalizers = [&] {
    auto ns = get(*namespaces_, "held", "");
    if (!ns) return false;
    const json::value* conditions = ns->at("status").as_object().if_contains("conditions");
    if (conditions == nullptr) return false;
    for (const auto& c : conditions->as_array()) {
      if (c.at("type") == "NamespaceFinalizersRemaining" && c.at("status") == "True") return true;
    }
    return false;
  };
  ASSERT_TRUE(eventually(waiting_for_finalizers)) << json::serialize(*get(*namespaces_, "held", ""));
  EXPECT_EQ(get(*namespaces_, "held", "")->at("status").at("phase"), "Terminating");
  update(*configmaps_, "c", [](json::object& cm) {
    cm["metadata"].as_object().erase("finalizers");
  }, "held");
  EXPECT_TRUE(eventually([&] { return !exists(*namespaces_, "held", ""); }));
}

// Every namespace not being deleted has a `default` ServiceAccount, made again when deleted.
TEST_F(NamespaceControllerTest, EveryNamespaceKeepsADefaultServiceAccount) {
  create_namespace("fresh");
  start_controller();
  ASSERT_TRUE(eventually([&] { return exists(*service_accounts_, "default", "fresh"); }));
  remove(*service_accounts_, "default", registry::Propagation::background, "fresh");
  EXPECT_TRUE(eventually([&] { return exists(*service_accounts_, "default", "fresh"); }));
}

}  // namespace
}  // namespace kwatch::controllers
