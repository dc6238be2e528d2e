#include "kinds/webhook_configuration.hpp"

#include "kinds/field_errors.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "base/base64.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::array_member;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::string_at;
using apimachinery::trim_space;
using field_errors::Causes;
using field_errors::check_label_selector;
using field_errors::duplicate;
using field_errors::go_strings;
using field_errors::index;
using field_errors::string_items;
using field_errors::invalid;
using field_errors::not_supported;
using field_errors::required;
using field_errors::too_many;

namespace {

const json::object kEmpty;

template <class Fn>
void for_each_webhook(const json::object& configuration, Fn&& fn) {
  if (const json::array* a = array_member(&configuration, "webhooks")) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      fn(i, (*a)[i].is_object() ? (*a)[i].get_object() : kEmpty);
    }
  }
}

// What an update keeps of what is stored (kube's validation options, decided by the old object
// as a whole).
struct Leniency {
  bool unique_names = true;
  bool no_side_effects = true;
  bool recognized_review_version = true;
  bool ignore_match_conditions = false;
};

bool known_review_version(std::string_view v) { return v == "v1" || v == "v1beta1"; }

Leniency leniency(const json::object& configuration, const json::object* old) {
  Leniency l;
  if (old == nullptr) return l;
  std::set<std::string> names;
  std::size_t old_count = 0;
  for_each_webhook(*old, [&](std::size_t, const json::object& w) {
    ++old_count;
    if (!names.insert(string_at(w, "name")).second) l.unique_names = false;
    const std::string side = string_at(w, "sideEffects");
    if (!w.contains("sideEffects") || (side != "None" && side != "NoneOnDryRun")) {
      l.no_side_effects = false;
    }
    const auto versions = string_items(&w, "admissionReviewVersions");
    if (!versions.empty() && std::none_of(versions.begin(), versions.end(),
                                          [](const std::string& v) { return known_review_version(v); })) {
      l.recognized_review_version = false;
    }
  });
  // Match conditions are not checked again when every webhook keeps its list.
  std::vector<const json::value*> now;
  for_each_webhook(configuration, [&](std::size_t, const json::object& w) {
    now.push_back(w.if_contains("matchConditions"));
  });
  if (now.size() == old_count) {
    bool same = true;
    for_each_webhook(*old, [&](std::size_t i, const json::object& w) {
      const json::value* before = w.if_contains("matchConditions");
      if ((before == nullptr) != (now[i] == nullptr) ||
          (before != nullptr && *before != *now[i])) {
        same = false;
      }
    });
    l.ignore_match_conditions = same;
  }
  return l;
}

// The parts of a URL that kube's webhook URL check looks at (Go's net/url), or the parse
// error's text.
struct UrlParts {
  std::string scheme, user, host, fragment, query;
  std::string error;
};

UrlParts parse_url(std::string_view url) {
  UrlParts p;
  for (char c : url) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      p.error = "parse " + go_quote(url) + ": net/url: invalid control character in URL";
      return p;
    }
  }
  std::string_view rest = url;
  if (auto hash = rest.find('#'); hash != std::string_view::npos) {
    p.fragment = std::string(rest.substr(hash + 1));
    rest = rest.substr(0, hash);
  }
  // A scheme: a letter, then letters, digits, '+', '-', '.', up to ':'.
  std::size_t i = 0;
  while (i < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[i])) != 0 ||
                             rest[i] == '+' || rest[i] == '-' || rest[i] == '.')) {
    ++i;
  }
  if (i < rest.size() && rest[i] == ':') {
    if (i == 0) {
      p.error = "parse " + go_quote(url) + ": missing protocol scheme";
      return p;
    }
    if (std::isalpha(static_cast<unsigned char>(rest[0])) != 0) {
      p.scheme = std::string(rest.substr(0, i));
      std::transform(p.scheme.begin(), p.scheme.end(), p.scheme.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      rest = rest.substr(i + 1);
    }
  }
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    p.query = std::string(rest.substr(q + 1));
    rest = rest.substr(0, q);
  }
  if (rest.starts_with("//")) {
    std::string_view authority = rest.substr(2);
    authority = authority.substr(0, authority.find('/'));
    if (auto at = authority.rfind('@'); at != std::string_view::npos) {
      p.user = std::string(authority.substr(0, at));
      authority = authority.substr(at + 1);
    }
    p.host = std::string(authority);
  }
  return p;
}

constexpr std::string_view kUrlForm = "; desired format: https://host[/path]";

}  // namespace

void check_webhook_url(const std::string& url, const std::string& path, Causes& causes) {
  const UrlParts p = parse_url(url);
  if (!p.error.empty()) {
    required(causes, path, "url must be a valid URL: " + p.error + std::string(kUrlForm));
    return;
  }
  if (p.scheme != "https") {
    invalid(causes, path, go_quote(p.scheme),
            "'https' is the only allowed URL scheme" + std::string(kUrlForm));
  }
  if (p.host.empty()) {
    invalid(causes, path, go_quote(p.host), "host must be specified" + std::string(kUrlForm));
  }
  if (!p.user.empty()) {
    invalid(causes, path, go_quote(p.user), "user information is not permitted in the URL");
  }
  if (!p.fragment.empty()) {
    invalid(causes, path, go_quote(p.fragment), "fragments are not permitted in the URL");
  }
  if (!p.query.empty()) {
    invalid(causes, path, go_quote(p.query), "query parameters are not permitted in the URL");
  }
}

void check_webhook_service(const json::object& service, const std::string& path,
                           Causes& causes) {
  // kube hands the Service's name and namespace to its check the other way round, so an empty
  // namespace is reported at `.name` and an empty name at `.namespace` (kube 1.34, kept so).
  if (string_at(service, "namespace").empty()) required(causes, path + ".name");
  if (string_at(service, "name").empty()) required(causes, path + ".namespace");
  if (const json::value* port = service.if_contains("port"); port != nullptr && port->is_int64()) {
    const std::int64_t p = port->get_int64();
    if (p < 1 || p > 65535) {
      invalid(causes, path + ".port", std::to_string(p),
              "port is not valid: must be between 1 and 65535, inclusive");
    }
  }
  const std::string p = string_at(service, "path");
  if (p.empty() || p == "/") return;
  const std::string at = path + ".path";
  if (p == "//") {
    invalid(causes, at, go_quote(p), "segment[0] may not be empty");
    return;
  }
  if (p[0] != '/') invalid(causes, at, go_quote(p), "must start with a '/'");
  std::string_view rest = std::string_view(p).substr(1);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  std::size_t k = 0;
  while (true) {
    const auto slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty()) {
      invalid(causes, at, go_quote(p), "segment[" + std::to_string(k) + "] may not be empty");
    } else {
      for (const auto& e : apimachinery::dns1123_subdomain_errors(segment)) {
        invalid(causes, at, go_quote(p), "segment[" + std::to_string(k) + "]: " + e);
      }
    }
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
    ++k;
  }
}

namespace {

// IsFullyQualifiedName: a subdomain of at least three labels.
void check_webhook_name(const std::string& name, const std::string& path, Causes& causes) {
  if (name.empty()) {
    required(causes, path);
    return;
  }
  const auto errors = apimachinery::dns1123_subdomain_errors(name);
  if (!errors.empty()) {
    std::string joined;
    for (const auto& e : errors) joined += (joined.empty() ? "" : ",") + e;
    invalid(causes, path, go_quote(name), joined);
    return;
  }
  if (std::count(name.begin(), name.end(), '.') < 2) {
    invalid(causes, path, go_quote(name),
            "should be a domain with at least three segments separated by dots");
  }
}

void check_enum(const json::object& w, std::string_view key, const std::string& path,
                std::initializer_list<std::string_view> supported, Causes& causes) {
  if (!w.contains(key)) return;
  const std::string v = string_at(w, key);
  if (std::find(supported.begin(), supported.end(), v) == supported.end()) {
    not_supported(causes, path + "." + std::string(key), v, supported);
  }
}

void check_match_conditions(const json::object& w, const std::string& path, Causes& causes) {
  const json::array* conditions = array_member(&w, "matchConditions");
  if (conditions == nullptr) return;
  const std::string base = path + ".matchConditions";
  if (conditions->size() > 64) too_many(causes, base, conditions->size(), 64);
  std::set<std::string> names;
  for (std::size_t i = 0; i < conditions->size(); ++i) {
    const json::object* c = (*conditions)[i].if_object();
    const std::string at = index(base, i);
    const std::string expression(trim_space(string_at(c, "expression")));
    if (expression.empty()) {
      required(causes, at + ".expression");
    } else {
      const PolicyExpression compiled = compile_webhook_match_condition(expression);
      if (!compiled.compile_error.empty()) {
        invalid(causes, at + ".expression", go_quote(expression), compiled.compile_error);
      }
    }
    const std::string n = string_at(c, "name");
    if (n.empty()) {
      required(causes, at + ".name");
      continue;
    }
    for (const auto& e : apimachinery::qualified_name_errors(n)) {
      invalid(causes, at + ".name", go_quote(n), e);
    }
    if (!names.insert(n).second) duplicate(causes, at + ".name", go_quote(n));
  }
}

// validateValidatingWebhook / validateMutatingWebhook, in kube's order.
void check_webhook(const json::object& w, const std::string& path, bool mutating,
                   const Leniency& lenient, Causes& causes) {
  check_webhook_name(string_at(w, "name"), path + ".name", causes);
  if (const json::array* rules = array_member(&w, "rules")) {
    for (std::size_t j = 0; j < rules->size(); ++j) {
      check_admission_rule((*rules)[j].if_object(), index(path + ".rules", j), causes);
    }
  }
  check_enum(w, "failurePolicy", path, {"Fail", "Ignore"}, causes);
  check_enum(w, "matchPolicy", path, {"Equivalent", "Exact"}, causes);
  const bool strict = lenient.no_side_effects;
  if (!w.contains("sideEffects")) {
    required(causes, path + ".sideEffects",
             strict ? "must specify one of None, NoneOnDryRun"
                    : "must specify one of None, NoneOnDryRun, Some, Unknown");
  } else if (strict) {
    check_enum(w, "sideEffects", path, {"None", "NoneOnDryRun"}, causes);
  } else {
    check_enum(w, "sideEffects", path, {"None", "NoneOnDryRun", "Some", "Unknown"}, causes);
  }
  if (const json::value* t = w.if_contains("timeoutSeconds"); t != nullptr && t->is_int64()) {
    if (t->get_int64() < 1 || t->get_int64() > 30) {
      invalid(causes, path + ".timeoutSeconds", std::to_string(t->get_int64()),
              "the timeout value must be between 1 and 30 seconds");
    }
  }
  for (const char* selector : {"namespaceSelector", "objectSelector"}) {
    if (const json::object* s = object_member(w, selector)) {
      check_label_selector(*s, path + "." + selector, causes);
    }
  }
  if (mutating) check_enum(w, "reinvocationPolicy", path, {"IfNeeded", "Never"}, causes);
  const json::object* client = object_member(w, "clientConfig");
  const json::value* url = client != nullptr ? client->if_contains("url") : nullptr;
  const json::object* service = object_member(client, "service");
  const std::string client_path = path + ".clientConfig";
  if ((url != nullptr && !url->is_null()) == (service != nullptr)) {
    required(causes, client_path, "exactly one of url or service is required");
  } else if (service != nullptr) {
    check_webhook_service(*service, client_path + ".service", causes);
  } else {
    check_webhook_url(string_at(client, "url"), client_path + ".url", causes);
  }
  if (!lenient.ignore_match_conditions) check_match_conditions(w, path, causes);
}

void check_review_versions(const json::object& w, const std::string& path,
                           const Leniency& lenient, Causes& causes) {
  const std::string at = path + ".admissionReviewVersions";
  const auto versions = string_items(&w, "admissionReviewVersions");
  if (versions.empty()) {
    required(causes, at, "must specify one of v1, v1beta1");
    return;
  }
  std::set<std::string> seen;
  bool known = false;
  for (std::size_t k = 0; k < versions.size(); ++k) {
    const std::string& v = versions[k];
    if (!seen.insert(v).second) {
      invalid(causes, index(at, k), go_quote(v), "duplicate version");
      continue;
    }
    for (const auto& e : apimachinery::dns1035_label_errors(v)) {
      invalid(causes, index(at, k), go_quote(v), e);
    }
    known = known || known_review_version(v);
  }
  if (lenient.recognized_review_version && !known) {
    invalid(causes, at, go_strings(versions), "must include at least one of v1, v1beta1");
  }
}

void validate_configuration(const json::object& configuration, const json::object* old,
                            bool mutating, Causes& causes) {
  const Leniency lenient = leniency(configuration, old);
  std::set<std::string> names;
  for_each_webhook(configuration, [&](std::size_t i, const json::object& w) {
    const std::string path = index("webhooks", i);
    check_webhook(w, path, mutating, lenient, causes);
    check_review_versions(w, path, lenient, causes);
    const std::string name = string_at(w, "name");
    if (lenient.unique_names && !name.empty() && !names.insert(name).second) {
      duplicate(causes, path + ".name", go_quote(name));
    }
  });
}

}  // namespace

void read_client_config(const json::object* client, CompiledWebhook& h) {
  h.url = string_at(client, "url");
  if (const json::object* s = object_member(client, "service")) {
    CompiledWebhook::Service service;
    service.ns = string_at(s, "namespace");
    service.name = string_at(s, "name");
    service.path = string_at(s, "path");
    if (const json::value* p = s->if_contains("port"); p != nullptr && p->is_int64()) {
      service.port = static_cast<int>(p->get_int64());
    }
    h.service = std::move(service);
  }
  if (auto ca = base::base64_decode(string_at(client, "caBundle"))) h.ca_pem = std::move(*ca);
}

std::vector<CompiledWebhook> compile_webhooks(const json::object& configuration, bool mutating) {
  std::vector<CompiledWebhook> out;
  const std::string configuration_name = string_at(object_member(configuration, "metadata"), "name");
  for_each_webhook(configuration, [&](std::size_t i, const json::object& w) {
    CompiledWebhook h;
    h.configuration = configuration_name;
    h.name = string_at(w, "name");
    h.index = i;
    h.mutating = mutating;
    read_client_config(object_member(w, "clientConfig"), h);
    h.fail_closed = string_at(w, "failurePolicy") != "Ignore";
    json::object match;
    for (const char* key : {"namespaceSelector", "objectSelector", "matchPolicy"}) {
      if (const json::value* v = w.if_contains(key)) match[key] = *v;
    }
    if (const json::value* rules = w.if_contains("rules")) match["resourceRules"] = *rules;
    h.match = std::move(match);
    h.side_effects = string_at(w, "sideEffects");
    if (const json::value* t = w.if_contains("timeoutSeconds"); t != nullptr && t->is_int64()) {
      h.timeout = std::chrono::seconds(std::clamp<std::int64_t>(t->get_int64(), 1, 30));
    }
    for (const auto& v : string_items(&w, "admissionReviewVersions")) {
      if (known_review_version(v)) {
        h.review_version = v;
        break;
      }
    }
    h.reinvoke = string_at(w, "reinvocationPolicy") == "IfNeeded";
    auto conditions = std::make_shared<CompiledPolicy>();
    conditions->name = h.name;
    if (const json::array* list = array_member(&w, "matchConditions")) {
      for (const auto& c : *list) {
        const json::object* co = c.if_object();
        conditions->match_conditions.push_back(
            {string_at(co, "name"),
             compile_webhook_match_condition(std::string(trim_space(string_at(co, "expression"))))});
        conditions->add(conditions->match_conditions.back().expression);
      }
    }
    h.conditions = std::move(conditions);
    out.push_back(std::move(h));
  });
  return out;
}

void validate_validating_webhook_configuration(const json::object& configuration,
                                               const json::object* old, Causes& causes) {
  validate_configuration(configuration, old, /*mutating=*/false, causes);
}

void validate_mutating_webhook_configuration(const json::object& configuration,
                                             const json::object* old, Causes& causes) {
  validate_configuration(configuration, old, /*mutating=*/true, causes);
}

}  // namespace kwatch::kinds
