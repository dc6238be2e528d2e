// kube-apiserver's self-signed serving certificate. Without --tls-cert-file and
// --tls-private-key-file, a CA and a serving certificate signed by it are generated into
// --cert-dir on first start and reused on later starts, so that clients configured with the CA
// (kubectl's certificate-authority) keep trusting the server across restarts. Files:
// `ca.crt` (the CA certificate, what clients trust), `ca.key`, `apiserver.crt` (the serving
// certificate followed by the CA's, as a chain) and `apiserver.key`; keys 0600, the directory
// 0700. Keys are ECDSA P-256; the serving certificate is valid for one year, the CA for ten, and
// both are made anew when the serving certificate lacks a requested host or expires within
// 30 days.
//
// Pure file and OpenSSL work: no Asio. Call at start-up, from one thread.
#pragma once

#include <boost/system/result.hpp>

#include <string>
#include <vector>

namespace kwatch::server {

struct ServingCertificate {
  std::string ca_file;    // what clients trust
  std::string cert_file;  // the chain the server presents
  std::string key_file;
  bool generated = false;  // made now (false: found and reused)
};

// `hosts`: DNS names and IP addresses (v4 or v6) the certificate must name, e.g. "localhost",
// "127.0.0.1", the --advertise-address. Errors are messages naming the file or the step.
boost::system::result<ServingCertificate, std::string> ensure_self_signed_certificate(
    const std::string& cert_dir, const std::vector<std::string>& hosts);

}  // namespace kwatch::server
