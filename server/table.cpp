#include "server/table.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace kwatch::server {

namespace json = boost::json;
using namespace std::chrono;

namespace {

const json::value* at(const json::object& obj, std::initializer_list<std::string_view> path) {
  const json::object* cur = &obj;
  const json::value* v = nullptr;
  for (auto step : path) {
    if (cur == nullptr) return nullptr;
    v = cur->if_contains(step);
    if (v == nullptr) return nullptr;
    cur = v->if_object();
  }
  return v;
}

std::string str(const json::object& obj, std::initializer_list<std::string_view> path,
                std::string fallback = "") {
  const json::value* v = at(obj, path);
  if (v == nullptr) return fallback;
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  return fallback;
}

std::int64_t num(const json::object& obj, std::initializer_list<std::string_view> path) {
  const json::value* v = at(obj, path);
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return 0;
}

std::size_t count(const json::object& obj, std::initializer_list<std::string_view> path) {
  const json::value* v = at(obj, path);
  if (v == nullptr) return 0;
  if (v->is_object()) return v->get_object().size();
  if (v->is_array()) return v->get_array().size();
  return 0;
}

std::optional<system_clock::time_point> parse_time(const std::string& s) {
  std::tm tm{};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::nullopt;
  return system_clock::from_time_t(timegm(&tm));
}

struct Column {
  std::string name;
  std::string type;
  std::string format;
  int priority = 0;
  std::function<json::value(const json::object&)> cell;
};

std::vector<Column> columns_for(const registry::ResourceInfo& info,
                                system_clock::time_point now) {
  auto name = Column{"Name", "string", "name", 0,
                     [](const json::object& o) { return json::value(str(o, {"metadata", "name"})); }};
  auto age = Column{"Age", "string", "", 0, [now](const json::object& o) {
                      auto t = parse_time(str(o, {"metadata", "creationTimestamp"}));
                      if (!t) return json::value("<unknown>");
                      return json::value(human_duration(duration_cast<seconds>(now - *t)));
                    }};
  auto text = [](std::string title, std::initializer_list<std::string_view> path,
                 std::string fallback = "<none>", int priority = 0) {
    std::vector<std::string> p(path.begin(), path.end());
    return Column{std::move(title), "string", "", priority,
                  [p, fallback](const json::object& o) {
                    const json::object* cur = &o;
                    const json::value* v = nullptr;
                    for (const auto& step : p) {
                      v = cur != nullptr ? cur->if_contains(step) : nullptr;
                      if (v == nullptr) return json::value(fallback);
                      cur = v->if_object();
                    }
                    if (v->is_string() && !v->get_string().empty()) return json::value(*v);
                    if (v->is_number()) return json::value(*v);
                    return json::value(fallback);
                  }};
  };
  if (!info.printer_columns.empty()) {
    // A custom resource's additionalPrinterColumns: simple JSONPaths (".spec.replicas").
    std::vector<Column> columns{name};
    for (const auto& pc : info.printer_columns) {
      std::vector<std::string> steps;
      std::string_view path = pc.json_path;
      if (path.starts_with('{') && path.ends_with('}')) path = path.substr(1, path.size() - 2);
      while (!path.empty()) {
        if (path.front() == '.') path.remove_prefix(1);
        const auto end = path.find('.');
        steps.emplace_back(path.substr(0, end));
        path = end == std::string_view::npos ? std::string_view() : path.substr(end);
      }
      const bool date = pc.type == "date";
      columns.push_back(Column{pc.name, date ? "string" : pc.type, pc.format, pc.priority,
                               [steps, date, now](const json::object& o) {
                                 const json::object* cur = &o;
                                 const json::value* v = nullptr;
                                 for (const auto& step : steps) {
                                   v = cur != nullptr ? cur->if_contains(step) : nullptr;
                                   if (v == nullptr) return json::value(nullptr);
                                   cur = v->if_object();
                                 }
                                 if (date && v->is_string()) {
                                   auto t = parse_time(std::string(v->get_string()));
                                   if (t) return json::value(human_duration(duration_cast<seconds>(now - *t)));
                                 }
                                 if (v->is_object() || v->is_array()) {
                                   return json::value(json::serialize(*v));
                                 }
                                 return *v;
                               }});
    }
    return columns;
  }
  const std::string& kind = info.kind;
  if (kind == "Pod") {
    return {name,
            {"Ready", "string", "", 0,
             [](const json::object& o) {
               std::size_t ready = 0;
               if (const json::value* st = at(o, {"status", "containerStatuses"});
                   st != nullptr && st->is_array()) {
                 for (const auto& c : st->get_array()) {
                   if (const json::value* r = c.is_object() ? c.get_object().if_contains("ready")
                                                            : nullptr;
                       r != nullptr && r->is_bool() && r->get_bool()) {
                     ++ready;
                   }
                 }
               }
               return json::value(std::to_string(ready) + "/" +
                                  std::to_string(count(o, {"spec", "containers"})));
             }},
            {"Status", "string", "", 0,
             [](const json::object& o) {
               if (at(o, {"metadata", "deletionTimestamp"}) != nullptr) {
                 return json::value("Terminating");
               }
               return json::value(str(o, {"status", "phase"}, "Pending"));
             }},
            {"Restarts", "string", "", 0,
             [](const json::object& o) {
               std::int64_t restarts = 0;
               if (const json::value* st = at(o, {"status", "containerStatuses"});
                   st != nullptr && st->is_array()) {
                 for (const auto& c : st->get_array()) {
                   if (c.is_object()) restarts += num(c.get_object(), {"restartCount"});
                 }
               }
               return json::value(std::to_string(restarts));
             }},
            age,
            text("IP", {"status", "podIP"}, "<none>", 1),
            text("Node", {"spec", "nodeName"}, "<none>", 1)};
  }
  if (kind == "Deployment") {
    return {name,
            {"Ready", "string", "", 0,
             [](const json::object& o) {
               std::int64_t want = at(o, {"spec", "replicas"}) ? num(o, {"spec", "replicas"}) : 1;
               return json::value(std::to_string(num(o, {"status", "readyReplicas"})) + "/" +
                                  std::to_string(want));
             }},
            {"Up-to-date", "integer", "", 0,
             [](const json::object& o) { return json::value(num(o, {"status", "updatedReplicas"})); }},
            {"Available", "integer", "", 0,
             [](const json::object& o) {
               return json::value(num(o, {"status", "availableReplicas"}));
             }},
            age};
  }
  if (kind == "Namespace") return {name, text("Status", {"status", "phase"}, "Active"), age};
  if (kind == "ConfigMap") {
    return {name,
            {"Data", "integer", "", 0,
             [](const json::object& o) {
               return json::value(count(o, {"data"}) + count(o, {"binaryData"}));
             }},
            age};
  }
  if (kind == "Secret") {
    return {name, text("Type", {"type"}, "Opaque"),
            {"Data", "integer", "", 0,
             [](const json::object& o) { return json::value(count(o, {"data"})); }},
            age};
  }
  if (kind == "Service") {
    return {name, text("Type", {"spec", "type"}, "ClusterIP"),
            text("Cluster-IP", {"spec", "clusterIP"}), text("External-IP", {"spec", "externalIPs"}),
            {"Port(s)", "string", "", 0,
             [](const json::object& o) {
               std::string out;
               if (const json::value* ports = at(o, {"spec", "ports"});
                   ports != nullptr && ports->is_array()) {
                 for (const auto& p : ports->get_array()) {
                   if (!p.is_object()) continue;
                   if (!out.empty()) out += ",";
                   out += str(p.get_object(), {"port"}) + "/" +
                          str(p.get_object(), {"protocol"}, "TCP");
                 }
               }
               return json::value(out.empty() ? "<none>" : out);
             }},
            age};
  }
  if (kind == "Node") {
    return {name,
            {"Status", "string", "", 0,
             [](const json::object& o) {
               if (const json::value* cs = at(o, {"status", "conditions"});
                   cs != nullptr && cs->is_array()) {
                 for (const auto& c : cs->get_array()) {
                   if (c.is_object() && str(c.get_object(), {"type"}) == "Ready") {
                     return json::value(str(c.get_object(), {"status"}) == "True" ? "Ready"
                                                                                  : "NotReady");
                   }
                 }
               }
               return json::value("Unknown");
             }},
            age, text("Version", {"status", "nodeInfo", "kubeletVersion"}, "")};
  }
  if (kind == "Event") {
    return {text("Type", {"type"}, ""), text("Reason", {"reason"}, ""),
            {"Object", "string", "", 0,
             [](const json::object& o) {
               std::string k = str(o, {"involvedObject", "kind"});
               for (auto& ch : k) ch = static_cast<char>(std::tolower(ch));
               return json::value(k + "/" + str(o, {"involvedObject", "name"}));
             }},
            text("Message", {"message"}, ""), name};
  }
  if (kind == "ServiceAccount") {
    return {name,
            {"Secrets", "integer", "", 0,
             [](const json::object& o) { return json::value(count(o, {"secrets"})); }},
            age};
  }
  if (kind == "Lease") return {name, text("Holder", {"spec", "holderIdentity"}, ""), age};
  return {name, age};
}

}  // namespace

std::string human_duration(seconds d) {
  auto s = d.count();
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s";
  auto m = s / 60;
  if (m < 10) {
    auto rem = s % 60;
    return std::to_string(m) + "m" + (rem ? std::to_string(rem) + "s" : "");
  }
  if (m < 180) return std::to_string(m) + "m";
  auto h = s / 3600;
  if (h < 8) {
    auto rem = m % 60;
    return std::to_string(h) + "h" + (rem ? std::to_string(rem) + "m" : "");
  }
  if (h < 48) return std::to_string(h) + "h";
  if (h < 24 * 8) {
    auto rem = h % 24;
    return std::to_string(h / 24) + "d" + (rem ? std::to_string(rem) + "h" : "");
  }
  if (h < 24 * 365 * 2) return std::to_string(h / 24) + "d";
  return std::to_string(h / 24 / 365) + "y";
}

json::object to_table(const registry::ResourceInfo& info, const json::object& object_or_list,
                      system_clock::time_point now) {
  const auto columns = columns_for(info, now);
  json::array definitions;
  for (const auto& c : columns) {
    definitions.push_back(json::object{{"name", c.name},
                                       {"type", c.type},
                                       {"format", c.format},
                                       {"description", ""},
                                       {"priority", c.priority}});
  }
  json::array rows;
  auto add_row = [&](const json::object& obj) {
    json::array cells;
    for (const auto& c : columns) cells.push_back(c.cell(obj));
    json::object partial{{"kind", "PartialObjectMetadata"},
                         {"apiVersion", "meta.k8s.io/v1"},
                         {"metadata", obj.contains("metadata") ? obj.at("metadata")
                                                               : json::value(json::object())}};
    rows.push_back(json::object{{"cells", std::move(cells)}, {"object", std::move(partial)}});
  };
  json::object meta;
  if (const json::value* items = object_or_list.if_contains("items");
      items != nullptr && items->is_array()) {
    for (const auto& item : items->get_array()) {
      if (item.is_object()) add_row(item.get_object());
    }
    if (const json::value* m = object_or_list.if_contains("metadata"); m && m->is_object()) {
      meta = m->get_object();
    }
  } else {
    add_row(object_or_list);
    meta["resourceVersion"] = str(object_or_list, {"metadata", "resourceVersion"});
  }
  return json::object{{"kind", "Table"},
                      {"apiVersion", "meta.k8s.io/v1"},
                      {"metadata", std::move(meta)},
                      {"columnDefinitions", std::move(definitions)},
                      {"rows", std::move(rows)}};
}

}  // namespace kwatch::server
