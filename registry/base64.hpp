// RFC 4648 base64 with padding: how JSON carries bytes (Secret data, protobuf bytes fields).
// Pure function; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kwatch::registry {

inline std::string base64_encode(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const std::uint32_t n = (static_cast<std::uint32_t>(static_cast<std::uint8_t>(in[i])) << 16) |
                            (static_cast<std::uint32_t>(static_cast<std::uint8_t>(in[i + 1])) << 8) |
                            static_cast<std::uint8_t>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(n >> s) & 63]);
  }
  if (i < in.size()) {
    std::uint32_t n = static_cast<std::uint32_t>(static_cast<std::uint8_t>(in[i])) << 16;
    if (i + 1 < in.size()) n |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(in[i + 1])) << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

}  // namespace kwatch::registry
