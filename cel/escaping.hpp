// Kubernetes' escaping of property names into CEL identifiers (k8s.io/apiserver/pkg/cel
// escaping): a CEL reserved word `w` is `__w__`; otherwise `__` becomes `__underscores__`, `.`
// `__dot__`, `-` `__dash__` and `/` `__slash__`. A name that is empty, starts with a digit or
// holds any other character outside [a-zA-Z0-9_] has no CEL name: a rule cannot select it (it
// can still be reached as a map key when the object is a map).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kwatch::cel {

std::optional<std::string> escape_property_name(std::string_view name);

}  // namespace kwatch::cel
