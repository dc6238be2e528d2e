// Kubernetes' URL library (k8s.io/apiserver/pkg/cel/library urls.go): `url(s)`, `isURL(s)`, and on
// kubernetes.URL `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`, `getQuery`.
//
// A URL is accepted as Go's url.ParseRequestURI accepts it (what the OpenAPI `uri` format
// uses): an absolute URL with a scheme, or an absolute path; no control characters; valid
// percent escapes; a numeric port. Its parts are then read as url.Parse reads them (a fragment
// is not part of the path or the query).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cel/libraries.hpp"

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;

struct Url {
  std::string scheme, opaque, host, path, raw_path, raw_query;
  bool has_authority = false;
};

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; `plus_is_space` for query components. nullopt on a bad escape.
std::optional<std::string> unescape(std::string_view s, bool plus_is_space, std::string& bad) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0) {
        bad = std::string(s.substr(i, std::min<std::size_t>(3, s.size() - i)));
        return std::nullopt;
      }
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<Url> parse(std::string_view raw, bool request, std::string& error) {
  const auto fail = [&](const std::string& why) {
    error = "parse \"" + std::string(raw) + "\": " + why;
    return std::nullopt;
  };
  for (char c : raw) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return fail("net/url: invalid control character in URL");
    }
  }
  if (raw.empty() && request) return fail("empty url");
  Url u;
  std::string_view rest = raw;
  if (!request) {
    if (auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  }
  // The scheme: a letter, then letters, digits, '+', '-', '.', up to ':'.
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const char c = rest[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool more = (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    if (letter || (more && i > 0)) continue;
    if (c == ':') {
      if (i == 0) return fail("missing protocol scheme");
      u.scheme = std::string(rest.substr(0, i));
      for (char& ch : u.scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      rest = rest.substr(i + 1);
    }
    break;
  }
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    u.raw_query = std::string(rest.substr(q + 1));
    rest = rest.substr(0, q);
  }
  if (rest.empty() || rest[0] != '/') {
    if (!u.scheme.empty()) {
      u.opaque = std::string(rest);
      return u;
    }
    if (request) return fail("invalid URI for request");
  }
  if (!u.scheme.empty() && rest.substr(0, 2) == "//") {
    rest = rest.substr(2);
    const std::size_t slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    if (auto at = authority.rfind('@'); at != std::string_view::npos) authority = authority.substr(at + 1);
    // The port, when there is one, is digits after the last ':' (after ']' for IPv6).
    std::string_view host = authority;
    if (!host.empty() && host[0] == '[') {
      const auto close = host.find(']');
      if (close == std::string_view::npos) return fail("missing ']' in host");
      const std::string_view after = host.substr(close + 1);
      if (!after.empty() && (after[0] != ':' || after.find_first_not_of("0123456789", 1) != std::string_view::npos)) {
        return fail("invalid port \"" + std::string(after) + "\" after host");
      }
    } else if (auto colon = host.rfind(':'); colon != std::string_view::npos) {
      const std::string_view port = host.substr(colon);
      if (port.find_first_not_of("0123456789", 1) != std::string_view::npos) {
        return fail("invalid port \"" + std::string(port) + "\" after host");
      }
    }
    std::string bad;
    auto decoded = unescape(host, false, bad);
    if (!decoded) return fail("invalid URL escape \"" + bad + "\"");
    u.host = *decoded;
    u.has_authority = true;
  }
  std::string bad;
  auto path = unescape(rest, false, bad);
  if (!path) return fail("invalid URL escape \"" + bad + "\"");
  u.path = *path;
  u.raw_path = std::string(rest);
  return u;
}

class UrlValue final : public OpaqueValue {
 public:
  UrlValue(Url u, std::string text) : url(std::move(u)), text_(std::move(text)) {}
  std::string_view type_name() const override { return "kubernetes.URL"; }
  bool equals(const OpaqueValue& o) const override {
    return text_ == static_cast<const UrlValue&>(o).text_;
  }
  std::string literal() const override { return "url(\"" + text_ + "\")"; }
  Url url;

 private:
  std::string text_;
};

Value make_url(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  if (!parse(a[0].as_text(), true, error)) {
    return Value::error("URL parse error during conversion from string: " + error);
  }
  auto u = parse(a[0].as_text(), false, error);
  if (!u) return Value::error("URL parse error during conversion from string: " + error);
  return Value::opaque(std::make_shared<const UrlValue>(std::move(*u), std::string(a[0].as_text())));
}

Value is_url(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  return Value::boolean(parse(a[0].as_text(), true, error).has_value());
}

template <class F>
Value on_url(Args a, std::string_view name, F f) {
  const auto* u = a[0].opaque_as<UrlValue>();
  if (u == nullptr) return no_such_overload(name, a);
  return f(u->url);
}

std::string hostname(const Url& u) {
  std::string_view h = u.host;
  if (!h.empty() && h[0] == '[') {
    const auto close = h.find(']');
    return std::string(h.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  if (auto colon = h.rfind(':'); colon != std::string_view::npos) h = h.substr(0, colon);
  return std::string(h);
}

std::string port(const Url& u) {
  std::string_view h = u.host;
  if (!h.empty() && h[0] == '[') {
    const auto close = h.find(']');
    if (close == std::string_view::npos || close + 1 >= h.size()) return {};
    return std::string(h.substr(close + 2));
  }
  if (auto colon = h.rfind(':'); colon != std::string_view::npos) return std::string(h.substr(colon + 1));
  return {};
}

Value get_scheme(Args a, EvalBudget&) {
  return on_url(a, "getScheme", [](const Url& u) { return Value::string(u.scheme); });
}
Value get_host(Args a, EvalBudget&) {
  return on_url(a, "getHost", [](const Url& u) { return Value::string(u.host); });
}
Value get_hostname(Args a, EvalBudget&) {
  return on_url(a, "getHostname", [](const Url& u) { return Value::string(hostname(u)); });
}
Value get_port(Args a, EvalBudget&) {
  return on_url(a, "getPort", [](const Url& u) { return Value::string(port(u)); });
}
Value get_escaped_path(Args a, EvalBudget&) {
  return on_url(a, "getEscapedPath", [](const Url& u) { return Value::string(u.raw_path); });
}
Value get_query(Args a, EvalBudget&) {
  return on_url(a, "getQuery", [](const Url& u) {
    // Go's url.ParseQuery: pairs split on '&', keys and values decoded; bad pairs skipped.
    std::map<std::string, std::vector<Value>> values;
    std::vector<std::string> order;
    std::string_view q = u.raw_query;
    while (!q.empty()) {
      const std::size_t amp = q.find('&');
      std::string_view pair = q.substr(0, amp);
      q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
      if (pair.empty() || pair.find(';') != std::string_view::npos) continue;
      const std::size_t eq = pair.find('=');
      std::string bad;
      auto key = unescape(pair.substr(0, eq), true, bad);
      auto value = unescape(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true, bad);
      if (!key || !value) continue;
      if (!values.count(*key)) order.push_back(*key);
      values[*key].push_back(Value::string(*value));
    }
    auto m = std::make_shared<OwnedMap>();
    for (const auto& k : order) m->insert(Value::string(k), Value::list(values[k]));
    return Value::map(std::shared_ptr<const MapValue>(std::move(m)));
  });
}

}  // namespace

void add_url_library(FunctionRegistry& r) {
  r.add("url", "string_to_url", false, "string -> kubernetes.URL", make_url);
  r.add("isURL", "is_url_string", false, "string -> bool", is_url);
  r.add("getScheme", "url_get_scheme", true, "kubernetes.URL -> string", get_scheme);
  r.add("getHost", "url_get_host", true, "kubernetes.URL -> string", get_host);
  r.add("getHostname", "url_get_hostname", true, "kubernetes.URL -> string", get_hostname);
  r.add("getPort", "url_get_port", true, "kubernetes.URL -> string", get_port);
  r.add("getEscapedPath", "url_get_escaped_path", true, "kubernetes.URL -> string",
        get_escaped_path);
  r.add("getQuery", "url_get_query", true, "kubernetes.URL -> map(string, list(string))",
        get_query);
}

}  // namespace kwatch::cel
