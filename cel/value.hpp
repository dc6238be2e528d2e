// CEL's values (cel-spec doc/langdef.md "Values"): null, bool, int, uint, double, string, bytes,
// list, map, type, timestamp, duration, optional, and error.
//
// A Value is small (40 bytes) and cheap to copy: scalars inline, everything else a view plus a
// shared holder. The holder may be empty when the payload is borrowed from something that
// outlives the evaluation (the program's constants, the JSON object a rule validates): a rule
// reads `self.spec.name` without copying the name.
//
// Lists and maps are interfaces so that a JSON array or object can be read in place; owned
// lists and maps (literals, results) are vectors. Thread-safety: a Value and what it points to
// are immutable once made and may be read from any thread, as long as borrowed payloads live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::cel {

enum class ValueKind : std::uint8_t {
  null,
  boolean,
  int64,
  uint64,
  float64,
  string,
  bytes,
  list,
  map,
  type,
  timestamp,
  duration,
  optional,
  opaque,  // a library's own type: net.IP, net.CIDR, kubernetes.Quantity, ...
  error,
};

class ListValue;
class MapValue;
struct JsonBacking;
class OpaqueValue;
struct Type;

// A point in time or a span: seconds and nanoseconds (0 <= nanos < 1e9 for a timestamp; a
// duration's nanos carry its sign).
struct Seconds {
  std::int64_t seconds = 0;
  std::int32_t nanos = 0;
  friend bool operator==(const Seconds&, const Seconds&) = default;
};

class Value {
 public:
  Value() = default;  // null
  // Copies move the payload as two 8-byte words, never as one 16-byte load: a value is most
  // often copied right after a callee wrote it field by field (a pointer and a size), and a
  // 16-byte load of two fresh 8-byte stores cannot be forwarded from the store buffer (a stall
  // of a dozen cycles at every step of an evaluation).
  Value(const Value& o) noexcept : kind_(o.kind_), holder_(o.holder_) { copy_payload(o); }
  Value(Value&& o) noexcept : kind_(o.kind_), holder_(std::move(o.holder_)) { copy_payload(o); }
  Value& operator=(const Value& o) noexcept {
    kind_ = o.kind_;
    copy_payload(o);
    holder_ = o.holder_;
    return *this;
  }
  Value& operator=(Value&& o) noexcept {
    kind_ = o.kind_;
    copy_payload(o);
    holder_ = std::move(o.holder_);
    return *this;
  }
  ~Value() = default;

  static Value boolean(bool v);
  static Value int64(std::int64_t v);
  static Value uint64(std::uint64_t v);
  static Value float64(double v);
  static Value string(std::string v);
  static Value bytes(std::string v);
  // A string or bytes value viewing `text`, which must outlive every copy of the value.
  static Value borrowed_string(std::string_view text);
  static Value borrowed_bytes(std::string_view text);
  static Value list(std::shared_ptr<const ListValue> v);
  static Value list(std::vector<Value> items);
  static Value borrowed_list(const ListValue* v);
  static Value map(std::shared_ptr<const MapValue> v);
  static Value borrowed_map(const MapValue* v);
  // A type value by its name (`int`, `list`, `google.protobuf.Timestamp`); `name` must be a
  // string with static storage.
  static Value type(std::string_view name);
  static Value timestamp(Seconds v);
  static Value duration(Seconds v);
  static Value optional_of(Value v);
  static Value optional_none();
  static Value error(std::string message);
  static Value opaque(std::shared_ptr<const OpaqueValue> v);

  ValueKind kind() const { return kind_; }
  bool is(ValueKind k) const { return kind_ == k; }
  bool is_error() const { return kind_ == ValueKind::error; }

  bool as_bool() const { return u_.b; }
  std::int64_t as_int() const { return u_.i; }
  std::uint64_t as_uint() const { return u_.u; }
  double as_double() const { return u_.d; }
  // string, bytes, a type's name, an error's message.
  std::string_view as_text() const { return {u_.text.data, u_.text.size}; }
  const ListValue& as_list() const { return *u_.list; }
  const MapValue& as_map() const { return *u_.map; }
  const OpaqueValue& as_opaque() const { return *u_.opaque; }
  // The opaque payload as its concrete type, or null when it is another.
  template <class T>
  const T* opaque_as() const {
    return kind_ == ValueKind::opaque ? dynamic_cast<const T*>(u_.opaque) : nullptr;
  }
  Seconds as_seconds() const { return {u_.time.seconds, u_.time.nanos}; }
  // An optional's value; null when it is none.
  const Value* optional_value() const { return u_.optional; }

  // The name of the value's CEL type, as `type(v)` gives it.
  std::string_view type_name() const;

  // Whether the holder is this value's only owner: an owned list a comprehension builds may
  // then grow in place.
  bool uniquely_owned() const { return holder_ && holder_.use_count() == 1; }

  // The same value without a share of its holder: valid while this one lives. A compiled
  // program hands out its constants so, sparing every use a reference count.
  Value borrowed() const {
    Value out;
    out.kind_ = kind_;
    out.copy_payload(*this);
    return out;
  }

 private:
  struct Text {
    const char* data;
    std::size_t size;
  };
  struct Time {
    std::int64_t seconds;
    std::int32_t nanos;
  };
  union Payload {
    bool b;
    std::int64_t i;
    std::uint64_t u;
    double d;
    Text text;
    Time time;
    const ListValue* list;
    const MapValue* map;
    const Value* optional;
    const OpaqueValue* opaque;
  };

  ValueKind kind_ = ValueKind::null;
  Payload u_{.i = 0};
  std::shared_ptr<const void> holder_;

  void copy_payload(const Value& o) noexcept {
    std::uint64_t lo;
    std::uint64_t hi;
    std::memcpy(&lo, &o.u_, 8);
    std::memcpy(&hi, reinterpret_cast<const char*>(&o.u_) + 8, 8);
    asm("" : "+r"(lo), "+r"(hi));  // keep them two general-purpose words
    std::memcpy(&u_, &lo, 8);
    std::memcpy(reinterpret_cast<char*>(&u_) + 8, &hi, 8);
  }

  friend class OwnedList;
};

// How a list compares and joins: in order (the default), as a set (x-kubernetes-list-type: set:
// equal when they hold the same elements, `+` adds only what is missing) or as a map keyed by
// some of its elements' fields (list-type map: equal entry by entry whatever the order, `+`
// replaces the entries of the same keys).
struct ListSemantics {
  enum class Kind : std::uint8_t { ordered, set, map } kind = Kind::ordered;
  const std::vector<std::string>* keys = nullptr;  // map: the key fields
};

class ListValue {
 public:
  virtual ~ListValue() = default;
  virtual std::size_t size() const = 0;
  virtual Value at(std::size_t i) const = 0;
  virtual ListSemantics semantics() const { return {}; }
};

class MapValue {
 public:
  virtual ~MapValue() = default;
  virtual std::size_t size() const = 0;
  // The value under `key`, nullopt when absent. Keys of different numeric types that are equal
  // find each other (`{1: 'a'}[1u]`), as CEL's heterogeneous equality says.
  virtual std::optional<Value> find(const Value& key) const = 0;
  // Keys in iteration order (insertion order for literals, document order for JSON).
  virtual Value key_at(std::size_t i) const = 0;
  virtual Value value_at(std::size_t i) const = 0;
  // A schema object's field by its JSON name, of the checked type `type` (as find() would
  // give it): a program compiled with types selects so, without looking the name up by type.
  virtual std::optional<Value> find_field(std::string_view json_name, const Type* type) const;
  // The JSON object this map reads in place, when it is one read as a schema object
  // (json_value.hpp); null otherwise.
  virtual const JsonBacking* json_backing() const { return nullptr; }
  // Whether find_field would find it, without making its value.
  virtual bool has_field(std::string_view json_name, const Type* type) const {
    return find_field(json_name, type).has_value();
  }
};

// A value of a type a library defines. Values of one type compare by `equals`; `literal` writes
// the expression that makes the value (`ip("10.0.0.1")`).
class OpaqueValue {
 public:
  virtual ~OpaqueValue() = default;
  virtual std::string_view type_name() const = 0;  // static storage
  virtual bool equals(const OpaqueValue& other) const = 0;  // `other` has the same type name
  virtual std::string literal() const = 0;
};

// A list built by the evaluator; mutable only while uniquely owned (see Value::uniquely_owned).
class OwnedList final : public ListValue {
 public:
  OwnedList() = default;
  explicit OwnedList(std::vector<Value> items) : items_(std::move(items)) {}
  std::size_t size() const override { return items_.size(); }
  Value at(std::size_t i) const override { return items_[i]; }
  std::vector<Value>& items() { return items_; }
  const std::vector<Value>& items() const { return items_; }
  // The OwnedList inside a uniquely owned list value, to append to; null otherwise.
  static OwnedList* mutable_from(Value& v);

 private:
  std::vector<Value> items_;
};

// A map built by the evaluator: entries in insertion order, a linear probe for small maps and
// a hash index beyond a few entries.
class OwnedMap final : public MapValue {
 public:
  std::size_t size() const override { return keys_.size(); }
  std::optional<Value> find(const Value& key) const override;
  Value key_at(std::size_t i) const override { return keys_[i]; }
  Value value_at(std::size_t i) const override { return values_[i]; }
  // Adds an entry; false when the key is already present.
  bool insert(Value key, Value value);

 private:
  std::ptrdiff_t index_of(const Value& key) const;
  std::vector<Value> keys_;
  std::vector<Value> values_;
  std::vector<std::uint32_t> index_;  // open addressing over key hashes once size > 8
  void rehash();
};

// CEL equality (`==`): heterogeneous between int, uint and double by numeric value; lists and
// maps element-wise; NaN unequal to itself; values of different types unequal. Errors are the
// caller's concern (never passed here).
bool equal(const Value& a, const Value& b);

// Orders numbers of any of CEL's three numeric types by value: -1, 0, 1, or 2 when unordered
// (a NaN).
int compare_numbers(const Value& a, const Value& b);

// Orders two values CEL can order (numbers of any type, or bool, string, bytes, timestamp,
// duration of the same type): -1, 0, 1; 2 when unordered (a NaN); 3 when not comparable.
int compare(const Value& a, const Value& b);

inline bool is_number(ValueKind k) {
  return k == ValueKind::int64 || k == ValueKind::uint64 || k == ValueKind::float64;
}

// A hash consistent with `equal` for map keys (bool, int, uint, string; int and uint of the
// same number hash alike).
std::size_t key_hash(const Value& key);

// Whether two map-list entries have the same values in their key fields.
bool same_keys(const Value& a, const Value& b, const std::vector<std::string>& keys);

// Whether a value may be a map key: bool, int, uint, string.
bool valid_key(const Value& key);

}  // namespace kwatch::cel
