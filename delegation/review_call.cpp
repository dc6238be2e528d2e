#include "delegation/review_call.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/serialize.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kwatch::delegation {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// kube's DefaultShouldRetry: the request never got an answer, or the answer was 429 or 5xx.
bool worth_retrying(const client::ApiError& e) {
  if (e.kind == client::ApiError::Kind::transport || e.kind == client::ApiError::Kind::timeout) {
    return true;
  }
  return e.kind == client::ApiError::Kind::status &&
         (e.http_status == 429 || e.http_status >= 500);
}

}  // namespace

asio::awaitable<boost::system::result<json::object, std::string>> post_review(
    client::HttpClient& client, std::string api_version, std::string kind, std::string path,
    json::object spec, RetryBackoff backoff) {
  const std::string body = json::serialize(
      json::object{{"apiVersion", api_version}, {"kind", kind}, {"spec", std::move(spec)}});
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto wait = std::chrono::duration<double, std::milli>(backoff.initial);
  std::string last;
  for (int attempt = 0; attempt < std::max(1, backoff.attempts); ++attempt) {
    if (attempt > 0) {
      timer.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(wait));
      co_await timer.async_wait(asio::use_awaitable);
      wait *= backoff.factor;
    }
    std::string method = "POST";
    std::string target = path;
    std::string payload = body;
    auto answer = co_await client.request(std::move(method), std::move(target), std::move(payload));
    if (!answer) {
      last = kind + ": " + answer.error().describe();
      if (worth_retrying(answer.error())) continue;
      co_return last;
    }
    auto parsed = apimachinery::parse_json(answer->body);
    if (!parsed || !parsed->is_object()) {
      co_return kind + ": the answer to " + path + " is not a JSON object";
    }
    co_return std::move(parsed->get_object());
  }
  co_return last;
}

}  // namespace kwatch::delegation
