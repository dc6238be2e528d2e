#include "controllers/cluster_role_aggregator.hpp"

#include "test/controllers/controller_fixture.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <string>

namespace kwatch::controllers {
namespace {

namespace json = boost::json;

class ClusterRoleAggregatorTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    roles_ = scheme_->find("rbac.authorization.k8s.io", "v1", "clusterroles");
  }

  // The role's stored rules (null when it has none).
  json::value stored_rules(const std::string& name) {
    auto role = get(*roles_, name, "");
    const json::value* rules = role ? role->if_contains("rules") : nullptr;
    return rules ? *rules : json::value();
  }

  std::shared_ptr<const kinds::ResourceInfo> roles_;
};

// The rules of the roles a selector matches are written into the aggregating role, and follow
// them when they change.
TEST_F(ClusterRoleAggregatorTest, AggregatedRulesAreStoredAndFollowTheirSources) {
  create(*roles_, R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
      "metadata":{"name":"reads-pods","labels":{"team":"yes"}},
      "rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]})",
         "");
  create(*roles_, R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
      "metadata":{"name":"team"},
      "aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"team":"yes"}}]},"rules":[]})",
         "");
  start(std::make_shared<ClusterRoleAggregator>(scheme_, store_, cachers_));
  const json::value pods =
      json::parse(R"([{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}])");
  ASSERT_TRUE(eventually([&] { return stored_rules("team") == pods; }))
      << json::serialize(stored_rules("team"));
  update(*roles_, "reads-pods", [](json::object& role) {
    role["rules"].as_array()[0].as_object()["verbs"] = json::array{"get", "list"};
  }, "");
  const json::value more =
      json::parse(R"([{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}])");
  EXPECT_TRUE(eventually([&] { return stored_rules("team") == more; }))
      << json::serialize(stored_rules("team"));
}

}  // namespace
}  // namespace kwatch::controllers
