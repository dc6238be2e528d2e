// Versions kwatch reports: its own, and the Kubernetes API level it speaks (kubectl warns when
// its minor version is more than one away).
#pragma once

namespace kwatch::server {

inline constexpr const char* kKwatchVersion = "0.1.0";
inline constexpr const char* kKubernetesMinor = "32";

}  // namespace kwatch::server
