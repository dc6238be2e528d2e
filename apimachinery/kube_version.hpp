// The order kube gives API versions: "kube-like" versions (v1, v2beta1, v1alpha3) before any
// other, GA before beta before alpha, then the higher major, then the higher minor; other
// versions by their text. Discovery lists a group's versions in this order (after
// versionPriority) and prefers the first.
#pragma once

#include <string_view>

namespace kwatch::apimachinery {

// > 0 when `a` comes before `b` (kube's CompareKubeAwareVersionStrings), < 0 after, 0 when equal.
int compare_kube_aware_versions(std::string_view a, std::string_view b);

}  // namespace kwatch::apimachinery
