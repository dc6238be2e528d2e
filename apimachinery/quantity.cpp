#include "apimachinery/quantity.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>

namespace kwatch::apimachinery {

namespace {

enum class Format { decimal_exponent, binary_si, decimal_si };

struct Suffix {
  int base = 10;  // 10 or 2
  std::int32_t exponent = 0;
  Format format = Format::decimal_si;
};

// quantitySuffixer.interpret.
std::optional<Suffix> interpret(std::string_view s) {
  static constexpr struct {
    std::string_view text;
    std::int32_t exponent;
  } kDecimal[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"", 0},  {"k", 3},
                  {"M", 6},  {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};
  static constexpr struct {
    std::string_view text;
    std::int32_t exponent;
  } kBinary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  for (const auto& d : kDecimal) {
    if (d.text == s) return Suffix{10, d.exponent, Format::decimal_si};
  }
  for (const auto& b : kBinary) {
    if (b.text == s) return Suffix{2, b.exponent, Format::binary_si};
  }
  if (s.size() > 1 && (s[0] == 'e' || s[0] == 'E')) {
    // strconv.ParseInt(s[1:], 10, 64), then int32() as Go converts (wrapping).
    std::int64_t parsed = 0;
    const char* first = s.data() + 1;
    const char* last = s.data() + s.size();
    if (s[1] == '+') ++first;
    const auto r = std::from_chars(first, last, parsed);
    if (r.ec != std::errc() || r.ptr != last || first == last) return std::nullopt;
    return Suffix{10, static_cast<std::int32_t>(static_cast<std::uint32_t>(parsed)),
                  Format::decimal_exponent};
  }
  return std::nullopt;
}

// parseQuantityString: sign, digits before and after the point (leading zeros of the first
// dropped), the suffix; false when the text is not one.
bool split(std::string_view str, bool& positive, std::string_view& num, std::string_view& denom,
           std::string_view& suffix) {
  positive = true;
  std::size_t pos = 0;
  const std::size_t end = str.size();
  if (pos < end && (str[0] == '-' || str[0] == '+')) {
    positive = str[0] != '-';
    ++pos;
  }
  while (pos < end && str[pos] == '0') ++pos;
  if (pos >= end) {
    num = "0";
    return true;
  }
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = pos;
  while (i < end && digit(str[i])) ++i;
  num = str.substr(pos, i - pos);
  if (i >= end) return true;
  pos = i;
  if (num.empty()) num = "0";
  if (str[pos] == '.') {
    ++pos;
    i = pos;
    while (i < end && digit(str[i])) ++i;
    denom = str.substr(pos, i - pos);
    if (i >= end) return true;
    pos = i;
  }
  const std::size_t suffix_start = pos;
  static constexpr std::string_view kSuffixLetters = "eEinumkKMGTP";
  i = pos;
  while (i < end && kSuffixLetters.find(str[i]) != std::string_view::npos) ++i;
  if (i >= end) {
    suffix = str.substr(suffix_start);
    return true;
  }
  pos = i;
  if (str[pos] == '-' || str[pos] == '+') ++pos;
  for (i = pos; i < end; ++i) {
    if (!digit(str[i])) return false;
  }
  suffix = str.substr(suffix_start);
  return true;
}

// A non-negative decimal: digits (no leading zeros; "0" for zero) times ten to `exponent`.
struct Decimal {
  std::string digits;
  std::int64_t exponent = 0;
  bool zero() const { return digits == "0"; }
};

void trim_leading_zeros(std::string& d) {
  const std::size_t nz = d.find_first_not_of('0');
  d = nz == std::string::npos ? "0" : d.substr(nz);
}

void multiply_small(std::string& d, std::uint32_t factor) {
  std::uint64_t carry = 0;
  for (std::size_t i = d.size(); i-- > 0;) {
    const std::uint64_t v = static_cast<std::uint64_t>(d[i] - '0') * factor + carry;
    d[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  while (carry > 0) {
    d.insert(d.begin(), static_cast<char>('0' + carry % 10));
    carry /= 10;
  }
  trim_leading_zeros(d);
}

// Trailing zeros of the digits moved into the exponent.
void normalize(Decimal& v) {
  if (v.zero()) {
    v.exponent = 0;
    return;
  }
  std::size_t zeros = 0;
  while (zeros < v.digits.size() - 1 && v.digits[v.digits.size() - 1 - zeros] == '0') ++zeros;
  v.digits.resize(v.digits.size() - zeros);
  v.exponent += static_cast<std::int64_t>(zeros);
}

// Rounded away from zero to 10^scale (inf.RoundUp; Quantity.RoundUp).
void round_up_to(Decimal& v, std::int64_t scale) {
  normalize(v);
  if (v.zero() || v.exponent >= scale) return;
  const std::uint64_t drop = static_cast<std::uint64_t>(scale - v.exponent);
  if (drop >= v.digits.size()) {
    v.digits = "1";  // the smallest step up from a nonzero value below it
  } else {
    v.digits.resize(v.digits.size() - drop);  // a dropped digit was nonzero (normalized)
    std::size_t i = v.digits.size();
    while (i > 0 && v.digits[i - 1] == '9') v.digits[--i] = '0';
    if (i == 0) {
      v.digits.insert(v.digits.begin(), '1');
    } else {
      ++v.digits[i - 1];
    }
  }
  v.exponent = scale;
  normalize(v);
}

// The value as an integer when it is one and fits `limit`; nullopt else.
std::optional<std::uint64_t> as_integer(const Decimal& v, std::uint64_t limit) {
  if (v.exponent < 0) return std::nullopt;
  if (v.digits.size() + static_cast<std::uint64_t>(v.exponent) > 20) return std::nullopt;
  std::uint64_t out = 0;
  for (char c : v.digits) {
    if (out > (limit - static_cast<std::uint64_t>(c - '0')) / 10) return std::nullopt;
    out = out * 10 + static_cast<std::uint64_t>(c - '0');
  }
  for (std::int64_t i = 0; i < v.exponent; ++i) {
    if (out > limit / 10) return std::nullopt;
    out *= 10;
  }
  return out;
}

// AsCanonicalBytes: the digits with the exponent a multiple of 3, and the suffix.
std::string decimal_text(Decimal v, Format format, bool positive) {
  normalize(v);
  while (v.exponent % 3 != 0) {
    v.digits.push_back('0');
    --v.exponent;
  }
  std::string out = positive ? "" : "-";
  out += v.digits;
  if (format == Format::decimal_exponent) {
    if (v.exponent != 0) out += "e" + std::to_string(static_cast<std::int32_t>(v.exponent));
    return out;
  }
  static constexpr const char* kSuffixes[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
  if (v.exponent >= -9 && v.exponent <= 18) out += kSuffixes[(v.exponent + 9) / 3];
  // Outside the table Go writes no suffix at all.
  return out;
}


// The exact value of a split quantity (the number's digits, its fraction, its suffix).
Decimal exact_value(std::string_view num, std::string_view denom, const Suffix& suffix) {
  Decimal v{std::string(num) + std::string(denom), 0};
  trim_leading_zeros(v.digits);
  v.exponent = -static_cast<std::int64_t>(denom.size());
  if (suffix.base == 10) {
    v.exponent += suffix.exponent;
  } else {
    for (std::int32_t e = 0; e < suffix.exponent; e += 10) multiply_small(v.digits, 1024);
  }
  return v;
}

// MarshalJSON of a value already at its scale: `format` kept, binary values capped at 2^63-1
// and written in decimal SI when under 1024 or fractional (CanonicalizeBytes).
std::string render(Decimal v, Format format, bool positive) {
  if (v.zero()) return std::string("0");
  if (format == Format::binary_si) {
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const auto whole = as_integer(v, kMax);
    // Capped at 2^63-1: an integer past it, or a fraction whose whole part reaches it.
    bool too_large = !whole && v.exponent >= 0;
    if (v.exponent < 0) {
      const std::int64_t int_digits = static_cast<std::int64_t>(v.digits.size()) + v.exponent;
      if (int_digits > 0) {
        const auto int_part =
            as_integer(Decimal{v.digits.substr(0, static_cast<std::size_t>(int_digits)), 0}, kMax);
        too_large = !int_part || *int_part == kMax;
      }
    }
    if (too_large) return std::string(positive ? "" : "-") + std::to_string(kMax);
    if (!whole || *whole < 1024) return decimal_text(v, Format::decimal_si, positive);
    std::uint64_t amount = *whole;
    int times = 0;
    while (amount % 1024 == 0 && times < 6) {
      amount /= 1024;
      ++times;
    }
    static constexpr const char* kBinary[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    return std::string(positive ? "" : "-") + std::to_string(amount) + kBinary[times];
  }
  return decimal_text(v, format, positive);
}

// A quantity's sign, exact value and format, as Go's Quantity holds them.
struct Value {
  bool positive = true;
  Decimal magnitude;
  Format format = Format::decimal_si;
};

std::optional<Value> value_of(std::string_view text) {
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  Value out;
  std::string_view num, denom, suffix_text;
  if (text == "0") {
    out.magnitude.digits = "0";
    return out;
  }
  if (!split(text, out.positive, num, denom, suffix_text)) return std::nullopt;
  const auto suffix = interpret(suffix_text);
  if (!suffix) return std::nullopt;
  out.magnitude = exact_value(num, denom, *suffix);
  out.format = suffix->format;
  return out;
}

// The most zeros aligning two values for a sum may append: `1e1000000000 + 1m` is refused
// rather than written out.
constexpr std::int64_t kMaxAlignment = 1024;

// Both at the smaller exponent (zeros appended to the other's digits); false when that takes
// more than kMaxAlignment zeros.
bool align(Decimal& a, Decimal& b) {
  normalize(a);
  normalize(b);
  if (a.zero()) a.exponent = b.exponent;
  if (b.zero()) b.exponent = a.exponent;
  const std::int64_t gap = a.exponent > b.exponent ? a.exponent - b.exponent
                                                   : b.exponent - a.exponent;
  if (gap > kMaxAlignment) return false;
  Decimal& higher = a.exponent > b.exponent ? a : b;
  higher.digits.append(static_cast<std::size_t>(gap), '0');
  higher.exponent -= gap;
  trim_leading_zeros(a.digits);
  trim_leading_zeros(b.digits);
  return true;
}

// Magnitudes at one exponent, no leading zeros.
int compare_digits(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

std::string add_digits(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    int d = carry;
    if (i < a.size()) d += a[a.size() - 1 - i] - '0';
    if (i < b.size()) d += b[b.size() - 1 - i] - '0';
    out.push_back(static_cast<char>('0' + d % 10));
    carry = d / 10;
  }
  std::reverse(out.begin(), out.end());
  trim_leading_zeros(out);
  return out;
}

// a - b for a >= b.
std::string subtract_digits(const std::string& a, const std::string& b) {
  std::string out;
  int borrow = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    int d = (a[a.size() - 1 - i] - '0') - borrow;
    if (i < b.size()) d -= b[b.size() - 1 - i] - '0';
    borrow = d < 0 ? 1 : 0;
    out.push_back(static_cast<char>('0' + (d + 10) % 10));
  }
  std::reverse(out.begin(), out.end());
  trim_leading_zeros(out);
  return out;
}

// Magnitudes compared without aligning them: by their count of whole digits, then digit by
// digit (normalized, so neither ends in a zero).
int compare_magnitudes(Decimal a, Decimal b) {
  normalize(a);
  normalize(b);
  if (a.zero() || b.zero()) return a.zero() == b.zero() ? 0 : (a.zero() ? -1 : 1);
  const std::int64_t wa = static_cast<std::int64_t>(a.digits.size()) + a.exponent;
  const std::int64_t wb = static_cast<std::int64_t>(b.digits.size()) + b.exponent;
  if (wa != wb) return wa < wb ? -1 : 1;
  const int c = a.digits.compare(b.digits);  // equal leading positions: lexical order
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

int compare(const Value& a, const Value& b) {
  const int sa = a.magnitude.zero() ? 0 : (a.positive ? 1 : -1);
  const int sb = b.magnitude.zero() ? 0 : (b.positive ? 1 : -1);
  if (sa != sb) return sa < sb ? -1 : 1;
  const int m = compare_magnitudes(a.magnitude, b.magnitude);
  return sa >= 0 ? m : -m;
}

}  // namespace

std::optional<std::string> canonical_quantity(std::string_view text, std::string& error,
                                              int scale_limit) {
  // UnmarshalJSON trims spaces; ParseQuantity refuses an empty text.
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  if (text.empty()) {
    error = std::string(kQuantityFormatError);
    return std::nullopt;
  }
  if (text == "0") return std::string("0");
  bool positive = true;
  std::string_view num, denom, suffix_text;
  if (!split(text, positive, num, denom, suffix_text)) {
    error = std::string(kQuantityFormatError);
    return std::nullopt;
  }
  const auto suffix = interpret(suffix_text);
  if (!suffix) {
    error = "unable to parse quantity's suffix";
    return std::nullopt;
  }
  const std::string shifted = std::string(num) + std::string(denom);
  // Go's fast path keeps a text that is already canonical as it was written.
  {
    std::int64_t precision = 0;
    std::int64_t scale = 0;
    std::int64_t mantissa_shift = 0;
    if (suffix->format != Format::binary_si) {
      scale = suffix->exponent;
      precision = 18 - static_cast<std::int64_t>(shifted.size());
    } else if (suffix->exponent >= 0 && denom.empty()) {
      mantissa_shift = suffix->exponent;
      precision = 15 - static_cast<std::int64_t>(num.size()) -
                  static_cast<std::int64_t>(static_cast<float>(suffix->exponent) * 3 / 10) - 1;
    } else {
      precision = -1;
    }
    if (precision >= 0) {
      scale -= static_cast<std::int64_t>(denom.size());
      if (scale >= -9) {
        std::int64_t value = 0;
        const auto r = std::from_chars(shifted.data(), shifted.data() + shifted.size(), value);
        const bool fits = r.ec == std::errc() && r.ptr == shifted.data() + shifted.size() &&
                          (mantissa_shift == 0 ||
                           value <= (std::numeric_limits<std::int64_t>::max() >> mantissa_shift));
        if (fits) {
          const bool canonical =
              suffix->format == Format::binary_si
                  ? suffix->exponent % 10 == 0 && (value & 0x07) != 0
                  : scale % 3 == 0 && !shifted.ends_with("000") && shifted[0] != '0';
          // RoundUp keeps the text of an amount already at the scale it rounds to.
          if (canonical && scale >= scale_limit) return std::string(text);
        }
      }
    }
  }
  Decimal v = exact_value(num, denom, *suffix);
  round_up_to(v, scale_limit);
  return render(std::move(v), suffix->format, positive);
}


std::optional<std::string> add_quantities(std::string_view a, std::string_view b) {
  auto x = value_of(a);
  auto y = value_of(b);
  if (!x || !y || !align(x->magnitude, y->magnitude)) return std::nullopt;
  Decimal sum{"0", x->magnitude.exponent};
  bool positive = true;
  if (x->positive == y->positive || y->magnitude.zero() || x->magnitude.zero()) {
    positive = x->magnitude.zero() ? y->positive : x->positive;
    sum.digits = add_digits(x->magnitude.digits, y->magnitude.digits);
  } else if (compare_digits(x->magnitude.digits, y->magnitude.digits) >= 0) {
    positive = x->positive;
    sum.digits = subtract_digits(x->magnitude.digits, y->magnitude.digits);
  } else {
    positive = y->positive;
    sum.digits = subtract_digits(y->magnitude.digits, x->magnitude.digits);
  }
  round_up_to(sum, -9);
  return render(std::move(sum), x->format, positive);
}

std::optional<int> compare_quantities(std::string_view a, std::string_view b) {
  auto x = value_of(a);
  auto y = value_of(b);
  if (!x || !y) return std::nullopt;
  return compare(*x, *y);
}

}  // namespace kwatch::apimachinery
