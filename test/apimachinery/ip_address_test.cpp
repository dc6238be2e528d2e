#include "apimachinery/ip_address.hpp"

#include <gtest/gtest.h>

namespace kwatch::apimachinery {
namespace {

using Details = std::vector<std::string>;

TEST(IpErrors, KubesStrictRulesInOrder) {
  EXPECT_EQ(ip_errors("10.1.2.3"), Details{});
  EXPECT_EQ(ip_errors("2001:db8::1"), Details{});
  EXPECT_EQ(ip_errors("ten.0.0.1"),
            Details{"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"});
  EXPECT_EQ(ip_errors("10.0.0.256"),
            Details{"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"});
  EXPECT_EQ(ip_errors("10.0.0.1/24"),
            Details{"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"});
  // A zone is no address for kube's parser.
  EXPECT_EQ(ip_errors("fe80::1%eth0"),
            Details{"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"});
  // The lenient parse reads leading zeros as decimal; the strict rules refuse them.
  EXPECT_EQ(ip_errors("010.0.0.1"), Details{"must not have leading 0s"});
  EXPECT_EQ(ip_errors("::ffff:10.0.0.1"), Details{"must not be an IPv4-mapped IPv6 address"});
  EXPECT_EQ(ip_errors("2001:DB8::1"), Details{"must be in canonical form (\"2001:db8::1\")"});
  EXPECT_EQ(ip_errors("2001:db8:0:0:0:0:0:1"),
            Details{"must be in canonical form (\"2001:db8::1\")"});
}

TEST(CidrErrors, KubesStrictRulesInOrder) {
  EXPECT_EQ(cidr_errors("10.96.0.0/12"), Details{});
  EXPECT_EQ(cidr_errors("2001:db8::/64"), Details{});
  EXPECT_EQ(cidr_errors("10.96.0.0"),
            Details{"must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"});
  EXPECT_EQ(cidr_errors("10.96.0.0/33"),
            Details{"must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"});
  EXPECT_EQ(cidr_errors("10.96.0.0/"),
            Details{"must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"});
  EXPECT_EQ(cidr_errors("10.96.0.0/012"), Details{"must not have leading 0s in IP or prefix length"});
  EXPECT_EQ(cidr_errors("010.96.0.0/12"), Details{"must not have leading 0s in IP or prefix length"});
  EXPECT_EQ(cidr_errors("::ffff:10.0.0.0/120"), Details{"must not have an IPv4-mapped IPv6 address"});
  EXPECT_EQ(cidr_errors("10.96.0.1/12"), Details{"must not have bits set beyond the prefix length"});
  EXPECT_EQ(cidr_errors("2001:DB8::/64"), Details{"must be in canonical form (\"2001:db8::/64\")"});
}

TEST(IpPrefixes, ContainAndCover) {
  auto wide = *parse_cidr("10.0.0.0/16");
  auto narrow = *parse_cidr("10.0.5.0/24");
  auto other = *parse_cidr("10.1.0.0/24");
  EXPECT_TRUE(prefix_covers(wide, narrow));
  EXPECT_FALSE(prefix_covers(narrow, wide));
  EXPECT_FALSE(prefix_covers(wide, other));
  EXPECT_TRUE(prefix_contains(narrow, *parse_ip("10.0.5.255")));
  EXPECT_FALSE(prefix_contains(narrow, *parse_ip("10.0.6.0")));
  // Families never mix.
  EXPECT_FALSE(prefix_contains(*parse_cidr("::/0"), *parse_ip("10.0.0.1")));
  EXPECT_EQ(format_cidr(*parse_cidr("10.0.5.7/24")), "10.0.5.0/24");
  EXPECT_EQ(format_ip(*parse_ip("2001:0db8:0000::0001")), "2001:db8::1");
}

}  // namespace
}  // namespace kwatch::apimachinery
