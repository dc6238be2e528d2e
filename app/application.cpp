#include "app/application.hpp"

#include "admission/mutating_policy.hpp"
#include "admission/policy_param_guard.hpp"
#include "admission/validating_policy.hpp"
#include "admission/conversion_webhook.hpp"
#include "aggregator/api_service_proxy.hpp"
#include "aggregator/availability_controller.hpp"
#include "admission/webhook_plugin.hpp"
#include "auth/certificate_guard.hpp"
#include "auth/escalation_guard.hpp"
#include "auth/rbac_authorizer.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "auth/access.hpp"
#include "auth/rbac_policy_source.hpp"
#include "server/api_handler.hpp"
#include "server/audit_log.hpp"
#include "registry/cacher_registry.hpp"
#include "controllers/admission_policy_status.hpp"
#include "controllers/certificate_signer.hpp"
#include "controllers/root_ca_publisher.hpp"
#include "base/openssl_files.hpp"
#include "controllers/api_service_registration.hpp"
#include "controllers/extension_authentication.hpp"
#include "delegation/access_review_authorizer.hpp"
#include "delegation/authentication_lookup.hpp"
#include "delegation/token_review_authenticator.hpp"
#include "server/discovery.hpp"
#include "controllers/cluster_role_aggregator.hpp"
#include "controllers/service_cidr_controller.hpp"
#include "registry/service_allocator.hpp"
#include "apimachinery/ip_address.hpp"
#include "controllers/crd_controller.hpp"
#include "controllers/garbage_collector.hpp"
#include "controllers/namespace_controller.hpp"
#include "server/encryption_at_rest.hpp"
#include "server/http_server.hpp"
#include "base/task_failure.hpp"
#include "auth/service_account_tokens.hpp"
#include "server/tls_certificates.hpp"
#include "auth/token_file.hpp"
#include "flowcontrol/config_keeper.hpp"
#include "registry/selector_predicate.hpp"
#include "server/version.hpp"
#include "registry/watch_cache_state.hpp"
#include "storage/encrypting_storage.hpp"
#include "storage/etcd_storage.hpp"
#include "storage/memory_storage.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <variant>

#include "storage/grpc_bridge.hpp"

#include <csignal>

namespace kwatch::app {

namespace asio = boost::asio;
namespace json = boost::json;
using auth::AccessOptions;
using server::ApiHandler;
using server::AuditLog;
using server::AuditLogOptions;
using registry::CacherDefaults;
using registry::CacherRegistry;
using controllers::ClusterRoleAggregator;
using server::ComputeOptions;
using controllers::CrdController;
using server::encryption_scopes;
using server::ensure_self_signed_certificate;
using controllers::GarbageCollector;
using server::HttpLimits;
using server::HttpServer;
using server::kKwatchVersion;
using base::log_task_failure;
using server::Metrics;
using controllers::NamespaceController;
using auth::RbacPolicySource;
using server::RequestLimitOptions;
using server::RequestLimits;
using auth::ServiceAccountKeyOptions;
using auth::ServiceAccountTokens;
using auth::TokenFile;
using registry::WatchCacheState;
using server::WatchOptions;

namespace {

// The bytes of the file at `path` into `out`; false when it cannot be opened.
bool read_whole_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// Like kube-apiserver's compactor: every interval, compact to the revision seen one interval
// ago, so that history stays bounded but a watcher always has at least one interval to catch up.
asio::awaitable<void> compact_periodically(std::shared_ptr<storage::Storage> storage,
                                           std::chrono::milliseconds interval) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::int64_t previous = 0;
  for (;;) {
    timer.expires_after(interval);
    co_await timer.async_wait(asio::use_awaitable);
    if (previous > 0) {
      if (auto r = co_await storage->compact(previous); !r) {
        spdlog::warn("compaction at {} failed: {}", previous, r.error().message());
      }
    }
    auto current = co_await storage->current_revision();
    if (current) previous = *current;
  }
}

// The process's memory, as Prometheus' process collector names it, and the C heap's own view:
// bytes handed out by malloc and free bytes it keeps (fragmentation the RSS includes).
// kube's webhook admission metrics, from the webhook plugins' calls.
admission::WebhookCallObserver webhook_metrics(std::shared_ptr<Metrics> metrics) {
  metrics->help("apiserver_admission_webhook_admission_duration_seconds", "histogram",
                "Admission webhook latency in seconds, identified by name and broken out for "
                "each operation and API resource and type (validate or admit).");
  metrics->help("apiserver_admission_webhook_request_total", "counter",
                "Admission webhook request total, identified by name and broken out for each "
                "admission type (validating or mutating) and operation.");
  metrics->help("apiserver_admission_webhook_rejection_count", "counter",
                "Admission webhook rejection count, identified by name and broken out for each "
                "admission type (validating or admit) and operation.");
  metrics->help("apiserver_admission_webhook_fail_open_count", "counter",
                "Admission webhook fail open count, identified by name and broken out for each "
                "admission type (validating or mutating).");
  return [metrics](const admission::WebhookCallRecord& r) {
    const std::string name(r.name), type(r.type), operation(r.operation);
    const std::string rejected = r.rejected ? "true" : "false";
    metrics->observe("apiserver_admission_webhook_admission_duration_seconds",
                     {{"name", name}, {"type", type}, {"operation", operation},
                      {"rejected", rejected}},
                     r.seconds);
    metrics->inc("apiserver_admission_webhook_request_total",
                 {{"name", name}, {"type", type}, {"operation", operation},
                  {"code", std::to_string(r.code)}, {"rejected", rejected}});
    if (r.rejected) {
      metrics->inc("apiserver_admission_webhook_rejection_count",
                   {{"name", name}, {"type", type}, {"operation", operation},
                    {"error_type", std::string(r.error_type)},
                    {"rejection_code", std::to_string(r.code)}});
    }
    if (r.failed_open) {
      metrics->inc("apiserver_admission_webhook_fail_open_count", {{"name", name}, {"type", type}});
    }
  };
}

// kube's conversion webhook metrics, from the converters' calls.
admission::ConversionObserver conversion_metrics(std::shared_ptr<Metrics> metrics) {
  metrics->help("apiserver_crd_conversion_webhook_duration_seconds", "histogram",
                "CRD webhook conversion duration in seconds");
  metrics->help("apiserver_conversion_webhook_request_total", "counter",
                "Counter for conversion webhook requests with success/failure and failure error "
                "type");
  metrics->help("apiserver_conversion_webhook_duration_seconds", "histogram",
                "Conversion webhook request latency");
  return [metrics](const admission::ConversionCallRecord& r) {
    metrics->observe("apiserver_crd_conversion_webhook_duration_seconds",
                     {{"crd_name", std::string(r.definition)},
                      {"from_version", std::string(r.from_version)},
                      {"to_version", std::string(r.to_version)},
                      {"succeeded", r.succeeded ? "true" : "false"}},
                     r.seconds);
    const Metrics::Labels result{{"result", r.succeeded ? "success" : "failure"},
                                 {"failure_type", std::string(r.failure_type)}};
    metrics->inc("apiserver_conversion_webhook_request_total", result);
    metrics->observe("apiserver_conversion_webhook_duration_seconds", result, r.seconds);
  };
}

void register_process_metrics(Metrics& metrics) {
  metrics.help("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  metrics.gauge_fn("process_resident_memory_bytes", {}, [] {
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      long size = 0;
      if (std::fscanf(f, "%ld %ld", &size, &pages) != 2) pages = 0;
      std::fclose(f);
    }
    return static_cast<double>(pages) * static_cast<double>(sysconf(_SC_PAGESIZE));
  });
  metrics.help("kwatch_heap_allocated_bytes", "gauge", "Bytes allocated from the C heap and in use.");
  metrics.gauge_fn("kwatch_heap_allocated_bytes", {}, [] {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<double>(mi.uordblks + mi.hblkhd);
  });
  metrics.help("kwatch_heap_free_bytes", "gauge",
               "Free bytes the C heap keeps (counted in resident memory where touched).");
  metrics.gauge_fn("kwatch_heap_free_bytes", {}, [] {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<double>(mi.fordblks);
  });
}

}  // namespace

struct Application::Parts {
  Options options;
  unsigned threads = 1;
  unsigned delivery_threads = 0;
  // Declared first, destroyed last: what is still queued on them holds the parts below.
  std::optional<asio::io_context> ioc;
  std::optional<asio::io_context> delivery;
  unsigned low_priority_threads = 0;
  std::optional<asio::io_context> low_priority;
  std::shared_ptr<storage::Storage> storage;
  std::shared_ptr<kinds::Scheme> scheme;
  std::shared_ptr<Metrics> metrics;
  std::shared_ptr<CacherRegistry> cachers;
  std::shared_ptr<registry::ResourceStore> store;
  std::optional<asio::thread_pool> compute;
  std::shared_ptr<ApiHandler> handler;
  std::shared_ptr<AuditLog> audit;
  std::shared_ptr<RbacPolicySource> rbac;
  std::shared_ptr<admission::ValidatingPolicyPlugin> policies;
  std::shared_ptr<admission::MutatingPolicyPlugin> mutating_policies;
  std::shared_ptr<admission::ValidatingWebhookPlugin> validating_webhooks;
  std::shared_ptr<admission::MutatingWebhookPlugin> mutating_webhooks;
  std::shared_ptr<CrdController> crd_controller;
  std::shared_ptr<NamespaceController> namespace_controller;
  std::shared_ptr<ClusterRoleAggregator> cluster_role_aggregator;
  std::shared_ptr<controllers::ApiServiceRegistration> api_service_registration;
  std::shared_ptr<aggregator::ApiServiceProxy> api_service_proxy;
  std::shared_ptr<aggregator::AvailabilityController> api_service_availability;
  std::shared_ptr<controllers::AdmissionPolicyStatus> admission_policy_status;
  std::shared_ptr<const controllers::CertificateSigner::Authority> signing_authority;
  std::shared_ptr<controllers::CertificateSigner> certificate_signer;  // with a signing CA
  std::string root_ca_pem;  // published as kube-root-ca.crt when known
  std::shared_ptr<controllers::RootCaPublisher> root_ca_publisher;
  std::shared_ptr<GarbageCollector> garbage_collector;
  std::shared_ptr<registry::ServiceAllocator> service_allocator;
  std::shared_ptr<controllers::ServiceCIDRController> service_cidr_controller;
  // API Priority and Fairness (--enable-priority-and-fairness), and what keeps its configuration.
  std::shared_ptr<flowcontrol::PriorityAndFairness> priority_and_fairness;
  std::shared_ptr<flowcontrol::ConfigKeeper> flow_control_keeper;
  // The controllers start once every built-in cache has listed and the bootstrap objects are
  // written; shutdown may come first.
  std::mutex controllers_mutex;
  bool controllers_stopped = false;  // under controllers_mutex
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<HttpServer> https;
  std::string tls_cert_file, tls_key_file;  // what https serves with
  // The parts of the trust the delegated server publishes that this server took (the flags
  // left them unset), and what they were when last read: followed while serving.
  bool published_client_ca = false, published_request_header = false;
  auth::ExtensionAuthentication published_trust;
  std::string refused_trust;  // the CA bundles last refused (not tried, nor logged, again)
  std::optional<asio::steady_timer> trust_timer;
  std::optional<asio::signal_set> signals;
  int exit_code = 0;

  // Start-up, in order (Application::start).
  void make_threads();
  bool open_storage();
  void make_caches_and_handler();
  bool open_audit_log();
  bool configure_access();
  bool delegate_access(AccessOptions& access);
  bool look_up_delegated_trust();
  asio::awaitable<void> follow_delegated_trust(std::shared_ptr<client::HttpClient> client);
  void apply_delegated_trust(const auth::ExtensionAuthentication& read);
  void make_controllers();
  bool listen();
  asio::awaitable<void> start_up(unsigned short api_port);
  asio::awaitable<void> wait_for_caches();
  asio::awaitable<void> write_bootstrap_policy();
  asio::awaitable<void> ensure_kubernetes_service(unsigned short api_port);
  asio::awaitable<void> wait_for_rbac();
  asio::awaitable<void> wait_for_policies();
  asio::awaitable<void> wait_for_api_services();
  void log_serving() const;

  asio::awaitable<void> shut_down(int signal);
  void start_controllers();
  void stop_controllers();
  std::size_t open_connections() const {
    return (http ? http->open_connections() : 0) + (https ? https->open_connections() : 0);
  }
};

Application::Application(Options options) : parts_(std::make_unique<Parts>()) {
  parts_->options = std::move(options);
}

Application::~Application() = default;

void Application::Parts::make_threads() {
  threads = options.io_threads > 0 ? options.io_threads
                                   : std::max(1u, std::thread::hardware_concurrency());
  ioc.emplace(static_cast<int>(threads));
  // Watch events are written from threads of their own, so a request never waits in the I/O
  // threads' queue behind the fan-out of an event to thousands of watchers. The admission of
  // writes by seats (request_limits.hpp) keeps writers from running ahead of delivery.
  delivery_threads =
      options.delivery_threads.value_or(std::max(1u, std::thread::hardware_concurrency()));
  if (delivery_threads > 0) delivery.emplace(static_cast<int>(delivery_threads));
  // The connections of priority levels marked low (flowcontrol/configuration.hpp): their CPU,
  // and their sockets' kernel work, yields to the I/O threads whenever those want to run.
  low_priority_threads = options.low_priority_threads.value_or(std::max(1u, threads / 2));
  if (low_priority_threads > 0) low_priority.emplace(static_cast<int>(low_priority_threads));
}

// Storage: etcd (waited for a while at start-up, as kube-apiserver does) or the embedded store;
// then encryption at rest at its boundary, so everything above reads and writes plaintext.
bool Application::Parts::open_storage() {
  if (options.storage_backend == "etcd3") {
    storage::disable_abseil_deadlock_detection();  // process-wide, before the first gRPC channel
    storage::EtcdStorage::Options etcd_options;
    etcd_options.endpoints = options.etcd_servers;
    etcd_options.ca_file = options.etcd_cafile;
    etcd_options.cert_file = options.etcd_certfile;
    etcd_options.key_file = options.etcd_keyfile;
    // Like kube-apiserver, wait a while for etcd at start-up rather than fail at once.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      const auto attempt = std::chrono::steady_clock::now();
      auto opened = storage::EtcdStorage::open(etcd_options, ioc->get_executor());
      if (opened) {
        storage = std::move(*opened);
        break;
      }
      if (opened.error() != base::Errc::unavailable ||
          std::chrono::steady_clock::now() > give_up) {
        spdlog::critical("cannot use etcd at {}: {}", fmt::join(options.etcd_servers, ","),
                         opened.error().message());
        return false;
      }
      spdlog::warn("etcd at {} is not answering yet; retrying",
                   fmt::join(options.etcd_servers, ","));
      // A failure that came at once (a name that does not resolve yet, a refused connection)
      // is tried again after a second, not in a loop.
      std::this_thread::sleep_until(attempt + std::chrono::seconds(1));
    }
  } else {
    storage::MemoryStorage::Options storage_options;
    storage_options.data_dir = options.data_dir;
    storage_options.sync = options.fsync;
    storage_options.snapshot_log_bytes = options.snapshot_bytes;
    auto opened = storage::MemoryStorage::open(storage_options);
    if (!opened) {
      spdlog::critical("cannot open storage in '{}': {}", options.data_dir,
                       opened.error().message());
      return false;
    }
    storage = std::move(*opened);
  }
  scheme = kinds::Scheme::builtin(options.etcd_prefix);
  // Encryption at rest sits at the storage boundary: everything above reads and writes plaintext.
  if (!options.encryption_provider_config.empty()) {
    auto config = storage::load_encryption_config(options.encryption_provider_config);
    if (!config) {
      spdlog::critical("--encryption-provider-config: {}", config.error());
      return false;
    }
    auto scopes = encryption_scopes(*config, *scheme, options.etcd_prefix);
    if (!scopes) {
      spdlog::critical("--encryption-provider-config: {}", scopes.error());
      return false;
    }
    for (const auto& scope : *scopes) spdlog::info("encrypting values under {}", scope.prefix);
    storage = std::make_shared<storage::EncryptingStorage>(std::move(storage), std::move(*scopes));
  }
  return true;
}

// The watch caches of every built-in resource (listing from here on), the store, the metrics
// and the API handler with its compute pool.
void Application::Parts::make_caches_and_handler() {
  CacherDefaults cacher_defaults;
  cacher_defaults.default_capacity = options.default_watch_cache_size;
  cacher_defaults.capacities = options.watch_cache_sizes;
  cacher_defaults.bookmark_interval = options.watch_bookmark_interval;
  // The cachers' reflectors and dispatchers are part of delivery too: an event is fanned out
  // to watcher strands of the same io_context, without a hop per watcher between thread pools.
  cachers =
      std::make_shared<CacherRegistry>(delivery ? delivery->get_executor() : ioc->get_executor(),
                                       storage, std::move(cacher_defaults));
  for (const auto& info : scheme->resources()) cachers->ensure(*info);
  // On etcd an update starting from the cache's copy saves a round trip. The embedded store reads
  // a key faster than the copy can be decoded, so there updates read storage.
  std::shared_ptr<const registry::StateCache> state_cache;
  if (options.storage_backend == "etcd3") {
    state_cache = std::make_shared<WatchCacheState>(cachers);
  }
  store = std::make_shared<registry::ResourceStore>(storage, scheme, state_cache);
  metrics = std::make_shared<Metrics>();
  register_process_metrics(*metrics);
  const std::string address =
      options.bind_address + ":" +
      std::to_string(options.secure_port != 0 ? options.secure_port : *options.port);
  WatchOptions watch_options;
  watch_options.min_request_timeout = options.min_request_timeout;
  // Patches and large bodies are decoded and merged here, away from the I/O threads, so a few
  // expensive requests cannot hold up health checks and everyone else's requests.
  compute.emplace(std::max(1u, threads / 2));
  ComputeOptions compute_options;
  compute_options.executor = compute->get_executor();
  handler = std::make_shared<ApiHandler>(scheme, store, metrics, address, cachers, watch_options,
                                         compute_options);
  handler->set_storage_check(options.storage_backend == "etcd3" ? "etcd" : "storage",
                             options.etcd_healthcheck_timeout, options.etcd_readycheck_timeout);
}

bool Application::Parts::open_audit_log() {
  if (!options.audit_log_path.empty()) {
    AuditLogOptions audit_options;
    audit_options.path = options.audit_log_path;
    audit_options.max_size_bytes = std::uint64_t{options.audit_log_maxsize_mb} << 20;
    audit_options.max_backups = static_cast<int>(options.audit_log_maxbackup);
    audit_options.max_age_days = static_cast<int>(options.audit_log_maxage_days);
    auto opened = AuditLog::open(std::move(audit_options));
    if (!opened) {
      spdlog::critical("--audit-log-path: {}", opened.error());
      return false;
    }
    audit = std::move(*opened);
    handler->set_audit(audit);
  }
  return true;
}

bool Application::Parts::configure_access() {
  // Who may do what.
  AccessOptions access;
  access.anonymous = options.anonymous_auth;
  access.request_header = options.request_header;
  if (!options.token_auth_file.empty()) {
    auto tokens = TokenFile::load(options.token_auth_file);
    if (!tokens) {
      spdlog::critical("{}", tokens.error());
      return false;
    }
    access.tokens = std::move(*tokens);
  }
  {
    ServiceAccountKeyOptions keys;
    keys.issuer = options.service_account_issuer;
    keys.api_audiences = options.api_audiences;
    keys.signing_key_file = options.service_account_signing_key_file;
    keys.key_files = options.service_account_key_files;
    keys.cert_dir = options.cert_dir;
    auto loaded = ServiceAccountTokens::load(keys);
    if (!loaded) {
      spdlog::critical("ServiceAccount tokens: {}", loaded.error());
      return false;
    }
    if ((*loaded)->ephemeral()) {
      spdlog::warn("cannot write a ServiceAccount key into {}: using one in memory, so tokens "
                   "stop working when kwatch restarts (give --service-account-key-file and "
                   "--service-account-signing-key-file, or a writable --cert-dir)",
                   options.cert_dir);
    }
    access.service_accounts = std::move(*loaded);
  }
  access.max_token_seconds = std::chrono::duration_cast<std::chrono::seconds>(
                                options.service_account_max_token_expiration)
                                .count();
  access.scheme = scheme;
  access.cachers = cachers;
  access.store = store;
  if (options.authorization_mode == "RBAC") {
    rbac = std::make_shared<RbacPolicySource>(scheme, cachers, storage);
    rbac->start(ioc->get_executor());
    access.rbac = rbac;
    store->admission().add(std::make_shared<auth::EscalationGuard>(rbac));
    store->admission().add(std::make_shared<admission::PolicyParamGuard>(rbac, scheme, cachers));
  }
  // kube's CertificateApproval, CertificateSigning and CertificateSubjectRestriction plugins.
  store->admission().add(std::make_shared<auth::CertificateGuard>(rbac));
  if (!delegate_access(access)) return false;
  handler->set_access(std::move(access));
  // After every other validating plugin, as kube's chain runs ValidatingAdmissionPolicy.
  const auto& off = options.disabled_admission_plugins;
  if (std::find(off.begin(), off.end(), "MutatingAdmissionPolicy") == off.end()) {
    mutating_policies = std::make_shared<admission::MutatingPolicyPlugin>(scheme, cachers);
    mutating_policies->use_rbac(rbac);
    mutating_policies->use_executor(compute->get_executor());
    // Compiling policies may take a while: on the compute pool, never the I/O threads.
    mutating_policies->start(compute->get_executor());
    store->admission().add(mutating_policies);
  }
  // MutatingAdmissionWebhook after MutatingAdmissionPolicy, ValidatingAdmissionWebhook after
  // ValidatingAdmissionPolicy, as kube orders its chain. Calls run on the I/O threads, never
  // blocking them.
  if (options.unsafe_webhook_loopback_endpoints) {
    spdlog::warn("--unsafe-webhook-loopback-endpoints is set: webhooks named by a Service may be "
                 "called at loopback endpoints (for tests only; never in production)");
  }
  if (std::find(off.begin(), off.end(), "MutatingAdmissionWebhook") == off.end()) {
    mutating_webhooks = std::make_shared<admission::MutatingWebhookPlugin>(scheme, cachers);
    mutating_webhooks->use_rbac(rbac);
    mutating_webhooks->use_observer(webhook_metrics(metrics));
    mutating_webhooks->allow_loopback_endpoints(options.unsafe_webhook_loopback_endpoints);
    mutating_webhooks->start(ioc->get_executor());
    store->admission().add(mutating_webhooks);
  }
  if (std::find(off.begin(), off.end(), "ValidatingAdmissionPolicy") == off.end()) {
    policies = std::make_shared<admission::ValidatingPolicyPlugin>(scheme, cachers);
    policies->use_rbac(rbac);
    policies->use_executor(compute->get_executor());
    policies->start(compute->get_executor());
    store->admission().add(policies);
  }
  if (std::find(off.begin(), off.end(), "ValidatingAdmissionWebhook") == off.end()) {
    validating_webhooks = std::make_shared<admission::ValidatingWebhookPlugin>(scheme, cachers);
    validating_webhooks->use_rbac(rbac);
    validating_webhooks->use_observer(webhook_metrics(metrics));
    validating_webhooks->allow_loopback_endpoints(options.unsafe_webhook_loopback_endpoints);
    validating_webhooks->start(ioc->get_executor());
    store->admission().add(validating_webhooks);
  }
  // Requests for remote APIServices' group/versions go to their extension servers.
  aggregator::ProxyOptions proxy_options;
  proxy_options.allow_loopback = options.unsafe_webhook_loopback_endpoints;
  if (!options.cluster_signing_cert_file.empty()) {
    // The CertificateSigningRequest signer's CA, read (and checked) before serving starts.
    std::string cert_pem, key_pem, error;
    if (read_whole_file(options.cluster_signing_cert_file, cert_pem) &&
        read_whole_file(options.cluster_signing_key_file, key_pem)) {
      signing_authority = controllers::CertificateSigner::load(cert_pem, key_pem, error);
    } else {
      error = "cannot read them";
    }
    if (!signing_authority) {
      spdlog::critical("--cluster-signing-cert-file {} and --cluster-signing-key-file {}: {}",
                       options.cluster_signing_cert_file, options.cluster_signing_key_file, error);
      return false;
    }
  }
  if (!options.root_ca_file.empty()) {
    // As kube-controller-manager: a bundle that does not read as certificates stops start-up.
    if (!read_whole_file(options.root_ca_file, root_ca_pem) ||
        base::openssl::count_certificates(root_ca_pem) == 0) {
      spdlog::critical("--root-ca-file {}: cannot read a PEM certificate from it",
                       options.root_ca_file);
      return false;
    }
  }
  if (!options.proxy_client_cert_file.empty()) {
    if (!read_whole_file(options.proxy_client_cert_file, proxy_options.client_cert_pem) ||
        !read_whole_file(options.proxy_client_key_file, proxy_options.client_key_pem)) {
      spdlog::critical("cannot read --proxy-client-cert-file {} or --proxy-client-key-file {}",
                       options.proxy_client_cert_file, options.proxy_client_key_file);
      return false;
    }
  }
  api_service_proxy = std::make_shared<aggregator::ApiServiceProxy>(
      scheme, cachers, ioc->get_executor(), std::move(proxy_options));
  handler->set_aggregator(api_service_proxy);
  if (options.enable_priority_and_fairness) {
    const unsigned seats = options.max_requests_inflight + options.max_mutating_requests_inflight;
    if (seats == 0) {
      spdlog::critical("--max-requests-inflight plus --max-mutating-requests-inflight must be "
                       "positive when --enable-priority-and-fairness is true");
      return false;
    }
    flowcontrol::Options apf;
    apf.server_concurrency_limit = static_cast<int>(seats);
    apf.watches_per_seat = static_cast<int>(options.watches_per_seat);
    apf.max_mutating_seats = static_cast<int>(options.max_fanout_seats);
    priority_and_fairness = std::make_shared<flowcontrol::PriorityAndFairness>(apf);
    priority_and_fairness->start(ioc->get_executor());
    handler->set_priority_and_fairness(priority_and_fairness);
    flow_control_keeper = std::make_shared<flowcontrol::ConfigKeeper>(
        priority_and_fairness, scheme, cachers, store);
  }
  handler->set_limits(std::make_shared<RequestLimits>(
      RequestLimitOptions{options.max_requests_inflight,
                                  options.max_mutating_requests_inflight,
                                  options.max_watches_per_user, options.mutating_queue_length,
                                  options.mutating_queue_wait, options.watches_per_seat,
                                  options.max_fanout_seats},
      metrics));
  return true;
}

namespace {

// How often the trust the delegated server publishes is read again while serving.
constexpr auto kDelegatedTrustInterval = std::chrono::seconds(5);

// A client for the server named by a delegation kubeconfig (--authentication-kubeconfig,
// --authorization-kubeconfig); null after logging why not.
std::shared_ptr<client::HttpClient> delegation_client(const std::string& kubeconfig,
                                                      const char* flag,
                                                      asio::any_io_executor executor) {
  auto config = client::load_kubeconfig({kubeconfig});
  if (!config) {
    spdlog::critical("--{}: {}", flag, config.error());
    return nullptr;
  }
  if (config->server.starts_with("http://")) {
    spdlog::warn("--{}: {} is plain HTTP: the tokens this server has judged there and the trust "
                 "it reads from there travel unprotected (use https outside tests)",
                 flag, config->server);
  }
  client::HttpClient::Options client_options;
  client_options.request_timeout = std::chrono::seconds(10);  // kube's delegating clients'
  client_options.user_agent = "kwatch-apiserver";
  client_options.max_response_bytes = 1u << 20;               // a review or a ConfigMap
  auto made = client::HttpClient::create(std::move(executor), std::move(*config), client_options);
  if (!made) {
    spdlog::critical("--{}: {}", flag, made.error());
    return nullptr;
  }
  return std::move(*made);
}

// Writes `pem` into the cert dir as `name` (what the TLS set-up reads); "" after logging.
std::string write_trusted_pem(const std::string& cert_dir, const std::string& name,
                              const std::string& pem) {
  std::error_code ec;
  std::filesystem::create_directories(cert_dir, ec);
  const std::string path = (std::filesystem::path(cert_dir) / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << pem;
  out.close();
  if (!out) {
    spdlog::critical("cannot write {}: the trust read from the delegated server needs a "
                     "writable --cert-dir", path);
    return "";
  }
  return path;
}

}  // namespace

// As an extension API server: reads the trust the server it delegates authentication to
// publishes (kube-system/extension-apiserver-authentication), for what the flags leave unset:
// its client CA when --client-ca-file is not given, its request header CA and settings when
// --requestheader-client-ca-file is not. At start-up; then followed (follow_delegated_trust).
bool Application::Parts::look_up_delegated_trust() {
  if (options.authentication_kubeconfig.empty() || options.authentication_skip_lookup) return true;
  if (!options.client_ca_file.empty() && !options.requestheader_client_ca_file.empty()) {
    return true;
  }
  asio::io_context lookup_ioc;
  auto client = delegation_client(options.authentication_kubeconfig, "authentication-kubeconfig",
                                  lookup_ioc.get_executor());
  if (!client) return false;
  boost::system::result<auth::ExtensionAuthentication, std::string> published(
      boost::system::in_place_error, "not read");
  asio::co_spawn(
      lookup_ioc,
      [&]() -> asio::awaitable<void> {
        published = co_await delegation::look_up_extension_authentication(*client);
      },
      asio::detached);
  lookup_ioc.run();
  if (!published) {
    if (!options.authentication_tolerate_lookup_failure) {
      spdlog::critical("{} (or set --authentication-tolerate-lookup-failure=true, or "
                       "--authentication-skip-lookup)", published.error());
      return false;
    }
    spdlog::warn("{}; going on without it (--authentication-tolerate-lookup-failure)",
                 published.error());
    return true;
  }
  published_trust = *published;
  if (options.client_ca_file.empty() && !published->client_ca_pem.empty()) {
    published_client_ca = true;
    options.client_ca_file =
        write_trusted_pem(options.cert_dir, "delegated-client-ca.crt", published->client_ca_pem);
    if (options.client_ca_file.empty()) return false;
    spdlog::info("client certificates are verified against the client CA the delegated server "
                 "publishes");
  }
  if (options.requestheader_client_ca_file.empty() && !published->requestheader_ca_pem.empty()) {
    published_request_header = true;
    options.requestheader_client_ca_file = write_trusted_pem(
        options.cert_dir, "delegated-requestheader-client-ca.crt", published->requestheader_ca_pem);
    if (options.requestheader_client_ca_file.empty()) return false;
    options.request_header.allowed_names = published->allowed_names;
    options.request_header.username_headers = published->username_headers;
    options.request_header.uid_headers = published->uid_headers;
    options.request_header.group_headers = published->group_headers;
    options.request_header.extra_prefixes = published->extra_headers_prefix;
    spdlog::info("front proxies are trusted as the delegated server publishes (allowed names: "
                 "{})", fmt::join(published->allowed_names, ","));
  }
  return true;
}

// --authentication-kubeconfig, --authorization-kubeconfig: TokenReviews and
// SubjectAccessReviews asked of another server, on the I/O threads.
bool Application::Parts::delegate_access(AccessOptions& access) {
  if (!options.authentication_kubeconfig.empty()) {
    auto client = delegation_client(options.authentication_kubeconfig,
                                    "authentication-kubeconfig", ioc->get_executor());
    if (!client) return false;
    delegation::TokenReviewOptions review;
    review.cache_ttl = options.authentication_token_webhook_cache_ttl;
    review.audiences = options.api_audiences;
    access.delegated_authentication =
        std::make_shared<delegation::TokenReviewAuthenticator>(std::move(client), review);
  }
  if (!options.authorization_kubeconfig.empty()) {
    auto client = delegation_client(options.authorization_kubeconfig,
                                    "authorization-kubeconfig", ioc->get_executor());
    if (!client) return false;
    delegation::AccessReviewOptions review;
    review.allowed_ttl = options.authorization_webhook_cache_authorized_ttl;
    review.denied_ttl = options.authorization_webhook_cache_unauthorized_ttl;
    access.delegated_authorization =
        std::make_shared<delegation::AccessReviewAuthorizer>(std::move(client), review);
  }
  return true;
}

// Constructed here; started by start_up() once every cache has listed and the bootstrap objects
// are written.
void Application::Parts::make_controllers() {
  // CustomResourceDefinitions become served resources here, in every replica.
  // Definitions that convert through a webhook call it as admission webhooks are called: on the
  // I/O threads, a Service resolved through its Endpoints.
  kinds::ConverterFactory converters =
      [executor = ioc->get_executor(), scheme = scheme.get(), cachers = cachers.get(),
       loopback = options.unsafe_webhook_loopback_endpoints,
       observer = conversion_metrics(metrics)](const kinds::ConversionWebhook& w) {
        admission::ResolveContext context;
        context.scheme = scheme;
        context.cachers = cachers;
        context.allow_loopback = loopback;
        return admission::make_conversion_webhook(w, executor, context, observer);
      };
  crd_controller = std::make_shared<CrdController>(scheme, store, cachers, storage,
                                                   options.etcd_prefix, std::move(converters));
  // Namespaces being deleted are emptied, then go.
  namespace_controller = std::make_shared<NamespaceController>(scheme, store, cachers, storage);
  // Aggregated ClusterRoles (admin, edit, view, ...) get the rules they gather written in.
  cluster_role_aggregator = std::make_shared<ClusterRoleAggregator>(scheme, store, cachers);
  // Every group/version served here has a local APIService, as kube-apiserver registers them.
  api_service_registration =
      std::make_shared<controllers::ApiServiceRegistration>(
          scheme, store, cachers, server::served_group_versions(*scheme));
  // Remote APIServices get the Available condition kube's availability controller writes.
  api_service_availability = std::make_shared<aggregator::AvailabilityController>(
      scheme, cachers, store, api_service_proxy);
  metrics->help("aggregator_unavailable_apiservice", "gauge",
                "Gauge of APIServices which are marked as unavailable broken down by APIService "
                "name.");
  metrics->help("aggregator_unavailable_apiservice_total", "counter",
                "Counter of APIServices which are marked as unavailable broken down by APIService "
                "name and reason.");
  api_service_availability->use_observer(
      [metrics = metrics](const std::string& name, bool available, const std::string& became) {
        metrics->set("aggregator_unavailable_apiservice", {{"name", name}}, available ? 0 : 1);
        if (!became.empty()) {
          metrics->inc("aggregator_unavailable_apiservice_total",
                       {{"name", name}, {"reason", became}});
        }
      });
  admission_policy_status =
      std::make_shared<controllers::AdmissionPolicyStatus>(scheme, store, cachers);
  if (signing_authority) {
    certificate_signer = std::make_shared<controllers::CertificateSigner>(
        scheme, store, cachers, signing_authority,
        std::chrono::duration_cast<std::chrono::seconds>(options.cluster_signing_duration));
  }
  // Services get cluster IPs and node ports from the configured ranges.
  auto service_ranges = registry::parse_node_port_range(
      options.service_node_port_range,
      *registry::parse_service_cidr(options.service_cluster_ip_range));
  service_allocator =
      std::make_shared<registry::ServiceAllocator>(storage, options.etcd_prefix, *service_ranges);
  service_allocator->use_ip_addresses(store.get(),
                                      scheme->find("networking.k8s.io", "v1", "ipaddresses"));
  store->set_service_allocator(service_allocator);
  // The ServiceCIDRs (the default one from the flag), their finalizers and the IPAddresses'
  // repair; the allocator follows their ranges.
  service_cidr_controller = std::make_shared<controllers::ServiceCIDRController>(
      scheme, store, cachers, storage, service_allocator,
      [&] {
        std::vector<std::string> cidrs;
        for (const auto& r : service_allocator->ranges().cluster_ip_ranges) {
          cidrs.push_back(apimachinery::format_cidr(r));
        }
        return cidrs;
      }());
  // Dependents whose owners are gone are deleted, as kube-controller-manager's collector does.
  store->set_garbage_collection(options.enable_garbage_collector);
  if (options.enable_garbage_collector) {
    garbage_collector = std::make_shared<GarbageCollector>(scheme, store, cachers);
  }
}

bool Application::Parts::listen() {
  asio::io_context* delivery_ioc = delivery ? &*delivery : nullptr;
  HttpLimits http_limits;
  http_limits.max_connections = options.max_connections;
  http_limits.max_connections_per_address = options.max_connections_per_ip;
  http_limits.http2 = !options.disable_http2_serving;
  if (options.http2_max_streams_per_connection > 0) {
    http_limits.http2_max_streams = options.http2_max_streams_per_connection;
  }
  // Plain HTTP only when asked for (local development).
  if (options.port) {
    http = std::make_unique<HttpServer>(*ioc, handler, http_limits, delivery_ioc);
    http->set_compute(compute->get_executor());
    http->set_low_priority(low_priority ? &*low_priority : nullptr);
    if (auto ec = http->listen(options.bind_address, *options.port)) {
      spdlog::critical("cannot listen on {}:{}: {}", options.bind_address, *options.port,
                       ec.message());
      return false;
    }
    http->start();
  }
  // HTTPS beside it, with the operator's certificate or one made for this machine.
  if (options.secure_port != 0) {
    std::string cert = options.tls_cert_file;
    std::string key = options.tls_private_key_file;
    if (cert.empty()) {
      std::vector<std::string> hosts{"localhost", "127.0.0.1", "::1"};
      if (options.bind_address != "0.0.0.0" && options.bind_address != "::" &&
          options.bind_address != "127.0.0.1") {
        hosts.push_back(options.bind_address);
      }
      auto generated = ensure_self_signed_certificate(options.cert_dir, hosts);
      if (!generated) {
        spdlog::critical("cannot make a serving certificate: {}", generated.error());
        return false;
      }
      if (generated->generated) {
        spdlog::info("generated a self-signed CA and serving certificate in {}; clients trust {}",
                     options.cert_dir, generated->ca_file);
      }
      cert = generated->cert_file;
      key = generated->key_file;
      // The CA clients trust this certificate by, published unless --root-ca-file says other.
      if (root_ca_pem.empty() && !read_whole_file(generated->ca_file, root_ca_pem)) {
        spdlog::warn("cannot read {}: kube-root-ca.crt is not published", generated->ca_file);
      }
    }
    https = std::make_unique<HttpServer>(*ioc, handler, http_limits, delivery_ioc);
    https->set_compute(compute->get_executor());
    https->set_low_priority(low_priority ? &*low_priority : nullptr);
    tls_cert_file = cert;
    tls_key_file = key;
    if (auto err = https->enable_tls(
            cert, key, options.client_ca_file, options.requestheader_client_ca_file,
            std::make_shared<const auth::RequestHeaderOptions>(options.request_header));
        !err.empty()) {
      spdlog::critical("cannot serve HTTPS: {}", err);
      return false;
    }
    if (auto ec = https->listen(options.bind_address, options.secure_port)) {
      spdlog::critical("cannot listen on {}:{}: {}", options.bind_address, options.secure_port,
                       ec.message());
      return false;
    }
    https->start();
    if (published_client_ca || published_request_header) {
      auto client = delegation_client(options.authentication_kubeconfig,
                                      "authentication-kubeconfig", ioc->get_executor());
      if (!client) return false;
      trust_timer.emplace(*ioc);
      asio::co_spawn(*ioc, follow_delegated_trust(std::move(client)),
                     [](std::exception_ptr e) { log_task_failure(e, "following delegated trust"); });
    }
  }
  return true;
}

// The trust read at start-up from the delegated server (look_up_delegated_trust), read again
// every few seconds while serving, as kube's extension servers follow that ConfigMap: a client
// CA or front proxy CA that changed there (a rotation) is written to its file and taken by the
// TLS context new connections use; open connections keep what they were verified with. A read
// that fails keeps what is in force.
asio::awaitable<void> Application::Parts::follow_delegated_trust(
    std::shared_ptr<client::HttpClient> client) {
  std::uint64_t failures = 0;
  for (;;) {
    trust_timer->expires_after(kDelegatedTrustInterval);
    auto [ec] = co_await trust_timer->async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;  // shutting down
    auto read = co_await delegation::look_up_extension_authentication(*client);
    if (!read) {
      if (failures++ % 20 == 0) {
        spdlog::warn("cannot read the trust the delegated server publishes; keeping the one in "
                     "force: {}", read.error());
      }
      continue;
    }
    failures = 0;
    apply_delegated_trust(*read);
  }
}

void Application::Parts::apply_delegated_trust(const auth::ExtensionAuthentication& read) {
  const bool client_ca = published_client_ca && read.client_ca_pem != published_trust.client_ca_pem;
  const bool request_header =
      published_request_header &&
      (read.requestheader_ca_pem != published_trust.requestheader_ca_pem ||
       read.allowed_names != published_trust.allowed_names ||
       read.username_headers != published_trust.username_headers ||
       read.uid_headers != published_trust.uid_headers ||
       read.group_headers != published_trust.group_headers ||
       read.extra_headers_prefix != published_trust.extra_headers_prefix);
  if (!client_ca && !request_header) return;
  const std::string bundles = read.client_ca_pem + '\n' + read.requestheader_ca_pem;
  if (bundles == refused_trust) return;
  Options next = options;
  if (client_ca) {
    next.client_ca_file = read.client_ca_pem.empty()
                              ? ""
                              : write_trusted_pem(options.cert_dir, "delegated-client-ca.crt",
                                                  read.client_ca_pem);
    if (!read.client_ca_pem.empty() && next.client_ca_file.empty()) return;
  }
  if (request_header) {
    next.requestheader_client_ca_file =
        read.requestheader_ca_pem.empty()
            ? ""
            : write_trusted_pem(options.cert_dir, "delegated-requestheader-client-ca.crt",
                                read.requestheader_ca_pem);
    if (!read.requestheader_ca_pem.empty() && next.requestheader_client_ca_file.empty()) return;
    next.request_header.allowed_names = read.allowed_names;
    next.request_header.username_headers = read.username_headers;
    next.request_header.uid_headers = read.uid_headers;
    next.request_header.group_headers = read.group_headers;
    next.request_header.extra_prefixes = read.extra_headers_prefix;
  }
  if (auto err = https->reload_tls(
          tls_cert_file, tls_key_file, next.client_ca_file, next.requestheader_client_ca_file,
          std::make_shared<const auth::RequestHeaderOptions>(next.request_header));
      !err.empty()) {
    spdlog::warn("the trust the delegated server publishes changed, and cannot be used: {}; "
                 "keeping the one in force", err);
    refused_trust = bundles;
    return;
  }
  options.client_ca_file = next.client_ca_file;
  options.requestheader_client_ca_file = next.requestheader_client_ca_file;
  options.request_header = next.request_header;
  if (client_ca) published_trust.client_ca_pem = read.client_ca_pem;
  if (request_header) {
    const std::string client_pem = published_trust.client_ca_pem;
    published_trust = read;
    published_trust.client_ca_pem = client_pem;
  }
  spdlog::info("the trust the delegated server publishes changed ({}): new connections use it",
               client_ca && request_header ? "client CA, front proxies"
               : client_ca                 ? "client CA"
                                           : "front proxies");
}

asio::awaitable<void> Application::Parts::wait_for_caches() {
  asio::steady_timer retry(co_await asio::this_coro::executor);
  // Every built-in cache lists first, so all of them start at one revision and what is
  // written below comes to them as events: a client that watched before a restart
  // resumes from its resourceVersion on any resource instead of being sent to list again.
  for (const auto& [resource, cacher] : cachers->all()) {
    while (!cacher->ready()) {
      retry.expires_after(std::chrono::milliseconds(10));
      co_await retry.async_wait(asio::use_awaitable);
    }
  }
}

// The default namespaces and kube's bootstrap RBAC policy, retried until storage answers: with
// etcd, kwatch may start before its cluster.
asio::awaitable<void> Application::Parts::write_bootstrap_policy() {
  asio::steady_timer retry(co_await asio::this_coro::executor);
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    for (;;) {
      auto r = co_await store->ensure_namespace(ns);
      if (r) break;
      spdlog::warn("cannot create namespace {} yet: {}", ns, r.error().message);
      retry.expires_after(std::chrono::seconds(1));
      co_await retry.async_wait(asio::use_awaitable);
    }
  }
  // kube's bootstrap RBAC policy: the default roles and their bindings, once.
  auto roles = scheme->find("rbac.authorization.k8s.io", "v1", "clusterroles");
  auto bindings =
      scheme->find("rbac.authorization.k8s.io", "v1", "clusterrolebindings");
  // Roles kept from an older kwatch gain the rules this one's bootstrap policy adds.
  for (auto& object : auth::bootstrap_cluster_roles()) {
    const json::value* name_value = object["metadata"].as_object().if_contains("name");
    std::string name(name_value->as_string());
    std::string cluster_scope;
    std::string any_version;
    auto stored = co_await store->get(*roles, std::move(cluster_scope), name,
                                      std::move(any_version));
    if (!stored) continue;
    auto rules = auth::reconciled_bootstrap_rules(*stored, object);
    if (!rules) continue;
    json::object updated = std::move(*stored);
    updated["rules"] = std::move(*rules);
    std::string scope;
    registry::WriteQuery query;
    auto r = co_await store->update(*roles, std::move(scope), std::move(name),
                                    std::move(updated), std::move(query));
    if (!r) spdlog::warn("cannot update a bootstrap RBAC role: {}", r.error().message);
  }
  auto ns_roles = scheme->find("rbac.authorization.k8s.io", "v1", "roles");
  auto ns_bindings = scheme->find("rbac.authorization.k8s.io", "v1", "rolebindings");
  for (auto [info, objects] :
       {std::pair{roles, auth::bootstrap_cluster_roles()},
        std::pair{bindings, auth::bootstrap_cluster_role_bindings()},
        std::pair{ns_roles, auth::bootstrap_kube_system_roles()},
        std::pair{ns_bindings, auth::bootstrap_kube_system_role_bindings()}}) {
    for (auto& object : objects) {
      auto r = co_await store->ensure(*info, std::move(object));
      if (!r) spdlog::warn("cannot create a bootstrap RBAC object: {}", r.error().message);
    }
  }
}

asio::awaitable<void> Application::Parts::ensure_kubernetes_service(unsigned short api_port) {
  // The `kubernetes` Service in `default`, on the range's first address, and its
  // Endpoints: this server.
  const std::string address =
      options.bind_address == "0.0.0.0" || options.bind_address == "::" ? "127.0.0.1"
                                                                         : options.bind_address;
  auto services = scheme->find("", "v1", "services");
  auto endpoints = scheme->find("", "v1", "endpoints");
  json::object labels{{"component", "apiserver"}, {"provider", "kubernetes"}};
  json::object kubernetes_service{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata",
       json::object{{"name", "kubernetes"}, {"namespace", "default"}, {"labels", labels}}},
      {"spec", json::object{{"type", "ClusterIP"},
                            {"clusterIP", service_allocator->first_ip()},
                            {"sessionAffinity", "None"},
                            {"ports", json::array{json::object{{"name", "https"},
                                                               {"port", 443},
                                                               {"protocol", "TCP"},
                                                               {"targetPort", api_port}}}}}}};
  json::object kubernetes_endpoints{
      {"apiVersion", "v1"},
      {"kind", "Endpoints"},
      {"metadata",
       json::object{{"name", "kubernetes"}, {"namespace", "default"}, {"labels", labels}}},
      {"subsets",
       json::array{json::object{
           {"addresses", json::array{json::object{{"ip", address}}}},
           {"ports", json::array{json::object{
                         {"name", "https"}, {"port", api_port}, {"protocol", "TCP"}}}}}}}};
  for (auto [info, object] : {std::pair{services, std::move(kubernetes_service)},
                              std::pair{endpoints, std::move(kubernetes_endpoints)}}) {
    auto r = co_await store->ensure(*info, std::move(object));
    if (!r) spdlog::warn("cannot create the kubernetes {}: {}", info->kind, r.error().message);
  }
}

// Ready once the admission policies are in force (users' writes are refused until then).
asio::awaitable<void> Application::Parts::wait_for_policies() {
  asio::steady_timer retry(co_await asio::this_coro::executor);
  while ((policies && !policies->loaded()) ||
         (mutating_policies && !mutating_policies->loaded()) ||
         (validating_webhooks && !validating_webhooks->loaded()) ||
         (mutating_webhooks && !mutating_webhooks->loaded())) {
    retry.expires_after(std::chrono::milliseconds(20));
    co_await retry.async_wait(asio::use_awaitable);
  }
}

// Ready once every built-in group/version has its APIService (kube's autoregister-completion
// check): a client that lists APIServices after /readyz sees them all, and the first start's
// registrations are not still being written after it.
asio::awaitable<void> Application::Parts::wait_for_api_services() {
  if (!api_service_registration) co_return;
  asio::steady_timer retry(co_await asio::this_coro::executor);
  while (!api_service_registration->registered()) {
    retry.expires_after(std::chrono::milliseconds(20));
    co_await retry.async_wait(asio::use_awaitable);
  }
}

// Ready once authorization sees the bootstrap policy (kube's poststarthook/rbac/bootstrap-roles):
// before, every request but the probes is refused.
asio::awaitable<void> Application::Parts::wait_for_rbac() {
  if (!rbac) co_return;
  asio::steady_timer retry(co_await asio::this_coro::executor);
  std::int64_t written = 0;
  while (written == 0) {
    if (auto rev = co_await storage->current_revision()) {
      written = *rev;
      break;
    }
    retry.expires_after(std::chrono::milliseconds(100));
    co_await retry.async_wait(asio::use_awaitable);
  }
  while (rbac->covered_revision() < written) {
    rbac->refresh();
    retry.expires_after(std::chrono::milliseconds(20));
    co_await retry.async_wait(asio::use_awaitable);
  }
}

// In one order, so that all caches begin at one revision and the server's own writes reach them
// as events: every cache lists, then the bootstrap objects are written, then the controllers
// start; ready once authorization sees the bootstrap policy.
asio::awaitable<void> Application::Parts::start_up(unsigned short api_port) {
  co_await wait_for_caches();
  co_await write_bootstrap_policy();
  co_await service_cidr_controller->ensure_default();
  co_await ensure_kubernetes_service(api_port);
  if (flow_control_keeper) {
    co_await flow_control_keeper->ensure_bootstrap();
    co_await flow_control_keeper->settle();
    flow_control_keeper->start(ioc->get_executor());
  }
  start_controllers();
  {
    // What extension API servers read to trust this server's front proxy and client CA.
    controllers::ExtensionAuthentication published;
    auto read = [](const std::string& path) {
      std::ifstream in(path, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    };
    if (!options.client_ca_file.empty()) published.client_ca_pem = read(options.client_ca_file);
    if (!options.requestheader_client_ca_file.empty()) {
      published.requestheader_ca_pem = read(options.requestheader_client_ca_file);
    }
    published.allowed_names = options.request_header.allowed_names;
    published.username_headers = options.request_header.username_headers;
    published.uid_headers = options.request_header.uid_headers;
    published.group_headers = options.request_header.group_headers;
    published.extra_headers_prefix = options.request_header.extra_prefixes;
    co_await controllers::publish_extension_authentication(store, scheme, std::move(published));
  }
  co_await wait_for_rbac();
  co_await wait_for_policies();
  co_await wait_for_api_services();
  handler->set_ready(true);
}

namespace {

// Every connection (an HTTP/1.1 watch is one) is a file descriptor: the soft limit on open files
// goes up to the hard one at start, as Go programs (kube-apiserver among them) do since Go 1.19.
// Logged, with what a deployment must raise when it is still low.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      spdlog::warn("cannot raise the open-file limit from {} to {}: {}", before, limit.rlim_max,
                   std::strerror(errno));
      return;
    }
  }
  const auto shown = [](rlim_t v) {
    return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
  };
  if (before != limit.rlim_cur) {
    spdlog::info("open files: up to {} (raised from {} to the hard limit)", shown(limit.rlim_cur),
                 shown(before));
  } else {
    spdlog::info("open files: up to {} (the hard limit)", shown(limit.rlim_cur));
  }
}

}  // namespace

bool Application::start() {
  Parts& p = *parts_;
  raise_open_file_limit();
  p.make_threads();
  if (!p.open_storage()) return false;
  p.make_caches_and_handler();
  if (!p.open_audit_log() || !p.look_up_delegated_trust() || !p.configure_access()) return false;
  p.make_controllers();
  if (!p.listen()) return false;
  // The port the `kubernetes` Service sends to: the secure one, else the plain one.
  const unsigned short api_port = p.https ? p.https->port() : p.http ? p.http->port() : 443;
  asio::co_spawn(*p.ioc, p.start_up(api_port),
                 [](std::exception_ptr e) { log_task_failure(e, "start-up"); });
  if (p.options.compaction_interval.count() > 0) {
    asio::co_spawn(*p.ioc, compact_periodically(p.storage, p.options.compaction_interval),
                   [](std::exception_ptr e) { log_task_failure(e, "compaction"); });
  }

  p.log_serving();
  p.signals.emplace(*p.ioc, SIGINT, SIGTERM);
  p.signals->async_wait([&p](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    asio::co_spawn(*p.ioc, p.shut_down(signal),
                   [](std::exception_ptr e) { log_task_failure(e, "shutdown"); });
  });
  return true;
}

void Application::Parts::log_serving() const {
  std::string where =
      options.storage_backend == "etcd3"
          ? ", " + fmt::format("{}", fmt::join(options.etcd_servers, ","))
          : (options.data_dir.empty() ? ", in memory" : ", data dir " + options.data_dir);
  spdlog::info("kwatch-apiserver {} (storage: {}{}, authorization: {})", kKwatchVersion,
               options.storage_backend, where, options.authorization_mode);
  if (https) {
    spdlog::info("serving on https://{}:{}", options.bind_address, https->port());
  }
  if (http) {
    spdlog::info("serving on http://{}:{} (plain HTTP, for local development)",
                 options.bind_address, http->port());
  }
}

namespace {

// After the first signal: a second one ends the process at once.
extern "C" void exit_now(int) {
  static constexpr char kMessage[] = "second signal: exiting now\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  std::_Exit(1);
}

}  // namespace

asio::awaitable<void> Application::Parts::shut_down(int signal) {
  const auto deadline = std::chrono::steady_clock::now() + options.shutdown_grace_period;
  signals->clear();
  struct sigaction action {};
  action.sa_handler = exit_now;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  spdlog::info("signal {}: shutting down; /readyz fails now, requests are served for {} ms more",
               signal, options.shutdown_delay.count());
  handler->set_shutting_down();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(options.shutdown_delay);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));

  // No new connections, no new watches; connections close after their current request.
  if (http) http->stop();
  if (https) https->stop();
  handler->refuse_watches();
  if (http) http->drain();
  if (https) https->drain();
  stop_controllers();
  co_await cachers->catch_up_with_storage();
  cachers->end_client_watches();
  while (open_connections() > 0 && std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  if (const std::size_t left = open_connections(); left > 0) {
    spdlog::warn("shutdown: {} connections still open after the grace period of {} ms: cut off",
                 left, options.shutdown_grace_period.count());
    exit_code = 1;
  } else {
    spdlog::info("shutdown: every request answered and every watch stream ended");
  }
  if (trust_timer) trust_timer->cancel();
  if (rbac) rbac->stop();
  if (policies) policies->stop();
  if (mutating_policies) mutating_policies->stop();
  if (validating_webhooks) validating_webhooks->stop();
  if (mutating_webhooks) mutating_webhooks->stop();
  cachers->stop_all();
  if (delivery) delivery->stop();
  if (low_priority) low_priority->stop();
  ioc->stop();
}

void Application::Parts::start_controllers() {
  std::lock_guard lock(controllers_mutex);
  if (controllers_stopped) return;
  // CustomResourceDefinitions become served resources; namespaces being deleted are emptied;
  // aggregated ClusterRoles get their rules written in; orphans are collected.
  crd_controller->start(ioc->get_executor());
  namespace_controller->start(ioc->get_executor());
  cluster_role_aggregator->start(ioc->get_executor());
  api_service_registration->start(ioc->get_executor());
  api_service_availability->start(ioc->get_executor());
  admission_policy_status->start(compute->get_executor());  // type checking compiles
  if (certificate_signer) certificate_signer->start(compute->get_executor());  // RSA signing
  if (garbage_collector) garbage_collector->start(ioc->get_executor());
  service_cidr_controller->start(ioc->get_executor());
  if (!root_ca_pem.empty()) {
    root_ca_publisher =
        std::make_shared<controllers::RootCaPublisher>(*scheme, store, cachers, root_ca_pem);
    root_ca_publisher->start(ioc->get_executor());
  }
}

void Application::Parts::stop_controllers() {
  std::lock_guard lock(controllers_mutex);
  controllers_stopped = true;
  crd_controller->stop();
  namespace_controller->stop();
  cluster_role_aggregator->stop();
  api_service_registration->stop();
  api_service_availability->stop();
  admission_policy_status->stop();
  if (certificate_signer) certificate_signer->stop();
  if (root_ca_publisher) root_ca_publisher->stop();
  if (garbage_collector) garbage_collector->stop();
  service_cidr_controller->stop();
  if (flow_control_keeper) flow_control_keeper->stop();
  if (priority_and_fairness) priority_and_fairness->stop();
}

namespace {

// The calling thread's CPU priority for the low-priority levels: nice 19, and (Linux 6.12 and
// later) the shortest time slice a thread may ask for, 0.1 ms: a thread just picked keeps its
// core for its slice before a woken one preempts it, and the default slice is 0.75-1.5 ms of
// waiting for the other levels' requests. Not SCHED_IDLE: measured, the other levels' p99 under
// a flood was 2.5-4 times what it is with nice 19 (bench/RESULTS.md, sessions 33 and 35), even
// with no lock left that these threads share with the others.
void lower_own_cpu_priority() {
  struct {
    std::uint32_t size;
    std::uint32_t sched_policy;
    std::uint64_t sched_flags;
    std::int32_t sched_nice;
    std::uint32_t sched_priority;
    std::uint64_t sched_runtime, sched_deadline, sched_period;
  } attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = 19;
  attr.sched_runtime = 100'000;  // ns: the time slice kernels with EEVDF slices take it as
  if (syscall(SYS_sched_setattr, 0, &attr, 0) == 0) return;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19) != 0) {
    spdlog::warn("cannot set the low-priority threads' nice value: {}", std::strerror(errno));
  }
}

}  // namespace

int Application::run() {
  Parts& p = *parts_;
  const Options& options = p.options;
  asio::io_context& ioc = *p.ioc;
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < p.threads; ++i) pool.emplace_back([&ioc] { ioc.run(); });
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> delivery_work;
  if (p.delivery) {
    delivery_work.emplace(p.delivery->get_executor());
    for (unsigned i = 0; i < p.delivery_threads; ++i) {
      pool.emplace_back([&p, &options] {
        // Linux: a nice value is per thread. Lowering one's own priority needs no privilege.
        if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), options.delivery_nice) != 0) {
          spdlog::warn("cannot set the delivery threads' nice value: {}", std::strerror(errno));
        }
        p.delivery->run();
      });
    }
  }
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> low_work;
  if (p.low_priority) {
    low_work.emplace(p.low_priority->get_executor());
    for (unsigned i = 0; i < p.low_priority_threads; ++i) {
      pool.emplace_back([&p] {
        lower_own_cpu_priority();
        p.low_priority->run();
      });
    }
  }
  ioc.run();
  for (auto& t : pool) t.join();
  p.compute->stop();
  p.compute->join();
  if (p.audit) p.audit->stop();  // writes what is queued
  // Storage goes with the last of its holders: the embedded store syncs and closes its log.
  p.http.reset();
  p.https.reset();
  p.garbage_collector.reset();
  p.namespace_controller.reset();
  p.cluster_role_aggregator.reset();
  p.api_service_registration.reset();
  p.api_service_availability.reset();
  p.api_service_proxy.reset();
  p.admission_policy_status.reset();
  p.certificate_signer.reset();
  p.root_ca_publisher.reset();
  p.service_cidr_controller.reset();
  p.crd_controller.reset();
  p.rbac.reset();
  p.handler.reset();
  p.store.reset();
  p.cachers.reset();
  p.delivery.reset();
  p.low_priority.reset();
  p.ioc.reset();
  p.storage.reset();
  return p.exit_code;
}

}  // namespace kwatch::app
