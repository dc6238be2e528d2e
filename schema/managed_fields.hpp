// Field ownership as kube-apiserver's field manager keeps it in `metadata.managedFields`: which
// manager (the writer's `fieldManager`, or its User-Agent up to the first "/") last set which
// fields, by Update (create, update, patch) or by Apply (server-side apply).
//
// - An Update takes the fields it changes away from everyone else and gives them to its writer;
//   fields it removes leave every owner. An update of an object without managedFields is not
//   tracked (creates are); `managedFields: []` or `[{}]` in the body clears them; a body's
//   other valid managedFields replace the stored ones, invalid or absent ones keep them.
// - An Apply merges the configuration into the object by the kind's field types, makes its
//   manager own exactly the configuration's fields, removes the fields the manager applied last
//   time and no longer applies (unless another manager owns them), and refuses to change a
//   field another manager owns to a different value (409 naming the managers and fields) unless
//   forced, which moves the field to the applier. The `kubectl` manager may take over fields of
//   client-side apply that the last-applied-configuration annotation shows, and keeps that
//   annotation in step (migration between client-side and server-side apply).
// Entries are ordered as kube orders them (Apply first, then by time, then by manager), Update
// entries are merged per manager, API version and subresource, and at most 10 Update entries
// are kept (older ones fold into "ancient-changes").
//
// Pure functions over JSON values; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"
#include "schema/field_set.hpp"
#include "schema/field_type.hpp"

#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kwatch::schema {

struct ManagedFieldsEntry {
  std::string manager;
  std::string operation;  // "Apply" or "Update"
  std::string api_version;
  std::string time;  // RFC 3339; "" when absent
  std::string subresource;
  FieldSet fields;
};

// metadata.managedFields as entries; nullopt with `error` set when one is malformed (unknown
// operation or fieldsType, bad fieldsV1, a manager twice).
std::optional<std::vector<ManagedFieldsEntry>> decode_managed_fields(const boost::json::value& v,
                                                                      std::string* error);
// The entries as metadata.managedFields (allocated from `sp`): Apply entries first, then by time.
boost::json::array encode_managed_fields(std::vector<ManagedFieldsEntry> entries,
                                         boost::json::storage_ptr sp = {});

// Where a write lands: the kind's types and version, the subresource written ("" for the
// object itself), the fields that endpoint does not write (the status on the main resource,
// the spec on /status), and the time to record.
struct FieldManagerScope {
  const FieldType* type = nullptr;
  std::string api_version;
  std::string subresource;
  FieldSet reset;
  std::string now;
};

// Records an Update by `manager` turning `live` (null when creating) into `next`: sets or
// clears next's metadata.managedFields.
void track_update(const boost::json::object* live, boost::json::object& next,
                  const std::string& manager, const FieldManagerScope& scope);

// The object after applying `config` (an apply patch) to `live` (null when it does not exist
// yet), with its managedFields. Errors: 400 for a configuration of another version or kind,
// with managedFields, or with a list it cannot merge (duplicate or key-less items); 409 with
// one FieldManagerConflict cause per contested field unless `force`.
apimachinery::ApiResult<boost::json::object> apply_configuration(const boost::json::object* live,
                                                   const boost::json::object& config,
                                                   const std::string& manager, bool force,
                                                   const FieldManagerScope& scope);

// The fieldManager a write is recorded under when it names none: its User-Agent up to the first
// "/", without unprintable characters, at most 128 bytes.
std::string manager_from_user_agent(std::string_view user_agent);

// 422 for a fieldManager kube refuses (longer than 128 bytes, unprintable characters); `options`
// is the kind of the request's options ("PatchOptions", "CreateOptions", "UpdateOptions").
std::optional<apimachinery::ApiError> check_field_manager(const std::string& manager, bool apply,
                                            const std::string& options);

}  // namespace kwatch::schema
