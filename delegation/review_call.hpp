// One review asked of the server this one delegates to (a TokenReview, a SubjectAccessReview):
// the object posted, the answer's object read back, retried as kube's webhook clients retry
// (a connection that failed, a 429 or a 5xx: 500 ms, then 1.5 times longer each time, five
// attempts in all). Any other answer is final.
#pragma once

#include "client/http_client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <string>

namespace kwatch::delegation {

struct RetryBackoff {
  std::chrono::milliseconds initial{500};
  double factor = 1.5;
  int attempts = 5;
};

// The answer's object, or why there is none (in words for an error message).
boost::asio::awaitable<boost::system::result<boost::json::object, std::string>> post_review(
    client::HttpClient& client, std::string path, std::string body, RetryBackoff backoff);

}  // namespace kwatch::delegation
