// Fuzzes parse_json_body, the decoder of every JSON request body. Properties: no crash or
// sanitizer report; errors are bad_request; an accepted body obeys the stored-JSON rules
// (json_problem finds nothing: parser and checker agree), serializes and parses back to itself,
// and its serialization is accepted again as a body. duplicate_fields walks the same bytes
// without a crash, and finds nothing in the re-serialized body (its members are unique); given
// the parsed object it finds exactly what it finds from the bytes alone. Go's scanner
// (go_json_syntax_error, whose words a refused body carries) accepts every body kwatch accepts
// and every serialization it writes, and names an error for a body cut short.
#include "apimachinery/json_body.hpp"
#include "apimachinery/stored_json.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch;
  auto body = apimachinery::parse_json_body(fuzz::as_view(data, size));
  const auto duplicates = apimachinery::duplicate_fields(fuzz::as_view(data, size));
  if (!body) {
    if (body.error().code != base::Errc::bad_request) {
      fuzz::fail("unexpected error code", body.error().message);
    }
    return 0;
  }
  if (auto go = apimachinery::go_json_syntax_error(fuzz::as_view(data, size)); !go.empty()) {
    fuzz::fail("Go's scanner refuses an accepted body", go);
  }
  if (body->is_object() &&
      apimachinery::duplicate_fields(fuzz::as_view(data, size), body->get_object()) != duplicates) {
    fuzz::fail("duplicates found with the parsed object differ", fuzz::as_view(data, size));
  }
  if (auto problem = apimachinery::json_problem(*body)) {
    fuzz::fail("accepted body breaks a stored-JSON rule", problem->message());
  }
  fuzz::check_serializes(*body);
  const std::string text = boost::json::serialize(*body);
  if (auto go = apimachinery::go_json_syntax_error(text); !go.empty()) {
    fuzz::fail("Go's scanner refuses a serialization", go);
  }
  // A document cut before its end is never complete (a number may end anywhere: skip those).
  if (text.size() > 1 && (text.back() == '}' || text.back() == ']' || text.back() == '"') &&
      apimachinery::go_json_syntax_error(std::string_view(text).substr(0, text.size() - 1)) !=
          "unexpected end of JSON input") {
    fuzz::fail("Go's scanner misses a cut document", text.substr(0, 4096));
  }
  auto again = apimachinery::parse_json_body(text);
  if (!again) fuzz::fail("serialized body is refused", again.error().message);
  if (*again != *body) fuzz::fail("serialized body parses differently", text.substr(0, 4096));
  if (auto d = apimachinery::duplicate_fields(text); !d.empty()) {
    fuzz::fail("a serialized object has a duplicate member", d.front());
  }
  return 0;
}
