#include "schema/field_type.hpp"

#include <boost/json/object.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace kwatch::schema {

using apimachinery::ApiResult;
using base::Errc;
using apimachinery::api_error;

namespace json = boost::json;

const FieldType* FieldType::field(std::string_view name) const {
  auto it = std::lower_bound(fields.begin(), fields.end(), name,
                             [](const auto& f, std::string_view n) { return f.first < n; });
  if (it == fields.end() || it->first != name) return nullptr;
  return it->second;
}

// ---- building ----

FieldType* FieldTypes::make(FieldType::Form form) {
  FieldType& t = nodes_.emplace_back();
  t.form = form;
  return &t;
}

namespace {

bool flag(const json::object& s, std::string_view name) {
  const json::value* v = s.if_contains(name);
  return v != nullptr && v->is_bool() && v->get_bool();
}

std::string_view text(const json::object& s, std::string_view name) {
  const json::value* v = s.if_contains(name);
  return v != nullptr && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

void sort_fields(FieldType& t) {
  std::sort(t.fields.begin(), t.fields.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
}

}  // namespace

const FieldType* FieldTypes::from_schema(const json::value& schema) {
  const json::object* s = schema.if_object();
  if (s == nullptr) return deduced_;
  if (flag(*s, "x-kubernetes-int-or-string")) return scalar_;
  const std::string_view type = text(*s, "type");
  const json::object* props = nullptr;
  if (const json::value* p = s->if_contains("properties")) props = p->if_object();
  const bool preserve = flag(*s, "x-kubernetes-preserve-unknown-fields");
  if (props != nullptr && !props->empty()) {
    FieldType* t = make(FieldType::Form::structure);
    t->atomic = text(*s, "x-kubernetes-map-type") == "atomic";
    for (const auto& [name, sub] : *props) t->fields.emplace_back(std::string(name), from_schema(sub));
    sort_fields(*t);
    if (preserve) t->element = deduced_;
    return t;
  }
  if (type == "object") {
    const json::value* additional = s->if_contains("additionalProperties");
    if (additional != nullptr && (additional->is_object() || (additional->is_bool() && additional->get_bool()))) {
      FieldType* t = make(FieldType::Form::map);
      t->atomic = text(*s, "x-kubernetes-map-type") == "atomic";
      t->element = additional->is_object() ? from_schema(*additional) : deduced_;
      return t;
    }
    if (preserve) return deduced_;
    FieldType* t = make(FieldType::Form::structure);
    t->atomic = text(*s, "x-kubernetes-map-type") == "atomic";
    return t;
  }
  if (type == "array") {
    FieldType* t = make(FieldType::Form::list);
    const json::value* items = s->if_contains("items");
    t->element = items != nullptr ? from_schema(*items) : deduced_;
    const std::string_view list_type = text(*s, "x-kubernetes-list-type");
    t->atomic = list_type != "set" && list_type != "map";
    if (list_type == "map") {
      const json::object* item_props = nullptr;
      if (items != nullptr && items->is_object()) {
        if (const json::value* p = items->get_object().if_contains("properties")) item_props = p->if_object();
      }
      if (const json::value* keys = s->if_contains("x-kubernetes-list-map-keys"); keys && keys->is_array()) {
        for (const auto& k : keys->get_array()) {
          if (!k.is_string()) continue;
          t->keys.emplace_back(k.get_string());
          json::value def;
          if (item_props != nullptr) {
            if (const json::value* ks = item_props->if_contains(k.get_string()); ks && ks->is_object()) {
              if (const json::value* d = ks->get_object().if_contains("default")) def = *d;
            }
          }
          t->key_defaults.push_back(std::move(def));
        }
      }
      // A keyed list without keys cannot be merged by key: it is replaced as a whole.
      if (t->keys.empty()) t->atomic = true;
    }
    return t;
  }
  if (type.empty() && (preserve || flag(*s, "x-kubernetes-embedded-resource"))) return deduced_;
  if (type.empty()) return deduced_;
  return scalar_;
}

const FieldType* FieldTypes::object_meta() {
  FieldType* meta = make(FieldType::Form::structure);
  FieldType* strings = make(FieldType::Form::map);
  strings->element = scalar_;
  FieldType* set = make(FieldType::Form::list);
  set->element = scalar_;
  FieldType* managed = make(FieldType::Form::list);
  managed->atomic = true;
  managed->element = deduced_;
  FieldType* owner = make(FieldType::Form::structure);
  for (const char* f : {"apiVersion", "blockOwnerDeletion", "controller", "kind", "name", "uid"}) {
    owner->fields.emplace_back(f, scalar_);
  }
  FieldType* owners = make(FieldType::Form::list);
  owners->element = owner;
  owners->keys = {"uid"};
  owners->key_defaults.emplace_back();
  meta->fields = {{"annotations", strings},
                  {"creationTimestamp", scalar_},
                  {"deletionGracePeriodSeconds", scalar_},
                  {"deletionTimestamp", scalar_},
                  {"finalizers", set},
                  {"generateName", scalar_},
                  {"generation", scalar_},
                  {"labels", strings},
                  {"managedFields", managed},
                  {"name", scalar_},
                  {"namespace", scalar_},
                  {"ownerReferences", owners},
                  {"resourceVersion", scalar_},
                  {"selfLink", scalar_},
                  {"uid", scalar_}};
  return meta;
}

std::shared_ptr<const FieldTypes> FieldTypes::of_resource(const json::value& schema) {
  auto types = std::shared_ptr<FieldTypes>(new FieldTypes());
  types->deduced_ = types->make(FieldType::Form::deduced);
  types->scalar_ = types->make(FieldType::Form::scalar);
  const FieldType* root = types->from_schema(schema);
  FieldType* top = types->make(FieldType::Form::structure);
  if (root->form == FieldType::Form::structure) *top = *root;
  if (root->form == FieldType::Form::deduced) top->element = types->deduced_;
  std::erase_if(top->fields, [](const auto& f) {
    return f.first == "metadata" || f.first == "apiVersion" || f.first == "kind";
  });
  top->fields.emplace_back("apiVersion", types->scalar_);
  top->fields.emplace_back("kind", types->scalar_);
  top->fields.emplace_back("metadata", types->object_meta());
  sort_fields(*top);
  types->root_ = top;
  return types;
}

// ---- values ----

namespace {

bool is_object(const json::value* v) { return v != nullptr && v->is_object(); }
bool is_array(const json::value* v) { return v != nullptr && v->is_array(); }

// The type below a step of `t`.
const FieldType& child_type(const FieldType& t, std::string_view step, const FieldType& deduced) {
  switch (t.form) {
    case FieldType::Form::structure: {
      if (step.starts_with("f:")) {
        if (const FieldType* f = t.field(step.substr(2))) return *f;
      }
      return t.element != nullptr ? *t.element : deduced;
    }
    case FieldType::Form::map:
    case FieldType::Form::list:
      return t.element != nullptr ? *t.element : deduced;
    default:
      return deduced;
  }
}

const FieldType& deduced_type() {
  static const FieldType deduced;
  return deduced;
}

const FieldType& field_of(const FieldType& t, std::string_view name) {
  if (t.form == FieldType::Form::structure) {
    if (const FieldType* f = t.field(name)) return *f;
    return t.element != nullptr ? *t.element : deduced_type();
  }
  if (t.form == FieldType::Form::map && t.element != nullptr) return *t.element;
  return deduced_type();
}

// Whether a node of type `t` holding these values is compared and owned as one field.
bool is_leaf(const FieldType& t, const json::value* a, const json::value* b) {
  switch (t.form) {
    case FieldType::Form::scalar:
      return true;
    case FieldType::Form::structure:
    case FieldType::Form::map:
      return t.atomic || (a && !a->is_object()) || (b && !b->is_object());
    case FieldType::Form::list:
      return t.atomic || (a && !a->is_array()) || (b && !b->is_array());
    case FieldType::Form::deduced:
      return !((a == nullptr || a->is_object()) && (b == nullptr || b->is_object()));
  }
  return true;
}

// The step naming `item` of a granular list; empty with `error` set when it has none.
std::string item_step(const json::value& item, const FieldType& list, std::string* error) {
  if (list.keys.empty()) return value_step(item);
  const json::object* o = item.if_object();
  if (o == nullptr) {
    if (error) *error = "associative list with keys has an element that is not a map";
    return {};
  }
  json::object keys;
  for (std::size_t i = 0; i < list.keys.size(); ++i) {
    const json::value* v = o->if_contains(list.keys[i]);
    if (v == nullptr || v->is_null()) {
      if (i < list.key_defaults.size() && !list.key_defaults[i].is_null()) {
        keys[list.keys[i]] = list.key_defaults[i];
        continue;
      }
      if (error) {
        *error = "associative list with keys has an element that omits key field \"" +
                 list.keys[i] + "\" (and doesn't have default value)";
      }
      return {};
    }
    keys[list.keys[i]] = *v;
  }
  return key_step(keys);
}

struct Collector {
  bool allow_duplicates;
  std::optional<std::string> error;

  void fail(const FieldPath& path, const std::string& what) {
    if (!error) error = (path.empty() ? std::string() : path_string(path) + ": ") + what;
  }

  void collect(const json::value& v, const FieldType& t, FieldPath& path, FieldSet& out) {
    if (error) return;
    if (is_leaf(t, &v, nullptr)) {
      if (!path.empty()) out.insert(path);
      return;
    }
    if (t.form == FieldType::Form::list) {
      std::set<std::string> seen;
      const json::array& items = v.get_array();
      for (std::size_t i = 0; i < items.size(); ++i) {
        std::string why;
        std::string step = item_step(items[i], t, &why);
        if (step.empty()) {
          path.push_back(index_step(i));
          fail(path, why);
          path.pop_back();
          return;
        }
        if (!seen.insert(step).second) {
          if (allow_duplicates) continue;
          fail(path, "duplicate entries for key " + path_string({step}));
          return;
        }
        path.push_back(std::move(step));
        collect(items[i], *t.element, path, out);
        out.insert(path);
        path.pop_back();
      }
      return;
    }
    collect_members(v.get_object(), t, path, out);
  }

  void collect_members(const json::object& o, const FieldType& t, FieldPath& path, FieldSet& out) {
    for (const auto& [key, child] : o) {
      const bool declared = t.form == FieldType::Form::structure && t.field(key) != nullptr;
      path.push_back(field_step(key));
      if (t.form == FieldType::Form::structure && !declared && t.element == nullptr &&
          !allow_duplicates) {
        fail(path, "field not declared in schema");
        path.pop_back();
        return;
      }
      collect(child, field_of(t, key), path, out);
      if (child.is_null() || (child.is_object() && child.get_object().empty()) || !declared) {
        out.insert(path);
      }
      path.pop_back();
    }
  }
};

// The first item of each step of a granular list; items without a step are left out.
std::vector<std::pair<std::string, const json::value*>> indexed_items(const json::array& items,
                                                                      const FieldType& t) {
  std::vector<std::pair<std::string, const json::value*>> out;
  out.reserve(items.size());
  for (const auto& item : items) {
    std::string step = item_step(item, t, nullptr);
    if (!step.empty()) out.emplace_back(std::move(step), &item);
  }
  return out;
}

void compare_into(const json::value* a, const json::value* b, const FieldType& t,
                  FieldPath& path, Comparison& c, const FieldSet* skip);

// The fields of two objects (structures or maps), either of which may be absent.
void compare_members(const json::object* ao, const json::object* bo, const FieldType& t,
                     FieldPath& path, Comparison& c, const FieldSet* skip) {
  // The subset of `skip` below a field; the field is passed over when it is a member.
  auto skipped = [skip](const std::string& step, const FieldSet*& below) {
    below = skip != nullptr ? skip->child(step) : nullptr;
    return below != nullptr && below->member();
  };
  const FieldSet* below = nullptr;
  if (ao) {
    for (const auto& [key, av] : *ao) {
      path.push_back(field_step(key));
      if (!skipped(path.back(), below)) {
        compare_into(&av, bo ? bo->if_contains(key) : nullptr, field_of(t, key), path, c, below);
      }
      path.pop_back();
    }
  }
  if (bo) {
    for (const auto& [key, bv] : *bo) {
      if (ao && ao->contains(key)) continue;
      path.push_back(field_step(key));
      if (!skipped(path.back(), below)) compare_into(nullptr, &bv, field_of(t, key), path, c, below);
      path.pop_back();
    }
  }
}

void compare_into(const json::value* a, const json::value* b, const FieldType& t,
                  FieldPath& path, Comparison& c, const FieldSet* skip) {
  if (a == nullptr && b == nullptr) return;
  if (is_leaf(t, a, b)) {
    if (path.empty()) return;
    if (a == nullptr) {
      c.added.insert(path);
    } else if (b == nullptr) {
      c.removed.insert(path);
    } else if (*a != *b) {
      c.modified.insert(path);
    }
    return;
  }
  if (t.form == FieldType::Form::list) {
    static const json::array none;
    auto left = indexed_items(a ? a->get_array() : none, t);
    auto right = indexed_items(b ? b->get_array() : none, t);
    std::unordered_map<std::string_view, const json::value*> right_of;
    for (const auto& [step, item] : right) right_of.emplace(step, item);
    std::unordered_map<std::string_view, const json::value*> left_of;
    for (const auto& [step, item] : left) {
      if (!left_of.emplace(step, item).second) continue;  // a duplicate: the first counts
      auto r = right_of.find(step);
      path.push_back(step);
      compare_into(item, r != right_of.end() ? r->second : nullptr, *t.element, path, c, nullptr);
      path.pop_back();
    }
    std::set<std::string_view> done;
    for (const auto& [step, item] : right) {
      if (left_of.contains(step) || !done.insert(step).second) continue;
      path.push_back(step);
      compare_into(nullptr, item, *t.element, path, c, nullptr);
      path.pop_back();
    }
  } else {
    compare_members(a ? &a->get_object() : nullptr, b ? &b->get_object() : nullptr, t, path, c,
                    skip);
  }
  if (path.empty()) return;
  if (a == nullptr) c.added.insert(path);
  else if (b == nullptr) c.removed.insert(path);
}

json::value merge_value(const json::value* live, const json::value& config, const FieldType& t);

json::object merge_object(const json::object* live, const json::object& config, const FieldType& t) {
  json::object out = live != nullptr ? *live : json::object();
  for (const auto& [key, cv] : config) {
    if (cv.is_null()) {
      out.erase(key);
      continue;
    }
    const json::value* lv = out.if_contains(key);
    json::value merged = merge_value(lv, cv, field_of(t, key));
    out[key] = std::move(merged);
  }
  return out;
}

// Items both lists have come in config's order; live's other items stay where they were
// relative to them; config's new items come where config puts them.
json::value merge_list(const json::value* live, const json::array& config, const FieldType& t) {
  static const json::array none;
  const json::array& litems = is_array(live) ? live->get_array() : none;
  std::vector<std::string> lsteps(litems.size()), rsteps(config.size());
  std::unordered_map<std::string, std::size_t> lfirst, rfirst;
  for (std::size_t i = 0; i < litems.size(); ++i) {
    lsteps[i] = item_step(litems[i], t, nullptr);
    if (lsteps[i].empty()) lsteps[i] = "#" + std::to_string(i);  // unnamed: live's own
    lfirst.emplace(lsteps[i], i);
  }
  for (std::size_t i = 0; i < config.size(); ++i) {
    rsteps[i] = item_step(config[i], t, nullptr);
    if (rsteps[i].empty()) rsteps[i] = "@" + std::to_string(i);
    rfirst.emplace(rsteps[i], i);
  }
  std::vector<const std::string*> shared;
  for (const auto& s : rsteps) {
    if (lfirst.contains(s)) shared.push_back(&s);
  }
  std::size_t next = 0;  // the shared item expected next
  auto advance_if = [&](const std::string& step) {
    if (next < shared.size() && *shared[next] == step) ++next;
  };
  std::set<std::string> merged;
  json::array out;
  out.reserve(std::max(litems.size(), config.size()));
  std::size_t li = 0, ri = 0;
  while (li < litems.size() || ri < config.size()) {
    if (li < litems.size() && ri < config.size()) {
      if (lsteps[li] == rsteps[ri]) {
        merged.insert(lsteps[li]);
        out.push_back(merge_value(&litems[lfirst[lsteps[li]]], config[ri], *t.element));
        advance_if(rsteps[ri]);
        ++li;
        ++ri;
        continue;
      }
      if (rfirst.contains(lsteps[li]) && next < shared.size() && *shared[next] != lsteps[li] &&
          !merged.contains(lsteps[li])) {
        ++li;  // a shared item that config places later: it comes when config gets there
        continue;
      }
    }
    if (li < litems.size()) {
      const std::string& step = lsteps[li];
      if (!rfirst.contains(step)) {
        out.push_back(litems[li]);
        ++li;
        continue;
      }
      if (merged.contains(step) || ri >= config.size()) {
        ++li;
        continue;
      }
    }
    if (ri < config.size()) {
      const std::string& step = rsteps[ri];
      if (merged.insert(step).second) {
        auto l = lfirst.find(step);
        out.push_back(merge_value(l != lfirst.end() ? &litems[l->second] : nullptr, config[ri],
                                  *t.element));
      }
      advance_if(step);
      ++ri;
    }
  }
  return out;
}

json::value merge_value(const json::value* live, const json::value& config, const FieldType& t) {
  switch (t.form) {
    case FieldType::Form::scalar:
      return config;
    case FieldType::Form::structure:
    case FieldType::Form::map:
      if (t.atomic || !config.is_object()) return config;
      return merge_object(is_object(live) ? &live->get_object() : nullptr, config.get_object(), t);
    case FieldType::Form::deduced:
      if (!config.is_object()) return config;
      return merge_object(is_object(live) ? &live->get_object() : nullptr, config.get_object(), t);
    case FieldType::Form::list:
      if (t.atomic || !config.is_array()) return config;
      return merge_list(live, config.get_array(), t);
  }
  return config;
}

void remove_members(json::object& o, const FieldSet& set, const FieldType& t);

void remove_in(json::value& v, const FieldSet& set, const FieldType& t) {
  if (t.form == FieldType::Form::list) {
    if (t.atomic || !v.is_array()) return;
    json::array& items = v.get_array();
    json::array kept;
    kept.reserve(items.size());
    for (auto& item : items) {
      std::string step = item_step(item, t, nullptr);
      const FieldSet* sub = step.empty() ? nullptr : set.child(step);
      if (sub != nullptr && sub->member()) continue;
      if (sub != nullptr) remove_in(item, *sub, *t.element);
      kept.push_back(std::move(item));
    }
    items = std::move(kept);
    return;
  }
  if (t.form == FieldType::Form::scalar || !v.is_object()) return;
  remove_members(v.get_object(), set, t);
}

void remove_members(json::object& o, const FieldSet& set, const FieldType& t) {
  for (const auto& [step, sub] : set.children()) {
    if (!step.starts_with("f:")) continue;
    const std::string_view name = std::string_view(step).substr(2);
    auto it = o.find(name);
    if (it == o.end()) continue;
    if (sub.member()) {
      o.erase(it);
    } else {
      remove_in(it->value(), sub, field_of(t, name));
    }
  }
}

void add_named(FieldSet& set, const FieldType& t) {
  // children() is const; each child is reached again through descend.
  std::vector<std::string> steps;
  for (const auto& [step, sub] : set.children()) steps.push_back(step);
  for (const auto& step : steps) {
    FieldSet& sub = set.descend(step);
    if (t.form == FieldType::Form::structure && step.starts_with("f:") &&
        t.field(std::string_view(step).substr(2)) != nullptr) {
      sub.set_member(true);
    }
    add_named(sub, child_type(t, step, deduced_type()));
  }
}

}  // namespace

ApiResult<FieldSet> field_set_of(const json::value& value, const FieldType& type,
                                 bool allow_duplicates) {
  Collector c{allow_duplicates, std::nullopt};
  FieldSet out;
  FieldPath path;
  c.collect(value, type, path, out);
  if (c.error) return api_error(Errc::bad_request, *c.error);
  return out;
}

ApiResult<FieldSet> field_set_of(const json::object& value, const FieldType& type,
                                 bool allow_duplicates) {
  if (is_leaf(type, nullptr, nullptr)) return field_set_of(json::value(value), type, allow_duplicates);
  Collector c{allow_duplicates, std::nullopt};
  FieldSet out;
  FieldPath path;
  c.collect_members(value, type, path, out);
  if (c.error) return api_error(Errc::bad_request, *c.error);
  return out;
}

Comparison compare(const json::value* before, const json::value* after, const FieldType& type,
                   const FieldSet* skip) {
  Comparison c;
  FieldPath path;
  compare_into(before, after, type, path, c, skip);
  return c;
}

Comparison compare(const json::object& before, const json::object& after, const FieldType& type,
                   const FieldSet* skip) {
  Comparison c;
  FieldPath path;
  compare_members(&before, &after, type, path, c, skip);
  return c;
}

json::value merge(const json::value& live, const json::value& config, const FieldType& type) {
  return merge_value(&live, config, type);
}

json::object merge(const json::object& live, const json::object& config, const FieldType& type) {
  return merge_object(&live, config, type);
}

void remove_fields(json::value& value, const FieldSet& set, const FieldType& type) {
  remove_in(value, set, type);
}

void remove_fields(json::object& value, const FieldSet& set, const FieldType& type) {
  if (type.form != FieldType::Form::scalar) remove_members(value, set, type);
}

FieldSet with_named_fields(const FieldSet& set, const FieldType& type) {
  FieldSet out = set;
  add_named(out, type);
  return out;
}

}  // namespace kwatch::schema
