#include "kinds/builtin_validation.hpp"

#include "kinds/field_errors.hpp"

#include "apimachinery/json_path.hpp"
#include "apimachinery/label_selector.hpp"
#include "apimachinery/validation.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <cmath>
#include <optional>
#include <string_view>

// The rules and texts follow kube-apiserver 1.32: pkg/apis/core/validation, pkg/apis/apps/
// validation, pkg/apis/batch/validation and the registry strategies that call them.

namespace kwatch::kinds {

using apimachinery::LabelSelector;
using apimachinery::find_field;
using apimachinery::go_quote;
using apimachinery::label_selector_from_json;
using apimachinery::label_selector_from_map;
using apimachinery::label_value_errors;
using apimachinery::qualified_name_errors;

namespace json = boost::json;

namespace {

using apimachinery::object_member;
using apimachinery::string_at;
using field_errors::check_label_selector;
using field_errors::forbidden;
using field_errors::immutable;
using field_errors::invalid;
using field_errors::not_supported;
using field_errors::required;

const json::value* value_at(const json::object* obj, std::string_view key) {
  if (obj == nullptr) return nullptr;
  const json::value* v = obj->if_contains(key);
  return v != nullptr && !v->is_null() ? v : nullptr;
}


// Absent, null and empty containers are the same value to Go's semantic equality (nil and empty
// maps and slices compare equal); everything else compares as JSON.
bool blank(const json::value* v) {
  return v == nullptr || v->is_null() || (v->is_object() && v->get_object().empty()) ||
         (v->is_array() && v->get_array().empty());
}

bool same(const json::value* a, const json::value* b) {
  if (blank(a) || blank(b)) return blank(a) && blank(b);
  if (a->is_object() && b->is_object()) {
    const json::object& x = a->get_object();
    const json::object& y = b->get_object();
    for (const auto& [k, v] : x) {
      if (!same(&v, y.if_contains(k))) return false;
    }
    for (const auto& [k, v] : y) {
      if (!x.contains(k) && !blank(&v)) return false;
    }
    return true;
  }
  if (a->is_array() && b->is_array()) {
    const json::array& x = a->get_array();
    const json::array& y = b->get_array();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!same(&x[i], &y[i])) return false;
    }
    return true;
  }
  return *a == *b;
}

std::string go_string_slice(const json::value* v) {
  if (v == nullptr || !v->is_array()) return "[]string(nil)";
  std::string out = "[]string{";
  bool first = true;
  for (const auto& item : v->get_array()) {
    if (!first) out += ", ";
    first = false;
    out += go_quote(item.is_string() ? std::string_view(item.get_string()) : std::string_view());
  }
  return out + "}";
}

const json::value* template_labels(const json::object* tmpl) {
  return value_at(object_member(tmpl, "metadata"), "labels");
}

bool selects(const LabelSelector& selector, const json::value* labels) {
  return selector.matches(labels != nullptr ? labels->if_object() : nullptr);
}

void check_restart_policy(const json::object* tmpl, const std::string& path,
                          std::initializer_list<std::string_view> allowed, Causes& causes) {
  if (tmpl == nullptr) return;  // the schema reports a missing template
  const std::string policy = string_at(object_member(tmpl, "spec"), "restartPolicy");
  if (std::find(allowed.begin(), allowed.end(), policy) == allowed.end()) {
    not_supported(causes, path, policy, allowed);
  }
}

struct Workload {
  std::string_view what;  // "deployment": in "empty selector is invalid for deployment"
  bool selector_required = true;  // daemon sets: a missing selector selects nothing instead
  bool immutable_selector = true;
  const char* invalid_selector_detail = "invalid label selector";
};

// The selector rules apps/v1 workloads share: a selector is given, selects something, is valid
// and selects the pod template's labels; the template restarts its pods always; the selector
// stays as created.
void validate_workload(const json::object& obj, const json::object* old, const Workload& kind,
                       Causes& causes) {
  const json::object* spec = object_member(&obj, "spec");
  const json::object* tmpl = object_member(spec, "template");
  const json::value* selector_v = value_at(spec, "selector");
  const json::object* selector = selector_v != nullptr ? selector_v->if_object() : nullptr;
  if (selector == nullptr) {
    if (kind.selector_required) required(causes, "spec.selector");
    // LabelSelectorAsSelector(nil) selects nothing, so not the template either.
    invalid(causes, "spec.template.metadata.labels", go_string_map(template_labels(tmpl)),
            "`selector` does not match template `labels`");
  } else {
    check_label_selector(*selector, "spec.selector", causes);
    const bool empty = blank(value_at(selector, "matchLabels")) &&
                       blank(value_at(selector, "matchExpressions"));
    auto parsed = label_selector_from_json(*selector);
    if (!parsed) {
      invalid(causes, "spec.selector", go_label_selector(selector_v), kind.invalid_selector_detail);
    } else if (!parsed->empty() && !selects(*parsed, template_labels(tmpl))) {
      invalid(causes, "spec.template.metadata.labels", go_string_map(template_labels(tmpl)),
              "`selector` does not match template `labels`");
    }
    if (empty) {
      invalid(causes, "spec.selector", go_label_selector(selector_v),
              "empty selector is invalid for " + std::string(kind.what));
    }
  }
  check_restart_policy(tmpl, "spec.template.spec.restartPolicy", {"Always"}, causes);
  if (old != nullptr && kind.immutable_selector) {
    const json::value* before = value_at(object_member(old, "spec"), "selector");
    if (!same(selector_v, before)) immutable(causes, "spec.selector", go_label_selector(selector_v));
  }
}

// "\n  <type>{\n-   "field": old,\n+   "field": new,\n  }": which fields of a spec differ, after
// the summary line of a Forbidden update (kube prints a cmp.Diff of the two structs there).
std::string spec_diff(std::string_view type, const json::object& before, const json::object& after) {
  std::string out = "\n  " + std::string(type) + "{\n";
  std::vector<std::string> keys;
  for (const auto& [k, _] : before) keys.emplace_back(k);
  for (const auto& [k, _] : after) {
    if (!before.contains(k)) keys.emplace_back(k);
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& k : keys) {
    const json::value* a = before.if_contains(k);
    const json::value* b = after.if_contains(k);
    if (same(a, b)) continue;
    if (!blank(a)) out += "- \t" + go_quote(k) + ": " + json::serialize(*a) + ",\n";
    if (!blank(b)) out += "+ \t" + go_quote(k) + ": " + json::serialize(*b) + ",\n";
  }
  return out + "  }";
}

// validateOnlyAddedTolerations: every toleration the pod had is still there, give or take its
// tolerationSeconds.
bool kept_tolerations(const json::value* now, const json::value* before) {
  if (before == nullptr || !before->is_array()) return true;
  for (const auto& t : before->get_array()) {
    if (!t.is_object()) continue;
    bool found = false;
    if (now != nullptr && now->is_array()) {
      for (const auto& n : now->get_array()) {
        if (!n.is_object()) continue;
        json::object a = t.get_object();
        json::object b = n.get_object();
        a.erase("tolerationSeconds");
        b.erase("tolerationSeconds");
        json::value av(std::move(a)), bv(std::move(b));
        if (same(&av, &bv)) {
          found = true;
          break;
        }
      }
    }
    if (!found) return false;
  }
  return true;
}

// ValidatePodEphemeralContainersUpdate: ephemeral containers are only ever added, each named
// uniquely among all the pod's containers, with an image, and without what only a regular
// container may have.
void validate_ephemeral_containers(const json::object& spec, const json::object& old_spec,
                                   Causes& causes) {
  const json::value* now_v = value_at(&spec, "ephemeralContainers");
  const json::value* old_v = value_at(&old_spec, "ephemeralContainers");
  if (same(now_v, old_v)) return;
  static const json::array kNone;
  const json::array& now = now_v != nullptr && now_v->is_array() ? now_v->get_array() : kNone;
  const json::array& before = old_v != nullptr && old_v->is_array() ? old_v->get_array() : kNone;
  std::vector<std::string> names;
  for (const char* list : {"containers", "initContainers"}) {
    if (const json::value* l = value_at(&spec, list); l && l->is_array()) {
      for (const auto& c : l->get_array()) names.push_back(string_at(c.if_object(), "name"));
    }
  }
  for (const auto& old_c : before) {
    const std::string name = string_at(old_c.if_object(), "name");
    bool found = false;
    for (std::size_t i = 0; i < now.size(); ++i) {
      if (string_at(now[i].if_object(), "name") != name) continue;
      found = true;
      if (!same(&now[i], &old_c)) {
        forbidden(causes, "spec.ephemeralContainers[" + std::to_string(i) + "]",
                  "existing ephemeral containers " + go_quote(name) + " may not be changed");
      }
    }
    if (!found) {
      forbidden(causes, "spec.ephemeralContainers",
                "existing ephemeral containers " + go_quote(name) + " may not be removed");
    }
  }
  for (std::size_t i = 0; i < now.size(); ++i) {
    const json::object* c = now[i].if_object();
    const std::string path = "spec.ephemeralContainers[" + std::to_string(i) + "]";
    const std::string name = string_at(c, "name");
    if (name.empty()) {
      required(causes, path + ".name");
    } else if (std::find(names.begin(), names.end(), name) != names.end()) {
      field_errors::duplicate(causes, path + ".name", go_quote(name));
    }
    names.push_back(name);
    if (string_at(c, "image").empty()) required(causes, path + ".image");
    for (const char* field : {"ports", "livenessProbe", "readinessProbe", "startupProbe",
                              "lifecycle", "resources", "resizePolicy", "restartPolicy"}) {
      if (!blank(c != nullptr ? c->if_contains(field) : nullptr)) {
        forbidden(causes, path + "." + field, "cannot be set for an Ephemeral Container");
      }
    }
  }
}

void validate_pod_update(const json::object& pod, const json::object& old, Causes& causes) {
  const json::object* spec = object_member(&pod, "spec");
  const json::object* old_spec = object_member(&old, "spec");
  if (spec == nullptr || old_spec == nullptr) return;
  json::object munged = *spec;
  // ValidateContainerUpdates: the same containers, with images; only the images may change.
  for (const char* list : {"containers", "initContainers"}) {
    const json::value* now = value_at(spec, list);
    const json::value* before = value_at(old_spec, list);
    const std::size_t n = now != nullptr && now->is_array() ? now->get_array().size() : 0;
    const std::size_t m = before != nullptr && before->is_array() ? before->get_array().size() : 0;
    if (n != m) {
      forbidden(causes, "spec." + std::string(list), "pod updates may not add or remove containers");
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const json::object* c = now->get_array()[i].if_object();
      const json::object* o = before->get_array()[i].if_object();
      if (string_at(c, "image").empty()) {
        required(causes, "spec." + std::string(list) + "[" + std::to_string(i) + "].image");
      }
      json::value& munged_c = munged[list].get_array()[i];
      if (munged_c.is_object() && o != nullptr) {
        if (const json::value* image = o->if_contains("image")) {
          munged_c.get_object()["image"] = *image;
        } else {
          munged_c.get_object().erase("image");
        }
      }
    }
  }
  // activeDeadlineSeconds may be set, or lowered, but not raised or removed.
  const json::value* deadline = value_at(spec, "activeDeadlineSeconds");
  const json::value* old_deadline = value_at(old_spec, "activeDeadlineSeconds");
  if (deadline != nullptr && deadline->is_int64()) {
    if (old_deadline != nullptr && old_deadline->is_int64() &&
        old_deadline->get_int64() < deadline->get_int64()) {
      invalid(causes, "spec.activeDeadlineSeconds", json::serialize(*deadline),
              "must be less than or equal to previous value");
      return;
    }
  } else if (old_deadline != nullptr) {
    invalid(causes, "spec.activeDeadlineSeconds", "null",
            "must not update from a positive integer to nil value");
  }
  validate_ephemeral_containers(*spec, *old_spec, causes);
  for (const char* field : {"activeDeadlineSeconds", "tolerations", "schedulingGates",
                            "ephemeralContainers"}) {
    if (const json::value* v = old_spec->if_contains(field)) {
      munged[field] = *v;
    } else {
      munged.erase(field);
    }
  }
  // terminationGracePeriodSeconds may become 1 when it was negative.
  const json::value* grace = value_at(spec, "terminationGracePeriodSeconds");
  const json::value* old_grace = value_at(old_spec, "terminationGracePeriodSeconds");
  if (grace != nullptr && old_grace != nullptr && grace->is_int64() && old_grace->is_int64() &&
      old_grace->get_int64() < 0 && grace->get_int64() == 1) {
    munged["terminationGracePeriodSeconds"] = *old_grace;
  }
  json::value munged_v(munged);
  json::value old_v(*old_spec);
  if (!same(&munged_v, &old_v)) {
    forbidden(causes, "spec",
              "pod updates may not change fields other than `spec.containers[*].image`,"
              "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
              "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
              "(allow it to be set to 1 if it was previously negative)" +
                  spec_diff("core.PodSpec", *old_spec, munged));
  }
  // Scheduling gates may only be removed (validateOnlyDeletedSchedulingGates).
  if (const json::value* gates = value_at(spec, "schedulingGates"); gates && gates->is_array()) {
    std::vector<std::string> before;
    if (const json::value* g = value_at(old_spec, "schedulingGates"); g && g->is_array()) {
      for (const auto& gate : g->get_array()) before.push_back(string_at(gate.if_object(), "name"));
    }
    const json::array& now = gates->get_array();
    for (std::size_t i = 0; i < now.size(); ++i) {
      const std::string name = string_at(now[i].if_object(), "name");
      if (std::find(before.begin(), before.end(), name) != before.end()) continue;
      forbidden(causes, "spec.schedulingGates[" + std::to_string(i) + "].name",
                "only deletion is allowed, but found new scheduling gate '" + name + "'");
    }
  }
  if (!kept_tolerations(value_at(spec, "tolerations"), value_at(old_spec, "tolerations"))) {
    forbidden(causes, "spec.tolerations",
              "existing toleration can not be modified except its tolerationSeconds");
  }
}

// A resource.Quantity's value ("1Gi", "500M", "1.5", "100m", "1e3"), to compare two of them;
// nullopt when the text is not a quantity (the schema reports it).
std::optional<long double> quantity_value(const json::value* v) {
  if (v == nullptr || !v->is_string()) return std::nullopt;
  const std::string s(v->get_string());
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
  long double number = 0;
  try {
    std::size_t used = 0;
    number = std::stold(s.substr(0, i), &used);
    if (used != i) return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  const std::string suffix = s.substr(i);
  static const std::pair<std::string_view, long double> kSuffixes[] = {
      {"", 1},         {"n", 1e-9},     {"u", 1e-6},     {"m", 1e-3},     {"k", 1e3},
      {"M", 1e6},      {"G", 1e9},      {"T", 1e12},     {"P", 1e15},     {"E", 1e18},
      {"Ki", 1024.0L}, {"Mi", 1048576.0L}, {"Gi", 1073741824.0L}, {"Ti", 1099511627776.0L},
      {"Pi", 1125899906842624.0L}, {"Ei", 1152921504606846976.0L}};
  for (const auto& [text, factor] : kSuffixes) {
    if (suffix == text) return number * factor;
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    try {
      std::size_t used = 0;
      const int exponent = std::stoi(suffix.substr(1), &used);
      if (used == suffix.size() - 1) return number * std::pow(10.0L, exponent);
    } catch (...) {
    }
  }
  return std::nullopt;
}

// robfig/cron's standard parser, as far as its errors go: five fields or a known descriptor.
std::optional<std::string> schedule_error(const std::string& schedule) {
  if (schedule.starts_with("@")) {
    static constexpr std::string_view kDescriptors[] = {
        "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"};
    for (auto d : kDescriptors) {
      if (schedule == d) return std::nullopt;
    }
    if (schedule.starts_with("@every ")) return std::nullopt;
    return "unrecognized descriptor: " + schedule;
  }
  std::vector<std::string> fields;
  std::size_t i = 0;
  while (i < schedule.size()) {
    while (i < schedule.size() && (schedule[i] == ' ' || schedule[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < schedule.size() && schedule[j] != ' ' && schedule[j] != '\t') ++j;
    if (j > i) fields.push_back(schedule.substr(i, j - i));
    i = j;
  }
  if (fields.empty()) return "empty spec string";
  if (fields.size() == 5) return std::nullopt;
  std::string listed;
  for (const auto& f : fields) listed += (listed.empty() ? "" : " ") + f;
  return "expected exactly 5 fields, found " + std::to_string(fields.size()) + ": [" + listed + "]";
}

}  // namespace

std::string go_string_map(const json::value* labels) {
  if (labels == nullptr || !labels->is_object()) return "map[string]string(nil)";
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [k, v] : labels->get_object()) {
    entries.emplace_back(std::string(k), v.is_string() ? std::string(v.get_string()) : "");
  }
  std::sort(entries.begin(), entries.end());
  std::string out = "map[string]string{";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ", ";
    out += go_quote(entries[i].first) + ":" + go_quote(entries[i].second);
  }
  return out + "}";
}

std::string go_label_selector(const json::value* selector) {
  const json::object* s = selector != nullptr ? selector->if_object() : nullptr;
  std::string out = "v1.LabelSelector{MatchLabels:" + go_string_map(value_at(s, "matchLabels")) +
                    ", MatchExpressions:";
  const json::value* exprs = value_at(s, "matchExpressions");
  if (exprs == nullptr || !exprs->is_array()) return out + "[]v1.LabelSelectorRequirement(nil)}";
  out += "[]v1.LabelSelectorRequirement{";
  bool first = true;
  for (const auto& e : exprs->get_array()) {
    if (!first) out += ", ";
    first = false;
    const json::object* expr = e.if_object();
    out += "v1.LabelSelectorRequirement{Key:" + go_quote(string_at(expr, "key")) +
           ", Operator:" + go_quote(string_at(expr, "operator")) +
           ", Values:" + go_string_slice(value_at(expr, "values")) + "}";
  }
  return out + "}}";
}

void validate_pod(const json::object& pod, const json::object* old, Causes& causes) {
  // ValidatePodSpec's rules that the schema cannot say: a pod has containers, each with an image.
  const json::object* spec = object_member(&pod, "spec");
  const json::value* containers = value_at(spec, "containers");
  if (containers == nullptr || !containers->is_array() || containers->get_array().empty()) {
    required(causes, "spec.containers");
    return;
  }
  if (old != nullptr) {
    validate_pod_update(pod, *old, causes);
    return;
  }
  std::size_t i = 0;
  for (const auto& c : containers->get_array()) {
    const std::string field = "spec.containers[" + std::to_string(i++) + "]";
    const json::object* co = c.if_object();
    if (string_at(co, "name").empty()) required(causes, field + ".name");
    if (string_at(co, "image").empty()) required(causes, field + ".image");
  }
}

void validate_replication_controller(const json::object& rc, const json::object* old,
                                     Causes& causes) {
  (void)old;  // an RC's selector may change
  const json::object* spec = object_member(&rc, "spec");
  const json::value* selector_v = value_at(spec, "selector");
  const json::object* selector = selector_v != nullptr ? selector_v->if_object() : nullptr;
  // ValidateNonEmptySelector, then the template must carry what the selector asks for.
  if (selector == nullptr || selector->empty()) {
    required(causes, "spec.selector");
  }
  const json::object* tmpl = object_member(spec, "template");
  if (tmpl == nullptr) {
    required(causes, "spec.template");
    return;
  }
  if (selector != nullptr && !selector->empty() &&
      !selects(label_selector_from_map(*selector), template_labels(tmpl))) {
    invalid(causes, "spec.template.metadata.labels", go_string_map(template_labels(tmpl)),
            "`selector` does not match template `labels`");
  }
  check_restart_policy(tmpl, "spec.template.spec.restartPolicy", {"Always"}, causes);
}

void validate_deployment(const json::object& deployment, const json::object* old, Causes& causes) {
  validate_workload(deployment, old, {.what = "deployment"}, causes);
}

void validate_replica_set(const json::object& rs, const json::object* old, Causes& causes) {
  // kube's ReplicaSet validation words its empty-selector error as the Deployment's.
  validate_workload(rs, old, {.what = "deployment"}, causes);
}

void validate_daemon_set(const json::object& ds, const json::object* old, Causes& causes) {
  validate_workload(ds, old, {.what = "daemonset", .selector_required = false}, causes);
}

void validate_stateful_set(const json::object& sts, const json::object* old, Causes& causes) {
  // The selector is one of the fields the update rule below forbids changing.
  validate_workload(sts, old,
                    {.what = "statefulset", .immutable_selector = false,
                     .invalid_selector_detail = ""},
                    causes);
  if (old == nullptr) return;
  const json::object* spec = object_member(&sts, "spec");
  const json::object* old_spec = object_member(old, "spec");
  if (spec == nullptr || old_spec == nullptr) return;
  json::object munged = *spec;
  for (const char* field : {"replicas", "ordinals", "template", "updateStrategy",
                            "persistentVolumeClaimRetentionPolicy", "minReadySeconds"}) {
    if (const json::value* v = old_spec->if_contains(field)) {
      munged[field] = *v;
    } else {
      munged.erase(field);
    }
  }
  json::value a(std::move(munged));
  json::value b(*old_spec);
  if (!same(&a, &b)) {
    forbidden(causes, "spec",
              "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
              "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
              "'minReadySeconds' are forbidden");
  }
}

namespace {

// ValidateJobSpecUpdate: what a Job's update may not change. Completions only in tandem with
// parallelism for Indexed jobs; the pod template only while the job is suspended and has never
// started, and then only its scheduling directives, labels and annotations.
void validate_job_update(const json::object& job, const json::object& old, Causes& causes) {
  const json::object* spec = object_member(&job, "spec");
  const json::object* old_spec = object_member(&old, "spec");
  const json::value* completions = value_at(spec, "completions");
  if (!same(completions, value_at(old_spec, "completions"))) {
    const bool indexed = string_at(spec, "completionMode") == "Indexed";
    const json::value* parallelism = value_at(spec, "parallelism");
    if (!indexed) {
      immutable(causes, "spec.completions",
                completions != nullptr ? json::serialize(*completions) : "null");
    } else if (!same(completions, parallelism)) {
      invalid(causes, "spec.completions",
              completions != nullptr ? json::serialize(*completions) : "null",
              "can only be modified in tandem with spec.parallelism");
    }
  }
  const json::value* selector_v = value_at(spec, "selector");
  if (!same(selector_v, value_at(old_spec, "selector"))) {
    immutable(causes, "spec.selector", go_label_selector(selector_v));
  }
  const json::value* tmpl = value_at(spec, "template");
  json::value before = old_spec != nullptr && old_spec->contains("template")
                           ? old_spec->at("template")
                           : json::value(json::object());
  const json::value* suspend = value_at(old_spec, "suspend");
  const bool suspended = suspend != nullptr && suspend->is_bool() && suspend->get_bool();
  const bool started = value_at(object_member(&old, "status"), "startTime") != nullptr;
  if (suspended && !started && tmpl != nullptr && tmpl->is_object() && before.is_object()) {
    auto take = [](json::object& into, const json::object* from, std::string_view key) {
      const json::value* v = from != nullptr ? from->if_contains(key) : nullptr;
      if (v != nullptr) {
        into[key] = *v;
      } else {
        into.erase(key);
      }
    };
    json::object& b = before.get_object();
    const json::object& t = tmpl->get_object();
    if (!b["metadata"].is_object()) b["metadata"] = json::object();
    take(b["metadata"].get_object(), object_member(&t, "metadata"), "labels");
    take(b["metadata"].get_object(), object_member(&t, "metadata"), "annotations");
    if (!b["spec"].is_object()) b["spec"] = json::object();
    json::object& bs = b["spec"].get_object();
    const json::object* ts = object_member(&t, "spec");
    for (const char* f : {"nodeSelector", "tolerations", "schedulingGates"}) take(bs, ts, f);
    // Node affinity may change; other affinity may not.
    const json::object* affinity = object_member(ts, "affinity");
    json::value* old_affinity = bs.if_contains("affinity");
    if (affinity != nullptr) {
      json::object merged = old_affinity != nullptr && old_affinity->is_object()
                                ? old_affinity->get_object()
                                : json::object();
      take(merged, affinity, "nodeAffinity");
      bs["affinity"] = std::move(merged);
    } else if (old_affinity != nullptr && old_affinity->is_object()) {
      old_affinity->get_object().erase("nodeAffinity");
      if (old_affinity->get_object().empty()) bs.erase("affinity");
    }
    if (b["metadata"].get_object().empty() && !t.contains("metadata")) b.erase("metadata");
  }
  if (!same(tmpl, &before)) {
    immutable(causes, "spec.template", tmpl != nullptr ? json::serialize(*tmpl) : "null");
  }
  for (const char* field : {"completionMode", "podFailurePolicy", "backoffLimitPerIndex",
                            "managedBy"}) {
    const json::value* now = value_at(spec, field);
    if (!same(now, value_at(old_spec, field))) {
      immutable(causes, std::string("spec.") + field, now != nullptr ? json::serialize(*now) : "null");
    }
  }
}

// validateTimeZone: a name Go's time.LoadLocation knows (the system's IANA database), never
// "Local".
void validate_time_zone(const json::object* spec, Causes& causes) {
  const json::value* zone = value_at(spec, "timeZone");
  if (zone == nullptr || !zone->is_string()) return;
  const std::string tz(zone->get_string());
  const std::string shown = go_quote(tz);
  if (tz.empty()) {
    invalid(causes, "spec.timeZone", shown, "timeZone must be nil or non-empty string");
    return;
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = tz.find('/', start);
    const std::string part = tz.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const bool chars_ok = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '+';
    });
    if (part == "." || part == ".." || part.starts_with("-") || !chars_ok) {
      invalid(causes, "spec.timeZone", shown,
              "unknown time zone " + tz);
      return;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (tz.size() == 5 && (tz == "Local" || tz == "local" || tz == "LOCAL")) {
    invalid(causes, "spec.timeZone", shown,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones");
    return;
  }
  std::error_code ec;
  const bool known = tz == "UTC" ||
                     std::filesystem::is_regular_file("/usr/share/zoneinfo/" + tz, ec);
  if (!known) invalid(causes, "spec.timeZone", shown, "unknown time zone " + tz);
}

// ValidatePersistentVolumeSpec's rules that the schema cannot say: exactly one volume source,
// a storage capacity, access modes; the source never changes.
constexpr const char* kVolumeSources[] = {
    "gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd",
    "quobyte", "iscsi", "cinder", "cephfs", "flexVolume", "fc", "azureFile", "flocker",
    "vsphereVolume", "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO", "local",
    "storageos", "csi"};

}  // namespace

void validate_job(const json::object& job, const json::object* old, Causes& causes) {
  const json::object* spec = object_member(&job, "spec");
  const json::object* tmpl = object_member(spec, "template");
  const json::value* selector_v = value_at(spec, "selector");
  const json::object* selector = selector_v != nullptr ? selector_v->if_object() : nullptr;
  if (selector == nullptr) {
    required(causes, "spec.selector");
    invalid(causes, "spec.template.metadata.labels", go_string_map(template_labels(tmpl)),
            "`selector` does not match template `labels`");
  } else {
    check_label_selector(*selector, "spec.selector", causes);
    // Whether generated or not, the selector must select the job's own pods.
    auto parsed = label_selector_from_json(*selector);
    if (parsed && !selects(*parsed, template_labels(tmpl))) {
      invalid(causes, "spec.template.metadata.labels", go_string_map(template_labels(tmpl)),
              "`selector` does not match template `labels`");
    }
    // Unless the client asked to choose it, the selector is the one kube generated.
    const json::value* manual = value_at(spec, "manualSelector");
    if (manual == nullptr || !manual->is_bool() || !manual->get_bool()) {
      const json::object* meta = object_member(&job, "metadata");
      const json::value expected =
          json::object{{"matchLabels",
                        json::object{{"batch.kubernetes.io/controller-uid", string_at(meta, "uid")}}}};
      if (!same(selector_v, &expected)) {
        invalid(causes, "spec.selector", go_label_selector(selector_v),
                "`selector` not auto-generated");
      }
    }
  }
  check_restart_policy(tmpl, "spec.template.spec.restartPolicy", {"OnFailure", "Never"}, causes);
  if (old != nullptr) validate_job_update(job, *old, causes);
}

void validate_cron_job(const json::object& cron_job, const json::object* old, Causes& causes) {
  const json::object* spec = object_member(&cron_job, "spec");
  const std::string schedule = string_at(spec, "schedule");
  if (schedule.empty()) {
    required(causes, "spec.schedule");
  } else if (auto error = schedule_error(schedule)) {
    invalid(causes, "spec.schedule", go_quote(schedule), *error);
  }
  // TZ= and CRON_TZ= prefixes only stay on schedules that already had them.
  const bool had_tz = old != nullptr &&
                      string_at(object_member(old, "spec"), "schedule").find("TZ") != std::string::npos;
  if (schedule.find("TZ") != std::string::npos) {
    if (!had_tz) {
      invalid(causes, "spec.schedule", go_quote(schedule),
              "cannot use TZ or CRON_TZ in schedule, use timeZone field instead");
    } else if (value_at(spec, "timeZone") != nullptr) {
      invalid(causes, "spec.schedule", go_quote(schedule),
              "cannot use both timeZone field and TZ or CRON_TZ in schedule");
    }
  }
  validate_time_zone(spec, causes);
  const json::object* tmpl = object_member(object_member(object_member(spec, "jobTemplate"), "spec"), "template");
  check_restart_policy(tmpl, "spec.jobTemplate.spec.template.spec.restartPolicy",
                       {"OnFailure", "Never"}, causes);
}

// ConfigMaps and Secrets marked immutable keep their data, and the mark, for good.
void validate_immutable_data(const json::object& obj, const json::object* old,
                             std::initializer_list<const char*> fields, Causes& causes) {
  if (old == nullptr) return;
  const json::value* was = value_at(old, "immutable");
  if (was == nullptr || !was->is_bool() || !was->get_bool()) return;
  constexpr std::string_view kDetail = "field is immutable when `immutable` is set";
  const json::value* now = value_at(&obj, "immutable");
  if (now == nullptr || !now->is_bool() || !now->get_bool()) forbidden(causes, "immutable", kDetail);
  for (const char* field : fields) {
    if (!same(value_at(&obj, field), value_at(old, field))) forbidden(causes, field, kDetail);
  }
}

void validate_config_map(const json::object& config_map, const json::object* old, Causes& causes) {
  validate_immutable_data(config_map, old, {"data", "binaryData"}, causes);
}

void validate_secret(const json::object& secret, const json::object* old, Causes& causes) {
  if (old == nullptr) return;
  // stringData was folded into data before validation: data covers it.
  validate_immutable_data(secret, old, {"data"}, causes);
  const std::string type = string_at(&secret, "type");
  if (type != string_at(old, "type")) immutable(causes, "type", go_quote(type));
}

void validate_persistent_volume(const json::object& pv, const json::object* old, Causes& causes) {
  const json::object* spec = object_member(&pv, "spec");
  std::vector<std::string> sources;
  for (const char* source : kVolumeSources) {
    if (value_at(spec, source) != nullptr) sources.emplace_back(source);
  }
  if (sources.empty()) required(causes, "spec", "must specify a volume type");
  for (std::size_t i = 1; i < sources.size(); ++i) {
    forbidden(causes, "spec." + sources[i], "may not specify more than 1 volume type");
  }
  const json::value* capacity = value_at(spec, "capacity");
  if (capacity == nullptr || !capacity->is_object() || capacity->get_object().empty()) {
    required(causes, "spec.capacity");
  } else if (!capacity->get_object().contains("storage") || capacity->get_object().size() > 1) {
    std::string shown = "core.ResourceList{";
    bool first = true;
    for (const auto& [k, v] : capacity->get_object()) {
      shown += (first ? "" : ", ") + go_quote(k) + ":" + (v.is_string() ? go_quote(v.get_string()) : json::serialize(v));
      first = false;
    }
    not_supported(causes, "spec.capacity", shown + "}", {"storage"});
  }
  const json::value* modes = value_at(spec, "accessModes");
  if (modes == nullptr || !modes->is_array() || modes->get_array().empty()) {
    required(causes, "spec.accessModes");
  }
  if (old == nullptr) return;
  const json::object* old_spec = object_member(old, "spec");
  for (const char* source : kVolumeSources) {
    if (!same(value_at(spec, source), value_at(old_spec, source))) {
      forbidden(causes, "spec.persistentvolumesource",
                "spec.persistentvolumesource is immutable after creation");
      break;
    }
  }
}

void validate_persistent_volume_claim(const json::object& pvc, const json::object* old,
                                      Causes& causes) {
  if (old == nullptr) return;
  const json::object* spec = object_member(&pvc, "spec");
  const json::object* old_spec = object_member(old, "spec");
  if (spec == nullptr || old_spec == nullptr) return;
  json::object after = *spec;
  json::object before = *old_spec;
  // volumeName may be set once; volumeAttributesClassName may change; a bound claim may ask
  // for more storage.
  if (string_at(old_spec, "volumeName").empty()) {
    if (const json::value* v = spec->if_contains("volumeName")) {
      before["volumeName"] = *v;
    } else {
      before.erase("volumeName");
    }
  }
  if (const json::value* v = old_spec->if_contains("volumeAttributesClassName")) {
    after["volumeAttributesClassName"] = *v;
  } else {
    after.erase("volumeAttributesClassName");
  }
  const json::value* old_size = find_field(*old_spec, "resources.requests.storage");
  const bool bound = string_at(object_member(&pvc, "status"), "phase") == "Bound";
  if (bound && find_field(after, "resources.requests") != nullptr) {
    json::object& requests = after["resources"].get_object()["requests"].get_object();
    if (old_size != nullptr) {
      requests["storage"] = *old_size;
    } else {
      requests.erase("storage");
    }
  }
  json::value a(after);
  json::value b(before);
  if (!same(&a, &b)) {
    forbidden(causes, "spec",
              "spec is immutable after creation except resources.requests and "
              "volumeAttributesClassName for bound claims" +
                  spec_diff("core.PersistentVolumeClaimSpec", before, after));
  }
  // Storage grows, never shrinks.
  const auto old_bytes = quantity_value(old_size);
  const auto new_bytes = quantity_value(find_field(*spec, "resources.requests.storage"));
  if (old_bytes && new_bytes && *new_bytes < *old_bytes) {
    forbidden(causes, "spec.resources.requests.storage",
              "field can not be less than previous value");
  }
}

std::vector<std::string> endpoint_ip_problems(std::string_view ip, bool allow_loopback) {
  const std::string text(ip);
  unsigned char v6[16];
  unsigned char v4[4];
  const bool is_v4 = inet_pton(AF_INET, text.c_str(), v4) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, text.c_str(), v6) == 1;
  if (!is_v4 && !is_v6) return {"must be a valid IP address"};
  // An IPv4-mapped address is judged as its IPv4 address, as Go's net.IP does.
  const bool mapped = is_v6 && v6[10] == 0xff && v6[11] == 0xff &&
                      std::all_of(v6, v6 + 10, [](unsigned char b) { return b == 0; });
  if (mapped) std::copy(v6 + 12, v6 + 16, v4);
  const bool four = is_v4 || mapped;
  std::vector<std::string> out;
  const bool unspecified = four ? (v4[0] | v4[1] | v4[2] | v4[3]) == 0
                                : std::all_of(v6, v6 + 16, [](unsigned char b) { return b == 0; });
  if (unspecified) out.push_back("may not be unspecified (" + text + ")");
  const bool loopback = four ? v4[0] == 127
                             : std::all_of(v6, v6 + 15, [](unsigned char b) { return b == 0; }) &&
                                   v6[15] == 1;
  if (loopback && !allow_loopback) {
    out.push_back("may not be in the loopback range (127.0.0.0/8, ::1/128)");
  }
  const bool link_local = four ? v4[0] == 169 && v4[1] == 254 : v6[0] == 0xfe && (v6[1] & 0xc0) == 0x80;
  if (link_local) out.push_back("may not be in the link-local range (169.254.0.0/16, fe80::/10)");
  const bool link_local_multicast =
      four ? v4[0] == 224 && v4[1] == 0 && v4[2] == 0 : v6[0] == 0xff && (v6[1] & 0x0f) == 0x02;
  if (link_local_multicast) {
    out.push_back("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)");
  }
  return out;
}

void validate_endpoints(const json::object& endpoints, const json::object* old, Causes& causes,
                        bool allow_loopback) {
  (void)old;
  const json::value* subsets = endpoints.if_contains("subsets");
  if (subsets == nullptr || !subsets->is_array()) return;
  for (std::size_t i = 0; i < subsets->get_array().size(); ++i) {
    const json::object* subset = subsets->get_array()[i].if_object();
    if (subset == nullptr) continue;
    for (const char* list : {"addresses", "notReadyAddresses"}) {
      const json::value* addresses = subset->if_contains(list);
      if (addresses == nullptr || !addresses->is_array()) continue;
      for (std::size_t j = 0; j < addresses->get_array().size(); ++j) {
        const json::object* address = addresses->get_array()[j].if_object();
        const json::value* ip = address != nullptr ? address->if_contains("ip") : nullptr;
        if (ip == nullptr || !ip->is_string()) continue;
        const std::string path = "subsets[" + std::to_string(i) + "]." + list + "[" +
                                 std::to_string(j) + "].ip";
        const std::string_view text = ip->get_string();
        const auto problems = endpoint_ip_problems(text, allow_loopback);
        if (problems.size() == 1 && problems[0] == "must be a valid IP address") {
          // IsValidIPForLegacyField first, in its words.
          field_errors::invalid(causes, path, apimachinery::go_quote(text),
                                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
        }
        for (const auto& p : problems) {
          field_errors::invalid(causes, path, apimachinery::go_quote(text), p);
        }
      }
    }
  }
}

void validate_endpoint_slice(const json::object& slice, const json::object* old, Causes& causes,
                             bool allow_loopback) {
  (void)old;
  const json::value* type_value = slice.if_contains("addressType");
  const std::string_view type =
      type_value != nullptr && type_value->is_string() ? std::string_view(type_value->get_string())
                                                       : std::string_view();
  if (type != "IPv4" && type != "IPv6") return;
  const json::value* list = slice.if_contains("endpoints");
  if (list == nullptr || !list->is_array()) return;
  for (std::size_t i = 0; i < list->get_array().size(); ++i) {
    const json::object* endpoint = list->get_array()[i].if_object();
    const json::value* addresses = endpoint != nullptr ? endpoint->if_contains("addresses") : nullptr;
    if (addresses == nullptr || !addresses->is_array()) continue;
    for (std::size_t j = 0; j < addresses->get_array().size(); ++j) {
      const json::value& a = addresses->get_array()[j];
      if (!a.is_string()) continue;
      const std::string path = "endpoints[" + std::to_string(i) + "].addresses[" + std::to_string(j) + "]";
      const std::string text(a.get_string());
      unsigned char buf[16];
      const bool family = inet_pton(type == "IPv4" ? AF_INET : AF_INET6, text.c_str(), buf) == 1;
      if (!family) {
        field_errors::invalid(causes, path, apimachinery::go_quote(text),
                              type == "IPv4" ? "must be a valid IPv4 address"
                                             : "must be a valid IPv6 address");
        continue;
      }
      for (const auto& p : endpoint_ip_problems(text, allow_loopback)) {
        field_errors::invalid(causes, path, apimachinery::go_quote(text), p);
      }
    }
  }
}

}  // namespace kwatch::kinds
