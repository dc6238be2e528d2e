// The health endpoints as kube-apiserver answers them: /livez, /readyz and /healthz run named
// checks and answer 200 "ok", or 500 with one line per check ("[+]etcd ok", "[-]shutdown failed:
// reason withheld") and "<endpoint> check failed". `?verbose` lists the checks on success too,
// `?exclude=<name>` (repeatable) skips a check ("[+]etcd excluded: ok", a warning line for a
// name no check has), and /<endpoint>/<check> runs one check and tells its reason
// ("internal server error: ..."). Machines read only the status code; the text is for people.
//
// Pure: the handler runs the checks and passes their outcomes here.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::server {

struct HealthCheckOutcome {
  std::string name;
  bool excluded = false;               // skipped by ?exclude: not run
  std::optional<std::string> failure;  // why it failed (never shown by the endpoint itself)
};

struct HealthAnswer {
  unsigned status = 200;
  std::string body;
};

// The endpoint's answer. `unmatched_excludes`: ?exclude names no check has.
HealthAnswer render_health(std::string_view endpoint, const std::vector<HealthCheckOutcome>& checks,
                           const std::set<std::string>& unmatched_excludes, bool verbose);

// /<endpoint>/<check>: "ok", or 500 with the reason.
HealthAnswer render_single_check(const std::optional<std::string>& failure);

// Liveness and readiness probes (/healthz, /livez, /readyz): anonymous even with
// --anonymous-auth=false, and never refused by the in-flight limits.
bool is_health_probe(std::string_view target);

}  // namespace kwatch::server
