#include "kinds/builtin_defaults.hpp"

#include "apimachinery/quantity.hpp"
#include "base/base64.hpp"
#include "base/timestamps.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <initializer_list>

namespace kwatch::kinds {

namespace json = boost::json;

namespace {

// The object under `key`, created when absent; nullptr when something else is there.
json::object* child_object(json::object& parent, std::string_view key) {
  auto it = parent.find(key);
  if (it == parent.end() || it->value().is_null()) {
    return &parent.insert_or_assign(key, json::object()).first->value().get_object();
  }
  return it->value().if_object();
}

// The object under `key` if it is one; never creates it.
json::object* existing_object(json::object& parent, std::string_view key) {
  json::value* v = parent.if_contains(key);
  return v != nullptr ? v->if_object() : nullptr;
}

json::array* existing_array(json::object& parent, std::string_view key) {
  json::value* v = parent.if_contains(key);
  return v != nullptr ? v->if_array() : nullptr;
}

// Sets `key` when it is absent, null, or the zero value Go would see as unset ("" or 0).
void set_default(json::object& obj, std::string_view key, json::value value) {
  auto it = obj.find(key);
  if (it == obj.end() || it->value().is_null() ||
      (it->value().is_string() && it->value().get_string().empty() && value.is_string()) ||
      (it->value().is_int64() && it->value().get_int64() == 0 && value.is_int64())) {
    obj.insert_or_assign(key, std::move(value));
  }
}

// Like set_default, for fields whose zero value is meaningful (a pointer in Go).
void set_if_absent(json::object& obj, std::string_view key, json::value value) {
  auto it = obj.find(key);
  if (it == obj.end() || it->value().is_null()) obj.insert_or_assign(key, std::move(value));
}

template <class Fn>
void for_each_object(json::object& parent, std::string_view key, Fn fn) {
  if (json::array* items = existing_array(parent, key)) {
    for (auto& item : *items) {
      if (json::object* o = item.if_object()) fn(*o);
    }
  }
}

void default_probe(json::object& container, std::string_view key) {
  json::object* probe = existing_object(container, key);
  if (probe == nullptr) return;
  set_default(*probe, "timeoutSeconds", 1);
  set_default(*probe, "periodSeconds", 10);
  set_default(*probe, "successThreshold", 1);
  set_default(*probe, "failureThreshold", 3);
  if (json::object* get = existing_object(*probe, "httpGet")) {
    set_default(*get, "path", "/");
    set_default(*get, "scheme", "HTTP");
  }
}

void default_lifecycle_handler(json::object& lifecycle, std::string_view key) {
  json::object* handler = existing_object(lifecycle, key);
  if (handler == nullptr) return;
  if (json::object* get = existing_object(*handler, "httpGet")) {
    set_default(*get, "path", "/");
    set_default(*get, "scheme", "HTTP");
  }
}

void default_field_ref(json::object& env_source) {
  if (json::object* ref = existing_object(env_source, "fieldRef")) {
    set_default(*ref, "apiVersion", "v1");
  }
}

void default_container(json::object& c) {
  if (const json::value* image = c.if_contains("image"); image != nullptr && image->is_string()) {
    set_default(c, "imagePullPolicy", json::string(default_image_pull_policy(image->get_string())));
  }
  set_default(c, "terminationMessagePath", "/dev/termination-log");
  set_default(c, "terminationMessagePolicy", "File");
  for_each_object(c, "ports", [](json::object& port) { set_default(port, "protocol", "TCP"); });
  for_each_object(c, "env", [](json::object& env) {
    if (json::object* from = existing_object(env, "valueFrom")) default_field_ref(*from);
  });
  default_probe(c, "livenessProbe");
  default_probe(c, "readinessProbe");
  default_probe(c, "startupProbe");
  if (json::object* lifecycle = existing_object(c, "lifecycle")) {
    default_lifecycle_handler(*lifecycle, "postStart");
    default_lifecycle_handler(*lifecycle, "preStop");
  }
  // A struct, not a pointer, in Go: always written, if only as {}.
  child_object(c, "resources");
}

// SetDefaults_Pod's part for each container, which a template does not get: limits without
// requests ask for what they limit, and on the host's network a container port is a host port.
void default_pod_container(json::object& c, bool host_network) {
  if (json::object* resources = existing_object(c, "resources")) {
    if (json::object* limits = existing_object(*resources, "limits"); limits && !limits->empty()) {
      json::object* requests = child_object(*resources, "requests");
      if (requests != nullptr) {
        for (const auto& [name, quantity] : *limits) {
          if (!requests->contains(name)) requests->emplace(name, quantity);
        }
      }
    }
  }
  if (!host_network) return;
  for_each_object(c, "ports", [](json::object& port) {
    if (const json::value* p = port.if_contains("containerPort"); p && p->is_int64()) {
      set_default(port, "hostPort", p->get_int64());
    }
  });
}

// The pod template of a workload (`spec.template`, a cron job's job template's): its pod spec.
void default_template_at(json::object& obj, std::initializer_list<std::string_view> path) {
  json::object* at = &obj;
  for (auto step : path) {
    at = existing_object(*at, step);
    if (at == nullptr) return;
  }
  if (json::object* spec = existing_object(*at, "spec")) default_pod_spec(*spec);
}

// Replaces the status with what a new object starts with: kube's strategies drop any status a
// create sends, and Go writes a status struct (omitempty does not omit structs) with its fields
// that have no omitempty as zeros: `status: {}`, `status: {replicas: 0}`.
void reset_status(json::object& obj, json::object initial) {
  obj.insert_or_assign("status", std::move(initial));
}

// SetDefaults_PersistentVolumeClaim and its spec's, also for a stateful set's claim templates.
void default_claim(json::object& claim) {
  if (json::object* spec = existing_object(claim, "spec")) {
    set_if_absent(*spec, "volumeMode", "Filesystem");
  }
  if (json::object* status = child_object(claim, "status")) set_default(*status, "phase", "Pending");
}

void default_volume_mode(json::object& volume, std::string_view source) {
  if (json::object* s = existing_object(volume, source)) set_if_absent(*s, "defaultMode", 420);
}

void default_toleration_seconds(json::object& spec) {
  // The DefaultTolerationSeconds admission plugin: five minutes on a not-ready or unreachable
  // node, unless the pod already tolerates that taint.
  json::array* tolerations = existing_array(spec, "tolerations");
  if (tolerations == nullptr) {
    if (spec.contains("tolerations") && !spec.at("tolerations").is_null()) return;
    tolerations = &spec.insert_or_assign("tolerations", json::array()).first->value().get_array();
  }
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    bool tolerated = false;
    for (const auto& t : *tolerations) {
      const json::object* o = t.if_object();
      if (o == nullptr) continue;
      const json::value* k = o->if_contains("key");
      const json::value* effect = o->if_contains("effect");
      const json::value* op = o->if_contains("operator");
      const bool matches_key =
          (k != nullptr && k->is_string() && k->get_string() == key) ||
          ((k == nullptr || (k->is_string() && k->get_string().empty())) && op != nullptr &&
           op->is_string() && op->get_string() == "Exists");
      const bool matches_effect =
          effect == nullptr || (effect->is_string() && (effect->get_string().empty() ||
                                                        effect->get_string() == "NoExecute"));
      if (matches_key && matches_effect) tolerated = true;
    }
    if (!tolerated) {
      tolerations->push_back(json::object{{"key", key},
                                          {"operator", "Exists"},
                                          {"effect", "NoExecute"},
                                          {"tolerationSeconds", 300}});
    }
  }
}

// Whether every container requests and limits the same cpu and memory (Guaranteed), nothing at
// all (BestEffort), or something between (Burstable).
std::string qos_class(const json::object& spec) {
  bool any = false;
  bool guaranteed = true;
  for (const char* list : {"containers", "initContainers"}) {
    const json::value* cs = spec.if_contains(list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (const auto& c : cs->get_array()) {
      const json::object* co = c.if_object();
      const json::value* res = co != nullptr ? co->if_contains("resources") : nullptr;
      const json::object* r = res != nullptr ? res->if_object() : nullptr;
      const json::value* lim = r != nullptr ? r->if_contains("limits") : nullptr;
      const json::value* req = r != nullptr ? r->if_contains("requests") : nullptr;
      const json::object* limits = lim != nullptr ? lim->if_object() : nullptr;
      const json::object* requests = req != nullptr ? req->if_object() : nullptr;
      if ((limits && !limits->empty()) || (requests && !requests->empty())) any = true;
      for (const char* resource : {"cpu", "memory"}) {
        const json::value* l = limits ? limits->if_contains(resource) : nullptr;
        const json::value* q = requests ? requests->if_contains(resource) : nullptr;
        if (l == nullptr || (q != nullptr && *q != *l)) guaranteed = false;
      }
    }
  }
  if (!any) return "BestEffort";
  return guaranteed ? "Guaranteed" : "Burstable";
}

}  // namespace

std::string default_image_pull_policy(std::string_view image) {
  if (image.find('@') != std::string_view::npos) return "IfNotPresent";
  // The tag follows the last ':' after the last '/' (a ':' before it is a registry port).
  const auto slash = image.rfind('/');
  const auto colon = image.rfind(':');
  const bool tagged = colon != std::string_view::npos &&
                      (slash == std::string_view::npos || colon > slash);
  if (!tagged || image.substr(colon + 1) == "latest") return "Always";
  return "IfNotPresent";
}

void default_pod_spec(json::object& spec) {
  set_default(spec, "restartPolicy", "Always");
  set_default(spec, "dnsPolicy", "ClusterFirst");
  set_if_absent(spec, "terminationGracePeriodSeconds", 30);
  set_default(spec, "schedulerName", "default-scheduler");
  set_if_absent(spec, "securityContext", json::object());
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    for_each_object(spec, list, [](json::object& c) { default_container(c); });
  }
  for_each_object(spec, "volumes", [](json::object& v) {
    // SetDefaults_Volume: a volume that names no source is an emptyDir.
    bool sourced = false;
    for (const auto& [key, value] : v) sourced = sourced || (key != "name" && !value.is_null());
    if (!sourced) v.insert_or_assign("emptyDir", json::object());
    for (const char* source : {"secret", "configMap", "downwardAPI", "projected"}) {
      default_volume_mode(v, source);
    }
    if (json::object* host_path = existing_object(v, "hostPath")) {
      set_if_absent(*host_path, "type", "");
    }
    // SetDefaults_ServiceAccountTokenProjection: a projected token lasts an hour.
    if (json::object* projected = existing_object(v, "projected")) {
      for_each_object(*projected, "sources", [](json::object& source) {
        if (json::object* token = existing_object(source, "serviceAccountToken")) {
          set_if_absent(*token, "expirationSeconds", 3600);
        }
        if (json::object* downward = existing_object(source, "downwardAPI")) {
          for_each_object(*downward, "items", default_field_ref);
        }
      });
    }
    // A downward API file's fieldRef is of apiVersion v1 unless it says otherwise.
    if (json::object* downward = existing_object(v, "downwardAPI")) {
      for_each_object(*downward, "items", default_field_ref);
    }
    // SetDefaults_PersistentVolumeClaimSpec for a generic ephemeral volume's claim.
    if (json::object* ephemeral = existing_object(v, "ephemeral")) {
      if (json::object* claim = existing_object(*ephemeral, "volumeClaimTemplate")) {
        if (json::object* claim_spec = existing_object(*claim, "spec")) {
          set_if_absent(*claim_spec, "volumeMode", "Filesystem");
        }
      }
    }
  });
}

// ---- pod-level resources (PodLevelResources, beta and on by default in kube 1.34) ----

bool huge_pages(std::string_view resource) { return resource.starts_with("hugepages-"); }

// IsSupportedPodLevelResource.
bool pod_level_resource(std::string_view resource) {
  return resource == "cpu" || resource == "memory" || huge_pages(resource);
}

// addResourceList: each quantity added to what `into` holds under its name (or copied in).
void add_resources(json::object& into, const json::object& from) {
  for (const auto& [name, quantity] : from) {
    json::value* held = into.if_contains(name);
    if (held == nullptr) {
      into.emplace(name, quantity);
    } else if (held->is_string() && quantity.is_string()) {
      if (auto sum = apimachinery::add_quantities(held->get_string(), quantity.get_string())) {
        *held = *sum;
      }
    }
  }
}

// maxResourceList: each quantity kept where it is larger than what `into` holds.
void max_resources(json::object& into, const json::object& from) {
  for (const auto& [name, quantity] : from) {
    json::value* held = into.if_contains(name);
    if (held == nullptr) {
      into.emplace(name, quantity);
    } else if (held->is_string() && quantity.is_string()) {
      auto c = apimachinery::compare_quantities(quantity.get_string(), held->get_string());
      if (c && *c > 0) *held = quantity;
    }
  }
}

const json::array* array_in(const json::object& parent, std::string_view key) {
  const json::value* v = parent.if_contains(key);
  return v != nullptr ? v->if_array() : nullptr;
}

const json::object* resource_list(const json::object& container, std::string_view which) {
  const json::value* r = container.if_contains("resources");
  const json::value* list = r != nullptr && r->is_object() ? r->get_object().if_contains(which)
                                                           : nullptr;
  return list != nullptr ? list->if_object() : nullptr;
}

// AggregateContainerRequests / AggregateContainerLimits (`which`): the regular containers' and
// the sidecars' sum, raised to what any init container needs while it runs beside the sidecars
// started before it.
json::object aggregate_container_resources(const json::object& spec, std::string_view which) {
  json::object total;
  if (const json::array* containers = array_in(spec, "containers")) {
    for (const auto& c : *containers) {
      if (!c.is_object()) continue;
      if (const json::object* list = resource_list(c.get_object(), which)) {
        add_resources(total, *list);
      }
    }
  }
  json::object sidecars, init_peak;
  if (const json::array* inits = array_in(spec, "initContainers")) {
    for (const auto& c : *inits) {
      if (!c.is_object()) continue;
      const json::object* list = resource_list(c.get_object(), which);
      const json::object none;
      if (list == nullptr) list = &none;
      const json::value* restart = c.get_object().if_contains("restartPolicy");
      if (restart != nullptr && restart->is_string() && restart->get_string() == "Always") {
        add_resources(total, *list);
        add_resources(sidecars, *list);
        max_resources(init_peak, sidecars);
      } else {
        json::object running = *list;
        add_resources(running, sidecars);
        max_resources(init_peak, running);
      }
    }
  }
  max_resources(total, init_peak);
  return total;
}

// defaultHugePagePodLimits: where the pod already sets some resources, a huge page size that
// containers limit and the pod neither requests nor limits gets the containers' total as its
// pod-level limit.
void default_huge_page_pod_limits(json::object& spec, json::object& resources) {
  const json::object* requests = existing_object(resources, "requests");
  const json::object* limits = existing_object(resources, "limits");
  if ((limits == nullptr || limits->empty()) && (requests == nullptr || requests->empty())) return;
  json::object pod_limits = limits != nullptr ? *limits : json::object();
  for (const auto& [name, total] : aggregate_container_resources(spec, "limits")) {
    if (!huge_pages(name)) continue;
    if (requests != nullptr && requests->contains(name)) continue;
    if (!pod_limits.contains(name)) pod_limits.emplace(name, total);
  }
  if (!pod_limits.empty()) resources["limits"] = std::move(pod_limits);
}

// defaultPodRequests: where the pod sets limits, what it does not request is the containers'
// total request (cpu and memory), else its own limit.
void default_pod_requests(json::object& spec, json::object& resources) {
  const json::object* limits = existing_object(resources, "limits");
  if (limits == nullptr || limits->empty()) return;
  const json::object* requests = existing_object(resources, "requests");
  json::object pod_requests = requests != nullptr ? *requests : json::object();
  for (const auto& [name, total] : aggregate_container_resources(spec, "requests")) {
    // Only what may be overcommitted: not huge pages.
    if (pod_level_resource(name) && !huge_pages(name) && !pod_requests.contains(name)) {
      pod_requests.emplace(name, total);
    }
  }
  for (const auto& [name, limit] : *limits) {
    if (pod_level_resource(name) && !pod_requests.contains(name)) pod_requests.emplace(name, limit);
  }
  if (!pod_requests.empty()) resources["requests"] = std::move(pod_requests);
}

void default_pod(json::object& pod) {
  json::object* spec = existing_object(pod, "spec");
  if (spec == nullptr) return;
  default_pod_spec(*spec);
  // SetDefaults_Pod: what a pod gets and a template does not.
  set_if_absent(*spec, "enableServiceLinks", true);
  const json::value* host_network = spec->if_contains("hostNetwork");
  const bool on_host = host_network != nullptr && host_network->is_bool() && host_network->get_bool();
  for (const char* list : {"containers", "initContainers"}) {
    for_each_object(*spec, list, [&](json::object& c) { default_pod_container(c, on_host); });
  }
  // Pod-level resources, once the containers' requests are defaulted.
  if (json::object* resources = existing_object(*spec, "resources")) {
    default_huge_page_pod_limits(*spec, *resources);
    default_pod_requests(*spec, *resources);
  }
}

void default_pod_on_update(json::object& pod, const json::object& old) {
  json::object* spec = existing_object(pod, "spec");
  const json::value* old_spec_v = old.if_contains("spec");
  const json::object* old_spec = old_spec_v != nullptr ? old_spec_v->if_object() : nullptr;
  if (spec == nullptr || old_spec == nullptr) return;
  // Priority keeps what the create assigned; DefaultTolerationSeconds admits updates too.
  for (const char* field : {"priority", "preemptionPolicy"}) {
    if (const json::value* v = old_spec->if_contains(field); v != nullptr && !spec->contains(field)) {
      spec->emplace(field, *v);
    }
  }
  default_toleration_seconds(*spec);
}

void default_pod_on_create(json::object& pod) {
  json::object* spec = existing_object(pod, "spec");
  if (spec != nullptr) {
    // The admission plugins that mutate a pod when it is created: Priority (no priority
    // classes here: priority 0) and DefaultTolerationSeconds.
    if (!spec->contains("priorityClassName")) {
      set_if_absent(*spec, "priority", 0);
      set_default(*spec, "preemptionPolicy", "PreemptLowerPriority");
    }
    default_toleration_seconds(*spec);
  }
  json::object status{{"phase", "Pending"}};
  if (spec != nullptr) status["qosClass"] = qos_class(*spec);
  pod.insert_or_assign("status", std::move(status));
}

void default_service(json::object& service) {
  json::object* spec = existing_object(service, "spec");
  if (spec == nullptr) return;
  set_default(*spec, "type", "ClusterIP");
  set_default(*spec, "sessionAffinity", "None");
  const json::value& type = spec->at("type");
  const std::string_view t = type.is_string() ? std::string_view(type.get_string()) : "";
  if (t == "NodePort" || t == "LoadBalancer") {
    set_default(*spec, "externalTrafficPolicy", "Cluster");
  }
  if (t != "ExternalName") set_default(*spec, "internalTrafficPolicy", "Cluster");
  if (t == "LoadBalancer") set_if_absent(*spec, "allocateLoadBalancerNodePorts", true);
  // SessionAffinity None has no configuration.
  if (const json::value* a = spec->if_contains("sessionAffinity");
      a != nullptr && a->is_string() && a->get_string() == "None") {
    spec->erase("sessionAffinityConfig");
  }
  if (const json::value* affinity = spec->if_contains("sessionAffinity");
      affinity != nullptr && affinity->is_string() && affinity->get_string() == "ClientIP") {
    if (json::object* config = child_object(*spec, "sessionAffinityConfig")) {
      if (json::object* client_ip = child_object(*config, "clientIP")) {
        set_if_absent(*client_ip, "timeoutSeconds", 10800);
      }
    }
  }
  // A load balancer's ingress with an IP has ipMode VIP unless it says otherwise.
  if (t == "LoadBalancer") {
    if (json::object* status = existing_object(service, "status")) {
      if (json::object* balancer = existing_object(*status, "loadBalancer")) {
        for_each_object(*balancer, "ingress", [](json::object& ingress) {
          const json::value* ip = ingress.if_contains("ip");
          if (ip != nullptr && ip->is_string() && !ip->get_string().empty()) {
            set_if_absent(ingress, "ipMode", "VIP");
          }
        });
      }
    }
  }
  for_each_object(*spec, "ports", [](json::object& port) {
    set_default(port, "protocol", "TCP");
    const json::value* target = port.if_contains("targetPort");
    const bool unset = target == nullptr || target->is_null() ||
                       (target->is_int64() && target->get_int64() == 0) ||
                       (target->is_string() && target->get_string().empty());
    if (unset) {
      if (const json::value* p = port.if_contains("port"); p != nullptr && p->is_int64()) {
        port.insert_or_assign("targetPort", p->get_int64());
      }
    }
  });
}

void default_node(json::object& node) {
  // SetDefaults_NodeStatus: what can be allocated is the capacity unless said otherwise.
  json::object* status = existing_object(node, "status");
  if (status == nullptr) return;
  const json::value* allocatable = status->if_contains("allocatable");
  const json::value* capacity = status->if_contains("capacity");
  if ((allocatable == nullptr || allocatable->is_null()) && capacity != nullptr &&
      capacity->is_object()) {
    status->insert_or_assign("allocatable", *capacity);
  }
}

void default_deployment(json::object& deployment) {
  json::object* spec = existing_object(deployment, "spec");
  if (spec == nullptr) return;
  set_if_absent(*spec, "replicas", 1);
  if (json::object* strategy = child_object(*spec, "strategy")) {
    set_default(*strategy, "type", "RollingUpdate");
    const json::value& type = strategy->at("type");
    if (type.is_string() && type.get_string() == "RollingUpdate") {
      if (json::object* rolling = child_object(*strategy, "rollingUpdate")) {
        set_if_absent(*rolling, "maxUnavailable", "25%");
        set_if_absent(*rolling, "maxSurge", "25%");
      }
    }
  }
  set_if_absent(*spec, "revisionHistoryLimit", 10);
  set_if_absent(*spec, "progressDeadlineSeconds", 600);
  default_template_at(*spec, {"template"});
}

void default_secret(json::object& secret) {
  set_default(secret, "type", "Opaque");
  auto it = secret.find("stringData");
  if (it == secret.end()) return;
  if (json::object* string_data = it->value().if_object()) {
    json::object* data = child_object(secret, "data");
    if (data != nullptr) {
      // stringData wins over data for the same key, as in the API's conversion.
      for (const auto& [key, value] : *string_data) {
        if (value.is_string()) data->insert_or_assign(key, base::base64_encode(value.get_string()));
      }
    }
  }
  secret.erase("stringData");
}

void default_namespace(json::object& ns) {
  json::object* meta = existing_object(ns, "metadata");
  if (meta == nullptr) return;
  const json::value* name = meta->if_contains("name");
  if (name == nullptr || !name->is_string() || name->get_string().empty()) return;
  // A copy: adding "labels" to metadata may move its members, `name` with them.
  const std::string copy(name->get_string());
  if (json::object* labels = child_object(*meta, "labels")) {
    labels->insert_or_assign("kubernetes.io/metadata.name", copy);
  }
}

void default_namespace_on_create(json::object& ns) {
  json::value& status = ns["status"];
  if (!status.is_object()) status = json::object();
  status.get_object()["phase"] = "Active";
  json::value& spec = ns["spec"];
  if (!spec.is_object()) spec = json::object();
  spec.get_object()["finalizers"] = json::array{"kubernetes"};
}

void default_endpoints(json::object& endpoints) {
  for_each_object(endpoints, "subsets", [](json::object& subset) {
    for_each_object(subset, "ports", [](json::object& port) { set_default(port, "protocol", "TCP"); });
  });
}


void default_replication_controller(json::object& rc) {
  json::object* spec = existing_object(rc, "spec");
  if (spec == nullptr) return;
  // The template's labels stand in for an empty selector and for the controller's own labels.
  const json::value* labels_v = nullptr;
  if (json::object* tmpl = existing_object(*spec, "template")) {
    if (json::object* meta = existing_object(*tmpl, "metadata")) labels_v = meta->if_contains("labels");
  }
  if (labels_v != nullptr && labels_v->is_object()) {
    const json::object labels = labels_v->get_object();
    const json::value* selector = spec->if_contains("selector");
    if (selector == nullptr || selector->is_null() ||
        (selector->is_object() && selector->get_object().empty())) {
      spec->insert_or_assign("selector", labels);
    }
    if (json::object* meta = existing_object(rc, "metadata")) {
      const json::value* own = meta->if_contains("labels");
      if (own == nullptr || own->is_null() || (own->is_object() && own->get_object().empty())) {
        meta->insert_or_assign("labels", labels);
      }
    }
  }
  set_if_absent(*spec, "replicas", 1);
  default_template_at(*spec, {"template"});
}

void default_replica_set(json::object& rs) {
  json::object* spec = existing_object(rs, "spec");
  if (spec == nullptr) return;
  set_if_absent(*spec, "replicas", 1);
  default_template_at(*spec, {"template"});
}

void default_stateful_set(json::object& sts) {
  json::object* spec = existing_object(sts, "spec");
  if (spec == nullptr) return;
  set_default(*spec, "podManagementPolicy", "OrderedReady");
  if (json::object* strategy = child_object(*spec, "updateStrategy")) {
    if (!strategy->contains("type") || strategy->at("type").is_null() ||
        strategy->at("type") == json::value("")) {
      strategy->insert_or_assign("type", "RollingUpdate");
      set_if_absent(*strategy, "rollingUpdate", json::object());
    }
    const json::value& type = strategy->at("type");
    if (type.is_string() && type.get_string() == "RollingUpdate") {
      if (json::object* rolling = existing_object(*strategy, "rollingUpdate")) {
        set_if_absent(*rolling, "partition", 0);
      }
    }
  }
  if (json::object* retention = child_object(*spec, "persistentVolumeClaimRetentionPolicy")) {
    set_default(*retention, "whenDeleted", "Retain");
    set_default(*retention, "whenScaled", "Retain");
  }
  set_if_absent(*spec, "replicas", 1);
  set_if_absent(*spec, "revisionHistoryLimit", 10);
  default_template_at(*spec, {"template"});
  for_each_object(*spec, "volumeClaimTemplates", [](json::object& claim) {
    // v1 writes each claim template with its own apiVersion and kind (issue 87583).
    claim.insert_or_assign("apiVersion", "v1");
    claim.insert_or_assign("kind", "PersistentVolumeClaim");
    default_claim(claim);
  });
}

void default_daemon_set(json::object& ds) {
  json::object* spec = existing_object(ds, "spec");
  if (spec == nullptr) return;
  if (json::object* strategy = child_object(*spec, "updateStrategy")) {
    set_default(*strategy, "type", "RollingUpdate");
    const json::value& type = strategy->at("type");
    if (type.is_string() && type.get_string() == "RollingUpdate") {
      if (json::object* rolling = child_object(*strategy, "rollingUpdate")) {
        set_if_absent(*rolling, "maxUnavailable", 1);
        set_if_absent(*rolling, "maxSurge", 0);
      }
    }
  }
  set_if_absent(*spec, "revisionHistoryLimit", 10);
  default_template_at(*spec, {"template"});
}

void default_job(json::object& job) {
  json::object* spec = existing_object(job, "spec");
  if (spec == nullptr) return;
  const auto absent = [&](std::string_view key) {
    const json::value* v = spec->if_contains(key);
    return v == nullptr || v->is_null();
  };
  // A job that sets neither runs one pod to one completion.
  if (absent("completions") && absent("parallelism")) spec->insert_or_assign("completions", 1);
  set_if_absent(*spec, "parallelism", 1);
  if (absent("backoffLimit")) {
    spec->insert_or_assign("backoffLimit", absent("backoffLimitPerIndex") ? 6 : 2147483647);
  }
  if (json::object* meta = existing_object(job, "metadata")) {
    const json::value* own = meta->if_contains("labels");
    const json::value* tmpl_labels = nullptr;
    if (json::object* tmpl = existing_object(*spec, "template")) {
      if (json::object* tmeta = existing_object(*tmpl, "metadata")) {
        tmpl_labels = tmeta->if_contains("labels");
      }
    }
    if (tmpl_labels != nullptr && tmpl_labels->is_object() &&
        (own == nullptr || own->is_null() || (own->is_object() && own->get_object().empty()))) {
      meta->insert_or_assign("labels", *tmpl_labels);
    }
  }
  set_if_absent(*spec, "completionMode", "NonIndexed");
  set_if_absent(*spec, "suspend", false);
  if (json::object* policy = existing_object(*spec, "podFailurePolicy")) {
    for_each_object(*policy, "rules", [](json::object& rule) {
      for_each_object(rule, "onPodConditions",
                      [](json::object& pattern) { set_default(pattern, "status", "True"); });
    });
  }
  if (absent("podReplacementPolicy")) {
    spec->insert_or_assign("podReplacementPolicy",
                           absent("podFailurePolicy") ? "TerminatingOrFailed" : "Failed");
  }
  default_template_at(*spec, {"template"});
}

void default_job_on_create(json::object& job) {
  reset_status(job, {});
  json::object* meta = existing_object(job, "metadata");
  json::object* spec = existing_object(job, "spec");
  if (meta == nullptr || spec == nullptr) return;
  const json::value* manual = spec->if_contains("manualSelector");
  if (manual != nullptr && manual->is_bool() && manual->get_bool()) return;
  const json::value* uid_v = meta->if_contains("uid");
  const json::value* name_v = meta->if_contains("name");
  const std::string uid = uid_v != nullptr && uid_v->is_string() ? std::string(uid_v->get_string()) : "";
  const std::string name =
      name_v != nullptr && name_v->is_string() ? std::string(name_v->get_string()) : "";
  // generateSelector: the pods carry the job's name and uid (also under the legacy keys), and
  // the selector picks them by uid; labels the client set are kept (validation judges them).
  json::object* tmpl = child_object(*spec, "template");
  json::object* tmeta = tmpl != nullptr ? child_object(*tmpl, "metadata") : nullptr;
  json::object* labels = tmeta != nullptr ? child_object(*tmeta, "labels") : nullptr;
  if (labels == nullptr) return;
  for (const char* key : {"job-name", "batch.kubernetes.io/job-name"}) {
    if (!labels->contains(key)) labels->emplace(key, name);
  }
  for (const char* key : {"controller-uid", "batch.kubernetes.io/controller-uid"}) {
    if (!labels->contains(key)) labels->emplace(key, uid);
  }
  json::object* selector = child_object(*spec, "selector");
  json::object* match = selector != nullptr ? child_object(*selector, "matchLabels") : nullptr;
  if (match != nullptr && !match->contains("batch.kubernetes.io/controller-uid")) {
    match->emplace("batch.kubernetes.io/controller-uid", uid);
  }
  // What kube's read-time defaulting shows from then on: the job labelled like its pods.
  const json::value* own = meta->if_contains("labels");
  if (own == nullptr || own->is_null() || (own->is_object() && own->get_object().empty())) {
    meta->insert_or_assign("labels", *labels);
  }
}

void default_cron_job(json::object& cron_job) {
  json::object* spec = existing_object(cron_job, "spec");
  if (spec == nullptr) return;
  set_default(*spec, "concurrencyPolicy", "Allow");
  set_if_absent(*spec, "suspend", false);
  set_if_absent(*spec, "successfulJobsHistoryLimit", 3);
  set_if_absent(*spec, "failedJobsHistoryLimit", 1);
  default_template_at(*spec, {"jobTemplate", "spec", "template"});
}

void default_pod_template(json::object& pod_template) {
  default_template_at(pod_template, {"template"});
}

void default_persistent_volume(json::object& pv) {
  if (json::object* spec = existing_object(pv, "spec")) {
    set_default(*spec, "persistentVolumeReclaimPolicy", "Retain");
    set_if_absent(*spec, "volumeMode", "Filesystem");
    if (json::object* host_path = existing_object(*spec, "hostPath")) {
      set_if_absent(*host_path, "type", "");
    }
  }
  if (json::object* status = child_object(pv, "status")) set_default(*status, "phase", "Pending");
}

void default_persistent_volume_on_create(json::object& pv) {
  reset_status(
      pv, json::object{{"phase", "Pending"}, {"lastPhaseTransitionTime", base::now_rfc3339()}});
}

void default_persistent_volume_claim(json::object& pvc) { default_claim(pvc); }

void default_persistent_volume_claim_on_create(json::object& pvc) {
  reset_status(pvc, json::object{{"phase", "Pending"}});
}

void default_limit_range(json::object& limit_range) {
  json::object* spec = existing_object(limit_range, "spec");
  if (spec == nullptr) return;
  for_each_object(*spec, "limits", [](json::object& item) {
    const json::value* type = item.if_contains("type");
    if (type == nullptr || !type->is_string() || type->get_string() != "Container") return;
    // A container's default limit is its max, and its default request the default limit or
    // else its min; empty maps are not written (omitempty).
    json::object defaults = item.contains("default") && item.at("default").is_object()
                                ? item.at("default").get_object()
                                : json::object();
    json::object requests = item.contains("defaultRequest") && item.at("defaultRequest").is_object()
                                ? item.at("defaultRequest").get_object()
                                : json::object();
    auto fill = [](json::object& into, std::string_view from, const json::object& item) {
      const json::value* v = item.if_contains(from);
      if (v == nullptr || !v->is_object()) return;
      for (const auto& [name, quantity] : v->get_object()) {
        if (!into.contains(name)) into.emplace(name, quantity);
      }
    };
    fill(defaults, "max", item);
    for (const auto& [name, quantity] : defaults) {
      if (!requests.contains(name)) requests.emplace(name, quantity);
    }
    fill(requests, "min", item);
    if (!defaults.empty()) item.insert_or_assign("default", std::move(defaults));
    if (!requests.empty()) item.insert_or_assign("defaultRequest", std::move(requests));
  });
}

void default_network_policy(json::object& policy) {
  // The spec is a struct in Go: defaulted also when the body leaves it out.
  json::object* spec = child_object(policy, "spec");
  if (spec == nullptr) return;
  child_object(*spec, "podSelector");  // also a struct: {} selects every pod
  for (const char* direction : {"ingress", "egress"}) {
    for_each_object(*spec, direction, [](json::object& rule) {
      for_each_object(rule, "ports", [](json::object& port) { set_if_absent(port, "protocol", "TCP"); });
    });
  }
  const json::value* types = spec->if_contains("policyTypes");
  if (types == nullptr || types->is_null() || (types->is_array() && types->get_array().empty())) {
    // No policyTypes means Ingress, and Egress too when egress rules are given.
    json::array implied{"Ingress"};
    if (const json::array* egress = existing_array(*spec, "egress"); egress && !egress->empty()) {
      implied.emplace_back("Egress");
    }
    spec->insert_or_assign("policyTypes", std::move(implied));
  }
}

void default_ingress_class(json::object& ingress_class) {
  json::object* spec = existing_object(ingress_class, "spec");
  json::object* parameters = spec != nullptr ? existing_object(*spec, "parameters") : nullptr;
  if (parameters != nullptr) set_if_absent(*parameters, "scope", "Cluster");
}

void default_endpoint_slice(json::object& slice) {
  for_each_object(slice, "ports", [](json::object& port) {
    set_if_absent(port, "name", "");
    set_if_absent(port, "protocol", "TCP");
  });
}

void default_priority_class(json::object& priority_class) {
  set_if_absent(priority_class, "preemptionPolicy", "PreemptLowerPriority");
}

void default_storage_class(json::object& storage_class) {
  set_if_absent(storage_class, "reclaimPolicy", "Delete");
  set_if_absent(storage_class, "volumeBindingMode", "Immediate");
}

void default_csi_driver(json::object& driver) {
  json::object* spec = child_object(driver, "spec");  // a struct in Go, as a policy's spec
  if (spec == nullptr) return;
  set_if_absent(*spec, "attachRequired", true);
  set_if_absent(*spec, "podInfoOnMount", false);
  set_if_absent(*spec, "storageCapacity", false);
  set_if_absent(*spec, "fsGroupPolicy", "ReadWriteOnceWithFSType");
  const json::value* modes = spec->if_contains("volumeLifecycleModes");
  if (modes == nullptr || modes->is_null() || (modes->is_array() && modes->get_array().empty())) {
    spec->insert_or_assign("volumeLifecycleModes", json::array{"Persistent"});
  }
  set_if_absent(*spec, "requiresRepublish", false);
  set_if_absent(*spec, "seLinuxMount", false);
}

void default_role_binding(json::object& binding) {
  static constexpr const char* kRbacGroup = "rbac.authorization.k8s.io";
  if (json::object* ref = existing_object(binding, "roleRef")) {
    set_default(*ref, "apiGroup", kRbacGroup);
  }
  for_each_object(binding, "subjects", [](json::object& subject) {
    const json::value* kind = subject.if_contains("kind");
    if (kind == nullptr || !kind->is_string()) return;
    if (kind->get_string() == "User" || kind->get_string() == "Group") {
      set_default(subject, "apiGroup", kRbacGroup);
    }
  });
}

std::function<void(json::object&)> initial_status(json::object status) {
  return [status = std::move(status)](json::object& obj) { reset_status(obj, status); };
}

}  // namespace kwatch::kinds
