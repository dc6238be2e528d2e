// RFC 4648 base64: with padding, how JSON carries bytes (Secret data, protobuf bytes fields);
// URL-safe without padding, how JSON Web Tokens carry their parts. Pure functions; safe from any
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kwatch::base {

inline std::string base64_encode(std::string_view in, bool url = false) {
  const char* kAlphabet = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                              : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
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
    if (i + 1 < in.size()) {
      out.push_back(kAlphabet[(n >> 6) & 63]);
    } else if (!url) {
      out.push_back('=');
    }
    if (!url) out.push_back('=');
  }
  return out;
}

// The bytes `in` encodes in either alphabet (only the URL one when `url_only`, as JWS segments
// are written), padded or not; nullopt for anything else (characters outside the alphabet, a
// length no encoding has, non-zero trailing bits).
inline std::optional<std::string> base64_decode(std::string_view in, bool url_only = false) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '-' || (c == '+' && !url_only)) v = 62;
    else if (c == '_' || (c == '/' && !url_only)) v = 63;
    else return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace kwatch::base
