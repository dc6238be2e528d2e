// Routes one API request to discovery, health, metrics or a resource verb, and renders the result
// (JSON, a Table for kubectl, or a Status on error). Knows nothing of sockets: the HTTP session
// hands it an `ApiRequest` and writes back the `ApiResponse`.
//
// Thread-safety: shared by every connection; `handle` may run concurrently on any thread.
#pragma once

#include "server/http_types.hpp"
#include "server/metrics.hpp"

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <memory>
#include <string>

namespace kwatch::registry {
class ResourceStore;
class Scheme;
}  // namespace kwatch::registry

namespace kwatch::server {

struct Url;

class ApiHandler {
 public:
  ApiHandler(std::shared_ptr<registry::Scheme> scheme,
             std::shared_ptr<registry::ResourceStore> store, std::shared_ptr<Metrics> metrics,
             std::string server_address);

  boost::asio::awaitable<ApiResponse> handle(ApiRequest request);

  // Readiness as /readyz reports it; flipped by the server once start-up work is done.
  void set_ready(bool ready) { ready_ = ready; }

 private:
  struct Route;
  boost::asio::awaitable<ApiResponse> handle_resource(const ApiRequest& request, const Url& url,
                                                      Route& route);

  std::shared_ptr<registry::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<Metrics> metrics_;
  std::string server_address_;
  std::atomic<bool> ready_{false};
};

}  // namespace kwatch::server
