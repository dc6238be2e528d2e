#include "kinds/certificate_signing_request.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "base/base64.hpp"
#include "base/openssl_files.hpp"
#include "base/timestamps.hpp"
#include "kinds/field_errors.hpp"

#include <boost/json/array.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>

namespace kwatch::kinds {

namespace json = boost::json;
namespace fe = field_errors;
using apimachinery::object_member;
using apimachinery::string_member;

namespace {

constexpr std::string_view kLegacyUnknownSigner = "kubernetes.io/legacy-unknown";

// kube's KeyUsage values, sorted as its "supported values" list prints them.
constexpr std::string_view kUsages[] = {
    "any",           "cert sign",        "client auth",       "code signing",
    "content commitment", "crl sign",    "data encipherment", "decipher only",
    "digital signature", "email protection", "encipher only", "ipsec end system",
    "ipsec tunnel",  "ipsec user",       "key agreement",     "key encipherment",
    "microsoft sgc", "netscape sgc",     "ocsp signing",      "s/mime",
    "server auth",   "signing",          "timestamping"};

// The bytes of a `format: byte` field (base64 in JSON); nullopt when absent or not base64.
std::optional<std::string> bytes_at(const json::object* obj, std::string_view key) {
  const json::value* v = obj != nullptr ? obj->if_contains(key) : nullptr;
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return base::base64_decode(v->get_string());
}

// Go's %#v of a []byte: []byte{0x2d, 0x2d}.
std::string go_bytes(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "[]byte{";
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i > 0) out += ", ";
    const auto c = static_cast<unsigned char>(bytes[i]);
    out += "0x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  out += "}";
  return out;
}

// The conditions of a request, in order.
std::vector<const json::object*> conditions_of(const json::object& csr) {
  std::vector<const json::object*> out;
  if (const json::array* list = apimachinery::array_member(object_member(csr, "status"), "conditions")) {
    for (const auto& c : *list) {
      if (const json::object* o = c.if_object()) out.push_back(o);
    }
  }
  return out;
}

std::vector<json::object> conditions_of_type(const json::object& csr, std::string_view type) {
  std::vector<json::object> out;
  for (const json::object* c : conditions_of(csr)) {
    if (string_member(c, "type") == type) out.push_back(*c);
  }
  return out;
}

// The dot-separated labels of a signer name's `part`, each checked by `errors_of` until the
// first that fails, whose errors are reported (kube stops there: the rest would repeat them).
void check_labels(const std::string& part, std::vector<std::string> (*errors_of)(std::string_view),
                  Causes& causes) {
  for (std::size_t start = 0;;) {
    const auto dot = part.find('.', start);
    const std::string label =
        part.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const auto errors = errors_of(label);
    for (const auto& e : errors) {
      fe::invalid(causes, "spec.signerName", apimachinery::go_quote(part),
                  "validating label " + apimachinery::go_quote(label) + ": " + e);
    }
    if (!errors.empty() || dot == std::string::npos) return;
    start = dot + 1;
  }
}

// kube's ValidateCertificateSigningRequestSignerName.
void validate_signer_name(const std::string& signer, Causes& causes) {
  const std::string path = "spec.signerName";
  if (signer.empty()) {
    fe::required(causes, path, "signerName must be provided");
    return;
  }
  const auto slash = signer.find('/');
  if (slash == std::string::npos || signer.find('/', slash + 1) != std::string::npos) {
    fe::invalid(causes, path, apimachinery::go_quote(signer),
                "must be a fully qualified domain and path of the form 'example.com/signer-name'");
    return;
  }
  const std::string domain = signer.substr(0, slash);
  const std::string rest = signer.substr(slash + 1);
  constexpr std::size_t kSubdomainMax = 253;
  constexpr std::size_t kLabelMax = 63;
  if (domain.size() > kSubdomainMax) {
    fe::invalid(causes, path, apimachinery::go_quote(domain),
                "must have at most " + std::to_string(kSubdomainMax) + " bytes");
  }
  check_labels(domain, apimachinery::dns1123_label_errors, causes);
  if (std::count(domain.begin(), domain.end(), '.') == 0) {
    fe::invalid(causes, path, apimachinery::go_quote(domain),
                "should be a domain with at least two segments separated by dots");
  }
  check_labels(rest, apimachinery::dns1123_subdomain_errors, causes);
  const std::size_t max = kSubdomainMax + (kSubdomainMax + kLabelMax + 1) + 1;
  if (signer.size() > max) {
    fe::invalid(causes, path, apimachinery::go_quote(signer),
                "must have at most " + std::to_string(max) + " bytes");
  }
}

// kube's validateCertificate: "" when `pem` is only CERTIFICATE blocks that parse.
std::string certificate_problem(const std::string& pem) {
  if (pem.empty()) return "";
  std::size_t blocks = 0;
  std::string_view rest = pem;
  while (true) {
    const auto begin = rest.find("-----BEGIN ");
    if (begin == std::string_view::npos) break;
    const auto type_end = rest.find("-----", begin + 11);
    if (type_end == std::string_view::npos) break;
    const std::string type(rest.substr(begin + 11, type_end - begin - 11));
    const std::string end_marker = "-----END " + type + "-----";
    const auto end = rest.find(end_marker, type_end);
    if (end == std::string_view::npos) break;
    if (type != "CERTIFICATE") return "only CERTIFICATE PEM blocks are allowed, found \"" + type + "\"";
    const std::string_view block = rest.substr(begin, end + end_marker.size() - begin);
    if (block.find(':') != std::string_view::npos) return "no PEM block headers are permitted";
    base::openssl::Bio bio(BIO_new_mem_buf(block.data(), static_cast<int>(block.size())));
    base::openssl::Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    ERR_clear_error();
    if (!cert) return "x509: malformed certificate";
    ++blocks;
    rest = rest.substr(end + end_marker.size());
  }
  if (blocks == 0) return "must contain at least one CERTIFICATE PEM block";
  return "";
}

// populateConditionTimestamps: lastUpdateTime now when unset; lastTransitionTime, when unset,
// that of the stored condition of the same type and status, else now.
void stamp_conditions(json::object& csr, const json::object& old) {
  json::value* status = csr.if_contains("status");
  json::value* list = status != nullptr && status->is_object()
                          ? status->get_object().if_contains("conditions")
                          : nullptr;
  if (list == nullptr || !list->is_array()) return;
  const std::string now = base::now_rfc3339();
  const auto old_conditions = conditions_of(old);
  for (auto& c : list->get_array()) {
    json::object* o = c.if_object();
    if (o == nullptr) continue;
    const auto unset = [&](std::string_view key) {
      const json::value* v = o->if_contains(key);
      return v == nullptr || v->is_null() || (v->is_string() && v->get_string().empty());
    };
    if (unset("lastUpdateTime")) (*o)["lastUpdateTime"] = now;
    if (unset("lastTransitionTime")) {
      std::string at = now;
      for (const json::object* before : old_conditions) {
        if (string_member(before, "type") == string_member(o, "type") &&
            string_member(before, "status") == string_member(o, "status") &&
            !string_member(before, "lastTransitionTime").empty()) {
          at = std::string(string_member(before, "lastTransitionTime"));
        }
      }
      (*o)["lastTransitionTime"] = at;
    }
  }
}

}  // namespace

void prepare_csr_for_create(json::object& csr) { csr["status"] = json::object(); }

void record_csr_requester(json::object& csr, const apimachinery::UserInfo& user) {
  json::value& spec_value = csr["spec"];
  if (!spec_value.is_object()) spec_value = json::object();
  json::object& spec = spec_value.get_object();
  for (const char* field : {"username", "uid", "groups", "extra"}) spec.erase(field);
  if (!user.name.empty()) spec["username"] = user.name;
  if (!user.uid.empty()) spec["uid"] = user.uid;
  if (!user.groups.empty()) {
    json::array groups;
    for (const auto& g : user.groups) groups.push_back(json::string(g));
    spec["groups"] = std::move(groups);
  }
  if (!user.extra.empty()) {
    json::object extra;
    for (const auto& [key, values] : user.extra) {
      json::array list;
      for (const auto& v : values) list.push_back(json::string(v));
      extra[key] = std::move(list);
    }
    spec["extra"] = std::move(extra);
  }
}

void keep_csr_owned_fields(json::object& csr, const json::object& old,
                           std::string_view subresource) {
  if (const json::value* spec = old.if_contains("spec")) {
    csr["spec"] = *spec;
  } else {
    csr.erase("spec");
  }
  if (subresource == "approval") {
    // Only the conditions: the certificate stays what it was.
    json::value& status = csr["status"];
    if (!status.is_object()) status = json::object();
    const json::object* old_status = object_member(old, "status");
    const json::value* certificate =
        old_status != nullptr ? old_status->if_contains("certificate") : nullptr;
    if (certificate != nullptr) {
      status.get_object()["certificate"] = *certificate;
    } else {
      status.get_object().erase("certificate");
    }
  }
  if (subresource == "approval" || subresource == "status") stamp_conditions(csr, old);
}

CertificateRequest read_certificate_request(const json::object& csr) {
  CertificateRequest out;
  const auto bytes = bytes_at(object_member(csr, "spec"), "request");
  if (!bytes) {
    out.error = "PEM block type must be CERTIFICATE REQUEST";
    return out;
  }
  out.pem = *bytes;
  // pem.Decode: the first block, which must be a certificate request.
  constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE REQUEST-----";
  const auto begin = out.pem.find("-----BEGIN ");
  if (begin == std::string::npos || std::string_view(out.pem).substr(begin, kBegin.size()) != kBegin) {
    out.error = "PEM block type must be CERTIFICATE REQUEST";
    return out;
  }
  base::openssl::Bio bio(
      BIO_new_mem_buf(out.pem.data() + begin, static_cast<int>(out.pem.size() - begin)));
  base::openssl::Request req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!req) {
    out.error = "x509: malformed certificate request";
    return out;
  }
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());
  if (key == nullptr || X509_REQ_verify(req.get(), key) != 1) {
    ERR_clear_error();
    const int id = key != nullptr ? EVP_PKEY_get_base_id(key) : 0;
    out.error = id == EVP_PKEY_EC        ? "x509: ECDSA verification failure"
                : id == EVP_PKEY_ED25519 ? "x509: Ed25519 verification failure"
                                         : "crypto/rsa: verification error";
    return out;
  }
  X509_NAME* subject = X509_REQ_get_subject_name(req.get());
  for (int i = 0; i < X509_NAME_entry_count(subject); ++i) {
    X509_NAME_ENTRY* entry = X509_NAME_get_entry(subject, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(entry));
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(entry);
    std::string value(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                      static_cast<std::size_t>(ASN1_STRING_length(data)));
    if (nid == NID_commonName) out.common_name = std::move(value);
    if (nid == NID_organizationName) out.organizations.push_back(std::move(value));
  }
  STACK_OF(X509_EXTENSION)* extensions = X509_REQ_get_extensions(req.get());
  for (int i = 0; extensions != nullptr && i < sk_X509_EXTENSION_num(extensions); ++i) {
    const ASN1_OBJECT* id = X509_EXTENSION_get_object(sk_X509_EXTENSION_value(extensions, i));
    out.alternative_names = out.alternative_names || OBJ_obj2nid(id) == NID_subject_alt_name;
  }
  sk_X509_EXTENSION_pop_free(extensions, X509_EXTENSION_free);
  return out;
}

bool csr_has_condition(const json::object& csr, std::string_view type) {
  for (const json::object* c : conditions_of(csr)) {
    if (string_member(c, "type") == type) return true;
  }
  return false;
}

void validate_csr(const json::object& csr, const json::object* old, Causes& causes) {
  (void)old;
  const json::object* spec = object_member(csr, "spec");
  if (const auto request = read_certificate_request(csr); !request.error.empty()) {
    const auto bytes = bytes_at(spec, "request");
    fe::invalid(causes, "spec.request", go_bytes(bytes.value_or("")), request.error);
  }
  const std::vector<std::string> usages = fe::string_items(spec, "usages");
  if (usages.empty()) fe::required(causes, "spec.usages", "usages must be provided");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < usages.size(); ++i) {
    const std::string path = fe::index("spec.usages", i);
    if (std::find(std::begin(kUsages), std::end(kUsages), usages[i]) == std::end(kUsages)) {
      fe::not_supported(causes, path, usages[i],
                        {kUsages[0], kUsages[1], kUsages[2], kUsages[3], kUsages[4], kUsages[5],
                         kUsages[6], kUsages[7], kUsages[8], kUsages[9], kUsages[10], kUsages[11],
                         kUsages[12], kUsages[13], kUsages[14], kUsages[15], kUsages[16],
                         kUsages[17], kUsages[18], kUsages[19], kUsages[20], kUsages[21],
                         kUsages[22]});
    }
    if (!seen.insert(usages[i]).second) fe::duplicate(causes, path, apimachinery::go_quote(usages[i]));
  }
  const std::string signer(string_member(spec, "signerName"));
  if (signer == kLegacyUnknownSigner) {
    fe::invalid(causes, "spec.signerName", apimachinery::go_quote(signer),
                "the legacy signerName is not allowed via this API version");
  } else {
    validate_signer_name(signer, causes);
  }
  if (const json::value* seconds = spec != nullptr ? spec->if_contains("expirationSeconds") : nullptr;
      seconds != nullptr && seconds->is_int64() && seconds->get_int64() < 600) {
    fe::invalid(causes, "spec.expirationSeconds", std::to_string(seconds->get_int64()),
                "may not specify a duration less than 600 seconds (10 minutes)");
  }
  // The conditions: a type each, once; Approved, Denied and Failed only True; not both
  // Approved and Denied.
  std::set<std::string> types;
  bool approved = false;
  bool denied = false;
  const auto conditions = conditions_of(csr);
  for (std::size_t i = 0; i < conditions.size(); ++i) {
    const std::string path = fe::index("status.conditions", i);
    const std::string type(string_member(conditions[i], "type"));
    const std::string status(string_member(conditions[i], "status"));
    if (type.empty()) fe::required(causes, path + ".type");
    const bool true_only = type == "Approved" || type == "Denied" || type == "Failed";
    if (status.empty()) {
      fe::required(causes, path + ".status");
    } else if (true_only && status != "True") {
      fe::not_supported(causes, path + ".status", status, {"True"});
    } else if (!true_only && status != "True" && status != "False" && status != "Unknown") {
      fe::not_supported(causes, path + ".status", status, {"False", "True", "Unknown"});
    }
    if ((type == "Approved" && denied) || (type == "Denied" && approved)) {
      fe::invalid(causes, path + ".type", apimachinery::go_quote(type),
                  "Approved and Denied conditions are mutually exclusive");
    }
    approved = approved || type == "Approved";
    denied = denied || type == "Denied";
    if (!types.insert(type).second) fe::duplicate(causes, path + ".type", apimachinery::go_quote(type));
  }
  if (const auto certificate = bytes_at(object_member(csr, "status"), "certificate")) {
    if (const std::string problem = certificate_problem(*certificate); !problem.empty()) {
      fe::invalid(causes, "status.certificate", "\"<certificate data>\"", problem);
    }
  }
}

void validate_csr_update_path(const json::object& csr, const json::object& old,
                              std::string_view subresource, Causes& causes) {
  for (const char* type : {"Approved", "Denied", "Failed"}) {
    if (conditions_of_type(csr, type).size() < conditions_of_type(old, type).size()) {
      fe::forbidden(causes, "status.conditions",
                    "updates may not remove a condition of type \"" + std::string(type) + "\"");
    }
  }
  if (subresource != "approval") {
    for (const char* type : {"Approved", "Denied"}) {
      const auto before = conditions_of_type(old, type);
      const auto after = conditions_of_type(csr, type);
      if (after.size() > before.size()) {
        fe::forbidden(causes, "status.conditions",
                      "updates may not add a condition of type \"" + std::string(type) + "\"");
      } else if (after.size() == before.size() && after != before) {
        fe::forbidden(causes, "status.conditions",
                      "updates may not modify a condition of type \"" + std::string(type) + "\"");
      }
    }
  }
  const json::object* status = object_member(csr, "status");
  const json::object* old_status = object_member(old, "status");
  const std::string_view certificate = string_member(status, "certificate");
  const std::string_view old_certificate = string_member(old_status, "certificate");
  if (certificate != old_certificate) {
    if (subresource != "status") {
      fe::forbidden(causes, "status.certificate", "updates may not set certificate content");
    } else if (!old_certificate.empty()) {
      fe::forbidden(causes, "status.certificate", "updates may not modify existing certificate content");
    }
  }
}

std::string csr_condition_cell(const json::object& csr) {
  // kubectl's printer: the types of the conditions, joined; Issued when a certificate is there.
  std::vector<std::string> states;
  for (const json::object* c : conditions_of(csr)) {
    const std::string_view type = string_member(c, "type");
    if (type == "Approved" || type == "Denied" || type == "Failed") states.emplace_back(type);
  }
  if (states.empty()) states.emplace_back("Pending");
  if (!string_member(object_member(csr, "status"), "certificate").empty()) {
    states.emplace_back("Issued");
  }
  std::string out;
  for (const auto& s : states) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string csr_requested_duration_cell(const json::object& csr) {
  const json::object* spec = object_member(csr, "spec");
  const json::value* seconds = spec != nullptr ? spec->if_contains("expirationSeconds") : nullptr;
  if (seconds == nullptr || !seconds->is_int64()) return "<none>";
  return base::human_duration(std::chrono::seconds(seconds->get_int64()));
}

}  // namespace kwatch::kinds
