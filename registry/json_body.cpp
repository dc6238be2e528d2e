#include "registry/json_body.hpp"

#include "storage/stored_json.hpp"

namespace kwatch::registry {

ApiResult<boost::json::value> parse_json_body(std::string_view body) {
  if (body.empty()) return api_error(Errc::bad_request, "request body is empty");
  std::string problem;
  auto value = storage::parse_json(body, &problem);
  if (!value) {
    return api_error(Errc::bad_request, "couldn't get version/kind; json parse error: " + problem);
  }
  return std::move(*value);
}

}  // namespace kwatch::registry
