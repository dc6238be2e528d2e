#include "server/response_gzip.hpp"

#include <boost/beast/core/string.hpp>

namespace kwatch::server {

bool accepts_gzip(std::string_view header) {
  while (!header.empty()) {
    const auto comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    auto trim = [](std::string_view s) {
      while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
      while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
      return s;
    };
    const auto semi = item.find(';');
    const std::string_view coding = trim(item.substr(0, semi));
    if (!boost::beast::iequals(coding, "gzip")) continue;
    if (semi == std::string_view::npos) return true;
    std::string_view param = trim(item.substr(semi + 1));
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') return true;
    param.remove_prefix(2);
    // q=0, q=0.0, q=0.000: refused; anything else takes it.
    return param.find_first_not_of("0.") != std::string_view::npos;
  }
  return false;
}

}  // namespace kwatch::server
