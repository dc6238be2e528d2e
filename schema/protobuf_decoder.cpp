#include "schema/protobuf_decoder.hpp"

#include "base/timestamps.hpp"

#include "base/base64.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>

#include <cstdint>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kwatch::schema {

using apimachinery::ApiError;
using apimachinery::ApiResult;
using apimachinery::int_member;
using apimachinery::object_member;
using apimachinery::string_member;
using base::Errc;

namespace detail {
extern const std::string_view kProtobufSchemaJson;  // protobuf_schema_data.cpp (generated)
}

namespace json = boost::json;

namespace {

enum class Kind {
  string,
  bytes,          // base64 in JSON
  int64,
  int32,
  boolean,
  message,
  time,           // metav1.Time: {seconds=1, nanos=2} -> RFC 3339
  micro_time,     // metav1.MicroTime: RFC 3339 with microseconds
  quantity,       // resource.Quantity: {string=1} -> "100m"
  int_or_string,  // {type=1, intVal=2, strVal=3}
  raw_json,       // runtime.RawExtension, metav1.FieldsV1: {raw=1} holding JSON
  string_list,    // ExtraValue: {items=1 repeated} -> a JSON array
  map,            // map<string, value>: entries {key=1, value=2}
};

struct Message;

struct Field {
  int number = 0;
  std::string name;
  Kind kind = Kind::string;
  bool repeated = false;
  // Go pointers and JSON fields without omitempty: a zero on the wire was set on purpose and is
  // kept. Other scalars are written by the generated code even when empty and are dropped when
  // zero, as JSON's omitempty would.
  bool keep_zero = false;
  // An embedded struct JSON writes inline (a Volume's VolumeSource): its fields become the
  // parent's.
  bool inline_fields = false;
  // JSON's omitempty: Go leaves the field out when it is a zero scalar that is no pointer, an
  // empty map or list, or a nil pointer.
  bool omit_empty = false;
  // JSON writes the field of a decoded object even when the body left it out: a struct that is
  // no pointer (omitempty keeps structs) or a scalar without omitempty.
  bool written_when_zero = false;
  const Message* message = nullptr;  // a message field's, or a map's message values
  Kind map_value = Kind::string;     // a map's values
};

struct Message {
  std::string name;
  std::vector<Field> fields;
  // A kind's message: its Go type embeds TypeMeta, which JSON writes (apiVersion, kind) and
  // protobuf does not, wherever the object is (a StatefulSet's volumeClaimTemplates hold
  // PersistentVolumeClaims with theirs).
  bool type_meta = false;
  // The fields in number order, as the encoder writes them (set once the schema is loaded).
  std::vector<const Field*> by_number;

  const Field* find(int number) const {
    for (const auto& f : fields) {
      if (f.number == number) return &f;
    }
    return nullptr;
  }
};

std::optional<Kind> kind_named(std::string_view name) {
  static const std::pair<std::string_view, Kind> kKinds[] = {
      {"string", Kind::string},         {"bytes", Kind::bytes},
      {"int64", Kind::int64},           {"int32", Kind::int32},
      {"boolean", Kind::boolean},       {"message", Kind::message},
      {"time", Kind::time},             {"micro_time", Kind::micro_time},
      {"quantity", Kind::quantity},     {"int_or_string", Kind::int_or_string},
      {"raw_json", Kind::raw_json},     {"string_list", Kind::string_list},
      {"map", Kind::map}};
  for (const auto& [n, k] : kKinds) {
    if (n == name) return k;
  }
  return std::nullopt;
}

// The messages of every built-in kind, from schema/schemas/protobuf.json (generated from the
// Kubernetes types' protobuf tags by scripts/gen_protobuf_schema.py: the wire contract).
class Schema {
 public:
  Schema() {
    const json::object doc = json::parse(detail::kProtobufSchemaJson).as_object();
    const json::object& messages = doc.at("messages").as_object();
    for (const auto& [name, fields] : messages) messages_[std::string(name)].name = name;
    for (const auto& [name, fields] : messages) {
      Message& m = messages_.at(std::string(name));
      for (const auto& row : fields.as_array()) {
        const json::array& r = row.as_array();
        Field f;
        f.number = static_cast<int>(r.at(0).as_int64());
        f.name = r.at(1).as_string();
        const auto kind = kind_named(r.at(2).as_string());
        const auto flags = r.at(3).as_int64();
        const std::string_view ref = r.at(4).as_string();
        if (!kind) throw std::runtime_error("protobuf.json: unknown kind in " + m.name);
        f.kind = *kind;
        f.repeated = (flags & 1) != 0;
        f.keep_zero = (flags & 2) != 0;
        f.inline_fields = (flags & 4) != 0;
        f.omit_empty = (flags & 8) != 0;
        f.written_when_zero = (flags & 16) != 0;
        if (f.kind == Kind::message || (f.kind == Kind::map && !kind_named(ref))) {
          f.message = &messages_.at(std::string(ref));
          if (f.kind == Kind::map) f.map_value = Kind::message;
        } else if (f.kind == Kind::map) {
          f.map_value = *kind_named(ref);
        }
        m.fields.push_back(std::move(f));
      }
    }
    for (auto& [name, m] : messages_) {
      for (const Field& f : m.fields) m.by_number.push_back(&f);
      std::sort(m.by_number.begin(), m.by_number.end(),
                [](const Field* a, const Field* b) { return a->number < b->number; });
    }
    for (const auto& [key, message] : doc.at("kinds").as_object()) {
      Message& m = messages_.at(std::string(message.as_string()));
      m.type_meta = true;
      kinds_[std::string(key)] = &m;
    }
  }

  // The message of `kind` as sent with `api_version`; DeleteOptions come with any.
  const Message* by_kind(std::string_view api_version, std::string_view kind) const {
    std::string key = std::string(api_version) + "/" + std::string(kind);
    if (auto it = kinds_.find(key); it != kinds_.end()) return it->second;
    if (auto it = kinds_.find("*/" + std::string(kind)); it != kinds_.end()) return it->second;
    return nullptr;
  }

 private:
  std::map<std::string, Message, std::less<>> messages_;  // stable addresses
  std::map<std::string, const Message*, std::less<>> kinds_;
};

const Schema& schema() {
  static const Schema s;
  return s;
}

ApiError unsupported(std::string message) {
  return ApiError(Errc::unsupported_media_type, std::move(message));
}

ApiError malformed() {
  return ApiError(Errc::bad_request, "the protobuf body of the request is malformed");
}

// A cursor over protobuf wire data.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }

  bool varint(std::uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      auto byte = static_cast<std::uint8_t>(data_[pos_++]);
      out |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  bool bytes(std::string_view& out) {
    std::uint64_t len = 0;
    if (!varint(len) || len > data_.size() - pos_) return false;
    out = data_.substr(pos_, len);
    pos_ += len;
    return true;
  }

  bool skip(int wire_type) {
    std::uint64_t v = 0;
    std::string_view b;
    switch (wire_type) {
      case 0: return varint(v);
      case 1: return advance(8);
      case 2: return bytes(b);
      case 5: return advance(4);
      default: return false;
    }
  }

 private:
  bool advance(std::size_t n) {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }

  std::string_view data_;
  std::size_t pos_ = 0;
};

// Reads the string fields 1 and 2 of a map entry (or any two-string message).
ApiResult<std::pair<std::string_view, std::string_view>> map_entry(std::string_view data) {
  Reader r(data);
  std::pair<std::string_view, std::string_view> kv;
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const int number = static_cast<int>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    if ((number == 1 || number == 2) && wire == 2) {
      if (!r.bytes(number == 1 ? kv.first : kv.second)) return malformed();
    } else if (!r.skip(wire)) {
      return malformed();
    }
  }
  return kv;
}

// metav1.Time (whole seconds) or MicroTime (`micro`: six fractional digits), in UTC.
ApiResult<json::value> decode_time(std::string_view data, bool micro = false) {
  Reader r(data);
  std::int64_t seconds = 0;
  std::int64_t nanos = 0;
  while (!r.done()) {
    std::uint64_t tag = 0, v = 0;
    if (!r.varint(tag)) return malformed();
    if (((tag >> 3) == 1 || (tag >> 3) == 2) && (tag & 7) == 0) {
      if (!r.varint(v)) return malformed();
      ((tag >> 3) == 1 ? seconds : nanos) = static_cast<std::int64_t>(v);
    } else if (!r.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  if (seconds == 0 && nanos == 0) return json::value(nullptr);  // Go's zero Time, JSON null
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (micro) {
    std::snprintf(buf + n, sizeof buf - n, ".%06dZ",
                  static_cast<int>((nanos % 1000000000 + 1000000000) % 1000000000 / 1000));
  } else {
    std::snprintf(buf + n, sizeof buf - n, "Z");
  }
  return json::value(buf);
}

// runtime.RawExtension and metav1.FieldsV1: bytes field 1 holds the JSON.
ApiResult<json::value> decode_raw_json(std::string_view data) {
  Reader r(data);
  std::string_view raw;
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    if ((tag >> 3) == 1 && (tag & 7) == 2) {
      if (!r.bytes(raw)) return malformed();
    } else if (!r.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  if (raw.empty()) return json::value(nullptr);
  boost::system::error_code ec;
  json::value v = json::parse(raw, ec);
  if (ec) {
    return unsupported("kwatch cannot decode an embedded object that is not JSON in a protobuf "
                       "request body; send the object as JSON instead");
  }
  return v;
}

// ExtraValue: repeated string field 1, a JSON array of strings.
ApiResult<json::value> decode_string_list(std::string_view data) {
  Reader r(data);
  json::array out;
  while (!r.done()) {
    std::uint64_t tag = 0;
    std::string_view item;
    if (!r.varint(tag)) return malformed();
    if ((tag >> 3) == 1 && (tag & 7) == 2) {
      if (!r.bytes(item)) return malformed();
      out.emplace_back(item);
    } else if (!r.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  return json::value(std::move(out));
}

ApiResult<json::value> decode_int_or_string(std::string_view data) {
  Reader r(data);
  std::uint64_t type = 0, int_val = 0;
  std::string_view str_val;
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const auto number = tag >> 3;
    if (number == 1 && (tag & 7) == 0) {
      if (!r.varint(type)) return malformed();
    } else if (number == 2 && (tag & 7) == 0) {
      if (!r.varint(int_val)) return malformed();
    } else if (number == 3 && (tag & 7) == 2) {
      if (!r.bytes(str_val)) return malformed();
    } else if (!r.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  if (type == 1) return json::value(std::string(str_val));
  return json::value(static_cast<std::int32_t>(int_val));
}

ApiResult<json::object> decode_message(std::string_view data, const Message& message, int depth);

bool is_zero(const json::value& v) {
  return v.is_null() || (v.is_string() && v.get_string().empty()) || (v.is_bool() && !v.get_bool()) ||
         (v.is_int64() && v.get_int64() == 0);
}

// Consumes a field this decoder does not know if its value is the zero value (an empty string
// or message, a 0 varint), which Go's generated code writes for unset fields.
bool zero_value(Reader& r, int wire) {
  Reader probe = r;
  std::uint64_t v = 0;
  std::string_view b;
  if (wire == 0 && probe.varint(v) && v == 0) {
    r = probe;
    return true;
  }
  if (wire == 2 && probe.bytes(b) && b.empty()) {
    r = probe;
    return true;
  }
  return false;
}

ApiResult<json::value> decode_scalar(Reader& r, int wire, const Field& f, int depth) {
  std::uint64_t v = 0;
  std::string_view b;
  auto need = [&](int expected) { return wire == expected; };
  switch (f.kind) {
    case Kind::string:
      if (!need(2) || !r.bytes(b)) return malformed();
      return json::value(std::string(b));
    case Kind::bytes:
      if (!need(2) || !r.bytes(b)) return malformed();
      return json::value(base::base64_encode(b));
    case Kind::int64:
      if (!need(0) || !r.varint(v)) return malformed();
      return json::value(static_cast<std::int64_t>(v));
    case Kind::int32:
      if (!need(0) || !r.varint(v)) return malformed();
      return json::value(static_cast<std::int32_t>(v));
    case Kind::boolean:
      if (!need(0) || !r.varint(v)) return malformed();
      return json::value(v != 0);
    case Kind::message: {
      if (!need(2) || !r.bytes(b)) return malformed();
      auto m = decode_message(b, *f.message, depth + 1);
      if (!m) return m.error();
      return json::value(std::move(*m));
    }
    case Kind::time:
    case Kind::micro_time:
      if (!need(2) || !r.bytes(b)) return malformed();
      return decode_time(b, f.kind == Kind::micro_time);
    case Kind::raw_json:
      if (!need(2) || !r.bytes(b)) return malformed();
      return decode_raw_json(b);
    case Kind::string_list:
      if (!need(2) || !r.bytes(b)) return malformed();
      return decode_string_list(b);
    case Kind::quantity: {
      if (!need(2) || !r.bytes(b)) return malformed();
      auto kv = map_entry(b);
      if (!kv) return kv.error();
      return json::value(std::string(kv->first));
    }
    case Kind::int_or_string:
      if (!need(2) || !r.bytes(b)) return malformed();
      return decode_int_or_string(b);
    default:
      return malformed();
  }
}

// One entry of a map field: key (field 1, a string) and value (field 2) as the field's values
// are written.
ApiResult<std::pair<std::string, json::value>> decode_map_entry(std::string_view data,
                                                               const Field& f, int depth) {
  Field value_field;
  value_field.kind = f.map_value;
  value_field.message = f.message;
  Reader r(data);
  std::pair<std::string, json::value> out;
  bool has_value = false;
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const int number = static_cast<int>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    std::string_view key;
    if (number == 1 && wire == 2) {
      if (!r.bytes(key)) return malformed();
      out.first = std::string(key);
    } else if (number == 2) {
      auto v = decode_scalar(r, wire, value_field, depth);
      if (!v) return v.error();
      out.second = std::move(*v);
      has_value = true;
    } else if (!r.skip(wire)) {
      return malformed();
    }
  }
  if (!has_value) {
    // An absent value is the zero value of its kind.
    switch (f.map_value) {
      case Kind::message: out.second = json::object(); break;
      case Kind::time: case Kind::micro_time: case Kind::raw_json: out.second = nullptr; break;
      case Kind::string_list: out.second = json::array(); break;
      case Kind::int32: case Kind::int64: out.second = 0; break;
      case Kind::boolean: out.second = false; break;
      default: out.second = ""; break;
    }
  }
  return out;
}

ApiResult<json::object> decode_message(std::string_view data, const Message& message, int depth) {
  if (depth > 32) return malformed();
  json::object out;
  Reader r(data);
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const int number = static_cast<int>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    const Field* f = message.find(number);
    if (f == nullptr && zero_value(r, wire)) continue;
    if (f == nullptr) {
      return unsupported("kwatch cannot decode field " + std::to_string(number) + " of " +
                         message.name.substr(message.name.find('.') + 1) +
                         " in a protobuf request body; send the object as JSON instead");
    }
    if (f->kind == Kind::map) {
      std::string_view entry;
      if (wire != 2 || !r.bytes(entry)) return malformed();
      auto v = decode_map_entry(entry, *f, depth);
      if (!v) return v.error();
      json::value& map = out[f->name];
      if (!map.is_object()) map = json::object();
      map.get_object()[v->first] = std::move(v->second);
      continue;
    }
    if (f->repeated && wire == 2 && (f->kind == Kind::int32 || f->kind == Kind::int64 ||
                                      f->kind == Kind::boolean)) {
      // A packed run of varints.
      std::string_view packed;
      if (!r.bytes(packed)) return malformed();
      Reader p(packed);
      json::value& arr = out[f->name];
      if (!arr.is_array()) arr = json::array();
      while (!p.done()) {
        auto v = decode_scalar(p, 0, *f, depth);
        if (!v) return v.error();
        arr.get_array().push_back(std::move(*v));
      }
      continue;
    }
    auto v = decode_scalar(r, wire, *f, depth);
    if (!v) return v.error();
    if (f->inline_fields) {
      for (auto& [key, value] : v->get_object()) out[key] = std::move(value);
      continue;
    }
    if (!f->repeated && v->is_null()) continue;  // a zero time: JSON omits it
    if (!f->repeated && !f->keep_zero && is_zero(*v)) continue;
    if (f->repeated) {
      json::value& arr = out[f->name];
      if (!arr.is_array()) arr = json::array();
      arr.get_array().push_back(std::move(*v));
    } else {
      out[f->name] = std::move(*v);
    }
  }
  return out;
}

void omit_empty(const Message& message, json::object& obj, int depth) {
  if (depth > 64) return;
  for (const Field& f : message.fields) {
    if (f.inline_fields) {
      if (f.message != nullptr) omit_empty(*f.message, obj, depth + 1);
      continue;
    }
    // `managedFields: []` asks for the managed fields to be cleared: it must reach the write.
    if (f.name == "managedFields") continue;
    auto it = obj.find(f.name);
    if (f.name.empty() || it == obj.end()) continue;
    json::value& v = it->value();
    if (v.is_null()) {
      if (f.omit_empty) obj.erase(it);
      continue;
    }
    if (f.repeated || f.kind == Kind::map) {
      const bool empty = (v.is_array() && v.get_array().empty()) ||
                         (v.is_object() && v.get_object().empty());
      if (empty) {
        if (f.omit_empty) obj.erase(it);
        continue;
      }
      if (f.message == nullptr) continue;
      if (v.is_array()) {
        for (auto& e : v.get_array()) {
          if (e.is_object()) omit_empty(*f.message, e.get_object(), depth + 1);
        }
      } else if (v.is_object() && f.kind == Kind::map) {
        for (auto& [key, e] : v.get_object()) {
          if (e.is_object()) omit_empty(*f.message, e.get_object(), depth + 1);
        }
      }
      continue;
    }
    switch (f.kind) {
      case Kind::message:
        if (v.is_object() && f.message != nullptr) omit_empty(*f.message, v.get_object(), depth + 1);
        break;
      case Kind::string:
      case Kind::bytes:
      case Kind::int32:
      case Kind::int64:
      case Kind::boolean:
        if (f.omit_empty && !f.keep_zero && is_zero(v)) obj.erase(it);
        break;
      default:
        break;  // times, quantities, int-or-strings: structs, which omitempty keeps
    }
  }
}

// The zero Go writes for a field the body left out: `{}` for a struct (then its own such
// fields), "" 0 false for scalars, "0" for a quantity, 0 for an int-or-string.
json::value go_zero(const Field& f) {
  switch (f.kind) {
    case Kind::message:
      return json::object();
    case Kind::string:
      return json::string();
    case Kind::int32:
    case Kind::int64:
    case Kind::int_or_string:
      return 0;
    case Kind::boolean:
      return false;
    case Kind::quantity:
      return "0";
    default:
      return nullptr;
  }
}

// Whether Go's JSON writes the field as null when it holds its zero: a list, pointer or time
// without omitempty (nil, or metav1.Time's zero, which marshals as null), or a time that is no
// pointer (omitempty does not drop structs). Fields Go writes as `{}`, "" or 0 are the
// generator's written_when_zero. creationTimestamp is omitzero since kube 1.34: left out.
bool written_as_null(const Field& f) {
  if (f.inline_fields || f.written_when_zero || f.name == "creationTimestamp") return false;
  if (!f.omit_empty) return true;
  const bool time = f.kind == Kind::time || f.kind == Kind::micro_time;
  return time && !f.keep_zero;  // with omitempty, keep_zero marks the pointers
}

void write_zero(const Message& message, json::object& obj, int depth) {
  if (depth > 64) return;
  for (const Field& f : message.fields) {
    if (f.inline_fields) {
      if (f.message != nullptr) write_zero(*f.message, obj, depth + 1);
      continue;
    }
    if (f.name.empty()) continue;
    auto it = obj.find(f.name);
    if (it == obj.end() && written_as_null(f)) {
      // Go writes the zero of such a field as null. (A list sent empty is kept as `[]`, where
      // kube reads back nil from its protobuf storage: kwatch's schema requires some of those
      // lists, and a client writing back what it read must not be refused.)
      obj.emplace(f.name, nullptr);
      continue;
    }
    if (it == obj.end() || it->value().is_null()) {
      if (!f.written_when_zero) continue;
      json::value zero = go_zero(f);
      if (zero.is_null()) continue;
      it = obj.insert_or_assign(f.name, std::move(zero)).first;
    }
    if (f.message == nullptr) continue;
    json::value& v = it->value();
    if (f.repeated && v.is_array()) {
      for (auto& e : v.get_array()) {
        if (e.is_object()) write_zero(*f.message, e.get_object(), depth + 1);
      }
    } else if (f.kind == Kind::map && v.is_object()) {
      for (auto& [key, e] : v.get_object()) {
        if (e.is_object()) write_zero(*f.message, e.get_object(), depth + 1);
      }
    } else if (f.kind == Kind::message && v.is_object()) {
      write_zero(*f.message, v.get_object(), depth + 1);
    }
  }
}

// ---- encoding: a built-in object as kube's generated code writes it ----

class Writer {
 public:
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void tag(int number, int wire) { varint((static_cast<std::uint64_t>(number) << 3) | wire); }
  void bytes_field(int number, std::string_view b) {
    tag(number, 2);
    varint(b.size());
    out_.append(b);
  }
  void varint_field(int number, std::uint64_t v) {
    tag(number, 0);
    varint(v);
  }
  std::string& data() { return out_; }

 private:
  std::string out_;
};

bool encode_message(const json::object& obj, const Message& message, Writer& w, int depth,
                    bool whole = true);

// metav1.Time / MicroTime: {seconds = 1, nanos = 2}; false when `text` is no RFC 3339 time.
bool encode_time(std::string_view text, Writer& w) {
  auto at = base::parse_rfc3339(std::string(text));
  if (!at) return false;
  const std::int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(
                                   at->time_since_epoch()).count();
  std::int64_t nanos = 0;
  if (auto dot = text.find('.'); dot != std::string_view::npos) {
    std::size_t i = dot + 1;
    int digits = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (digits < 9) {
        nanos = nanos * 10 + (text[i] - '0');
        ++digits;
      }
    }
    for (; digits < 9; ++digits) nanos *= 10;
  }
  w.varint_field(1, static_cast<std::uint64_t>(seconds));
  if (nanos != 0) w.varint_field(2, static_cast<std::uint64_t>(nanos));
  return true;
}

// One value of field `f` (a list's element, a map's value) as its field `number`.
bool encode_value(const json::value& v, Kind kind, const Message* message, int number, Writer& w,
                  int depth) {
  switch (kind) {
    case Kind::string:
      if (!v.is_string()) return false;
      w.bytes_field(number, v.get_string());
      return true;
    case Kind::bytes: {
      if (!v.is_string()) return false;
      auto raw = base::base64_decode(v.get_string());
      if (!raw) return false;
      w.bytes_field(number, *raw);
      return true;
    }
    case Kind::int32:
    case Kind::int64:
      if (!v.is_int64() && !v.is_uint64()) return false;
      // Negative values as ten-byte two's complement varints, as Go writes int32 and int64.
      w.varint_field(number, v.is_int64() ? static_cast<std::uint64_t>(v.get_int64())
                                          : v.get_uint64());
      return true;
    case Kind::boolean:
      if (!v.is_bool()) return false;
      w.varint_field(number, v.get_bool() ? 1 : 0);
      return true;
    case Kind::message: {
      if (!v.is_object() || message == nullptr) return false;
      Writer inner;
      if (!encode_message(v.get_object(), *message, inner, depth + 1)) return false;
      w.bytes_field(number, inner.data());
      return true;
    }
    case Kind::time:
    case Kind::micro_time: {
      if (!v.is_string()) return false;
      Writer inner;
      if (!encode_time(v.get_string(), inner)) return false;
      w.bytes_field(number, inner.data());
      return true;
    }
    case Kind::quantity: {
      Writer inner;
      if (v.is_string()) {
        inner.bytes_field(1, v.get_string());
      } else if (v.is_number()) {
        inner.bytes_field(1, json::serialize(v));
      } else {
        return false;
      }
      w.bytes_field(number, inner.data());
      return true;
    }
    case Kind::int_or_string: {
      Writer inner;
      if (v.is_int64()) {
        inner.varint_field(1, 0);
        inner.varint_field(2, static_cast<std::uint64_t>(v.get_int64()));
      } else if (v.is_string()) {
        inner.varint_field(1, 1);
        inner.bytes_field(3, v.get_string());
      } else {
        return false;
      }
      w.bytes_field(number, inner.data());
      return true;
    }
    case Kind::raw_json: {
      Writer inner;
      inner.bytes_field(1, json::serialize(v));
      w.bytes_field(number, inner.data());
      return true;
    }
    case Kind::string_list: {
      if (!v.is_array()) return false;
      Writer inner;
      for (const auto& e : v.get_array()) {
        if (!e.is_string()) return false;
        inner.bytes_field(1, e.get_string());
      }
      w.bytes_field(number, inner.data());
      return true;
    }
    default:
      return false;
  }
}

// Whether `message` (with the messages it holds inline) has a field JSON names `key`.
bool knows(const Message& message, std::string_view key, int depth = 0) {
  for (const Field& f : message.fields) {
    if (f.inline_fields) {
      if (f.message != nullptr && depth < 8 && knows(*f.message, key, depth + 1)) return true;
    } else if (f.name == key) {
      return true;
    }
  }
  return false;
}

// `whole`: `obj` is the message's alone (not an inline part of its parent's object).
bool encode_message(const json::object& obj, const Message& message, Writer& w, int depth,
                    bool whole) {
  if (depth > 32) return false;
  // A member the message has no field for would be lost on the wire (a field newer than the
  // table): no protobuf form then, as the decoder refuses such a field rather than drop it.
  for (const auto& kv : whole ? obj : json::object()) {
    if (kv.value().is_null()) continue;
    if ((depth == 0 || message.type_meta) && (kv.key() == "apiVersion" || kv.key() == "kind")) {
      continue;
    }
    if (!knows(message, kv.key())) return false;
  }
  for (const Field* f : message.by_number) {
    if (f->inline_fields) {
      if (f->message == nullptr) continue;
      Writer inner;
      if (!encode_message(obj, *f->message, inner, depth + 1, /*whole=*/false)) return false;
      w.bytes_field(f->number, inner.data());
      continue;
    }
    const json::value* v = obj.if_contains(f->name);
    if (v == nullptr || v->is_null()) continue;  // Go's nil: not on the wire
    if (f->kind == Kind::map) {
      if (!v->is_object()) return false;
      // Keys in order, as the generated code sorts them.
      std::vector<std::string_view> keys;
      for (const auto& kv : v->get_object()) keys.push_back(kv.key());
      std::sort(keys.begin(), keys.end());
      for (auto key : keys) {
        Writer entry;
        entry.bytes_field(1, key);
        if (!encode_value(v->get_object().at(key), f->map_value, f->message, 2, entry, depth)) {
          return false;
        }
        w.bytes_field(f->number, entry.data());
      }
      continue;
    }
    if (f->repeated) {
      if (!v->is_array()) return false;
      for (const auto& e : v->get_array()) {
        if (!encode_value(e, f->kind, f->message, f->number, w, depth)) return false;
      }
      continue;
    }
    if (!encode_value(*v, f->kind, f->message, f->number, w, depth)) return false;
  }
  return true;
}

}  // namespace

namespace {

void collect_bytes(const Message& message, const json::object& obj,
                   apimachinery::CborByteStrings& out, int depth) {
  if (depth > 64) return;
  for (const Field& f : message.fields) {
    if (f.inline_fields) {
      if (f.message != nullptr) collect_bytes(*f.message, obj, out, depth + 1);
      continue;
    }
    const json::value* v = f.name.empty() ? nullptr : obj.if_contains(f.name);
    if (v == nullptr) continue;
    auto one = [&](const json::value& e, Kind kind) {
      if (kind == Kind::bytes && e.is_string()) {
        out.insert(&e);
      } else if (kind == Kind::message && e.is_object() && f.message != nullptr) {
        collect_bytes(*f.message, e.get_object(), out, depth + 1);
      }
    };
    if (f.kind == Kind::map) {
      if (!v->is_object()) continue;
      for (const auto& kv : v->get_object()) one(kv.value(), f.map_value);
    } else if (f.repeated) {
      if (!v->is_array()) continue;
      for (const auto& e : v->get_array()) one(e, f.kind);
    } else {
      one(*v, f.kind);
    }
  }
}

}  // namespace

void collect_byte_strings(std::string_view api_version, std::string_view kind,
                          const json::object& obj, apimachinery::CborByteStrings& out) {
  if (const Message* message = schema().by_kind(api_version, kind)) {
    collect_bytes(*message, obj, out, 0);
  }
}

void write_zero_fields(std::string_view api_version, std::string_view kind, json::object& obj) {
  if (const Message* message = schema().by_kind(api_version, kind)) write_zero(*message, obj, 0);
}

void omit_empty_fields(std::string_view api_version, std::string_view kind, json::object& obj) {
  if (const Message* message = schema().by_kind(api_version, kind)) omit_empty(*message, obj, 0);
}

namespace {

// A list's message: ListMeta = 1 {selfLink = 1, resourceVersion = 2, continue = 3,
// remainingItemCount = 4}, items = 2.
ApiResult<json::object> decode_list(std::string_view raw, const Message& item) {
  json::object metadata;
  json::array items;
  Reader r(raw);
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const auto number = tag >> 3;
    std::string_view field;
    if (number == 1 && (tag & 7) == 2) {
      if (!r.bytes(field)) return malformed();
      Reader m(field);
      while (!m.done()) {
        std::uint64_t mtag = 0;
        if (!m.varint(mtag)) return malformed();
        const auto mn = mtag >> 3;
        std::string_view text;
        std::uint64_t count = 0;
        if (mn >= 1 && mn <= 3 && (mtag & 7) == 2) {
          if (!m.bytes(text)) return malformed();
          static constexpr std::string_view kNames[] = {"selfLink", "resourceVersion", "continue"};
          if (!text.empty()) metadata[kNames[mn - 1]] = std::string(text);
        } else if (mn == 4 && (mtag & 7) == 0) {
          if (!m.varint(count)) return malformed();
          metadata["remainingItemCount"] = static_cast<std::int64_t>(count);
        } else if (!m.skip(static_cast<int>(mtag & 7))) {
          return malformed();
        }
      }
    } else if (number == 2 && (tag & 7) == 2) {
      if (!r.bytes(field)) return malformed();
      auto obj = decode_message(field, item, 0);
      if (!obj) return obj.error();
      items.emplace_back(std::move(*obj));
    } else if (!r.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  return json::object{{"metadata", std::move(metadata)}, {"items", std::move(items)}};
}

}  // namespace

ApiResult<json::object> decode_protobuf_object(std::string_view bytes) {
  static constexpr std::string_view kMagic("k8s\0", 4);
  if (bytes.substr(0, 4) != kMagic) {
    return ApiError(Errc::bad_request, "the protobuf body does not start with the k8s magic");
  }
  Reader envelope(bytes.substr(4));
  std::string_view type_meta, raw;
  while (!envelope.done()) {
    std::uint64_t tag = 0;
    if (!envelope.varint(tag)) return malformed();
    const auto number = tag >> 3;
    if (number == 1 && (tag & 7) == 2) {
      if (!envelope.bytes(type_meta)) return malformed();
    } else if (number == 2 && (tag & 7) == 2) {
      if (!envelope.bytes(raw)) return malformed();
    } else if (!envelope.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  auto tm = map_entry(type_meta);
  if (!tm) return tm.error();
  const auto [api_version, kind] = *tm;
  const Message* message = schema().by_kind(api_version, kind);
  const Message* item = message == nullptr && kind.size() > 4 && kind.ends_with("List")
                            ? schema().by_kind(api_version, kind.substr(0, kind.size() - 4))
                            : nullptr;
  if (message == nullptr && item == nullptr) {
    return unsupported("kwatch cannot decode " + std::string(kind) + " (" +
                       std::string(api_version) +
                       ") from protobuf; send the object as JSON instead");
  }
  auto obj = item != nullptr ? decode_list(raw, *item) : decode_message(raw, *message, 0);
  if (!obj) return obj.error();
  obj->emplace("apiVersion", std::string(api_version));
  obj->emplace("kind", std::string(kind));
  // Protobuf strings are raw bytes; JSON, and so everything kwatch stores, must be UTF-8.
  json::value value(std::move(*obj));
  if (auto problem = apimachinery::json_problem(value)) {
    return ApiError(Errc::bad_request,
                    "the protobuf body of the request is malformed: " + problem->message());
  }
  return std::move(value.get_object());
}

namespace {

// meta/v1 ListMeta: selfLink = 1, resourceVersion = 2, continue = 3 (written even when empty,
// as Go's generated code writes strings), remainingItemCount = 4 (only when set).
std::string list_meta(const json::object* metadata) {
  Writer w;
  w.bytes_field(1, string_member(metadata, "selfLink"));
  w.bytes_field(2, string_member(metadata, "resourceVersion"));
  w.bytes_field(3, string_member(metadata, "continue"));
  if (const auto count = int_member(metadata, "remainingItemCount")) {
    w.varint_field(4, static_cast<std::uint64_t>(*count));
  }
  return std::move(w.data());
}

}  // namespace

std::optional<std::string> encode_protobuf_message(const json::object& obj,
                                                   std::string_view api_version,
                                                   std::string_view kind) {
  const Message* message = schema().by_kind(api_version, kind);
  if (message == nullptr) return std::nullopt;
  Writer raw;
  if (!encode_message(obj, *message, raw, 0)) return std::nullopt;
  return std::move(raw.data());
}

std::string protobuf_envelope(std::string_view api_version, std::string_view kind,
                              std::string_view raw) {
  // runtime.Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3,
  // contentType = 4 (written empty, as Go writes them).
  Writer type_meta;
  type_meta.bytes_field(1, api_version);
  type_meta.bytes_field(2, kind);
  Writer envelope;
  envelope.bytes_field(1, type_meta.data());
  envelope.bytes_field(2, raw);
  envelope.bytes_field(3, "");
  envelope.bytes_field(4, "");
  return std::string("k8s\0", 4) + envelope.data();
}

std::string encode_protobuf_list(std::string_view api_version, std::string_view kind,
                                 const json::object* metadata,
                                 const std::vector<std::string_view>& items) {
  const std::string meta = list_meta(metadata);
  std::size_t size = meta.size() + 16;
  for (std::string_view item : items) size += item.size() + 11;
  Writer raw;
  raw.data().reserve(size);
  raw.bytes_field(1, meta);
  for (std::string_view item : items) raw.bytes_field(2, item);
  return protobuf_envelope(api_version, kind, raw.data());
}

std::optional<std::string> encode_protobuf_status(const json::object& status) {
  auto message = encode_protobuf_status_message(status);
  if (!message) return std::nullopt;
  return protobuf_envelope("v1", "Status", *message);
}

std::optional<std::string> encode_protobuf_status_message(const json::object& status) {
  if (string_member(&status, "kind") != "Status") return std::nullopt;
  // meta/v1 Status: metadata = 1, status = 2, message = 3, reason = 4, details = 5, code = 6.
  Writer w;
  w.bytes_field(1, list_meta(object_member(&status, "metadata")));
  w.bytes_field(2, string_member(&status, "status"));
  w.bytes_field(3, string_member(&status, "message"));
  w.bytes_field(4, string_member(&status, "reason"));
  if (const json::object* details = object_member(&status, "details")) {
    // StatusDetails: name = 1, group = 2, kind = 3, causes = 4, retryAfterSeconds = 5, uid = 6;
    // StatusCause: reason = 1, message = 2, field = 3.
    Writer d;
    d.bytes_field(1, string_member(details, "name"));
    d.bytes_field(2, string_member(details, "group"));
    d.bytes_field(3, string_member(details, "kind"));
    if (const json::value* causes = details->if_contains("causes"); causes && causes->is_array()) {
      for (const json::value& c : causes->get_array()) {
        const json::object* cause = c.is_object() ? &c.get_object() : nullptr;
        Writer cw;
        cw.bytes_field(1, string_member(cause, "reason"));
        cw.bytes_field(2, string_member(cause, "message"));
        cw.bytes_field(3, string_member(cause, "field"));
        d.bytes_field(4, cw.data());
      }
    }
    d.varint_field(5, static_cast<std::uint64_t>(int_member(details, "retryAfterSeconds").value_or(0)));
    d.bytes_field(6, string_member(details, "uid"));
    w.bytes_field(5, d.data());
  }
  w.varint_field(6, static_cast<std::uint64_t>(int_member(&status, "code").value_or(0)));
  return std::move(w.data());
}

bool has_protobuf_form(std::string_view api_version, std::string_view kind) {
  return schema().by_kind(api_version, kind) != nullptr;
}

std::string protobuf_watch_event_head(std::string_view type, std::string_view api_version,
                                      std::string_view kind, std::size_t message_size) {
  auto varint_size = [](std::uint64_t v) {
    std::size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      ++n;
    }
    return n;
  };
  Writer type_meta;
  type_meta.bytes_field(1, api_version);
  type_meta.bytes_field(2, kind);
  // runtime.Unknown after the magic: typeMeta, raw (the message), then the two empty strings.
  const std::size_t unknown = 1 + varint_size(type_meta.data().size()) + type_meta.data().size() +
                              1 + varint_size(message_size) + message_size + kWatchEventSuffix.size();
  const std::size_t raw = 4 + unknown;                         // "k8s\0" + Unknown
  const std::size_t extension = 1 + varint_size(raw) + raw;    // RawExtension {raw = 1}
  Writer event;
  event.bytes_field(1, type);
  event.tag(2, 2);
  event.varint(extension);
  event.tag(1, 2);
  event.varint(raw);
  event.data().append("k8s\0", 4);
  event.bytes_field(1, type_meta.data());
  event.tag(2, 2);
  event.varint(message_size);
  const std::size_t total = event.data().size() + message_size + kWatchEventSuffix.size();
  std::string head;
  head.reserve(4 + event.data().size());
  for (int shift = 24; shift >= 0; shift -= 8) head.push_back(static_cast<char>(total >> shift));
  head += event.data();
  return head;
}

std::optional<std::string> encode_protobuf_object(const json::object& obj) {
  const json::value* api_version = obj.if_contains("apiVersion");
  const json::value* kind = obj.if_contains("kind");
  if (api_version == nullptr || kind == nullptr || !api_version->is_string() || !kind->is_string()) {
    return std::nullopt;
  }
  const std::string_view v = api_version->get_string();
  const std::string_view k = kind->get_string();
  const std::string_view item_kind =
      k.size() > 4 && k.ends_with("List") ? k.substr(0, k.size() - 4) : std::string_view();
  if (schema().by_kind(v, k) == nullptr && !item_kind.empty() &&
      schema().by_kind(v, item_kind) != nullptr) {
    const json::value* items = obj.if_contains("items");
    if (items == nullptr || !(items->is_array() || items->is_null())) return std::nullopt;
    std::vector<std::string> messages;
    if (items->is_array()) {
      messages.reserve(items->get_array().size());
      for (const json::value& item : items->get_array()) {
        if (!item.is_object()) return std::nullopt;
        auto m = encode_protobuf_message(item.get_object(), v, item_kind);
        if (!m) return std::nullopt;
        messages.push_back(std::move(*m));
      }
    }
    const std::vector<std::string_view> views(messages.begin(), messages.end());
    return encode_protobuf_list(v, k, object_member(&obj, "metadata"), views);
  }
  auto raw = encode_protobuf_message(obj, v, k);
  if (!raw) return std::nullopt;
  return protobuf_envelope(v, k, *raw);
}

}  // namespace kwatch::schema
