#include "admission/validating_policy.hpp"

#include "admission/policy_matching.hpp"
#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/task_failure.hpp"
#include "cel/json_value.hpp"
#include "kinds/admission_policy.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "watch/cache_follower.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <map>
#include <span>

// The semantics follow k8s.io/apiserver 1.34 plugin/policy/validating and plugin/policy/generic.

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::array_member;
using apimachinery::object_member;
using apimachinery::string_at;
using apimachinery::strings_at;
using base::Errc;
using kinds::CompiledPolicy;
using kinds::PolicyExpression;
using registry::AdmissionAttributes;

namespace {

constexpr std::string_view kGroup = "admissionregistration.k8s.io";
constexpr std::uint64_t kPerCallLimit = 1'000'000;
constexpr std::uint64_t kPolicyBudget = 10'000'000;
constexpr std::uint64_t kMatchConditionBudget = 2'500'000;
constexpr std::size_t kMaxMessageBytes = 5 * 1024;
constexpr std::size_t kMaxAuditValueBytes = 10 * 1024;
constexpr std::size_t kMaxAuditedFailures = 50;
constexpr std::string_view kCostLimitExceeded = "operation cancelled: actual cost limit exceeded";
constexpr std::string_view kOutOfBudget =
    "validation failed due to running out of cost budget, no further validation rules will be run";

// The admission policy kinds are not judged by policies (kube's exemption).
bool exempt(const kinds::ResourceInfo& info) {
  if (info.group != kGroup) return false;
  const std::string& r = info.resource;
  return r == "validatingadmissionpolicies" || r == "validatingadmissionpolicybindings" ||
         r == "mutatingadmissionpolicies" || r == "mutatingadmissionpolicybindings";
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

struct ParamRef {
  std::string name, ns;
  std::optional<apimachinery::LabelSelector> selector;
  bool deny_when_missing = true;
};

struct Binding {
  std::string name;
  std::optional<ParamRef> param_ref;
  std::optional<CompiledMatch> match;
  std::vector<std::string> actions;  // Deny, Warn, Audit, as listed
};

}  // namespace

struct PolicySet {
  struct Entry {
    std::string resource_version;
    std::shared_ptr<const CompiledPolicy> policy;
    CompiledMatch match;
    bool has_match = false;
    std::vector<Binding> bindings;  // by name
  };
  std::vector<Entry> policies;  // by name
  bool loaded = false;
};

namespace {

// `variables` of a policy's expressions: each evaluated when first read, at most once per
// evaluation, its cost taken from the evaluation's budget.
class LazyVariables final : public cel::MapValue {
 public:
  LazyVariables(const CompiledPolicy& policy, std::span<const cel::Value> activation,
                std::uint64_t& remaining)
      : policy_(policy), activation_(activation), remaining_(remaining),
        results_(policy.variables.size()) {}

  std::size_t size() const override { return policy_.variables.size(); }
  std::optional<cel::Value> find(const cel::Value& key) const override {
    if (!key.is(cel::ValueKind::string)) return std::nullopt;
    return field(key.as_text());
  }
  std::optional<cel::Value> find_field(std::string_view json_name,
                                       const cel::Type*) const override {
    return field(json_name);
  }
  cel::Value key_at(std::size_t i) const override {
    return cel::Value::borrowed_string(policy_.variables[i].name);
  }
  cel::Value value_at(std::size_t i) const override { return value(i); }

 private:
  std::optional<cel::Value> field(std::string_view name) const {
    for (std::size_t i = 0; i < policy_.variables.size(); ++i) {
      if (policy_.variables[i].name == name) return value(i);
    }
    return std::nullopt;
  }

  cel::Value value(std::size_t i) const {
    const auto& variable = policy_.variables[i];
    if (results_[i]) return results_[i]->value;
    if (!variable.expression.program) {
      return cel::Value::error("composited variable \"" + variable.name +
                               "\" fails to compile: " + variable.expression.compile_error);
    }
    const std::uint64_t limit = std::min(kPerCallLimit, remaining_);
    results_[i] = variable.expression.program->evaluate(activation_, limit);
    remaining_ -= std::min(results_[i]->cost, remaining_);
    if (results_[i]->value.is_error()) {
      results_[i]->value = cel::Value::error("composited variable \"" + variable.name +
                                             "\" fails to evaluate: " +
                                             std::string(results_[i]->value.as_text()));
    }
    return results_[i]->value;
  }

  const CompiledPolicy& policy_;
  std::span<const cel::Value> activation_;
  std::uint64_t& remaining_;
  mutable std::vector<std::optional<cel::EvalResult>> results_;
};

// A validation that failed (or could not run) in one evaluation.
struct Failure {
  std::string message;
  std::string reason;   // "" for Invalid
  int index = -1;       // the validation's, when one failed
  bool always_deny = false;  // configuration and audit annotation errors ignore the actions
};

Failure failed(std::string message) {
  Failure f;
  f.message = std::move(message);
  return f;
}

// What one write's evaluation gathered across policies.
struct Outcome {
  struct Denied {
    std::string policy, binding;
    Failure failure;
  };
  std::vector<Denied> denied;
  json::array audited;
  std::vector<std::string> warnings;
};

std::string policy_error_message(std::string_view policy, std::string_view binding,
                                 std::string_view message) {
  std::string out = "ValidatingAdmissionPolicy '" + std::string(policy) + "'";
  if (!binding.empty()) out += " with binding '" + std::string(binding) + "'";
  return out + " denied request: " + std::string(message);
}

ApiError denial(const AdmissionAttributes& a, const json::object* object,
                const Outcome::Denied& d) {
  const kinds::ResourceInfo& info = a.info;
  std::string name = a.name;
  const json::object* meta = object_member(object != nullptr ? object : a.old_object, "metadata");
  if (name.empty()) name = string_at(meta, "name");
  if (name.empty()) name = string_at(meta, "generateName");
  if (name.empty()) name = "Unknown";
  const std::string message = policy_error_message(d.policy, d.binding, d.failure.message);
  const std::string resource = info.group.empty() ? info.resource : info.resource + "." + info.group;
  Errc code = Errc::invalid;
  if (d.failure.reason == "Forbidden") code = Errc::forbidden;
  if (d.failure.reason == "RequestEntityTooLarge") code = Errc::too_large;
  if (d.failure.reason == "Unauthorized") code = Errc::unauthorized;
  ApiError e(code, resource + " \"" + name + "\" is forbidden: " + message,
             {apimachinery::Cause{"", message, ""}});
  e.name = name;
  e.group = info.group;
  e.kind = info.resource;
  return e;
}

json::object group_version(const kinds::ResourceInfo& info, bool kind) {
  return json::object{{"group", info.group},
                      {"version", info.version},
                      {kind ? "kind" : "resource", kind ? info.kind : info.resource}};
}

// `request`: admission/v1 AdmissionRequest's fields as kube's policies see them (empty optional
// fields absent).
json::object request_json(const AdmissionAttributes& a, const kinds::ResourceInfo& matched) {
  json::object r;
  r["kind"] = group_version(matched, true);
  r["resource"] = group_version(matched, false);
  if (!a.subresource.empty()) r["subResource"] = a.subresource;
  r["requestKind"] = group_version(a.info, true);
  r["requestResource"] = group_version(a.info, false);
  if (!a.subresource.empty()) r["requestSubResource"] = a.subresource;
  if (!a.name.empty()) r["name"] = a.name;
  if (!a.ns.empty()) r["namespace"] = a.ns;
  r["operation"] = registry::operation_name(a.operation);
  json::object user;
  if (a.user != nullptr) {
    if (!a.user->name.empty()) user["username"] = a.user->name;
    if (!a.user->uid.empty()) user["uid"] = a.user->uid;
    if (!a.user->groups.empty()) {
      json::array groups;
      for (const auto& g : a.user->groups) groups.emplace_back(g);
      user["groups"] = std::move(groups);
    }
    if (!a.user->extra.empty()) {
      json::object extra;
      for (const auto& [k, values] : a.user->extra) {
        json::array v;
        for (const auto& s : values) v.emplace_back(s);
        extra[k] = std::move(v);
      }
      user["extra"] = std::move(extra);
    }
  } else {
    user["username"] = "system:apiserver";
    user["groups"] = json::array{"system:masters"};
  }
  r["userInfo"] = std::move(user);
  r["dryRun"] = a.dry_run;
  const char* options = a.operation == registry::AdmissionOperation::create   ? "CreateOptions"
                        : a.operation == registry::AdmissionOperation::update ? "UpdateOptions"
                                                                              : "DeleteOptions";
  json::object o{{"kind", options}, {"apiVersion", "meta.k8s.io/v1"}};
  if (a.dry_run) o["dryRun"] = json::array{"All"};
  r["options"] = std::move(o);
  return r;
}

// `namespaceObject`: the namespace's metadata kube keeps, its spec and status.
json::object namespace_json(const json::object& ns) {
  json::object out;
  json::object meta;
  if (const json::object* m = object_member(ns, "metadata")) {
    for (const char* key : {"name", "generateName", "namespace", "labels", "annotations", "uid",
                            "creationTimestamp", "deletionGracePeriodSeconds",
                            "deletionTimestamp", "generation", "resourceVersion", "finalizers"}) {
      if (const json::value* v = m->if_contains(key)) meta[key == std::string_view("uid") ? "UID" : key] = *v;
    }
  }
  out["metadata"] = std::move(meta);
  if (const json::value* v = ns.if_contains("spec")) out["spec"] = *v;
  if (const json::value* v = ns.if_contains("status")) out["status"] = *v;
  return out;
}

// The object as the matched resource serves it, when a rule matched an equivalent one.
json::object convert(const kinds::ResourceInfo& from, const kinds::ResourceInfo& to,
                     const json::object& object) {
  json::object out = object;
  if (from.hooks.to_stored) from.hooks.to_stored(out);
  if (to.hooks.to_served) to.hooks.to_served(out);
  out["apiVersion"] = to.api_version();
  out["kind"] = to.kind;
  return out;
}

bool cost_exceeded(const cel::Value& v) {
  return v.is_error() && v.as_text() == kCostLimitExceeded;
}

// One (policy, binding, param) evaluation: what failed, and the audit annotations it published.
class Evaluation {
 public:
  Evaluation(const CompiledPolicy& policy, std::span<cel::Value> activation)
      : policy_(policy), activation_(activation) {}

  // Whether every match condition holds; false with `failures` set when one errs under Fail.
  bool conditions_hold(std::vector<Failure>& failures) {
    std::uint64_t remaining = kMatchConditionBudget;
    std::vector<std::string> errors;
    for (const auto& condition : policy_.match_conditions) {
      const PolicyExpression& e = condition.expression;
      if (!e.program) {
        errors.push_back("compilation error: " + e.compile_error);
        continue;
      }
      const std::uint64_t limit = std::min(kPerCallLimit, remaining);
      const cel::EvalResult r = e.program->evaluate(activation_, limit);
      remaining -= std::min(r.cost, remaining);
      if (r.value.is_error()) {
        errors.push_back("expression '" + e.source + "' resulted in error: " +
                         std::string(r.value.as_text()));
      } else if (r.value.is(cel::ValueKind::boolean) && !r.value.as_bool()) {
        return false;
      }
    }
    if (errors.empty()) return true;
    if (policy_.fail_closed) {
      std::string message = errors.size() == 1 ? errors[0] : "[";
      if (errors.size() > 1) {
        for (std::size_t i = 0; i < errors.size(); ++i) message += (i ? ", " : "") + errors[i];
        message += "]";
      }
      failures.push_back({std::move(message), "", -1, false});
    }
    return false;
  }

  void validate(std::vector<Failure>& failures) {
    std::uint64_t remaining = kPolicyBudget;
    LazyVariables variables(policy_, activation_, remaining);
    activation_[kinds::slot_variables] = cel::Value::borrowed_map(&variables);
    for (std::size_t i = 0; i < policy_.validations.size(); ++i) {
      const auto& v = policy_.validations[i];
      const PolicyExpression& e = v.expression;
      if (!e.program) {
        if (policy_.fail_closed) failures.push_back(failed("compilation error: " + e.compile_error));
        continue;
      }
      const std::uint64_t limit = std::min(kPerCallLimit, remaining);
      const cel::EvalResult r = e.program->evaluate(activation_, limit);
      remaining -= std::min(r.cost, remaining);
      if (r.value.is_error()) {
        if (cost_exceeded(r.value) && limit < kPerCallLimit) {
          failures.clear();
          if (policy_.fail_closed) failures.push_back(failed(std::string(kOutOfBudget)));
          return;
        }
        if (policy_.fail_closed) {
          failures.push_back(failed("expression '" + e.source + "' resulted in error: " +
                                    std::string(r.value.as_text())));
        }
        continue;
      }
      if (r.value.is(cel::ValueKind::boolean) && r.value.as_bool()) continue;
      Failure f;
      f.reason = v.reason;
      f.index = static_cast<int>(i);
      if (v.message_expression && v.message_expression->program) {
        const std::uint64_t message_limit = std::min(kPerCallLimit, remaining);
        const cel::EvalResult m = v.message_expression->program->evaluate(activation_, message_limit);
        remaining -= std::min(m.cost, remaining);
        if (cost_exceeded(m.value) && message_limit < kPerCallLimit) {
          if (policy_.fail_closed) {
            failures.push_back(failed("failed messageExpression: " + std::string(m.value.as_text())));
          }
          continue;
        }
        if (m.value.is(cel::ValueKind::string)) {
          const std::string_view text = trim(m.value.as_text());
          if (!text.empty() && text.size() <= kMaxMessageBytes &&
              text.find('\n') == std::string_view::npos) {
            f.message = std::string(text);
          }
        }
      }
      if (f.message.empty()) f.message = v.message;
      if (f.message.empty()) f.message = "failed expression: " + std::string(trim(e.source));
      failures.push_back(std::move(f));
    }
  }

  // Evaluates the audit annotations: values by key into `published`; errors (under Fail) deny.
  void annotate(std::map<std::string, std::vector<std::string>>& published,
                std::vector<Failure>& failures) {
    std::uint64_t remaining = kPolicyBudget;
    LazyVariables variables(policy_, activation_, remaining);
    activation_[kinds::slot_variables] = cel::Value::borrowed_map(&variables);
    for (const auto& a : policy_.audit_annotations) {
      const PolicyExpression& e = a.value;
      std::string error;
      if (!e.program) {
        error = e.compile_error;
      } else {
        const std::uint64_t limit = std::min(kPerCallLimit, remaining);
        const cel::EvalResult r = e.program->evaluate(activation_, limit);
        remaining -= std::min(r.cost, remaining);
        if (r.value.is_error()) {
          error = "expression '" + e.source + "' resulted in error: " + std::string(r.value.as_text());
        } else if (r.value.is(cel::ValueKind::string)) {
          std::string value(trim(r.value.as_text()));
          if (value.size() > kMaxAuditValueBytes) value.resize(kMaxAuditValueBytes);
          if (!value.empty()) {
            auto& values = published[a.key];
            if (std::find(values.begin(), values.end(), value) == values.end()) {
              values.push_back(std::move(value));
            }
          }
        } else if (!r.value.is(cel::ValueKind::null)) {
          error = "valueExpression '" + e.source + "' resulted in unsupported return type: " +
                  std::string(r.value.type_name()) +
                  ". Return type must be either string or null.";
        }
      }
      if (!error.empty() && policy_.fail_closed) {
        failures.push_back({std::move(error), "", -1, true});
      }
    }
  }

 private:
  const CompiledPolicy& policy_;
  std::span<cel::Value> activation_;
};

// The params a binding's paramRef finds: objects (JSON as cached), or an error text.
struct Params {
  std::vector<json::value> objects;
  bool none = false;  // no paramKind or no paramRef: one evaluation with params null
  std::string error;
};

Params collect_params(const CompiledPolicy& policy, const Binding& binding,
                      const AdmissionAttributes& a, const kinds::Scheme& scheme,
                      const registry::CacherRegistry& cachers) {
  Params out;
  if (!policy.has_param_kind || !binding.param_ref) {
    out.none = true;
    return out;
  }
  const std::string& api_version = policy.param_api_version;
  const auto slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  const std::string version =
      slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  auto info = scheme.find_kind(group, version, policy.param_kind);
  if (!info) {
    out.error = "failed to find resource referenced by paramKind: '" + group + "/" + version +
                ", Kind=" + policy.param_kind + "'";
    return out;
  }
  auto cacher = cachers.find(*info);
  if (!cacher || !cacher->ready()) {
    out.error = "paramKind kind `" + group + "/" + version + ", Kind=" + policy.param_kind +
                "` not yet synced to use for admission";
    return out;
  }
  const ParamRef& ref = *binding.param_ref;
  std::string ns;
  if (info->namespaced) {
    ns = ref.ns.empty() ? a.ns : ref.ns;
    if (ns.empty()) {
      out.error = "cannot use namespaced paramRef in policy binding that matches cluster-scoped "
                  "resources";
      return out;
    }
  } else if (!ref.ns.empty()) {
    out.error = "paramRef.namespace must not be provided for a cluster-scoped `paramKind`";
    return out;
  }
  auto add = [&](const watch::CachedObject& cached) {
    if (auto v = apimachinery::parse_json(cached.json); v && v->is_object()) {
      out.objects.push_back(std::move(*v));
    }
  };
  if (!ref.name.empty()) {
    if (auto cached = cacher->get(info->key(ns, ref.name))) add(*cached);
  } else if (ref.selector) {
    const std::string prefix = info->namespaced ? info->namespace_prefix(ns) : info->key_prefix();
    for (const auto& cached : cacher->list(prefix, "", 0, nullptr).objects) {
      json::object labels;
      for (const auto& [k, v] : cached->labels) labels[k] = v;
      if (ref.selector->matches(&labels)) add(*cached);
    }
  }
  if (out.objects.empty() && ref.deny_when_missing) {
    out.error = "no params found for policy binding with `Deny` parameterNotFoundAction";
  }
  return out;
}

std::optional<json::object> find_namespace(const kinds::Scheme& scheme,
                                           const registry::CacherRegistry& cachers,
                                           std::string_view name) {
  auto info = scheme.find("", "v1", "namespaces");
  auto cacher = info ? cachers.find(*info) : nullptr;
  if (!cacher) return std::nullopt;
  auto cached = cacher->get(info->key("", name));
  if (!cached) return std::nullopt;
  auto v = apimachinery::parse_json(cached->json);
  if (!v || !v->is_object()) return std::nullopt;
  return std::move(v->get_object());
}

Binding compile_binding(const json::object& object) {
  Binding b;
  b.name = string_at(object_member(object, "metadata"), "name");
  const json::object* spec = object_member(object, "spec");
  if (const json::object* ref = object_member(spec, "paramRef")) {
    ParamRef p;
    p.name = string_at(ref, "name");
    p.ns = string_at(ref, "namespace");
    if (const json::object* selector = object_member(ref, "selector")) {
      if (auto s = apimachinery::label_selector_from_json(*selector)) p.selector = std::move(*s);
    }
    p.deny_when_missing = string_at(ref, "parameterNotFoundAction") != "Allow";
    b.param_ref = std::move(p);
  }
  if (const json::object* match = object_member(spec, "matchResources")) {
    b.match = CompiledMatch::compile(*match, /*empty_rules_match_all=*/true);
  }
  b.actions = strings_at(spec ? *spec : json::object(), "validationActions");
  return b;
}

}  // namespace

ValidatingPolicyPlugin::ValidatingPolicyPlugin(std::shared_ptr<kinds::Scheme> scheme,
                                               std::shared_ptr<registry::CacherRegistry> cachers)
    : scheme_(std::move(scheme)), cachers_(std::move(cachers)),
      set_(std::make_shared<const PolicySet>()) {}

ValidatingPolicyPlugin::~ValidatingPolicyPlugin() = default;

std::shared_ptr<const PolicySet> ValidatingPolicyPlugin::current() const {
  return std::atomic_load(&set_);
}

bool ValidatingPolicyPlugin::loaded() const { return current()->loaded; }

std::size_t ValidatingPolicyPlugin::bound_policies() const {
  std::size_t n = 0;
  for (const auto& p : current()->policies) n += p.bindings.size();
  return n;
}

void ValidatingPolicyPlugin::start(asio::any_io_executor executor) {
  auto strand = asio::make_strand(executor);
  auto log = [](std::exception_ptr e) { base::log_task_failure(e, "admission policy task"); };
  asio::co_spawn(strand, [self = shared_from_this()] { return self->run(); }, log);
  for (const char* resource : {"validatingadmissionpolicies", "validatingadmissionpolicybindings"}) {
    asio::co_spawn(strand, [self = shared_from_this(), resource] { return self->follow(resource); },
                   log);
  }
}

asio::awaitable<void> ValidatingPolicyPlugin::follow(std::string resource) {
  auto info = scheme_->find(kGroup, "v1", resource);
  watch::CacheFollower follower;
  follower.cacher = info ? cachers_->find(*info) : nullptr;
  if (!follower.cacher) co_return;
  follower.prefix = info->key_prefix();
  follower.keep_going = [this] { return !stopped_; };
  follower.on_start = [this]() -> asio::awaitable<void> {
    dirty_ = true;
    co_return;
  };
  follower.on_frames = [this](const std::vector<watch::WatchFrame>&) -> asio::awaitable<void> {
    dirty_ = true;
    co_return;
  };
  co_await watch::follow_cache(std::move(follower));
}

asio::awaitable<void> ValidatingPolicyPlugin::run() {
  // Changes come in bursts (kubectl apply of a policy and its bindings): at most every 100 ms.
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (!stopped_) {
    if (dirty_.exchange(false)) rebuild();
    tick.expires_after(std::chrono::milliseconds(100));
    co_await tick.async_wait(asio::use_awaitable);
  }
}

void ValidatingPolicyPlugin::rebuild() {
  std::vector<json::object> lists[2];
  const char* resources[2] = {"validatingadmissionpolicies", "validatingadmissionpolicybindings"};
  for (int i = 0; i < 2; ++i) {
    auto info = scheme_->find(kGroup, "v1", resources[i]);
    auto cacher = info ? cachers_->find(*info) : nullptr;
    if (!cacher || !cacher->ready()) {
      dirty_ = true;  // again at the next tick
      return;
    }
    for (const auto& object : cacher->list(info->key_prefix(), "", 0, nullptr).objects) {
      auto v = apimachinery::parse_json(object->json);
      if (v && v->is_object()) lists[i].push_back(std::move(v->get_object()));
    }
  }
  // A policy whose resourceVersion did not change keeps its compiled programs.
  std::map<std::string, const PolicySet::Entry*, std::less<>> previous;
  const auto old = current();
  for (const auto& entry : old->policies) previous.emplace(entry.policy->name, &entry);
  auto next = std::make_shared<PolicySet>();
  next->loaded = true;
  std::map<std::string, std::vector<Binding>, std::less<>> bindings;
  for (const json::object& b : lists[1]) {
    const std::string name = string_at(object_member(b, "spec"), "policyName");
    bindings[name].push_back(compile_binding(b));
  }
  for (const json::object& p : lists[0]) {
    const json::object* meta = object_member(p, "metadata");
    const std::string name = string_at(meta, "name");
    PolicySet::Entry entry;
    entry.resource_version = string_at(meta, "resourceVersion");
    auto it = previous.find(name);
    if (it != previous.end() && it->second->resource_version == entry.resource_version) {
      entry.policy = it->second->policy;
    } else {
      entry.policy = kinds::compile_validating_policy(p);
    }
    if (const json::object* match = object_member(object_member(p, "spec"), "matchConstraints")) {
      entry.match = CompiledMatch::compile(*match, /*empty_rules_match_all=*/false);
      entry.has_match = true;
    }
    if (auto b = bindings.find(name); b != bindings.end()) entry.bindings = std::move(b->second);
    std::sort(entry.bindings.begin(), entry.bindings.end(),
              [](const Binding& x, const Binding& y) { return x.name < y.name; });
    next->policies.push_back(std::move(entry));
  }
  std::sort(next->policies.begin(), next->policies.end(),
            [](const auto& x, const auto& y) { return x.policy->name < y.policy->name; });
  std::atomic_store(&set_, std::shared_ptr<const PolicySet>(std::move(next)));
}

bool ValidatingPolicyPlugin::handles(const AdmissionAttributes& a) const {
  if (exempt(a.info)) return false;
  const auto set = current();
  // Until the policies are loaded, users' writes are refused (kwatch's own start-up writes
  // come first and pass).
  if (!set->loaded) return a.user != nullptr;
  for (const auto& entry : set->policies) {
    if (!entry.bindings.empty() && entry.has_match &&
        entry.match.may_match(a.info.group, a.info.resource)) {
      return true;
    }
  }
  return false;
}

asio::awaitable<std::optional<ApiError>> ValidatingPolicyPlugin::validate(
    const AdmissionAttributes& a, const json::object* object) {
  const auto set = current();
  if (!set->loaded) {
    const std::string resource =
        a.info.group.empty() ? a.info.resource : a.info.resource + "." + a.info.group;
    ApiError e(Errc::forbidden, resource + " \"" + a.name + "\" is forbidden: not yet ready to handle request");
    e.name = a.name;
    e.group = a.info.group;
    e.kind = a.info.resource;
    co_return e;
  }
  MatchRequest request;
  request.info = &a.info;
  request.subresource = a.subresource;
  request.ns = a.ns;
  request.name = a.name;
  request.operation = registry::operation_name(a.operation);
  request.object = object;
  request.old_object = a.old_object;
  auto namespace_labels = [&](std::string_view ns) -> std::optional<json::object> {
    auto found = find_namespace(*scheme_, *cachers_, ns);
    if (!found) return std::nullopt;
    const json::object* labels = object_member(object_member(*found, "metadata"), "labels");
    return labels != nullptr ? *labels : json::object();
  };
  Outcome outcome;
  std::map<std::string, std::string> annotations;
  for (const auto& entry : set->policies) {
    if (entry.bindings.empty() || !entry.has_match) continue;
    const CompiledPolicy& policy = *entry.policy;
    auto deny_config = [&](const std::string& binding, std::string message) {
      if (!policy.fail_closed) return;
      outcome.denied.push_back({policy.name, binding, {std::move(message), "", -1, true}});
    };
    const MatchOutcome matched = entry.match.matches(request, scheme_.get(), namespace_labels);
    if (!matched.error.empty()) {
      deny_config("", "failed to configure policy: " + matched.error);
      continue;
    }
    if (!matched.matched) continue;
    // The objects as the matched resource serves them.
    std::optional<json::object> converted_object, converted_old;
    const json::object* seen_object = object;
    const json::object* seen_old = a.old_object;
    const kinds::ResourceInfo& matched_info = *matched.matched_info;
    if (matched_info.group != a.info.group || matched_info.version != a.info.version) {
      if (object != nullptr) seen_object = &converted_object.emplace(convert(a.info, matched_info, *object));
      if (a.old_object != nullptr) {
        seen_old = &converted_old.emplace(convert(a.info, matched_info, *a.old_object));
      }
    }
    std::map<std::string, std::vector<std::string>> published;
    for (const Binding& binding : entry.bindings) {
      if (binding.match) {
        const MatchOutcome bound = binding.match->matches(request, scheme_.get(), namespace_labels);
        if (!bound.error.empty()) {
          deny_config(binding.name, "failed to configure binding: " + bound.error);
          continue;
        }
        if (!bound.matched) continue;
      }
      Params params = collect_params(policy, binding, a, *scheme_, *cachers_);
      if (!params.error.empty()) {
        deny_config(binding.name, "failed to configure binding: " + params.error);
        continue;
      }
      if (!params.none && params.objects.empty()) continue;  // Allow: nothing to judge
      cel::JsonArena arena;
      const json::object request_doc = request_json(a, matched_info);
      std::optional<json::object> ns_doc;
      if (!a.ns.empty() && !(a.info.group.empty() && a.info.resource == "namespaces")) {
        if (auto ns = find_namespace(*scheme_, *cachers_, a.ns)) ns_doc = namespace_json(*ns);
      }
      std::vector<cel::Value> activation(kinds::policy_slot_count);
      if (seen_object != nullptr) activation[kinds::slot_object] = cel::json_view(*seen_object, nullptr, arena);
      if (seen_old != nullptr) activation[kinds::slot_old_object] = cel::json_view(*seen_old, nullptr, arena);
      activation[kinds::slot_request] =
          cel::json_view(request_doc, kinds::admission_request_type().get(), arena);
      const std::size_t runs = params.none ? 1 : params.objects.size();
      for (std::size_t p = 0; p < runs; ++p) {
        activation[kinds::slot_params] =
            params.none ? cel::Value() : cel::json_view(params.objects[p], nullptr, arena);
        activation[kinds::slot_namespace_object] = cel::Value();  // never in match conditions
        Evaluation evaluation(policy, activation);
        std::vector<Failure> failures;
        if (!evaluation.conditions_hold(failures)) {
          for (auto& f : failures) outcome.denied.push_back({policy.name, binding.name, std::move(f)});
          continue;
        }
        if (ns_doc) {
          activation[kinds::slot_namespace_object] =
              cel::json_view(*ns_doc, kinds::namespace_object_type().get(), arena);
        }
        evaluation.validate(failures);
        evaluation.annotate(published, failures);
        activation[kinds::slot_variables] = cel::Value();
        for (Failure& f : failures) {
          if (f.always_deny) {
            outcome.denied.push_back({policy.name, binding.name, std::move(f)});
            continue;
          }
          for (const std::string& action : binding.actions) {
            if (action == "Deny") {
              outcome.denied.push_back({policy.name, binding.name, f});
            } else if (action == "Warn") {
              outcome.warnings.push_back("Validation failed for ValidatingAdmissionPolicy '" +
                                         policy.name + "' with binding '" + binding.name +
                                         "': " + f.message);
            } else if (action == "Audit" && outcome.audited.size() < kMaxAuditedFailures) {
              json::array actions;
              for (const auto& x : binding.actions) actions.emplace_back(x);
              outcome.audited.push_back(json::object{{"message", f.message},
                                                     {"policy", policy.name},
                                                     {"binding", binding.name},
                                                     {"expressionIndex", f.index},
                                                     {"validationActions", std::move(actions)}});
            }
          }
        }
      }
    }
    for (const auto& [key, values] : published) {
      std::string joined;
      for (const auto& v : values) joined += (joined.empty() ? "" : ", ") + v;
      annotations[policy.name + "/" + key] = std::move(joined);
    }
  }
  for (auto& [key, value] : annotations) registry::add_audit_annotation(a, key, std::move(value));
  if (!outcome.audited.empty()) {
    registry::add_audit_annotation(a, "validation.policy.admission.k8s.io/validation_failure",
                                   json::serialize(outcome.audited));
  }
  for (auto& w : outcome.warnings) registry::add_warning(a, std::move(w));
  if (!outcome.denied.empty()) co_return denial(a, object, outcome.denied.front());
  co_return std::nullopt;
}

}  // namespace kwatch::admission
