// Kubernetes' semver library, version 1 (k8s.io/apiserver/pkg/cel/library semverlib.go):
// `semver(s)`, `semver(s, normalize)`, `isSemver` (both forms), and on kubernetes.Semver `major`,
// `minor`, `patch`, `compareTo`, `isGreaterThan`, `isLessThan`. Versions parse and compare as
// Semantic Versioning 2.0.0 says (and blang/semver words its errors); `normalize` first drops a
// leading `v`, leading zeros, and fills a missing minor or patch with 0.
#include <optional>
#include <string>
#include <vector>

#include "cel/libraries.hpp"

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;
using K = ValueKind;

struct Version {
  std::uint64_t major = 0, minor = 0, patch = 0;
  std::vector<std::string> pre;  // identifiers
};

bool only(std::string_view s, std::string_view allowed) {
  return !s.empty() && s.find_first_not_of(allowed) == std::string_view::npos;
}
constexpr std::string_view kDigits = "0123456789";
constexpr std::string_view kAlphanumeric =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-";

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::optional<std::uint64_t> number(std::string_view s, const char* what, std::string& error) {
  if (!only(s, kDigits)) {
    error = std::string("Invalid character(s) found in ") + what + " number " + quoted(s);
    return std::nullopt;
  }
  if (s.size() > 1 && s[0] == '0') {
    std::string w = what;
    w[0] = static_cast<char>(w[0] - 'a' + 'A');
    error = w + " number must not contain leading zeroes " + quoted(s);
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (char c : s) {
    if (v > (UINT64_MAX - 9) / 10) {
      error = std::string("Invalid character(s) found in ") + what + " number " + quoted(s);
      return std::nullopt;
    }
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::optional<Version> parse(std::string_view s, std::string& error) {
  if (s.empty()) {
    error = "Version string empty";
    return std::nullopt;
  }
  // major.minor.(patch-pre+build)
  const std::size_t a = s.find('.');
  const std::size_t b = a == std::string_view::npos ? a : s.find('.', a + 1);
  if (b == std::string_view::npos) {
    error = "No Major.Minor.Patch elements found";
    return std::nullopt;
  }
  Version v;
  auto major = number(s.substr(0, a), "major", error);
  if (!major) return std::nullopt;
  auto minor = number(s.substr(a + 1, b - a - 1), "minor", error);
  if (!minor) return std::nullopt;
  std::string_view rest = s.substr(b + 1);
  std::vector<std::string_view> build;
  if (auto plus = rest.find('+'); plus != std::string_view::npos) {
    build = split(rest.substr(plus + 1), '.');
    rest = rest.substr(0, plus);
  }
  std::vector<std::string_view> pre;
  if (auto dash = rest.find('-'); dash != std::string_view::npos) {
    pre = split(rest.substr(dash + 1), '.');
    rest = rest.substr(0, dash);
  }
  auto patch = number(rest, "patch", error);
  if (!patch) return std::nullopt;
  for (std::string_view p : pre) {
    if (p.empty()) {
      error = "Prerelease is empty";
      return std::nullopt;
    }
    if (only(p, kDigits)) {
      if (p.size() > 1 && p[0] == '0') {
        error = "Numeric PreRelease version must not contain leading zeroes " + quoted(p);
        return std::nullopt;
      }
    } else if (!only(p, kAlphanumeric)) {
      error = "Invalid character(s) found in prerelease " + quoted(p);
      return std::nullopt;
    }
    v.pre.emplace_back(p);
  }
  for (std::string_view p : build) {
    if (p.empty()) {
      error = "Build meta data is empty";
      return std::nullopt;
    }
    if (!only(p, kAlphanumeric)) {
      error = "Invalid character(s) found in build meta data " + quoted(p);
      return std::nullopt;
    }
  }
  v.major = *major;
  v.minor = *minor;
  v.patch = *patch;
  return v;
}

// The lenient reading: no leading `v`, no leading zeros, missing parts 0.
std::optional<Version> parse_normalized(std::string_view s, std::string& error) {
  if (!s.empty() && s[0] == 'v') s.remove_prefix(1);
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (int i = 0; i < 2; ++i) {
    const std::size_t at = s.find('.', start);
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(start, at - start));
    start = at + 1;
  }
  parts.emplace_back(s.substr(start));
  for (auto& p : parts) {
    if (p.size() > 1) {
      const std::size_t nz = p.find_first_not_of('0');
      p = nz == std::string::npos ? std::string() : p.substr(nz);
      if (p.empty() || kDigits.find(p[0]) == std::string_view::npos) p = "0" + p;
    }
  }
  if (parts.size() < 3) {
    if (parts.back().find_first_of("+-") != std::string::npos) {
      error = "short version cannot contain PreRelease/Build meta data";
      return std::nullopt;
    }
    while (parts.size() < 3) parts.emplace_back("0");
  }
  return parse(parts[0] + "." + parts[1] + "." + parts[2], error);
}

int compare(const Version& x, const Version& y) {
  const auto sign = [](auto a, auto b) { return a < b ? -1 : (a > b ? 1 : 0); };
  if (x.major != y.major) return sign(x.major, y.major);
  if (x.minor != y.minor) return sign(x.minor, y.minor);
  if (x.patch != y.patch) return sign(x.patch, y.patch);
  // A pre-release comes before its release.
  if (x.pre.empty() || y.pre.empty()) return x.pre.empty() == y.pre.empty() ? 0 : (x.pre.empty() ? 1 : -1);
  for (std::size_t i = 0; i < x.pre.size() && i < y.pre.size(); ++i) {
    const bool xn = only(x.pre[i], kDigits), yn = only(y.pre[i], kDigits);
    if (xn && yn) {
      if (x.pre[i].size() != y.pre[i].size()) return sign(x.pre[i].size(), y.pre[i].size());
      if (x.pre[i] != y.pre[i]) return sign(x.pre[i], y.pre[i]);
    } else if (xn != yn) {
      return xn ? -1 : 1;  // numeric identifiers come first
    } else if (x.pre[i] != y.pre[i]) {
      return sign(x.pre[i], y.pre[i]);
    }
  }
  return sign(x.pre.size(), y.pre.size());
}

class SemverValue final : public OpaqueValue {
 public:
  SemverValue(Version v, std::string text) : version(std::move(v)), text_(std::move(text)) {}
  std::string_view type_name() const override { return "kubernetes.Semver"; }
  bool equals(const OpaqueValue& o) const override {
    return compare(version, static_cast<const SemverValue&>(o).version) == 0;
  }
  std::string literal() const override { return "semver(\"" + text_ + "\")"; }
  Version version;

 private:
  std::string text_;
};

std::optional<Version> read(Args a, std::string& error) {
  const bool normalize = a.size() > 1 && a[1].as_bool();
  return normalize ? parse_normalized(a[0].as_text(), error) : parse(a[0].as_text(), error);
}

Value semver(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  auto v = read(a, error);
  if (!v) return Value::error(error);
  return Value::opaque(std::make_shared<const SemverValue>(*v, std::string(a[0].as_text())));
}

Value is_semver(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  return Value::boolean(read(a, error).has_value());
}

template <class F>
Value on_versions(Args a, std::string_view name, F f) {
  const auto* x = a[0].opaque_as<SemverValue>();
  const auto* y = a.size() > 1 ? a[1].opaque_as<SemverValue>() : nullptr;
  if (x == nullptr || (a.size() > 1 && y == nullptr)) return no_such_overload(name, a);
  return f(x->version, y != nullptr ? y->version : x->version);
}

Value major(Args a, EvalBudget&) {
  return on_versions(a, "major", [](const Version& v, const Version&) {
    return Value::int64(static_cast<std::int64_t>(v.major));
  });
}
Value minor(Args a, EvalBudget&) {
  return on_versions(a, "minor", [](const Version& v, const Version&) {
    return Value::int64(static_cast<std::int64_t>(v.minor));
  });
}
Value patch(Args a, EvalBudget&) {
  return on_versions(a, "patch", [](const Version& v, const Version&) {
    return Value::int64(static_cast<std::int64_t>(v.patch));
  });
}
Value compare_to(Args a, EvalBudget&) {
  return on_versions(a, "compareTo", [](const Version& x, const Version& y) {
    return Value::int64(compare(x, y));
  });
}
Value greater(Args a, EvalBudget&) {
  return on_versions(a, "isGreaterThan", [](const Version& x, const Version& y) {
    return Value::boolean(compare(x, y) > 0);
  });
}
Value less(Args a, EvalBudget&) {
  return on_versions(a, "isLessThan", [](const Version& x, const Version& y) {
    return Value::boolean(compare(x, y) < 0);
  });
}

}  // namespace

void add_semver_library(FunctionRegistry& r) {
  r.add("semver", "string_to_semver", false, "string -> kubernetes.Semver", semver);
  r.add("semver", "string_bool_to_semver", false, "string, bool -> kubernetes.Semver", semver);
  r.add("isSemver", "is_semver_string", false, "string -> bool", is_semver);
  r.add("isSemver", "is_semver_string_bool", false, "string, bool -> bool", is_semver);
  r.add("major", "semver_major", true, "kubernetes.Semver -> int", major);
  r.add("minor", "semver_minor", true, "kubernetes.Semver -> int", minor);
  r.add("patch", "semver_patch", true, "kubernetes.Semver -> int", patch);
  r.add("compareTo", "semver_compare_to", true, "kubernetes.Semver, kubernetes.Semver -> int",
        compare_to);
  r.add("isGreaterThan", "semver_is_greater_than", true,
        "kubernetes.Semver, kubernetes.Semver -> bool", greater);
  r.add("isLessThan", "semver_is_less_than", true, "kubernetes.Semver, kubernetes.Semver -> bool",
        less);
}

}  // namespace kwatch::cel
