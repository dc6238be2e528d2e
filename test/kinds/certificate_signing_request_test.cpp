#include "kinds/certificate_signing_request.hpp"

#include "base/base64.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;

// A fresh P-256 key and a PKCS#10 request for `cn` (and `org`), signed by it, in PEM.
std::string make_request(const std::string& cn, const std::string& org = "", bool corrupt = false) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509_REQ* req = X509_REQ_new();
  X509_NAME* name = X509_REQ_get_subject_name(req);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  if (!org.empty()) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  }
  X509_REQ_set_pubkey(req, key);
  X509_REQ_sign(req, key, EVP_sha256());
  if (corrupt) {
    // Signed, then a name changed: the signature no longer holds.
    X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("x"), -1, -1, 0);
  }
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_REQ(bio, req);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<std::size_t>(size));
  BIO_free(bio);
  X509_REQ_free(req);
  EVP_PKEY_free(key);
  return pem;
}

json::object csr(const std::string& request_pem, std::string signer = "example.com/signer",
                 json::array usages = {"client auth"}) {
  return json::object{{"metadata", json::object{{"name", "r"}}},
                      {"spec", json::object{{"request", base::base64_encode(request_pem)},
                                            {"signerName", std::move(signer)},
                                            {"usages", std::move(usages)}}}};
}

std::vector<std::string> messages(const json::object& obj, const json::object* old = nullptr) {
  Causes causes;
  validate_csr(obj, old, causes);
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

TEST(CertificateSigningRequest, AValidRequestPassesAndIsRead) {
  const std::string pem = make_request("alice", "developers");
  auto obj = csr(pem);
  EXPECT_TRUE(messages(obj).empty()) << messages(obj).front();
  const auto request = read_certificate_request(obj);
  EXPECT_EQ(request.error, "");
  EXPECT_EQ(request.common_name, "alice");
  EXPECT_EQ(request.organizations, std::vector<std::string>{"developers"});
}

TEST(CertificateSigningRequest, ValidationIsKubesWordForWord) {
  const std::string pem = make_request("alice");
  // The request itself.
  auto garbage = csr("not a request");
  EXPECT_EQ(messages(garbage).at(0),
            "spec.request: Invalid value: []byte{0x6e, 0x6f, 0x74, 0x20, 0x61, 0x20, 0x72, 0x65, "
            "0x71, 0x75, 0x65, 0x73, 0x74}: PEM block type must be CERTIFICATE REQUEST");
  auto forged = csr(make_request("mallory", "", /*corrupt=*/true));
  EXPECT_NE(messages(forged).at(0).find(": x509: ECDSA verification failure"), std::string::npos);
  // Usages.
  EXPECT_EQ(messages(csr(pem, "example.com/s", json::array())).at(0),
            "spec.usages: Required value: usages must be provided");
  auto odd = messages(csr(pem, "example.com/s", json::array{"client auth", "flying", "client auth"}));
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_EQ(odd[0].substr(0, 60), "spec.usages[1]: Unsupported value: \"flying\": supported value");
  EXPECT_EQ(odd[1], "spec.usages[2]: Duplicate value: \"client auth\"");
  // Signer names.
  EXPECT_EQ(messages(csr(pem, "nodomain")).at(0),
            "spec.signerName: Invalid value: \"nodomain\": must be a fully qualified domain and path "
            "of the form 'example.com/signer-name'");
  EXPECT_EQ(messages(csr(pem, "local/s")).at(0),
            "spec.signerName: Invalid value: \"local\": should be a domain with at least two "
            "segments separated by dots");
  EXPECT_EQ(messages(csr(pem, "kubernetes.io/legacy-unknown")).at(0),
            "spec.signerName: Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName "
            "is not allowed via this API version");
  EXPECT_NE(messages(csr(pem, "Example.com/s")).at(0).find("validating label \"Example\""),
            std::string::npos);
  // Duration.
  auto short_lived = csr(pem);
  short_lived["spec"].as_object()["expirationSeconds"] = 599;
  EXPECT_EQ(messages(short_lived).at(0),
            "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 "
            "seconds (10 minutes)");
  short_lived["spec"].as_object()["expirationSeconds"] = 600;
  EXPECT_TRUE(messages(short_lived).empty());
  // Conditions.
  auto both = csr(pem);
  both["status"] = json::parse(R"({"conditions":[{"type":"Approved","status":"True"},
      {"type":"Denied","status":"True"},{"type":"Approved","status":"True"},
      {"type":"Failed","status":"False"},{"type":"Custom","status":"Maybe"},{"status":"True"}]})");
  const auto conditions = messages(both);
  const std::vector<std::string> want = {
      "status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are "
      "mutually exclusive",
      "status.conditions[2].type: Invalid value: \"Approved\": Approved and Denied conditions are "
      "mutually exclusive",
      "status.conditions[2].type: Duplicate value: \"Approved\"",
      "status.conditions[3].status: Unsupported value: \"False\": supported values: \"True\"",
      "status.conditions[4].status: Unsupported value: \"Maybe\": supported values: \"False\", "
      "\"True\", \"Unknown\"",
      "status.conditions[5].type: Required value"};
  EXPECT_EQ(conditions, want);
  // A certificate that is none.
  auto bad_cert = csr(pem);
  bad_cert["status"] = json::object{{"certificate", base::base64_encode("-----BEGIN RSA PRIVATE KEY-----\nAA==\n-----END RSA PRIVATE KEY-----\n")}};
  EXPECT_EQ(messages(bad_cert).at(0),
            "status.certificate: Invalid value: \"<certificate data>\": only CERTIFICATE PEM blocks "
            "are allowed, found \"RSA PRIVATE KEY\"");
}

TEST(CertificateSigningRequest, TheRequesterIsWhoAsked) {
  auto obj = csr(make_request("x"));
  obj["spec"].as_object()["username"] = "someone-else";
  obj["spec"].as_object()["groups"] = json::array{"system:masters"};
  prepare_csr_for_create(obj);
  record_csr_requester(obj, apimachinery::UserInfo{"alice", "u-1", {"devs", "system:authenticated"},
                                                   {{"scopes", {"a"}}}});
  EXPECT_EQ(obj.at("status"), json::object());
  const auto& spec = obj.at("spec").as_object();
  EXPECT_EQ(spec.at("username"), "alice");
  EXPECT_EQ(spec.at("uid"), "u-1");
  EXPECT_EQ(spec.at("groups"), (json::array{"devs", "system:authenticated"}));
  EXPECT_EQ(spec.at("extra"), json::parse(R"({"scopes":["a"]})"));
  record_csr_requester(obj, apimachinery::UserInfo{"bob"});
  EXPECT_FALSE(obj.at("spec").as_object().contains("groups"));
}

TEST(CertificateSigningRequest, EachPathOwnsItsPart) {
  auto old = csr(make_request("x"));
  old["status"] = json::parse(R"({"certificate":"Y2VydA==","conditions":[
      {"type":"Approved","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z",
       "lastUpdateTime":"2026-01-01T00:00:00Z"}]})");
  // Through /approval: the conditions only; the spec and certificate stay.
  auto written = old;
  written["spec"].as_object()["signerName"] = "evil.example.com/s";
  written["status"] = json::parse(R"({"certificate":"ZXZpbA==","conditions":[
      {"type":"Approved","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z",
       "lastUpdateTime":"2026-01-01T00:00:00Z"},{"type":"Failed","status":"True"}]})");
  keep_csr_owned_fields(written, old, "approval");
  EXPECT_EQ(written.at("spec"), old.at("spec"));
  EXPECT_EQ(written.at("status").at("certificate"), "Y2VydA==");
  const auto& failed = written.at("status").at("conditions").at(1).as_object();
  EXPECT_FALSE(failed.at("lastUpdateTime").as_string().empty());
  EXPECT_FALSE(failed.at("lastTransitionTime").as_string().empty());
  // The path rules.
  const auto path = [&](const json::object& next, std::string_view sub) {
    Causes causes;
    validate_csr_update_path(next, old, sub, causes);
    std::vector<std::string> out;
    for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
    return out;
  };
  auto denied = old;
  denied["status"].as_object()["conditions"].as_array().push_back(
      json::object{{"type", "Denied"}, {"status", "True"}});
  EXPECT_EQ(path(denied, "status"),
            std::vector<std::string>{
                "status.conditions: Forbidden: updates may not add a condition of type \"Denied\""});
  EXPECT_TRUE(path(denied, "approval").empty());
  auto removed = old;
  removed["status"].as_object()["conditions"] = json::array();
  EXPECT_EQ(path(removed, "approval"),
            std::vector<std::string>{"status.conditions: Forbidden: updates may not remove a "
                                     "condition of type \"Approved\""});
  auto recertified = old;
  recertified["status"].as_object()["certificate"] = "bmV3";
  EXPECT_EQ(path(recertified, "status"),
            std::vector<std::string>{"status.certificate: Forbidden: updates may not modify "
                                     "existing certificate content"});
  EXPECT_EQ(path(recertified, "approval"),
            std::vector<std::string>{
                "status.certificate: Forbidden: updates may not set certificate content"});
}

TEST(CertificateSigningRequest, KubectlsColumns) {
  auto obj = csr(make_request("x"));
  EXPECT_EQ(csr_condition_cell(obj), "Pending");
  EXPECT_EQ(csr_requested_duration_cell(obj), "<none>");
  obj["spec"].as_object()["expirationSeconds"] = 3600;
  EXPECT_EQ(csr_requested_duration_cell(obj), "60m");
  obj["status"] = json::parse(R"({"conditions":[{"type":"Approved","status":"True"}],
                                  "certificate":"Y2VydA=="})");
  EXPECT_EQ(csr_condition_cell(obj), "Approved,Issued");
}

}  // namespace
}  // namespace kwatch::kinds
