#include "apimachinery/status.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <utility>

namespace kwatch::apimachinery {
namespace {

namespace json = boost::json;

TEST(Status, EveryErrorCodeHasKubesHttpCodeAndReason) {
  struct Row {
    Errc code;
    unsigned http;
    const char* reason;
  };
  // The codes and reasons of kube's StatusReason constants (apimachinery's meta/v1 types).
  const Row rows[] = {
      {Errc::not_found, 404, "NotFound"},
      {Errc::already_exists, 409, "AlreadyExists"},
      {Errc::conflict, 409, "Conflict"},
      {Errc::gone, 410, "Expired"},
      {Errc::timeout, 504, "Timeout"},
      {Errc::invalid, 422, "Invalid"},
      {Errc::bad_request, 400, "BadRequest"},
      {Errc::unavailable, 503, "ServiceUnavailable"},
      {Errc::too_many_requests, 429, "TooManyRequests"},
      {Errc::internal, 500, "InternalError"},
      {Errc::corrupt, 500, "InternalError"},
      {Errc::unsupported_media_type, 415, "UnsupportedMediaType"},
      {Errc::too_large, 413, "RequestEntityTooLarge"},
      {Errc::method_not_allowed, 405, "MethodNotAllowed"},
      {Errc::unauthorized, 401, "Unauthorized"},
      {Errc::forbidden, 403, "Forbidden"},
      {Errc::not_acceptable, 406, "NotAcceptable"},
  };
  for (const Row& row : rows) {
    const StatusCode sc = status_code(row.code);
    EXPECT_EQ(sc.http, row.http) << row.reason;
    EXPECT_EQ(sc.reason, row.reason);
    // Every status an error code answers with leads back to a code that answers with it.
    EXPECT_EQ(status_code(errc_for_status(row.http)).http, row.http) << row.reason;
  }
  EXPECT_EQ(errc_for_status(409), Errc::conflict);
  EXPECT_EQ(errc_for_status(418), Errc::bad_request);
  EXPECT_EQ(errc_for_status(599), Errc::internal);
}

TEST(Status, AFailureCarriesItsReasonMessageDetailsAndCode) {
  ApiError e(Errc::invalid, R"(ConfigMap "Bad" is invalid: metadata.name: Invalid value: "Bad")",
             {{"FieldValueInvalid", R"(Invalid value: "Bad")", "metadata.name"}});
  e.name = "Bad";
  e.kind = "ConfigMap";
  const json::object s = status_object(e);
  EXPECT_EQ(json::serialize(s),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"ConfigMap \"Bad\" is invalid: metadata.name: Invalid value: \"Bad\"",)"
            R"("reason":"Invalid","details":{"name":"Bad","kind":"ConfigMap","causes":)"
            R"([{"reason":"FieldValueInvalid","message":"Invalid value: \"Bad\"",)"
            R"("field":"metadata.name"}]},"code":422})");
}

TEST(Status, NoDetailsMemberWithoutDetailsAndRetryAfterWhenSet) {
  const json::object plain = status_object(api_error(Errc::not_found, "nothing here"));
  EXPECT_FALSE(plain.contains("details"));
  EXPECT_EQ(plain.at("code"), 404);
  ApiError busy(Errc::too_many_requests, "too many requests, please try again later");
  busy.retry_after_seconds = 1;
  const json::object s = status_object(busy);
  EXPECT_EQ(s.at("details").at("retryAfterSeconds"), 1);
  EXPECT_EQ(s.at("code"), 429);
}

TEST(Status, ClientTextThatIsNotUtf8StaysValidJson) {
  ApiError e(Errc::bad_request, std::string("bad name \xff\xfe"), {{"", "\xc3", "a\x80"}});
  e.name = "\xff";
  const json::object s = status_object(e);
  const std::string text = json::serialize(s);
  EXPECT_EQ(text.find('\xff'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x80'), std::string::npos) << text;
  EXPECT_TRUE(is_valid_utf8(std::string(s.at("message").as_string())));
  EXPECT_TRUE(is_valid_utf8(std::string(s.at("details").at("name").as_string())));
}

TEST(Status, ASuccessHasDetailsAndCodeOnlyWhenGiven) {
  EXPECT_EQ(json::serialize(success_status()),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"})");
  EXPECT_EQ(json::serialize(success_status({}, 201)),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201})");
  EXPECT_EQ(json::serialize(success_status(json::object{{"name", "web"}, {"kind", "pods"}})),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",)"
            R"("details":{"name":"web","kind":"pods"}})");
}

}  // namespace
}  // namespace kwatch::apimachinery
