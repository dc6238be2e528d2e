// Timestamps and durations as CEL reads and writes them: RFC 3339 timestamps in
// [0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999999Z], durations in Go's `1h2m3.5s` syntax
// within a 64-bit count of nanoseconds (about 292 years, as cel-go and so kube allow), and the calendar fields the `get*` accessors return, in UTC, a fixed
// offset (`+05:30`) or a zone of the system's tz database (`America/New_York`).
// Pure, except that zone lookups read /usr/share/zoneinfo (cached, thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cel/value.hpp"

namespace kwatch::cel {

// Nanoseconds over the whole range of timestamps and durations, with room for their sums.
__extension__ using Nanos = __int128;

inline constexpr std::int64_t kMinTimestampSeconds = -62135596800;  // 0001-01-01T00:00:00Z
inline constexpr std::int64_t kMaxTimestampSeconds = 253402300799;  // 9999-12-31T23:59:59Z

bool timestamp_in_range(Seconds t);
bool duration_in_range(Seconds d);

std::optional<Seconds> parse_timestamp(std::string_view text);
std::string format_timestamp(Seconds t);  // `2009-02-13T23:31:30.5Z`

std::optional<Seconds> parse_duration(std::string_view text);
std::string format_duration(Seconds d);  // `-1.5s`, `0s`

// Normalises seconds and nanos to one sign (duration) or nanos in [0, 1e9) (timestamp); false
// on overflow.
bool normalize_duration(Nanos nanos, Seconds& out);

struct CivilTime {
  std::int64_t year;
  int month;        // 1-12
  int day;          // 1-31
  int day_of_year;  // 0-365
  int day_of_week;  // 0 = Sunday
  int hours, minutes, seconds;
  std::int32_t nanos;
};

// The civil time of `t` in `zone` ("" or "UTC", "+05:30", "-08:00", an IANA name); nullopt for
// a zone that cannot be found.
std::optional<CivilTime> civil_time(Seconds t, std::string_view zone);

}  // namespace kwatch::cel
