// The built-in kinds kwatch serves, each described once: resource names, scope, selectable
// fields, subresources, the schema and patch strategies from schema/schemas/builtin.json, and
// kube-apiserver's defaulting and extra validation as hooks.
// Called once at start-up; not thread-safe against concurrent use of the scheme it fills.
#pragma once

#include <string>

namespace kwatch::kinds {

class Scheme;

// Adds every built-in kind to `scheme`, keys under `storage_prefix`. Throws std::runtime_error
// if a kind's compiled-in schema does not compile (a defect of the build, not of input).
void add_builtin_kinds(Scheme& scheme, const std::string& storage_prefix);

}  // namespace kwatch::kinds
