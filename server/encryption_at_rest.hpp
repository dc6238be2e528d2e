// Where --encryption-provider-config applies: the resources an EncryptionConfiguration names,
// turned into the storage key prefixes their objects live under, each with its providers, for
// `storage::EncryptingStorage`.
//
// Names follow kube: "secrets" (core), "deployments.apps", "widgets.example.com" (a custom
// resource, served now or later), "*.apps" (a group's resources), "*." (the core group's), "*.*"
// (everything under --etcd-prefix). Built-in resources keep kube's layout
// ("<prefix>/<resource>/"), custom resources theirs ("<prefix>/<group>/<resource>/"). The first
// entry naming a key's resource applies, as in kube.
//
// Pure function over the scheme as it is at start-up; safe from any thread.
#pragma once

#include "storage/encrypting_storage.hpp"
#include "storage/encryption_config.hpp"

#include <boost/system/result.hpp>

#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}  // namespace kwatch::kinds

namespace kwatch::server {

boost::system::result<std::vector<storage::EncryptionScope>, std::string> encryption_scopes(
    const storage::EncryptionConfig& config, const kinds::Scheme& scheme,
    const std::string& storage_prefix);

}  // namespace kwatch::server
