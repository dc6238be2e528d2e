// Times as Kubernetes writes them in objects: RFC 3339 in UTC, whole seconds
// ("2026-11-23T12:00:00Z"), and durations as kubectl prints them ("5m", "3d2h"). Safe from any
// thread.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <string>

namespace kwatch::base {

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

// duration.HumanDuration: "5s", "2m30s", "45m", "5h3m", "3d2h", "400d", "2y".
inline std::string human_duration(std::chrono::seconds d) {
  auto s = d.count();
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s";
  auto m = s / 60;
  if (m < 10) {
    auto rem = s % 60;
    return std::to_string(m) + "m" + (rem ? std::to_string(rem) + "s" : "");
  }
  if (m < 180) return std::to_string(m) + "m";
  auto h = s / 3600;
  if (h < 8) {
    auto rem = m % 60;
    return std::to_string(h) + "h" + (rem ? std::to_string(rem) + "m" : "");
  }
  if (h < 48) return std::to_string(h) + "h";
  if (h < 24 * 8) {
    auto rem = h % 24;
    return std::to_string(h / 24) + "d" + (rem ? std::to_string(rem) + "h" : "");
  }
  if (h < 24 * 365 * 2) return std::to_string(h / 24) + "d";
  return std::to_string(h / 24 / 365) + "y";
}

}  // namespace kwatch::base
