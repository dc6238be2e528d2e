// Fuzzes apply_json_patch. Input: original document, a NUL byte, patch document (each must be
// a body the server accepts, else the input is skipped). Properties: no crash or sanitizer
// report; failures are bad_request, invalid or too_large; a result breaks no stored-JSON rule,
// serializes and parses back to itself; json_equal is reflexive on the result.
#include "apimachinery/json_patch.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch;
  auto docs = fuzz::split_documents(fuzz::as_view(data, size));
  if (!docs) return 0;
  auto original = fuzz::parse_document(docs->first);
  auto patch = fuzz::parse_document(docs->second);
  if (!original || !patch) return 0;
  std::string detail;
  auto result = apimachinery::apply_json_patch(*original, *patch, &detail);
  if (!result) {
    const auto code = result.error().code;
    if (code != base::Errc::bad_request && code != base::Errc::invalid &&
        code != base::Errc::too_large) {
      fuzz::fail("unexpected error code", result.error().message);
    }
    return 0;
  }
  // Nesting past kMaxJsonDepth is a failure of the patch, so a result never breaks a rule.
  if (auto problem = apimachinery::json_problem(*result)) {
    fuzz::fail("patch result breaks a stored-JSON rule", problem->message());
  }
  fuzz::check_serializes(*result);
  if (!apimachinery::json_equal(*result, *result)) fuzz::fail("json_equal is not reflexive");
  return 0;
}
