// One review asked of the server this one delegates to (a TokenReview, a SubjectAccessReview):
// the object posted, the answer's object read back, retried as kube's webhook clients retry
// (a connection that failed, a 429 or a 5xx: 500 ms, then 1.5 times longer each time, five
// attempts in all). Any other answer is final.
#pragma once

#include "client/http_client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/system/result.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace kwatch::delegation {

struct RetryBackoff {
  std::chrono::milliseconds initial{500};
  double factor = 1.5;
  int attempts = 5;
};

// At most `max` reviews waiting at once: try_take() counts one in and returns the slot that
// counts it out when released, or null at the bound (the caller refuses without asking).
// Outlives its slots. Thread-safe.
class InFlightLimit {
 public:
  explicit InFlightLimit(std::size_t max) : max_(max) {}
  std::shared_ptr<void> try_take() {
    if (count_.fetch_add(1) >= max_) {
      count_.fetch_sub(1);
      return nullptr;
    }
    return std::shared_ptr<void>(this, [](InFlightLimit* self) { self->count_.fetch_sub(1); });
  }

 private:
  const std::size_t max_;
  std::atomic<std::size_t> count_{0};
};

// `spec` posted as a review of `kind` (`api_version`) to `path`: the answer's object, or why
// there is none, in words for an error message that start with the kind ("TokenReview: ...").
boost::asio::awaitable<boost::system::result<boost::json::object, std::string>> post_review(
    client::HttpClient& client, std::string api_version, std::string kind, std::string path,
    boost::json::object spec, RetryBackoff backoff);

}  // namespace kwatch::delegation
