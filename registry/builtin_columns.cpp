#include "registry/builtin_columns.hpp"

#include "registry/json_path.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cctype>
#include <string>

namespace kwatch::registry {

namespace json = boost::json;

namespace {

std::string str(const json::object& obj, std::string_view path,
                std::string fallback = "") {
  const json::value* v = find_field(obj, path);
  if (v == nullptr) return fallback;
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  return fallback;
}

std::int64_t num(const json::object& obj, std::string_view path) {
  const json::value* v = find_field(obj, path);
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return 0;
}

std::int64_t count(const json::object& obj, std::string_view path) {
  const json::value* v = find_field(obj, path);
  if (v == nullptr) return 0;
  if (v->is_object()) return static_cast<std::int64_t>(v->get_object().size());
  if (v->is_array()) return static_cast<std::int64_t>(v->get_array().size());
  return 0;
}

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

PrinterColumn computed(std::string title, std::string type,
                       std::function<json::value(const json::object&)> cell) {
  PrinterColumn c;
  c.name = std::move(title);
  c.type = std::move(type);
  c.cell = std::move(cell);
  return c;
}

// "a,b" from a field of each element of a list (a template's container names or images).
std::function<json::value(const json::object&)> joined(std::string path, std::string field) {
  return [path, field](const json::object& o) {
    const json::value* v = find_field(o, path);
    std::string out;
    if (v != nullptr && v->is_array()) {
      for (const auto& item : v->get_array()) {
        if (!item.is_object()) continue;
        if (!out.empty()) out += ",";
        out += str(item.get_object(), field);
      }
    }
    return json::value(out);
  };
}

// "app=web,tier=front" from a label map (matchLabels, a service's selector).
std::function<json::value(const json::object&)> labels_at(std::string path) {
  return [path](const json::object& o) {
    const json::value* v = find_field(o, path);
    std::string out;
    if (v != nullptr && v->is_object()) {
      for (const auto& [k, value] : v->get_object()) {
        if (!out.empty()) out += ",";
        out += std::string(k) + "=" + (value.is_string() ? std::string(value.get_string()) : "");
      }
    }
    return json::value(out.empty() ? "<none>" : out);
  };
}

PrinterColumn wide(PrinterColumn c) {
  c.priority = 1;
  return c;
}

std::vector<PrinterColumn> pod_columns() {
  return {name_column(),
          computed("Ready", "string",
                   [](const json::object& o) {
                     std::size_t ready = 0;
                     if (const json::value* st = find_field(o, "status.containerStatuses");
                         st != nullptr && st->is_array()) {
                       for (const auto& c : st->get_array()) {
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
                     if (find_field(o, "metadata.deletionTimestamp") != nullptr) {
                       return json::value("Terminating");
                     }
                     return json::value(str(o, "status.phase", "Pending"));
                   }),
          computed("Restarts", "string",
                   [](const json::object& o) {
                     std::int64_t restarts = 0;
                     if (const json::value* st = find_field(o, "status.containerStatuses");
                         st != nullptr && st->is_array()) {
                       for (const auto& c : st->get_array()) {
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
  return {name_column(),
          computed("Ready", "string",
                   [](const json::object& o) {
                     std::int64_t want =
                         find_field(o, "spec.replicas") ? num(o, "spec.replicas") : 1;
                     return json::value(std::to_string(num(o, "status.readyReplicas")) +
                                        "/" + std::to_string(want));
                   }),
          computed("Up-to-date", "integer",
                   [](const json::object& o) {
                     return json::value(num(o, "status.updatedReplicas"));
                   }),
          computed("Available", "integer",
                   [](const json::object& o) {
                     return json::value(num(o, "status.availableReplicas"));
                   }),
          age_column(),
          wide(computed("Containers", "string",
                        joined("spec.template.spec.containers", "name"))),
          wide(computed("Images", "string",
                        joined("spec.template.spec.containers", "image"))),
          wide(computed("Selector", "string", labels_at("spec.selector.matchLabels")))};
}

std::vector<PrinterColumn> service_columns() {
  return {name_column(), text("Type", ".spec.type", "ClusterIP"),
          text("Cluster-IP", ".spec.clusterIP"), text("External-IP", ".spec.externalIPs"),
          computed("Port(s)", "string",
                   [](const json::object& o) {
                     std::string out;
                     if (const json::value* ports = find_field(o, "spec.ports");
                         ports != nullptr && ports->is_array()) {
                       for (const auto& p : ports->get_array()) {
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
                     if (const json::value* cs = find_field(o, "status.conditions");
                         cs != nullptr && cs->is_array()) {
                       for (const auto& c : cs->get_array()) {
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

std::vector<PrinterColumn> event_columns() {
  return {text("Type", ".type", ""), text("Reason", ".reason", ""),
          computed("Object", "string",
                   [](const json::object& o) {
                     std::string k = str(o, "involvedObject.kind");
                     for (auto& ch : k) ch = static_cast<char>(std::tolower(ch));
                     return json::value(k + "/" + str(o, "involvedObject.name"));
                   }),
          text("Message", ".message", ""), name_column()};
}

}  // namespace

std::vector<PrinterColumn> builtin_columns(std::string_view kind) {
  if (kind == "Pod") return pod_columns();
  if (kind == "Deployment") return deployment_columns();
  if (kind == "Service") return service_columns();
  if (kind == "Node") return node_columns();
  if (kind == "Event") return event_columns();
  if (kind == "Namespace") return {name_column(), text("Status", ".status.phase", "Active"), age_column()};
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
  if (kind == "Lease") return {name_column(), text("Holder", ".spec.holderIdentity", ""), age_column()};
  return {name_column(), age_column()};
}

}  // namespace kwatch::registry
