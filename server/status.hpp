// Kubernetes Status objects for errors, and the HTTP code and reason of each error code.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/object.hpp>

#include <string_view>

namespace kwatch::server {

struct StatusCode {
  unsigned http = 500;
  std::string_view reason = "InternalError";
};

StatusCode status_code(base::Errc code);

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",...}
boost::json::object status_object(const apimachinery::ApiError& error);

}  // namespace kwatch::server
