// flowcontrol.apiserver.k8s.io/v1 FlowSchema and PriorityLevelConfiguration as kinds, as
// kube-apiserver 1.34 serves them: v1's defaults (pkg/apis/flowcontrol/v1/defaults.go), kube's
// validation with its field paths and messages (pkg/apis/flowcontrol/validation), the mandatory
// objects whose spec is fixed, and the printer cells kube's table shows. The API Priority and
// Fairness engine reads the same objects; this file only says what may be stored.
//
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/object.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {

using Causes = std::vector<apimachinery::Cause>;

// Names and values kube gives these kinds (k8s.io/api/flowcontrol/v1).
inline constexpr std::string_view kFlowSchemaNameExempt = "exempt";
inline constexpr std::string_view kFlowSchemaNameCatchAll = "catch-all";
inline constexpr std::string_view kPriorityLevelNameExempt = "exempt";
inline constexpr std::string_view kPriorityLevelNameCatchAll = "catch-all";
inline constexpr std::int64_t kFlowSchemaMaxMatchingPrecedence = 10000;
// The annotation that lets kube-apiserver keep a bootstrap object's spec current.
inline constexpr std::string_view kAutoUpdateAnnotation = "apf.kubernetes.io/autoupdate-spec";

// KindHooks::set_defaults: spec.matchingPrecedence 1000 when absent or 0.
void default_flow_schema(boost::json::object& fs);
// KindHooks::set_defaults: limited.nominalConcurrencyShares 30 when absent (an explicit 0
// stays), limited.lendablePercent 0, queuing 64 queues, hand size 8, queue length limit 50
// (each when absent or 0); exempt.nominalConcurrencyShares and lendablePercent 0 when absent.
void default_priority_level_configuration(boost::json::object& pl);

// KindHooks::validate: kube's ValidateFlowSchema (spec, the fixed spec of the mandatory
// `exempt` and `catch-all`, status). Metadata is the scheme's (names are DNS subdomains).
void validate_flow_schema(const boost::json::object& fs, const boost::json::object* old,
                          Causes& causes);
// KindHooks::validate: kube's ValidatePriorityLevelConfiguration (a zero
// limited.nominalConcurrencyShares is allowed, as in 1.34).
void validate_priority_level_configuration(const boost::json::object& pl,
                                           const boost::json::object* old, Causes& causes);

// kube's mandatory bootstrap objects (k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap), as
// stored after defaults, with the auto-update annotation: exempt and catch-all.
std::vector<boost::json::object> mandatory_flow_schemas();
std::vector<boost::json::object> mandatory_priority_level_configurations();

// kube's shufflesharding.RequiredEntropyBits: ceil(log2(deck) * hand).
int required_entropy_bits(int deck_size, int hand_size);

// Printer cells. FlowSchema's MissingPL: the Dangling condition's status, "?" without one.
std::string flow_schema_missing_pl_cell(const boost::json::object& fs);
// FlowSchema's DistinguisherMethod: the method's type, "<none>" without one.
std::string flow_schema_distinguisher_cell(const boost::json::object& fs);

}  // namespace kwatch::kinds
