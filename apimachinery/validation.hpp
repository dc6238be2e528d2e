// Kubernetes name and label validation with the exact messages of
// k8s.io/apimachinery/pkg/util/validation (Kubernetes 1.30-1.34).
//
// Each function returns the list of problems (empty when valid); the caller joins them into a 422
// cause, e.g. `Invalid value: "Foo": a lowercase RFC 1123 subdomain must consist of ...`.
// Pure functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::apimachinery {

// RFC 1123 subdomain (max 253): metadata.name of most kinds, namespaces' prefix of label keys.
std::vector<std::string> dns1123_subdomain_errors(std::string_view value);
// RFC 1123 label (max 63): namespace names, service names.
std::vector<std::string> dns1123_label_errors(std::string_view value);
// RFC 1035 label (max 63): [a-z]([-a-z0-9]*[a-z0-9])?, CRD versions and names.
std::vector<std::string> dns1035_label_errors(std::string_view value);
// A name usable as one URL path segment (RBAC objects' names): not "." or "..", no '/' or '%'.
std::vector<std::string> path_segment_errors(std::string_view value);
// Qualified name `[prefix/]name` as used for label and annotation keys.
std::vector<std::string> qualified_name_errors(std::string_view value);
// Label value: empty, or up to 63 alphanumerics with '-', '_', '.' inside.
std::vector<std::string> label_value_errors(std::string_view value);

// Go's strings.TrimSpace for ASCII white space (rules, messages and expressions are checked so).
std::string_view trim_space(std::string_view s);
// Whether `s` holds a '\n' or '\r' (messages that must stay on one line).
bool has_line_break(std::string_view s);

// `s` quoted the way Go's %q does for the strings Kubernetes puts in messages.
std::string go_quote(std::string_view s);

// `<field>: Invalid value: "<value>": <detail>` as field.Invalid(...).Error() prints it.
std::string field_invalid_message(std::string_view field, std::string_view value,
                                  std::string_view detail);

}  // namespace kwatch::apimachinery
