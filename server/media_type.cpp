#include "server/media_type.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <vector>

namespace kwatch::server {

namespace json = boost::json;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether a plain scalar `s` would read back as the same string.
bool plain_safe(const std::string& s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ') return false;
  if (std::string_view("-?:,[]{}#&*!|>'\"%@`").find(s.front()) != std::string_view::npos) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) return false;
    if (c == '#' && i > 0 && s[i - 1] == ' ') return false;
  }
  const std::string l = lower(s);
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
                           ".inf", "-.inf", "+.inf", ".nan"}) {
    if (l == word) return false;
  }
  // Anything a YAML reader might take for a number stays quoted.
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (digit(s.front())) return false;
  if ((s.front() == '+' || s.front() == '.') && s.size() > 1 && (digit(s[1]) || s[1] == '.')) {
    return false;
  }
  return true;
}

void scalar(const json::value& v, std::string& out) {
  if (v.is_string()) {
    const std::string s(v.get_string());
    out += plain_safe(s) ? s : json::serialize(v);  // a JSON string is a YAML double-quoted one
  } else {
    out += json::serialize(v);
  }
}

// A value written on its key's or dash's line: a scalar, or an empty {} / [].
void inline_value(const json::value& v, std::string& out) {
  if (v.is_object()) {
    out += "{}";
  } else if (v.is_array()) {
    out += "[]";
  } else {
    scalar(v, out);
  }
  out += '\n';
}

bool is_block(const json::value& v) {
  return (v.is_object() && !v.get_object().empty()) || (v.is_array() && !v.get_array().empty());
}

void emit(const json::value& v, int indent, std::string& out);

void emit_mapping(const json::object& obj, int indent, std::string& out, bool first_inline) {
  std::vector<const json::key_value_pair*> members;
  for (const auto& kv : obj) members.push_back(&kv);
  std::sort(members.begin(), members.end(),
            [](const auto* a, const auto* b) { return a->key() < b->key(); });
  bool first = true;
  for (const auto* kv : members) {
    if (!(first && first_inline)) out.append(static_cast<std::size_t>(indent), ' ');
    first = false;
    const std::string key(kv->key());
    out += plain_safe(key) ? key : json::serialize(json::value(kv->key()));
    out += ':';
    const json::value& value = kv->value();
    if (value.is_object() && !value.get_object().empty()) {
      out += '\n';
      emit(value, indent + 2, out);
    } else if (value.is_array() && !value.get_array().empty()) {
      out += '\n';
      emit(value, indent, out);  // a sequence at its key's indentation, as kube writes it
    } else {
      out += ' ';
      inline_value(value, out);
    }
  }
}

void emit(const json::value& v, int indent, std::string& out) {
  if (v.is_object() && !v.get_object().empty()) {
    emit_mapping(v.get_object(), indent, out, false);
  } else if (v.is_array() && !v.get_array().empty()) {
    for (const auto& item : v.get_array()) {
      out.append(static_cast<std::size_t>(indent), ' ');
      out += "- ";
      if (item.is_object() && is_block(item)) {
        emit_mapping(item.get_object(), indent + 2, out, true);
      } else if (item.is_array() && is_block(item)) {
        out += '\n';
        emit(item, indent + 2, out);
      } else {
        inline_value(item, out);
      }
    }
  } else {
    inline_value(v, out);
  }
}

}  // namespace

namespace {

// One media range of an Accept header, as kube's parser (goautoneg) reads it.
struct MediaRange {
  std::string type;
  std::string subtype;
  double q = 1.0;
  std::vector<std::pair<std::string_view, std::string_view>> params;  // views into the header

  std::optional<std::string_view> param(std::string_view key) const {
    for (const auto& [k, v] : params) {
      if (k == key) return v;
    }
    return std::nullopt;
  }
};

double parse_q(std::string_view text) {
  // A q value is 0 to 1 with at most three decimals; what does not read as one counts as 0,
  // as kube's parser reads it.
  double q = 0;
  double scale = 1;
  bool point = false;
  bool digits = false;
  for (char c : text) {
    if (c == '.' && !point) {
      point = true;
    } else if (c >= '0' && c <= '9') {
      digits = true;
      if (point) {
        scale /= 10;
        q += (c - '0') * scale;
      } else {
        q = q * 10 + (c - '0');
      }
    } else {
      return 0;
    }
  }
  return digits ? q : 0;
}

// The ranges of `accept` in the order they are tried: higher q first, then exact types before
// wildcards; otherwise as sent.
std::vector<MediaRange> parse_accept(std::string_view accept) {
  std::vector<MediaRange> ranges;
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    std::string_view part = comma == std::string_view::npos ? accept : accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const auto semi = part.find(';');
    const std::string_view media = trim(part.substr(0, semi));
    MediaRange r;
    const auto slash = media.find('/');
    if (slash == std::string_view::npos) {
      if (media != "*") continue;
      r.type = "*";
      r.subtype = "*";
    } else {
      r.type = lower(trim(media.substr(0, slash)));
      r.subtype = lower(trim(media.substr(slash + 1)));
    }
    for (std::string_view params = semi == std::string_view::npos ? "" : part.substr(semi + 1);
         !params.empty();) {
      const auto next = params.find(';');
      const std::string_view p = params.substr(0, next);
      params = next == std::string_view::npos ? std::string_view() : params.substr(next + 1);
      const auto eq = p.find('=');
      if (eq == std::string_view::npos) continue;
      const std::string_view key = trim(p.substr(0, eq));
      const std::string_view value = trim(p.substr(eq + 1));
      if (key == "q") {
        r.q = parse_q(value);
      } else {
        r.params.emplace_back(key, value);
      }
    }
    ranges.push_back(std::move(r));
  }
  std::stable_sort(ranges.begin(), ranges.end(), [](const MediaRange& a, const MediaRange& b) {
    if (a.q != b.q) return a.q > b.q;
    if ((a.type == "*") != (b.type == "*")) return b.type == "*";
    return a.subtype != "*" && b.subtype == "*";
  });
  return ranges;
}

bool fits(const MediaRange& r, Representation rep) {
  // Protobuf only when named: a wildcard is answered with JSON, as kube answers it.
  if (rep == Representation::protobuf) {
    return r.type == "application" && r.subtype == "vnd.kubernetes.protobuf";
  }
  if (rep == Representation::cbor) {
    return r.type == "application" && (r.subtype == "cbor" || r.subtype == "cbor-seq");
  }
  if (r.type == "*" && r.subtype == "*") return true;
  if (r.type != "application") return false;
  return r.subtype == "*" || r.subtype == (rep == Representation::json ? "json" : "yaml");
}

constexpr Representation kRepresentations[] = {Representation::json, Representation::yaml,
                                               Representation::protobuf, Representation::cbor};

bool binary(Representation rep) {
  return rep == Representation::protobuf || rep == Representation::cbor;
}

// The form range `r` asks of representation `rep`, or nullopt when kwatch cannot make it.
std::optional<OutputForm> form_of(const MediaRange& r, Representation rep) {
  OutputForm form;
  form.representation = rep;
  if (binary(rep)) {
    for (const char* p : {"as", "g", "v", "stream"}) {
      if (auto value = r.param(p); value && !value->empty()) return std::nullopt;
    }
  }
  if (auto stream = r.param("stream"); stream && !stream->empty()) {
    if (rep != Representation::json || *stream != "watch") return std::nullopt;
  }
  if (auto sv = r.param("sv"); sv && !sv->empty() && *sv != "v1") return std::nullopt;
  const auto as = r.param("as");
  const auto g = r.param("g");
  const auto v = r.param("v");
  if (!as && !g && !v) return form;
  if (g.value_or("") != "meta.k8s.io") return std::nullopt;
  if (v == "v1") {
    form.meta_version = "v1";
  } else if (v == "v1beta1") {
    form.meta_version = "v1beta1";
  } else {
    return std::nullopt;
  }
  const std::string_view kind = as.value_or("");
  if (kind == "Table") {
    form.transform = Transform::table;
  } else if (kind == "PartialObjectMetadata") {
    form.transform = Transform::partial_object_metadata;
  } else if (kind == "PartialObjectMetadataList") {
    form.transform = Transform::partial_object_metadata_list;
  } else {
    return std::nullopt;
  }
  return form;
}

}  // namespace

std::optional<Representation> negotiate(std::string_view accept, bool stream) {
  if (trim(accept).empty()) return Representation::json;
  for (const MediaRange& r : parse_accept(accept)) {
    if (r.q <= 0) continue;
    for (Representation rep : kRepresentations) {
      if ((rep == Representation::yaml && stream) || binary(rep)) continue;
      if (fits(r, rep)) return rep;
    }
  }
  return std::nullopt;
}

std::optional<OutputForm> negotiate_output(std::string_view accept, bool stream,
                                           bool binary_forms) {
  if (trim(accept).empty()) return OutputForm{};
  for (const MediaRange& r : parse_accept(accept)) {
    if (r.q <= 0) continue;
    for (Representation rep : kRepresentations) {
      if (rep == Representation::yaml && stream) continue;
      if (binary(rep) && (stream || !binary_forms)) continue;
      if (!fits(r, rep)) continue;
      if (auto form = form_of(r, rep)) return form;
    }
  }
  return std::nullopt;
}

std::optional<std::string> indent_json(std::string_view in, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(max_bytes, in.size() + in.size() / 2));
  std::size_t depth = 0;
  bool need_indent = false;  // after `{` or `[`: a newline unless the container is empty
  bool in_string = false;
  bool escaped = false;
  const auto newline = [&] {
    out.push_back('\n');
    out.append(2 * depth, ' ');
  };
  for (const char c : in) {
    if (out.size() > max_bytes) return std::nullopt;
    if (in_string) {
      out.push_back(c);
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (need_indent && c != ']' && c != '}') {
      need_indent = false;
      ++depth;
      newline();
    }
    switch (c) {
      case '"':
        in_string = true;
        out.push_back(c);
        break;
      case '{':
      case '[':
        need_indent = true;
        out.push_back(c);
        break;
      case ',':
        out.push_back(c);
        newline();
        break;
      case ':':
        out += ": ";
        break;
      case '}':
      case ']':
        if (need_indent) {
          need_indent = false;
        } else {
          if (depth > 0) --depth;
          newline();
        }
        out.push_back(c);
        break;
      default: out.push_back(c);
    }
  }
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

bool wants_pretty(std::optional<std::string_view> pretty_param, std::string_view user_agent) {
  if (pretty_param && !pretty_param->empty()) {
    const std::string_view p = *pretty_param;
    return p == "1" || p == "t" || p == "T" || p == "true" || p == "TRUE" || p == "True";
  }
  return user_agent.starts_with("curl") || user_agent.starts_with("Wget") ||
         user_agent.starts_with("Mozilla/5.0");
}

std::string to_yaml(const json::value& value) {
  std::string out;
  emit(value, 0, out);
  return out;
}

}  // namespace kwatch::server
