#include "server/encryption_at_rest.hpp"

#include "kinds/scheme.hpp"

#include <set>

namespace kwatch::server {

boost::system::result<std::vector<storage::EncryptionScope>, std::string> encryption_scopes(
    const storage::EncryptionConfig& config, const kinds::Scheme& scheme,
    const std::string& storage_prefix) {
  std::vector<storage::EncryptionScope> scopes;
  std::set<std::string> covered;  // an earlier entry already decides keys under these
  const auto builtins = scheme.resources();
  for (const auto& rule : config.rules) {
    auto transformer = storage::ValueTransformer::make(rule.providers);
    if (!transformer) return transformer.error();
    auto add = [&](std::string prefix) {
      if (covered.insert(prefix).second) scopes.push_back({std::move(prefix), *transformer});
    };
    for (const auto& name : rule.resources) {
      if (name == "*.*") {
        add(storage_prefix + "/");
        continue;
      }
      const auto dot = name.find('.');
      const std::string resource = name.substr(0, dot);
      const std::string group = dot == std::string::npos ? "" : name.substr(dot + 1);
      bool builtin = false;
      for (const auto& info : builtins) {
        if (info->origin != kinds::KindOrigin::builtin || info->group != group) continue;
        if (resource != "*" && info->resource != resource) continue;
        add(info->key_prefix());
        builtin = true;
      }
      // Custom resources of the group, now or once their definition is created (the layout of
      // kinds/custom_resource_definition.cpp). The core group has none.
      if (!group.empty() && resource == "*") {
        add(storage_prefix + "/" + group + "/");
      } else if (!group.empty() && !builtin) {
        add(storage_prefix + "/" + group + "/" + resource + "/");
      } else if (group.empty() && resource != "*" && !builtin) {
        add(storage_prefix + "/" + resource + "/");  // not served: kube's layout anyway
      }
    }
  }
  return scopes;
}

}  // namespace kwatch::server
