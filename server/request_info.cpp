#include "server/request_info.hpp"

namespace kwatch::server {

std::optional<RequestInfo> parse_request_info(const std::vector<std::string>& seg) {
  if (seg.empty() || (seg[0] != "api" && seg[0] != "apis")) return std::nullopt;
  const bool core = seg[0] == "api";
  const std::size_t gv_len = core ? 2 : 3;
  if (seg.size() <= gv_len) return std::nullopt;
  RequestInfo info;
  info.group = core ? "" : seg[1];
  info.version = core ? seg[1] : seg[2];
  std::vector<std::string> rest(seg.begin() + static_cast<long>(gv_len), seg.end());
  if (!rest.empty() && rest[0] == "watch") {
    info.watch_prefix = true;
    rest.erase(rest.begin());
  }
  const bool namespace_sub =
      rest.size() == 3 && rest[0] == "namespaces" && (rest[2] == "status" || rest[2] == "finalize");
  if (rest.size() >= 3 && rest[0] == "namespaces" && !namespace_sub) {
    info.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.empty() || rest.size() > 3) return std::nullopt;
  info.resource = rest[0];
  if (rest.size() >= 2) info.name = rest[1];
  if (rest.size() == 3) info.subresource = rest[2];
  return info;
}

}  // namespace kwatch::server
