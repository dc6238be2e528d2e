#include "app/options.hpp"

#include "registry/service_allocator.hpp"

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <map>

namespace kwatch::app {

namespace {

template <class T>
bool parse_number(const std::string& text, T& out, T min, T max) {
  long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < static_cast<long long>(min) ||
      v > static_cast<long long>(max)) {
    return false;
  }
  out = static_cast<T>(v);
  return true;
}

bool parse_bool(const std::string& text, bool& out) {
  if (text == "true" || text == "1") {
    out = true;
    return true;
  }
  if (text == "false" || text == "0") {
    out = false;
    return true;
  }
  return false;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text == "0") return std::chrono::milliseconds(0);
  if (text.empty()) return std::nullopt;
  double total_ms = 0;
  while (!text.empty()) {
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == 0) return std::nullopt;
    double value = 0;
    try {
      value = std::stod(std::string(text.substr(0, i)));
    } catch (...) {
      return std::nullopt;
    }
    text.remove_prefix(i);
    double unit = 0;
    if (text.starts_with("ms")) {
      unit = 1;
      text.remove_prefix(2);
    } else if (text.starts_with("s")) {
      unit = 1000;
      text.remove_prefix(1);
    } else if (text.starts_with("m")) {
      unit = 60'000;
      text.remove_prefix(1);
    } else if (text.starts_with("h")) {
      unit = 3'600'000;
      text.remove_prefix(1);
    } else {
      return std::nullopt;
    }
    total_ms += value * unit;
  }
  if (total_ms > 1e12) return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(total_ms));
}


namespace {

using Setter = std::function<std::string(const std::string&)>;  // returns an error or ""

// A flag that takes a duration above zero; `example` goes into the error ("2s").
Setter positive_duration(std::chrono::milliseconds& target, std::string example) {
  return [&target, example = std::move(example)](const std::string& v) -> std::string {
    auto d = parse_duration(v);
    if (!d || d->count() <= 0) return "expected a positive duration such as " + example;
    target = *d;
    return "";
  };
}

// A flag that takes a duration of zero or more.
Setter non_negative_duration(std::chrono::milliseconds& target, std::string example) {
  return [&target, example = std::move(example)](const std::string& v) -> std::string {
    auto d = parse_duration(v);
    if (!d || d->count() < 0) return "expected a duration such as " + example;
    target = *d;
    return "";
  };
}

// --enable-admission-plugins / --disable-admission-plugins: a comma-separated list of kube's
// plugin names. kube refuses a name it does not know; a name it knows that kwatch has no plugin
// for is accepted (a user's flags keep working) and does nothing. `disabled` (null for enable)
// receives the names.
// A flag's comma-separated list, each item trimmed; a whitespace-only item is an error.
std::string string_list(const std::string& value, std::vector<std::string>& out) {
  out.clear();
  std::size_t start = 0;
  while (start <= value.size()) {
    const auto comma = value.find(',', start);
    std::string item = value.substr(start, comma == std::string::npos ? std::string::npos
                                                                      : comma - start);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    if (first == std::string::npos) {
      if (!item.empty()) return "empty value in the list";
    } else {
      out.push_back(item.substr(first, last - first + 1));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return "";
}

std::string admission_plugins(const std::string& list, std::vector<std::string>* disabled) {
  static const std::vector<std::string_view> kKnown = {
      "AlwaysAdmit", "AlwaysDeny", "AlwaysPullImages", "CertificateApproval",
      "CertificateSigning", "CertificateSubjectRestriction", "ClusterTrustBundleAttest",
      "DefaultIngressClass", "DefaultStorageClass", "DefaultTolerationSeconds",
      "DenyServiceExternalIPs", "EventRateLimit", "ExtendedResourceToleration",
      "ImagePolicyWebhook", "LimitPodHardAntiAffinityTopology", "LimitRanger",
      "MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "NamespaceAutoProvision",
      "NamespaceExists", "NamespaceLifecycle", "NodeRestriction",
      "OwnerReferencesPermissionEnforcement", "PersistentVolumeClaimResize",
      "PersistentVolumeLabel", "PodNodeSelector", "PodSecurity", "PodTolerationRestriction",
      "Priority", "ResourceQuota", "RuntimeClass", "ServiceAccount",
      "StorageObjectInUseProtection", "TaintNodesByCondition", "ValidatingAdmissionPolicy",
      "ValidatingAdmissionWebhook"};
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    if (std::find(kKnown.begin(), kKnown.end(), name) == kKnown.end()) {
      return "plugin \"" + name + "\" is unknown";
    }
    if (disabled != nullptr) disabled->push_back(name);
  }
  return "";
}

struct Flag {
  std::string_view name;   // without the leading --
  std::string_view value;  // what its value looks like in --help ("N", "FILE", "D")
  std::string_view help;   // wrapped to the column --help prints it in
  Setter set;
};

// Every flag, in the order --help lists them: its name, what its value looks like, its help (one
// string, lines already wrapped) and how it sets `o`.
std::vector<Flag> flag_table(Options& o) {
  return {
      {"bind-address", "IP",
       "address to serve on (default 127.0.0.1)",
       [&](const std::string& v) -> std::string {
         boost::system::error_code ec;
         boost::asio::ip::make_address(v, ec);
         if (ec) return "invalid IP address";
         o.bind_address = v;
         return "";
       }},
      {"secure-port", "N",
       "port to serve HTTPS on (default 6443; 0: off)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned short>(v, o.secure_port, 0, 65535) ? "" : "must be 0-65535";
       }},
      {"port", "N",
       "also serve plain HTTP on this port (default: off; 0 picks a free\n"
       "port). No TLS, and no client certificates: for local development\n"
       "on loopback only",
       [&](const std::string& v) -> std::string {
         unsigned short port = 0;
         if (!parse_number<unsigned short>(v, port, 0, 65535)) return "must be 0-65535";
         o.port = port;
         return "";
       }},
      {"tls-cert-file", "FILE",
       "HTTPS certificate chain (PEM); with --tls-private-key-file",
       [&](const std::string& v) -> std::string {
         o.tls_cert_file = v;
         return "";
       }},
      {"tls-private-key-file", "FILE",
       "HTTPS private key (PEM)",
       [&](const std::string& v) -> std::string {
         o.tls_private_key_file = v;
         return "";
       }},
      {"cert-dir", "DIR",
       "without the two above, a self-signed CA and serving certificate\n"
       "are generated here on first start and reused (default\n"
       "/var/run/kubernetes); clients trust DIR/ca.crt",
       [&](const std::string& v) -> std::string {
         if (v.empty()) return "must not be empty";
         o.cert_dir = v;
         return "";
       }},
      {"client-ca-file", "FILE",
       "CA bundle (PEM) for client certificates: CN is the user, O the groups",
       [&](const std::string& v) -> std::string {
         o.client_ca_file = v;
         return "";
       }},
      {"token-auth-file", "FILE",
       "static bearer tokens: token,user,uid[,\"group1,group2\"] per line",
       [&](const std::string& v) -> std::string {
         o.token_auth_file = v;
         return "";
       }},
      {"service-account-issuer", "URL",
       "iss of the ServiceAccount tokens issued and accepted (default\n"
       "https://kubernetes.default.svc.cluster.local)",
       [&](const std::string& v) -> std::string {
         if (v.empty()) return "must not be empty";
         o.service_account_issuer = v;
         return "";
       }},
      {"service-account-signing-key-file", "FILE",
       "private key (PEM, RSA or ECDSA P-256) that signs them",
       [&](const std::string& v) -> std::string {
         o.service_account_signing_key_file = v;
         return "";
       }},
      {"service-account-key-file", "FILE",
       "public keys (PEM) that verify them; repeatable. Without either\n"
       "flag, a key is generated into --cert-dir (sa.key) and reused",
       // repeatable, as kube's
       [&](const std::string& v) -> std::string {
         if (v.empty()) return "must not be empty";
         o.service_account_key_files.push_back(v);
         return "";
       }},
      {"service-account-max-token-expiration", "D",
       "longest token a TokenRequest gets (default 0: no\n"
       "maximum; at least 1h)",
       [&](const std::string& v) -> std::string {
         auto d = parse_duration(v);
         if (!d || d->count() < 0) return "expected a duration such as 24h, or 0 for no maximum";
         if (d->count() > 0 && *d < std::chrono::hours(1)) return "must be at least 1h";
         o.service_account_max_token_expiration = *d;
         return "";
       }},
      {"api-audiences", "A,B",
       "audiences the API accepts tokens for (default: the issuer)",
       [&](const std::string& v) -> std::string {
         o.api_audiences.clear();
         std::size_t start = 0;
         while (start <= v.size()) {
           const std::size_t comma = std::min(v.find(',', start), v.size());
           if (comma > start) o.api_audiences.push_back(v.substr(start, comma - start));
           start = comma + 1;
         }
         return "";
       }},
      {"anonymous-auth", "BOOL",
       "requests without credentials act as system:anonymous (default false)",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.anonymous_auth) ? "" : "must be true or false";
       }},
      {"authorization-mode", "MODE",
       "RBAC (default: decided from the RBAC objects) or AlwaysAllow",
       [&](const std::string& v) -> std::string {
         if (v != "AlwaysAllow" && v != "RBAC") return "supported modes: AlwaysAllow, RBAC";
         o.authorization_mode = v;
         return "";
       }},
      {"enable-admission-plugins", "NAMES",
       "admission plugins to enable besides the defaults (comma-separated);\n"
       "kwatch's plugins are on by default: NamespaceLifecycle,\n"
       "MutatingAdmissionPolicy, MutatingAdmissionWebhook,\n"
       "ValidatingAdmissionPolicy, ValidatingAdmissionWebhook",
       [&](const std::string& v) -> std::string { return admission_plugins(v, nullptr); }},
      {"disable-admission-plugins", "NAMES",
       "admission plugins to turn off (comma-separated):\n"
       "MutatingAdmissionPolicy, MutatingAdmissionWebhook,\n"
       "ValidatingAdmissionPolicy, ValidatingAdmissionWebhook",
       [&](const std::string& v) -> std::string {
         return admission_plugins(v, &o.disabled_admission_plugins);
       }},
      {"requestheader-client-ca-file", "FILE",
       "CA bundle (PEM) that signs the client certificates of front proxies\n"
       "(aggregators) allowed to name the user of a request in the\n"
       "--requestheader-*-headers; kept apart from --client-ca-file",
       [&](const std::string& v) -> std::string {
         o.requestheader_client_ca_file = v;
         return "";
       }},
      {"requestheader-allowed-names", "NAMES",
       "the common names a front proxy's certificate may have (comma-separated;\n"
       "empty: any certificate the request header CA signs)",
       [&](const std::string& v) -> std::string {
         return string_list(v, o.request_header.allowed_names);
       }},
      {"requestheader-username-headers", "HEADERS",
       "headers a front proxy names the user in, the first set one wins\n"
       "(X-Remote-User is common)",
       [&](const std::string& v) -> std::string {
         return string_list(v, o.request_header.username_headers);
       }},
      {"requestheader-uid-headers", "HEADERS",
       "headers a front proxy names the user's uid in (X-Remote-Uid is common)",
       [&](const std::string& v) -> std::string {
         return string_list(v, o.request_header.uid_headers);
       }},
      {"requestheader-group-headers", "HEADERS",
       "headers a front proxy names the user's groups in (X-Remote-Group is\n"
       "suggested)",
       [&](const std::string& v) -> std::string {
         return string_list(v, o.request_header.group_headers);
       }},
      {"requestheader-extra-headers-prefix", "PREFIXES",
       "header prefixes a front proxy names the user's extra attributes with\n"
       "(X-Remote-Extra- is suggested)",
       [&](const std::string& v) -> std::string {
         return string_list(v, o.request_header.extra_prefixes);
       }},
      {"authentication-kubeconfig", "FILE",
       "kubeconfig of the API server this one delegates authentication to (as\n"
       "an extension API server): bearer tokens this server does not know are\n"
       "judged there by TokenReviews, and its published\n"
       "extension-apiserver-authentication ConfigMap is read at start-up",
       [&](const std::string& v) -> std::string {
         o.authentication_kubeconfig = v;
         return "";
       }},
      {"authorization-kubeconfig", "FILE",
       "kubeconfig of the API server this one delegates authorization to: what\n"
       "RBAC here does not allow is decided there by SubjectAccessReviews\n"
       "(needs --authorization-mode=RBAC)",
       [&](const std::string& v) -> std::string {
         o.authorization_kubeconfig = v;
         return "";
       }},
      {"authentication-token-webhook-cache-ttl", "DURATION",
       "how long delegated token reviews are remembered (default 10s; 0: not)",
       non_negative_duration(o.authentication_token_webhook_cache_ttl, "10s")},
      {"authorization-webhook-cache-authorized-ttl", "DURATION",
       "how long delegated 'allowed' decisions are remembered (default 10s)",
       non_negative_duration(o.authorization_webhook_cache_authorized_ttl, "10s")},
      {"authorization-webhook-cache-unauthorized-ttl", "DURATION",
       "how long delegated other decisions are remembered (default 10s)",
       non_negative_duration(o.authorization_webhook_cache_unauthorized_ttl, "10s")},
      {"authentication-skip-lookup", "BOOL",
       "do not read extension-apiserver-authentication from the server named\n"
       "by --authentication-kubeconfig (default false)",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.authentication_skip_lookup) ? "" : "must be true or false";
       }},
      {"authentication-tolerate-lookup-failure", "BOOL",
       "start even when extension-apiserver-authentication cannot be read\n"
       "(default false: a failure to read it stops start-up)",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.authentication_tolerate_lookup_failure) ? ""
                                                                        : "must be true or false";
       }},
      {"root-ca-file", "FILE",
       "the CA bundle (PEM) published as ca.crt of the ConfigMap kube-root-ca.crt\n"
       "in every namespace, as kube-controller-manager's flag of that name does\n"
       "(default: the CA kwatch makes for its own serving certificate; none when\n"
       "--tls-cert-file is given without it)",
       [&](const std::string& v) -> std::string {
         o.root_ca_file = v;
         return "";
       }},
      {"cluster-signing-cert-file", "FILE",
       "the CA certificate (PEM) that signs approved CertificateSigningRequests\n"
       "for kubernetes.io/kube-apiserver-client and\n"
       "kubernetes.io/kube-apiserver-client-kubelet, as kube-controller-manager's\n"
       "signer does; with --cluster-signing-key-file (none: nothing is signed)",
       [&](const std::string& v) -> std::string {
         o.cluster_signing_cert_file = v;
         return "";
       }},
      {"cluster-signing-key-file", "FILE", "the key of --cluster-signing-cert-file (PEM)",
       [&](const std::string& v) -> std::string {
         o.cluster_signing_key_file = v;
         return "";
       }},
      {"cluster-signing-duration", "DURATION",
       "the longest validity of a signed certificate (default 8760h0m0s); a request's\n"
       "spec.expirationSeconds may ask for less",
       positive_duration(o.cluster_signing_duration, "8760h")},
      {"proxy-client-cert-file", "FILE",
       "the client certificate (PEM) kwatch presents to extension API servers\n"
       "when it passes them requests for their APIServices; with\n"
       "--proxy-client-key-file",
       [&](const std::string& v) -> std::string {
         o.proxy_client_cert_file = v;
         return "";
       }},
      {"proxy-client-key-file", "FILE", "the key of --proxy-client-cert-file (PEM)",
       [&](const std::string& v) -> std::string {
         o.proxy_client_key_file = v;
         return "";
       }},
      {"unsafe-webhook-loopback-endpoints", "BOOL",
       "DEVELOPMENT ONLY (default false): let a webhook or an aggregated\n"
       "APIService named by a Service be called at an endpoint in the loopback\n"
       "range, which kwatch otherwise\n"
       "refuses (as kube refuses such endpoints) so that a Service cannot point\n"
       "the server at itself or its host's local ports. For tests that run the\n"
       "webhook on 127.0.0.1; never set it in production",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.unsafe_webhook_loopback_endpoints) ? "" : "must be true or false";
       }},
      {"enable-garbage-collector", "BOOL",
       "run the garbage collector, which deletes objects whose\n"
       "ownerReferences name owners that are gone and carries out\n"
       "propagationPolicy Orphan and Foreground (default true)",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.enable_garbage_collector) ? "" : "must be true or false";
       }},
      {"service-cluster-ip-range", "CIDRs",
       "range Services' cluster IPs are allocated from: one IPv4 or IPv6 CIDR, or\n"
       "two of different families for dual-stack Services (default 10.0.0.0/24; the\n"
       "first range's first address is the kubernetes Service's)",
       [&](const std::string& v) -> std::string {
         std::string error;
         if (!registry::parse_service_cidr(v, {}, &error)) return error;
         o.service_cluster_ip_range = v;
         return "";
       }},
      {"service-node-port-range", "A-B",
       "ports NodePort Services get (default 30000-32767)",
       [&](const std::string& v) -> std::string {
         if (!registry::parse_node_port_range(v)) return "must be a port range such as 30000-32767";
         o.service_node_port_range = v;
         return "";
       }},
      {"enable-priority-and-fairness", "BOOL",
       "API Priority and Fairness (default true): requests are classified by\n"
       "FlowSchemas and share the server's seats (--max-requests-inflight plus\n"
       "--max-mutating-requests-inflight) among PriorityLevelConfigurations,\n"
       "queueing fairly; false: the two limits apply as they are",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.enable_priority_and_fairness) ? "" : "must be true or false";
       }},
      {"max-requests-inflight", "N",
       "read-only requests served at once before 429 (default 400; 0: no\n"
       "limit); watches count only while being set up, system:masters never.\n"
       "With priority and fairness, part of the server's seats",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.max_requests_inflight, 0, 1'000'000) ? "" : "must be 0-1000000";
       }},
      {"max-mutating-requests-inflight", "N",
       "the same for writes (default 200)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.max_mutating_requests_inflight, 0, 1'000'000)
                    ? ""
                    : "must be 0-1000000";
       }},
      {"max-watches-per-user", "N",
       "open watches one user may hold (default 10000; 0: no limit)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.max_watches_per_user, 0, 10'000'000) ? "" : "must be 0-10000000";
       }},
      {"max-connections", "N",
       "open connections (watches included) in all; one more is closed as\n"
       "it is accepted (default 0: no cap)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.max_connections, 0, 10'000'000) ? "" : "must be 0-10000000";
       }},
      {"max-connections-per-ip", "N",
       "the same for one client address (default 0: no cap; behind a load\n"
       "balancer every client shares its address)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.max_connections_per_ip, 0, 10'000'000) ? "" : "must be 0-10000000";
       }},
      {"http2-max-streams-per-connection", "N",
       "the limit the server gives HTTP/2 clients on concurrent streams in one\n"
       "connection (default 0: 100, what Go clients assume before they learn it)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.http2_max_streams_per_connection, 0, 1'000'000)
                    ? ""
                    : "must be 0-1000000";
       }},
      {"disable-http2-serving", "BOOL",
       "serve HTTP/1.1 only on the secure port (default false: h2 for clients\n"
       "that offer it by ALPN)",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.disable_http2_serving) ? "" : "must be true or false";
       }},
      {"mutating-queue-length", "N",
       "writes that may wait for a seat when all are taken (default 200;\n"
       "0: refuse at once); more are refused with 429 and Retry-After",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.mutating_queue_length, 0, 1'000'000) ? "" : "must be 0-1000000";
       }},
      {"mutating-queue-wait", "DURATION",
       "how long a write waits for a seat before 429 (default 10s)",
       positive_duration(o.mutating_queue_wait, "10s")},
      {"watches-per-seat", "N",
       "a write keeps ceil(watchers/N) seats, at most --max-fanout-seats,\n"
       "until the watch cache has delivered its event (default 10)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.watches_per_seat, 1, 1'000'000) ? "" : "must be 1-1000000";
       }},
      {"max-fanout-seats", "N",
       "most seats one write's fan-out keeps (default 10; 0: fan-out costs\n"
       "no seats)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.max_fanout_seats, 0, 1'000'000) ? "" : "must be 0-1000000";
       }},
      {"storage-backend", "NAME",
       "\"memory\" (embedded MVCC store, default) or \"etcd3\"",
       [&](const std::string& v) -> std::string {
         if (v != "memory" && v != "etcd3") {
           return "unsupported storage backend (supported: memory, etcd3)";
         }
         o.storage_backend = v;
         return "";
       }},
      {"etcd-servers", "URLS",
       "etcd endpoints, comma-separated (default http://127.0.0.1:2379)",
       [&](const std::string& v) -> std::string {
         o.etcd_servers.clear();
         std::size_t start = 0;
         for (;;) {
           auto comma = v.find(',', start);
           std::string url = v.substr(start, comma == std::string::npos ? std::string::npos
                                                                      : comma - start);
           if (!url.starts_with("http://") && !url.starts_with("https://")) {
             return "expected http(s)://host:port[,http(s)://host:port...]";
           }
           o.etcd_servers.push_back(url);
           if (comma == std::string::npos) break;
           start = comma + 1;
         }
         return "";
       }},
      {"etcd-prefix", "PATH",
       "key prefix of every object (default /registry; also for memory)",
       [&](const std::string& v) -> std::string {
         if (v.empty() || v[0] != '/' || (v.size() > 1 && v.back() == '/')) {
           return "must start with / and not end with /";
         }
         o.etcd_prefix = v;
         return "";
       }},
      {"etcd-cafile", "FILE",
       "TLS to etcd (https endpoints): CA bundle (PEM)",
       [&](const std::string& v) -> std::string { o.etcd_cafile = v; return ""; }},
      {"etcd-certfile", "FILE",
       "TLS to etcd (https endpoints): client certificate (PEM)",
       [&](const std::string& v) -> std::string { o.etcd_certfile = v; return ""; }},
      {"etcd-keyfile", "FILE",
       "TLS to etcd (https endpoints): client key (PEM)",
       [&](const std::string& v) -> std::string { o.etcd_keyfile = v; return ""; }},
      {"etcd-compaction-interval", "D",
       "compact storage history every D (default 5m; 0 disables)",
       [&](const std::string& v) -> std::string {
         auto d = parse_duration(v);
         if (!d) return "expected a duration such as 5m or 0 to disable";
         o.compaction_interval = *d;
         return "";
       }},
      {"etcd-healthcheck-timeout", "D",
       "how long /livez and /healthz wait for storage (default 2s)",
       positive_duration(o.etcd_healthcheck_timeout, "2s")},
      {"etcd-readycheck-timeout", "D",
       "how long /readyz waits for storage (default 2s)",
       positive_duration(o.etcd_readycheck_timeout, "2s")},
      {"data-dir", "DIR",
       "persist the embedded store in DIR (default: empty, in memory only)",
       [&](const std::string& v) -> std::string {
         o.data_dir = v;
         return "";
       }},
      {"data-dir-fsync", "BOOL",
       "fdatasync every write before acknowledging it (default true)",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.fsync) ? "" : "must be true or false";
       }},
      {"data-dir-snapshot-bytes", "N",
       "snapshot once the log exceeds N bytes (default 64Mi; 0: never)",
       [&](const std::string& v) -> std::string {
         return parse_number<std::uint64_t>(v, o.snapshot_bytes, 0, std::uint64_t{1} << 40)
                    ? ""
                    : "must be 0-1099511627776";
       }},
      {"io-threads", "N",
       "threads serving I/O (default: number of cores)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.io_threads, 1, 1024) ? "" : "must be 1-1024";
       }},
      {"delivery-threads", "N",
       "threads writing watch events, apart from the I/O threads\n"
       "(default: number of cores; 0: the I/O threads write them)",
       [&](const std::string& v) -> std::string {
         unsigned n = 0;
         if (!parse_number<unsigned>(v, n, 0, 1024)) return "must be 0-1024";
         o.delivery_threads = n;
         return "";
       }},
      {"delivery-nice", "N",
       "nice value of the delivery threads, 0-19 (default 0); higher:\n"
       "requests run first when both are ready, events wait longer",
       [&](const std::string& v) -> std::string {
         return parse_number<int>(v, o.delivery_nice, 0, 19) ? "" : "must be 0-19";
       }},
      {"low-priority-threads", "N",
       "threads at nice 19 serving the connections of priority levels annotated\n"
       "flowcontrol.kwatch.io/cpu-priority=low (default: half the I/O threads,\n"
       "at least 1; 0: those run on the I/O threads)",
       [&](const std::string& v) -> std::string {
         unsigned n = 0;
         if (!parse_number<unsigned>(v, n, 0, 1024)) return "must be 0-1024";
         o.low_priority_threads = n;
         return "";
       }},
      {"log-level", "LEVEL",
       "trace, debug, info, warn, error (default info)",
       [&](const std::string& v) -> std::string {
         if (v != "trace" && v != "debug" && v != "info" && v != "warn" && v != "error" &&
             v != "off") {
           return "must be one of trace, debug, info, warn, error, off";
         }
         o.log_level = v;
         return "";
       }},
      {"default-watch-cache-size", "N",
       "initial and smallest event window per resource (default 100)",
       [&](const std::string& v) -> std::string {
         return parse_number<std::size_t>(v, o.default_watch_cache_size, 1, 1'000'000)
                    ? ""
                    : "must be 1-1000000";
       }},
      {"watch-cache-sizes", "RES#N,...",
       "fix the event window of these resources at N events",
       [&](const std::string& v) -> std::string {
         std::size_t start = 0;
         while (start <= v.size()) {
           auto comma = v.find(',', start);
           std::string item = v.substr(start, comma == std::string::npos ? std::string::npos
                                                                       : comma - start);
           auto hash = item.find('#');
           std::size_t size = 0;
           if (hash == std::string::npos || hash == 0 ||
               !parse_number<std::size_t>(item.substr(hash + 1), size, 1, 1'000'000)) {
             return "expected resource#size[,resource#size...]";
           }
           o.watch_cache_sizes[item.substr(0, hash)] = size;
           if (comma == std::string::npos) break;
           start = comma + 1;
         }
         return "";
       }},
      {"watch-bookmark-interval", "D",
       "period of watch bookmarks, e.g. 60s, 500ms (default 60s)",
       positive_duration(o.watch_bookmark_interval, "60s or 500ms")},
      {"shutdown-delay-duration", "D",
       "after SIGTERM, /readyz fails and requests are still served\n"
       "for D before the listeners close (default 3s; kube's is 0)",
       [&](const std::string& v) -> std::string {
         auto d = parse_duration(v);
         if (!d || d->count() < 0) return "expected a duration such as 3s, or 0";
         o.shutdown_delay = *d;
         return "";
       }},
      {"shutdown-grace-period", "D",
       "after SIGTERM, in-flight requests and watch streams get until\n"
       "D to end cleanly; then the rest is cut off (default 25s)",
       positive_duration(o.shutdown_grace_period, "25s")},
      {"min-request-timeout", "SECONDS",
       "watches without timeoutSeconds last this x (1 + rand) (default 1800)",
       [&](const std::string& v) -> std::string {
         unsigned n = 0;
         if (!parse_number<unsigned>(v, n, 1, 86'400)) return "must be 1-86400 seconds";
         o.min_request_timeout = std::chrono::seconds(n);
         return "";
       }},
      {"audit-log-path", "FILE",
       "write an audit event (audit.k8s.io/v1, level Metadata) per request\n"
       "to FILE, \"-\" for standard output (default: off)",
       [&](const std::string& v) -> std::string {
         o.audit_log_path = v;
         return "";
       }},
      {"audit-log-maxsize", "MB",
       "rotate the audit log past MB megabytes (default 0: never)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.audit_log_maxsize_mb, 0, 1'000'000) ? ""
                                                                                  : "must be 0-1000000";
       }},
      {"audit-log-maxbackup", "N",
       "rotated audit logs kept (default 0: all)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.audit_log_maxbackup, 0, 1'000'000) ? ""
                                                                                 : "must be 0-1000000";
       }},
      {"audit-log-maxage", "DAYS",
       "rotated audit logs removed after DAYS days (default 0: never)",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.audit_log_maxage_days, 0, 100'000) ? ""
                                                                                 : "must be 0-100000";
       }},
      {"encryption-provider-config", "FILE",
       "encrypt resources at rest as this EncryptionConfiguration\n"
       "(YAML or JSON; providers aesgcm, aescbc, identity) says (default: off)",
       [&](const std::string& v) -> std::string {
         if (v.empty()) return "must not be empty";
         o.encryption_provider_config = v;
         return "";
       }},
  };
}

constexpr std::size_t kHelpColumn = 29;

}  // namespace

std::string usage() {
  std::string out =
      "kwatch-apiserver: a Kubernetes-compatible API server with a high-performance watch "
      "cache.\n\nUsage: kwatch-apiserver [flags]\n\nFlags:\n";
  Options scratch;
  auto rows = flag_table(scratch);
  rows.push_back({"help", "", "print this help and exit", nullptr});
  rows.push_back({"version", "", "print the version and exit", nullptr});
  for (const auto& flag : rows) {
    std::string head = "  --" + std::string(flag.name);
    if (!flag.value.empty()) head += "=" + std::string(flag.value);
    head.append(head.size() + 2 > kHelpColumn ? 2 : kHelpColumn - head.size(), ' ');
    out += head;
    std::string_view help = flag.help;
    for (bool first = true; !help.empty(); first = false) {
      const std::size_t end = std::min(help.find('\n'), help.size());
      if (!first) out.append(kHelpColumn, ' ');
      out.append(help.substr(0, end));
      out += '\n';
      help.remove_prefix(std::min(end + 1, help.size()));
    }
  }
  return out;
}

std::vector<std::string> flag_names() {
  Options scratch;
  std::vector<std::string> names;
  for (const auto& flag : flag_table(scratch)) names.emplace_back(flag.name);
  return names;
}

ParseOutcome parse_options(const std::vector<std::string>& args) {
  Options o;
  std::map<std::string_view, Setter> flags;
  for (auto& flag : flag_table(o)) flags.emplace(flag.name, std::move(flag.set));
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") return ParseHelp{};
    if (arg == "--version") return ParseVersion{};
    if (arg.rfind("--", 0) != 0) return ParseError{"unexpected argument: " + arg};
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags.find(name);
    if (it == flags.end()) return ParseError{"unknown flag: --" + name};
    if (!has_value) {
      if (i + 1 >= args.size()) return ParseError{"flag needs a value: --" + name};
      value = args[++i];
    }
    if (auto err = it->second(value); !err.empty()) {
      return ParseError{"invalid value \"" + value + "\" for --" + name + ": " + err};
    }
  }
  if (!o.port && o.secure_port == 0) {
    return ParseError{"nothing to serve: --secure-port=0 and no --port"};
  }
  if (o.cluster_signing_cert_file.empty() != o.cluster_signing_key_file.empty()) {
    return ParseError{"--cluster-signing-cert-file and --cluster-signing-key-file go together"};
  }
  if (o.proxy_client_cert_file.empty() != o.proxy_client_key_file.empty()) {
    return ParseError{"--proxy-client-cert-file and --proxy-client-key-file go together"};
  }
  if (!o.authorization_kubeconfig.empty() && o.authorization_mode != "RBAC") {
    return ParseError{"--authorization-kubeconfig needs --authorization-mode=RBAC (AlwaysAllow "
                      "would allow every request before the other server is asked)"};
  }
  if (o.tls_cert_file.empty() != o.tls_private_key_file.empty()) {
    return ParseError{"--tls-cert-file and --tls-private-key-file go together"};
  }
  if (o.shutdown_grace_period <= o.shutdown_delay) {
    return ParseError{"--shutdown-grace-period must be longer than --shutdown-delay-duration"};
  }
  return o;
}

}  // namespace kwatch::app
