#include "server/health_checks.hpp"

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

std::vector<HealthCheckOutcome> checks(std::optional<std::string> etcd_failure, bool exclude_etcd = false) {
  return {{"ping", false, std::nullopt},
          {"etcd", exclude_etcd, exclude_etcd ? std::nullopt : std::move(etcd_failure)},
          {"shutdown", false, std::nullopt}};
}

TEST(HealthChecks, PassingChecksAnswerOkOrListThemWhenVerbose) {
  auto plain = render_health("readyz", checks(std::nullopt), {}, false);
  EXPECT_EQ(plain.status, 200u);
  EXPECT_EQ(plain.body, "ok");
  auto verbose = render_health("readyz", checks(std::nullopt), {}, true);
  EXPECT_EQ(verbose.status, 200u);
  EXPECT_EQ(verbose.body, "[+]ping ok\n[+]etcd ok\n[+]shutdown ok\nreadyz check passed\n");
}

TEST(HealthChecks, AFailureIsA500ListingEveryCheckWithTheReasonWithheld) {
  for (bool verbose : {false, true}) {
    auto a = render_health("livez", checks("connection refused"), {}, verbose);
    EXPECT_EQ(a.status, 500u);
    EXPECT_EQ(a.body,
              "[+]ping ok\n[-]etcd failed: reason withheld\n[+]shutdown ok\nlivez check failed\n");
    EXPECT_EQ(a.body.find("refused"), std::string::npos);
  }
}

TEST(HealthChecks, ExcludedChecksPassAndUnknownExclusionsAreNamed) {
  auto a = render_health("readyz", checks("connection refused", true), {"kms", "etc"}, true);
  EXPECT_EQ(a.status, 200u);
  EXPECT_EQ(a.body,
            "[+]ping ok\n[+]etcd excluded: ok\n[+]shutdown ok\n"
            "warn: some health checks cannot be excluded: no matches for \"etc\",\"kms\"\n"
            "readyz check passed\n");
  // Without verbose a passing endpoint says only "ok", whatever was excluded.
  EXPECT_EQ(render_health("readyz", checks("x", true), {"kms"}, false).body, "ok");
}

TEST(HealthChecks, ASingleCheckTellsWhyItFails) {
  EXPECT_EQ(render_single_check(std::nullopt).status, 200u);
  EXPECT_EQ(render_single_check(std::nullopt).body, "ok");
  auto a = render_single_check("storage: connection refused");
  EXPECT_EQ(a.status, 500u);
  EXPECT_EQ(a.body, "internal server error: storage: connection refused\n");
}

}  // namespace
}  // namespace kwatch::server
