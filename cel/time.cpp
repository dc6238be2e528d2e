#include "cel/time.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kwatch::cel {

namespace {

constexpr std::int64_t kNanos = 1'000'000'000;

// Days since 1970-01-01 of a civil date, and back (proleptic Gregorian calendar).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

bool digits(std::string_view s, std::size_t at, std::size_t n, int& out) {
  if (at + n > s.size()) return false;
  out = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

std::string fraction(std::int32_t nanos) {
  if (nanos == 0) return {};
  char buf[16];
  std::snprintf(buf, sizeof buf, ".%09d", nanos);
  std::string f = buf;
  while (f.back() == '0') f.pop_back();
  return f;
}

// A zone from the tz database: transitions and the offsets in force after each.
struct Zone {
  std::vector<std::int64_t> transitions;
  std::vector<std::int32_t> offsets;  // offsets[i] from transitions[i]; offsets.back() default
  std::int32_t initial = 0;

  std::int32_t offset_at(std::int64_t t) const {
    auto it = std::upper_bound(transitions.begin(), transitions.end(), t);
    if (it == transitions.begin()) return initial;
    return offsets[static_cast<std::size_t>(it - transitions.begin() - 1)];
  }
};

std::uint32_t be32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

// Reads a TZif file's version 2+ block (64-bit transition times), falling back to version 1.
std::shared_ptr<const Zone> load_zone(const std::string& name) {
  if (name.empty() || name.find("..") != std::string::npos || name.front() == '/') return {};
  std::ifstream in("/usr/share/zoneinfo/" + name, std::ios::binary);
  if (!in) return {};
  std::vector<unsigned char> data((std::istreambuf_iterator<char>(in)), {});
  auto parse_block = [&](std::size_t at, bool wide, std::size_t& end) -> std::shared_ptr<Zone> {
    if (at + 44 > data.size() || std::string_view(reinterpret_cast<char*>(&data[at]), 4) != "TZif") {
      return {};
    }
    const unsigned char* h = &data[at + 20];
    const std::uint32_t isutcnt = be32(h), isstdcnt = be32(h + 4), leapcnt = be32(h + 8),
                        timecnt = be32(h + 12), typecnt = be32(h + 16), charcnt = be32(h + 20);
    const std::size_t tsize = wide ? 8 : 4;
    std::size_t p = at + 44;
    const std::size_t need = timecnt * tsize + timecnt + typecnt * 6 + charcnt +
                             leapcnt * (tsize + 4) + isstdcnt + isutcnt;
    if (p + need > data.size() || typecnt == 0) return {};
    auto zone = std::make_shared<Zone>();
    std::vector<std::uint8_t> idx(timecnt);
    for (std::uint32_t i = 0; i < timecnt; ++i) {
      std::int64_t t;
      if (wide) {
        const std::uint64_t v = (std::uint64_t{be32(&data[p])} << 32) | be32(&data[p + 4]);
        t = static_cast<std::int64_t>(v);
      } else {
        t = static_cast<std::int32_t>(be32(&data[p]));
      }
      zone->transitions.push_back(t);
      p += tsize;
    }
    for (std::uint32_t i = 0; i < timecnt; ++i) idx[i] = data[p++];
    std::vector<std::int32_t> types(typecnt);
    for (std::uint32_t i = 0; i < typecnt; ++i) {
      types[i] = static_cast<std::int32_t>(be32(&data[p]));
      p += 6;
    }
    for (std::uint32_t i = 0; i < timecnt; ++i) {
      zone->offsets.push_back(types[idx[i] < typecnt ? idx[i] : 0]);
    }
    zone->initial = types[0];
    end = at + 44 + need;
    return zone;
  };
  std::size_t end = 0;
  auto v1 = parse_block(0, false, end);
  if (!v1) return {};
  if (data[4] >= '2') {
    std::size_t end2 = 0;
    if (auto v2 = parse_block(end, true, end2)) return v2;
  }
  return v1;
}

std::shared_ptr<const Zone> zone_named(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Zone>> cache;
  std::lock_guard lock(mu);
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  auto zone = load_zone(name);
  if (cache.size() < 1024) cache.emplace(name, zone);
  return zone;
}

}  // namespace

bool timestamp_in_range(Seconds t) {
  return t.seconds >= kMinTimestampSeconds && t.seconds <= kMaxTimestampSeconds;
}

bool duration_in_range(Seconds d) {
  const Nanos n = Nanos{d.seconds} * kNanos + d.nanos;
  return n <= INT64_MAX && n >= INT64_MIN;
}

bool normalize_duration(Nanos nanos, Seconds& out) {
  // A duration is a count of nanoseconds that fits 64 bits (about 292 years), as in cel-go.
  if (nanos > INT64_MAX || nanos < INT64_MIN) return false;
  const Nanos seconds = nanos / kNanos;
  out.seconds = static_cast<std::int64_t>(seconds);
  out.nanos = static_cast<std::int32_t>(nanos % kNanos);
  return true;
}

std::optional<Seconds> parse_timestamp(std::string_view s) {
  int year, month, day, hour, minute, second;
  if (!digits(s, 0, 4, year) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, month) ||
      s[7] != '-' || !digits(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't') ||
      !digits(s, 11, 2, hour) || s[13] != ':' || !digits(s, 14, 2, minute) || s[16] != ':' ||
      !digits(s, 17, 2, second)) {
    return std::nullopt;
  }
  std::size_t p = 19;
  std::int64_t nanos = 0;
  if (p < s.size() && s[p] == '.') {
    ++p;
    std::size_t n = 0;
    while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
      if (n < 9) nanos = nanos * 10 + (s[p] - '0');
      ++n;
      ++p;
    }
    if (n == 0) return std::nullopt;
    for (std::size_t i = n; i < 9; ++i) nanos *= 10;
  }
  std::int64_t offset = 0;
  if (p < s.size() && (s[p] == 'Z' || s[p] == 'z')) {
    ++p;
  } else if (p < s.size() && (s[p] == '+' || s[p] == '-')) {
    int oh, om;
    if (!digits(s, p + 1, 2, oh) || p + 3 >= s.size() || s[p + 3] != ':' ||
        !digits(s, p + 4, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = (oh * 3600 + om * 60) * (s[p] == '-' ? -1 : 1);
    p += 6;
  } else {
    return std::nullopt;
  }
  if (p != s.size()) return std::nullopt;
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDays[month - 1] || hour > 23 ||
      minute > 59 || second > 59) {
    return std::nullopt;
  }
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month == 2 && day == 29 && !leap) return std::nullopt;
  Seconds t;
  t.seconds = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) *
                  86400 +
              hour * 3600 + minute * 60 + second - offset;
  t.nanos = static_cast<std::int32_t>(nanos);
  if (!timestamp_in_range(t)) return std::nullopt;
  return t;
}

std::string format_timestamp(Seconds t) {
  std::int64_t days = t.seconds / 86400;
  std::int64_t rem = t.seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  std::int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                static_cast<long long>(y), m, d, static_cast<long long>(rem / 3600),
                static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60));
  return buf + fraction(t.nanos) + "Z";
}

std::optional<Seconds> parse_duration(std::string_view s) {
  // Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+, or "0".
  std::size_t p = 0;
  bool negative = false;
  if (p < s.size() && (s[p] == '-' || s[p] == '+')) negative = s[p++] == '-';
  if (s.substr(p) == "0") return Seconds{};
  if (p == s.size()) return std::nullopt;
  Nanos total = 0;  // nanoseconds
  while (p < s.size()) {
    Nanos whole = 0;
    std::size_t whole_digits = 0;
    while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
      whole = whole * 10 + (s[p++] - '0');
      if (whole > (Nanos{1} << 100)) return std::nullopt;
      ++whole_digits;
    }
    Nanos frac = 0, scale = 1;
    std::size_t frac_digits = 0;
    if (p < s.size() && s[p] == '.') {
      ++p;
      while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
        if (frac_digits < 18) {
          frac = frac * 10 + (s[p] - '0');
          scale *= 10;
        }
        ++frac_digits;
        ++p;
      }
    }
    if (whole_digits == 0 && frac_digits == 0) return std::nullopt;
    const std::size_t unit_start = p;
    while (p < s.size() && !(s[p] >= '0' && s[p] <= '9') && s[p] != '.') ++p;
    const std::string_view unit = s.substr(unit_start, p - unit_start);
    Nanos per;
    if (unit == "ns") {
      per = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {
      per = 1000;
    } else if (unit == "ms") {
      per = 1000000;
    } else if (unit == "s") {
      per = kNanos;
    } else if (unit == "m") {
      per = 60 * kNanos;
    } else if (unit == "h") {
      per = 3600 * kNanos;
    } else {
      return std::nullopt;
    }
    // A term past the range fails before it is multiplied (2^100 units of hours would overflow
    // even 128 bits).
    if (whole > (Nanos{INT64_MAX} + 1) / per) return std::nullopt;
    total += whole * per + frac * per / scale;
    if (total > Nanos{INT64_MAX} + 1) return std::nullopt;
  }
  Seconds d;
  if (!normalize_duration(negative ? -total : total, d)) return std::nullopt;
  return d;
}

std::string format_duration(Seconds d) {
  const bool negative = d.seconds < 0 || d.nanos < 0;
  const std::int64_t secs = d.seconds < 0 ? -d.seconds : d.seconds;
  const std::int32_t nanos = d.nanos < 0 ? -d.nanos : d.nanos;
  return (negative ? "-" : "") + std::to_string(secs) + fraction(nanos) + "s";
}

std::optional<CivilTime> civil_time(Seconds t, std::string_view zone) {
  std::int64_t offset = 0;
  if (zone.empty() || zone == "UTC") {
    offset = 0;
  } else if (zone.front() == '+' || zone.front() == '-' || (zone.front() >= '0' && zone.front() <= '9')) {
    // A fixed offset, `+05:30`, `-08:00`, or unsigned `02:00`.
    const bool sign = zone.front() == '+' || zone.front() == '-';
    const std::size_t at = sign ? 1 : 0;
    int h, m;
    if (zone.size() != at + 5 || !digits(zone, at, 2, h) || zone[at + 2] != ':' ||
        !digits(zone, at + 3, 2, m)) {
      return std::nullopt;
    }
    offset = (h * 3600 + m * 60) * (zone.front() == '-' ? -1 : 1);
  } else {
    auto z = zone_named(std::string(zone));
    if (!z) return std::nullopt;
    offset = z->offset_at(t.seconds);
  }
  const std::int64_t local = t.seconds + offset;
  std::int64_t days = local / 86400;
  std::int64_t rem = local % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  CivilTime c{};
  unsigned m, d;
  civil_from_days(days, c.year, m, d);
  c.month = static_cast<int>(m);
  c.day = static_cast<int>(d);
  c.day_of_year = static_cast<int>(days - days_from_civil(c.year, 1, 1));
  c.day_of_week = static_cast<int>(((days % 7) + 7 + 4) % 7);  // 1970-01-01 was a Thursday
  c.hours = static_cast<int>(rem / 3600);
  c.minutes = static_cast<int>(rem / 60 % 60);
  c.seconds = static_cast<int>(rem % 60);
  c.nanos = t.nanos;
  return c;
}

}  // namespace kwatch::cel
