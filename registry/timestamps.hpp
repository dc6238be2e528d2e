// Times as Kubernetes writes them in objects: RFC 3339 in UTC, whole seconds
// ("2026-11-23T12:00:00Z"). Safe from any thread.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <string>

namespace kwatch::registry {

inline std::string rfc3339(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline std::string now_rfc3339() {
  return rfc3339(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
}

// The time an RFC 3339 timestamp names, to the second (fractions and zones other than Z are
// not read: kube writes whole seconds in UTC); nullopt when it is not one.
inline std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& s) {
  std::tm tm{};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace kwatch::registry
