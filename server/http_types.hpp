// The server's view of one HTTP exchange, independent of Beast so that routing and verbs can be
// unit-tested without sockets. Value types.
#pragma once

#include <map>
#include <string>

namespace kwatch::server {

struct ApiRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string content_type;
  std::string accept;
  std::string body;
  std::string user_agent;
};

struct ApiResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;  // extra headers, e.g. Retry-After
};

}  // namespace kwatch::server
