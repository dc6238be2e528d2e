// The table columns kubectl users know for each built-in kind (kubectl get pods: NAME, READY,
// STATUS, RESTARTS, AGE, ...), as part of the kinds' descriptions. Pure; safe from any thread.
#pragma once

#include "kinds/scheme.hpp"

#include <boost/json/fwd.hpp>

#include <functional>
#include <string_view>
#include <vector>

namespace kwatch::kinds {

// Every column of the table of `group`'s `kind`, NAME included; NAME and AGE for kinds without
// their own.
std::vector<PrinterColumn> builtin_columns(std::string_view group, std::string_view kind);

// Whether row `a` comes before row `b` in the table of a list, for the kinds whose list printer
// in kube orders its rows (FlowSchemas: by matching precedence, then name); null for the others,
// whose rows keep the list's order.
using RowOrder = std::function<bool(const boost::json::object& a, const boost::json::object& b)>;
RowOrder builtin_row_order(std::string_view group, std::string_view kind);

}  // namespace kwatch::kinds
