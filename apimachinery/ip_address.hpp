// IP addresses and CIDR prefixes as kube's validation reads them
// (k8s.io/apimachinery/pkg/util/validation/ip.go): a lenient parse first (IPv4 octets may carry
// leading zeros, read as decimal), then the strict rules of the fields added since 1.33 (no
// leading zeros, no IPv4-mapped IPv6 address, no bits past a prefix's length, the canonical
// text: dotted IPv4, RFC 5952 IPv6, a prefix's address masked).
//
// Pure functions; safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::apimachinery {

struct IpAddress {
  std::array<std::uint8_t, 16> bytes{};  // an IPv4 address in the first four
  bool v4 = false;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct IpPrefix {
  IpAddress address;  // masked to `bits`
  int bits = 0;
};

// The lenient parse (kube's ParseIPSloppy): nullopt when `text` is no address at all. An
// IPv4-mapped IPv6 address stays IPv6 (`v4` false).
std::optional<IpAddress> parse_ip(std::string_view text);
// The canonical text: dotted decimal, or RFC 5952 for IPv6.
std::string format_ip(const IpAddress& ip);
// The lenient parse of `<ip>/<bits>` (kube's ParseCIDRSloppy), the address masked.
std::optional<IpPrefix> parse_cidr(std::string_view text);
std::string format_cidr(const IpPrefix& prefix);
bool prefix_contains(const IpPrefix& prefix, const IpAddress& ip);
// Whether `inner` lies wholly inside `outer` (same family, no shorter, its address inside).
bool prefix_covers(const IpPrefix& outer, const IpPrefix& inner);

// kube's IsValidIP and IsValidCIDR: the details of a field.Invalid each (empty: valid).
std::vector<std::string> ip_errors(std::string_view value);
std::vector<std::string> cidr_errors(std::string_view value);

}  // namespace kwatch::apimachinery
