// Fuzzes apply_strategic_merge_patch with the Pod schema (merge keys on containers, ports, env,
// volumes, ...). Input: original document, a NUL byte, patch document (each must be a body the
// server accepts, else the input is skipped). Properties: no crash or sanitizer report; failures
// are bad_request or invalid; a result the server would store serializes and parses back to
// itself.
#include "schema/strategic_merge_patch.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch;
  auto docs = fuzz::split_documents(fuzz::as_view(data, size));
  if (!docs) return 0;
  auto original = fuzz::parse_document(docs->first);
  auto patch = fuzz::parse_document(docs->second);
  if (!original || !patch) return 0;
  static const auto& schema = schema::builtin_patch_schema("", "Pod");
  auto result = schema::apply_strategic_merge_patch(*original, *patch, schema);
  if (!result) {
    const auto code = result.error().code;
    if (code != base::Errc::bad_request && code != base::Errc::invalid) {
      fuzz::fail("unexpected error code", result.error().message);
    }
    return 0;
  }
  fuzz::check_serializes(*result);
  return 0;
}
