#include "kinds/builtin_columns.hpp"

#include "kinds/api_service.hpp"
#include "kinds/certificate_signing_request.hpp"
#include "kinds/dynamic_resources.hpp"
#include "kinds/flow_control.hpp"
#include "kinds/horizontal_pod_autoscaler.hpp"
#include "apimachinery/json_path.hpp"
#include "apimachinery/label_selector.hpp"
#include "base/timestamps.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

// The cells follow kube-apiserver's printers (pkg/printers/internalversion/printers.go), which the
// server runs with Wide set: `-o wide` columns are priority 1 and always filled.

namespace kwatch::kinds {

using apimachinery::find_field;
using apimachinery::label_selector_from_json;
using apimachinery::label_selector_from_map;

namespace json = boost::json;
using Clock = std::chrono::system_clock;

namespace {

std::string str(const json::object& obj, std::string_view path, std::string fallback = "") {
  const json::value* v = find_field(obj, path);
  if (v == nullptr) return fallback;
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  return fallback;
}

std::int64_t num(const json::object& obj, std::string_view path, std::int64_t fallback = 0) {
  const json::value* v = find_field(obj, path);
  if (v == nullptr) return fallback;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return fallback;
}

bool boolean(const json::object& obj, std::string_view path, bool fallback) {
  const json::value* v = find_field(obj, path);
  return v != nullptr && v->is_bool() ? v->get_bool() : fallback;
}

std::int64_t count(const json::object& obj, std::string_view path) {
  const json::value* v = find_field(obj, path);
  if (v == nullptr) return 0;
  if (v->is_object()) return static_cast<std::int64_t>(v->get_object().size());
  if (v->is_array()) return static_cast<std::int64_t>(v->get_array().size());
  return 0;
}

const json::array* array_at(const json::object& obj, std::string_view path) {
  const json::value* v = find_field(obj, path);
  return v != nullptr ? v->if_array() : nullptr;
}

// An int-or-string (a budget's minAvailable) as IntOrString.String() prints it.
std::string int_or_string(const json::object& obj, std::string_view path, std::string absent) {
  const json::value* v = find_field(obj, path);
  if (v == nullptr || v->is_null()) return absent;
  return str(obj, path, absent);
}

using Cell = std::function<json::value(const json::object&)>;
using TimedCell = std::function<json::value(const json::object&, Clock::time_point)>;

PrinterColumn name_column() {
  PrinterColumn c;
  c.name = "Name";
  c.type = "string";
  c.format = "name";
  c.json_path = ".metadata.name";
  return c;
}

PrinterColumn age_column() {
  PrinterColumn c;
  c.name = "Age";
  c.type = "date";
  c.json_path = ".metadata.creationTimestamp";
  c.fallback = "<unknown>";
  return c;
}

PrinterColumn text(std::string title, std::string path, std::string fallback = "<none>",
                   int priority = 0) {
  PrinterColumn c;
  c.name = std::move(title);
  c.type = "string";
  c.json_path = std::move(path);
  c.fallback = std::move(fallback);
  c.priority = priority;
  return c;
}

// A time shown as the age it has now (a cron job's last schedule), `fallback` when unset.
PrinterColumn since(std::string title, std::string path, std::string fallback) {
  PrinterColumn c;
  c.name = std::move(title);
  c.type = "date";
  c.json_path = std::move(path);
  c.fallback = std::move(fallback);
  return c;
}

PrinterColumn timed(std::string title, std::string type, TimedCell cell) {
  PrinterColumn c;
  c.name = std::move(title);
  c.type = std::move(type);
  c.cell = std::move(cell);
  return c;
}

PrinterColumn computed(std::string title, std::string type, Cell cell) {
  return timed(std::move(title), std::move(type),
               [cell = std::move(cell)](const json::object& o, Clock::time_point) { return cell(o); });
}

PrinterColumn wide(PrinterColumn c) {
  c.priority = 1;
  return c;
}

// layoutContainerCells: "a,b" from a field of each container of a pod spec.
Cell joined(std::string path, std::string field) {
  return [path, field](const json::object& o) {
    std::string out;
    if (const json::array* items = array_at(o, path)) {
      bool first = true;
      for (const auto& item : *items) {
        if (!first) out += ",";
        first = false;
        if (item.is_object()) out += str(item.get_object(), field);
      }
    }
    return json::value(out);
  };
}

// labels.FormatLabels: "app=web,tier=front" sorted by key, "<none>" when empty.
Cell labels_at(std::string path) {
  return [path](const json::object& o) {
    const json::value* v = find_field(o, path);
    std::string out;
    if (v != nullptr && v->is_object()) out = label_selector_from_map(v->get_object()).to_string();
    return json::value(out.empty() ? "<none>" : out);
  };
}

// metav1.FormatLabelSelector: a label selector's string form, "<none>" when it has no
// requirements (or is absent), "<error>" when it is not a valid selector.
std::string format_label_selector(const json::object& o, std::string_view path) {
  const json::value* v = find_field(o, path);
  if (v == nullptr || !v->is_object()) return "<none>";
  auto selector = label_selector_from_json(v->get_object());
  if (!selector) return "<error>";
  std::string out = selector->to_string();
  return out.empty() ? "<none>" : out;
}

Cell selector_at(std::string path) {
  return [path](const json::object& o) { return json::value(format_label_selector(o, path)); };
}

std::vector<PrinterColumn> with_containers(std::vector<PrinterColumn> columns,
                                           const std::string& pod_spec) {
  columns.push_back(wide(computed("Containers", "string", joined(pod_spec + ".containers", "name"))));
  columns.push_back(wide(computed("Images", "string", joined(pod_spec + ".containers", "image"))));
  return columns;
}

// helper.GetAccessModesAsString: RWO, ROX, RWX, RWOP in that order, whatever the list's.
std::string access_modes(const json::object& o, std::string_view path) {
  std::set<std::string> modes;
  if (const json::array* list = array_at(o, path)) {
    for (const auto& m : *list) {
      if (m.is_string()) modes.insert(std::string(m.get_string()));
    }
  }
  static constexpr std::pair<std::string_view, std::string_view> kModes[] = {
      {"ReadWriteOnce", "RWO"}, {"ReadOnlyMany", "ROX"}, {"ReadWriteMany", "RWX"},
      {"ReadWriteOncePod", "RWOP"}};
  std::string out;
  for (const auto& [mode, abbrev] : kModes) {
    if (!modes.contains(std::string(mode))) continue;
    if (!out.empty()) out += ",";
    out += abbrev;
  }
  return out;
}

// The storage class of a volume or claim: the beta annotation first, then the field.
std::string storage_class(const json::object& o) {
  if (const json::value* a = find_field(o, "metadata.annotations"); a && a->is_object()) {
    const json::value* c = a->get_object().if_contains("volume.beta.kubernetes.io/storage-class");
    if (c != nullptr && c->is_string()) return std::string(c->get_string());
  }
  return str(o, "spec.storageClassName");
}

bool terminating(const json::object& o) {
  return find_field(o, "metadata.deletionTimestamp") != nullptr;
}

bool has_condition(const json::object& o, std::string_view type) {
  if (const json::array* conditions = array_at(o, "status.conditions")) {
    for (const auto& c : *conditions) {
      if (!c.is_object() || str(c.get_object(), "type") != type) continue;
      return str(c.get_object(), "status") == "True";  // the first of its type decides
    }
  }
  return false;
}

// "a,b,c" or "a,b,c + 2 more...", "<unset>" for none (listWithMoreString).
std::string list_with_more(const std::vector<std::string>& items) {
  constexpr std::size_t kMax = 3;
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < kMax; ++i) out += (i ? "," : "") + items[i];
  if (items.size() > kMax) return out + " + " + std::to_string(items.size() - kMax) + " more...";
  return out.empty() ? "<unset>" : out;
}

// An address and a port as Go's net.JoinHostPort writes them (IPv6 in brackets).
std::string host_port(std::string_view ip, std::int64_t port) {
  const std::string p = std::to_string(port);
  if (ip.find(':') != std::string_view::npos) return "[" + std::string(ip) + "]:" + p;
  return std::string(ip) + ":" + p;
}

// formatEndpoints: every address with every port of its subset ("10.0.0.5:80"), the first three
// and "+ N more..."; "<none>" without subsets.
std::string endpoints_cell(const json::object& o) {
  const json::array* subsets = array_at(o, "subsets");
  if (subsets == nullptr || subsets->empty()) return "<none>";
  constexpr std::size_t kMax = 3;
  std::vector<std::string> shown;
  std::size_t count = 0;
  for (const auto& subset : *subsets) {
    if (!subset.is_object()) continue;
    const json::array* addresses = array_at(subset.get_object(), "addresses");
    if (addresses == nullptr) continue;
    auto add = [&](std::string text) {
      ++count;
      if (shown.size() < kMax) shown.push_back(std::move(text));
    };
    const json::array* ports = array_at(subset.get_object(), "ports");
    for (const auto& a : *addresses) {
      if (ports != nullptr && !ports->empty()) continue;  // a headless subset: addresses alone
      add(str(a.is_object() ? a.get_object() : json::object(), "ip"));
    }
    if (ports == nullptr) continue;
    for (const auto& port : *ports) {
      std::int64_t number = 0;
      if (port.is_object()) {
        if (const json::value* n = port.get_object().if_contains("port"); n && n->is_int64()) {
          number = n->get_int64();
        }
      }
      for (const auto& a : *addresses) {
        add(host_port(str(a.is_object() ? a.get_object() : json::object(), "ip"), number));
      }
    }
  }
  std::string out;
  for (std::size_t i = 0; i < shown.size(); ++i) out += (i ? "," : "") + shown[i];
  if (count > kMax) out += " + " + std::to_string(count - kMax) + " more...";
  return out;
}

// A policy's paramKind as `<apiVersion>/<kind>`, or <unset>.
json::value param_kind_cell(const json::object& o) {
  if (find_field(o, "spec.paramKind") == nullptr) return "<unset>";
  return json::value(str(o, "spec.paramKind.apiVersion") + "/" + str(o, "spec.paramKind.kind"));
}

// A policy binding's paramRef: `<namespace>/<name>` (`*/<name>` in every namespace), the
// selector as the generated String() of the LabelSelector message writes it, or <unset>.
json::value param_ref_cell(const json::object& o) {
  const json::value* ref = find_field(o, "spec.paramRef");
  if (ref == nullptr || !ref->is_object()) return "<unset>";
  const std::string name = str(o, "spec.paramRef.name");
  if (!name.empty()) {
    const std::string ns = str(o, "spec.paramRef.namespace");
    return json::value((ns.empty() ? "*" : ns) + "/" + name);
  }
  std::string out = "&LabelSelector{MatchLabels:map[string]string{";
  if (const json::value* labels = find_field(o, "spec.paramRef.selector.matchLabels");
      labels != nullptr && labels->is_object()) {
    std::vector<std::pair<std::string, std::string>> sorted;
    for (const auto& [k, v] : labels->get_object()) {
      sorted.emplace_back(k, v.is_string() ? std::string(v.get_string()) : "");
    }
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [k, v] : sorted) out += k + ": " + v + ",";
  }
  out += "},MatchExpressions:[]LabelSelectorRequirement{";
  if (const json::array* exprs = array_at(o, "spec.paramRef.selector.matchExpressions")) {
    for (const auto& e : *exprs) {
      if (!e.is_object()) continue;
      const json::object& r = e.get_object();
      out += "LabelSelectorRequirement{Key:" + str(r, "key") + ",Operator:" + str(r, "operator") +
             ",Values:[";
      if (const json::array* values = array_at(r, "values")) {
        bool first = true;
        for (const auto& v : *values) {
          if (!first) out += " ";
          first = false;
          out += v.is_string() ? std::string(v.get_string()) : "";
        }
      }
      out += "],},";
    }
  }
  return json::value(out + "},}");
}

std::vector<PrinterColumn> endpoints_columns() {
  return {name_column(),
          computed("Endpoints", "string",
                   [](const json::object& o) { return json::value(endpoints_cell(o)); }),
          age_column()};
}

std::vector<PrinterColumn> pod_columns() {
  return {name_column(),
          computed("Ready", "string",
                   [](const json::object& o) {
                     std::size_t ready = 0;
                     if (const json::array* st = array_at(o, "status.containerStatuses")) {
                       for (const auto& c : *st) {
                         const json::value* r =
                             c.is_object() ? c.get_object().if_contains("ready") : nullptr;
                         if (r != nullptr && r->is_bool() && r->get_bool()) ++ready;
                       }
                     }
                     return json::value(std::to_string(ready) + "/" +
                                        std::to_string(count(o, "spec.containers")));
                   }),
          computed("Status", "string",
                   [](const json::object& o) {
                     if (terminating(o)) return json::value("Terminating");
                     return json::value(str(o, "status.phase", "Pending"));
                   }),
          computed("Restarts", "string",
                   [](const json::object& o) {
                     std::int64_t restarts = 0;
                     if (const json::array* st = array_at(o, "status.containerStatuses")) {
                       for (const auto& c : *st) {
                         if (c.is_object()) restarts += num(c.get_object(), "restartCount");
                       }
                     }
                     return json::value(std::to_string(restarts));
                   }),
          age_column(),
          text("IP", ".status.podIP", "<none>", 1),
          text("Node", ".spec.nodeName", "<none>", 1)};
}

std::vector<PrinterColumn> deployment_columns() {
  auto columns = with_containers(
      {name_column(),
       computed("Ready", "string",
                [](const json::object& o) {
                  return json::value(std::to_string(num(o, "status.readyReplicas")) + "/" +
                                     std::to_string(num(o, "spec.replicas", 1)));
                }),
       computed("Up-to-date", "string",
                [](const json::object& o) { return json::value(num(o, "status.updatedReplicas")); }),
       computed("Available", "string",
                [](const json::object& o) {
                  return json::value(num(o, "status.availableReplicas"));
                }),
       age_column()},
      "spec.template.spec");
  columns.push_back(wide(computed("Selector", "string", [](const json::object& o) {
    const json::value* v = find_field(o, "spec.selector");
    if (v == nullptr || !v->is_object()) return json::value("");
    auto selector = label_selector_from_json(v->get_object());
    return json::value(selector ? selector->to_string() : "<invalid>");
  })));
  return columns;
}

// ReplicaSets and ReplicationControllers: DESIRED, CURRENT, READY.
std::vector<PrinterColumn> replicas_columns(Cell selector) {
  auto columns = with_containers(
      {name_column(),
       computed("Desired", "integer",
                [](const json::object& o) { return json::value(num(o, "spec.replicas", 1)); }),
       computed("Current", "integer",
                [](const json::object& o) { return json::value(num(o, "status.replicas")); }),
       computed("Ready", "integer",
                [](const json::object& o) { return json::value(num(o, "status.readyReplicas")); }),
       age_column()},
      "spec.template.spec");
  columns.push_back(wide(computed("Selector", "string", std::move(selector))));
  return columns;
}

std::vector<PrinterColumn> stateful_set_columns() {
  return with_containers(
      {name_column(),
       computed("Ready", "string",
                [](const json::object& o) {
                  return json::value(std::to_string(num(o, "status.readyReplicas")) + "/" +
                                     std::to_string(num(o, "spec.replicas", 1)));
                }),
       age_column()},
      "spec.template.spec");
}

std::vector<PrinterColumn> daemon_set_columns() {
  auto status = [](std::string title, std::string path) {
    return computed(std::move(title), "integer",
                    [path](const json::object& o) { return json::value(num(o, path)); });
  };
  auto columns = with_containers(
      {name_column(), status("Desired", "status.desiredNumberScheduled"),
       status("Current", "status.currentNumberScheduled"), status("Ready", "status.numberReady"),
       status("Up-to-date", "status.updatedNumberScheduled"),
       status("Available", "status.numberAvailable"),
       computed("Node Selector", "string", labels_at("spec.template.spec.nodeSelector")),
       age_column()},
      "spec.template.spec");
  columns.push_back(wide(computed("Selector", "string", selector_at("spec.selector"))));
  return columns;
}

std::vector<PrinterColumn> job_columns() {
  auto columns = with_containers(
      {name_column(),
       computed("Status", "string",
                [](const json::object& o) {
                  if (has_condition(o, "Complete")) return json::value("Complete");
                  if (has_condition(o, "Failed")) return json::value("Failed");
                  if (terminating(o)) return json::value("Terminating");
                  if (has_condition(o, "Suspended")) return json::value("Suspended");
                  if (has_condition(o, "FailureTarget")) return json::value("FailureTarget");
                  return json::value("Running");
                }),
       computed("Completions", "string",
                [](const json::object& o) {
                  const std::string done = std::to_string(num(o, "status.succeeded"));
                  if (find_field(o, "spec.completions") != nullptr) {
                    return json::value(done + "/" + std::to_string(num(o, "spec.completions")));
                  }
                  const std::int64_t parallelism = num(o, "spec.parallelism");
                  if (parallelism > 1) {
                    return json::value(done + "/1 of " + std::to_string(parallelism));
                  }
                  return json::value(done + "/1");
                }),
       timed("Duration", "string",
             [](const json::object& o, Clock::time_point now) {
               auto start = base::parse_rfc3339(str(o, "status.startTime"));
               if (!start) return json::value("");
               auto end = base::parse_rfc3339(str(o, "status.completionTime")).value_or(now);
               return json::value(base::human_duration(
                   std::chrono::duration_cast<std::chrono::seconds>(end - *start)));
             }),
       age_column()},
      "spec.template.spec");
  columns.push_back(wide(computed("Selector", "string", selector_at("spec.selector"))));
  return columns;
}

std::vector<PrinterColumn> cron_job_columns() {
  auto columns = with_containers(
      {name_column(), text("Schedule", ".spec.schedule", ""),
       text("Timezone", ".spec.timeZone", "<none>"),
       computed("Suspend", "boolean",
                [](const json::object& o) {
                  const json::value* v = find_field(o, "spec.suspend");
                  if (v == nullptr || !v->is_bool()) return json::value("<unset>");
                  return json::value(v->get_bool() ? "True" : "False");
                }),
       computed("Active", "integer",
                [](const json::object& o) { return json::value(count(o, "status.active")); }),
       since("Last Schedule", ".status.lastScheduleTime", "<none>"), age_column()},
      "spec.jobTemplate.spec.template.spec");
  columns.push_back(
      wide(computed("Selector", "string", selector_at("spec.jobTemplate.spec.selector"))));
  return columns;
}

std::vector<PrinterColumn> service_columns() {
  return {name_column(), text("Type", ".spec.type", "ClusterIP"),
          text("Cluster-IP", ".spec.clusterIP"),
          // kubectl's getServiceExternalIP: by type; a load balancer's ingress first.
          computed("External-IP", "string",
                   [](const json::object& o) {
                     const std::string type = str(o, "spec.type", "ClusterIP");
                     std::vector<std::string> ips;
                     if (type == "ExternalName") return json::value(str(o, "spec.externalName"));
                     if (type == "LoadBalancer") {
                       if (const json::array* ingress = array_at(o, "status.loadBalancer.ingress")) {
                         for (const auto& i : *ingress) {
                           if (!i.is_object()) continue;
                           const std::string ip = str(i.get_object(), "ip");
                           const std::string host = str(i.get_object(), "hostname");
                           if (!ip.empty()) ips.push_back(ip);
                           else if (!host.empty()) ips.push_back(host);
                         }
                       }
                     }
                     if (const json::array* external = array_at(o, "spec.externalIPs")) {
                       for (const auto& e : *external) {
                         if (e.is_string()) ips.emplace_back(e.get_string());
                       }
                     }
                     if (ips.empty()) {
                       return json::value(type == "LoadBalancer" ? "<pending>" : "<none>");
                     }
                     std::string out;
                     for (const auto& ip : ips) out += (out.empty() ? "" : ",") + ip;
                     return json::value(out);
                   }),
          computed("Port(s)", "string",
                   [](const json::object& o) {
                     std::string out;
                     if (const json::array* ports = array_at(o, "spec.ports")) {
                       for (const auto& p : *ports) {
                         if (!p.is_object()) continue;
                         if (!out.empty()) out += ",";
                         // kubectl's "80:30080/TCP" for a port with a node port.
                         const std::string node_port = str(p.get_object(), "nodePort");
                         out += str(p.get_object(), "port") +
                                (node_port.empty() || node_port == "0" ? "" : ":" + node_port) +
                                "/" + str(p.get_object(), "protocol", "TCP");
                       }
                     }
                     return json::value(out.empty() ? "<none>" : out);
                   }),
          age_column(), wide(computed("Selector", "string", labels_at("spec.selector")))};
}

std::vector<PrinterColumn> node_columns() {
  return {name_column(),
          computed("Status", "string",
                   [](const json::object& o) {
                     if (const json::array* cs = array_at(o, "status.conditions")) {
                       for (const auto& c : *cs) {
                         if (c.is_object() && str(c.get_object(), "type") == "Ready") {
                           return json::value(str(c.get_object(), "status") == "True"
                                                  ? "Ready"
                                                  : "NotReady");
                         }
                       }
                     }
                     return json::value("Unknown");
                   }),
          age_column(), text("Version", ".status.nodeInfo.kubeletVersion", "")};
}

// Events' columns; core/v1 and events.k8s.io/v1 name the object and the message differently.
std::vector<PrinterColumn> event_columns(std::string object_field, std::string message_field,
                                         std::string message_name) {
  return {text("Type", ".type", ""), text("Reason", ".reason", ""),
          computed("Object", "string",
                   [object_field](const json::object& o) {
                     std::string k = str(o, object_field + ".kind");
                     for (auto& ch : k) ch = static_cast<char>(std::tolower(ch));
                     return json::value(k + "/" + str(o, object_field + ".name"));
                   }),
          text(message_name, "." + message_field, ""), name_column()};
}

std::vector<PrinterColumn> persistent_volume_columns() {
  return {name_column(),
          computed("Capacity", "string",
                   [](const json::object& o) {
                     return json::value(str(o, "spec.capacity.storage", "0"));
                   }),
          computed("Access Modes", "string",
                   [](const json::object& o) {
                     return json::value(access_modes(o, "spec.accessModes"));
                   }),
          text("Reclaim Policy", ".spec.persistentVolumeReclaimPolicy", ""),
          computed("Status", "string",
                   [](const json::object& o) {
                     return json::value(terminating(o) ? "Terminating" : str(o, "status.phase"));
                   }),
          computed("Claim", "string",
                   [](const json::object& o) {
                     if (find_field(o, "spec.claimRef") == nullptr) return json::value("");
                     return json::value(str(o, "spec.claimRef.namespace") + "/" +
                                        str(o, "spec.claimRef.name"));
                   }),
          computed("StorageClass", "string",
                   [](const json::object& o) { return json::value(storage_class(o)); }),
          text("VolumeAttributesClass", ".spec.volumeAttributesClassName", "<unset>"),
          text("Reason", ".status.reason", ""), age_column(),
          text("VolumeMode", ".spec.volumeMode", "<unset>", 1)};
}

std::vector<PrinterColumn> persistent_volume_claim_columns() {
  const auto bound = [](const json::object& o) { return !str(o, "spec.volumeName").empty(); };
  return {name_column(),
          computed("Status", "string",
                   [](const json::object& o) {
                     return json::value(terminating(o) ? "Terminating" : str(o, "status.phase"));
                   }),
          text("Volume", ".spec.volumeName", ""),
          computed("Capacity", "string",
                   [bound](const json::object& o) {
                     return json::value(bound(o) ? str(o, "status.capacity.storage", "0") : "");
                   }),
          computed("Access Modes", "string",
                   [bound](const json::object& o) {
                     return json::value(bound(o) ? access_modes(o, "status.accessModes") : "");
                   }),
          computed("StorageClass", "string",
                   [](const json::object& o) { return json::value(storage_class(o)); }),
          text("VolumeAttributesClass", ".spec.volumeAttributesClassName", "<unset>"),
          age_column(), text("VolumeMode", ".spec.volumeMode", "<unset>", 1)};
}

// "requests.cpu: 0/1, pods: 2/10" over status.hard, sorted by resource name; `limits.*` go to
// the LIMIT column, everything else to REQUEST.
Cell quota_usage(bool limits) {
  return [limits](const json::object& o) {
    std::string out;
    const json::value* hard = find_field(o, "status.hard");
    if (hard == nullptr || !hard->is_object()) return json::value(out);
    std::vector<std::string> names;
    for (const auto& [name, _] : hard->get_object()) names.emplace_back(name);
    std::sort(names.begin(), names.end());
    const json::value* used = find_field(o, "status.used");
    for (const auto& name : names) {
      const auto dot = name.find('.');
      const bool is_limit = dot != std::string::npos && name.substr(0, dot) == "limits";
      if (is_limit != limits) continue;
      std::string now = "0";
      if (used != nullptr && used->is_object()) {
        if (const json::value* u = used->get_object().if_contains(name); u && u->is_string()) {
          now = std::string(u->get_string());
        }
      }
      const json::value& h = hard->get_object().at(name);
      if (!out.empty()) out += ", ";
      out += name + ": " + now + "/" + (h.is_string() ? std::string(h.get_string()) : "0");
    }
    return json::value(out);
  };
}

std::vector<PrinterColumn> ingress_columns() {
  return {name_column(), text("Class", ".spec.ingressClassName", "<none>"),
          computed("Hosts", "string",
                   [](const json::object& o) {
                     std::vector<std::string> hosts;
                     const json::array* rules = array_at(o, "spec.rules");
                     const std::size_t n = rules != nullptr ? rules->size() : 0;
                     for (std::size_t i = 0; i < n && hosts.size() < 3; ++i) {
                       if (!(*rules)[i].is_object()) continue;
                       std::string host = str((*rules)[i].get_object(), "host");
                       if (!host.empty()) hosts.push_back(std::move(host));
                     }
                     if (hosts.empty()) return json::value("*");
                     std::string out;
                     for (const auto& h : hosts) out += (out.empty() ? "" : ",") + h;
                     if (hosts.size() == 3 && n > 3) {
                       out += " + " + std::to_string(n - 3) + " more...";
                     }
                     return json::value(out);
                   }),
          computed("Address", "string",
                   [](const json::object& o) {
                     std::set<std::string> addresses;
                     if (const json::array* lb = array_at(o, "status.loadBalancer.ingress")) {
                       for (const auto& i : *lb) {
                         if (!i.is_object()) continue;
                         std::string a = str(i.get_object(), "ip");
                         if (a.empty()) a = str(i.get_object(), "hostname");
                         if (!a.empty()) addresses.insert(std::move(a));
                       }
                     }
                     std::string out;
                     for (const auto& a : addresses) out += (out.empty() ? "" : ",") + a;
                     return json::value(out);
                   }),
          computed("Ports", "string",
                   [](const json::object& o) {
                     return json::value(count(o, "spec.tls") > 0 ? "80, 443" : "80");
                   }),
          age_column()};
}

std::vector<PrinterColumn> endpoint_slice_columns() {
  return {name_column(), text("AddressType", ".addressType", ""),
          computed("Ports", "string",
                   [](const json::object& o) {
                     std::vector<std::string> ports;
                     if (const json::array* list = array_at(o, "ports")) {
                       for (const auto& p : *list) {
                         if (!p.is_object()) continue;
                         const json::object& po = p.get_object();
                         std::string shown = "*";
                         if (const json::value* n = po.if_contains("port"); n && n->is_int64()) {
                           shown = std::to_string(n->get_int64());
                         } else if (const json::value* nm = po.if_contains("name");
                                    nm && nm->is_string()) {
                           shown = std::string(nm->get_string());
                         }
                         ports.push_back(std::move(shown));
                       }
                     }
                     return json::value(list_with_more(ports));
                   }),
          computed("Endpoints", "string",
                   [](const json::object& o) {
                     std::vector<std::string> addresses;
                     if (const json::array* list = array_at(o, "endpoints")) {
                       for (const auto& e : *list) {
                         if (!e.is_object()) continue;
                         if (const json::array* a = array_at(e.get_object(), "addresses")) {
                           for (const auto& ip : *a) {
                             if (ip.is_string()) addresses.emplace_back(ip.get_string());
                           }
                         }
                       }
                     }
                     return json::value(list_with_more(addresses));
                   }),
          age_column()};
}

std::vector<PrinterColumn> csi_driver_columns() {
  auto flag = [](std::string title, std::string path, bool absent) {
    return computed(std::move(title), "boolean", [path, absent](const json::object& o) {
      return json::value(boolean(o, path, absent));
    });
  };
  return {name_column(),
          flag("AttachRequired", "spec.attachRequired", true),
          flag("PodInfoOnMount", "spec.podInfoOnMount", false),
          flag("StorageCapacity", "spec.storageCapacity", false),
          computed("TokenRequests", "string",
                   [](const json::object& o) {
                     const json::array* requests = array_at(o, "spec.tokenRequests");
                     if (requests == nullptr) return json::value("<unset>");
                     std::string out;
                     bool first = true;
                     for (const auto& r : *requests) {
                       if (!first) out += ",";
                       first = false;
                       if (r.is_object()) out += str(r.get_object(), "audience");
                     }
                     return json::value(out);
                   }),
          flag("RequiresRepublish", "spec.requiresRepublish", false),
          computed("Modes", "string",
                   [](const json::object& o) {
                     std::string out;
                     if (const json::array* modes = array_at(o, "spec.volumeLifecycleModes")) {
                       for (const auto& m : *modes) {
                         if (!m.is_string()) continue;
                         if (!out.empty()) out += ",";
                         out += m.get_string();
                       }
                     }
                     return json::value(out.empty() ? "<none>" : out);
                   }),
          age_column()};
}

std::vector<PrinterColumn> controller_revision_columns() {
  return {name_column(),
          computed("Controller", "string",
                   [](const json::object& o) {
                     if (const json::array* refs = array_at(o, "metadata.ownerReferences")) {
                       for (const auto& r : *refs) {
                         if (!r.is_object() || !boolean(r.get_object(), "controller", false)) {
                           continue;
                         }
                         const json::object& ref = r.get_object();
                         // formatResourceName: "<kind>[.<group>]/<name>", lower case.
                         std::string kind = str(ref, "kind");
                         const std::string api_version = str(ref, "apiVersion");
                         if (auto slash = api_version.find('/'); slash != std::string::npos) {
                           kind += "." + api_version.substr(0, slash);
                         }
                         for (auto& ch : kind) ch = static_cast<char>(std::tolower(ch));
                         const std::string name = str(ref, "name");
                         return json::value(kind.empty() ? name : kind + "/" + name);
                       }
                     }
                     return json::value("<none>");
                   }),
          computed("Revision", "string",
                   [](const json::object& o) { return json::value(num(o, "revision")); }),
          age_column()};
}

}  // namespace

std::vector<PrinterColumn> builtin_columns(std::string_view group, std::string_view kind) {
  if (group == "events.k8s.io" && kind == "Event") {
    return event_columns("regarding", "note", "Note");
  }
  if (group == "autoscaling" && kind == "HorizontalPodAutoscaler") {
    return {name_column(),
            computed("Reference", "string",
                     [](const json::object& o) {
                       return json::value(str(o, "spec.scaleTargetRef.kind") + "/" +
                                          str(o, "spec.scaleTargetRef.name"));
                     }),
            computed("Targets", "string",
                     [](const json::object& o) {
                       return json::value(horizontal_pod_autoscaler_targets(o));
                     }),
            text("MinPods", ".spec.minReplicas", "<unset>"),
            text("MaxPods", ".spec.maxReplicas", "0"),
            text("Replicas", ".status.currentReplicas", "0"),
            age_column()};
  }
  if (kind == "Pod") return pod_columns();
  if (kind == "Deployment") return deployment_columns();
  if (kind == "ReplicaSet") return replicas_columns(selector_at("spec.selector"));
  if (kind == "ReplicationController") return replicas_columns(labels_at("spec.selector"));
  if (kind == "StatefulSet") return stateful_set_columns();
  if (kind == "DaemonSet") return daemon_set_columns();
  if (kind == "Job") return job_columns();
  if (kind == "CronJob") return cron_job_columns();
  if (kind == "Service") return service_columns();
  if (kind == "Node") return node_columns();
  if (kind == "Event") return event_columns("involvedObject", "message", "Message");
  if (kind == "PersistentVolume") return persistent_volume_columns();
  if (kind == "PersistentVolumeClaim") return persistent_volume_claim_columns();
  if (kind == "Ingress") return ingress_columns();
  if (kind == "EndpointSlice") return endpoint_slice_columns();
  if (kind == "CSIDriver") return csi_driver_columns();
  if (kind == "ControllerRevision") return controller_revision_columns();
  if (kind == "Namespace") {
    return {name_column(), text("Status", ".status.phase", "Active"), age_column()};
  }
  if (kind == "ConfigMap") {
    return {name_column(),
            computed("Data", "integer",
                     [](const json::object& o) {
                       return json::value(count(o, "data") + count(o, "binaryData"));
                     }),
            age_column()};
  }
  if (kind == "Secret") {
    return {name_column(), text("Type", ".type", "Opaque"),
            computed("Data", "integer",
                     [](const json::object& o) { return json::value(count(o, "data")); }),
            age_column()};
  }
  if (kind == "ServiceAccount") {
    return {name_column(),
            computed("Secrets", "integer",
                     [](const json::object& o) { return json::value(count(o, "secrets")); }),
            age_column()};
  }
  if (kind == "RoleBinding" || kind == "ClusterRoleBinding") {
    return {name_column(),
            computed("Role", "string",
                     [](const json::object& o) {
                       return json::value(str(o, "roleRef.kind") + "/" +
                                          str(o, "roleRef.name"));
                     }),
            age_column()};
  }
  if (kind == "Lease") {
    return {name_column(), text("Holder", ".spec.holderIdentity", ""), age_column()};
  }
  if (kind == "PodTemplate") {
    return {name_column(),
            computed("Containers", "string", joined("template.spec.containers", "name")),
            computed("Images", "string", joined("template.spec.containers", "image")),
            computed("Pod Labels", "string", labels_at("template.metadata.labels"))};
  }
  if (kind == "ResourceQuota") {
    return {name_column(), computed("Request", "string", quota_usage(false)),
            computed("Limit", "string", quota_usage(true)), age_column()};
  }
  if (kind == "LimitRange" || kind == "Role" || kind == "ClusterRole" ||
      kind == "CustomResourceDefinition" || kind == "CSIStorageCapacity") {
    // No printer of their own: kube's default table, the creation time as written. (kube's
    // printers define columns for CSIStorageCapacity, but its storage serves the default table.)
    return {name_column(), text("Created At", ".metadata.creationTimestamp", "")};
  }
  if (kind == "Endpoints") return endpoints_columns();
  if (kind == "PodDisruptionBudget") {
    return {name_column(),
            computed("Min Available", "string",
                     [](const json::object& o) {
                       return json::value(int_or_string(o, "spec.minAvailable", "N/A"));
                     }),
            computed("Max Unavailable", "string",
                     [](const json::object& o) {
                       return json::value(int_or_string(o, "spec.maxUnavailable", "N/A"));
                     }),
            computed("Allowed Disruptions", "integer",
                     [](const json::object& o) {
                       return json::value(num(o, "status.disruptionsAllowed"));
                     }),
            age_column()};
  }
  if (kind == "IngressClass") {
    return {name_column(), text("Controller", ".spec.controller", ""),
            computed("Parameters", "string",
                     [](const json::object& o) {
                       if (find_field(o, "spec.parameters") == nullptr) {
                         return json::value("<none>");
                       }
                       std::string out = str(o, "spec.parameters.kind");
                       if (find_field(o, "spec.parameters.apiGroup") != nullptr) {
                         out += "." + str(o, "spec.parameters.apiGroup");
                       }
                       return json::value(out + "/" + str(o, "spec.parameters.name"));
                     }),
            age_column()};
  }
  if (kind == "ServiceCIDR") {
    return {name_column(),
            computed("CIDRs", "string",
                     [](const json::object& o) {
                       std::string out;
                       const json::value* cidrs = find_field(o, "spec.cidrs");
                       if (cidrs != nullptr && cidrs->is_array()) {
                         for (const auto& c : cidrs->get_array()) {
                           if (!c.is_string()) continue;
                           if (!out.empty()) out += ",";
                           out += c.get_string();
                         }
                       }
                       return json::value(out);
                     }),
            age_column()};
  }
  if (kind == "IPAddress") {
    // kube's cell: <resource>[.<group>][/<namespace>]/<name>, lowercased.
    return {name_column(), computed("ParentRef", "string", [](const json::object& o) {
              const json::value* ref = find_field(o, "spec.parentRef");
              if (ref == nullptr || !ref->is_object()) return json::value("<none>");
              std::string gr = str(o, "spec.parentRef.resource");
              if (const std::string g = str(o, "spec.parentRef.group"); !g.empty()) gr += "." + g;
              for (auto& ch : gr) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
              std::string out = gr;
              if (const std::string ns = str(o, "spec.parentRef.namespace"); !ns.empty()) {
                out += "/" + ns;
              }
              return json::value(out + "/" + str(o, "spec.parentRef.name"));
            })};
  }
  if (kind == "NetworkPolicy") {
    return {name_column(), computed("Pod-Selector", "string", selector_at("spec.podSelector")),
            age_column()};
  }
  if (kind == "PriorityClass") {
    return {name_column(),
            computed("Value", "integer",
                     [](const json::object& o) { return json::value(num(o, "value")); }),
            computed("Global-Default", "boolean",
                     [](const json::object& o) {
                       return json::value(boolean(o, "globalDefault", false));
                     }),
            age_column(), text("PreemptionPolicy", ".preemptionPolicy", "")};
  }
  if (kind == "StorageClass") {
    PrinterColumn name = computed("Name", "string", [](const json::object& o) {
      std::string shown = str(o, "metadata.name");
      // storageutil.IsDefaultAnnotation: the GA or the beta annotation set to "true".
      for (const char* a : {"storageclass.kubernetes.io/is-default-class",
                            "storageclass.beta.kubernetes.io/is-default-class"}) {
        const json::value* annotations = find_field(o, "metadata.annotations");
        const json::value* v =
            annotations && annotations->is_object() ? annotations->get_object().if_contains(a)
                                                     : nullptr;
        if (v != nullptr && v->is_string() && v->get_string() == "true") {
          shown += " (default)";
          break;
        }
      }
      return json::value(shown);
    });
    name.format = "name";
    return {std::move(name), text("Provisioner", ".provisioner", ""),
            text("ReclaimPolicy", ".reclaimPolicy", "Delete"),
            text("VolumeBindingMode", ".volumeBindingMode", "Immediate"),
            computed("AllowVolumeExpansion", "string",
                     [](const json::object& o) {
                       return json::value(boolean(o, "allowVolumeExpansion", false));
                     }),
            age_column()};
  }
  if (kind == "VolumeAttachment") {
    PrinterColumn attacher = text("Attacher", ".spec.attacher", "");
    attacher.format = "name";
    return {name_column(), std::move(attacher),
            text("PV", ".spec.source.persistentVolumeName", ""), text("Node", ".spec.nodeName", ""),
            computed("Attached", "boolean",
                     [](const json::object& o) {
                       return json::value(boolean(o, "status.attached", false));
                     }),
            age_column()};
  }
  if (kind == "CSINode") {
    return {name_column(),
            computed("Drivers", "integer",
                     [](const json::object& o) { return json::value(count(o, "spec.drivers")); }),
            age_column()};
  }
  if (kind == "VolumeAttributesClass") {
    return {name_column(), text("DriverName", ".driverName", ""), age_column()};
  }
  if (kind == "RuntimeClass") return {name_column(), text("Handler", ".handler", ""), age_column()};
  if (kind == "CertificateSigningRequest") {
    // kube's printer: NAME, AGE, SIGNERNAME, REQUESTOR, REQUESTEDDURATION, CONDITION.
    return {name_column(), age_column(), text("SignerName", ".spec.signerName", ""),
            text("Requestor", ".spec.username", ""),
            computed("RequestedDuration", "string",
                     [](const json::object& o) { return json::value(csr_requested_duration_cell(o)); }),
            computed("Condition", "string",
                     [](const json::object& o) { return json::value(csr_condition_cell(o)); })};
  }
  if (kind == "FlowSchema") {
    // kube's printer: the precedence as a number, the Dangling condition's status as MissingPL.
    return {name_column(), text("PriorityLevel", ".spec.priorityLevelConfiguration.name", ""),
            computed("MatchingPrecedence", "string",
                     [](const json::object& o) {
                       return json::value(num(o, "spec.matchingPrecedence"));
                     }),
            computed("DistinguisherMethod", "string",
                     [](const json::object& o) {
                       return json::value(flow_schema_distinguisher_cell(o));
                     }),
            age_column(),
            computed("MissingPL", "string", [](const json::object& o) {
              return json::value(flow_schema_missing_pl_cell(o));
            })};
  }
  if (kind == "PriorityLevelConfiguration") {
    // Numbers where the level is Limited (and queues), "<none>" elsewhere, as kube prints them.
    const auto limited = [](std::string path) {
      return [path = std::move(path)](const json::object& o) {
        const json::value* v = find_field(o, path);
        if (v == nullptr || !(v->is_int64() || v->is_uint64())) return json::value("<none>");
        return *v;
      };
    };
    return {name_column(), text("Type", ".spec.type", ""),
            computed("NominalConcurrencyShares", "string",
                     limited("spec.limited.nominalConcurrencyShares")),
            computed("Queues", "string", limited("spec.limited.limitResponse.queuing.queues")),
            computed("HandSize", "string", limited("spec.limited.limitResponse.queuing.handSize")),
            computed("QueueLengthLimit", "string",
                     limited("spec.limited.limitResponse.queuing.queueLengthLimit")),
            age_column()};
  }
  if (group == "resource.k8s.io" && kind == "ResourceClaim") {
    return {name_column(),
            computed("State", "string",
                     [](const json::object& o) { return json::value(resource_claim_state_cell(o)); }),
            age_column()};
  }
  if (group == "resource.k8s.io" && kind == "ResourceSlice") {
    // kube's printer shows an absent node name as an empty cell.
    return {name_column(), text("Node", ".spec.nodeName", ""), text("Driver", ".spec.driver", ""),
            text("Pool", ".spec.pool.name", ""), age_column()};
  }
  if (kind == "APIService") {
    return {name_column(),
            computed("Service", "string",
                     [](const json::object& o) { return json::value(api_service_target(o)); }),
            computed("Available", "string",
                     [](const json::object& o) { return json::value(api_service_available(o)); }),
            age_column()};
  }
  if (kind == "ValidatingWebhookConfiguration" || kind == "MutatingWebhookConfiguration") {
    return {name_column(),
            computed("Webhooks", "integer",
                     [](const json::object& o) { return json::value(count(o, "webhooks")); }),
            age_column()};
  }
  if (kind == "ValidatingAdmissionPolicy") {
    return {name_column(),
            computed("Validations", "integer",
                     [](const json::object& o) { return json::value(count(o, "spec.validations")); }),
            computed("ParamKind", "string", param_kind_cell),
            age_column()};
  }
  if (kind == "MutatingAdmissionPolicy") {
    return {name_column(),
            computed("Mutations", "integer",
                     [](const json::object& o) { return json::value(count(o, "spec.mutations")); }),
            computed("ParamKind", "string", param_kind_cell),
            age_column()};
  }
  if (kind == "ValidatingAdmissionPolicyBinding" || kind == "MutatingAdmissionPolicyBinding") {
    return {name_column(), text("PolicyName", ".spec.policyName", ""),
            computed("ParamRef", "string", param_ref_cell), age_column()};
  }
  return {name_column(), age_column()};
}

RowOrder builtin_row_order(std::string_view group, std::string_view kind) {
  if (group == "flowcontrol.apiserver.k8s.io" && kind == "FlowSchema") {
    // kube's FlowSchemaSequence: the order in which requests meet the schemas.
    return [](const json::object& a, const json::object& b) {
      const auto pa = num(a, "spec.matchingPrecedence");
      const auto pb = num(b, "spec.matchingPrecedence");
      if (pa != pb) return pa < pb;
      return str(a, "metadata.name") < str(b, "metadata.name");
    };
  }
  return nullptr;
}

}  // namespace kwatch::kinds
