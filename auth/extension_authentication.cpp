#include "auth/extension_authentication.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

namespace kwatch::auth {

namespace json = boost::json;

namespace {

std::vector<std::string> read_list(const json::object& data, const char* key) {
  std::vector<std::string> out;
  auto parsed = apimachinery::parse_json(apimachinery::string_at(&data, key));
  if (!parsed || !parsed->is_array()) return out;
  for (const auto& v : parsed->get_array()) {
    if (v.is_string()) out.emplace_back(v.get_string());
  }
  return out;
}

}  // namespace

ExtensionAuthentication read_extension_authentication(const json::object& data) {
  ExtensionAuthentication out;
  out.client_ca_pem = apimachinery::string_at(&data, "client-ca-file");
  out.requestheader_ca_pem = apimachinery::string_at(&data, "requestheader-client-ca-file");
  out.allowed_names = read_list(data, "requestheader-allowed-names");
  out.username_headers = read_list(data, "requestheader-username-headers");
  out.uid_headers = read_list(data, "requestheader-uid-headers");
  out.group_headers = read_list(data, "requestheader-group-headers");
  out.extra_headers_prefix = read_list(data, "requestheader-extra-headers-prefix");
  return out;
}

std::string json_string_list(const std::vector<std::string>& list) {
  json::array a;
  for (const auto& s : list) a.emplace_back(s);
  return json::serialize(a);
}

}  // namespace kwatch::auth
