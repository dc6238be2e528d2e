// Fuzzes server-side apply and field tracking with the Deployment's field types (keyed lists of
// containers and ports, sets, atomic lists, maps). Input: the live object, a NUL byte, the
// applied configuration; the configuration is read as the server reads an apply-patch+yaml body
// (YAML or JSON), the live object as a JSON body, managedFields and all. Properties: no crash
// or sanitizer report; apply fails only with bad_request (a configuration it cannot merge) or
// conflict; a successful apply serializes and parses back to itself, and applying the same
// configuration to its result (forced) changes nothing; an Update's result does the same.
#include "schema/builtin_schemas.hpp"
#include "schema/field_type.hpp"
#include "schema/managed_fields.hpp"
#include "apimachinery/yaml_body.hpp"
#include "test/fuzz/fuzz_support.hpp"

#include <boost/json/serialize.hpp>

namespace {

const kwatch::schema::FieldType& deployment() {
  static const auto types = kwatch::schema::FieldTypes::of_resource(
      *kwatch::schema::KindSchemas::builtin().structural_schema("apps", "v1", "Deployment"));
  return types->root();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch;
  namespace json = boost::json;
  auto docs = fuzz::split_documents(fuzz::as_view(data, size));
  if (!docs) return 0;
  auto live = fuzz::parse_document(docs->first);
  auto config = apimachinery::parse_yaml_body(docs->second);
  if (!live || !live->is_object() || !config || !config->is_object()) return 0;

  schema::FieldManagerScope scope;
  scope.type = &deployment();
  scope.api_version = "apps/v1";
  scope.reset.insert({schema::field_step("status")});
  scope.now = "2026-01-01T00:00:00Z";

  // An Update from the live object to the configuration (as a PUT of it would record).
  json::object next = config->get_object();
  schema::track_update(&live->get_object(), next, "updater", scope);
  fuzz::check_serializes(json::value(next));

  for (bool force : {false, true}) {
    auto applied = schema::apply_configuration(&live->get_object(), config->get_object(),
                                                 "applier", force, scope);
    if (!applied) {
      const auto code = applied.error().code;
      if (code != base::Errc::bad_request && code != base::Errc::conflict) {
        fuzz::fail("unexpected error code", applied.error().message);
      }
      if (force && code == base::Errc::conflict) fuzz::fail("conflict despite force");
      continue;
    }
    fuzz::check_serializes(json::value(*applied));
    auto again = schema::apply_configuration(&*applied, config->get_object(), "applier", true,
                                               scope);
    if (!again) fuzz::fail("a configuration that applied once failed again", again.error().message);
    if (*again != *applied) {
      fuzz::fail("applying the same configuration twice changed the object",
                 json::serialize(*applied) + "\n" + json::serialize(*again));
    }
  }
  return 0;
}
