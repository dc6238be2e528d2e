#include "cel/json_value.hpp"

#include <boost/json.hpp>

#include <cmath>
#include <cstring>
#include <new>

#include "base/base64.hpp"
#include "cel/time.hpp"

namespace kwatch::cel {

const boost::json::value* find_member(const boost::json::object& object, std::string_view name) {
  if (object.size() > 16) {
    const auto it = object.find(name);
    return it == object.end() ? nullptr : &it->value();
  }
  const std::size_t size = name.size();
  const char* want = name.data();
  for (const auto& kv : object) {
    const auto key = kv.key();
    if (key.size() != size) continue;
    if (size != 0 && (key[0] != want[0] || key[size - 1] != want[size - 1])) continue;
    if (same_bytes(key.data(), want, size)) return &kv.value();
  }
  return nullptr;
}

Value value_from_json(const boost::json::value& json) {
  switch (json.kind()) {
    case boost::json::kind::null: return Value();
    case boost::json::kind::bool_: return Value::boolean(json.get_bool());
    case boost::json::kind::int64: return Value::int64(json.get_int64());
    case boost::json::kind::uint64: {
      // Beyond int64 a JSON integer cannot be a CEL int; it reads as the nearest double.
      return Value::float64(static_cast<double>(json.get_uint64()));
    }
    case boost::json::kind::double_: return Value::float64(json.get_double());
    case boost::json::kind::string: return Value::string(std::string(json.get_string()));
    case boost::json::kind::array: {
      std::vector<Value> items;
      items.reserve(json.get_array().size());
      for (const auto& e : json.get_array()) items.push_back(value_from_json(e));
      return Value::list(std::move(items));
    }
    case boost::json::kind::object: {
      auto m = std::make_shared<OwnedMap>();
      for (const auto& [k, v] : json.get_object()) {
        m->insert(Value::string(std::string(k)), value_from_json(v));
      }
      return Value::map(std::shared_ptr<const MapValue>(std::move(m)));
    }
  }
  return Value();
}

std::optional<boost::json::value> json_from_value(const Value& v, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<boost::json::value> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  switch (v.kind()) {
    case ValueKind::null: return boost::json::value();
    case ValueKind::boolean: return boost::json::value(v.as_bool());
    case ValueKind::int64: return boost::json::value(v.as_int());
    case ValueKind::uint64: return boost::json::value(v.as_uint());
    case ValueKind::float64:
      if (!std::isfinite(v.as_double())) return fail("a non-finite double has no JSON form");
      return boost::json::value(v.as_double());
    case ValueKind::string: return boost::json::value(boost::json::string(v.as_text()));
    case ValueKind::bytes: return boost::json::value(base::base64_encode(v.as_text()));
    case ValueKind::timestamp: return boost::json::value(format_timestamp(v.as_seconds()));
    case ValueKind::duration: return boost::json::value(format_duration(v.as_seconds()));
    case ValueKind::list: {
      boost::json::array out;
      const ListValue& list = v.as_list();
      out.reserve(list.size());
      for (std::size_t i = 0; i < list.size(); ++i) {
        auto item = json_from_value(list.at(i), error);
        if (!item) return std::nullopt;
        out.push_back(std::move(*item));
      }
      return boost::json::value(std::move(out));
    }
    case ValueKind::map: {
      boost::json::object out;
      const MapValue& map = v.as_map();
      for (std::size_t i = 0; i < map.size(); ++i) {
        const Value key = map.key_at(i);
        if (!key.is(ValueKind::string)) return fail("a map key that is not a string has no JSON form");
        auto item = json_from_value(map.value_at(i), error);
        if (!item) return std::nullopt;
        out[key.as_text()] = std::move(*item);
      }
      return boost::json::value(std::move(out));
    }
    case ValueKind::error: return fail(std::string(v.as_text()));
    default: return fail("a value of type " + std::string(v.type_name()) + " has no JSON form");
  }
}

namespace {

class ArrayView final : public ListValue {
 public:
  ArrayView(const boost::json::array& a, const Type* list, JsonArena& arena)
      : array_(a), list_(list), element_(list != nullptr ? list->params[0].get() : nullptr),
        arena_(arena) {}
  std::size_t size() const override { return array_.size(); }
  // An object element's view is made once, so that every rule that iterates the list (and
  // every iteration of a nested one) finds the fields it already looked up.
  Value at(std::size_t i) const override {
    if (i < kKept && kept_[i] != nullptr) return Value::borrowed_map(kept_[i]);
    Value v = json_view(array_[i], element_, arena_);
    if (i < kKept && v.is(ValueKind::map)) kept_[i] = &v.as_map();
    return v;
  }
  ListSemantics semantics() const override {
    if (list_ == nullptr) return {};
    return {list_->list_kind, &list_->list_keys};
  }

 private:
  static constexpr std::size_t kKept = 16;

  const boost::json::array& array_;
  const Type* list_;
  const Type* element_;
  JsonArena& arena_;
  mutable const MapValue* kept_[kKept] = {};
};

// An object read as a map (additionalProperties, preserve-unknown-fields: `value_type`) or as a
// schema object (`object`: fields by CEL name).
class ObjectView final : public MapValue {
 public:
  ObjectView(const boost::json::object& o, const Type* type, JsonArena& arena)
      : object_(o), type_(type), arena_(arena), backing_{&o, type, &arena} {}

  const JsonBacking* json_backing() const override {
    return type_ != nullptr && type_->kind == TypeKind::object ? &backing_ : nullptr;
  }

  std::size_t size() const override { return object_.size(); }

  std::optional<Value> find(const Value& key) const override {
    if (!key.is(ValueKind::string)) return std::nullopt;
    std::string_view name = key.as_text();
    const Type* member_type = nullptr;
    if (type_ != nullptr && type_->kind == TypeKind::object) {
      const TypePtr field = type_->field(name);
      if (field) {
        member_type = field.get();
        if (auto it = type_->json_names.find(name); it != type_->json_names.end()) {
          name = it->second;
        }
      } else if (!type_->open) {
        return std::nullopt;
      }
    } else if (type_ != nullptr && type_->kind == TypeKind::map) {
      member_type = type_->params[1].get();
    }
    const auto it = object_.find(name);
    if (it == object_.end()) return std::nullopt;
    // A schema object's field set to null is absent, as kube reads it.
    if (it->value().is_null() && type_ != nullptr && type_->kind == TypeKind::object) {
      return std::nullopt;
    }
    return json_view(it->value(), member_type, arena_);
  }

  std::optional<Value> find_field(std::string_view json_name, const Type* type) const override {
    if (type_ == nullptr || type_->kind != TypeKind::object) {
      return find(Value::borrowed_string(json_name));
    }
    const boost::json::value* member = find_member(object_, json_name);
    if (member == nullptr || member->is_null()) return std::nullopt;
    return json_view(*member, type, arena_);
  }

  bool has_field(std::string_view json_name, const Type* type) const override {
    if (type_ == nullptr || type_->kind != TypeKind::object) {
      return find(Value::borrowed_string(json_name)).has_value();
    }
    const boost::json::value* member = find_member(object_, json_name);
    return member != nullptr && !member->is_null();
  }

  Value key_at(std::size_t i) const override {
    return Value::borrowed_string((object_.begin() + static_cast<std::ptrdiff_t>(i))->key());
  }

  Value value_at(std::size_t i) const override {
    const auto& member = *(object_.begin() + static_cast<std::ptrdiff_t>(i));
    const Type* member_type = nullptr;
    if (type_ != nullptr && type_->kind == TypeKind::map) {
      member_type = type_->params[1].get();
    } else if (type_ != nullptr && type_->kind == TypeKind::object) {
      for (const auto& [cel_name, t] : type_->fields) {
        auto j = type_->json_names.find(cel_name);
        if ((j == type_->json_names.end() ? std::string_view(cel_name) : j->second) == member.key()) {
          member_type = t.get();
          break;
        }
      }
    }
    return json_view(member.value(), member_type, arena_);
  }

 private:
  const boost::json::object& object_;
  const Type* type_;
  JsonArena& arena_;
  JsonBacking backing_;
};

Value natural_number(const boost::json::value& json) {
  switch (json.kind()) {
    case boost::json::kind::int64: return Value::int64(json.get_int64());
    case boost::json::kind::uint64: return Value::float64(static_cast<double>(json.get_uint64()));
    default: return Value::float64(json.get_double());
  }
}

}  // namespace

// Views in blocks of 64, allocated as needed and kept across clear(): a validation that makes
// a few views allocates once, and a reused arena not at all.
template <class View>
class ViewPool {
 public:
  template <class... Args>
  const View* make(Args&&... args) {
    // Slots are raw storage: a new block is not zeroed (only what make() builds is written).
    if (used_ == blocks_.size() * kBlock) blocks_.push_back(std::unique_ptr<Block>(new Block));
    Block& block = *blocks_[used_ / kBlock];
    View* v = new (&block.slots[used_ % kBlock]) View(std::forward<Args>(args)...);
    ++used_;
    return v;
  }
  void clear() {
    for (std::size_t i = 0; i < used_; ++i) {
      std::launder(reinterpret_cast<View*>(&blocks_[i / kBlock]->slots[i % kBlock]))->~View();
    }
    used_ = 0;
  }
  ~ViewPool() { clear(); }

 private:
  static constexpr std::size_t kBlock = 64;
  struct Block {
    struct alignas(View) Slot {
      unsigned char bytes[sizeof(View)];
    };
    Slot slots[kBlock];
  };
  std::vector<std::unique_ptr<Block>> blocks_;
  std::size_t used_ = 0;
};

struct JsonArena::Views {
  ViewPool<ArrayView> arrays;
  ViewPool<ObjectView> objects;
};

JsonArena::JsonArena() = default;
JsonArena::~JsonArena() = default;

void JsonArena::clear() {
  if (!views_) return;
  views_->arrays.clear();
  views_->objects.clear();
}

Value json_view(const boost::json::value& json, const Type* type, JsonArena& arena) {
  const TypeKind kind = type == nullptr ? TypeKind::dyn : type->kind;
  switch (json.kind()) {
    case boost::json::kind::null: return Value();
    case boost::json::kind::bool_: return Value::boolean(json.get_bool());
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_:
      if (kind == TypeKind::float64) return Value::float64(json.to_number<double>());
      if (kind == TypeKind::int64 && json.is_double()) {
        const double d = json.get_double();
        if (d == static_cast<double>(static_cast<std::int64_t>(d))) {
          return Value::int64(static_cast<std::int64_t>(d));
        }
      }
      return natural_number(json);
    case boost::json::kind::string: {
      const std::string_view text = json.get_string();
      switch (kind) {
        case TypeKind::timestamp: {
          auto t = parse_timestamp(text);
          if (!t && text.size() == 10) t = parse_timestamp(std::string(text) + "T00:00:00Z");
          if (!t) return Value::error("invalid timestamp: " + std::string(text));
          return Value::timestamp(*t);
        }
        case TypeKind::duration: {
          auto d = parse_duration(text);
          if (!d) return Value::error("invalid duration: " + std::string(text));
          return Value::duration(*d);
        }
        case TypeKind::bytes: {
          auto b = base::base64_decode(text);
          if (!b) return Value::error("invalid base64 bytes");
          return Value::bytes(std::move(*b));
        }
        default: return Value::borrowed_string(text);
      }
    }
    case boost::json::kind::array: {
      const Type* list = type != nullptr && kind == TypeKind::list ? type : nullptr;
      if (!arena.views_) arena.views_ = std::make_unique<JsonArena::Views>();
      return Value::borrowed_list(arena.views_->arrays.make(json.get_array(), list, arena));
    }
    case boost::json::kind::object: return json_view(json.get_object(), type, arena);
  }
  return Value();
}

Value json_view(const boost::json::object& json, const Type* type, JsonArena& arena) {
  const TypeKind kind = type == nullptr ? TypeKind::dyn : type->kind;
  const Type* shape = kind == TypeKind::object || kind == TypeKind::map ? type : nullptr;
  if (!arena.views_) arena.views_ = std::make_unique<JsonArena::Views>();
  return Value::borrowed_map(arena.views_->objects.make(json, shape, arena));
}

}  // namespace kwatch::cel
