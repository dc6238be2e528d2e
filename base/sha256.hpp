// SHA-256 for request paths. OpenSSL 3's one-shot SHA256() looks the algorithm up in its
// provider store on every call (under the store's locks): several microseconds for a few bytes,
// shared between threads. This fetches it once and keeps a digest context per thread.
#pragma once

#include <array>
#include <string_view>

namespace kwatch::base {

using Sha256 = std::array<unsigned char, 32>;

Sha256 sha256(std::string_view data);

}  // namespace kwatch::base
