// API objects in kube-apiserver's CBOR form (RFC 8949): what `application/cbor` answers carry
// (and, one event after another, `application/cbor-seq` watch streams), written from an object's
// JSON as kube's encoder writes the same value. Pure functions; safe from any thread.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>

namespace kwatch::apimachinery {

inline constexpr std::string_view kCborMediaType = "application/cbor";
inline constexpr std::string_view kCborSequenceMediaType = "application/cbor-seq";
// The head of tag 55799 ("self-described CBOR"), which kube writes before every item it encodes
// (an answer, a watch event, the object inside an event).
inline constexpr std::string_view kCborSelfDescribed{"\xd9\xd9\xf7", 3};

// The strings of an object that hold bytes (Go []byte fields, base64 in JSON): written as kube
// writes []byte, the decoded bytes as a byte string in tag 22 ("expected later base64").
using CborByteStrings = std::unordered_set<const boost::json::value*>;

// Appends `v` as kube's encoder writes it: definite lengths; strings and map keys as byte
// strings; map entries in the bytewise order of their encoded keys (RFC 8949 4.2.1); integers
// and lengths in their shortest head; floats in the shortest of half, single and double
// precision that keeps their value. No self-described tag (callers add it where kube does).
// false when a `bytes` string is not base64 (kube's []byte always is).
bool append_cbor(std::string& out, const boost::json::value& v,
                 const CborByteStrings* bytes = nullptr);
// The same for an object, without making it a value first (`bytes` points into `o`).
bool append_cbor(std::string& out, const boost::json::object& o,
                 const CborByteStrings* bytes = nullptr);

// Whether map key `a` comes before `b` in kube's CBOR: the bytewise order of the encoded byte
// strings, so a shorter key first, then keys of equal length in byte order.
inline bool cbor_key_less(std::string_view a, std::string_view b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// A request body in CBOR as the JSON value it holds, read as kube's decoder reads one: one data
// item (the self-described tag and other tags are read through to their content; tag 22's
// bytes are the bytes), definite or indefinite lengths, at most 64 levels of nesting and 1,024
// elements or entries per array or map, map keys text or byte strings without duplicates, text
// strings valid UTF-8, integers that fit int64, floats finite; `undefined` reads as null.
// Byte strings become strings holding their bytes (`byte_strings` then points at each one
// inside an array or map, for a caller that knows which fields are Go []byte and which must be
// text). On failure, why, in `error`; the value is then null.
boost::json::value parse_cbor(std::string_view body, std::string& error,
                              CborByteStrings* byte_strings = nullptr);

// The head of a CBOR data item of major type `major` (0-7) with argument `n`, appended.
void append_cbor_head(std::string& out, unsigned major, std::uint64_t n);

}  // namespace kwatch::apimachinery
