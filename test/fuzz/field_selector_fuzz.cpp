// Fuzzes parse_field_selector. Properties: no crash or sanitizer report; the canonical form
// (escaped values) parses back to the same requirements (as a multiset: parsing sorts the raw
// terms, and `==` prints as `=`, so the order may differ); matching is consistent.
#include <algorithm>
#include <tuple>

#include "apimachinery/field_selector.hpp"
#include "test/fuzz/fuzz_support.hpp"

namespace {

using namespace kwatch::apimachinery;

std::vector<std::tuple<std::string, bool, std::string>> sorted(const FieldSelector& s) {
  std::vector<std::tuple<std::string, bool, std::string>> out;
  for (const auto& r : s.requirements()) out.emplace_back(r.field, r.equals, r.value);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = kwatch::fuzz::as_view(data, size);
  auto sel = parse_field_selector(text);
  if (!sel) {
    if (sel.error().message.empty()) kwatch::fuzz::fail("error without a message");
    return 0;
  }
  const std::string canonical = sel->to_string();
  auto again = parse_field_selector(canonical);
  if (!again) kwatch::fuzz::fail("canonical form does not parse", canonical);
  if (sorted(*sel) != sorted(*again)) {
    kwatch::fuzz::fail("canonical form changes the requirements", canonical);
  }
  // A lookup that knows a few fields; the re-parsed selector must agree with the original.
  FieldLookup lookup = [](std::string_view f) -> std::optional<std::string> {
    if (f == "metadata.name") return "pod-a";
    if (f == "metadata.namespace") return "default";
    if (f == "spec.nodeName") return "";
    return std::nullopt;
  };
  if (sel->matches(lookup) != again->matches(lookup)) {
    kwatch::fuzz::fail("re-parsed selector matches differently", canonical);
  }
  for (const auto& f : sel->fields()) (void)sel->exact_value(f);
  for (const auto& r : sel->requirements()) {
    auto escaped = escape_field_value(r.value);
    if (escaped.size() < r.value.size()) kwatch::fuzz::fail("escaping lost bytes", r.value);
  }
  return 0;
}
