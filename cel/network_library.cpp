// Kubernetes' IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go): `ip()`,
// `isIP`, `ip.isCanonical`, `family`, the address class predicates, `cidr()`, `isCIDR`,
// `containsIP`, `containsCIDR`, `ip()` of a CIDR, `masked`, `prefixLength`, and `string()` of
// both. Addresses parse as Go's net/netip does (no leading zeros in IPv4 octets, one `::`, an
// embedded IPv4 tail) and kube refuses zones and IPv4-mapped IPv6 addresses.
#include <array>
#include <cstdio>
#include <optional>
#include <string>

#include "cel/libraries.hpp"

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;
using K = ValueKind;

struct Address {
  std::array<std::uint8_t, 16> bytes{};  // IPv4 in the first 4
  bool v4 = true;
  std::string zone;

  bool operator==(const Address& o) const {
    return v4 == o.v4 && bytes == o.bytes && zone == o.zone;
  }
  int bits() const { return v4 ? 32 : 128; }
  bool is_4in6() const {
    if (v4) return false;
    for (int i = 0; i < 10; ++i) {
      if (bytes[i] != 0) return false;
    }
    return bytes[10] == 0xff && bytes[11] == 0xff;
  }
};

std::optional<Address> parse_ipv4(std::string_view s, std::string& error) {
  Address a;
  int part = 0, digits = 0, value = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '.') {
      if (digits == 0) {
        error = "IPv4 field must have at least one digit";
        return std::nullopt;
      }
      if (part == 4) {
        error = "IPv4 address too long";
        return std::nullopt;
      }
      a.bytes[part++] = static_cast<std::uint8_t>(value);
      digits = value = 0;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') {
      error = "unexpected character";
      return std::nullopt;
    }
    if (digits == 1 && value == 0) {
      error = "IPv4 field has octet with leading zero";
      return std::nullopt;
    }
    value = value * 10 + (s[i] - '0');
    ++digits;
    if (value > 255) {
      error = "IPv4 field has value >255";
      return std::nullopt;
    }
  }
  if (part != 4) {
    error = part > 4 ? "IPv4 address too long" : "IPv4 address too short";
    return std::nullopt;
  }
  return a;
}

std::optional<Address> parse_ipv6(std::string_view s, std::string& error) {
  Address a;
  a.v4 = false;
  if (auto pct = s.find('%'); pct != std::string_view::npos) {
    a.zone = std::string(s.substr(pct + 1));
    s = s.substr(0, pct);
    if (a.zone.empty()) {
      error = "zone must be a non-empty string";
      return std::nullopt;
    }
  }
  int ellipsis = -1;
  int i = 0;  // bytes written
  std::size_t p = 0;
  if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
    ellipsis = 0;
    p = 2;
    if (p == s.size()) return a;
  }
  while (i < 16) {
    // A hex group, or an IPv4 tail.
    std::size_t q = p;
    unsigned value = 0;
    int digits = 0;
    while (q < s.size()) {
      const char c = s[q];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                 : -1;
      if (d < 0) break;
      value = value * 16 + static_cast<unsigned>(d);
      ++digits;
      ++q;
      if (digits > 4) {
        error = "each colon-separated field must have at most 4 hex digits";
        return std::nullopt;
      }
    }
    if (digits == 0) {
      error = "each colon-separated field must have at least one digit";
      return std::nullopt;
    }
    if (q < s.size() && s[q] == '.') {
      if (ellipsis < 0 && i != 12) {
        error = "embedded IPv4 address must replace the final 2 fields of the address";
        return std::nullopt;
      }
      if (i + 4 > 16) {
        error = "too many hex fields to fit an embedded IPv4 at the end of the address";
        return std::nullopt;
      }
      std::string sub;
      auto v4 = parse_ipv4(s.substr(p), sub);
      if (!v4) {
        error = sub;
        return std::nullopt;
      }
      for (int k = 0; k < 4; ++k) a.bytes[i + k] = v4->bytes[k];
      i += 4;
      p = s.size();
      break;
    }
    a.bytes[i] = static_cast<std::uint8_t>(value >> 8);
    a.bytes[i + 1] = static_cast<std::uint8_t>(value);
    i += 2;
    p = q;
    if (p == s.size()) break;
    if (s[p] != ':') {
      error = "unexpected character, want colon";
      return std::nullopt;
    }
    ++p;
    if (p < s.size() && s[p] == ':') {
      if (ellipsis >= 0) {
        error = "multiple :: in address";
        return std::nullopt;
      }
      ellipsis = i;
      ++p;
      if (p == s.size()) break;
    } else if (p == s.size()) {
      error = "colon must be followed by more characters";
      return std::nullopt;
    }
  }
  if (p != s.size()) {
    error = "trailing garbage after address";
    return std::nullopt;
  }
  if (i < 16) {
    if (ellipsis < 0) {
      error = "address string too short";
      return std::nullopt;
    }
    const int n = 16 - i;
    for (int j = i - 1; j >= ellipsis; --j) a.bytes[j + n] = a.bytes[j];
    for (int j = ellipsis + n - 1; j >= ellipsis; --j) a.bytes[j] = 0;
  } else if (ellipsis >= 0) {
    error = "the :: must expand to at least one field of zeros";
    return std::nullopt;
  }
  return a;
}

// netip.ParseAddr, with kube's refusals.
std::optional<Address> parse_address(std::string_view raw, std::string& error) {
  std::string detail;
  std::optional<Address> a;
  if (raw.empty()) {
    detail = "missing IPv6 address";
  } else if (raw.find(':') != std::string_view::npos) {
    a = parse_ipv6(raw, detail);
  } else {
    a = parse_ipv4(raw, detail);
  }
  const std::string quoted = "\"" + std::string(raw) + "\"";
  if (!a) {
    error = "IP Address " + quoted + " parse error during conversion from string: ParseAddr(" +
            quoted + "): " + detail;
    return std::nullopt;
  }
  if (!a->zone.empty()) {
    error = "IP address " + quoted + " with zone value is not allowed";
    return std::nullopt;
  }
  if (a->is_4in6()) {
    error = "IPv4-mapped IPv6 address " + quoted + " is not allowed";
    return std::nullopt;
  }
  return a;
}

std::string address_string(const Address& a) {
  char buf[64];
  if (a.v4) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]);
    return buf;
  }
  // RFC 5952: the longest run (two groups or more) of zero groups becomes `::`.
  int best = -1, best_len = 0;
  for (int g = 0; g < 8;) {
    if (a.bytes[2 * g] == 0 && a.bytes[2 * g + 1] == 0) {
      int e = g;
      while (e < 8 && a.bytes[2 * e] == 0 && a.bytes[2 * e + 1] == 0) ++e;
      if (e - g > best_len && e - g >= 2) {
        best = g;
        best_len = e - g;
      }
      g = e;
    } else {
      ++g;
    }
  }
  std::string out;
  for (int g = 0; g < 8; ++g) {
    if (g == best) {
      out += "::";
      g += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(buf, sizeof buf, "%x", (a.bytes[2 * g] << 8) | a.bytes[2 * g + 1]);
    out += buf;
  }
  return out;
}

class IpValue final : public OpaqueValue {
 public:
  explicit IpValue(Address a) : address(a) {}
  std::string_view type_name() const override { return "net.IP"; }
  bool equals(const OpaqueValue& o) const override {
    return address == static_cast<const IpValue&>(o).address;
  }
  std::string literal() const override { return "ip(\"" + address_string(address) + "\")"; }
  Address address;
};

struct Prefix {
  Address address;
  int bits = 0;
  bool operator==(const Prefix& o) const { return address == o.address && bits == o.bits; }
  Prefix masked() const {
    Prefix m = *this;
    for (int i = 0; i < 16; ++i) {
      const int keep = std::max(0, std::min(8, bits - 8 * i));
      m.address.bytes[i] &= static_cast<std::uint8_t>(keep == 0 ? 0 : 0xFF << (8 - keep));
    }
    return m;
  }
  bool contains(const Address& a) const {
    if (a.v4 != address.v4 || !a.zone.empty()) return false;
    Prefix other{a, bits};
    return other.masked().address.bytes == masked().address.bytes;
  }
};

class CidrValue final : public OpaqueValue {
 public:
  explicit CidrValue(Prefix p) : prefix(p) {}
  std::string_view type_name() const override { return "net.CIDR"; }
  bool equals(const OpaqueValue& o) const override {
    return prefix == static_cast<const CidrValue&>(o).prefix;
  }
  std::string literal() const override { return "cidr(\"" + text() + "\")"; }
  std::string text() const { return address_string(prefix.address) + "/" + std::to_string(prefix.bits); }
  Prefix prefix;
};

// netip.ParsePrefix, with kube's refusal of IPv4-mapped addresses.
std::optional<Prefix> parse_prefix(std::string_view raw, std::string& error) {
  const std::string quoted = "\"" + std::string(raw) + "\"";
  const auto fail = [&](const std::string& why) {
    error = "network address parse error during conversion from string: netip.ParsePrefix(" +
            quoted + "): " + why;
    return std::nullopt;
  };
  const auto slash = raw.rfind('/');
  if (slash == std::string_view::npos) return fail("no '/'");
  const std::string_view addr_text = raw.substr(0, slash), bits_text = raw.substr(slash + 1);
  if (addr_text.find('%') != std::string_view::npos) return fail("IPv6 zones cannot be present in a prefix");
  std::string detail;
  std::optional<Address> a =
      addr_text.find(':') != std::string_view::npos ? parse_ipv6(addr_text, detail)
                                                    : parse_ipv4(addr_text, detail);
  if (!a) return fail("ParseAddr(\"" + std::string(addr_text) + "\"): " + detail);
  if (bits_text.empty() || bits_text.size() > 3 || (bits_text.size() > 1 && bits_text[0] == '0')) {
    return fail("bad bits after slash: \"" + std::string(bits_text) + "\"");
  }
  int bits = 0;
  for (char c : bits_text) {
    if (c < '0' || c > '9') return fail("bad bits after slash: \"" + std::string(bits_text) + "\"");
    bits = bits * 10 + (c - '0');
  }
  if (bits > a->bits()) return fail("prefix length out of range");
  if (a->is_4in6()) {
    error = "network address parse error during conversion from string: IPv4-mapped IPv6 "
            "address " + quoted + " is not allowed";
    return std::nullopt;
  }
  return Prefix{*a, bits};
}

const Address& ip_of(const Value& v) { return v.opaque_as<IpValue>()->address; }
const Prefix& prefix_of(const Value& v) { return v.opaque_as<CidrValue>()->prefix; }

Value make_ip(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  auto addr = parse_address(a[0].as_text(), error);
  if (!addr) return Value::error(error);
  return Value::opaque(std::make_shared<const IpValue>(*addr));
}

Value is_ip(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  return Value::boolean(parse_address(a[0].as_text(), error).has_value());
}

Value is_canonical(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 2));
  std::string error;
  auto addr = parse_address(a[0].as_text(), error);
  if (!addr) return Value::error(error);
  return Value::boolean(address_string(*addr) == a[0].as_text());
}

bool is_ip_value(const Value& v) { return v.opaque_as<IpValue>() != nullptr; }
bool is_cidr_value(const Value& v) { return v.opaque_as<CidrValue>() != nullptr; }

// Overloads on net.IP receivers check the payload type themselves (the registry matches kinds).
template <class F>
Value on_ip(Args a, std::string_view name, F f) {
  if (!is_ip_value(a[0])) return no_such_overload(name, a);
  return f(ip_of(a[0]));
}

Value family(Args a, EvalBudget&) {
  return on_ip(a, "family", [](const Address& ip) { return Value::int64(ip.v4 ? 4 : 6); });
}
Value is_unspecified(Args a, EvalBudget&) {
  return on_ip(a, "isUnspecified", [](const Address& ip) {
    for (int i = 0; i < (ip.v4 ? 4 : 16); ++i) {
      if (ip.bytes[i] != 0) return Value::boolean(false);
    }
    return Value::boolean(true);
  });
}
bool loopback(const Address& ip) {
  if (ip.v4) return ip.bytes[0] == 127;
  for (int i = 0; i < 15; ++i) {
    if (ip.bytes[i] != 0) return false;
  }
  return ip.bytes[15] == 1;
}
Value is_loopback(Args a, EvalBudget&) {
  return on_ip(a, "isLoopback", [](const Address& ip) { return Value::boolean(loopback(ip)); });
}
Value is_link_local_multicast(Args a, EvalBudget&) {
  return on_ip(a, "isLinkLocalMulticast", [](const Address& ip) {
    if (ip.v4) return Value::boolean(ip.bytes[0] == 224 && ip.bytes[1] == 0 && ip.bytes[2] == 0);
    return Value::boolean(ip.bytes[0] == 0xff && (ip.bytes[1] & 0x0f) == 0x02);
  });
}
bool link_local_unicast(const Address& ip) {
  if (ip.v4) return ip.bytes[0] == 169 && ip.bytes[1] == 254;
  return ip.bytes[0] == 0xfe && (ip.bytes[1] & 0xc0) == 0x80;
}
Value is_link_local_unicast(Args a, EvalBudget&) {
  return on_ip(a, "isLinkLocalUnicast",
               [](const Address& ip) { return Value::boolean(link_local_unicast(ip)); });
}
Value is_global_unicast(Args a, EvalBudget&) {
  return on_ip(a, "isGlobalUnicast", [](const Address& ip) {
    bool unspecified = true;
    for (int i = 0; i < (ip.v4 ? 4 : 16); ++i) unspecified = unspecified && ip.bytes[i] == 0;
    if (unspecified || loopback(ip) || link_local_unicast(ip)) return Value::boolean(false);
    if (ip.v4) {
      const bool broadcast = ip.bytes[0] == 255 && ip.bytes[1] == 255 && ip.bytes[2] == 255 &&
                             ip.bytes[3] == 255;
      const bool multicast = (ip.bytes[0] & 0xf0) == 0xe0;
      return Value::boolean(!broadcast && !multicast);
    }
    return Value::boolean(ip.bytes[0] != 0xff);
  });
}

Value to_string(Args a, EvalBudget&) {
  if (is_ip_value(a[0])) return Value::string(address_string(ip_of(a[0])));
  if (is_cidr_value(a[0])) return Value::string(a[0].opaque_as<CidrValue>()->text());
  return no_such_overload("string", a);
}

Value make_cidr(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  auto p = parse_prefix(a[0].as_text(), error);
  if (!p) return Value::error(error);
  return Value::opaque(std::make_shared<const CidrValue>(*p));
}

Value is_cidr(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  return Value::boolean(parse_prefix(a[0].as_text(), error).has_value());
}

Value contains_ip(Args a, EvalBudget& budget) {
  if (!is_cidr_value(a[0])) return no_such_overload("containsIP", a);
  Value ip = a[1];
  if (ip.is(K::string)) {
    const Value arg[] = {a[1]};
    ip = make_ip(arg, budget);
    if (ip.is_error()) return ip;
  }
  if (!is_ip_value(ip)) return no_such_overload("containsIP", a);
  return Value::boolean(prefix_of(a[0]).contains(ip_of(ip)));
}

Value contains_cidr(Args a, EvalBudget& budget) {
  if (!is_cidr_value(a[0])) return no_such_overload("containsCIDR", a);
  Value other = a[1];
  if (other.is(K::string)) {
    const Value arg[] = {a[1]};
    other = make_cidr(arg, budget);
    if (other.is_error()) return other;
  }
  if (!is_cidr_value(other)) return no_such_overload("containsCIDR", a);
  const Prefix& outer = prefix_of(a[0]);
  const Prefix& inner = prefix_of(other);
  if (outer.address.v4 != inner.address.v4) return Value::boolean(false);
  const Prefix inner_at_outer_bits{inner.address, outer.bits};
  return Value::boolean(outer.masked() == inner_at_outer_bits.masked() && outer.bits <= inner.bits);
}

Value cidr_ip(Args a, EvalBudget&) {
  if (!is_cidr_value(a[0])) return no_such_overload("ip", a);
  return Value::opaque(std::make_shared<const IpValue>(prefix_of(a[0]).address));
}
Value cidr_masked(Args a, EvalBudget&) {
  if (!is_cidr_value(a[0])) return no_such_overload("masked", a);
  return Value::opaque(std::make_shared<const CidrValue>(prefix_of(a[0]).masked()));
}
Value prefix_length(Args a, EvalBudget&) {
  if (!is_cidr_value(a[0])) return no_such_overload("prefixLength", a);
  return Value::int64(prefix_of(a[0]).bits);
}

}  // namespace

void add_network_library(FunctionRegistry& r) {
  r.add("ip", "string_to_ip", false, "string -> net.IP", make_ip);
  r.add("isIP", "is_ip", false, "string -> bool", is_ip);
  r.add("ip.isCanonical", "ip_is_canonical", false, "string -> bool", is_canonical);
  r.add("family", "ip_family", true, "net.IP -> int", family);
  r.add("isUnspecified", "ip_is_unspecified", true, "net.IP -> bool", is_unspecified);
  r.add("isLoopback", "ip_is_loopback", true, "net.IP -> bool", is_loopback);
  r.add("isLinkLocalMulticast", "ip_is_link_local_multicast", true, "net.IP -> bool", is_link_local_multicast);
  r.add("isLinkLocalUnicast", "ip_is_link_local_unicast", true, "net.IP -> bool", is_link_local_unicast);
  r.add("isGlobalUnicast", "ip_is_global_unicast", true, "net.IP -> bool", is_global_unicast);
  r.add("string", "ip_to_string", false, "net.IP -> string", to_string);
  r.add("string", "cidr_to_string", false, "net.CIDR -> string", to_string);
  r.add("cidr", "string_to_cidr", false, "string -> net.CIDR", make_cidr);
  r.add("isCIDR", "is_cidr", false, "string -> bool", is_cidr);
  r.add("containsIP", "cidr_contains_ip_string", true, "net.CIDR, string -> bool", contains_ip);
  r.add("containsIP", "cidr_contains_ip_ip", true, "net.CIDR, net.IP -> bool", contains_ip);
  r.add("containsCIDR", "cidr_contains_cidr_string", true, "net.CIDR, string -> bool", contains_cidr);
  r.add("containsCIDR", "cidr_contains_cidr", true, "net.CIDR, net.CIDR -> bool", contains_cidr);
  r.add("ip", "cidr_ip", true, "net.CIDR -> net.IP", cidr_ip);
  r.add("masked", "cidr_masked", true, "net.CIDR -> net.CIDR", cidr_masked);
  r.add("prefixLength", "cidr_prefix_length", true, "net.CIDR -> int", prefix_length);
}

}  // namespace kwatch::cel
