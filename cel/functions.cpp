#include "cel/functions.hpp"

#include <re2/re2.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

#include "cel/literal.hpp"
#include "cel/time.hpp"

namespace kwatch::cel {

void EvalBudget::exceeded() const { throw CostLimitExceeded{}; }

void FunctionRegistry::add(std::string_view function, std::string id, bool receiver,
                           std::string_view signature, FunctionImpl impl) {
  Overload o;
  o.id = std::move(id);
  o.receiver = receiver;
  o.signature = parse_signature(signature);
  for (const auto& t : o.signature.params) {
    const auto kind = value_kind_of(*t);
    ArgKind arg = kind ? ArgKind(*kind) : kAny;
    // The name lives in the signature's type, as long as the registry.
    if (kind == ValueKind::opaque) arg.opaque_name = t->name;
    o.args.push_back(arg);
  }
  o.impl = impl;
  auto it = functions_.find(function);
  if (it == functions_.end()) it = functions_.emplace(std::string(function), std::vector<Overload>{}).first;
  it->second.push_back(std::move(o));
}

void FunctionRegistry::add_both(std::string_view function, std::string id,
                                std::string_view signature, FunctionImpl impl) {
  add(function, id, false, signature, impl);
  add(function, id, true, signature, impl);
}

std::vector<const Overload*> FunctionRegistry::find(std::string_view function, bool receiver,
                                                    std::size_t argc) const {
  std::vector<const Overload*> out;
  auto it = functions_.find(function);
  if (it == functions_.end()) return out;
  for (const auto& o : it->second) {
    if (o.receiver == receiver && o.args.size() == argc) out.push_back(&o);
  }
  return out;
}

bool FunctionRegistry::has_function(std::string_view function) const {
  return functions_.find(function) != functions_.end();
}

std::uint64_t code_point_count(std::string_view s) {
  // Every byte but UTF-8's continuation bytes (10xxxxxx) starts a code point; eight bytes at a
  // time, a continuation byte is one whose top bit is set and whose next bit is not.
  std::uint64_t continuation = 0;
  std::size_t i = 0;
  constexpr std::uint64_t kTop = 0x8080808080808080ULL;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    // One bit a continuation byte, at the bottom of its byte, summed by one multiply (the
    // target has no popcount instruction: std::popcount is a library call there).
    const std::uint64_t ones = (w & ~(w << 1) & kTop) >> 7;
    continuation += (ones * 0x0101010101010101ULL) >> 56;
  }
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++continuation;
  }
  return s.size() - continuation;
}

std::uint64_t regex_cost(std::string_view text, std::string_view pattern) {
  return tenths(code_point_count(text) + 1, 1) * ((code_point_count(pattern) + 3) / 4);
}

Value no_such_overload(std::string_view function, std::span<const Value> args) {
  std::string message = "no such overload: " + std::string(function) + "(";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i > 0) message += ", ";
    message += args[i].type_name();
  }
  return Value::error(message + ")");
}

namespace {

using Args = std::span<const Value>;
using K = ValueKind;

Value int_overflow() { return Value::error("integer overflow"); }
Value uint_overflow() { return Value::error("unsigned integer overflow"); }

// --- arithmetic ---
Value add_int(Args a, EvalBudget&) {
  std::int64_t r;
  if (__builtin_add_overflow(a[0].as_int(), a[1].as_int(), &r)) return int_overflow();
  return Value::int64(r);
}
Value sub_int(Args a, EvalBudget&) {
  std::int64_t r;
  if (__builtin_sub_overflow(a[0].as_int(), a[1].as_int(), &r)) return int_overflow();
  return Value::int64(r);
}
Value mul_int(Args a, EvalBudget&) {
  std::int64_t r;
  if (__builtin_mul_overflow(a[0].as_int(), a[1].as_int(), &r)) return int_overflow();
  return Value::int64(r);
}
Value div_int(Args a, EvalBudget&) {
  if (a[1].as_int() == 0) return Value::error("division by zero");
  if (a[0].as_int() == INT64_MIN && a[1].as_int() == -1) return int_overflow();
  return Value::int64(a[0].as_int() / a[1].as_int());
}
Value mod_int(Args a, EvalBudget&) {
  if (a[1].as_int() == 0) return Value::error("modulus by zero");
  if (a[0].as_int() == INT64_MIN && a[1].as_int() == -1) return int_overflow();
  return Value::int64(a[0].as_int() % a[1].as_int());
}
Value neg_int(Args a, EvalBudget&) {
  if (a[0].as_int() == INT64_MIN) return int_overflow();
  return Value::int64(-a[0].as_int());
}
Value add_uint(Args a, EvalBudget&) {
  std::uint64_t r;
  if (__builtin_add_overflow(a[0].as_uint(), a[1].as_uint(), &r)) return uint_overflow();
  return Value::uint64(r);
}
Value sub_uint(Args a, EvalBudget&) {
  std::uint64_t r;
  if (__builtin_sub_overflow(a[0].as_uint(), a[1].as_uint(), &r)) return uint_overflow();
  return Value::uint64(r);
}
Value mul_uint(Args a, EvalBudget&) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a[0].as_uint(), a[1].as_uint(), &r)) return uint_overflow();
  return Value::uint64(r);
}
Value div_uint(Args a, EvalBudget&) {
  if (a[1].as_uint() == 0) return Value::error("division by zero");
  return Value::uint64(a[0].as_uint() / a[1].as_uint());
}
Value mod_uint(Args a, EvalBudget&) {
  if (a[1].as_uint() == 0) return Value::error("modulus by zero");
  return Value::uint64(a[0].as_uint() % a[1].as_uint());
}
Value add_double(Args a, EvalBudget&) { return Value::float64(a[0].as_double() + a[1].as_double()); }
Value sub_double(Args a, EvalBudget&) { return Value::float64(a[0].as_double() - a[1].as_double()); }
Value mul_double(Args a, EvalBudget&) { return Value::float64(a[0].as_double() * a[1].as_double()); }
Value div_double(Args a, EvalBudget&) { return Value::float64(a[0].as_double() / a[1].as_double()); }
Value neg_double(Args a, EvalBudget&) { return Value::float64(-a[0].as_double()); }
Value logical_not(Args a, EvalBudget&) { return Value::boolean(!a[0].as_bool()); }

Value concat_text(Args a, EvalBudget& budget) {
  const auto x = a[0].as_text(), y = a[1].as_text();
  budget.call_cost(a[0].is(K::bytes) ? tenths(x.size() + y.size(), 1)
                                     : tenths(code_point_count(x) + code_point_count(y), 1));
  std::string s;
  s.reserve(x.size() + y.size());
  s.append(x).append(y);
  return a[0].is(K::bytes) ? Value::bytes(std::move(s)) : Value::string(std::move(s));
}
Value concat_list(Args a, EvalBudget& budget) {
  const ListValue& x = a[0].as_list();
  const ListValue& y = a[1].as_list();
  if (x.size() == 0) return a[1];
  if (y.size() == 0) return a[0];
  (void)budget;
  std::vector<Value> items;
  items.reserve(x.size() + y.size());
  for (std::size_t i = 0; i < x.size(); ++i) items.push_back(x.at(i));
  // A set adds what it lacks; a map list replaces the entries of the same keys (in place) and
  // adds the others, as kube's lists of these types join.
  const ListSemantics s = x.semantics();
  for (std::size_t j = 0; j < y.size(); ++j) {
    Value e = y.at(j);
    bool placed = false;
    if (s.kind == ListSemantics::Kind::set) {
      for (const auto& d : items) placed = placed || equal(d, e);
    } else if (s.kind == ListSemantics::Kind::map) {
      for (std::size_t i = 0; i < x.size() && !placed; ++i) {
        if (same_keys(items[i], e, *s.keys)) {
          items[i] = e;
          placed = true;
        }
      }
    }
    if (!placed) items.push_back(std::move(e));
  }
  return Value::list(std::move(items));
}

Nanos total_nanos(Seconds s) { return Nanos{s.seconds} * 1'000'000'000 + s.nanos; }

Value timestamp_from_nanos(Nanos n) {
  Seconds t;
  Nanos secs = n / 1'000'000'000;
  Nanos nanos = n % 1'000'000'000;
  if (nanos < 0) {
    nanos += 1'000'000'000;
    --secs;
  }
  if (secs < kMinTimestampSeconds || secs > kMaxTimestampSeconds) {
    return Value::error("timestamp overflow");
  }
  t.seconds = static_cast<std::int64_t>(secs);
  t.nanos = static_cast<std::int32_t>(nanos);
  return Value::timestamp(t);
}
Value duration_from_nanos(Nanos n) {
  Seconds d;
  if (!normalize_duration(n, d)) return Value::error("duration overflow");
  return Value::duration(d);
}
Value add_ts_dur(Args a, EvalBudget&) {
  return timestamp_from_nanos(total_nanos(a[0].as_seconds()) + total_nanos(a[1].as_seconds()));
}
Value add_dur_ts(Args a, EvalBudget&) {
  return timestamp_from_nanos(total_nanos(a[0].as_seconds()) + total_nanos(a[1].as_seconds()));
}
Value add_dur_dur(Args a, EvalBudget&) {
  return duration_from_nanos(total_nanos(a[0].as_seconds()) + total_nanos(a[1].as_seconds()));
}
Value sub_ts_ts(Args a, EvalBudget&) {
  return duration_from_nanos(total_nanos(a[0].as_seconds()) - total_nanos(a[1].as_seconds()));
}
Value sub_ts_dur(Args a, EvalBudget&) {
  return timestamp_from_nanos(total_nanos(a[0].as_seconds()) - total_nanos(a[1].as_seconds()));
}
Value sub_dur_dur(Args a, EvalBudget&) {
  return duration_from_nanos(total_nanos(a[0].as_seconds()) - total_nanos(a[1].as_seconds()));
}

// --- size ---
Value size_string(Args a, EvalBudget&) {
  return Value::int64(static_cast<std::int64_t>(code_point_count(a[0].as_text())));
}
Value size_bytes(Args a, EvalBudget&) {
  return Value::int64(static_cast<std::int64_t>(a[0].as_text().size()));
}
Value size_list(Args a, EvalBudget&) {
  return Value::int64(static_cast<std::int64_t>(a[0].as_list().size()));
}
Value size_map(Args a, EvalBudget&) {
  return Value::int64(static_cast<std::int64_t>(a[0].as_map().size()));
}

// --- conversions ---
Value identity(Args a, EvalBudget&) { return a[0]; }
Value type_of(Args a, EvalBudget&) { return Value::type(a[0].type_name()); }

}  // namespace

std::string double_to_string(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  if (d == 0) return std::signbit(d) ? "-0" : "0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);
  const auto e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa.front() == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 21) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + eb;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  const auto point = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= point) return out + digits + std::string(point - digits.size(), '0');
  return out + digits.substr(0, point) + "." + digits.substr(point);
}

// Patterns are cached by text: a rule's pattern is usually a constant, compiled once. A pattern
// may also come from an object (`self.value.matches(self.pattern)`), so what one writer can pin
// in memory is bounded: only small programs are kept (`\pL{300}` is eight characters and
// 358,000 instructions), and the cache starts over when it holds kMaxCachedPatterns.
constexpr std::size_t kMaxCachedPatterns = 256;
constexpr int kMaxCachedProgramSize = 4096;

std::shared_ptr<const RE2> compiled_pattern(std::string_view pattern, std::string& error) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const RE2>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(std::string(pattern));
  if (it != cache.end()) return it->second;
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    error = "given regex is invalid: " + re->error();
    return {};
  }
  if (re->ProgramSize() > kMaxCachedProgramSize) return re;
  if (cache.size() >= kMaxCachedPatterns) cache.clear();
  cache.emplace(std::string(pattern), re);
  return re;
}

const RE2* thread_pattern(std::string_view pattern, std::string& error) {
  // A rule's constant pattern has one address for the program's life: its slot is found by
  // that address and confirmed by its text (another text may come to live at a freed address).
  struct Slot {
    std::string text;
    std::shared_ptr<const RE2> re;
  };
  thread_local std::array<Slot, 16> recent;
  thread_local std::shared_ptr<const RE2> large;  // one uncached program, alive through its call
  Slot& slot = recent[(reinterpret_cast<std::uintptr_t>(pattern.data()) >> 3) % recent.size()];
  if (slot.re && slot.text == pattern) return slot.re.get();
  auto re = compiled_pattern(pattern, error);
  if (!re) return nullptr;
  if (re->ProgramSize() > kMaxCachedProgramSize) {
    large = std::move(re);
    return large.get();
  }
  slot.text.assign(pattern);
  slot.re = std::move(re);
  return slot.re.get();
}

namespace {

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len;
    std::uint32_t cp;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2;
      cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3;
      cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

Value int_from_uint(Args a, EvalBudget&) {
  if (a[0].as_uint() > static_cast<std::uint64_t>(INT64_MAX)) return int_overflow();
  return Value::int64(static_cast<std::int64_t>(a[0].as_uint()));
}
Value int_from_double(Args a, EvalBudget&) {
  const double d = a[0].as_double();
  // Exclusive bounds: the doubles nearest INT64_MIN/MAX round out of range.
  if (!(d > -9223372036854775808.0 && d < 9223372036854775807.0)) return int_overflow();
  return Value::int64(static_cast<std::int64_t>(d));
}
Value int_from_string(Args a, EvalBudget&) {
  const auto s = a[0].as_text();
  std::int64_t v;
  const char* begin = s.data();
  if (!s.empty() && s.front() == '+') ++begin;
  const auto r = std::from_chars(begin, s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) {
    return Value::error("cannot convert string '" + std::string(s) + "' to int");
  }
  return Value::int64(v);
}
Value int_from_timestamp(Args a, EvalBudget&) { return Value::int64(a[0].as_seconds().seconds); }
Value uint_from_int(Args a, EvalBudget&) {
  if (a[0].as_int() < 0) return uint_overflow();
  return Value::uint64(static_cast<std::uint64_t>(a[0].as_int()));
}
Value uint_from_double(Args a, EvalBudget&) {
  const double d = a[0].as_double();
  if (!(d > -1.0 && d < 18446744073709551615.0)) return uint_overflow();
  return Value::uint64(static_cast<std::uint64_t>(d));
}
Value uint_from_string(Args a, EvalBudget&) {
  const auto s = a[0].as_text();
  std::uint64_t v;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) {
    return Value::error("cannot convert string '" + std::string(s) + "' to uint");
  }
  return Value::uint64(v);
}
Value double_from_int(Args a, EvalBudget&) {
  return Value::float64(static_cast<double>(a[0].as_int()));
}
Value double_from_uint(Args a, EvalBudget&) {
  return Value::float64(static_cast<double>(a[0].as_uint()));
}
Value double_from_string(Args a, EvalBudget&) {
  std::string s(a[0].as_text());
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity") {
    return Value::float64(INFINITY);
  }
  if (lower == "-inf" || lower == "-infinity") return Value::float64(-INFINITY);
  if (lower == "nan") return Value::float64(NAN);
  double v;
  const char* begin = s.data();
  if (!s.empty() && s.front() == '+') ++begin;
  const auto r = std::from_chars(begin, s.data() + s.size(), v);
  if (s.empty() || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range) ||
      r.ptr != s.data() + s.size()) {
    return Value::error("cannot convert string '" + s + "' to double");
  }
  return Value::float64(v);
}
Value string_from_int(Args a, EvalBudget&) { return Value::string(std::to_string(a[0].as_int())); }
Value string_from_uint(Args a, EvalBudget&) { return Value::string(std::to_string(a[0].as_uint())); }
Value string_from_double(Args a, EvalBudget&) {
  return Value::string(double_to_string(a[0].as_double()));
}
Value string_from_bytes(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(a[0].as_text().size(), 1));
  if (!valid_utf8(a[0].as_text())) return Value::error("invalid UTF-8 in bytes, cannot convert to string");
  return Value::string(std::string(a[0].as_text()));
}
Value string_from_bool(Args a, EvalBudget&) { return Value::string(a[0].as_bool() ? "true" : "false"); }
Value string_from_timestamp(Args a, EvalBudget&) {
  return Value::string(format_timestamp(a[0].as_seconds()));
}
Value string_from_duration(Args a, EvalBudget&) {
  return Value::string(format_duration(a[0].as_seconds()));
}
Value bytes_from_string(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  return Value::bytes(std::string(a[0].as_text()));
}
Value bool_from_string(Args a, EvalBudget&) {
  const auto s = a[0].as_text();
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") {
    return Value::boolean(true);
  }
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") {
    return Value::boolean(false);
  }
  return Value::error("type conversion error from 'string' to 'bool'");
}
Value timestamp_from_string(Args a, EvalBudget&) {
  auto t = parse_timestamp(a[0].as_text());
  if (!t) return Value::error("cannot parse timestamp: " + std::string(a[0].as_text()));
  return Value::timestamp(*t);
}
Value timestamp_from_int(Args a, EvalBudget&) {
  const Seconds t{a[0].as_int(), 0};
  if (!timestamp_in_range(t)) return Value::error("timestamp overflow");
  return Value::timestamp(t);
}
Value duration_from_string(Args a, EvalBudget&) {
  auto d = parse_duration(a[0].as_text());
  if (!d) return Value::error("cannot parse duration: " + std::string(a[0].as_text()));
  return Value::duration(*d);
}

// --- strings ---
Value contains(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1) *
                   tenths(code_point_count(a[1].as_text()), 1));
  return Value::boolean(a[0].as_text().find(a[1].as_text()) != std::string_view::npos);
}
Value starts_with(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  return Value::boolean(a[0].as_text().starts_with(a[1].as_text()));
}
Value ends_with(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  return Value::boolean(a[0].as_text().ends_with(a[1].as_text()));
}

Value matches(Args a, EvalBudget& budget) {
  std::string error;
  const RE2* re = thread_pattern(a[1].as_text(), error);
  if (!re) return Value::error(error);
  budget.call_cost(regex_cost(a[0].as_text(), a[1].as_text()));
  const auto text = a[0].as_text();
  return Value::boolean(RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re));
}

// --- timestamps and durations ---
template <int (*Field)(const CivilTime&)>
Value timestamp_field(Args a, EvalBudget&) {
  const std::string_view zone = a.size() > 1 ? a[1].as_text() : std::string_view();
  auto c = civil_time(a[0].as_seconds(), zone);
  if (!c) return Value::error("unknown time zone: " + std::string(zone));
  return Value::int64(Field(*c));
}
int full_year(const CivilTime& c) { return static_cast<int>(c.year); }
int month0(const CivilTime& c) { return c.month - 1; }
int day_of_year(const CivilTime& c) { return c.day_of_year; }
int day_of_month0(const CivilTime& c) { return c.day - 1; }
int day_of_month1(const CivilTime& c) { return c.day; }
int day_of_week(const CivilTime& c) { return c.day_of_week; }
int hours(const CivilTime& c) { return c.hours; }
int minutes(const CivilTime& c) { return c.minutes; }
int seconds(const CivilTime& c) { return c.seconds; }
int milliseconds(const CivilTime& c) { return c.nanos / 1'000'000; }

Value duration_hours(Args a, EvalBudget&) {
  return Value::int64(static_cast<std::int64_t>(total_nanos(a[0].as_seconds()) / 3'600'000'000'000));
}
Value duration_minutes(Args a, EvalBudget&) {
  return Value::int64(static_cast<std::int64_t>(total_nanos(a[0].as_seconds()) / 60'000'000'000));
}
Value duration_seconds(Args a, EvalBudget&) { return Value::int64(a[0].as_seconds().seconds); }
Value duration_milliseconds(Args a, EvalBudget&) {
  return Value::int64(static_cast<std::int64_t>(total_nanos(a[0].as_seconds()) / 1'000'000));
}

// --- optionals ---
Value optional_of(Args a, EvalBudget&) { return Value::optional_of(a[0]); }
Value optional_none(Args, EvalBudget&) { return Value::optional_none(); }
bool is_zero(const Value& v) {
  switch (v.kind()) {
    case K::null: return true;
    case K::boolean: return !v.as_bool();
    case K::int64: return v.as_int() == 0;
    case K::uint64: return v.as_uint() == 0;
    case K::float64: return v.as_double() == 0;
    case K::string:
    case K::bytes: return v.as_text().empty();
    case K::list: return v.as_list().size() == 0;
    case K::map: return v.as_map().size() == 0;
    case K::timestamp:
    case K::duration: return v.as_seconds() == Seconds{};
    default: return false;
  }
}
Value optional_of_non_zero(Args a, EvalBudget&) {
  return is_zero(a[0]) ? Value::optional_none() : Value::optional_of(a[0]);
}
Value optional_value(Args a, EvalBudget&) {
  if (a[0].optional_value() == nullptr) return Value::error("optional.none() dereference");
  return *a[0].optional_value();
}
Value optional_has_value(Args a, EvalBudget&) {
  return Value::boolean(a[0].optional_value() != nullptr);
}
Value optional_or(Args a, EvalBudget&) { return a[0].optional_value() != nullptr ? a[0] : a[1]; }
Value optional_or_value(Args a, EvalBudget&) {
  return a[0].optional_value() != nullptr ? *a[0].optional_value() : a[1];
}

// --- the two-variable comprehensions' map building ---
Value map_insert_entry(Args a, EvalBudget&) {
  const MapValue& base = a[0].as_map();
  auto m = std::make_shared<OwnedMap>();
  for (std::size_t i = 0; i < base.size(); ++i) m->insert(base.key_at(i), base.value_at(i));
  const bool with_map = a.size() == 2;
  if (with_map) {
    const MapValue& extra = a[1].as_map();
    for (std::size_t i = 0; i < extra.size(); ++i) {
      if (!m->insert(extra.key_at(i), extra.value_at(i))) {
        return Value::error("insert failed: key " + format_literal(extra.key_at(i)) +
                            " already exists");
      }
    }
  } else {
    if (!valid_key(a[1])) return Value::error("unsupported key type");
    if (!m->insert(a[1], a[2])) {
      return Value::error("insert failed: key " + format_literal(a[1]) + " already exists");
    }
  }
  return Value::map(std::shared_ptr<const MapValue>(std::move(m)));
}

}  // namespace

void add_standard_functions(FunctionRegistry& r) {
  // Operators the evaluator runs itself (they short-circuit, or compare any two values): here
  // for their signatures only.
  r.add("_?_:_", "conditional", false, "bool, A, A -> A", nullptr);
  r.add("@not_strictly_false", "not_strictly_false", false, "bool -> bool", nullptr);
  r.add("_==_", "equals", false, "A, A -> bool", nullptr);
  r.add("_!=_", "not_equals", false, "A, A -> bool", nullptr);
  r.add("@in", "in_list", false, "A, list(A) -> bool", nullptr);
  r.add("@in", "in_map", false, "A, map(A, B) -> bool", nullptr);
  r.add("_[_]", "index_list", false, "list(A), int -> A", nullptr);
  r.add("_[_]", "index_map", false, "map(A, B), A -> B", nullptr);
  r.add("_[?_]", "optional_list_index_int", false, "list(A), int -> optional(A)", nullptr);
  r.add("_[?_]", "optional_map_index_value", false, "map(A, B), A -> optional(B)", nullptr);
  // Indexing an optional container keeps the result optional.
  r.add("_[_]", "optional_list_index_int_on_optional", false, "optional(list(A)), int -> optional(A)",
        nullptr);
  r.add("_[_]", "optional_map_index_on_optional", false, "optional(map(A, B)), A -> optional(B)",
        nullptr);
  r.add("_[?_]", "optional_list_optindex_on_optional", false,
        "optional(list(A)), int -> optional(A)", nullptr);
  r.add("_[?_]", "optional_map_optindex_on_optional", false,
        "optional(map(A, B)), A -> optional(B)", nullptr);
  for (const char* op : {"_<_", "_<=_", "_>_", "_>=_"}) {
    // Same types, and numbers across types (kube's CrossTypeNumericComparisons).
    for (const char* t : {"bool", "int", "uint", "double", "string", "bytes", "timestamp",
                          "duration"}) {
      r.add(op, std::string(op) + t, false, std::string(t) + ", " + t + " -> bool", nullptr);
    }
    for (const char* pair : {"int, uint", "int, double", "uint, int", "uint, double",
                             "double, int", "double, uint"}) {
      r.add(op, std::string(op) + pair, false, std::string(pair) + " -> bool", nullptr);
    }
  }
  r.add("_+_", "add_int64", false, "int, int -> int", add_int);
  r.add("_+_", "add_uint64", false, "uint, uint -> uint", add_uint);
  r.add("_+_", "add_double", false, "double, double -> double", add_double);
  r.add("_+_", "add_string", false, "string, string -> string", concat_text);
  r.add("_+_", "add_bytes", false, "bytes, bytes -> bytes", concat_text);
  r.add("_+_", "add_list", false, "list(A), list(A) -> list(A)", concat_list);
  r.add("_+_", "add_timestamp_duration", false, "timestamp, duration -> timestamp", add_ts_dur);
  r.add("_+_", "add_duration_timestamp", false, "duration, timestamp -> timestamp", add_dur_ts);
  r.add("_+_", "add_duration_duration", false, "duration, duration -> duration", add_dur_dur);
  r.add("_-_", "subtract_int64", false, "int, int -> int", sub_int);
  r.add("_-_", "subtract_uint64", false, "uint, uint -> uint", sub_uint);
  r.add("_-_", "subtract_double", false, "double, double -> double", sub_double);
  r.add("_-_", "subtract_timestamp_timestamp", false, "timestamp, timestamp -> duration", sub_ts_ts);
  r.add("_-_", "subtract_timestamp_duration", false, "timestamp, duration -> timestamp", sub_ts_dur);
  r.add("_-_", "subtract_duration_duration", false, "duration, duration -> duration", sub_dur_dur);
  r.add("_*_", "multiply_int64", false, "int, int -> int", mul_int);
  r.add("_*_", "multiply_uint64", false, "uint, uint -> uint", mul_uint);
  r.add("_*_", "multiply_double", false, "double, double -> double", mul_double);
  r.add("_/_", "divide_int64", false, "int, int -> int", div_int);
  r.add("_/_", "divide_uint64", false, "uint, uint -> uint", div_uint);
  r.add("_/_", "divide_double", false, "double, double -> double", div_double);
  r.add("_%_", "modulo_int64", false, "int, int -> int", mod_int);
  r.add("_%_", "modulo_uint64", false, "uint, uint -> uint", mod_uint);
  r.add("-_", "negate_int64", false, "int -> int", neg_int);
  r.add("-_", "negate_double", false, "double -> double", neg_double);
  r.add("!_", "logical_not", false, "bool -> bool", logical_not);

  r.add_both("size", "size_string", "string -> int", size_string);
  r.add_both("size", "size_bytes", "bytes -> int", size_bytes);
  r.add_both("size", "size_list", "list(A) -> int", size_list);
  r.add_both("size", "size_map", "map(K, V) -> int", size_map);

  r.add("int", "int64_to_int64", false, "int -> int", identity);
  r.add("int", "uint64_to_int64", false, "uint -> int", int_from_uint);
  r.add("int", "double_to_int64", false, "double -> int", int_from_double);
  r.add("int", "string_to_int64", false, "string -> int", int_from_string);
  r.add("int", "timestamp_to_int64", false, "timestamp -> int", int_from_timestamp);
  r.add("uint", "uint64_to_uint64", false, "uint -> uint", identity);
  r.add("uint", "int64_to_uint64", false, "int -> uint", uint_from_int);
  r.add("uint", "double_to_uint64", false, "double -> uint", uint_from_double);
  r.add("uint", "string_to_uint64", false, "string -> uint", uint_from_string);
  r.add("double", "double_to_double", false, "double -> double", identity);
  r.add("double", "int64_to_double", false, "int -> double", double_from_int);
  r.add("double", "uint64_to_double", false, "uint -> double", double_from_uint);
  r.add("double", "string_to_double", false, "string -> double", double_from_string);
  r.add("string", "string_to_string", false, "string -> string", identity);
  r.add("string", "int64_to_string", false, "int -> string", string_from_int);
  r.add("string", "uint64_to_string", false, "uint -> string", string_from_uint);
  r.add("string", "double_to_string", false, "double -> string", string_from_double);
  r.add("string", "bytes_to_string", false, "bytes -> string", string_from_bytes);
  r.add("string", "bool_to_string", false, "bool -> string", string_from_bool);
  r.add("string", "timestamp_to_string", false, "timestamp -> string", string_from_timestamp);
  r.add("string", "duration_to_string", false, "duration -> string", string_from_duration);
  r.add("bytes", "bytes_to_bytes", false, "bytes -> bytes", identity);
  r.add("bytes", "string_to_bytes", false, "string -> bytes", bytes_from_string);
  r.add("bool", "bool_to_bool", false, "bool -> bool", identity);
  r.add("bool", "string_to_bool", false, "string -> bool", bool_from_string);
  r.add("timestamp", "timestamp_to_timestamp", false, "timestamp -> timestamp", identity);
  r.add("timestamp", "string_to_timestamp", false, "string -> timestamp", timestamp_from_string);
  r.add("timestamp", "int64_to_timestamp", false, "int -> timestamp", timestamp_from_int);
  r.add("duration", "duration_to_duration", false, "duration -> duration", identity);
  r.add("duration", "string_to_duration", false, "string -> duration", duration_from_string);
  r.add("type", "type", false, "A -> type(A)", type_of);
  r.add("dyn", "to_dyn", false, "dyn -> dyn", identity);

  r.add("contains", "contains_string", true, "string, string -> bool", contains);
  r.add("startsWith", "starts_with_string", true, "string, string -> bool", starts_with);
  r.add("endsWith", "ends_with_string", true, "string, string -> bool", ends_with);
  r.add_both("matches", "matches_string", "string, string -> bool", matches);

  struct Accessor {
    const char* name;
    FunctionImpl impl;
  };
  const Accessor accessors[] = {
      {"getFullYear", timestamp_field<full_year>},
      {"getMonth", timestamp_field<month0>},
      {"getDayOfYear", timestamp_field<day_of_year>},
      {"getDayOfMonth", timestamp_field<day_of_month0>},
      {"getDate", timestamp_field<day_of_month1>},
      {"getDayOfWeek", timestamp_field<day_of_week>},
      {"getHours", timestamp_field<hours>},
      {"getMinutes", timestamp_field<minutes>},
      {"getSeconds", timestamp_field<seconds>},
      {"getMilliseconds", timestamp_field<milliseconds>},
  };
  for (const auto& acc : accessors) {
    r.add(acc.name, std::string("timestamp_") + acc.name, true, "timestamp -> int", acc.impl);
    r.add(acc.name, std::string("timestamp_") + acc.name + "_with_tz", true,
          "timestamp, string -> int", acc.impl);
  }
  r.add("getHours", "duration_to_hours", true, "duration -> int", duration_hours);
  r.add("getMinutes", "duration_to_minutes", true, "duration -> int", duration_minutes);
  r.add("getSeconds", "duration_to_seconds", true, "duration -> int", duration_seconds);
  r.add("getMilliseconds", "duration_to_milliseconds", true, "duration -> int", duration_milliseconds);

  r.add("optional.of", "optional_of", false, "A -> optional(A)", optional_of);
  r.add("optional.ofNonZeroValue", "optional_ofNonZeroValue", false, "A -> optional(A)", optional_of_non_zero);
  r.add("optional.none", "optional_none", false, " -> optional(dyn)", optional_none);
  r.add("value", "optional_value", true, "optional(A) -> A", optional_value);
  r.add("hasValue", "optional_hasValue", true, "optional(A) -> bool", optional_has_value);
  r.add("or", "optional_or_optional", true, "optional(A), optional(A) -> optional(A)", optional_or);
  r.add("orValue", "optional_orValue_value", true, "optional(A), A -> A", optional_or_value);

  r.add("cel.@mapInsert", "cel_@mapInsert_map_key_value", false, "map(K, V), K, V -> map(K, V)", map_insert_entry);
  r.add("cel.@mapInsert", "cel_@mapInsert_map_map", false, "map(K, V), map(K, V) -> map(K, V)", map_insert_entry);
}

}  // namespace kwatch::cel
