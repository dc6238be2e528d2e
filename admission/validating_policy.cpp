#include "admission/validating_policy.hpp"

#include "admission/policy_runtime.hpp"
#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "cel/json_value.hpp"
#include "kinds/admission_policy.hpp"
#include "kinds/scheme.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <array>
#include <forward_list>
#include <map>
#include <span>

// The semantics follow k8s.io/apiserver 1.34 plugin/policy/validating.

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::object_member;
using apimachinery::trim_space;
using apimachinery::string_at;
using base::Errc;
using kinds::CompiledPolicy;
using kinds::PolicyExpression;
using registry::AdmissionAttributes;

namespace {

constexpr std::size_t kMaxMessageBytes = 5 * 1024;
constexpr std::size_t kMaxAuditValueBytes = 10 * 1024;
constexpr std::size_t kMaxAuditedFailures = 50;
constexpr std::string_view kOutOfBudget =
    "validation failed due to running out of cost budget, no further validation rules will be run";

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
  const std::string resource = group_resource(info);
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
    ConditionOutcome outcome = evaluate_conditions(policy_, activation_);
    if (outcome.hold) return true;
    if (!outcome.errors.empty() && policy_.fail_closed) {
      std::string message = outcome.errors.size() == 1 ? outcome.errors[0] : "[";
      if (outcome.errors.size() > 1) {
        for (std::size_t i = 0; i < outcome.errors.size(); ++i) {
          message += (i ? ", " : "") + outcome.errors[i];
        }
        message += "]";
      }
      failures.push_back(failed(std::move(message)));
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
          const std::string_view text = trim_space(m.value.as_text());
          if (!text.empty() && text.size() <= kMaxMessageBytes &&
              text.find('\n') == std::string_view::npos) {
            f.message = std::string(text);
          }
        }
      }
      if (f.message.empty()) f.message = v.message;
      if (f.message.empty()) f.message = "failed expression: " + std::string(trim_space(e.source));
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
          std::string value(trim_space(r.value.as_text()));
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

}  // namespace

ValidatingPolicyPlugin::ValidatingPolicyPlugin(std::shared_ptr<kinds::Scheme> scheme,
                                               std::shared_ptr<registry::CacherRegistry> cachers)
    : PolicyPluginBase(std::move(scheme), std::move(cachers), "v1", "validatingadmissionpolicies",
                       "validatingadmissionpolicybindings", kinds::compile_validating_policy) {}

ValidatingPolicyPlugin::~ValidatingPolicyPlugin() = default;

std::size_t ValidatingPolicyPlugin::bound_policies() const {
  std::size_t n = 0;
  for (const auto& p : source_->current()->policies) n += p.bindings.size();
  return n;
}

bool ValidatingPolicyPlugin::handles(const AdmissionAttributes& a) const {
  if (exempt_from_policies(a.info)) return false;
  const auto set = source_->current();
  // Until the policies are loaded, users' writes are refused (kwatch's own start-up writes
  // come first and pass).
  if (!set->loaded) return a.user != nullptr;
  return set->may_apply(a.info.group, a.info.resource);
}

asio::awaitable<std::optional<ApiError>> ValidatingPolicyPlugin::validate(
    const AdmissionAttributes& a, const json::object* object) {
  // Named, and assigned rather than returned from the await (GCC 12, docs/design.md).
  const asio::any_io_executor here = co_await asio::this_coro::executor;
  std::optional<ApiError> verdict;
  if (move_to_compute(here, a.info.group, a.info.resource)) {
    // Awaited here: the attributes and the object outlive the judgement.
    verdict = co_await asio::co_spawn(compute_, judge(a, object), asio::use_awaitable);
  } else {
    verdict = co_await judge(a, object);
  }
  co_return verdict;
}

asio::awaitable<std::optional<ApiError>> ValidatingPolicyPlugin::judge(
    const AdmissionAttributes& a, const json::object* object) {
  const auto set = source_->current();
  if (!set->loaded) co_return not_ready(a);
  const MatchRequest request = match_request(a, object);
  NamespaceLookup namespaces(*scheme_, cachers_.get());
  const NamespaceLabels namespace_labels = namespaces.labels();
  // What every matching policy's evaluation shares: the `request` document of each matched
  // resource and `namespaceObject`, made when first needed, in one buffer for the write.
  unsigned char buffer[4096];
  json::monotonic_resource scratch(buffer, sizeof buffer);
  const json::storage_ptr sp(&scratch);
  // A forward_list: the documents stay where they are while views of them are in use, and an
  // empty one allocates nothing.
  std::forward_list<std::pair<const kinds::ResourceInfo*, json::object>> request_docs;
  auto request_of = [&](const kinds::ResourceInfo& matched) -> const json::object& {
    for (const auto& [info, doc] : request_docs) {
      if (info == &matched) return doc;
    }
    return request_docs.emplace_front(&matched, request_json(a, matched, sp)).second;
  };
  std::shared_ptr<const kinds::PolicyAuthorizer> authorizer;  // made when first asked
  Outcome outcome;
  std::map<std::string, std::string> annotations;
  // A conversion the matched version needs that failed fails the write (decided in the loop,
  // returned after it: GCC 12).
  std::optional<ApiError> failure;
  for (const auto& entry : set->policies) {
    if (failure) break;
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
    // The objects as the matched resource serves them (through the definition's conversion
    // webhook when it has one).
    const kinds::ResourceInfo& matched_info = *matched.matched_info;
    auto forms = co_await convert_matched_forms(a.info, matched_info, object, a.old_object);
    if (!forms) {
      failure = forms.error();
      continue;
    }
    const json::object* seen_object = forms->object_or(object);
    const json::object* seen_old = forms->old_or(a.old_object);
    std::map<std::string, std::vector<std::string>> published;
    for (const PolicyBinding& binding : entry.bindings) {
      if (binding.match) {
        const MatchOutcome bound = binding.match->matches(request, scheme_.get(), namespace_labels);
        if (!bound.error.empty()) {
          deny_config(binding.name, "failed to configure binding: " + bound.error);
          continue;
        }
        if (!bound.matched) continue;
      }
      Params params = collect_params(policy, binding, a, *scheme_, cachers_.get());
      if (!params.error.empty()) {
        deny_config(binding.name, "failed to configure binding: " + params.error);
        continue;
      }
      if (!params.none && params.objects.empty()) continue;  // Allow: nothing to judge
      cel::JsonArena arena;
      static const json::object kNone;
      const json::object& request_doc =
          policy.uses(kinds::slot_request) ? request_of(matched_info) : kNone;
      const json::object* ns_doc =
          policy.uses(kinds::slot_namespace_object) ? namespaces.object_of(a) : nullptr;
      std::array<cel::Value, kinds::policy_slot_count> activation;
      if (policy.uses(kinds::slot_authorizer)) {
        if (!authorizer) authorizer = make_policy_authorizer(rbac_.get(), a.user);
        set_authorizer(activation, authorizer, a);
      }
      if (seen_object != nullptr) activation[kinds::slot_object] = cel::json_view(*seen_object, nullptr, arena);
      if (seen_old != nullptr) activation[kinds::slot_old_object] = cel::json_view(*seen_old, nullptr, arena);
      if (policy.uses(kinds::slot_request)) {
        activation[kinds::slot_request] =
            cel::json_view(request_doc, kinds::admission_request_type().get(), arena);
      }
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
        if (ns_doc != nullptr) {
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
  if (failure) co_return failure;
  if (!outcome.denied.empty()) co_return denial(a, object, outcome.denied.front());
  co_return std::nullopt;
}

}  // namespace kwatch::admission
