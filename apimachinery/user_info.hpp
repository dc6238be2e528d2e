// Who a request acts as, once authenticated (and impersonated): kube's user.Info, as the
// authorizer, the admission stages, reviews and the audit log see it.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kwatch::apimachinery {

struct UserInfo {
  std::string name;
  std::string uid;
  std::vector<std::string> groups;
  // Extra attributes (Impersonate-Extra-<key>): RBAC does not read them; reviews and the audit
  // log show them.
  std::map<std::string, std::vector<std::string>> extra = {};

  bool operator==(const UserInfo&) const = default;
};

}  // namespace kwatch::apimachinery
