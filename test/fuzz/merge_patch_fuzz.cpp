// Fuzzes apply_merge_patch. Input: original document, a NUL byte, patch document (each must be
// a body the server accepts, else the input is skipped). Properties: no crash or sanitizer
// report; a result the server would store serializes and parses back to itself; applying the
// same patch again changes nothing (RFC 7386 merge patches are idempotent).
#include "apimachinery/merge_patch.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch;
  auto docs = fuzz::split_documents(fuzz::as_view(data, size));
  if (!docs) return 0;
  auto original = fuzz::parse_document(docs->first);
  auto patch = fuzz::parse_document(docs->second);
  if (!original || !patch) return 0;
  auto result = apimachinery::apply_merge_patch(*original, *patch);
  fuzz::check_serializes(result);
  auto twice = apimachinery::apply_merge_patch(result, *patch);
  if (twice != result) fuzz::fail("merge patch is not idempotent", boost::json::serialize(result));
  return 0;
}
