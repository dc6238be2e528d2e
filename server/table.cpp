#include "server/table.hpp"

#include "apimachinery/json_path.hpp"
#include "kinds/builtin_columns.hpp"
#include "base/timestamps.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace kwatch::server {

namespace json = boost::json;
using namespace std::chrono;

namespace {

struct Column {
  std::string name;
  std::string type;
  std::string format;
  int priority = 0;
  std::function<json::value(const json::object&)> cell;
};

// The kind's columns (kinds/builtin_columns.cpp for built-in kinds, additionalPrinterColumns
// for custom resources) as cell functions.
std::vector<Column> columns_for(const kinds::ResourceInfo& info,
                                system_clock::time_point now) {
  const bool custom = info.origin == kinds::KindOrigin::custom;
  std::vector<kinds::PrinterColumn> specs = info.printer_columns;
  if (specs.empty() || custom) {
    kinds::PrinterColumn name;
    name.name = "Name";
    name.type = "string";
    name.format = "name";
    name.json_path = ".metadata.name";
    if (specs.empty()) {
      kinds::PrinterColumn age;
      age.name = "Age";
      age.type = "date";
      age.json_path = ".metadata.creationTimestamp";
      age.fallback = "<unknown>";
      specs.push_back(std::move(age));
    }
    specs.insert(specs.begin(), std::move(name));
  }
  std::vector<Column> columns;
  for (auto& pc : specs) {
    const bool date = pc.type == "date";
    Column c{pc.name, date ? "string" : pc.type, pc.format, pc.priority, {}};
    if (pc.cell) {
      c.cell = [cell = pc.cell, now](const json::object& o) { return cell(o, now); };
    } else {
      c.cell = [path = pc.json_path, fallback = pc.fallback, date, custom,
                now](const json::object& o) -> json::value {
        const json::value* v = apimachinery::find_field(o, path);
        if (v == nullptr || v->is_null()) return custom ? json::value(nullptr) : json::value(fallback);
        if (date && v->is_string()) {
          auto t = base::parse_rfc3339(std::string(v->get_string()));
          if (t) return json::value(base::human_duration(duration_cast<seconds>(now - *t)));
        }
        if (custom) {
          if (v->is_object() || v->is_array()) return json::value(json::serialize(*v));
          return *v;
        }
        if ((v->is_string() && !v->get_string().empty()) || v->is_number()) return *v;
        return json::value(fallback);
      };
    }
    columns.push_back(std::move(c));
  }
  return columns;
}

}  // namespace

std::optional<IncludeObject> parse_include_object(std::string_view text) {
  if (text.empty() || text == "Metadata") return IncludeObject::metadata;
  if (text == "None") return IncludeObject::none;
  if (text == "Object") return IncludeObject::object;
  return std::nullopt;
}

json::object to_table(const kinds::ResourceInfo& info, const json::object& object_or_list,
                      system_clock::time_point now, IncludeObject include) {
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
    json::object row{{"cells", std::move(cells)}};
    if (include == IncludeObject::metadata) {
      row["object"] = json::object{{"kind", "PartialObjectMetadata"},
                                   {"apiVersion", "meta.k8s.io/v1"},
                                   {"metadata", obj.contains("metadata") ? obj.at("metadata")
                                                                         : json::value(json::object())}};
    } else if (include == IncludeObject::object) {
      row["object"] = obj;
    }
    rows.push_back(std::move(row));
  };
  json::object meta;
  if (const json::value* items = object_or_list.if_contains("items");
      items != nullptr && items->is_array()) {
    std::vector<const json::object*> objects;
    for (const auto& item : items->get_array()) {
      if (item.is_object()) objects.push_back(&item.get_object());
    }
    if (info.origin == kinds::KindOrigin::builtin) {
      if (auto order = kinds::builtin_row_order(info.group, info.kind)) {
        std::stable_sort(objects.begin(), objects.end(),
                         [&](const json::object* a, const json::object* b) { return order(*a, *b); });
      }
    }
    for (const json::object* obj : objects) add_row(*obj);
    if (const json::value* m = object_or_list.if_contains("metadata"); m && m->is_object()) {
      meta = m->get_object();
    }
  } else {
    add_row(object_or_list);
    const json::value* rv = apimachinery::find_field(object_or_list, "metadata.resourceVersion");
    meta["resourceVersion"] = rv != nullptr && rv->is_string() ? rv->get_string() : json::string();
  }
  return json::object{{"kind", "Table"},
                      {"apiVersion", "meta.k8s.io/v1"},
                      {"metadata", std::move(meta)},
                      {"columnDefinitions", std::move(definitions)},
                      {"rows", std::move(rows)}};
}

}  // namespace kwatch::server
