#include "controllers/extension_authentication.hpp"

#include "kinds/scheme.hpp"
#include "registry/resource_store.hpp"

#include "apimachinery/json_members.hpp"

#include <boost/json/object.hpp>
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
  const std::string name = auth::kExtensionAuthenticationName;
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
      const ExtensionAuthentication theirs = auth::read_extension_authentication(data);
      merged["requestheader-client-ca-file"] =
          merge_ca_bundles(theirs.requestheader_ca_pem, values.requestheader_ca_pem);
      using List = std::vector<std::string> ExtensionAuthentication::*;
      const std::pair<const char*, List> lists[] = {
          {"requestheader-allowed-names", &ExtensionAuthentication::allowed_names},
          {"requestheader-username-headers", &ExtensionAuthentication::username_headers},
          {"requestheader-uid-headers", &ExtensionAuthentication::uid_headers},
          {"requestheader-group-headers", &ExtensionAuthentication::group_headers},
          {"requestheader-extra-headers-prefix", &ExtensionAuthentication::extra_headers_prefix}};
      for (const auto& [key, list] : lists) {
        merged[key] = auth::json_string_list(merge_lists(theirs.*list, values.*list));
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
