#include "controllers/extension_authentication.hpp"

#include "kinds/scheme.hpp"
#include "registry/resource_store.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kwatch::controllers {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
constexpr std::string_view kEnd = "-----END CERTIFICATE-----";

std::vector<std::string> pem_blocks(const std::string& bundle) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = bundle.find(kBegin, at)) != std::string::npos) {
    const auto end = bundle.find(kEnd, at);
    if (end == std::string::npos) break;
    out.push_back(bundle.substr(at, end + kEnd.size() - at) + "\n");
    at = end + kEnd.size();
  }
  return out;
}

std::vector<std::string> json_list(const std::string& text) {
  std::vector<std::string> out;
  auto parsed = apimachinery::parse_json(text);
  if (!parsed || !parsed->is_array()) return out;
  for (const auto& v : parsed->get_array()) {
    if (v.is_string()) out.emplace_back(v.get_string());
  }
  return out;
}

std::string json_text(const std::vector<std::string>& list) {
  json::array a;
  for (const auto& s : list) a.emplace_back(s);
  return json::serialize(a);
}

}  // namespace

std::string merge_ca_bundles(const std::string& theirs, const std::string& ours) {
  std::vector<std::string> blocks = pem_blocks(theirs);
  for (auto& b : pem_blocks(ours)) {
    if (std::find(blocks.begin(), blocks.end(), b) == blocks.end()) blocks.push_back(std::move(b));
  }
  std::string out;
  for (const auto& b : blocks) out += b;
  return out;
}

std::vector<std::string> merge_lists(const std::vector<std::string>& theirs,
                                     const std::vector<std::string>& ours) {
  std::vector<std::string> out = theirs;
  for (const auto& s : ours) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

asio::awaitable<void> publish_extension_authentication(
    std::shared_ptr<registry::ResourceStore> store, std::shared_ptr<const kinds::Scheme> scheme,
    ExtensionAuthentication values) {
  if (values.client_ca_pem.empty() && values.requestheader_ca_pem.empty()) co_return;
  auto info = scheme->find("", "v1", "configmaps");
  if (!info) co_return;
  std::string kube_system = "kube-system";
  auto ns = co_await store->ensure_namespace(kube_system);
  if (!ns) {
    spdlog::warn("cannot publish extension-apiserver-authentication: {}", ns.error().message);
    co_return;
  }
  const std::string name = "extension-apiserver-authentication";
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::string ns_name = kube_system, n = name, rv;
    auto current = co_await store->get(*info, std::move(ns_name), std::move(n), std::move(rv));
    json::object data;
    if (current) {
      if (const json::object* d = object_member(*current, "data")) data = *d;
    }
    json::object merged = data;
    if (!values.client_ca_pem.empty()) {
      merged["client-ca-file"] =
          merge_ca_bundles(string_at(&data, "client-ca-file"), values.client_ca_pem);
    }
    if (!values.requestheader_ca_pem.empty()) {
      merged["requestheader-client-ca-file"] = merge_ca_bundles(
          string_at(&data, "requestheader-client-ca-file"), values.requestheader_ca_pem);
      const std::pair<const char*, const std::vector<std::string>*> lists[] = {
          {"requestheader-allowed-names", &values.allowed_names},
          {"requestheader-username-headers", &values.username_headers},
          {"requestheader-uid-headers", &values.uid_headers},
          {"requestheader-group-headers", &values.group_headers},
          {"requestheader-extra-headers-prefix", &values.extra_headers_prefix}};
      for (const auto& [key, ours] : lists) {
        merged[key] = json_text(merge_lists(json_list(string_at(&data, key)), *ours));
      }
    }
    if (current && merged == data) co_return;  // as it should be
    registry::WriteQuery query;
    query.field_manager = "kube-apiserver";
    std::string write_ns = kube_system;
    apimachinery::ApiResult<json::object> r = json::object();
    if (current) {
      json::object updated = std::move(*current);
      updated["data"] = std::move(merged);
      r = co_await store->update(*info, std::move(write_ns), name, std::move(updated),
                                 std::move(query));
    } else {
      json::object created{{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata", json::object{{"name", name}, {"namespace", kube_system}}},
                           {"data", std::move(merged)}};
      r = co_await store->create(*info, std::move(write_ns), std::move(created), std::move(query));
    }
    if (r) co_return;
    if (r.error().code != base::Errc::conflict && r.error().code != base::Errc::already_exists) {
      spdlog::warn("cannot publish extension-apiserver-authentication: {}", r.error().message);
      co_return;
    }
  }
}

}  // namespace kwatch::controllers
