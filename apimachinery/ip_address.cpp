#include "apimachinery/ip_address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace kwatch::apimachinery {

namespace {

// Dotted IPv4 with any number of digits per octet (leading zeros read as decimal), as kube's
// ParseIPSloppy does; `leading_zeros` tells whether any octet had one.
std::optional<IpAddress> parse_ipv4(std::string_view text, bool* leading_zeros) {
  IpAddress ip;
  ip.v4 = true;
  std::size_t pos = 0;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) {
      if (pos >= text.size() || text[pos] != '.') return std::nullopt;
      ++pos;
    }
    const std::size_t start = pos;
    unsigned value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      value = value * 10 + static_cast<unsigned>(text[pos] - '0');
      if (value > 0xff) return std::nullopt;
      ++pos;
    }
    if (pos == start) return std::nullopt;
    if (pos - start > 1 && text[start] == '0' && leading_zeros != nullptr) *leading_zeros = true;
    ip.bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value);
  }
  if (pos != text.size()) return std::nullopt;
  return ip;
}

std::optional<IpAddress> parse_ip_reporting(std::string_view text, bool* leading_zeros) {
  if (text.find(':') == std::string_view::npos) return parse_ipv4(text, leading_zeros);
  // IPv6 (a zone, "%eth0", is no address here, as in Go's net.ParseIP).
  const std::string copy(text);
  IpAddress ip;
  if (inet_pton(AF_INET6, copy.c_str(), ip.bytes.data()) != 1) return std::nullopt;
  return ip;
}

bool is_v4_mapped(const IpAddress& ip) {
  return !ip.v4 && std::all_of(ip.bytes.begin(), ip.bytes.begin() + 10,
                               [](std::uint8_t b) { return b == 0; }) &&
         ip.bytes[10] == 0xff && ip.bytes[11] == 0xff;
}

int family_bits(const IpAddress& ip) { return ip.v4 ? 32 : 128; }

IpAddress masked(IpAddress ip, int bits) {
  const int total = family_bits(ip) / 8;
  for (int i = 0; i < total; ++i) {
    const int keep = std::clamp(bits - i * 8, 0, 8);
    const auto mask = static_cast<std::uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
    ip.bytes[static_cast<std::size_t>(i)] &= mask;
  }
  return ip;
}

struct CidrParse {
  IpPrefix prefix;
  IpAddress unmasked;
  bool leading_zeros = false;
};

std::optional<CidrParse> parse_cidr_reporting(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  CidrParse out;
  auto ip = parse_ip_reporting(text.substr(0, slash), &out.leading_zeros);
  if (!ip) return std::nullopt;
  const std::string_view digits = text.substr(slash + 1);
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int bits = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (bits < 0 || bits > family_bits(*ip)) return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') out.leading_zeros = true;
  out.unmasked = *ip;
  out.prefix = {masked(*ip, bits), bits};
  return out;
}

}  // namespace

std::optional<IpAddress> parse_ip(std::string_view text) { return parse_ip_reporting(text, nullptr); }

std::string format_ip(const IpAddress& ip) {
  char buf[INET6_ADDRSTRLEN];
  if (ip.v4) {
    inet_ntop(AF_INET, ip.bytes.data(), buf, sizeof buf);
    return buf;
  }
  if (is_v4_mapped(ip)) {
    // Go prints an IPv4-mapped address as its IPv4 address.
    inet_ntop(AF_INET, ip.bytes.data() + 12, buf, sizeof buf);
    return buf;
  }
  inet_ntop(AF_INET6, ip.bytes.data(), buf, sizeof buf);
  return buf;
}

std::optional<IpPrefix> parse_cidr(std::string_view text) {
  auto parsed = parse_cidr_reporting(text);
  if (!parsed) return std::nullopt;
  return parsed->prefix;
}

std::string format_cidr(const IpPrefix& prefix) {
  return format_ip(prefix.address) + "/" + std::to_string(prefix.bits);
}

bool prefix_contains(const IpPrefix& prefix, const IpAddress& ip) {
  return prefix.address.v4 == ip.v4 && masked(ip, prefix.bits) == prefix.address;
}

bool prefix_covers(const IpPrefix& outer, const IpPrefix& inner) {
  return outer.bits <= inner.bits && prefix_contains(outer, inner.address);
}

std::vector<std::string> ip_errors(std::string_view value) {
  bool leading_zeros = false;
  auto ip = parse_ip_reporting(value, &leading_zeros);
  if (!ip) return {"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"};
  std::vector<std::string> out;
  if (leading_zeros) out.push_back("must not have leading 0s");
  if (is_v4_mapped(*ip)) out.push_back("must not be an IPv4-mapped IPv6 address");
  if (!out.empty()) return out;
  if (const std::string canonical = format_ip(*ip); canonical != value) {
    out.push_back("must be in canonical form (\"" + canonical + "\")");
  }
  return out;
}

std::vector<std::string> cidr_errors(std::string_view value) {
  auto parsed = parse_cidr_reporting(value);
  if (!parsed) return {"must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"};
  if (parsed->leading_zeros) return {"must not have leading 0s in IP or prefix length"};
  if (is_v4_mapped(parsed->unmasked)) return {"must not have an IPv4-mapped IPv6 address"};
  if (!(parsed->unmasked == parsed->prefix.address)) {
    return {"must not have bits set beyond the prefix length"};
  }
  if (const std::string canonical = format_cidr(parsed->prefix); canonical != value) {
    return {"must be in canonical form (\"" + canonical + "\")"};
  }
  return {};
}

}  // namespace kwatch::apimachinery
