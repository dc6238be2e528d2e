#include "registry/builtin_defaults.hpp"

#include "registry/base64.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <initializer_list>

namespace kwatch::registry {

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

void default_container(json::object& c, bool host_network) {
  if (const json::value* image = c.if_contains("image"); image != nullptr && image->is_string()) {
    set_default(c, "imagePullPolicy", json::string(default_image_pull_policy(image->get_string())));
  }
  set_default(c, "terminationMessagePath", "/dev/termination-log");
  set_default(c, "terminationMessagePolicy", "File");
  for_each_object(c, "ports", [&](json::object& port) {
    set_default(port, "protocol", "TCP");
    // On the host's network a container port is also a host port.
    if (host_network) {
      if (const json::value* p = port.if_contains("containerPort"); p && p->is_int64()) {
        set_default(port, "hostPort", p->get_int64());
      }
    }
  });
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
  json::object* resources = child_object(c, "resources");
  // Limits without requests ask for what they limit.
  if (resources != nullptr) {
    if (json::object* limits = existing_object(*resources, "limits"); limits && !limits->empty()) {
      json::object* requests = child_object(*resources, "requests");
      if (requests != nullptr) {
        for (const auto& [name, quantity] : *limits) {
          if (!requests->contains(name)) requests->emplace(name, quantity);
        }
      }
    }
  }
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
  set_if_absent(spec, "enableServiceLinks", true);
  const json::value* host_network = spec.if_contains("hostNetwork");
  const bool on_host = host_network != nullptr && host_network->is_bool() && host_network->get_bool();
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    for_each_object(spec, list, [&](json::object& c) { default_container(c, on_host); });
  }
  for_each_object(spec, "volumes", [](json::object& v) {
    for (const char* source : {"secret", "configMap", "downwardAPI", "projected"}) {
      default_volume_mode(v, source);
    }
    if (json::object* host_path = existing_object(v, "hostPath")) {
      set_if_absent(*host_path, "type", "");
    }
  });
}

void default_pod(json::object& pod) {
  json::object* spec = existing_object(pod, "spec");
  if (spec == nullptr) return;
  default_pod_spec(*spec);
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
  if (const json::value* affinity = spec->if_contains("sessionAffinity");
      affinity != nullptr && affinity->is_string() && affinity->get_string() == "ClientIP") {
    if (json::object* config = child_object(*spec, "sessionAffinityConfig")) {
      if (json::object* client_ip = child_object(*config, "clientIP")) {
        set_if_absent(*client_ip, "timeoutSeconds", 10800);
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
  if (json::object* tmpl = existing_object(*spec, "template")) {
    if (json::object* pod_spec = existing_object(*tmpl, "spec")) default_pod_spec(*pod_spec);
  }
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
        if (value.is_string()) data->insert_or_assign(key, base64_encode(value.get_string()));
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
  if (json::object* labels = child_object(*meta, "labels")) {
    labels->insert_or_assign("kubernetes.io/metadata.name", name->get_string());
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

}  // namespace kwatch::registry
