#include "apimachinery/kube_version.hpp"

#include <charconv>
#include <cstdint>

namespace kwatch::apimachinery {

namespace {

struct KubeVersion {
  int stage = 0;  // 0 alpha, 1 beta, 2 GA
  std::int64_t major = 0, minor = 0;
};

// An ASCII decimal that fits Go's int (Atoi fails past it: the version is then not kube-like).
bool number(std::string_view text, std::int64_t& out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  const auto r = std::from_chars(text.data(), text.data() + text.size(), out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

// ^v(\d+)(?:(alpha|beta)(\d+))?$
bool parse(std::string_view v, KubeVersion& out) {
  if (v.size() < 2 || v[0] != 'v') return false;
  v.remove_prefix(1);
  std::size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  if (!number(v.substr(0, digits), out.major)) return false;
  const std::string_view rest = v.substr(digits);
  if (rest.empty()) {
    out.stage = 2;
    return true;
  }
  std::string_view minor;
  if (rest.starts_with("alpha")) {
    out.stage = 0;
    minor = rest.substr(5);
  } else if (rest.starts_with("beta")) {
    out.stage = 1;
    minor = rest.substr(4);
  } else {
    return false;
  }
  return number(minor, out.minor);
}

int sign(std::int64_t d) { return d > 0 ? 1 : d < 0 ? -1 : 0; }

}  // namespace

int compare_kube_aware_versions(std::string_view a, std::string_view b) {
  if (a == b) return 0;
  KubeVersion x, y;
  const bool kube_a = parse(a, x);
  const bool kube_b = parse(b, y);
  if (!kube_a && !kube_b) return b.compare(a) > 0 ? 1 : -1;  // the smaller text first
  if (!kube_a) return -1;
  if (!kube_b) return 1;
  if (x.stage != y.stage) return sign(x.stage - y.stage);
  if (x.major != y.major) return sign(x.major - y.major);
  return sign(x.minor - y.minor);
}

}  // namespace kwatch::apimachinery
