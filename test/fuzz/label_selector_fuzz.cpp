// Fuzzes parse_label_selector. Properties: no crash or sanitizer report; a parsed selector's
// canonical form parses back to the same requirements; matching against fixed label sets works
// for every parsed selector and gives the same answers for the re-parsed one.
#include <array>
#include <boost/json/object.hpp>

#include "apimachinery/label_selector.hpp"
#include "test/fuzz/fuzz_support.hpp"

namespace {

using namespace kwatch::apimachinery;

const std::array<boost::json::object, 4>& label_sets() {
  static const std::array<boost::json::object, 4> sets = {
      boost::json::object{},
      boost::json::object{{"app", "web"}, {"tier", "frontend"}, {"version", "3"}},
      boost::json::object{{"app", ""},
                          {"env", "prod"},
                          {"example.com/owner", "team-a"},
                          {"count", "-42"},
                          {"in", "notin"}},
      boost::json::object{{"app", 1}, {"env", nullptr}, {"x", "9223372036854775807"}},
  };
  return sets;
}

bool same(const LabelRequirement& a, const LabelRequirement& b) {
  return a.key == b.key && a.op == b.op && a.values == b.values;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = kwatch::fuzz::as_view(data, size);
  auto sel = parse_label_selector(text);
  if (!sel) {
    if (sel.error().message.empty()) kwatch::fuzz::fail("error without a message");
    return 0;
  }
  const std::string canonical = sel->to_string();
  auto again = parse_label_selector(canonical);
  if (!again) kwatch::fuzz::fail("canonical form does not parse", canonical);
  const auto& a = sel->requirements();
  const auto& b = again->requirements();
  if (a.size() != b.size())
    kwatch::fuzz::fail("canonical form changes the requirements", canonical);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i])) kwatch::fuzz::fail("canonical form changes a requirement", canonical);
  }
  if (again->to_string() != canonical)
    kwatch::fuzz::fail("canonical form is not stable", canonical);
  for (const auto& labels : label_sets()) {
    if (sel->matches(&labels) != again->matches(&labels)) {
      kwatch::fuzz::fail("re-parsed selector matches differently", canonical);
    }
  }
  (void)sel->matches(nullptr);
  for (const auto& r : a) (void)sel->exact_value(r.key);
  return 0;
}
