#include "apimachinery/continue_token.hpp"

#include "base/ascii.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <array>
#include <cctype>
#include <cstdio>
#include <optional>
#include <vector>

namespace kwatch::apimachinery {

using base::iequals;
namespace {

constexpr std::string_view kVersion = "meta.k8s.io/v1";
constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

ApiError invalid(std::string detail) {
  return api_error(Errc::bad_request, "invalid continue token: " + std::move(detail));
}

ApiError generic_invalid(std::string_view cause) {
  return invalid("continue key is not valid: " + std::string(cause));
}

std::string base64url_raw(std::string_view in) {
  std::string out;
  out.reserve((in.size() * 4 + 2) / 3);
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    std::uint32_t n = (std::uint8_t(in[i]) << 16) | (std::uint8_t(in[i + 1]) << 8) |
                      std::uint8_t(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (std::size_t rest = in.size() - i; rest > 0) {
    std::uint32_t n = std::uint8_t(in[i]) << 16;
    if (rest == 2) n |= std::uint8_t(in[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    if (rest == 2) out += kAlphabet[(n >> 6) & 63];
  }
  return out;
}

// base64.RawURLEncoding.DecodeString; the error text is Go's CorruptInputError.
std::optional<std::string> base64url_raw_decode(std::string_view in, std::string& error) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  int in_quantum = 0;
  std::size_t quantum_start = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '\r' || c == '\n') continue;  // Go skips newlines
    auto pos = kAlphabet.find(c);
    if (pos == std::string_view::npos) {
      error = "illegal base64 data at input byte " + std::to_string(i);
      return std::nullopt;
    }
    if (in_quantum == 0) quantum_start = i;
    in_quantum = (in_quantum + 1) % 4;
    acc = (acc << 6) | static_cast<std::uint32_t>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (in_quantum == 1) {
    error = "illegal base64 data at input byte " + std::to_string(quantum_start);
    return std::nullopt;
  }
  return out;
}

// encoding/json's string encoding (HTML-safe, as json.Marshal does).
void append_go_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '<':
      case '>':
      case '&': {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u00%02x", c);
        out += buf;
        break;
      }
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u00%02x", c);
          out += buf;
        } else if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                   (static_cast<unsigned char>(s[i + 2]) == 0xa8 ||
                    static_cast<unsigned char>(s[i + 2]) == 0xa9)) {
          out += static_cast<unsigned char>(s[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029";
          i += 2;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// path.Clean for a rooted path.
std::string clean_rooted_path(std::string_view p) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < p.size()) {
    while (i < p.size() && p[i] == '/') ++i;
    std::size_t j = i;
    while (j < p.size() && p[j] != '/') ++j;
    auto seg = p.substr(i, j - i);
    if (seg.empty() || seg == ".") {
      // skip
    } else if (seg == "..") {
      if (!parts.empty()) parts.pop_back();
    } else {
      parts.push_back(seg);
    }
    i = j;
  }
  std::string out = "/";
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (k) out += '/';
    out += parts[k];
  }
  return out;
}

std::string_view go_json_kind(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::string: return "string";
    case boost::json::kind::bool_: return "bool";
    case boost::json::kind::array: return "array";
    case boost::json::kind::object: return "object";
    case boost::json::kind::null: return "null";
    default: return "number";
  }
}

}  // namespace

std::string encode_continue(std::int64_t rv, std::string_view start_key_relative) {
  std::string json = "{\"v\":\"meta.k8s.io/v1\",\"rv\":" + std::to_string(rv) + ",\"start\":";
  append_go_json_string(json, start_key_relative);
  json += '}';
  return base64url_raw(json);
}

ApiResult<ContinueToken> decode_continue(std::string_view token) {
  std::string b64_error;
  auto data = base64url_raw_decode(token, b64_error);
  if (!data) return generic_invalid(b64_error);

  boost::system::error_code ec;
  auto doc = boost::json::parse(*data, ec);
  if (ec) {
    // Go's texts differ per syntax error; the common one for truncated input is kept.
    return generic_invalid(data->empty() ? "unexpected end of JSON input"
                                         : "invalid JSON: " + ec.message());
  }
  if (!doc.is_object() && !doc.is_null()) {
    return generic_invalid("json: cannot unmarshal " + std::string(go_json_kind(doc)) +
                           " into Go value of type storage.continueToken");
  }
  std::string version;
  ContinueToken out;
  // encoding/json matches keys case-insensitively and ignores unknown ones; null leaves zero.
  static const boost::json::object kEmpty;
  for (const auto& member : doc.is_object() ? doc.get_object() : kEmpty) {
    // Named references rather than a structured binding: clang before 16 cannot capture
    // structured bindings in a lambda.
    const std::string_view key = member.key();
    const boost::json::value& value = member.value();
    auto field = [&](std::string_view type) {
      return generic_invalid("json: cannot unmarshal " + std::string(go_json_kind(value)) +
                             " into Go struct field continueToken." + std::string(key) +
                             " of type " + std::string(type));
    };
    if (value.is_null()) continue;
    if (iequals(key, "v")) {
      if (!value.is_string()) return field("string");
      version = value.get_string();
    } else if (iequals(key, "rv")) {
      if (value.is_int64()) {
        out.rv = value.get_int64();
      } else {
        return field("int64");
      }
    } else if (iequals(key, "start")) {
      if (!value.is_string()) return field("string");
      out.start_key_relative = value.get_string();
    }
  }
  if (version != kVersion) {
    return invalid("continue key is not valid: server does not recognize this encoded version " +
                   version);
  }
  if (out.rv == 0) {
    return invalid(
        "continue key is not valid: incorrect encoded start resourceVersion (version "
        "meta.k8s.io/v1)");
  }
  if (out.start_key_relative.empty()) {
    return invalid("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)");
  }
  // Defends against path traversal: the key must already be in clean form.
  std::string key = out.start_key_relative;
  if (key.front() != '/') key.insert(key.begin(), '/');
  auto cleaned = clean_rooted_path(key);
  if (cleaned != key) return generic_invalid(out.start_key_relative);
  out.start_key_relative = cleaned.substr(1);
  return out;
}

}  // namespace kwatch::apimachinery
