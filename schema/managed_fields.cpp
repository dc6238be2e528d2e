#include "schema/managed_fields.hpp"

#include "apimachinery/json_path.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace kwatch::schema {

using apimachinery::ApiError;
using apimachinery::api_error;
using apimachinery::invalid_error;
using apimachinery::ApiResult;
using apimachinery::Cause;
using base::Errc;
using apimachinery::equal_but_metadata_member;
using apimachinery::object_member;
using apimachinery::string_member;

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxUpdateManagers = 10;
constexpr std::size_t kMaxFieldManagerLength = 128;
constexpr std::size_t kMaxAnnotationsBytes = 256 * 1024;
constexpr std::string_view kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";

// Who an entry is: Apply entries regardless of the version they were applied at.
std::string identifier(const ManagedFieldsEntry& e) {
  return e.manager + '\n' + e.operation + '\n' +
         (e.operation == "Apply" ? std::string() : e.api_version) + '\n' + e.subresource;
}

// Fields no manager owns: identity and bookkeeping the server keeps.
const FieldSet& stripped_fields() {
  static const FieldSet set = [] {
    FieldSet s;
    s.insert({field_step("apiVersion")});
    s.insert({field_step("kind")});
    s.insert({field_step("metadata")});
    for (const char* f : {"name", "namespace", "creationTimestamp", "selfLink", "uid",
                          "clusterName", "generation", "managedFields", "resourceVersion"}) {
      s.insert({field_step("metadata"), field_step(f)});
    }
    return s;
  }();
  return set;
}

const FieldSet& managed_fields_path() {
  static const FieldSet set = [] {
    FieldSet s;
    s.insert({field_step("metadata"), field_step("managedFields")});
    return s;
  }();
  return set;
}

const json::value* managed_fields_of(const json::object* obj) {
  const json::object* meta = obj != nullptr ? object_member(*obj, "metadata") : nullptr;
  return meta != nullptr ? meta->if_contains("managedFields") : nullptr;
}

// `[]` and `[{}]`: a writer asking to clear the managed fields.
bool asks_reset(const json::value* mf) {
  if (mf == nullptr || !mf->is_array()) return false;
  const json::array& a = mf->get_array();
  return a.empty() || (a.size() == 1 && a[0].is_object() && a[0].get_object().empty());
}

std::vector<ManagedFieldsEntry> decode_or_empty(const json::value* mf) {
  if (mf == nullptr) return {};
  auto d = decode_managed_fields(*mf, nullptr);
  return d ? std::move(*d) : std::vector<ManagedFieldsEntry>();
}

void drop_empty(std::vector<ManagedFieldsEntry>& entries) {
  std::erase_if(entries, [](const ManagedFieldsEntry& e) { return e.fields.empty(); });
}

// Folds the oldest Update entries into one "ancient-changes" entry per version until at most
// kMaxUpdateManagers are left.
void cap_update_managers(std::vector<ManagedFieldsEntry>& entries) {
  std::vector<std::size_t> updates;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].operation == "Update") updates.push_back(i);
  }
  if (updates.size() <= kMaxUpdateManagers) return;
  std::stable_sort(updates.begin(), updates.end(), [&](std::size_t a, std::size_t b) {
    // RFC 3339 at one precision orders as text; a missing time counts as oldest.
    if (entries[a].time != entries[b].time) return entries[a].time < entries[b].time;
    return identifier(entries[a]) < identifier(entries[b]);
  });
  std::map<std::string, std::size_t> first_of_version;  // version -> entry that holds the bucket
  std::vector<bool> gone(entries.size(), false);
  std::size_t left = updates.size();
  for (std::size_t k = 0; k < updates.size() && left > kMaxUpdateManagers; ++k) {
    ManagedFieldsEntry& e = entries[updates[k]];
    auto it = first_of_version.find(e.api_version);
    if (it == first_of_version.end()) {
      first_of_version.emplace(e.api_version, updates[k]);
      continue;
    }
    ManagedFieldsEntry& bucket = entries[it->second];
    bucket.manager = "ancient-changes";
    bucket.subresource.clear();
    bucket.fields = bucket.fields.union_with(e.fields);
    bucket.time = e.time;
    gone[updates[k]] = true;
    --left;
  }
  std::vector<ManagedFieldsEntry> kept;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!gone[i]) kept.push_back(std::move(entries[i]));
  }
  entries = std::move(kept);
  // Two buckets of one version cannot arise; an existing "ancient-changes" entry of the
  // version merges with the new one.
  std::unordered_map<std::string, std::size_t> first;
  std::vector<ManagedFieldsEntry> merged;
  for (auto& e : entries) {
    auto [it, fresh] = first.try_emplace(identifier(e), merged.size());
    if (fresh) {
      merged.push_back(std::move(e));
    } else {
      ManagedFieldsEntry& into = merged[it->second];
      into.fields = into.fields.union_with(e.fields);
      into.time = std::max(into.time, e.time);
    }
  }
  entries = std::move(merged);
}

void store(json::object& obj, std::vector<ManagedFieldsEntry> entries) {
  json::object* meta = object_member(obj, "metadata");
  if (meta == nullptr) {
    if (entries.empty()) return;
    obj["metadata"] = json::object();
    meta = object_member(obj, "metadata");
  }
  if (entries.empty()) {
    meta->erase("managedFields");
  } else {
    (*meta)["managedFields"] = encode_managed_fields(std::move(entries), meta->storage());
  }
}

// What a write changed, leaving out metadata.managedFields (bookkeeping, not a field anyone
// owns) and the fields the endpoint does not write.
Comparison compare_objects(const json::object& before, const json::object& after,
                           const FieldManagerScope& scope) {
  Comparison c = compare(before, after, *scope.type, &managed_fields_path());
  if (!scope.reset.empty()) {
    c.added = c.added.recursive_difference(scope.reset);
    c.modified = c.modified.recursive_difference(scope.reset);
    c.removed = c.removed.recursive_difference(scope.reset);
  }
  return c;
}


std::string printed_manager(const ManagedFieldsEntry& e) {
  std::string out = json::serialize(json::string(e.manager));
  if (!e.subresource.empty()) out += " with subresource " + json::serialize(json::string(e.subresource));
  if (e.operation == "Update") out += " using " + e.api_version;
  return out;
}

ApiError conflict_error(const std::vector<std::pair<const ManagedFieldsEntry*, FieldSet>>& conflicts) {
  std::vector<Cause> causes;
  std::vector<std::pair<std::string, std::vector<std::string>>> by_manager;
  for (const auto& conflict : conflicts) {
    const std::string manager = printed_manager(*conflict.first);
    auto& paths = by_manager.emplace_back(manager, std::vector<std::string>()).second;
    conflict.second.for_each([&](const FieldPath& p) {
      paths.push_back(path_string(p));
      causes.push_back({"FieldManagerConflict", "conflict with " + manager, path_string(p)});
    });
  }
  std::sort(by_manager.begin(), by_manager.end());
  std::string message;
  if (causes.size() == 1) {
    message = "Apply failed with 1 conflict: " + causes[0].message + ": " + causes[0].field;
  } else {
    message = "Apply failed with " + std::to_string(causes.size()) + " conflicts: ";
    bool first = true;
    for (const auto& [manager, paths] : by_manager) {
      if (!first) message += '\n';
      first = false;
      message += "conflicts with " + manager + ":";
      for (const auto& p : paths) message += "\n- " + p;
    }
  }
  return ApiError(Errc::conflict, std::move(message), std::move(causes));
}

// The fields client-side apply's annotation says its writer set and that still hold those
// values: what `kubectl` may take over without a conflict.
std::optional<FieldSet> last_applied_fields(const json::object& live, const FieldType& type) {
  const json::object* meta = object_member(live, "metadata");
  const json::object* annotations = meta != nullptr ? object_member(*meta, "annotations") : nullptr;
  const std::string_view text = string_member(annotations, kLastApplied);
  if (text.empty()) return std::nullopt;
  boost::system::error_code ec;
  json::value last = json::parse(text, ec);
  if (ec || !last.is_object()) return std::nullopt;
  auto set = field_set_of(last, type);
  if (!set) return std::nullopt;
  Comparison c = compare(last.get_object(), live, type, &managed_fields_path());
  return set->difference(c.modified).difference(c.added).difference(c.removed);
}

void annotations_size_ok_or_drop(json::object& annotations) {
  std::size_t total = 0;
  for (const auto& [k, v] : annotations) {
    total += k.size() + (v.is_string() ? v.get_string().size() : 0);
  }
  if (total > kMaxAnnotationsBytes) annotations.erase(kLastApplied);
}

}  // namespace

std::optional<std::vector<ManagedFieldsEntry>> decode_managed_fields(const json::value& v,
                                                                      std::string* error) {
  auto fail = [&](std::string why) -> std::optional<std::vector<ManagedFieldsEntry>> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (v.is_null()) return std::vector<ManagedFieldsEntry>();
  if (!v.is_array()) return fail("managedFields must be a list");
  std::vector<ManagedFieldsEntry> out;
  std::unordered_set<std::string> seen;
  for (const auto& item : v.get_array()) {
    const json::object* o = item.if_object();
    if (o == nullptr) return fail("a managedFields entry must be an object");
    ManagedFieldsEntry e;
    e.manager = std::string(string_member(o, "manager"));
    e.operation = std::string(string_member(o, "operation"));
    e.api_version = std::string(string_member(o, "apiVersion"));
    e.time = std::string(string_member(o, "time"));
    e.subresource = std::string(string_member(o, "subresource"));
    if (e.operation != "Apply" && e.operation != "Update") {
      return fail("invalid operation \"" + e.operation + "\"");
    }
    if (string_member(o, "fieldsType") != "FieldsV1") {
      return fail("invalid fieldsType \"" + std::string(string_member(o, "fieldsType")) + "\"");
    }
    const json::value* fields = o->if_contains("fieldsV1");
    if (fields != nullptr && !fields->is_null()) {
      std::string why;
      auto set = FieldSet::from_fields_v1(*fields, &why);
      if (!set) return fail(why);
      e.fields = std::move(*set);
    }
    if (!seen.insert(identifier(e)).second) return fail("found duplicate manager: " + e.manager);
    out.push_back(std::move(e));
  }
  return out;
}

json::array encode_managed_fields(std::vector<ManagedFieldsEntry> entries, json::storage_ptr sp) {
  std::stable_sort(entries.begin(), entries.end(), [](const auto& p, const auto& q) {
    if (p.operation != q.operation) return p.operation == "Apply";
    if (p.time.empty() || q.time.empty()) return false;
    if (p.time != q.time) return p.time < q.time;
    return p.manager < q.manager;
  });
  json::array out(sp);
  out.reserve(entries.size());
  for (auto& e : entries) {
    json::object o(sp);
    o.reserve(7);
    o.emplace("manager", e.manager);
    o.emplace("operation", e.operation);
    o.emplace("apiVersion", e.api_version);
    if (!e.time.empty()) o.emplace("time", e.time);
    o.emplace("fieldsType", "FieldsV1");
    o.emplace("fieldsV1", e.fields.to_fields_v1(sp));
    if (!e.subresource.empty()) o.emplace("subresource", e.subresource);
    out.push_back(std::move(o));
  }
  return out;
}

void track_update(const json::object* live, json::object& next, const std::string& manager,
                  const FieldManagerScope& scope) {
  const json::value* requested = managed_fields_of(&next);
  const json::value* stored = managed_fields_of(live);
  std::vector<ManagedFieldsEntry> entries;
  // Whether `entries` are the stored ones (a subresource never sets them; a request may leave
  // them out or send back what it read): then a write that moves no ownership keeps the stored
  // JSON as it is instead of encoding it again.
  bool from_stored = false;
  if (!scope.subresource.empty()) {
    entries = decode_or_empty(stored);
    from_stored = true;
  } else if (asks_reset(requested)) {
    entries.clear();
  } else {
    std::optional<std::vector<ManagedFieldsEntry>> mine;
    if (requested != nullptr && !(stored != nullptr && *requested == *stored)) {
      mine = decode_managed_fields(*requested, nullptr);
    }
    from_stored = !(mine && !mine->empty());
    entries = from_stored ? decode_or_empty(stored) : std::move(*mine);
  }
  from_stored = from_stored && stored != nullptr;
  if (live != nullptr && entries.empty()) {
    // Objects that have none are not tracked by updates (only creates and applies start it).
    if (json::object* meta = object_member(next, "metadata")) meta->erase("managedFields");
    return;
  }
  static const json::object kNothing;
  Comparison c = compare_objects(live != nullptr ? *live : kNothing, next, scope);
  const FieldSet changed = c.added.union_with(c.modified);
  bool moved = !from_stored;  // whether the entries differ from the stored ones
  for (auto& e : entries) {
    FieldSet kept = e.fields.difference(changed).difference(c.removed);
    if (kept == e.fields) continue;
    e.fields = std::move(kept);
    moved = true;
  }
  FieldSet mine = changed.difference(stripped_fields());
  if (!mine.empty()) {
    ManagedFieldsEntry self{manager, "Update", scope.api_version, scope.now, scope.subresource, {}};
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const auto& e) { return identifier(e) == identifier(self); });
    if (it == entries.end()) {
      self.fields = std::move(mine);
      entries.push_back(std::move(self));
      moved = true;
    } else {
      FieldSet owned = it->fields.union_with(mine);
      if (!(owned == it->fields) || it->time != scope.now) moved = true;
      it->fields = std::move(owned);
      it->time = scope.now;
    }
  }
  const std::size_t count = entries.size();
  drop_empty(entries);
  cap_update_managers(entries);
  json::object* meta = object_member(next, "metadata");
  if (!moved && entries.size() == count && meta != nullptr) {
    (*meta)["managedFields"] = *stored;
    return;
  }
  store(next, std::move(entries));
}

ApiResult<json::object> apply_configuration(const json::object* live, const json::object& config,
                                            const std::string& manager, bool force,
                                            const FieldManagerScope& scope) {
  const std::string version(string_member(&config, "apiVersion"));
  if (version != scope.api_version) {
    return api_error(Errc::bad_request,
                     "Incorrect version specified in apply patch. Specified patch version: " +
                         version + ", expected: " + scope.api_version);
  }
  if (const json::value* mf = managed_fields_of(&config); mf != nullptr && !mf->is_null()) {
    return api_error(Errc::bad_request, "metadata.managedFields must be nil");
  }
  auto applied = field_set_of(config, *scope.type);
  if (!applied) {
    return api_error(Errc::bad_request,
                     "failed to create typed patch object: " + applied.error().message);
  }
  FieldSet config_set = applied->recursive_difference(scope.reset);

  static const json::object kNothing;
  const json::object& before = live != nullptr ? *live : kNothing;
  std::vector<ManagedFieldsEntry> entries = decode_or_empty(managed_fields_of(live));
  ManagedFieldsEntry self{manager, "Apply", scope.api_version, "", scope.subresource, {}};
  auto self_it = std::find_if(entries.begin(), entries.end(),
                              [&](const auto& e) { return identifier(e) == identifier(self); });
  FieldSet last;
  if (self_it != entries.end()) {
    last = std::move(self_it->fields);
    self.time = self_it->time;
    entries.erase(self_it);
  }

  json::object merged = merge(before, config, *scope.type);
  if (json::object* meta = object_member(merged, "metadata")) meta->erase("managedFields");
  if (!last.empty()) {
    // Fields applied last time and not now go, unless someone (the applier included, for what
    // it applies now) owns them; the object's identity is never removed.
    FieldSet owned = config_set.union_with(stripped_fields());
    for (const auto& e : entries) owned = owned.union_with(e.fields);
    FieldSet gone = with_named_fields(last, *scope.type)
                        .difference(with_named_fields(owned, *scope.type));
    remove_fields(merged, gone, *scope.type);
  }

  Comparison c = compare_objects(before, merged, scope);
  const FieldSet changed = c.added.union_with(c.modified);
  std::vector<std::pair<const ManagedFieldsEntry*, FieldSet>> conflicts;
  for (const auto& e : entries) {
    FieldSet contested = e.fields.intersection(changed);
    if (!contested.empty()) conflicts.emplace_back(&e, std::move(contested));
  }
  if (!conflicts.empty() && !force) {
    // kubectl taking over from its own client-side apply: the fields the annotation shows it
    // set are not contested.
    std::optional<FieldSet> allowed;
    if (manager == "kubectl") allowed = last_applied_fields(before, *scope.type);
    if (allowed) {
      for (auto& [entry, set] : conflicts) set = set.difference(*allowed);
      std::erase_if(conflicts, [](const auto& c) { return c.second.empty(); });
    }
    if (!conflicts.empty()) return conflict_error(conflicts);
  }
  for (auto& e : entries) e.fields = e.fields.difference(changed).difference(c.removed);

  const bool unchanged = equal_but_metadata_member(merged, before, "managedFields");
  self.fields = config_set.difference(stripped_fields());
  if (!unchanged || self.time.empty()) self.time = scope.now;
  entries.push_back(std::move(self));
  drop_empty(entries);
  cap_update_managers(entries);

  json::object out = std::move(merged);
  if (manager == "kubectl" && live != nullptr) {
    // Client-side apply's record follows what kubectl applies server-side.
    json::object* meta = object_member(out, "metadata");
    json::value* annotations = meta != nullptr ? meta->if_contains("annotations") : nullptr;
    if (annotations != nullptr && annotations->is_object() &&
        !string_member(&annotations->get_object(), kLastApplied).empty()) {
      json::value recorded(config);
      if (json::object* m = object_member(recorded.get_object(), "metadata")) {
        if (json::value* a = m->if_contains("annotations"); a && a->is_object()) {
          a->get_object().erase(kLastApplied);
        }
      }
      annotations->get_object()[kLastApplied] = json::serialize(recorded);
      annotations_size_ok_or_drop(annotations->get_object());
    }
  }
  store(out, std::move(entries));
  return out;
}

std::string manager_from_user_agent(std::string_view user_agent) {
  std::string_view prefix = user_agent.substr(0, user_agent.find('/'));
  std::string out;
  for (char c : prefix) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) continue;
    if (out.size() + 1 > kMaxFieldManagerLength) break;
    out += c;
  }
  return out;
}

std::optional<ApiError> check_field_manager(const std::string& manager, bool apply,
                                            const std::string& options) {
  std::vector<Cause> causes;
  if (apply && manager.empty()) {
    causes.push_back({"FieldValueRequired", "Required value: is required for apply patch",
                      "fieldManager"});
  }
  if (manager.size() > kMaxFieldManagerLength) {
    causes.push_back({"FieldValueTooLong",
                      "Too long: may not be more than " + std::to_string(kMaxFieldManagerLength) +
                          " bytes",
                      "fieldManager"});
  }
  for (std::size_t i = 0; i < manager.size(); ++i) {
    const auto u = static_cast<unsigned char>(manager[i]);
    if (u < 0x20 || u == 0x7f) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "invalid character U+%04X at position %zu", u, i);
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + json::serialize(json::string(manager)) + ": " + buf,
                        "fieldManager"});
      break;
    }
  }
  if (causes.empty()) return std::nullopt;
  return invalid_error("meta.k8s.io", options, "", std::move(causes));
}

}  // namespace kwatch::schema
