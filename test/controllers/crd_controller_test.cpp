#include "controllers/crd_controller.hpp"

#include "test/controllers/controller_fixture.hpp"

#include <boost/json/serialize.hpp>

#include <string>

namespace kwatch::controllers {
namespace {

namespace json = boost::json;

constexpr const char* kWidgets = R"({"apiVersion":"apiextensions.k8s.io/v1",
  "kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},
  "spec":{"group":"example.com","scope":"Namespaced",
    "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
    "versions":[{"name":"v1","served":true,"storage":true,
      "schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}}}]}})";

class CrdControllerTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    crds_ = scheme_->find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    start(std::make_shared<CrdController>(scheme_, store_, cachers_, storage_, "/registry"));
  }

  bool condition(const std::string& type) {
    auto crd = get(*crds_, "widgets.example.com", "");
    if (!crd) return false;
    const json::value* conditions = crd->at("status").as_object().if_contains("conditions");
    if (conditions == nullptr) return false;
    for (const auto& c : conditions->as_array()) {
      if (c.at("type") == type.c_str() && c.at("status") == "True") return true;
    }
    return false;
  }

  std::shared_ptr<const kinds::ResourceInfo> crds_;
};

// A definition becomes a served resource, accepted and established; deleting it deletes its
// objects first, then the definition and the resource go.
TEST_F(CrdControllerTest, ADefinitionIsServedThenGoesWithItsObjects) {
  create(*crds_, kWidgets, "");
  ASSERT_TRUE(eventually([&] {
    return condition("Established") && scheme_->find("example.com", "v1", "widgets") != nullptr;
  }));
  EXPECT_TRUE(condition("NamesAccepted"));
  auto widgets = scheme_->find("example.com", "v1", "widgets");
  create(*widgets, R"({"apiVersion":"example.com/v1","kind":"Widget",
      "metadata":{"name":"w"},"spec":{"size":3}})");
  ASSERT_TRUE(get(*widgets, "w").has_value());

  remove(*crds_, "widgets.example.com", registry::Propagation::background, "");
  ASSERT_TRUE(eventually([&] { return !get(*crds_, "widgets.example.com", "").has_value(); }))
      << "the definition is still there";
  EXPECT_EQ(scheme_->find("example.com", "v1", "widgets"), nullptr);
  // Its objects went from storage too (read through the resource as it was served).
  EXPECT_FALSE(get(*widgets, "w").has_value());
}

}  // namespace
}  // namespace kwatch::controllers
