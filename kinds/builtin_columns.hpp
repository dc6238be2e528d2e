// The table columns kubectl users know for each built-in kind (kubectl get pods: NAME, READY,
// STATUS, RESTARTS, AGE, ...), as part of the kinds' descriptions. Pure; safe from any thread.
#pragma once

#include "kinds/scheme.hpp"

#include <string_view>
#include <vector>

namespace kwatch::kinds {

// Every column of the table of `group`'s `kind`, NAME included; NAME and AGE for kinds without
// their own.
std::vector<PrinterColumn> builtin_columns(std::string_view group, std::string_view kind);

}  // namespace kwatch::kinds
