#include "base/errc.hpp"

#include <string>

namespace kwatch::base {
namespace {

class ErrcCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "kwatch"; }

  std::string message(int ev) const override {
    switch (static_cast<Errc>(ev)) {
      case Errc::not_found: return "not found";
      case Errc::already_exists: return "already exists";
      case Errc::conflict: return "conflict";
      case Errc::gone: return "resource version too old";
      case Errc::timeout: return "timeout";
      case Errc::invalid: return "invalid";
      case Errc::bad_request: return "bad request";
      case Errc::unavailable: return "unavailable";
      case Errc::too_many_requests: return "too many requests";
      case Errc::internal: return "internal error";
      case Errc::corrupt: return "corrupt data";
      case Errc::unsupported_media_type: return "unsupported media type";
      case Errc::too_large: return "too large";
      case Errc::method_not_allowed: return "method not allowed";
      case Errc::unauthorized: return "unauthorized";
      case Errc::forbidden: return "forbidden";
      case Errc::not_acceptable: return "not acceptable";
    }
    return "unknown kwatch error";
  }
};

}  // namespace

const boost::system::error_category& errc_category() noexcept {
  static const ErrcCategory category;
  return category;
}

}  // namespace kwatch::base
