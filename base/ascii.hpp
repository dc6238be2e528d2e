// ASCII case-insensitive comparison of names (HTTP header names, Go's strings.EqualFold for
// ASCII), as kwatch compares them wherever the protocol says case does not matter.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace kwatch::base {

inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

inline bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// `s` with every byte `keep` refuses written as %XX (upper-case hex).
template <class Keep>
std::string percent_encode(std::string_view s, Keep keep) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (keep(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace kwatch::base
