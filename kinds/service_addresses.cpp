#include "kinds/service_addresses.hpp"

#include "kinds/field_errors.hpp"
#include "apimachinery/ip_address.hpp"
#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <string>

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::go_quote;
using namespace field_errors;

namespace {

// The spec's cidrs as strings (an element that is none reads as ""), and whether the list
// exists at all.
std::vector<std::string> cidrs_of(const json::object& obj) {
  const json::value* spec = obj.if_contains("spec");
  return string_items(spec != nullptr ? spec->if_object() : nullptr, "cidrs");
}

// 4 for IPv4, 6 for IPv6, 0 when it is no CIDR (kube's IPFamilyOfCIDRString).
int family_of(const std::string& cidr) {
  auto prefix = apimachinery::parse_cidr(cidr);
  if (!prefix) return 0;
  return prefix->address.v4 ? 4 : 6;
}

// kube's validateServiceCIDRSpec.
void check_cidrs(const std::vector<std::string>& cidrs, Causes& causes) {
  const std::string path = "spec.cidrs";
  if (cidrs.empty()) {
    required(causes, path, "at least one CIDR required");
    return;
  }
  if (cidrs.size() > 2) {
    invalid(causes, path, "networking.ServiceCIDRSpec{CIDRs:" + go_strings(cidrs) + "}",
            "may only hold up to 2 values");
    return;
  }
  for (std::size_t i = 0; i < cidrs.size(); ++i) {
    for (const auto& e : apimachinery::cidr_errors(cidrs[i])) {
      invalid(causes, index(path, i), go_quote(cidrs[i]), e);
    }
  }
  if (cidrs.size() == 2 && family_of(cidrs[0]) != 0 && family_of(cidrs[0]) == family_of(cidrs[1])) {
    invalid(causes, path, go_strings(cidrs),
            "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and "
            "2001:db8::/64");
  }
}

// Go's %#v of a *ParentReference ("null" when absent), as field.Invalid shows it.
std::string shown_parent_ref(const json::object* ref) {
  if (ref == nullptr) return "null";
  auto field = [&](std::string_view key) {
    const json::value* v = ref->if_contains(key);
    return go_quote(v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string());
  };
  return "networking.ParentReference{Group:" + field("group") + ", Resource:" + field("resource") +
         ", Namespace:" + field("namespace") + ", Name:" + field("name") + "}";
}

const json::object* parent_ref_of(const json::object& ip) {
  const json::value* spec = ip.if_contains("spec");
  const json::value* ref = spec != nullptr && spec->is_object()
                               ? spec->get_object().if_contains("parentRef")
                               : nullptr;
  return ref != nullptr ? ref->if_object() : nullptr;
}

}  // namespace

void validate_service_cidr(const json::object& cidr, const json::object* old, Causes& causes) {
  const std::vector<std::string> now = cidrs_of(cidr);
  if (old == nullptr) {
    check_cidrs(now, causes);
    return;
  }
  const std::vector<std::string> before = cidrs_of(*old);
  const std::string path = "spec.cidrs";
  if (before.size() == now.size()) {
    for (std::size_t i = 0; i < before.size(); ++i) {
      if (before[i] != now[i]) immutable(causes, index(path, i), go_quote(now[i]));
    }
  } else if (before.size() == 1 && now.size() == 2) {
    // A single-family range may gain the other family; the one it had stays.
    if (now[0] != before[0]) immutable(causes, index(path, 0), go_quote(now[0]));
    check_cidrs(now, causes);
  } else {
    immutable(causes, path, go_strings(now));
  }
}

void validate_ip_address(const json::object& ip, const json::object* old, Causes& causes) {
  const json::object* ref = parent_ref_of(ip);
  if (ref == nullptr) {
    required(causes, "spec.parentRef");
  } else {
    const std::string path = "spec.parentRef";
    auto text = [&](std::string_view key) {
      const json::value* v = ref->if_contains(key);
      return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
    };
    // The core group, which Services live in, is the empty one: a group is checked only when set.
    if (const std::string group = text("group"); !group.empty()) {
      for (const auto& e : apimachinery::dns1123_subdomain_errors(group)) {
        invalid(causes, path + ".group", go_quote(group), e);
      }
    }
    for (const char* key : {"resource", "name"}) {
      const std::string value = text(key);
      if (value.empty()) {
        required(causes, path + "." + key);
        continue;
      }
      for (const auto& e : apimachinery::path_segment_errors(value)) {
        invalid(causes, path + "." + key, go_quote(value), e);
      }
    }
    if (const std::string ns = text("namespace"); !ns.empty()) {
      for (const auto& e : apimachinery::path_segment_errors(ns)) {
        invalid(causes, path + ".namespace", go_quote(ns), e);
      }
    }
  }
  if (old != nullptr) {
    const json::object* before = parent_ref_of(*old);
    const bool same = (before == nullptr && ref == nullptr) ||
                      (before != nullptr && ref != nullptr &&
                       shown_parent_ref(before) == shown_parent_ref(ref));
    if (!same) immutable(causes, "spec.parentRef", shown_parent_ref(ref));
  }
}

}  // namespace kwatch::kinds
