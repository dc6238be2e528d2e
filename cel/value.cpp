#include "cel/value.hpp"

#include <cmath>
#include <functional>

namespace kwatch::cel {

Value Value::boolean(bool v) {
  Value out;
  out.kind_ = ValueKind::boolean;
  out.u_.b = v;
  return out;
}

Value Value::int64(std::int64_t v) {
  Value out;
  out.kind_ = ValueKind::int64;
  out.u_.i = v;
  return out;
}

Value Value::uint64(std::uint64_t v) {
  Value out;
  out.kind_ = ValueKind::uint64;
  out.u_.u = v;
  return out;
}

Value Value::float64(double v) {
  Value out;
  out.kind_ = ValueKind::float64;
  out.u_.d = v;
  return out;
}

Value Value::string(std::string v) {
  auto owned = std::make_shared<const std::string>(std::move(v));
  Value out;
  out.kind_ = ValueKind::string;
  out.u_.text = {owned->data(), owned->size()};
  out.holder_ = std::move(owned);
  return out;
}

Value Value::bytes(std::string v) {
  Value out = string(std::move(v));
  out.kind_ = ValueKind::bytes;
  return out;
}

Value Value::borrowed_string(std::string_view text) {
  Value out;
  out.kind_ = ValueKind::string;
  out.u_.text = {text.data(), text.size()};
  return out;
}

Value Value::borrowed_bytes(std::string_view text) {
  Value out = borrowed_string(text);
  out.kind_ = ValueKind::bytes;
  return out;
}

Value Value::list(std::shared_ptr<const ListValue> v) {
  Value out;
  out.kind_ = ValueKind::list;
  out.u_.list = v.get();
  out.holder_ = std::move(v);
  return out;
}

Value Value::list(std::vector<Value> items) {
  return list(std::make_shared<const OwnedList>(std::move(items)));
}

Value Value::borrowed_list(const ListValue* v) {
  Value out;
  out.kind_ = ValueKind::list;
  out.u_.list = v;
  return out;
}

Value Value::map(std::shared_ptr<const MapValue> v) {
  Value out;
  out.kind_ = ValueKind::map;
  out.u_.map = v.get();
  out.holder_ = std::move(v);
  return out;
}

Value Value::borrowed_map(const MapValue* v) {
  Value out;
  out.kind_ = ValueKind::map;
  out.u_.map = v;
  return out;
}

Value Value::type(std::string_view name) {
  Value out;
  out.kind_ = ValueKind::type;
  out.u_.text = {name.data(), name.size()};
  return out;
}

Value Value::timestamp(Seconds v) {
  Value out;
  out.kind_ = ValueKind::timestamp;
  out.u_.time = {v.seconds, v.nanos};
  return out;
}

Value Value::duration(Seconds v) {
  Value out = timestamp(v);
  out.kind_ = ValueKind::duration;
  return out;
}

Value Value::optional_of(Value v) {
  auto owned = std::make_shared<const Value>(std::move(v));
  Value out;
  out.kind_ = ValueKind::optional;
  out.u_.optional = owned.get();
  out.holder_ = std::move(owned);
  return out;
}

Value Value::optional_none() {
  Value out;
  out.kind_ = ValueKind::optional;
  out.u_.optional = nullptr;
  return out;
}

Value Value::error(std::string message) {
  Value out = string(std::move(message));
  out.kind_ = ValueKind::error;
  return out;
}

Value Value::opaque(std::shared_ptr<const OpaqueValue> v) {
  Value out;
  out.kind_ = ValueKind::opaque;
  out.u_.opaque = v.get();
  out.holder_ = std::move(v);
  return out;
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case ValueKind::null: return "null_type";
    case ValueKind::boolean: return "bool";
    case ValueKind::int64: return "int";
    case ValueKind::uint64: return "uint";
    case ValueKind::float64: return "double";
    case ValueKind::string: return "string";
    case ValueKind::bytes: return "bytes";
    case ValueKind::list: return "list";
    case ValueKind::map: return "map";
    case ValueKind::type: return "type";
    case ValueKind::timestamp: return "google.protobuf.Timestamp";
    case ValueKind::duration: return "google.protobuf.Duration";
    case ValueKind::optional: return "optional_type";
    case ValueKind::opaque: return u_.opaque->type_name();
    case ValueKind::error: return "error";
  }
  return "error";
}

OwnedList* OwnedList::mutable_from(Value& v) {
  if (v.kind_ != ValueKind::list || !v.uniquely_owned()) return nullptr;
  auto* list = dynamic_cast<const OwnedList*>(v.u_.list);
  return const_cast<OwnedList*>(list);
}

namespace {

// A double that is a whole number within int64's range, as that integer.
std::optional<std::int64_t> whole_int(double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return std::nullopt;
  const auto i = static_cast<std::int64_t>(d);
  if (static_cast<double>(i) != d) return std::nullopt;
  return i;
}

}  // namespace

int compare_numbers(const Value& a, const Value& b) {
  const auto sign = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  const ValueKind ka = a.kind(), kb = b.kind();
  if (ka == kb) {
    if (ka == ValueKind::int64) return sign(a.as_int(), b.as_int());
    if (ka == ValueKind::uint64) return sign(a.as_uint(), b.as_uint());
    const double x = a.as_double(), y = b.as_double();
    if (std::isnan(x) || std::isnan(y)) return 2;
    return sign(x, y);
  }
  if (ka == ValueKind::int64 && kb == ValueKind::uint64) {
    if (a.as_int() < 0) return -1;
    return sign(static_cast<std::uint64_t>(a.as_int()), b.as_uint());
  }
  if (ka == ValueKind::uint64 && kb == ValueKind::int64) return -compare_numbers(b, a);
  // One side is a double.
  if (ka == ValueKind::float64) {
    const int r = compare_numbers(b, a);
    return r == 2 ? 2 : -r;
  }
  // An int or uint against a double compares as doubles (as cel-go does: lossy near 2^63),
  // after the double is known to lie within the integer type's range.
  const double y = b.as_double();
  if (std::isnan(y)) return 2;
  if (ka == ValueKind::int64) {
    if (y < -9223372036854775808.0) return 1;
    if (y > 9223372036854775807.0) return -1;
    return sign(static_cast<double>(a.as_int()), y);
  }
  if (y < 0) return 1;
  if (y > 18446744073709551615.0) return -1;
  return sign(static_cast<double>(a.as_uint()), y);
}


int compare(const Value& a, const Value& b) {
  const ValueKind ka = a.kind(), kb = b.kind();
  if (is_number(ka) && is_number(kb)) return compare_numbers(a, b);
  if (ka != kb) return 3;
  const auto sign = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  switch (ka) {
    case ValueKind::boolean: return sign(a.as_bool(), b.as_bool());
    case ValueKind::string:
    case ValueKind::bytes: {
      const int r = a.as_text().compare(b.as_text());
      return r < 0 ? -1 : (r > 0 ? 1 : 0);
    }
    case ValueKind::timestamp:
    case ValueKind::duration: {
      const Seconds x = a.as_seconds(), y = b.as_seconds();
      return x.seconds != y.seconds ? sign(x.seconds, y.seconds) : sign(x.nanos, y.nanos);
    }
    default: return 3;
  }
}

bool equal(const Value& a, const Value& b) {
  const ValueKind ka = a.kind(), kb = b.kind();
  if (is_number(ka) && is_number(kb)) return compare_numbers(a, b) == 0;
  if (ka != kb) return false;
  switch (ka) {
    case ValueKind::null: return true;
    case ValueKind::boolean: return a.as_bool() == b.as_bool();
    case ValueKind::string:
    case ValueKind::bytes:
    case ValueKind::type:
    case ValueKind::error: return a.as_text() == b.as_text();
    case ValueKind::timestamp:
    case ValueKind::duration: return a.as_seconds() == b.as_seconds();
    case ValueKind::opaque:
      return a.as_opaque().type_name() == b.as_opaque().type_name() &&
             a.as_opaque().equals(b.as_opaque());
    case ValueKind::optional: {
      const Value* x = a.optional_value();
      const Value* y = b.optional_value();
      if (x == nullptr || y == nullptr) return x == y;
      return equal(*x, *y);
    }
    case ValueKind::list: {
      const ListValue& x = a.as_list();
      const ListValue& y = b.as_list();
      if (x.size() != y.size()) return false;
      // The left list's semantics decide, as the left value's Equal does in kube.
      const ListSemantics s = x.semantics();
      if (s.kind == ListSemantics::Kind::ordered) {
        for (std::size_t i = 0; i < x.size(); ++i) {
          if (!equal(x.at(i), y.at(i))) return false;
        }
        return true;
      }
      for (std::size_t j = 0; j < y.size(); ++j) {
        const Value e = y.at(j);
        bool found = false;
        for (std::size_t i = 0; i < x.size() && !found; ++i) {
          const Value d = x.at(i);
          found = s.kind == ListSemantics::Kind::set ? equal(d, e)
                                                      : same_keys(d, e, *s.keys) && equal(d, e);
        }
        if (!found) return false;
      }
      return true;
    }
    case ValueKind::map: {
      const MapValue& x = a.as_map();
      const MapValue& y = b.as_map();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        auto other = y.find(x.key_at(i));
        if (!other || !equal(x.value_at(i), *other)) return false;
      }
      return true;
    }
    default: return false;
  }
}

bool same_keys(const Value& a, const Value& b, const std::vector<std::string>& keys) {
  if (!a.is(ValueKind::map) || !b.is(ValueKind::map)) return false;
  for (const auto& k : keys) {
    const Value name = Value::borrowed_string(k);
    auto x = a.as_map().find(name);
    auto y = b.as_map().find(name);
    if (x.has_value() != y.has_value() || (x && !equal(*x, *y))) return false;
  }
  return true;
}

bool valid_key(const Value& key) {
  switch (key.kind()) {
    case ValueKind::boolean:
    case ValueKind::int64:
    case ValueKind::uint64:
    case ValueKind::string: return true;
    default: return false;
  }
}

std::size_t key_hash(const Value& key) {
  switch (key.kind()) {
    case ValueKind::boolean: return key.as_bool() ? 0x9e3779b9u : 0x7f4a7c15u;
    case ValueKind::int64: return std::hash<std::int64_t>{}(key.as_int());
    case ValueKind::uint64:
      if (key.as_uint() <= static_cast<std::uint64_t>(INT64_MAX)) {
        return std::hash<std::int64_t>{}(static_cast<std::int64_t>(key.as_uint()));
      }
      return std::hash<std::uint64_t>{}(key.as_uint());
    case ValueKind::float64:
      if (auto i = whole_int(key.as_double())) return std::hash<std::int64_t>{}(*i);
      return std::hash<double>{}(key.as_double());
    case ValueKind::string: return std::hash<std::string_view>{}(key.as_text());
    default: return 0;
  }
}

std::optional<Value> MapValue::find_field(std::string_view json_name, const Type*) const {
  return find(Value::borrowed_string(json_name));
}

std::ptrdiff_t OwnedMap::index_of(const Value& key) const {
  if (index_.empty()) {
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      if (equal(keys_[i], key)) return static_cast<std::ptrdiff_t>(i);
    }
    return -1;
  }
  const std::size_t mask = index_.size() - 1;
  for (std::size_t slot = key_hash(key) & mask;; slot = (slot + 1) & mask) {
    const std::uint32_t at = index_[slot];
    if (at == 0) return -1;
    if (equal(keys_[at - 1], key)) return static_cast<std::ptrdiff_t>(at - 1);
  }
}

std::optional<Value> OwnedMap::find(const Value& key) const {
  const auto at = index_of(key);
  if (at < 0) return std::nullopt;
  return values_[static_cast<std::size_t>(at)];
}

void OwnedMap::rehash() {
  std::size_t capacity = 16;
  while (capacity < keys_.size() * 2) capacity *= 2;
  index_.assign(capacity, 0);
  const std::size_t mask = capacity - 1;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    std::size_t slot = key_hash(keys_[i]) & mask;
    while (index_[slot] != 0) slot = (slot + 1) & mask;
    index_[slot] = static_cast<std::uint32_t>(i + 1);
  }
}

bool OwnedMap::insert(Value key, Value value) {
  if (index_of(key) >= 0) return false;
  keys_.push_back(std::move(key));
  values_.push_back(std::move(value));
  if (keys_.size() > 8 && (index_.empty() || keys_.size() * 2 > index_.size())) {
    rehash();
  } else if (!index_.empty()) {
    const std::size_t mask = index_.size() - 1;
    std::size_t slot = key_hash(keys_.back()) & mask;
    while (index_[slot] != 0) slot = (slot + 1) & mask;
    index_[slot] = static_cast<std::uint32_t>(keys_.size());
  }
  return true;
}

}  // namespace kwatch::cel
