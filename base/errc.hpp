// Expected failures of kwatch operations, as values.
//
// Every layer returns `boost::system::result<T>` with one of these codes; the server maps each
// code to a Kubernetes Status (code, reason). Thread-safety: the category is a stateless
// singleton, safe from any thread.
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <type_traits>

namespace kwatch::base {

enum class Errc {
  not_found = 1,   // key or object absent
  already_exists,  // create of a key that exists
  conflict,        // compare-and-swap on a stale mod revision
  gone,            // revision older than the compacted revision (410)
  timeout,         // waited for a revision that did not arrive in time (504)
  invalid,         // semantically invalid input (422)
  bad_request,     // malformed input (400)
  unavailable,     // backend cannot serve now (503)
  too_many_requests,  // not ready yet; retry (429)
  internal,        // a bug or an I/O failure in the backend (500)
  corrupt,         // persisted data failed its checksum in a way recovery cannot skip
  unsupported_media_type,  // a body in an encoding kwatch cannot decode (415)
  too_large,       // a request or an object over its size limit (413)
  method_not_allowed,  // a verb the resource does not allow now (405)
  unauthorized,    // no valid credentials (401)
  forbidden,       // the user may not do this (403)
  not_acceptable,  // no representation the client accepts (406)
};

const boost::system::error_category& errc_category() noexcept;

inline boost::system::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), errc_category()};
}

template <class T>
using Result = boost::system::result<T>;

}  // namespace kwatch::base

template <>
struct boost::system::is_error_code_enum<kwatch::base::Errc> : std::true_type {};
