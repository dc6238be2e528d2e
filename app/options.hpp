// Command-line flags of kwatch-apiserver, in kube-apiserver's style (`--flag=value` or
// `--flag value`). Pure parsing, no side effects.
#pragma once

#include "auth/credentials.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <string>
#include <variant>
#include <vector>

namespace kwatch::app {

struct Options {
  std::string bind_address = "127.0.0.1";
  // Plain HTTP, opt-in for local development (unset: off; 0: a free port).
  std::optional<unsigned short> port;
  // HTTPS (0: off). Certificate and key from --tls-cert-file/--tls-private-key-file, or else
  // generated into --cert-dir on first start (see server/tls_certificates.hpp).
  unsigned short secure_port = 6443;
  std::string tls_cert_file;
  std::string tls_private_key_file;
  std::string cert_dir = "/var/run/kubernetes";
  // Authentication and authorization.
  std::string client_ca_file;                     // CAs that sign client certificates
  std::string token_auth_file;                    // static bearer tokens (CSV)
  // ServiceAccount tokens: issuer, the key that signs them and the keys that verify them
  // (neither: a key generated into cert_dir), the audiences the API accepts (empty: issuer).
  std::string service_account_issuer = "https://kubernetes.default.svc.cluster.local";
  std::string service_account_signing_key_file;
  std::vector<std::string> service_account_key_files;
  std::vector<std::string> api_audiences;
  std::chrono::milliseconds service_account_max_token_expiration{0};  // 0: no maximum
  bool anonymous_auth = false;                    // requests without credentials are anonymous
  std::string authorization_mode = "RBAC";        // or "AlwaysAllow"
  // --disable-admission-plugins: admission plugins turned off (of those kwatch can turn off:
  // MutatingAdmissionPolicy, ValidatingAdmissionPolicy). --enable-admission-plugins names
  // plugins that are on anyway.
  std::vector<std::string> disabled_admission_plugins;
  // --requestheader-*: the front proxies (aggregators) trusted to name a request's user.
  std::string requestheader_client_ca_file;
  auth::RequestHeaderOptions request_header;
  // Delegated to another API server, as kube's extension servers delegate (delegation/):
  // TokenReviews for tokens this server does not know (--authentication-kubeconfig) and
  // SubjectAccessReviews for what RBAC does not allow (--authorization-kubeconfig), each answer
  // remembered for its TTL; at start-up the trust the other server publishes is read unless
  // --authentication-skip-lookup (a failure to read it is fatal unless tolerated).
  std::string authentication_kubeconfig;
  std::string authorization_kubeconfig;
  std::chrono::milliseconds authentication_token_webhook_cache_ttl{10'000};
  std::chrono::milliseconds authorization_webhook_cache_authorized_ttl{10'000};
  std::chrono::milliseconds authorization_webhook_cache_unauthorized_ttl{10'000};
  bool authentication_skip_lookup = false;
  bool authentication_tolerate_lookup_failure = false;
  // --proxy-client-cert-file, --proxy-client-key-file: what extension API servers are shown.
  // --cluster-signing-cert-file, --cluster-signing-key-file, --cluster-signing-duration:
  // kube-controller-manager's, for the in-process CertificateSigningRequest signer.
  // kube-controller-manager's --root-ca-file: the bundle published as kube-root-ca.crt.
  std::string root_ca_file;
  std::string cluster_signing_cert_file;
  std::string cluster_signing_key_file;
  std::chrono::milliseconds cluster_signing_duration = std::chrono::hours(8760);
  std::string proxy_client_cert_file;
  std::string proxy_client_key_file;
  // --unsafe-webhook-loopback-endpoints: development only (see options.cpp).
  bool unsafe_webhook_loopback_endpoints = false;
  // The built-in garbage collector (controllers/garbage_collector.hpp) and the orphan/foreground
  // finalizers deletes add for it.
  bool enable_garbage_collector = true;
  // Where Services' cluster IPs and node ports come from (registry/service_allocator.hpp).
  std::string service_cluster_ip_range = "10.0.0.0/24";
  std::string service_node_port_range = "30000-32767";
  // Overload protection (0: no limit): see server/request_limits.hpp.
  unsigned max_requests_inflight = 400;
  unsigned max_mutating_requests_inflight = 200;
  unsigned max_watches_per_user = 10000;
  // API Priority and Fairness (flowcontrol/): the two in-flight limits become its server
  // concurrency limit, shared among the priority levels, instead of being applied as they are.
  bool enable_priority_and_fairness = true;
  // Open connections in all and from one client address (server/http_server.hpp); 0: no cap.
  unsigned max_connections = 0;
  unsigned max_connections_per_ip = 0;
  unsigned http2_max_streams_per_connection = 0;  // 0: 100
  bool disable_http2_serving = false;
  // Write admission (server/request_limits.hpp): the queue behind the mutating seats, and the
  // seats a write keeps for its fan-out.
  unsigned mutating_queue_length = 200;
  std::chrono::milliseconds mutating_queue_wait{10'000};
  unsigned watches_per_seat = 10;
  unsigned max_fanout_seats = 10;
  std::string storage_backend = "memory";
  std::string data_dir;  // empty: in memory only
  unsigned io_threads = 0;  // 0: one per core
  // Threads that write watch events (their own io_context); nullopt: one per core, 0: none
  // (watches stream from the I/O threads).
  std::optional<unsigned> delivery_threads;
  // Their nice value (above 0: the scheduler prefers requests to delivery when both are ready).
  int delivery_nice = 0;
  // Threads at nice 19 for the priority levels annotated flowcontrol.kwatch.io/cpu-priority=low
  // (default: half the I/O threads, at least one; 0: none, such levels run on the I/O threads).
  std::optional<unsigned> low_priority_threads;
  std::string log_level = "info";
  bool fsync = true;  // --data-dir-fsync: fdatasync each write before acknowledging it
  // --data-dir-snapshot-bytes: snapshot once the log since the last one exceeds this (0: never)
  std::uint64_t snapshot_bytes = 64u << 20;
  // Watch cache: every resource's event window starts at (and never shrinks below)
  // default_watch_cache_size and grows up to 102400; watch_cache_sizes fixes a resource's size.
  std::size_t default_watch_cache_size = 100;
  std::map<std::string, std::size_t> watch_cache_sizes;
  std::chrono::milliseconds watch_bookmark_interval{60'000};
  std::chrono::seconds min_request_timeout{1800};
  // etcd3 backend
  std::vector<std::string> etcd_servers{"http://127.0.0.1:2379"};
  std::string etcd_prefix = "/registry";
  std::string etcd_cafile;
  std::string etcd_certfile;
  std::string etcd_keyfile;
  // kwatch compacts storage like kube-apiserver: every interval, to the revision seen one
  // interval before (0 disables).
  std::chrono::milliseconds compaction_interval{5 * 60 * 1000};
  // How long the health endpoints' storage check waits (kube's flags, 2 s each): /livez and
  // /healthz, and /readyz.
  std::chrono::milliseconds etcd_healthcheck_timeout{2'000};
  std::chrono::milliseconds etcd_readycheck_timeout{2'000};
  // Audit log (server/audit_log.hpp): off without a path; "-" is standard output.
  std::string audit_log_path;
  unsigned audit_log_maxsize_mb = 0;  // rotate past this many megabytes (0: never)
  unsigned audit_log_maxbackup = 0;   // rotated files kept (0: all)
  unsigned audit_log_maxage_days = 0;  // rotated files removed after this many days (0: never)
  // Encryption at rest: an EncryptionConfiguration file (storage/encryption_config.hpp).
  std::string encryption_provider_config;
  // Graceful shutdown (app/application.hpp): after SIGTERM/SIGINT /readyz fails at once and
  // requests are still served for shutdown_delay (so that a load balancer stops sending new
  // ones); then the listeners close, in-flight requests finish and watch streams end cleanly.
  // Whatever is left when shutdown_grace_period (counted from the signal) runs out is cut off.
  std::chrono::milliseconds shutdown_delay{3'000};
  std::chrono::milliseconds shutdown_grace_period{25'000};
};

// Go-style durations as Kubernetes flags take them: "300ms", "1.5s", "5m", "1h2m3s", "0".
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// What the command line asks for: run with options, print help/version, or an error message.
struct ParseHelp {};
struct ParseVersion {};
struct ParseError {
  std::string message;
};
using ParseOutcome = std::variant<Options, ParseHelp, ParseVersion, ParseError>;

ParseOutcome parse_options(const std::vector<std::string>& args);
// --help: one row per flag of the table parse_options reads, so the two cannot disagree.
std::string usage();
// The names of every flag parse_options takes (without --), in --help's order.
std::vector<std::string> flag_names();

}  // namespace kwatch::app
