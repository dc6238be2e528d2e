// Fuzzes the IP and CIDR readers that ServiceCIDRs, IPAddress names and Services' cluster IPs
// go through (apimachinery/ip_address.hpp). Properties: no crash or sanitizer report; a value
// the strict rules accept is its own canonical text and parses back to the same address; a
// parsed prefix has no bits set past its length and contains its own address, and reads back
// from its text (but for an IPv4-mapped IPv6 prefix, which Go too prints with its IPv4 address
// and IPv6 length, "0.2.0.0/114", and which the strict rules refuse).
#include "apimachinery/ip_address.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch::apimachinery;
  const std::string_view text = kwatch::fuzz::as_view(data, size);
  if (auto ip = parse_ip(text)) {
    const std::string canonical = format_ip(*ip);
    auto again = parse_ip(canonical);
    if (!again) kwatch::fuzz::fail("a formatted address does not parse", canonical);
    if (ip_errors(text).empty() && canonical != text) {
      kwatch::fuzz::fail("a valid address is not its canonical text", canonical);
    }
  }
  if (auto prefix = parse_cidr(text)) {
    if (!prefix_contains(*prefix, prefix->address)) {
      kwatch::fuzz::fail("a prefix does not contain its own address", format_cidr(*prefix));
    }
    if (!prefix_covers(*prefix, *prefix)) kwatch::fuzz::fail("a prefix does not cover itself");
    const std::string canonical = format_cidr(*prefix);
    if (cidr_errors(text).empty() && canonical != text) {
      kwatch::fuzz::fail("a valid CIDR is not its canonical text", canonical);
    }
    auto again = parse_cidr(canonical);
    const auto shown = parse_ip(format_ip(prefix->address));
    const bool mapped = shown && shown->v4 != prefix->address.v4;
    if (!mapped && (!again || again->bits != prefix->bits || !(again->address == prefix->address))) {
      kwatch::fuzz::fail("a formatted CIDR does not parse back", canonical);
    }
  }
  return 0;
}
