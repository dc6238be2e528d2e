#include "cel/literal.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "cel/time.hpp"

namespace kwatch::cel {

namespace {

void quote(std::string& out, std::string_view text, bool bytes) {
  out += bytes ? "b\"" : "\"";
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (append_simple_escape(out, b)) continue;
    // Control characters always, and in bytes every octet outside printable ASCII.
    if (b < 0x20 || b == 0x7f || (bytes && b >= 0x80)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

// Map keys in a stable order: by kind (bool, int, uint, string), then by value.
bool key_less(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return a.kind() < b.kind();
  switch (a.kind()) {
    case ValueKind::boolean: return a.as_bool() < b.as_bool();
    case ValueKind::int64: return a.as_int() < b.as_int();
    case ValueKind::uint64: return a.as_uint() < b.as_uint();
    default: return a.as_text() < b.as_text();
  }
}

void write(std::string& out, const Value& v) {
  switch (v.kind()) {
    case ValueKind::null: out += "null"; return;
    case ValueKind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case ValueKind::int64: out += std::to_string(v.as_int()); return;
    case ValueKind::uint64: out += std::to_string(v.as_uint()) + "u"; return;
    case ValueKind::float64: out += format_double(v.as_double()); return;
    case ValueKind::string: quote(out, v.as_text(), false); return;
    case ValueKind::bytes: quote(out, v.as_text(), true); return;
    case ValueKind::type:
    case ValueKind::error: out += v.as_text(); return;
    case ValueKind::timestamp: out += "timestamp(\"" + format_timestamp(v.as_seconds()) + "\")"; return;
    case ValueKind::duration: out += "duration(\"" + format_duration(v.as_seconds()) + "\")"; return;
    case ValueKind::opaque: out += v.as_opaque().literal(); return;
    case ValueKind::optional:
      if (v.optional_value() == nullptr) {
        out += "optional.none()";
      } else {
        out += "optional.of(";
        write(out, *v.optional_value());
        out += ')';
      }
      return;
    case ValueKind::list: {
      const ListValue& l = v.as_list();
      out += '[';
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out += ", ";
        write(out, l.at(i));
      }
      out += ']';
      return;
    }
    case ValueKind::map: {
      const MapValue& m = v.as_map();
      std::vector<std::size_t> order(m.size());
      std::vector<Value> keys;
      keys.reserve(m.size());
      for (std::size_t i = 0; i < m.size(); ++i) {
        order[i] = i;
        keys.push_back(m.key_at(i));
      }
      std::sort(order.begin(), order.end(),
                [&](std::size_t a, std::size_t b) { return key_less(keys[a], keys[b]); });
      out += '{';
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (i > 0) out += ", ";
        write(out, keys[order[i]]);
        out += ": ";
        write(out, m.value_at(order[i]));
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

bool append_simple_escape(std::string& out, char32_t c) {
  switch (c) {
    case '\\': out += "\\\\"; return true;
    case '"': out += "\\\""; return true;
    case '\n': out += "\\n"; return true;
    case '\r': out += "\\r"; return true;
    case '\t': out += "\\t"; return true;
    case '\a': out += "\\a"; return true;
    case '\b': out += "\\b"; return true;
    case '\f': out += "\\f"; return true;
    case '\v': out += "\\v"; return true;
    default: return false;
  }
}

std::string quote_text(std::string_view text, bool bytes) {
  std::string out;
  quote(out, text, bytes);
  return out;
}

std::string format_double(double d) {
  if (std::isnan(d)) return "double(\"nan\")";
  if (std::isinf(d)) return d > 0 ? "double(\"inf\")" : "double(\"-inf\")";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string out(buf, r.ptr);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string format_literal(const Value& v) {
  std::string out;
  write(out, v);
  return out;
}

}  // namespace kwatch::cel
