#include "apimachinery/cbor.hpp"

#include "apimachinery/stored_json.hpp"
#include "base/base64.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace kwatch::apimachinery {

namespace json = boost::json;

namespace {

constexpr unsigned kUnsigned = 0;
constexpr unsigned kNegative = 1;
constexpr unsigned kByteString = 2;
constexpr unsigned kArray = 4;
constexpr unsigned kMap = 5;
constexpr unsigned kTag = 6;
constexpr std::uint64_t kTagExpectedBase64 = 22;

void append_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// `f` as an IEEE 754 half (binary16) when that keeps its value exactly.
bool as_half(float f, std::uint16_t& half) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000);
  const int biased = static_cast<int>((bits >> 23) & 0xff);
  const std::uint32_t mantissa = bits & 0x7fffff;
  if (biased == 0) {
    // Zero keeps its sign; single-precision subnormals are far below half's smallest.
    if (mantissa != 0) return false;
    half = sign;
    return true;
  }
  if (biased == 0xff) return false;
  const int exponent = biased - 127;
  if (exponent >= -14 && exponent <= 15) {
    if ((mantissa & 0x1fff) != 0) return false;  // more precision than half's 10 bits
    half = static_cast<std::uint16_t>(sign | ((exponent + 15) << 10) | (mantissa >> 13));
    return true;
  }
  if (exponent >= -24 && exponent < -14) {
    // A half subnormal: m * 2^-24 with m in 1..1023.
    const int shift = -exponent - 1;
    const std::uint32_t full = (1u << 23) | mantissa;
    if ((full & ((1u << shift) - 1)) != 0) return false;
    half = static_cast<std::uint16_t>(sign | (full >> shift));
    return true;
  }
  return false;
}

void append_float(std::string& out, double d) {
  const auto single = static_cast<float>(d);
  if (static_cast<double>(single) == d) {
    std::uint16_t half = 0;
    if (as_half(single, half)) {
      out += '\xf9';
      append_be(out, half, 2);
    } else {
      out += '\xfa';
      append_be(out, std::bit_cast<std::uint32_t>(single), 4);
    }
    return;
  }
  out += '\xfb';
  append_be(out, std::bit_cast<std::uint64_t>(d), 8);
}

void append_bytes(std::string& out, std::string_view s) {
  append_cbor_head(out, kByteString, s.size());
  out.append(s);
}

bool append_value(std::string& out, const json::value& v, const CborByteStrings* bytes);

bool append_object(std::string& out, const json::object& o, const CborByteStrings* bytes) {
  append_cbor_head(out, kMap, o.size());
  // Entries in the bytewise order of their encoded keys (a byte string's head holds its length).
  std::vector<const json::key_value_pair*> entries;
  entries.reserve(o.size());
  for (const auto& kv : o) entries.push_back(&kv);
  std::sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
    return cbor_key_less(a->key(), b->key());
  });
  for (const auto* kv : entries) {
    append_bytes(out, kv->key());
    if (!append_value(out, kv->value(), bytes)) return false;
  }
  return true;
}

bool append_value(std::string& out, const json::value& v, const CborByteStrings* bytes) {
  switch (v.kind()) {
    case json::kind::null:
      out += '\xf6';
      return true;
    case json::kind::bool_:
      out += v.get_bool() ? '\xf5' : '\xf4';
      return true;
    case json::kind::int64: {
      const std::int64_t i = v.get_int64();
      if (i >= 0) {
        append_cbor_head(out, kUnsigned, static_cast<std::uint64_t>(i));
      } else {
        append_cbor_head(out, kNegative, ~static_cast<std::uint64_t>(i));  // -1 - i
      }
      return true;
    }
    case json::kind::uint64:
      append_cbor_head(out, kUnsigned, v.get_uint64());
      return true;
    case json::kind::double_:
      append_float(out, v.get_double());
      return true;
    case json::kind::string: {
      const std::string_view s = v.get_string();
      if (bytes != nullptr && bytes->contains(&v)) {
        auto raw = base::base64_decode(s);
        if (!raw) return false;
        append_cbor_head(out, kTag, kTagExpectedBase64);
        append_bytes(out, *raw);
        return true;
      }
      append_bytes(out, s);
      return true;
    }
    case json::kind::array: {
      const auto& a = v.get_array();
      append_cbor_head(out, kArray, a.size());
      for (const auto& e : a) {
        if (!append_value(out, e, bytes)) return false;
      }
      return true;
    }
    case json::kind::object:
      return append_object(out, v.get_object(), bytes);
  }
  return false;
}

}  // namespace

void append_cbor_head(std::string& out, unsigned major, std::uint64_t n) {
  const auto type = static_cast<unsigned char>(major << 5);
  if (n < 24) {
    out += static_cast<char>(type | n);
  } else if (n <= 0xff) {
    out += static_cast<char>(type | 24);
    append_be(out, n, 1);
  } else if (n <= 0xffff) {
    out += static_cast<char>(type | 25);
    append_be(out, n, 2);
  } else if (n <= 0xffffffffULL) {
    out += static_cast<char>(type | 26);
    append_be(out, n, 4);
  } else {
    out += static_cast<char>(type | 27);
    append_be(out, n, 8);
  }
}

bool append_cbor(std::string& out, const json::value& v, const CborByteStrings* bytes) {
  return append_value(out, v, bytes);
}

bool append_cbor(std::string& out, const json::object& o, const CborByteStrings* bytes) {
  return append_object(out, o, bytes);
}

namespace {

constexpr std::size_t kMaxNesting = 64;
constexpr std::uint64_t kMaxElements = 1024;

double half_to_double(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double v = exponent == 0 ? std::ldexp(mantissa, -24)
                           : std::ldexp(mantissa + 1024, exponent - 25);
  if (exponent == 31) v = mantissa == 0 ? INFINITY : NAN;
  return (h & 0x8000) != 0 ? -v : v;
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  // `bytes`: set when the item is a byte string (its parent records where it ends up).
  // `depth`: the arrays, maps and tags around the item.
  bool item(json::value& out, std::size_t depth, bool& bytes) {
    bytes = false;
    std::uint8_t initial = 0;
    if (!byte(initial)) return fail("unexpected end of data");
    const unsigned major = initial >> 5;
    const unsigned info = initial & 0x1f;
    if (major == 7) return simple(info, out);
    if (info == 31) {
      switch (major) {
        case 2:
        case 3:
          bytes = major == 2;
          return indefinite_string(major, out);
        case 4:
          return array(out, depth, std::nullopt);
        case 5:
          return map(out, depth, std::nullopt);
        default:
          return fail("indefinite length for an integer or tag");
      }
    }
    std::uint64_t n = 0;
    if (!argument(info, n)) return false;
    switch (major) {
      case 0:
        if (n > static_cast<std::uint64_t>(INT64_MAX)) return fail("integer overflows int64");
        out = static_cast<std::int64_t>(n);
        return true;
      case 1:
        if (n > static_cast<std::uint64_t>(INT64_MAX)) return fail("integer overflows int64");
        out = -1 - static_cast<std::int64_t>(n);
        return true;
      case 2:
      case 3: {
        std::string text;
        if (!chunk(major, n, text)) return false;
        out = json::string(text);
        bytes = major == 2;
        return true;
      }
      case 4:
        return array(out, depth, n);
      case 5:
        return map(out, depth, n);
      case 6:
        // Tags are read through to their content (55799, 22's bytes, a time's text).
        if (!deeper(depth)) return false;
        return item(out, depth + 1, bytes);
    }
    return fail("malformed item");
  }

  bool done() const { return pos_ == in_.size(); }
  const std::string& error() const { return error_; }
  // The byte strings, once the container holding each is complete (its elements no longer
  // move: a container's value may still move into its parent, its elements' storage does not).
  std::vector<const json::value*> byte_strings;

 private:
  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  bool byte(std::uint8_t& b) {
    if (pos_ >= in_.size()) return false;
    b = static_cast<std::uint8_t>(in_[pos_++]);
    return true;
  }
  bool argument(unsigned info, std::uint64_t& n) {
    if (info < 24) {
      n = info;
      return true;
    }
    int bytes = 0;
    switch (info) {
      case 24: bytes = 1; break;
      case 25: bytes = 2; break;
      case 26: bytes = 4; break;
      case 27: bytes = 8; break;
      default: return fail("reserved additional information");
    }
    if (in_.size() - pos_ < static_cast<std::size_t>(bytes)) return fail("unexpected end of data");
    n = 0;
    for (int i = 0; i < bytes; ++i) n = (n << 8) | static_cast<std::uint8_t>(in_[pos_++]);
    return true;
  }
  bool chunk(unsigned major, std::uint64_t n, std::string& text) {
    if (n > in_.size() - pos_) return fail("unexpected end of data");
    const std::string_view part = in_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    if (major == 3 && !is_valid_utf8(part)) return fail("invalid UTF-8 in a text string");
    text.append(part);
    return true;
  }
  bool indefinite_string(unsigned major, json::value& out) {
    std::string text;
    for (;;) {
      std::uint8_t b = 0;
      if (!byte(b)) return fail("unexpected end of data");
      if (b == 0xff) break;
      std::uint64_t n = 0;
      if ((b >> 5) != major || (b & 0x1f) == 31 || !argument(b & 0x1f, n)) {
        return fail("malformed chunk of an indefinite-length string");
      }
      if (!chunk(major, n, text)) return false;
    }
    out = json::string(text);
    return true;
  }
  bool at_break() {
    if (pos_ < in_.size() && static_cast<std::uint8_t>(in_[pos_]) == 0xff) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool deeper(std::size_t depth) {
    return depth < kMaxNesting || fail("more than 64 levels of nesting");
  }
  bool array(json::value& out, std::size_t depth, std::optional<std::uint64_t> n) {
    if (!deeper(depth)) return false;
    if (n && *n > kMaxElements) return fail("more than 1024 array elements");
    // Each element takes at least a byte: a count past what is left is malformed, and never
    // reserves memory the body does not back.
    if (n && *n > in_.size() - pos_) return fail("unexpected end of data");
    json::array& a = out.emplace_array();
    if (n) a.reserve(static_cast<std::size_t>(*n));
    std::vector<std::size_t> bytes_at;
    for (std::uint64_t i = 0; n ? i < *n : !at_break(); ++i) {
      if (i >= kMaxElements) return fail("more than 1024 array elements");
      bool bytes = false;
      if (!item(a.emplace_back(nullptr), depth + 1, bytes)) return false;
      if (bytes) bytes_at.push_back(a.size() - 1);
    }
    for (const std::size_t i : bytes_at) byte_strings.push_back(&a[i]);
    return true;
  }
  bool map(json::value& out, std::size_t depth, std::optional<std::uint64_t> n) {
    if (!deeper(depth)) return false;
    if (n && *n > kMaxElements) return fail("more than 1024 map pairs");
    if (n && *n > (in_.size() - pos_) / 2) return fail("unexpected end of data");
    json::object& o = out.emplace_object();
    if (n) o.reserve(static_cast<std::size_t>(*n));
    std::vector<std::string> bytes_at;
    for (std::uint64_t i = 0; n ? i < *n : !at_break(); ++i) {
      if (i >= kMaxElements) return fail("more than 1024 map pairs");
      json::value key;
      bool key_bytes = false;
      if (!item(key, depth + 1, key_bytes)) return false;
      if (!key.is_string()) return fail("a map key that is not a string");
      const std::string_view name = key.get_string();
      if (o.contains(name)) return fail("duplicate map key \"" + std::string(name) + "\"");
      bool bytes = false;
      if (!item(o[name], depth + 1, bytes)) return false;
      if (bytes) bytes_at.emplace_back(name);
    }
    for (const auto& name : bytes_at) byte_strings.push_back(&o.at(name));
    return true;
  }
  bool simple(unsigned info, json::value& out) {
    switch (info) {
      case 20: out = false; return true;
      case 21: out = true; return true;
      case 22:
      case 23: out = nullptr; return true;  // null, undefined
      case 25:
      case 26:
      case 27: {
        std::uint64_t bits = 0;
        if (!argument(info, bits)) return false;
        double d = 0;
        if (info == 25) {
          d = half_to_double(static_cast<std::uint16_t>(bits));
        } else if (info == 26) {
          d = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
        } else {
          d = std::bit_cast<double>(bits);
        }
        if (!std::isfinite(d)) return fail("NaN and infinity have no JSON form");
        out = d;
        return true;
      }
      case 31:
        return fail("unexpected break");
      default:
        return fail("simple value " + std::to_string(info) + " has no JSON form");
    }
  }

  std::string_view in_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

json::value parse_cbor(std::string_view body, std::string& error, CborByteStrings* byte_strings) {
  Reader reader(body);
  json::value out;
  bool bytes = false;
  if (!reader.item(out, 0, bytes)) {
    error = reader.error();
    return nullptr;
  }
  if (!reader.done()) {
    error = "data after the first item";
    return nullptr;
  }
  // (A byte string alone is no object: nothing to record where it would move on return.)
  if (byte_strings != nullptr) {
    byte_strings->insert(reader.byte_strings.begin(), reader.byte_strings.end());
  }
  return out;
}

}  // namespace kwatch::apimachinery
