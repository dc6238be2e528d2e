// Splitting a request target into path segments and query parameters. Pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::server {

struct Url {
  std::string path;                           // decoded
  std::vector<std::string> segments;          // path split on '/', empty segments dropped
  std::multimap<std::string, std::string> query;  // decoded

  // The first value of a query parameter, if present.
  std::optional<std::string> param(std::string_view name) const;
};

// Percent-decodes `in` ('+' as space in queries). nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);

// nullopt when the target has a malformed escape.
std::optional<Url> parse_url(std::string_view target);

}  // namespace kwatch::server
