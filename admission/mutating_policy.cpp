#include "admission/mutating_policy.hpp"

#include "admission/policy_runtime.hpp"
#include "apimachinery/json_members.hpp"
#include "apimachinery/json_patch.hpp"
#include "cel/json_value.hpp"
#include "kinds/admission_policy.hpp"
#include "kinds/scheme.hpp"
#include "schema/field_type.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <set>
#include <tuple>

// The semantics follow k8s.io/apiserver 1.34 plugin/policy/mutating.

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using base::Errc;
using kinds::CompiledPolicy;
using registry::AdmissionAttributes;

namespace {

// An invocation: one (policy, binding, param).
using InvocationKey = std::tuple<std::string, std::string, std::size_t>;

// The parts of `config` that set an atomic list, map or structure of `type` (kube refuses an
// apply configuration that does, since merging would replace what it does not name).
void atomic_paths(const json::value& config, const schema::FieldType& type, const std::string& at,
                  std::vector<std::string>& out) {
  using Form = schema::FieldType::Form;
  switch (type.form) {
    case Form::structure:
      if (!config.is_object()) return;
      if (type.atomic) {
        out.push_back(at);
        return;
      }
      for (const auto& [name, value] : config.get_object()) {
        const schema::FieldType* field = type.field(name);
        if (field == nullptr) field = type.element;
        if (field != nullptr) atomic_paths(value, *field, at + "." + std::string(name), out);
      }
      return;
    case Form::map:
      if (!config.is_object()) return;
      if (type.atomic) {
        out.push_back(at);
        return;
      }
      if (type.element != nullptr) {
        for (const auto& [name, value] : config.get_object()) {
          atomic_paths(value, *type.element, at + "." + std::string(name), out);
        }
      }
      return;
    case Form::list:
      if (!config.is_array()) return;
      if (type.atomic) {
        out.push_back(at);
        return;
      }
      if (type.element != nullptr) {
        for (std::size_t i = 0; i < config.get_array().size(); ++i) {
          atomic_paths(config.get_array()[i], *type.element, at + "[" + std::to_string(i) + "]",
                       out);
        }
      }
      return;
    case Form::deduced:
      if (config.is_array()) out.push_back(at);
      return;
    case Form::scalar:
      return;
  }
}

// Applies one mutation's result to `object`; an error text when it cannot be applied.
std::optional<std::string> apply_mutation(const kinds::ResourceInfo& info,
                                          const CompiledPolicy::Mutation& m,
                                          const cel::Value& result, json::object& object) {
  std::string error;
  auto patch = cel::json_from_value(result, &error);
  if (!patch) {
    return (m.json_patch ? "JSONPath valueExpression evaluated to a type that could not marshal "
                           "to JSON: "
                         : "failed to convert patch object to typed object: ") +
           error;
  }
  if (!m.json_patch) {
    if (!patch->is_object()) return "apply configuration must be an object";
    json::object& config = patch->get_object();
    config["apiVersion"] = object.contains("apiVersion") ? object.at("apiVersion") : json::value();
    config["kind"] = object.contains("kind") ? object.at("kind") : json::value();
    static const auto kDeduced = schema::FieldTypes::of_resource(json::object());
    const schema::FieldType& root = (info.field_types ? info.field_types : kDeduced)->root();
    std::vector<std::string> atomic;
    for (const auto& [name, value] : config) {
      if (name == "apiVersion" || name == "kind") continue;
      if (const schema::FieldType* field = root.field(name)) {
        atomic_paths(value, *field, "." + std::string(name), atomic);
      }
    }
    if (!atomic.empty()) {
      std::string joined;
      for (const auto& p : atomic) joined += (joined.empty() ? "" : ", ") + p;
      return "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, "
             "maps or structs: " + joined;
    }
    object = schema::merge(object, config, root);
    return std::nullopt;
  }
  if (!patch->is_array()) return "JSON Patch: the expression must give a list of JSONPatch";
  std::string detail;
  auto patched = apimachinery::apply_json_patch(json::value(object), *patch, &detail);
  if (!patched) {
    // A failed `test` leaves the object as it was, without an error.
    if (detail.find("test failed") != std::string::npos) return std::nullopt;
    return "JSON Patch: " + (detail.empty() ? patched.error().message : detail);
  }
  if (!patched->is_object()) return "JSON Patch: the result is not an object";
  object = std::move(patched->get_object());
  return std::nullopt;
}

// 403 with kube's message; `reason` Invalid for what a policy's expressions did (kube keeps the
// code Forbidden), none for a policy or binding that cannot be configured.
ApiError refusal(const std::string& policy, const std::string& binding, const std::string& why,
                 const char* reason = "Invalid") {
  std::string message = binding.empty()
                            ? "policy \"" + policy + "\" denied request: " + why
                            : "policy '" + policy + "' with binding '" + binding +
                                  "' denied request: " + why;
  ApiError e(Errc::forbidden, message, {apimachinery::Cause{"", message, ""}});
  e.reason = reason;  // "": the code's, Forbidden
  return e;
}

// One pass over the policies in force. `only` (pass two) limits it to those invocations;
// `reinvocable` (pass one) receives each IfNeeded invocation with the object as it left it.
// An equivalent version of a custom resource whose definition converts through a webhook is
// converted through it (convert_matched); a failed conversion fails the write.
asio::awaitable<std::optional<ApiError>> mutate_once(
    const PolicySet& set, const AdmissionAttributes& a, json::object& object,
    const kinds::Scheme& scheme, const registry::CacherRegistry* cachers,
    const std::shared_ptr<const kinds::PolicyAuthorizer>& authorizer,
    const std::set<InvocationKey>* only,
    std::vector<std::pair<InvocationKey, json::object>>* reinvocable) {
  MatchRequest request = match_request(a, nullptr);
  NamespaceLookup namespaces(scheme, cachers);
  const NamespaceLabels namespace_labels = namespaces.labels();
  // Decided in the loops, returned after them (GCC 12: no co_return inside a loop with locals).
  std::optional<ApiError> failure;
  for (const auto& entry : set.policies) {
    if (failure) break;
    if (entry.bindings.empty() || !entry.has_match) continue;
    const CompiledPolicy& policy = *entry.policy;
    request.object = &object;
    const MatchOutcome matched = entry.match.matches(request, &scheme, namespace_labels);
    if (!matched.error.empty()) {
      if (policy.fail_closed) {
        failure = refusal(policy.name, "", "failed to configure policy: " + matched.error, "");
      }
      continue;
    }
    if (!matched.matched) continue;
    for (const PolicyBinding& binding : entry.bindings) {
      if (failure) break;
      if (binding.match) {
        const MatchOutcome bound = binding.match->matches(request, &scheme, namespace_labels);
        if (!bound.error.empty()) {
          if (policy.fail_closed) {
            failure = refusal(policy.name, binding.name,
                              "failed to configure binding: " + bound.error, "");
          }
          continue;
        }
        if (!bound.matched) continue;
      }
      Params params = collect_params(policy, binding, a, scheme, cachers);
      if (!params.error.empty()) {
        if (policy.fail_closed) {
          failure = refusal(policy.name, binding.name,
                            "failed to configure binding: " + params.error, "");
        }
        continue;
      }
      const std::size_t runs = params.none ? 1 : params.objects.size();
      const json::object request_doc = policy.uses(kinds::slot_request)
                                           ? request_json(a, *matched.matched_info)
                                           : json::object();
      // A rule that matched an equivalent resource mutates the object as that one serves it.
      const kinds::ResourceInfo& matched_info = *matched.matched_info;
      const bool converted =
          matched_info.group != a.info.group || matched_info.version != a.info.version;
      std::optional<json::object> old_converted;
      if (converted && a.old_object != nullptr) {
        auto c = co_await convert_matched(a.info, matched_info, *a.old_object);
        if (!c) {
          failure = c.error();
          continue;
        }
        old_converted = std::move(*c);
      }
      const json::object* old_seen = old_converted ? &*old_converted : a.old_object;
      for (std::size_t p = 0; p < runs; ++p) {
        if (failure) break;
        const InvocationKey key{policy.name, binding.name, p};
        if (only != nullptr && !only->contains(key)) continue;
        json::object seen;
        if (converted) {
          auto c = co_await convert_matched(a.info, matched_info, object);
          if (!c) {
            failure = c.error();
            continue;
          }
          seen = std::move(*c);
        }
        json::object& target = converted ? seen : object;
        bool conditions_checked = false;
        bool mutated = false;
        for (const auto& mutation : policy.mutations) {
          // Each mutation sees the object as the ones before it left it.
          cel::JsonArena arena;
          std::vector<cel::Value> activation(kinds::policy_slot_count);
          activation[kinds::slot_object] = cel::json_view(target, nullptr, arena);
          if (old_seen != nullptr) {
            activation[kinds::slot_old_object] = cel::json_view(*old_seen, nullptr, arena);
          }
          if (policy.uses(kinds::slot_request)) {
            activation[kinds::slot_request] =
                cel::json_view(request_doc, kinds::admission_request_type().get(), arena);
          }
          if (!params.none) activation[kinds::slot_params] = cel::json_view(params.objects[p], nullptr, arena);
          if (policy.uses(kinds::slot_authorizer)) set_authorizer(activation, authorizer, a);
          if (!conditions_checked) {
            conditions_checked = true;
            ConditionOutcome conditions = evaluate_conditions(policy, activation);
            if (!conditions.hold) {
              if (!conditions.errors.empty() && policy.fail_closed) {
                failure = refusal(policy.name, binding.name, conditions.errors.front());
              }
              break;
            }
          }
          const json::object* ns_doc =
              policy.uses(kinds::slot_namespace_object) ? namespaces.object_of(a) : nullptr;
          if (ns_doc != nullptr) {
            activation[kinds::slot_namespace_object] =
                cel::json_view(*ns_doc, kinds::namespace_object_type().get(), arena);
          }
          std::uint64_t remaining = kPolicyBudget;
          LazyVariables variables(policy, activation, remaining);
          activation[kinds::slot_variables] = cel::Value::borrowed_map(&variables);
          std::optional<std::string> error;
          if (!mutation.expression.program) {
            error = mutation.expression.compile_error;
          } else {
            const std::uint64_t limit = std::min(kPerCallLimit, remaining);
            const cel::EvalResult r = mutation.expression.program->evaluate(activation, limit);
            if (r.value.is_error()) {
              error = "expression '" + mutation.expression.source + "' resulted in error: " +
                      std::string(r.value.as_text());
            } else {
              error = apply_mutation(matched_info, mutation, r.value, target);
              mutated = mutated || !error;
            }
          }
          if (error && policy.fail_closed) {
            failure = refusal(policy.name, binding.name, *error);
            break;
          }
        }
        if (failure) continue;
        if (converted && mutated) {
          auto back = co_await convert_matched(matched_info, a.info, seen);
          if (!back) {
            failure = back.error();
            continue;
          }
          object = std::move(*back);
        }
        if (reinvocable != nullptr && policy.reinvoke) reinvocable->emplace_back(key, object);
      }
    }
  }
  co_return failure;
}

}  // namespace

MutatingPolicyPlugin::MutatingPolicyPlugin(std::shared_ptr<kinds::Scheme> scheme,
                                           std::shared_ptr<registry::CacherRegistry> cachers)
    : PolicyPluginBase(std::move(scheme), std::move(cachers), "v1beta1",
                       "mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
                       kinds::compile_mutating_policy) {}

MutatingPolicyPlugin::~MutatingPolicyPlugin() = default;

bool MutatingPolicyPlugin::handles(const AdmissionAttributes& a) const {
  // A connect's options are not mutated: kwatch serves no stream they could change.
  if (a.operation == registry::AdmissionOperation::remove ||
      a.operation == registry::AdmissionOperation::connect || exempt_from_policies(a.info)) {
    return false;
  }
  const auto set = source_->current();
  if (!set->loaded) return a.user != nullptr;
  return set->may_apply(a.info.group, a.info.resource);
}

asio::awaitable<std::optional<ApiError>> MutatingPolicyPlugin::admit(const AdmissionAttributes& a,
                                                                     json::object* object) {
  // Named, and assigned rather than returned from the await (GCC 12, docs/design.md).
  const asio::any_io_executor here = co_await asio::this_coro::executor;
  std::optional<ApiError> verdict;
  if (move_to_compute(here, a.info.group, a.info.resource)) {
    // Awaited here: the attributes and the object outlive the mutation.
    verdict = co_await asio::co_spawn(compute_, mutate(a, object), asio::use_awaitable);
  } else {
    verdict = co_await mutate(a, object);
  }
  co_return verdict;
}

asio::awaitable<std::optional<ApiError>> MutatingPolicyPlugin::mutate(const AdmissionAttributes& a,
                                                                      json::object* object) {
  const auto set = source_->current();
  if (!set->loaded) co_return not_ready(a);
  if (object == nullptr) co_return std::nullopt;
  const auto authorizer = make_policy_authorizer(rbac_.get(), a.user);
  std::vector<std::pair<InvocationKey, json::object>> reinvocable;
  auto first = co_await mutate_once(*set, a, *object, *scheme_, cachers_.get(), authorizer,
                                    nullptr, &reinvocable);
  if (first) co_return first;
  // IfNeeded policies whose work a later one changed run once more.
  std::set<InvocationKey> again;
  for (const auto& [key, after] : reinvocable) {
    if (after != *object) again.insert(key);
  }
  if (!again.empty()) {
    auto second = co_await mutate_once(*set, a, *object, *scheme_, cachers_.get(), authorizer,
                                       &again, nullptr);
    if (second) co_return second;
  }
  co_return std::nullopt;
}

}  // namespace kwatch::admission
