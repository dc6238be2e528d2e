// ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1)
// and MutatingAdmissionPolicy with its binding (v1beta1) as kinds: their validation, as
// kube-apiserver words it, and the CEL environment their expressions are compiled in, which the
// admission plugins (admission/validating_policy.hpp, admission/mutating_policy.hpp) run.
//
// The environment (kube's plugin/cel compiler): every expression sees `object`, `oldObject`
// (dyn: the object as JSON, null when absent), `request` (kubernetes.AdmissionRequest, typed),
// `namespaceObject` (kubernetes.Namespace, typed), and, where kube declares them, `params` (only
// with a paramKind), `authorizer` (not in messageExpression) and `variables` (the policy's
// variables by name, each typed as its expression's result; not in matchConditions). Every
// program is compiled against the same slots (PolicySlot), so one activation serves them all.
// A mutation's expression may also build `Object{...}` (an apply configuration: `Object.spec{}`
// for its fields' values) and `JSONPatch{op, path, from, value}` values (maps at run time), and
// call `jsonpatch.escapeKey`.
//
// Pure functions; a CompiledPolicy is immutable and used from any thread.
#pragma once

#include "apimachinery/api_error.hpp"
#include "cel/program.hpp"
#include "cel/types.hpp"

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::kinds {

// The slots of a policy expression's variables, in Declarations order.
enum PolicySlot : std::size_t {
  slot_object,
  slot_old_object,
  slot_request,
  slot_params,
  slot_namespace_object,
  slot_authorizer,
  slot_request_resource,  // authorizer.requestResource
  slot_variables,
  policy_slot_count,
};

// "object", "oldObject", "request", "params", "namespaceObject", "authorizer",
// "authorizer.requestResource", "variables".
const std::vector<std::string>& policy_variable_names();
// kubernetes.AdmissionRequest and kubernetes.Namespace, with the fields kube declares.
cel::TypePtr admission_request_type();
cel::TypePtr namespace_object_type();
// JSONPatch{op, path, from, value}.
cel::TypePtr json_patch_type();

// One compiled expression: a program, or why there is none (kube's words: "compilation failed:
// ERROR: <input>:1:1: ..." or "must evaluate to bool but got int").
struct PolicyExpression {
  std::string source;
  std::optional<cel::Program> program;
  std::string compile_error;
  cel::TypePtr result;  // the checked type (dyn when unknown)
  std::uint32_t slots = 0;  // bit `1 << PolicySlot` for each variable the source names
  // The static estimate of what one evaluation may cost at most (cel-go's units; objects are
  // dyn, so what iterates over them counts as over the largest request).
  std::uint64_t max_cost = 0;
};

// What the admission plugin needs of a ValidatingAdmissionPolicy.
struct CompiledPolicy {
  std::string name;
  std::int64_t generation = 0;
  bool has_param_kind = false;
  std::string param_api_version, param_kind;  // spec.paramKind
  bool fail_closed = true;  // failurePolicy Fail (the default) rather than Ignore
  struct Named {
    std::string name;
    PolicyExpression expression;
  };
  std::vector<Named> match_conditions;
  std::vector<Named> variables;
  struct Validation {
    PolicyExpression expression;
    std::optional<PolicyExpression> message_expression;
    std::string message;  // trimmed
    std::string reason;   // "" for Invalid
  };
  std::vector<Validation> validations;
  struct AuditAnnotation {
    std::string key;
    PolicyExpression value;
  };
  std::vector<AuditAnnotation> audit_annotations;
  // A MutatingAdmissionPolicy's mutations, in order, and whether it is run again when a later
  // mutation changed the object (reinvocationPolicy IfNeeded).
  struct Mutation {
    bool json_patch = false;  // JSONPatch, else ApplyConfiguration
    PolicyExpression expression;
  };
  std::vector<Mutation> mutations;
  bool reinvoke = false;
  // The variables any of its expressions names (PolicyExpression::slots of all of them): what
  // the plugin need not build for an evaluation.
  std::uint32_t slots = 0;
  bool uses(PolicySlot slot) const { return (slots >> slot) & 1U; }
  void add(const PolicyExpression& e) {
    slots |= e.slots;
    max_cost = max_cost > UINT64_MAX - e.max_cost ? UINT64_MAX : max_cost + e.max_cost;
  }
  // The most its expressions together may cost one evaluation (saturating): a plugin runs an
  // expensive policy away from the I/O threads.
  std::uint64_t max_cost = 0;
};

// Compiles every expression of `policy` (a ValidatingAdmissionPolicy as stored: defaults set).
// Expressions that do not compile keep their error; the plugin reports it when it runs them.
std::shared_ptr<const CompiledPolicy> compile_validating_policy(const boost::json::object& policy);
// The same for a MutatingAdmissionPolicy (no validations; mutations instead).
std::shared_ptr<const CompiledPolicy> compile_mutating_policy(const boost::json::object& policy);

// kube's type checking of a ValidatingAdmissionPolicy (its status controller's): each
// validation's expression and messageExpression compiled with `object` and `oldObject` typed
// by the schema of each kind its rules name exactly (at most 10; rules with a wildcard or a
// subresource are skipped) and `params` by its paramKind's. A warning per expression that does
// not check for some kind: `apps/v1, Kind=Deployment: compilation failed: ...` lines.
struct ExpressionWarning {
  std::string field_ref;  // spec.validations[0].expression
  std::string warning;
};
class Scheme;
std::vector<ExpressionWarning> type_check_validating_policy(const boost::json::object& policy,
                                                            const Scheme& scheme);

// What webhook configurations share with policies (kinds/webhook_configuration.cpp): a
// RuleWithOperations checked as kube's validateRuleWithOperations (subresources allowed), and a
// webhook's match condition compiled in kube's webhook environment (the policy variables
// without `params` and `variables`; the result must be a bool: "must evaluate to bool").
void check_admission_rule(const boost::json::object* rule, const std::string& path,
                          std::vector<apimachinery::Cause>& causes);
PolicyExpression compile_webhook_match_condition(const std::string& expression);

// KindHooks::validate of the two kinds: kube's ValidateValidatingAdmissionPolicy and
// ValidateValidatingAdmissionPolicyBinding (field rules, expressions compiled, return types).
void validate_validating_admission_policy(const boost::json::object& policy,
                                          const boost::json::object* old,
                                          std::vector<apimachinery::Cause>& causes);
void validate_validating_admission_policy_binding(const boost::json::object& binding,
                                                  const boost::json::object* old,
                                                  std::vector<apimachinery::Cause>& causes);
void validate_mutating_admission_policy(const boost::json::object& policy,
                                        const boost::json::object* old,
                                        std::vector<apimachinery::Cause>& causes);
void validate_mutating_admission_policy_binding(const boost::json::object& binding,
                                                const boost::json::object* old,
                                                std::vector<apimachinery::Cause>& causes);

}  // namespace kwatch::kinds
