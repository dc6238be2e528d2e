// Errors of the API layer: a code plus the message and causes a Kubernetes Status carries.
//
// `ApiResult<T>` is returned by parsers and by the resource logic; the server turns an `ApiError`
// into a Status object (code -> HTTP status and reason). Value type; no shared state.
#pragma once

#include "base/errc.hpp"

#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace kwatch::apimachinery {

using base::Errc;

// One entry of `details.causes` of a 422 Invalid Status.
struct Cause {
  std::string type;     // e.g. "FieldValueInvalid", "FieldValueRequired"
  std::string message;  // e.g. "Invalid value: \"Foo\": a lowercase RFC 1123 subdomain ..."
  std::string field;    // e.g. "metadata.name"
};

struct ApiError {
  ApiError() = default;
  ApiError(Errc c, std::string m, std::vector<Cause> cs = {})
      : code(c), message(std::move(m)), causes(std::move(cs)) {}

  Errc code = Errc::internal;
  std::string message;
  std::vector<Cause> causes;
  // Status.details: the object's name, API group and kind (resource for most reasons).
  std::string name;
  std::string group;
  std::string kind;
  int retry_after_seconds = 0;
  // The Status reason when it is not the code's own (kube's mutating admission policies answer
  // 403 with reason Invalid); empty: the code's.
  std::string reason;
};

inline ApiError api_error(Errc code, std::string message) { return {code, std::move(message), {}}; }

// kube's NewInvalid: 422 `<Kind>.<group> "<name>" is invalid: <field>: <message>`, several
// causes comma-separated in brackets, with the causes and the details' name, group and kind.
inline ApiError invalid_error(std::string group, std::string kind, std::string name,
                              std::vector<Cause> causes) {
  std::string detail;
  for (const auto& c : causes) {
    if (!detail.empty()) detail += ", ";
    detail += c.field + ": " + c.message;
  }
  if (causes.size() > 1) detail = "[" + detail + "]";
  const std::string group_kind = group.empty() ? kind : kind + "." + group;
  ApiError e{Errc::invalid, group_kind + " \"" + name + "\" is invalid: " + detail, std::move(causes)};
  e.name = std::move(name);
  e.group = std::move(group);
  e.kind = std::move(kind);
  return e;
}

// Lets `ApiResult<T>::value()` throw; found by argument-dependent lookup.
inline void throw_exception_from_error(const ApiError& e, const boost::source_location&) {
  throw std::runtime_error(e.message);
}

template <class T>
using ApiResult = boost::system::result<T, ApiError>;

}  // namespace kwatch::apimachinery
