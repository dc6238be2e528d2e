#include "delegation/token_review_authenticator.hpp"

#include "apimachinery/json_members.hpp"
#include "base/sha256.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstdio>

namespace kwatch::delegation {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

std::string sha256_hex(const std::string& text) {
  const base::Sha256 digest = base::sha256(text);
  std::string out;
  out.reserve(2 * sizeof digest);
  char hex[3];
  for (unsigned char c : digest) {
    std::snprintf(hex, sizeof hex, "%02x", c);
    out += hex;
  }
  return out;
}

}  // namespace

auth::DelegatedIdentity identity_from_token_review(const json::object& review,
                                                   const std::vector<std::string>& audiences) {
  auth::DelegatedIdentity out;
  const json::object* status = object_member(review, "status");
  if (status == nullptr) {
    out.error = "the TokenReview's answer has no status";
    return out;
  }
  const json::value* authenticated = status->if_contains("authenticated");
  out.authenticated = authenticated != nullptr && authenticated->is_bool() &&
                      authenticated->get_bool();
  if (!out.authenticated) return out;
  if (!audiences.empty()) {
    const std::vector<std::string> answered = apimachinery::strings_at(*status, "audiences");
    const bool shared = std::any_of(answered.begin(), answered.end(), [&](const std::string& a) {
      return std::find(audiences.begin(), audiences.end(), a) != audiences.end();
    });
    if (!shared) {
      out.authenticated = false;
      return out;
    }
  }
  const json::object* user = object_member(*status, "user");
  out.user.name = string_at(user, "username");
  if (out.user.name.empty()) {
    // A user without a name is no user: kube's webhook authenticator would pass it on, but
    // no authorizer can say anything about it.
    out.authenticated = false;
    out.error = "the TokenReview's answer names no user";
    return out;
  }
  out.user.uid = string_at(user, "uid");
  if (user != nullptr) out.user.groups = apimachinery::strings_at(*user, "groups");
  if (const json::object* extra = user ? object_member(*user, "extra") : nullptr) {
    for (const auto& [key, values] : *extra) {
      out.user.extra[std::string(key)] = apimachinery::strings_at(*extra, key);
    }
  }
  return out;
}

TokenReviewAuthenticator::TokenReviewAuthenticator(std::shared_ptr<client::HttpClient> client,
                                                   TokenReviewOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      cache_(options_.cache_entries),
      in_flight_(options_.max_in_flight) {}

asio::awaitable<auth::DelegatedIdentity> TokenReviewAuthenticator::authenticate(
    std::string token) {
  const std::string key = sha256_hex(token);
  if (auto known = cache_.get(key)) co_return std::move(*known);
  const std::shared_ptr<void> slot = in_flight_.try_take();
  if (!slot) co_return auth::DelegatedIdentity{.busy = true};
  json::object spec{{"token", token}};
  if (!options_.audiences.empty()) spec["audiences"] = apimachinery::string_array(options_.audiences);
  sent_.fetch_add(1);
  auto answer = co_await post_review(*client_, "authentication.k8s.io/v1", "TokenReview",
                                     "/apis/authentication.k8s.io/v1/tokenreviews",
                                     std::move(spec), options_.backoff);
  if (!answer) co_return auth::DelegatedIdentity{.error = std::move(answer.error())};
  auth::DelegatedIdentity identity = identity_from_token_review(*answer, options_.audiences);
  if (identity.error.empty()) {
    cache_.put(key, identity,
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.cache_ttl));
  }
  co_return identity;
}

}  // namespace kwatch::delegation
