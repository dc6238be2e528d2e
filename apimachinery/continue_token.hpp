// The list `continue` token, encoded exactly as kube-apiserver does
// (k8s.io/apiserver/pkg/storage/continue.go): unpadded base64url of the JSON
// `{"v":"meta.k8s.io/v1","rv":<list RV>,"start":"<next key relative to the resource prefix>"}`.
//
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace kwatch::apimachinery {

struct ContinueToken {
  // Revision the first page was read at; negative (-1) asks for the latest revision (the token
  // handed out with a 410 for an expired continuation).
  std::int64_t rv = 0;
  // Key to resume from (inclusive), relative to the resource prefix, e.g. "default/pod-b\0";
  // already checked against path traversal. The storage key is `<prefix> + start_key_relative`.
  std::string start_key_relative;
};

std::string encode_continue(std::int64_t rv, std::string_view start_key_relative);

// Errors are Errc::bad_request with the kube-apiserver message, e.g.
// "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion
// (version meta.k8s.io/v1)".
ApiResult<ContinueToken> decode_continue(std::string_view token);

}  // namespace kwatch::apimachinery
