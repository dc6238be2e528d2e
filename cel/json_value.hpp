// JSON documents as CEL values, with the types a schemaless JSON value has in CEL (kube's
// `x-kubernetes-preserve-unknown-fields` reading): numbers written as integers are int, others
// double; strings, bools and null as themselves; arrays are lists and objects maps with string
// keys. The value owns what it holds (it copies), so it outlives the document.
#pragma once

#include <boost/json/fwd.hpp>

#include "cel/value.hpp"

namespace kwatch::cel {

Value value_from_json(const boost::json::value& json);

}  // namespace kwatch::cel
