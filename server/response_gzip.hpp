// Response compression as kube-apiserver does it (APIResponseCompression, on by default): a
// response of 128 KiB or more to a client whose Accept-Encoding takes gzip is sent gzip'ed at
// level 1 (the fastest), with `Content-Encoding: gzip` and `Vary: Accept-Encoding`. Watches are
// never compressed (base/gzip.hpp compresses).
//
// Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kwatch::server {

inline constexpr std::size_t kGzipThreshold = 128 * 1024;

// Whether an Accept-Encoding header takes gzip (a "gzip" token whose q is not 0).
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace kwatch::server
