// Kubernetes' format library (k8s.io/apiserver/pkg/cel/library format.go): named string formats
// a rule can check a value against, with kube's own validation messages.
//
//   format.named('dns1123Label')              optional of the format, none for an unknown name
//   format.dns1123Label() ...                 each format by itself
//   <format>.validate(s)                      optional.none() when valid, else the messages
//
// Formats: dns1123Label, dns1123Subdomain, dns1035Label, qualifiedName, the three *Prefix forms
// (a trailing '-' allowed, as for generateName), labelValue, uri, uuid, byte, date, datetime.
#include <re2/re2.h>

#include <string>
#include <vector>

#include "apimachinery/validation.hpp"
#include "base/base64.hpp"
#include "cel/libraries.hpp"
#include "cel/time.hpp"

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;
using K = ValueKind;
using Check = std::vector<std::string> (*)(std::string_view);

// A generateName prefix may end in '-': it is checked as if the '-' were a letter.
std::string mask_trailing_dash(std::string_view s) {
  std::string out(s);
  if (out.size() > 1 && out.back() == '-') out.back() = 'a';
  return out;
}

std::vector<std::string> uri_errors(std::string_view s) {
  // Go's url.ParseRequestURI: an absolute URI (scheme ':' ...) or an absolute path.
  static const RE2 uri("^([a-zA-Z][a-zA-Z0-9+.-]*:[^\\s]*|/[^\\s]*)$");
  const bool scheme_only = !s.empty() && s.find(':') == s.size() - 1;
  if (s.empty() || scheme_only || !RE2::FullMatch(re2::StringPiece(s.data(), s.size()), uri)) {
    return {"parse \"" + std::string(s) + "\": invalid URI for request"};
  }
  return {};
}

std::vector<std::string> uuid_errors(std::string_view s) {
  static const RE2 uuid(
      "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$");
  if (!RE2::FullMatch(re2::StringPiece(s.data(), s.size()), uuid)) {
    return {"does not match the UUID format"};
  }
  return {};
}

std::vector<std::string> byte_errors(std::string_view s) {
  if (!base::base64_decode(s)) return {"invalid base64"};
  return {};
}

std::vector<std::string> date_errors(std::string_view s) {
  if (s.size() != 10 || !parse_timestamp(std::string(s) + "T00:00:00Z")) return {"invalid date"};
  return {};
}

std::vector<std::string> datetime_errors(std::string_view s) {
  if (!parse_timestamp(s)) return {"invalid datetime"};
  return {};
}

struct NamedFormat {
  const char* name;
  Check check;
  bool prefix;
};

const NamedFormat kFormats[] = {
    {"dns1123Label", apimachinery::dns1123_label_errors, false},
    {"dns1123Subdomain", apimachinery::dns1123_subdomain_errors, false},
    {"dns1035Label", apimachinery::dns1035_label_errors, false},
    {"qualifiedName", apimachinery::qualified_name_errors, false},
    {"dns1123LabelPrefix", apimachinery::dns1123_label_errors, true},
    {"dns1123SubdomainPrefix", apimachinery::dns1123_subdomain_errors, true},
    {"dns1035LabelPrefix", apimachinery::dns1035_label_errors, true},
    {"labelValue", apimachinery::label_value_errors, false},
    {"uri", uri_errors, false},
    {"uuid", uuid_errors, false},
    {"byte", byte_errors, false},
    {"date", date_errors, false},
    {"datetime", datetime_errors, false},
};

class FormatValue final : public OpaqueValue {
 public:
  explicit FormatValue(const NamedFormat& f) : format(f) {}
  std::string_view type_name() const override { return "kubernetes.NamedFormat"; }
  bool equals(const OpaqueValue& o) const override {
    return &format == &static_cast<const FormatValue&>(o).format;
  }
  std::string literal() const override { return std::string("format.") + format.name + "()"; }
  const NamedFormat& format;
};

Value format_value(const NamedFormat& f) {
  // One value per format, shared: formats are constants.
  return Value::opaque(std::make_shared<const FormatValue>(f));
}

Value named(Args a, EvalBudget&) {
  for (const auto& f : kFormats) {
    if (a[0].as_text() == f.name) return Value::optional_of(format_value(f));
  }
  return Value::optional_none();
}

template <std::size_t I>
Value constant(Args, EvalBudget&) {
  return format_value(kFormats[I]);
}

Value validate(Args a, EvalBudget& budget) {
  const auto* f = a[0].opaque_as<FormatValue>();
  if (f == nullptr) return no_such_overload("validate", a);
  const std::string_view s = a[1].as_text();
  // kube's cost: the string's traversal times a long pattern's.
  budget.call_cost(tenths(code_point_count(s), 1) * 32);
  const std::vector<std::string> errors =
      f->format.prefix ? f->format.check(mask_trailing_dash(s)) : f->format.check(s);
  if (errors.empty()) return Value::optional_none();
  std::vector<Value> items;
  for (const auto& e : errors) items.push_back(Value::string(e));
  return Value::optional_of(Value::list(std::move(items)));
}

template <std::size_t... I>
void add_constants(FunctionRegistry& r, std::index_sequence<I...>) {
  (r.add(std::string("format.") + kFormats[I].name, std::string("format.") + kFormats[I].name,
         false, " -> kubernetes.NamedFormat", constant<I>),
   ...);
}

}  // namespace

void add_format_library(FunctionRegistry& r) {
  r.add("format.named", "format-named", false, "string -> optional(kubernetes.NamedFormat)",
        named);
  r.add("validate", "format-validate", true,
        "kubernetes.NamedFormat, string -> optional(list(string))", validate);
  add_constants(r, std::make_index_sequence<std::size(kFormats)>{});
}

}  // namespace kwatch::cel
