// Kubernetes Status objects (meta/v1 Status): the failure an ApiError answers with, with the HTTP
// code and reason of each error code, and the success a write answers with when it has no object
// to return. Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/object.hpp>

#include <string_view>

namespace kwatch::apimachinery {

struct StatusCode {
  unsigned http = 500;
  std::string_view reason = "InternalError";
};

StatusCode status_code(base::Errc code);

// The error code that answers with HTTP status `http` (status_code's inverse; 409 is Conflict);
// a status no error code answers with is InternalError from 500 up, BadRequest below. For a
// Status received from elsewhere (an admission webhook's refusal).
base::Errc errc_for_status(unsigned http);

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",...}
boost::json::object status_object(const ApiError& error);

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}, with `details` when it
// has members and `code` when it is not 0 (kube's answer to a delete that returns no object, and
// to a create of a subresource that makes nothing to return, such as pods/binding).
boost::json::object success_status(boost::json::object details = {}, unsigned code = 0);

}  // namespace kwatch::apimachinery
