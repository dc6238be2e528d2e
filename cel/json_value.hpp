// JSON documents as CEL values.
//
// value_from_json copies a document into owned values typed as schemaless JSON reads in CEL
// (kube's reading of x-kubernetes-preserve-unknown-fields): integers are int, other numbers
// double, arrays lists, objects maps with string keys.
//
// json_view reads a document in place, as a CRD rule reads the object it validates: no copy of
// the document, strings borrowed, lists and maps as views that convert an element when it is
// read, by the schema's type: `number` is double even when written `1`, int-or-string is int
// or string, a `date-time` string is a timestamp, `duration` a duration, `byte` bytes, and an
// object's fields are found by their CEL names (kube's escaping). The views live in a JsonArena,
// which with the document must outlive every value read from them: one arena per evaluation
// (or per validated object), cleared between uses.
//
// Thread-safety: a JsonArena and the values it backs belong to one thread at a time.
#pragma once

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "cel/types.hpp"
#include "cel/value.hpp"

namespace kwatch::cel {

Value value_from_json(const boost::json::value& json);

// A value as JSON, as kube turns a CEL result into unstructured content: null, bool, numbers
// (uint and int as integers), strings, bytes as base64, timestamps as RFC 3339, durations as Go
// writes them, lists, maps with string keys (message literals are maps). nullopt with `error`
// set for what JSON cannot hold (an optional, a type, a library value, a non-string key, an
// error value, a non-finite double).
std::optional<boost::json::value> json_from_value(const Value& value, std::string* error);

class JsonArena;

// The member `name` of `object`, or null: a scan that compares lengths and first bytes before
// the rest, for the small objects schemas mostly have (larger ones use the object's index).
const boost::json::value* find_member(const boost::json::object& object, std::string_view name);

// Whether two texts of `size` bytes are the same: eight bytes at a time, in line, for the short
// field names and enum values rules compare (a call to memcmp costs more than such a compare).
inline bool same_bytes(const char* a, const char* b, std::size_t size) {
  const auto word = [](const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  };
  const auto half = [](const char* p) {
    std::uint32_t w;
    std::memcpy(&w, p, 4);
    return w;
  };
  if (size >= 8) {
    // Whole words, then the last eight bytes (overlapping the words before).
    for (std::size_t i = 0; i + 8 < size; i += 8) {
      if (word(a + i) != word(b + i)) return false;
    }
    return word(a + size - 8) == word(b + size - 8);
  }
  if (size >= 4) return half(a) == half(b) && half(a + size - 4) == half(b + size - 4);
  for (std::size_t i = 0; i < size; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// What a view of a JSON object read as a schema object stands on: a reader that knows the
// schema may follow fields in the JSON itself and make a Value only of what it ends on
// (json_view of the member, with its field's type, in this arena).
struct JsonBacking {
  const boost::json::object* object;
  const Type* type;  // of kind TypeKind::object
  JsonArena* arena;
};

// The value of `json` read as `type` (null or dyn: as schemaless JSON), backed by `arena`.
Value json_view(const boost::json::value& json, const Type* type, JsonArena& arena);
// The same for an object held as one.
Value json_view(const boost::json::object& json, const Type* type, JsonArena& arena);

class JsonArena {
 public:
  JsonArena();
  ~JsonArena();
  JsonArena(const JsonArena&) = delete;
  JsonArena& operator=(const JsonArena&) = delete;

  // Drops every view made so far (the values backed by them must be gone).
  void clear();

  struct Views;

 private:
  friend Value json_view(const boost::json::value&, const Type*, JsonArena&);
  friend Value json_view(const boost::json::object&, const Type*, JsonArena&);
  std::unique_ptr<Views> views_;
};

}  // namespace kwatch::cel
