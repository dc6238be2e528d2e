// Static bearer tokens, kube-apiserver's --token-auth-file: a CSV file of
// `token,user,uid[,"group1,group2,..."]` lines (encoding/csv rules: quoted fields, leading spaces
// trimmed, at least three columns). A request bearing one of the tokens is that user, with the
// listed groups and `system:authenticated`.
//
// Immutable after load; `authenticate` is safe from any thread.
#pragma once

#include "auth/rbac_authorizer.hpp"

#include <boost/system/result.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kwatch::auth {

class TokenFile {
 public:
  // Parses the file's text; errors name the file (`path`) and the record, as kube's do. A token
  // listed twice keeps its first record (kube warns and does the same).
  static boost::system::result<std::shared_ptr<const TokenFile>, std::string> parse(
      std::string_view text, const std::string& path);
  static boost::system::result<std::shared_ptr<const TokenFile>, std::string> load(
      const std::string& path);

  // The user a bearer token stands for, or nullopt when the file does not list it.
  std::optional<auth::UserInfo> authenticate(std::string_view token) const;
  std::size_t size() const { return users_.size(); }

 private:
  std::map<std::string, auth::UserInfo, std::less<>> users_;
};

// The token of an `Authorization: Bearer <token>` header value; nullopt for other schemes or an
// empty token. The scheme is case-insensitive, as kube's.
std::optional<std::string_view> bearer_token(std::string_view authorization);

}  // namespace kwatch::auth
