// The string formats kube checks in a structural schema (byte, date, date-time, uuid, ip, cidr,
// mac, hostname, ...) and Go's text for a pattern RE2 refuses.
#include "schema/structural_schema_tree.hpp"

#include <arpa/inet.h>
#include <re2/re2.h>

#include <array>
#include <cctype>

namespace kwatch::schema::detail {

namespace {

// ---- string formats kube checks ----

bool all_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

bool is_base64(std::string_view s) {
  // govalidator's pattern: whole quartets, padding only at the end; the empty string fails.
  if (s.size() < 4 || s.size() % 4 != 0) return false;
  std::size_t pad = 0;
  if (s.back() == '=') pad = s[s.size() - 2] == '=' ? 2 : 1;
  for (std::size_t i = 0; i < s.size() - pad; ++i) {
    char c = s[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/')) return false;
  }
  return true;
}

bool two_digits(std::string_view s, std::size_t at, int& out) {
  if (!std::isdigit(static_cast<unsigned char>(s[at])) ||
      !std::isdigit(static_cast<unsigned char>(s[at + 1]))) {
    return false;
  }
  out = (s[at] - '0') * 10 + (s[at + 1] - '0');
  return true;
}

// time.Parse("2006-01-02", s) == nil.
bool is_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  int y = 0;
  for (int i = 0; i < 4; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    y = y * 10 + (s[i] - '0');
  }
  int m = 0, d = 0;
  if (!two_digits(s, 5, m) || !two_digits(s, 8, d)) return false;
  if (m < 1 || m > 12 || d < 1) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int days = kDays[m - 1];
  if (m == 2 && (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) days = 29;
  return d <= days;
}

// strfmt.IsDateTime: a date, 't', then hh:mm:ss, an optional fraction, and 'z' or an offset,
// compared case-insensitively.
bool is_date_time(std::string_view s) {
  if (s.size() < 4) return false;
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto t = lower.find('t');
  if (t == std::string::npos) return false;
  if (!is_date(std::string_view(lower).substr(0, t))) return false;
  std::string_view rest = std::string_view(lower).substr(t + 1);
  rest = rest.substr(0, rest.find('t'));
  static const re2::RE2 kTime(
      R"(^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$)");
  std::string h, m, sec;
  if (!re2::RE2::PartialMatch(re2::StringPiece(rest.data(), rest.size()), kTime, &h, &m, &sec)) {
    return false;
  }
  return h <= "23" && m <= "59" && sec <= "59";
}

bool is_ipv4_text(const std::string& s) {
  in_addr a;
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}
bool is_ipv6_text(const std::string& s) {
  in6_addr a;
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}
// net.ParseIP(s) != nil.
bool is_ip(const std::string& s) { return is_ipv4_text(s) || is_ipv6_text(s); }

bool is_cidr(std::string_view s) {
  auto slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  std::string ip(s.substr(0, slash));
  std::string_view bits = s.substr(slash + 1);
  int max = is_ipv4_text(ip) ? 32 : is_ipv6_text(ip) ? 128 : -1;
  if (max < 0 || bits.empty() || bits.size() > 3) return false;
  int n = 0;
  for (char c : bits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    n = n * 10 + (c - '0');
  }
  return n <= max;
}

// net.ParseMAC: 6, 8 or 20 octets as hex pairs separated by ':' or '-', or as dotted groups of
// four hex digits.
bool is_mac(std::string_view s) {
  if (s.size() < 14) return false;
  auto octets_ok = [](std::size_t n) { return n == 6 || n == 8 || n == 20; };
  if (s[2] == ':' || s[2] == '-') {
    if ((s.size() + 1) % 3 != 0) return false;
    std::size_t n = (s.size() + 1) / 3;
    if (!octets_ok(n)) return false;
    for (std::size_t i = 0; i < n; ++i) {
      if (!all_hex(s.substr(3 * i, 2))) return false;
      if (i + 1 < n && s[3 * i + 2] != s[2]) return false;
    }
    return true;
  }
  if (s[4] == '.') {
    if ((s.size() + 1) % 5 != 0) return false;
    std::size_t groups = (s.size() + 1) / 5;
    if (!octets_ok(groups * 2)) return false;
    for (std::size_t i = 0; i < groups; ++i) {
      if (!all_hex(s.substr(5 * i, 4))) return false;
      if (i + 1 < groups && s[5 * i + 4] != '.') return false;
    }
    return true;
  }
  return false;
}

// strfmt.IsHostname: go-openapi's HostnamePattern, then at most 255 bytes and labels of at
// most 63. The pattern's letters and symbols (\p{L}, \p{S}) are taken as any non-ASCII
// character: RE2 would need a DFA of hundreds of megabytes for the pattern as written.
bool is_hostname(std::string_view s) {
  if (s.empty() || s.size() > 255) return false;
  // Splits a label into characters (UTF-8 sequences); a character is "word" unless it is ASCII
  // other than a letter or digit.
  struct Char {
    bool word;
    bool hyphen;
  };
  auto chars = [](std::string_view label) {
    std::vector<Char> out;
    for (std::size_t i = 0; i < label.size();) {
      auto c = static_cast<unsigned char>(label[i]);
      if (c < 0x80) {
        out.push_back({std::isalnum(c) != 0, c == '-'});
        ++i;
      } else {
        out.push_back({true, false});
        ++i;
        while (i < label.size() && (static_cast<unsigned char>(label[i]) & 0xC0) == 0x80) ++i;
      }
    }
    return out;
  };
  std::vector<std::string_view> labels;
  for (std::size_t start = 0;;) {
    auto dot = s.find('.', start);
    labels.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  for (auto label : labels) {
    if (label.size() > 63) return false;
  }
  // The last label: a word character, then 1..62 of (optional '-', word character); a lone
  // label: a word character, an optional '-', then up to 62 word characters.
  auto last = chars(labels.back());
  if (last.empty() || !last[0].word) return false;
  if (labels.size() == 1) {
    std::size_t i = 1;
    if (i < last.size() && last[i].hyphen) ++i;
    if (last.size() - i > 62) return false;
    for (; i < last.size(); ++i) {
      if (!last[i].word) return false;
    }
    return true;
  }
  std::size_t groups = 0;
  for (std::size_t i = 1; i < last.size(); ++groups) {
    if (last[i].hyphen) ++i;
    if (i >= last.size() || !last[i].word) return false;
    ++i;
  }
  if (groups < 1 || groups > 62) return false;
  // Every other label: word characters at both ends, word characters or '-' between, 1..63.
  for (std::size_t l = 0; l + 1 < labels.size(); ++l) {
    auto c = chars(labels[l]);
    if (c.empty() || c.size() > 63 || !c.front().word || !c.back().word) return false;
    for (const auto& ch : c) {
      if (!ch.word && !ch.hyphen) return false;
    }
  }
  return true;
}

}  // namespace

bool format_ok(Format f, std::string_view s) {
  switch (f) {
    case Format::none: return true;
    case Format::byte: return is_base64(s);
    case Format::date: return is_date(s);
    case Format::date_time: return is_date_time(s);
    case Format::uuid:
    case Format::uuid3:
    case Format::uuid4:
    case Format::uuid5: {
      static const re2::RE2 kUuid(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$)");
      static const re2::RE2 kUuid3(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$)");
      static const re2::RE2 kUuid4(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$)");
      static const re2::RE2 kUuid5(
          R"((?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$)");
      const re2::RE2& re = f == Format::uuid    ? kUuid
                           : f == Format::uuid3 ? kUuid3
                           : f == Format::uuid4 ? kUuid4
                                                : kUuid5;
      return re2::RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), re);
    }
    case Format::ipv4: {
      std::string t(s);
      return is_ip(t) && t.find('.') != std::string::npos;
    }
    case Format::ipv6: {
      std::string t(s);
      return is_ip(t) && t.find(':') != std::string::npos;
    }
    case Format::cidr: return is_cidr(s);
    case Format::mac: return is_mac(s);
    case Format::hostname: return is_hostname(s);
    case Format::hexcolor: {
      std::string_view h = s;
      if (!h.empty() && h[0] == '#') h.remove_prefix(1);
      return (h.size() == 3 || h.size() == 6) && all_hex(h);
    }
    case Format::bsonobjectid: return s.size() == 24 && all_hex(s);
  }
  return true;
}

// The formats kube keeps for strings (apiextensions' supported formats, names without '-'),
// and the ones this engine checks.
Format string_format(std::string_view normalized, bool& supported) {
  struct Entry {
    std::string_view name;
    Format check;
  };
  static constexpr Entry kFormats[] = {
      {"bsonobjectid", Format::bsonobjectid}, {"uri", Format::none},
      {"email", Format::none},                {"hostname", Format::hostname},
      {"ipv4", Format::ipv4},                 {"ipv6", Format::ipv6},
      {"cidr", Format::cidr},                 {"mac", Format::mac},
      {"uuid", Format::uuid},                 {"uuid3", Format::uuid3},
      {"uuid4", Format::uuid4},               {"uuid5", Format::uuid5},
      {"isbn", Format::none},                 {"isbn10", Format::none},
      {"isbn13", Format::none},               {"creditcard", Format::none},
      {"ssn", Format::none},                  {"hexcolor", Format::hexcolor},
      {"rgbcolor", Format::none},             {"byte", Format::byte},
      {"password", Format::none},             {"date", Format::date},
      {"duration", Format::none},             {"datetime", Format::date_time},
      {"quantity", Format::none},
  };
  for (const auto& e : kFormats) {
    if (e.name == normalized) {
      supported = true;
      return e.check;
    }
  }
  supported = false;
  return Format::none;
}

// Go's regexp/syntax error text for a pattern RE2 refused.
std::string go_regexp_error(const re2::RE2& re, const std::string& pattern) {
  const char* code = "unexpected error";
  switch (re.error_code()) {
    case re2::RE2::ErrorBadEscape: code = "invalid escape sequence"; break;
    case re2::RE2::ErrorBadCharClass: code = "invalid character class"; break;
    case re2::RE2::ErrorBadCharRange: code = "invalid character class range"; break;
    case re2::RE2::ErrorMissingBracket: code = "missing closing ]"; break;
    case re2::RE2::ErrorMissingParen: code = "missing closing )"; break;
    case re2::RE2::ErrorUnexpectedParen: code = "unexpected )"; break;
    case re2::RE2::ErrorTrailingBackslash: code = "trailing backslash at end of expression"; break;
    case re2::RE2::ErrorRepeatArgument: code = "missing argument to repetition operator"; break;
    case re2::RE2::ErrorRepeatSize: code = "invalid repeat count"; break;
    case re2::RE2::ErrorRepeatOp: code = "invalid nested repetition operator"; break;
    case re2::RE2::ErrorBadPerlOp: code = "invalid or unsupported Perl syntax"; break;
    case re2::RE2::ErrorBadUTF8: code = "invalid UTF-8"; break;
    case re2::RE2::ErrorBadNamedCapture: code = "invalid named capture"; break;
    case re2::RE2::ErrorPatternTooLarge: code = "expression too large"; break;
    default: break;
  }
  std::string arg = re.error_arg().empty() ? pattern : re.error_arg();
  return std::string("error parsing regexp: ") + code + ": `" + arg + "`";
}

}  // namespace kwatch::schema::detail
