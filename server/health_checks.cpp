#include "server/health_checks.hpp"

namespace kwatch::server {

HealthAnswer render_health(std::string_view endpoint, const std::vector<HealthCheckOutcome>& checks,
                           const std::set<std::string>& unmatched_excludes, bool verbose) {
  std::string lines;
  bool failed = false;
  for (const auto& c : checks) {
    if (c.excluded) {
      lines += "[+]" + c.name + " excluded: ok\n";
    } else if (c.failure) {
      // The endpoints answer anyone (load balancers probe without credentials): reasons go to
      // the check's own path, which is authorized like any other.
      lines += "[-]" + c.name + " failed: reason withheld\n";
      failed = true;
    } else {
      lines += "[+]" + c.name + " ok\n";
    }
  }
  if (!unmatched_excludes.empty()) {
    lines += "warn: some health checks cannot be excluded: no matches for ";
    bool first = true;
    for (const auto& name : unmatched_excludes) {
      lines += (first ? "\"" : ",\"") + name + "\"";
      first = false;
    }
    lines += "\n";
  }
  if (failed) return {500, lines + std::string(endpoint) + " check failed\n"};
  if (!verbose) return {200, "ok"};
  return {200, lines + std::string(endpoint) + " check passed\n"};
}

HealthAnswer render_single_check(const std::optional<std::string>& failure) {
  if (failure) return {500, "internal server error: " + *failure + "\n"};
  return {200, "ok"};
}

// Liveness and readiness probes (load balancers, kubelets, container runtimes) carry no
// credentials: they stay anonymous with --anonymous-auth=false, as kube's structured
// authentication configuration is advised to allow (anonymous.conditions /healthz, /livez,
// /readyz). They answer "ok" or which checks fail, never why.
bool is_health_probe(std::string_view target) {
  target = target.substr(0, target.find('?'));
  // Only the endpoints themselves, as kube's --authorization-always-allow-paths: a single check
  // (/readyz/etcd) tells why it fails and is authorized like any other path.
  return target == "/healthz" || target == "/livez" || target == "/readyz";
}

}  // namespace kwatch::server
