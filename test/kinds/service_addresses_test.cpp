#include "kinds/service_addresses.hpp"

#include "kinds/builtin_columns.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

#include <chrono>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;
using Lines = std::vector<std::string>;

json::object parse(std::string_view text) { return json::parse(text).as_object(); }

Lines causes_of(void (*validate)(const json::object&, const json::object*, Causes&),
                std::string_view now, std::string_view old = {}) {
  Causes causes;
  const json::object obj = parse(now);
  if (old.empty()) {
    validate(obj, nullptr, causes);
  } else {
    const json::object before = parse(old);
    validate(obj, &before, causes);
  }
  Lines out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

Lines cidr_causes(std::string_view now, std::string_view old = {}) {
  return causes_of(validate_service_cidr, now, old);
}

Lines ip_causes(std::string_view now, std::string_view old = {}) {
  return causes_of(validate_ip_address, now, old);
}

TEST(ServiceCIDR, CreateChecksTheRanges) {
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.96.0.0/12"]}})"), Lines{});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.96.0.0/12","2001:db8::/64"]}})"), Lines{});
  EXPECT_EQ(cidr_causes(R"({"spec":{}})"),
            Lines{"spec.cidrs: Required value: at least one CIDR required"});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.0.0.0/24","10.1.0.0/24","2001:db8::/64"]}})"),
            Lines{"spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{"
                  "\"10.0.0.0/24\", \"10.1.0.0/24\", \"2001:db8::/64\"}}: may only hold up to 2 "
                  "values"});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.0.0.0/24","10.1.0.0/24"]}})"),
            Lines{"spec.cidrs: Invalid value: []string{\"10.0.0.0/24\", \"10.1.0.0/24\"}: may "
                  "specify no more than one IP for each IP family, i.e 192.168.0.0/24 and "
                  "2001:db8::/64"});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.0.0.1/24"]}})"),
            Lines{"spec.cidrs[0]: Invalid value: \"10.0.0.1/24\": must not have bits set beyond "
                  "the prefix length"});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.0.0.0/24","bad"]}})"),
            Lines{"spec.cidrs[1]: Invalid value: \"bad\": must be a valid CIDR value, (e.g. "
                  "10.9.8.0/24 or 2001:db8::/64)"});
}

TEST(ServiceCIDR, UpdateKeepsTheRangesButMayAddAFamily) {
  const std::string_view v4 = R"({"spec":{"cidrs":["10.96.0.0/12"]}})";
  EXPECT_EQ(cidr_causes(v4, v4), Lines{});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.97.0.0/16"]}})", v4),
            Lines{"spec.cidrs[0]: Invalid value: \"10.97.0.0/16\": field is immutable"});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.96.0.0/12","2001:db8::/64"]}})", v4), Lines{});
  // The added one is checked; the first must stay.
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.96.0.0/12","10.1.0.0/16"]}})", v4),
            Lines{"spec.cidrs: Invalid value: []string{\"10.96.0.0/12\", \"10.1.0.0/16\"}: may "
                  "specify no more than one IP for each IP family, i.e 192.168.0.0/24 and "
                  "2001:db8::/64"});
  EXPECT_EQ(cidr_causes(R"({"spec":{"cidrs":["10.1.0.0/16","2001:db8::/64"]}})", v4),
            Lines{"spec.cidrs[0]: Invalid value: \"10.1.0.0/16\": field is immutable"});
  EXPECT_EQ(cidr_causes(v4, R"({"spec":{"cidrs":["10.96.0.0/12","2001:db8::/64"]}})"),
            Lines{"spec.cidrs: Invalid value: []string{\"10.96.0.0/12\"}: field is immutable"});
}

TEST(IPAddress, ParentRefIsRequiredAndChecked) {
  EXPECT_EQ(ip_causes(R"({"spec":{"parentRef":{"resource":"services","namespace":"default","name":"web"}}})"),
            Lines{});
  EXPECT_EQ(ip_causes(R"({"spec":{}})"), Lines{"spec.parentRef: Required value"});
  EXPECT_EQ(ip_causes(R"({"spec":{"parentRef":{"group":"Not_A_Group"}}})"),
            (Lines{"spec.parentRef.group: Invalid value: \"Not_A_Group\": a lowercase RFC 1123 "
                   "subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                   "must start and end with an alphanumeric character (e.g. 'example.com', regex "
                   "used for validation is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                   "spec.parentRef.resource: Required value", "spec.parentRef.name: Required value"}));
  EXPECT_EQ(ip_causes(R"({"spec":{"parentRef":{"resource":"services","name":"a/b","namespace":".."}}})"),
            (Lines{"spec.parentRef.name: Invalid value: \"a/b\": may not contain '/'",
                   "spec.parentRef.namespace: Invalid value: \"..\": may not be '..'"}));
}

TEST(IPAddress, ParentRefIsImmutable) {
  const std::string_view web =
      R"({"spec":{"parentRef":{"resource":"services","namespace":"default","name":"web"}}})";
  EXPECT_EQ(ip_causes(web, web), Lines{});
  EXPECT_EQ(ip_causes(R"({"spec":{"parentRef":{"resource":"services","namespace":"default","name":"db"}}})",
                      web),
            Lines{"spec.parentRef: Invalid value: networking.ParentReference{Group:\"\", "
                  "Resource:\"services\", Namespace:\"default\", Name:\"db\"}: field is immutable"});
}

TEST(ServiceAddressColumns, AsKubePrintsThem) {
  const auto now = std::chrono::system_clock::now();
  auto cells = [&](std::string_view kind, std::string_view text) {
    Lines out;
    const json::object obj = parse(text);
    for (const auto& c : builtin_columns("networking.k8s.io", kind)) {
      if (c.name == "Name" || c.name == "Age") {
        out.push_back(c.name);
        continue;
      }
      const json::value v = c.cell(obj, now);
      out.push_back(c.name + "=" + std::string(v.as_string()));
    }
    return out;
  };
  EXPECT_EQ(cells("ServiceCIDR", R"({"spec":{"cidrs":["10.96.0.0/12","2001:db8::/64"]}})"),
            (Lines{"Name", "CIDRs=10.96.0.0/12,2001:db8::/64", "Age"}));
  EXPECT_EQ(cells("IPAddress",
                  R"({"spec":{"parentRef":{"resource":"services","namespace":"default","name":"web"}}})"),
            (Lines{"Name", "ParentRef=services/default/web"}));
  EXPECT_EQ(cells("IPAddress",
                  R"({"spec":{"parentRef":{"group":"Example.COM","resource":"Gateways","name":"gw"}}})"),
            (Lines{"Name", "ParentRef=gateways.example.com/gw"}));
  EXPECT_EQ(cells("IPAddress", R"({"spec":{}})"), (Lines{"Name", "ParentRef=<none>"}));
}

}  // namespace
}  // namespace kwatch::kinds
