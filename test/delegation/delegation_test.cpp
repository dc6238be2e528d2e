// Delegated authentication and authorization against a scripted server on loopback: what a
// TokenReview and a SubjectAccessReview carry, how their answers are read, what is remembered
// and for how long, the retries, the bound on token reviews in flight, and the lookup of the
// published extension-apiserver-authentication.
#include "delegation/access_review_authorizer.hpp"
#include "delegation/authentication_lookup.hpp"
#include "delegation/token_review_authenticator.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::delegation {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::ip::tcp;

struct Answer {
  unsigned status = 200;
  std::string body;
  std::chrono::milliseconds delay{0};  // before answering
};

// The server delegated to: each request recorded, each answered by `answer`.
class ScriptedServer {
 public:
  explicit ScriptedServer(asio::io_context& ioc)
      : acceptor_(ioc, {asio::ip::make_address("127.0.0.1"), 0}) {
    asio::co_spawn(ioc, accept(), asio::detached);
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void stop() { acceptor_.close(); }

  std::function<Answer(const http::request<http::string_body>&)> answer;
  std::vector<std::pair<std::string, json::object>> requests;  // target, body

 private:
  asio::awaitable<void> accept() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)), asio::detached);
    }
  }
  asio::awaitable<void> serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      auto [ec, n] = co_await http::async_read(socket, buffer, req,
                                               asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      json::object body;
      if (!req.body().empty()) body = json::parse(req.body()).as_object();
      requests.emplace_back(std::string(req.target()), std::move(body));
      Answer a = answer(req);
      if (a.delay.count() > 0) {
        asio::steady_timer t(socket.get_executor(), a.delay);
        co_await t.async_wait(asio::use_awaitable);
      }
      http::response<http::string_body> res{static_cast<http::status>(a.status), 11};
      res.set(http::field::content_type, "application/json");
      res.body() = std::move(a.body);
      res.prepare_payload();
      auto [wec, w] = co_await http::async_write(socket, res, asio::as_tuple(asio::use_awaitable));
      if (wec) co_return;
    }
  }
  tcp::acceptor acceptor_;
};

std::string status_body(unsigned code, const char* reason) {
  return json::serialize(json::object{{"kind", "Status"}, {"apiVersion", "v1"},
                                      {"status", "Failure"}, {"reason", reason},
                                      {"message", "scripted"}, {"code", code}});
}

class DelegationTest : public ::testing::Test {
 protected:
  std::shared_ptr<client::HttpClient> client() {
    client::ClientConfig config;
    config.server = "http://127.0.0.1:" + std::to_string(server_.port());
    config.token = "delegator-token";
    client::HttpClient::Options options;
    options.request_timeout = std::chrono::milliseconds(2000);
    auto made = client::HttpClient::create(ioc_.get_executor(), std::move(config), options);
    EXPECT_TRUE(made) << made.error();
    return made ? *made : nullptr;
  }

  template <class T>
  T run(std::function<asio::awaitable<T>()> f) {
    std::optional<T> out;
    asio::co_spawn(ioc_, [&]() -> asio::awaitable<void> { out = co_await f(); }, asio::detached);
    ioc_.restart();
    while (!out && ioc_.run_one() > 0) {
    }
    return std::move(*out);
  }

  static RetryBackoff quick() { return RetryBackoff{std::chrono::milliseconds(10), 1.5, 3}; }

  asio::io_context ioc_;
  ScriptedServer server_{ioc_};
};

std::string review_answer(json::object status) {
  return json::serialize(json::object{{"apiVersion", "authentication.k8s.io/v1"},
                                      {"kind", "TokenReview"},
                                      {"status", std::move(status)}});
}

TEST_F(DelegationTest, ATokenIsJudgedByATokenReviewAndItsAnswerRemembered) {
  server_.answer = [](const auto& req) {
    const auto token = json::parse(req.body()).at("spec").at("token").as_string();
    if (token == "alice-token") {
      return Answer{201, review_answer(json::object{
                             {"authenticated", true},
                             {"audiences", json::array{"api"}},
                             {"user", json::object{{"username", "alice"},
                                                   {"uid", "7"},
                                                   {"groups", json::array{"devs"}},
                                                   {"extra", json::object{{"scopes", json::array{
                                                                               "a", "b"}}}}}}})};
    }
    return Answer{201, review_answer(json::object{{"authenticated", false},
                                                  {"error", "invalid bearer token"}})};
  };
  TokenReviewOptions options;
  options.audiences = {"api"};
  options.backoff = quick();
  TokenReviewAuthenticator authn(client(), options);
  auto alice = run<auth::DelegatedIdentity>([&] { return authn.authenticate("alice-token"); });
  ASSERT_TRUE(alice.authenticated) << alice.error;
  EXPECT_EQ(alice.user.name, "alice");
  EXPECT_EQ(alice.user.uid, "7");
  EXPECT_EQ(alice.user.groups, std::vector<std::string>{"devs"});
  EXPECT_EQ(alice.user.extra["scopes"], (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(server_.requests.size(), 1u);
  EXPECT_EQ(server_.requests[0].first, "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_EQ(json::serialize(server_.requests[0].second),
            R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",)"
            R"("spec":{"token":"alice-token","audiences":["api"]}})");

  // Remembered, the good answer and the bad one alike.
  run<auth::DelegatedIdentity>([&] { return authn.authenticate("alice-token"); });
  auto nobody = run<auth::DelegatedIdentity>([&] { return authn.authenticate("made-up"); });
  EXPECT_FALSE(nobody.authenticated);
  EXPECT_TRUE(nobody.error.empty());
  run<auth::DelegatedIdentity>([&] { return authn.authenticate("made-up"); });
  EXPECT_EQ(authn.reviews_sent(), 2u);
}

TEST_F(DelegationTest, AnAnswerForOtherAudiencesDoesNotAuthenticate) {
  const json::object user{{"username", "alice"}};
  auto answer = [&](json::array audiences) {
    return json::parse(review_answer(json::object{{"authenticated", true},
                                                  {"user", user},
                                                  {"audiences", std::move(audiences)}}))
        .as_object();
  };
  const std::vector<std::string> asked{"api", "other"};
  EXPECT_TRUE(identity_from_token_review(answer({"other"}), asked).authenticated);
  EXPECT_FALSE(identity_from_token_review(answer({"elsewhere"}), asked).authenticated);
  EXPECT_FALSE(identity_from_token_review(answer({}), asked).authenticated);
  EXPECT_TRUE(identity_from_token_review(answer({}), {}).authenticated)
      << "no audiences asked for: none to check";
}

TEST_F(DelegationTest, WithoutACacheEveryTokenIsAskedAbout) {
  server_.answer = [](const auto&) {
    return Answer{201, review_answer(json::object{{"authenticated", false}})};
  };
  TokenReviewOptions options;
  options.cache_ttl = std::chrono::milliseconds(0);
  TokenReviewAuthenticator authn(client(), options);
  run<auth::DelegatedIdentity>([&] { return authn.authenticate("t"); });
  run<auth::DelegatedIdentity>([&] { return authn.authenticate("t"); });
  EXPECT_EQ(authn.reviews_sent(), 2u);
}

TEST_F(DelegationTest, AnAuthenticatedAnswerWithoutAUserIsNoUser) {
  server_.answer = [](const auto&) {
    return Answer{201, review_answer(json::object{{"authenticated", true},
                                                  {"user", json::object{}}})};
  };
  TokenReviewAuthenticator authn(client(), TokenReviewOptions{});
  auto r = run<auth::DelegatedIdentity>([&] { return authn.authenticate("t"); });
  EXPECT_FALSE(r.authenticated);
  EXPECT_FALSE(r.error.empty());
}

TEST_F(DelegationTest, FailedReviewsAreRetriedThenReportedAndNotRemembered) {
  int calls = 0;
  server_.answer = [&](const auto&) {
    ++calls;
    if (calls == 1) return Answer{503, status_body(503, "ServiceUnavailable")};
    if (calls == 2) return Answer{429, status_body(429, "TooManyRequests")};
    return Answer{201, review_answer(json::object{{"authenticated", true},
                                                  {"user", json::object{{"username", "u"}}}})};
  };
  TokenReviewOptions options;
  options.backoff = quick();
  TokenReviewAuthenticator authn(client(), options);
  auto r = run<auth::DelegatedIdentity>([&] { return authn.authenticate("t"); });
  EXPECT_TRUE(r.authenticated) << "the third attempt succeeds";
  EXPECT_EQ(calls, 3);

  // Every attempt fails: an error, asked again next time.
  server_.answer = [&](const auto&) { return Answer{500, status_body(500, "InternalError")}; };
  calls = 0;
  auto failed = run<auth::DelegatedIdentity>([&] { return authn.authenticate("other"); });
  EXPECT_FALSE(failed.authenticated);
  EXPECT_NE(failed.error.find("TokenReview"), std::string::npos) << failed.error;
  EXPECT_EQ(server_.requests.size(), 3u + 3u);
  run<auth::DelegatedIdentity>([&] { return authn.authenticate("other"); });
  EXPECT_EQ(server_.requests.size(), 3u + 6u);

  // A refusal (403: this server may not create TokenReviews) is final: not retried.
  server_.answer = [&](const auto&) { return Answer{403, status_body(403, "Forbidden")}; };
  run<auth::DelegatedIdentity>([&] { return authn.authenticate("third"); });
  EXPECT_EQ(server_.requests.size(), 3u + 6u + 1u);
}

TEST_F(DelegationTest, TokenReviewsInFlightAreBounded) {
  server_.answer = [](const auto&) {
    return Answer{201, review_answer(json::object{{"authenticated", false}}),
                  std::chrono::milliseconds(300)};
  };
  TokenReviewOptions options;
  options.max_in_flight = 2;
  auto authn = std::make_shared<TokenReviewAuthenticator>(client(), options);
  std::vector<auth::DelegatedIdentity> results;
  for (int i = 0; i < 5; ++i) {
    asio::co_spawn(
        ioc_,
        [&, i]() -> asio::awaitable<void> {
          results.push_back(co_await authn->authenticate("token-" + std::to_string(i)));
        },
        asio::detached);
  }
  ioc_.restart();
  while (results.size() < 5 && ioc_.run_one() > 0) {
  }
  int busy = 0;
  for (const auto& r : results) busy += r.busy ? 1 : 0;
  EXPECT_EQ(busy, 3);
  EXPECT_EQ(authn->reviews_sent(), 2u);
  // Once they are done, slots are free again.
  auto later = run<auth::DelegatedIdentity>([&] { return authn->authenticate("token-9"); });
  EXPECT_FALSE(later.busy);
}

std::string access_answer(json::object status) {
  return json::serialize(json::object{{"apiVersion", "authorization.k8s.io/v1"},
                                      {"kind", "SubjectAccessReview"},
                                      {"status", std::move(status)}});
}

auth::RequestAttributes alice_lists_widgets() {
  auth::RequestAttributes a;
  a.user = auth::UserInfo{"alice", "7", {"devs", "system:authenticated"}, {{"scopes", {"x"}}}};
  a.verb = "list";
  a.api_group = "ext.example.com";
  a.api_version = "v1";
  a.resource = "widgets";
  a.namespace_ = "default";
  return a;
}

TEST_F(DelegationTest, ARequestIsDescribedInASubjectAccessReview) {
  EXPECT_EQ(json::serialize(access_review_spec(alice_lists_widgets())),
            R"({"resourceAttributes":{"namespace":"default","verb":"list",)"
            R"("group":"ext.example.com","version":"v1","resource":"widgets"},)"
            R"("user":"alice","groups":["devs","system:authenticated"],)"
            R"("extra":{"scopes":["x"]},"uid":"7"})");
  auth::RequestAttributes path;
  path.user = auth::UserInfo{"bob", "", {}};
  path.resource_request = false;
  path.verb = "get";
  path.path = "/metrics";
  EXPECT_EQ(json::serialize(access_review_spec(path)),
            R"({"nonResourceAttributes":{"path":"/metrics","verb":"get"},"user":"bob"})");
}

TEST_F(DelegationTest, DecisionsAreReadAsKubesWebhookAuthorizerReadsThem) {
  auto d = decision_from_access_review(json::parse(access_answer(json::object{
      {"allowed", false}, {"denied", true}, {"reason", "no"}})).as_object());
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.denied);
  EXPECT_EQ(d.reason, "no");
  auto both = decision_from_access_review(
      json::parse(access_answer(json::object{{"allowed", true}, {"denied", true}})).as_object());
  EXPECT_FALSE(both.allowed);
  EXPECT_EQ(both.error, "webhook subject access review returned both allow and deny response");
  auto none = decision_from_access_review(json::object{{"kind", "SubjectAccessReview"}});
  EXPECT_FALSE(none.allowed);
  EXPECT_FALSE(none.error.empty());
}

TEST_F(DelegationTest, DecisionsAreRememberedForTheirTtl) {
  bool allow = true;
  server_.answer = [&](const auto&) {
    return Answer{201, access_answer(json::object{{"allowed", allow}, {"reason", "scripted"}})};
  };
  AccessReviewOptions options;
  options.allowed_ttl = std::chrono::hours(1);
  options.denied_ttl = std::chrono::milliseconds(0);  // denials not remembered
  options.backoff = quick();
  AccessReviewAuthorizer authz(client(), options);
  auto a = alice_lists_widgets();
  auto first = run<auth::DelegatedDecision>([&] { return authz.authorize(a); });
  EXPECT_TRUE(first.allowed);
  ASSERT_EQ(server_.requests.size(), 1u);
  EXPECT_EQ(server_.requests[0].first, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
  EXPECT_EQ(json::serialize(server_.requests[0].second.at("spec")),
            json::serialize(access_review_spec(a)));
  allow = false;
  EXPECT_TRUE(run<auth::DelegatedDecision>([&] { return authz.authorize(a); }).allowed)
      << "remembered";
  a.verb = "watch";  // another question
  auto denied = run<auth::DelegatedDecision>([&] { return authz.authorize(a); });
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.reason, "scripted");
  run<auth::DelegatedDecision>([&] { return authz.authorize(a); });
  EXPECT_EQ(authz.reviews_sent(), 3u);
}

TEST_F(DelegationTest, AccessReviewsInFlightAreBounded) {
  server_.answer = [](const auto&) {
    return Answer{201, access_answer(json::object{{"allowed", true}}),
                  std::chrono::milliseconds(300)};
  };
  AccessReviewOptions options;
  options.max_in_flight = 2;
  auto authz = std::make_shared<AccessReviewAuthorizer>(client(), options);
  std::vector<auth::RequestAttributes> asked(5, alice_lists_widgets());
  for (std::size_t i = 0; i < asked.size(); ++i) asked[i].name = "w" + std::to_string(i);
  std::vector<auth::DelegatedDecision> results;
  for (const auto& a : asked) {
    asio::co_spawn(
        ioc_,
        [&]() -> asio::awaitable<void> { results.push_back(co_await authz->authorize(a)); },
        asio::detached);
  }
  ioc_.restart();
  while (results.size() < asked.size() && ioc_.run_one() > 0) {
  }
  int busy = 0;
  for (const auto& r : results) busy += r.busy ? 1 : 0;
  EXPECT_EQ(busy, 3);
  EXPECT_EQ(authz->reviews_sent(), 2u);
}

TEST_F(DelegationTest, AReviewThatCannotBeMadeIsAnError) {
  server_.answer = [](const auto&) { return Answer{200, "not json"}; };
  AccessReviewOptions options;
  options.backoff = quick();
  AccessReviewAuthorizer authz(client(), options);
  const auth::RequestAttributes a = alice_lists_widgets();  // outlives the coroutine
  auto d = run<auth::DelegatedDecision>([&] { return authz.authorize(a); });
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.error.find("SubjectAccessReview"), std::string::npos) << d.error;
}

TEST_F(DelegationTest, ThePublishedTrustIsReadFromKubeSystem) {
  server_.answer = [](const auto& req) {
    if (req.target() !=
        "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication") {
      return Answer{404, status_body(404, "NotFound")};
    }
    return Answer{200, json::serialize(json::object{
                           {"kind", "ConfigMap"},
                           {"data", json::object{
                                        {"client-ca-file", "CLIENT"},
                                        {"requestheader-client-ca-file", "PROXY"},
                                        {"requestheader-allowed-names", R"(["front-proxy-client"])"},
                                        {"requestheader-username-headers", R"(["X-Remote-User"])"},
                                        {"requestheader-group-headers", "not a list"}}}})};
  };
  auto c = client();
  using Looked = boost::system::result<auth::ExtensionAuthentication, std::string>;
  auto r = run<Looked>([&] { return look_up_extension_authentication(*c); });
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->client_ca_pem, "CLIENT");
  EXPECT_EQ(r->requestheader_ca_pem, "PROXY");
  EXPECT_EQ(r->allowed_names, std::vector<std::string>{"front-proxy-client"});
  EXPECT_EQ(r->username_headers, std::vector<std::string>{"X-Remote-User"});
  EXPECT_TRUE(r->group_headers.empty());

  server_.answer = [](const auto&) { return Answer{404, status_body(404, "NotFound")}; };
  auto none = run<Looked>([&] { return look_up_extension_authentication(*c); });
  ASSERT_TRUE(none) << "no ConfigMap: nothing published";
  EXPECT_TRUE(none->requestheader_ca_pem.empty());

  server_.answer = [](const auto&) { return Answer{403, status_body(403, "Forbidden")}; };
  auto refused = run<Looked>([&] { return look_up_extension_authentication(*c); });
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("--role=extension-apiserver-authentication-reader"),
            std::string::npos)
      << refused.error();
}

}  // namespace
}  // namespace kwatch::delegation
