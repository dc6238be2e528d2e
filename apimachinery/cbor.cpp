#include "apimachinery/cbor.hpp"

#include "base/base64.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
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
    case json::kind::object: {
      const auto& o = v.get_object();
      append_cbor_head(out, kMap, o.size());
      // Entries in the bytewise order of their encoded keys (a byte string's head holds its
      // length).
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

}  // namespace kwatch::apimachinery
