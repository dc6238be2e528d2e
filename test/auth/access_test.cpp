#include "auth/access.hpp"

#include "auth/rbac_policy_source.hpp"
#include "auth/reviews.hpp"
#include "auth/token_file.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/io_turns.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace kwatch::auth {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiResult;
using base::Errc;

// Authentication, impersonation, authorization and the reviews over the embedded store: RBAC
// objects written through the store reach the policy through the watch caches, as in the server.
class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = storage::MemoryStorage::open({});
    ASSERT_TRUE(storage);
    storage_ = std::move(*storage);
    scheme_ = kinds::Scheme::builtin();
    store_ = std::make_shared<registry::ResourceStore>(storage_, scheme_);
    cachers_ = std::make_shared<registry::CacherRegistry>(ioc_.get_executor(), storage_,
                                                          registry::CacherDefaults{});
    for (const char* resource : {"roles", "clusterroles", "rolebindings", "clusterrolebindings"}) {
      cachers_->ensure(*scheme_->find("rbac.authorization.k8s.io", "v1", resource));
    }
    auto tokens = TokenFile::parse("alice-token,alice,1001,\"devs\"\nbob-token,bob,1002\n",
                                   "tokens.csv");
    ASSERT_TRUE(tokens);
    options_.tokens = *tokens;
    options_.scheme = scheme_;
    options_.cachers = cachers_;
    options_.store = store_;
    EXPECT_TRUE(run<bool>([&]() -> asio::awaitable<bool> {
      std::string ns = "team";
      co_return (co_await store_->ensure_namespace(std::move(ns))).has_value();
    }));
  }

  void TearDown() override {
    if (options_.rbac) options_.rbac->stop();
    cachers_->stop_all();
    turn();
  }

  void turn() { test::turn(ioc_); }

  template <class T>
  T run(std::function<asio::awaitable<T>()> f) {
    return test::run_to_end<T>(ioc_, std::move(f));
  }

  void create(const std::string& resource, const std::string& text) {
    auto info = scheme_->find("rbac.authorization.k8s.io", "v1", resource);
    auto r = run<bool>([&]() -> asio::awaitable<bool> {
      auto body = json::parse(text).as_object();
      std::string ns = resource.starts_with("cluster") ? "" : "team";
      registry::WriteQuery query;
      auto created = co_await store_->create(*info, std::move(ns), std::move(body),
                                             std::move(query));
      EXPECT_TRUE(created) << (created ? "" : created.error().message);
      co_return created.has_value();
    });
    EXPECT_TRUE(r);
  }

  // RBAC on, its policy holding every object created so far.
  void use_rbac() {
    auto source = std::make_shared<RbacPolicySource>(scheme_, cachers_, storage_);
    source->start(ioc_.get_executor());
    options_.rbac = source;
    auto written = run<std::int64_t>([&]() -> asio::awaitable<std::int64_t> {
      co_return (co_await storage_->current_revision()).value();
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (source->covered_revision() < written && std::chrono::steady_clock::now() < deadline) {
      source->refresh();
      turn();
    }
    ASSERT_GE(source->covered_revision(), written);
  }

  ApiResult<UserInfo> authenticate_with(Credentials credentials, bool health_probe = false) {
    return run<ApiResult<UserInfo>>([&]() -> asio::awaitable<ApiResult<UserInfo>> {
      co_return co_await authenticate(options_, credentials, health_probe);
    });
  }

  ApiResult<UserInfo> impersonate_now(const UserInfo& user, const Impersonation& impersonation) {
    return run<ApiResult<UserInfo>>([&]() -> asio::awaitable<ApiResult<UserInfo>> {
      co_return co_await impersonate(options_, user, impersonation);
    });
  }

  std::optional<apimachinery::ApiError> authorize_now(const RequestAttributes& a) {
    using Denial = std::optional<apimachinery::ApiError>;
    return run<Denial>([&]() -> asio::awaitable<Denial> {
      co_return co_await authorize(options_, a);
    });
  }

  asio::io_context ioc_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  AccessOptions options_;
};

UserInfo user(std::string name, std::vector<std::string> groups = {"system:authenticated"}) {
  return UserInfo{std::move(name), "", std::move(groups)};
}

constexpr const char* kImpersonator = R"({"metadata":{"name":"impersonator"},"rules":[
    {"verbs":["impersonate"],"apiGroups":[""],"resources":["users"],"resourceNames":["bob"]},
    {"verbs":["impersonate"],"apiGroups":[""],"resources":["groups"],"resourceNames":["devs"]}]})";
constexpr const char* kImpersonatorBinding = R"({"metadata":{"name":"alice-impersonates"},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"impersonator"},
    "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"alice"}]})";
constexpr const char* kReader = R"({"metadata":{"name":"reader"},"rules":[
    {"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}]})";
constexpr const char* kReaderBinding = R"({"metadata":{"name":"bob-reads"},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"reader"},
    "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"bob"}]})";

TEST_F(AccessTest, ABearerTokenNamesItsUserWithTheAuthenticatedGroup) {
  auto alice = authenticate_with({.authorization = "Bearer alice-token"});
  ASSERT_TRUE(alice);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->uid, "1001");
  EXPECT_EQ(alice->groups, (std::vector<std::string>{"devs", "system:authenticated"}));
}

TEST_F(AccessTest, AnUnknownTokenIsUnauthorizedNotAnonymous) {
  auto r = authenticate_with({.authorization = "Bearer nobody"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::unauthorized);
  EXPECT_EQ(r.error().message, "Unauthorized");
}

TEST_F(AccessTest, AClientCertificateComesBeforeAToken) {
  auto cert = std::make_shared<ClientCertificate>();
  cert->user = "carol";
  cert->groups = {"ops"};
  auto r = authenticate_with({.authorization = "Bearer nobody", .client_certificate = cert});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "carol");
  EXPECT_EQ(r->groups, (std::vector<std::string>{"ops", "system:authenticated"}));
}

TEST_F(AccessTest, ACertificateThatFailedItsCheckIsUnauthorized) {
  auto cert = std::make_shared<ClientCertificate>();
  cert->error = "x509: certificate has expired";
  cert->user = "carol";
  auto r = authenticate_with({.client_certificate = cert});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::unauthorized);
}

TEST_F(AccessTest, NoCredentialsAreAnonymousOnlyWhenAllowedOrAProbe) {
  auto anonymous = authenticate_with({});
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->name, "system:anonymous");
  EXPECT_EQ(anonymous->groups, (std::vector<std::string>{"system:unauthenticated"}));

  options_.anonymous = false;
  auto refused = authenticate_with({});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::unauthorized);
  auto probe = authenticate_with({}, /*health_probe=*/true);
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->name, "system:anonymous");
}

TEST_F(AccessTest, ATokenIsNoCredentialWhenNoAuthenticatorChecksTokens) {
  options_.tokens = nullptr;
  auto r = authenticate_with({.authorization = "Bearer alice-token"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "system:anonymous");
}

TEST_F(AccessTest, WithoutImpersonationTheUserActsAsItself) {
  auto r = impersonate_now(user("alice"), Impersonation{});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "alice");
}

TEST_F(AccessTest, ImpersonatingGroupsWithoutAUserIsABadRequest) {
  Impersonation groups_only;
  groups_only.groups = {"devs"};
  auto r = impersonate_now(user("alice"), groups_only);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::bad_request);
}

TEST_F(AccessTest, ImpersonationNeedsTheImpersonateVerbOnEveryIdentity) {
  create("clusterroles", kImpersonator);
  create("clusterrolebindings", kImpersonatorBinding);
  use_rbac();
  Impersonation as_bob;
  as_bob.user = "bob";
  as_bob.groups = {"devs"};
  auto bob = impersonate_now(user("alice"), as_bob);
  ASSERT_TRUE(bob) << bob.error().message;
  EXPECT_EQ(bob->name, "bob");
  EXPECT_EQ(bob->groups, (std::vector<std::string>{"devs", "system:authenticated"}));

  as_bob.groups = {"system:masters"};
  auto masters = impersonate_now(user("alice"), as_bob);
  ASSERT_FALSE(masters);
  EXPECT_EQ(masters.error().code, Errc::forbidden);
  EXPECT_EQ(masters.error().message,
            "groups \"system:masters\" is forbidden: User \"alice\" cannot impersonate resource "
            "\"groups\" in API group \"\" at the cluster scope");

  Impersonation as_carol;
  as_carol.user = "carol";
  EXPECT_FALSE(impersonate_now(user("alice"), as_carol));
  EXPECT_FALSE(impersonate_now(user("bob"), Impersonation{.user = "bob"}));
}

TEST_F(AccessTest, ImpersonatingAServiceAccountChecksItInItsNamespace) {
  create("clusterroles", R"({"metadata":{"name":"sa-impersonator"},"rules":[
    {"verbs":["impersonate"],"apiGroups":[""],"resources":["serviceaccounts"]}]})");
  create("rolebindings", R"({"metadata":{"name":"alice-sa"},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"sa-impersonator"},
    "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"alice"}]})");
  use_rbac();
  auto in_team = impersonate_now(user("alice"),
                             Impersonation{.user = "system:serviceaccount:team:builder"});
  ASSERT_TRUE(in_team) << in_team.error().message;
  EXPECT_EQ(in_team->groups,
            (std::vector<std::string>{"system:serviceaccounts", "system:serviceaccounts:team",
                                      "system:authenticated"}));
  auto elsewhere = impersonate_now(user("alice"),
                               Impersonation{.user = "system:serviceaccount:kube-system:admin"});
  ASSERT_FALSE(elsewhere);
  EXPECT_EQ(elsewhere.error().code, Errc::forbidden);
}

TEST_F(AccessTest, AuthorizeWordsADenialAsKubeDoes) {
  create("roles", kReader);
  create("rolebindings", kReaderBinding);
  use_rbac();
  RequestAttributes a;
  a.user = user("bob");
  a.verb = "get";
  a.resource = "configmaps";
  a.namespace_ = "team";
  a.name = "settings";
  EXPECT_FALSE(authorize_now(a));
  a.verb = "delete";
  auto denied = authorize_now(a);
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->code, Errc::forbidden);
  EXPECT_EQ(denied->message,
            "configmaps \"settings\" is forbidden: User \"bob\" cannot delete resource "
            "\"configmaps\" in API group \"\" in the namespace \"team\"");
  EXPECT_EQ(denied->name, "settings");
  EXPECT_EQ(denied->kind, "configmaps");

  RequestAttributes path;
  path.user = user("bob");
  path.resource_request = false;
  path.verb = "get";
  path.path = "/metrics";
  auto no_path = authorize_now(path);
  ASSERT_TRUE(no_path);
  EXPECT_EQ(no_path->message, "forbidden: User \"bob\" cannot get path \"/metrics\"");

  // system:masters needs no policy.
  a.user = user("root", {"system:masters", "system:authenticated"});
  EXPECT_FALSE(authorize_now(a));
}

// A server delegated to, scripted: what it is asked and what it answers.
struct ScriptedAuthorizer : DelegatedAuthorizer {
  DelegatedDecision answer;
  std::vector<RequestAttributes> asked;
  asio::awaitable<DelegatedDecision> authorize(const RequestAttributes& a) override {
    asked.push_back(a);
    co_return answer;
  }
};

struct ScriptedAuthenticator : DelegatedAuthenticator {
  DelegatedIdentity answer;
  std::vector<std::string> asked;
  asio::awaitable<DelegatedIdentity> authenticate(std::string token) override {
    asked.push_back(token);
    co_return answer;
  }
};

TEST_F(AccessTest, WhatRbacDoesNotAllowIsAskedOfTheDelegatedAuthorizer) {
  create("roles", kReader);
  create("rolebindings", kReaderBinding);
  use_rbac();
  auto remote = std::make_shared<ScriptedAuthorizer>();
  options_.delegated_authorization = remote;
  RequestAttributes a;
  a.user = user("bob");
  a.verb = "get";
  a.resource = "configmaps";
  a.namespace_ = "team";
  a.name = "settings";
  EXPECT_FALSE(authorize_now(a)) << "RBAC allows it";
  EXPECT_TRUE(remote->asked.empty()) << "so the other server is not asked";
  a.user = user("root", {"system:masters"});
  a.verb = "delete";
  EXPECT_FALSE(authorize_now(a));
  EXPECT_TRUE(remote->asked.empty()) << "nor for system:masters";

  a.user = user("bob");
  remote->answer = DelegatedDecision{.allowed = true};
  EXPECT_FALSE(authorize_now(a)) << "the other server allows what RBAC does not";
  ASSERT_EQ(remote->asked.size(), 1u);
  EXPECT_EQ(remote->asked[0].verb, "delete");

  remote->answer = DelegatedDecision{.denied = true, .reason = "not on Fridays"};
  auto denied = authorize_now(a);
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->code, Errc::forbidden);
  EXPECT_EQ(denied->message,
            "configmaps \"settings\" is forbidden: User \"bob\" cannot delete resource "
            "\"configmaps\" in API group \"\" in the namespace \"team\": not on Fridays");

  remote->answer = DelegatedDecision{.busy = true};
  auto busy = authorize_now(a);
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->code, Errc::too_many_requests);
  EXPECT_EQ(busy->retry_after_seconds, 1);

  remote->answer = DelegatedDecision{.error = "SubjectAccessReview: connection refused"};
  auto failed = authorize_now(a);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->code, Errc::internal) << "an authorizer's error is a 500, as in kube";
}

TEST_F(AccessTest, ImpersonationMayBeAllowedByTheDelegatedAuthorizer) {
  use_rbac();
  auto remote = std::make_shared<ScriptedAuthorizer>();
  remote->answer = DelegatedDecision{.allowed = true};
  options_.delegated_authorization = remote;
  auto bob = impersonate_now(user("alice"), Impersonation{.user = "bob", .groups = {"devs"}});
  ASSERT_TRUE(bob) << bob.error().message;
  ASSERT_EQ(remote->asked.size(), 2u);
  EXPECT_EQ(remote->asked[0].resource, "users");
  EXPECT_EQ(remote->asked[1].resource, "groups");
  EXPECT_EQ(remote->asked[1].name, "devs");
}

TEST_F(AccessTest, TokensNoLocalAuthenticatorKnowsAreAskedOfTheDelegatedAuthenticator) {
  auto remote = std::make_shared<ScriptedAuthenticator>();
  options_.delegated_authentication = remote;
  auto alice = authenticate_with({.authorization = "Bearer alice-token"});
  ASSERT_TRUE(alice);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_TRUE(remote->asked.empty()) << "the token file knows alice's token";

  remote->answer.authenticated = true;
  remote->answer.user = user("carol", {"ops", "system:authenticated"});
  auto carol = authenticate_with({.authorization = "Bearer carol-token"});
  ASSERT_TRUE(carol);
  EXPECT_EQ(carol->name, "carol");
  EXPECT_EQ(remote->asked, std::vector<std::string>{"carol-token"});

  remote->answer = DelegatedIdentity{};
  auto nobody = authenticate_with({.authorization = "Bearer made-up"});
  ASSERT_FALSE(nobody);
  EXPECT_EQ(nobody.error().code, Errc::unauthorized);

  remote->answer = DelegatedIdentity{.busy = true};
  auto busy = authenticate_with({.authorization = "Bearer made-up"});
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, Errc::too_many_requests);
  EXPECT_EQ(busy.error().retry_after_seconds, 1);

  // With only the delegated authenticator, a token is still a credential someone checks.
  options_.tokens = nullptr;
  remote->answer = DelegatedIdentity{};
  auto unchecked = authenticate_with({.authorization = "Bearer alice-token"});
  ASSERT_FALSE(unchecked);
  EXPECT_EQ(unchecked.error().code, Errc::unauthorized);
}

TEST_F(AccessTest, AccessReviewsAskTheDelegatedAuthorizerWhatRbacDoesNotAllow) {
  create("roles", kReader);
  create("rolebindings", kReaderBinding);
  use_rbac();
  auto remote = std::make_shared<ScriptedAuthorizer>();
  remote->answer = DelegatedDecision{.denied = true, .reason = "no deletes here"};
  options_.delegated_authorization = remote;
  auto ask = [&](const char* verb, const UserInfo* caller) {
    json::object review = self_subject_access_review(
        options_, user("bob"),
        json::parse(std::string(R"({"spec":{"resourceAttributes":{"namespace":"team","verb":")") +
                    verb + R"(","resource":"configmaps"}}})")
            .as_object());
    run<bool>([&]() -> asio::awaitable<bool> {
      UserInfo bob = user("bob");
      co_await complete_access_review(options_, caller != nullptr ? &bob : nullptr, review);
      co_return true;
    });
    return review.at("status").as_object();
  };
  UserInfo bob = user("bob");
  auto allowed = ask("get", &bob);
  EXPECT_TRUE(allowed.at("allowed").as_bool());
  EXPECT_TRUE(remote->asked.empty()) << "RBAC allowed it";
  auto denied = ask("delete", &bob);
  EXPECT_FALSE(denied.at("allowed").as_bool());
  EXPECT_TRUE(denied.at("denied").as_bool());
  EXPECT_EQ(denied.at("reason").as_string(), "no deletes here");
  ASSERT_EQ(remote->asked.size(), 1u);
  EXPECT_EQ(remote->asked[0].user.name, "bob");
  EXPECT_EQ(remote->asked[0].verb, "delete");
  json::object rules = self_subject_rules_review(
      options_, user("bob"), json::parse(R"({"spec":{"namespace":"team"}})").as_object());
  EXPECT_TRUE(rules.at("status").at("incomplete").as_bool())
      << "the delegated authorizer's rules are not listed";
  remote->answer = DelegatedDecision{.error = "SubjectAccessReview: connection refused"};
  auto failed = ask("delete", &bob);
  EXPECT_FALSE(failed.at("allowed").as_bool());
  EXPECT_EQ(failed.at("evaluationError").as_string(), "SubjectAccessReview: connection refused");
}

TEST_F(AccessTest, AuthorizeIsUnavailableUntilThePolicyIsLoaded) {
  // RBAC on, but its caches never list: no decision yet, and a client is told to retry.
  auto idle = std::make_shared<RbacPolicySource>(
      scheme_, std::make_shared<registry::CacherRegistry>(ioc_.get_executor(), storage_,
                                                          registry::CacherDefaults{}),
      storage_);
  options_.rbac = idle;
  RequestAttributes a;
  a.user = user("bob");
  a.verb = "get";
  a.resource = "pods";
  auto r = authorize_now(a);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, Errc::unavailable);
  EXPECT_EQ(r->retry_after_seconds, 1);
}

TEST_F(AccessTest, SelfSubjectAccessReviewAnswersFromThePolicy) {
  create("roles", kReader);
  create("rolebindings", kReaderBinding);
  use_rbac();
  auto ask = [&](const char* verb) {
    auto body = json::parse(std::string(R"({"spec":{"resourceAttributes":{"namespace":"team","verb":")") +
                            verb + R"(","resource":"configmaps"}}})")
                    .as_object();
    return self_subject_access_review(options_, user("bob"), std::move(body));
  };
  auto yes = ask("list");
  EXPECT_EQ(yes.at("kind").as_string(), "SelfSubjectAccessReview");
  EXPECT_EQ(yes.at("apiVersion").as_string(), "authorization.k8s.io/v1");
  EXPECT_TRUE(yes.at("status").at("allowed").as_bool());
  EXPECT_FALSE(ask("delete").at("status").at("allowed").as_bool());
}

TEST_F(AccessTest, SubjectAccessReviewNeedsAUserAndOneKindOfAttributes) {
  auto r = subject_access_review(options_, json::parse(R"({"spec":{}})").as_object(), "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid);
  ASSERT_EQ(r.error().causes.size(), 2u);
  EXPECT_EQ(r.error().causes[0].field, "spec.user");
  EXPECT_EQ(r.error().causes[1].field, "spec.resourceAttributes");
}

TEST_F(AccessTest, ALocalReviewMustStayInItsNamespace) {
  auto body = json::parse(
      R"({"spec":{"user":"bob","resourceAttributes":{"namespace":"other","verb":"get","resource":"pods"}}})");
  auto r = subject_access_review(options_, body.as_object(), "team");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::bad_request);
  EXPECT_EQ(r.error().message, "spec.resourceAttributes.namespace must match namespace: team");

  body.at("spec").at("resourceAttributes").as_object().erase("namespace");
  auto filled = subject_access_review(options_, body.as_object(), "team");
  ASSERT_TRUE(filled);
  EXPECT_EQ(filled->at("kind").as_string(), "LocalSubjectAccessReview");
  EXPECT_EQ(filled->at("spec").at("resourceAttributes").at("namespace").as_string(), "team");
  EXPECT_EQ(filled->at("metadata").at("namespace").as_string(), "team");
}

TEST_F(AccessTest, TokenReviewTellsWhoseATokenIs) {
  auto review = [&](const char* token) {
    return run<ApiResult<json::object>>([&]() -> asio::awaitable<ApiResult<json::object>> {
      auto body = json::parse(std::string(R"({"spec":{"token":")") + token + R"("}})").as_object();
      co_return co_await token_review(options_, std::move(body));
    });
  };
  auto alice = review("alice-token");
  ASSERT_TRUE(alice);
  EXPECT_TRUE(alice->at("status").at("authenticated").as_bool());
  EXPECT_EQ(alice->at("status").at("user").at("username").as_string(), "alice");
  auto nobody = review("nobody");
  ASSERT_TRUE(nobody);
  EXPECT_FALSE(nobody->at("status").at("authenticated").as_bool());
  EXPECT_EQ(nobody->at("status").at("error").as_string(), "[invalid bearer token]");
  auto empty = review("");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, Errc::bad_request);
}

}  // namespace
}  // namespace kwatch::auth
