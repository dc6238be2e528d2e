#include "flowcontrol/config_keeper.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/breakable_storage.hpp"
#include "test/support/io_turns.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

namespace kwatch::flowcontrol {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

constexpr const char* kGroup = "flowcontrol.apiserver.k8s.io";

class ConfigKeeperTest : public ::testing::Test {
 protected:
  // The caches over storage whose progress is ordered with events or not (as they learn at
  // their start), and the keeper.
  void start(bool unordered) {
    auto memory = storage::MemoryStorage::open({});
    ASSERT_TRUE(memory);
    storage_ = std::make_shared<test::BreakableStorage>(
        std::shared_ptr<storage::Storage>(std::move(*memory)));
    storage_->unordered = unordered;
    scheme_ = kinds::Scheme::builtin();
    store_ = std::make_shared<registry::ResourceStore>(storage_, scheme_);
    cachers_ = std::make_shared<registry::CacherRegistry>(ioc_.get_executor(), storage_,
                                                          registry::CacherDefaults{});
    levels_ = scheme_->find(kGroup, "v1", "prioritylevelconfigurations");
    schemas_ = scheme_->find(kGroup, "v1", "flowschemas");
    ASSERT_TRUE(levels_ && schemas_);
    auto a = cachers_->ensure(*levels_);
    auto b = cachers_->ensure(*schemas_);
    ASSERT_TRUE(test::eventually(ioc_, [&] { return a->ready() && b->ready(); }));
    apf_ = std::make_shared<PriorityAndFairness>(Options{});
    keeper_ = std::make_shared<ConfigKeeper>(apf_, scheme_, cachers_, store_);
  }

  void TearDown() override {
    if (!keeper_) return;
    keeper_->stop();
    cachers_->stop_all();
    test::turn(ioc_);
  }

  // The FlowSchemas in their cache, each with whether its Dangling condition says "False".
  std::map<std::string, bool> cached_schemas() const {
    std::map<std::string, bool> out;
    auto cacher = cachers_->find(*schemas_);
    for (const auto& o : cacher->list(schemas_->key_prefix(), "", 0, nullptr).objects) {
      auto v = apimachinery::parse_json(o->json);
      bool found = false;
      if (const json::array* cs = apimachinery::array_member(
              apimachinery::object_member(v->get_object(), "status"), "conditions")) {
        for (const auto& c : *cs) {
          found = found || (apimachinery::string_member(c.get_object(), "type") == "Dangling" &&
                            apimachinery::string_member(c.get_object(), "status") == "False");
        }
      }
      out[std::string(o->name)] = found;
    }
    return out;
  }

  asio::io_context ioc_;
  std::shared_ptr<test::BreakableStorage> storage_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<const kinds::ResourceInfo> levels_, schemas_;
  std::shared_ptr<PriorityAndFairness> apf_;
  std::shared_ptr<ConfigKeeper> keeper_;
};

// etcd before 3.4.25 may announce progress ahead of events, so a cache over it cannot prove it is
// current. Start-up then waits until the caches hold what the keeper wrote: were it to go on,
// /readyz would turn green while the configuration lacks objects the caches have not shown yet,
// and clients' first requests would be classified by what is left (catch-all, which refuses
// rather than queues).
TEST_F(ConfigKeeperTest, SettlingOnUnorderedProgressWaitsForTheCachesToHoldTheBootstrapWrites) {
  ASSERT_NO_FATAL_FAILURE(start(true));
  ASSERT_FALSE(cachers_->find(*schemas_)->progress_ordered());
  storage_->paused = true;  // the writes stay in storage; the caches do not see them yet
  EXPECT_TRUE(test::run_to_end<bool>(ioc_, [this] { return keeper_->ensure_bootstrap(); }));

  bool settled = false;
  asio::co_spawn(ioc_, keeper_->settle(), [&](std::exception_ptr e) {
    settled = true;
    if (e) std::rethrow_exception(e);
  });
  // Settling cannot end while the caches lack the writes: an end now would be the bug.
  EXPECT_FALSE(test::eventually(ioc_, [&] { return settled; }, 300ms))
      << "settled before the caches held the bootstrap objects";
  EXPECT_TRUE(cached_schemas().empty());

  storage_->paused = false;
  ASSERT_TRUE(test::eventually(ioc_, [&] { return settled; }));
  // Every FlowSchema was seen, and its Dangling condition written and seen too.
  const auto schemas = cached_schemas();
  EXPECT_EQ(schemas.size(), 11u);
  for (const auto& [name, found] : schemas) EXPECT_TRUE(found) << name;

  const apimachinery::UserInfo anonymous{"system:anonymous", "", {"system:unauthenticated"}};
  RequestDigest r;
  r.user = &anonymous;
  r.resource_request = true;
  r.verb = "watch";
  r.api_version = "v1";
  r.resource = "configmaps";
  r.namespace_ = "default";
  EXPECT_EQ(apf_->classify(r).flow_schema, "global-default");
}

// With progress ordered with events the caches prove they are current as before.
TEST_F(ConfigKeeperTest, SettlingOnOrderedProgressWritesEveryDanglingCondition) {
  ASSERT_NO_FATAL_FAILURE(start(false));
  EXPECT_TRUE(test::run_to_end<bool>(ioc_, [this] { return keeper_->ensure_bootstrap(); }));
  bool settled = false;
  asio::co_spawn(ioc_, keeper_->settle(), [&](std::exception_ptr e) {
    settled = true;
    if (e) std::rethrow_exception(e);
  });
  ASSERT_TRUE(test::eventually(ioc_, [&] { return settled; }));
  const auto schemas = cached_schemas();
  EXPECT_EQ(schemas.size(), 11u);
  for (const auto& [name, found] : schemas) EXPECT_TRUE(found) << name;
}

}  // namespace
}  // namespace kwatch::flowcontrol
