#include "apimachinery/status.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>

namespace kwatch::apimachinery {

namespace json = boost::json;

StatusCode status_code(Errc code) {
  switch (code) {
    case Errc::not_found: return {404, "NotFound"};
    case Errc::already_exists: return {409, "AlreadyExists"};
    case Errc::conflict: return {409, "Conflict"};
    case Errc::gone: return {410, "Expired"};
    case Errc::timeout: return {504, "Timeout"};
    case Errc::invalid: return {422, "Invalid"};
    case Errc::bad_request: return {400, "BadRequest"};
    case Errc::unavailable: return {503, "ServiceUnavailable"};
    case Errc::too_many_requests: return {429, "TooManyRequests"};
    case Errc::internal: return {500, "InternalError"};
    case Errc::corrupt: return {500, "InternalError"};
    case Errc::unsupported_media_type: return {415, "UnsupportedMediaType"};
    case Errc::too_large: return {413, "RequestEntityTooLarge"};
    case Errc::method_not_allowed: return {405, "MethodNotAllowed"};
    case Errc::unauthorized: return {401, "Unauthorized"};
    case Errc::forbidden: return {403, "Forbidden"};
    case Errc::not_acceptable: return {406, "NotAcceptable"};
  }
  return {500, "InternalError"};
}

Errc errc_for_status(unsigned http) {
  switch (http) {
    case 400: return Errc::bad_request;
    case 401: return Errc::unauthorized;
    case 403: return Errc::forbidden;
    case 404: return Errc::not_found;
    case 405: return Errc::method_not_allowed;
    case 406: return Errc::not_acceptable;
    case 409: return Errc::conflict;
    case 410: return Errc::gone;
    case 413: return Errc::too_large;
    case 415: return Errc::unsupported_media_type;
    case 422: return Errc::invalid;
    case 429: return Errc::too_many_requests;
    case 500: return Errc::internal;
    case 503: return Errc::unavailable;
    case 504: return Errc::timeout;
    default: return http >= 500 ? Errc::internal : Errc::bad_request;
  }
}

json::object status_object(const ApiError& error) {
  StatusCode sc = status_code(error.code);
  json::object status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = json::object();
  status["status"] = "Failure";
  // Messages may quote what a client sent; a Status must stay valid JSON whatever that was.
  status["message"] = to_valid_utf8(error.message);
  if (error.reason.empty()) {
    status["reason"] = sc.reason;
  } else {
    status["reason"] = error.reason;
  }
  json::object details;
  if (!error.name.empty()) details["name"] = to_valid_utf8(error.name);
  if (!error.group.empty()) details["group"] = error.group;
  if (!error.kind.empty()) details["kind"] = error.kind;
  if (!error.causes.empty()) {
    json::array causes;
    for (const auto& c : error.causes) {
      json::object cause;
      if (!c.type.empty()) cause["reason"] = c.type;
      cause["message"] = to_valid_utf8(c.message);
      if (!c.field.empty()) cause["field"] = to_valid_utf8(c.field);
      causes.push_back(std::move(cause));
    }
    details["causes"] = std::move(causes);
  }
  if (error.retry_after_seconds > 0) details["retryAfterSeconds"] = error.retry_after_seconds;
  if (!details.empty()) status["details"] = std::move(details);
  status["code"] = sc.http;
  return status;
}

json::object success_status(json::object details, unsigned code) {
  json::object status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = json::object();
  status["status"] = "Success";
  if (!details.empty()) status["details"] = std::move(details);
  if (code != 0) status["code"] = code;
  return status;
}

}  // namespace kwatch::apimachinery
