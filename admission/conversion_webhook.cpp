#include "admission/conversion_webhook.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/validation.hpp"
#include "base/uuid.hpp"

#include <boost/json/serialize.hpp>

#include <chrono>
#include <optional>

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using apimachinery::object_member;
using apimachinery::string_at;
using base::Errc;

namespace {

// An object kube's converter does not send: only apiVersion and kind (its cacher's smoke test).
bool empty_object(const json::object& o) {
  return o.size() == 2 && o.contains("apiVersion") && o.contains("kind");
}

std::string group_version_of(const std::string& api_version) {
  return api_version.find('/') == std::string::npos ? "/" + api_version : api_version;
}

// What restoreObjectMeta says of labels or annotations the webhook changed that are not valid
// ones; "" when they are (or did not change).
std::string check_string_map(const json::object& original_meta, const json::value* answered,
                             const char* field) {
  if (answered == nullptr || answered->is_null()) return "";
  if (!answered->is_object()) {
    return std::string("invalid metadata.") + field + " of type " +
           (answered->is_array() ? "[]interface {}" : "interface {}") + " in converted object";
  }
  const json::object& map = answered->get_object();
  const json::object* before = object_member(original_meta, field);
  bool changed = before == nullptr ? !map.empty() : before->size() != map.size();
  for (const auto& [k, v] : map) {
    if (!v.is_string()) {
      return std::string("metadata.") + field + "[" + std::string(k) +
             "] must be a string in converted object";
    }
    const json::value* was = before != nullptr ? before->if_contains(k) : nullptr;
    if (was == nullptr || *was != v) changed = true;
  }
  if (!changed) return "";
  const bool labels = std::string_view(field) == "labels";
  // The path kube's check names ("metadata.annotation" for annotations, as kube writes it).
  const std::string path = labels ? "metadata.labels" : "metadata.annotation";
  std::vector<std::string> errors;
  std::size_t total = 0;
  for (const auto& [k, v] : map) {
    for (const auto& e : apimachinery::qualified_name_errors(k)) {
      errors.push_back(path + ": Invalid value: " + apimachinery::go_quote(k) + ": " + e);
    }
    const std::string_view value = v.get_string();
    total += k.size() + value.size();
    if (labels) {
      for (const auto& e : apimachinery::label_value_errors(value)) {
        errors.push_back(path + ": Invalid value: " + apimachinery::go_quote(value) + ": " + e);
      }
    }
  }
  if (!labels && total > (256u << 10)) {
    errors.push_back(path + ": Too long: may not be more than 262144 bytes");
  }
  if (errors.empty()) return "";
  if (errors.size() == 1) return errors.front();
  std::string joined = "[";
  for (std::size_t i = 0; i < errors.size(); ++i) joined += (i ? ", " : "") + errors[i];
  return joined + "]";
}

// validateConvertedObject: "" when `out` names the same object as `in`.
std::string same_object(const json::object& in, const json::object& out) {
  const json::object* a = object_member(in, "metadata");
  const json::object* b = object_member(out, "metadata");
  const auto differ = [&](const char* what, const std::string& x, const std::string& y) {
    return std::string("must have the same ") + what + ": " + x + " != " + y;
  };
  if (string_at(in, "kind") != string_at(out, "kind")) {
    return differ("kind", string_at(in, "kind"), string_at(out, "kind"));
  }
  for (const auto& [key, what] : {std::pair{"name", "name"}, std::pair{"namespace", "namespace"},
                                  std::pair{"uid", "UID"}}) {
    if (string_at(a, key) != string_at(b, key)) return differ(what, string_at(a, key), string_at(b, key));
  }
  return "";
}

// restoreObjectMeta: `out` gets `in`'s metadata, but for the labels and annotations the webhook
// answered. "" when done, else why not.
std::string restore_metadata(const json::object& in, json::object& out) {
  const json::value* answered = out.if_contains("metadata");
  if (answered == nullptr) return "missing metadata in converted object";
  if (!answered->is_object()) return "invalid metadata of type interface {} in converted object";
  const json::object response_meta = answered->get_object();
  const json::object* original = object_member(in, "metadata");
  json::object meta = original != nullptr ? *original : json::object();
  for (const char* field : {"labels", "annotations"}) {
    const json::value* v = response_meta.if_contains(field);
    if (auto why = check_string_map(meta, v, field); !why.empty()) return why;
    if (v == nullptr || v->is_null()) {
      meta.erase(field);
    } else {
      meta[field] = *v;
    }
  }
  out["metadata"] = std::move(meta);
  return "";
}

class WebhookConverter final : public kinds::VersionConverter {
 public:
  WebhookConverter(const kinds::ConversionWebhook& webhook, asio::any_io_executor executor,
                   ResolveContext context, ConversionObserver observer)
      : hook_(make_hook(webhook.client, std::move(executor), kMaxConversionResponseBytes)),
        context_(context),
        observer_(std::move(observer)),
        definition_(webhook.definition) {}

  asio::awaitable<ApiResult<std::vector<json::object>>> convert(
      std::vector<json::object> objects, std::string api_version, bool as_list) const override {
    const auto start = std::chrono::steady_clock::now();
    Outcome outcome;
    auto result = co_await attempt(std::move(objects), api_version, as_list, outcome);
    if (observer_ && !outcome.from_version.empty()) {
      ConversionCallRecord r;
      r.definition = definition_;
      r.from_version = outcome.from_version;
      const auto slash = api_version.find('/');
      r.to_version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
      r.failure_type = outcome.failure_type;
      r.succeeded = static_cast<bool>(result);
      r.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      observer_(r);
    }
    co_return result;
  }

 private:
  // What a call was, for the metrics: from which version (empty when nothing was sent) and
  // kube's failure type when it failed.
  struct Outcome {
    std::string from_version;
    std::string_view failure_type;
  };

  asio::awaitable<ApiResult<std::vector<json::object>>> attempt(
      std::vector<json::object> objects, std::string api_version, bool as_list,
      Outcome& outcome) const {
    std::vector<std::size_t> sent;
    for (std::size_t i = 0; i < objects.size(); ++i) {
      json::object& o = objects[i];
      if (string_at(o, "apiVersion") == api_version) continue;
      if (empty_object(o)) {
        o["apiVersion"] = api_version;
        continue;
      }
      sent.push_back(i);
    }
    if (sent.empty()) co_return std::move(objects);
    const json::object& first = objects[sent.front()];
    {
      const std::string from = string_at(first, "apiVersion");
      const auto slash = from.find('/');
      outcome.from_version = slash == std::string::npos ? from : from.substr(slash + 1);
    }
    std::string gvk = gvk_of(first);
    if (as_list) gvk += "List";
    const std::string prefix = "conversion webhook for " + gvk;
    outcome.failure_type = "conversion_webhook_call_failure";
    const auto fail = [](std::string message) {
      return ApiError(Errc::internal, "Internal error occurred: " + std::move(message));
    };
    const std::string& review_version = hook_->spec.review_version;
    if (review_version.empty()) co_return fail("no supported conversion review versions");

    const std::string uid = base::new_uuid();
    std::string body = R"({"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/)" +
                       review_version + R"(","request":{"uid":)" + json::serialize(json::string(uid)) +
                       R"(,"desiredAPIVersion":)" + json::serialize(json::string(api_version)) +
                       R"(,"objects":[)";
    for (std::size_t k = 0; k < sent.size(); ++k) {
      if (k) body += ',';
      body += json::serialize(objects[sent[k]]);
    }
    body += "]}}";

    std::string why;
    std::shared_ptr<client::HttpClient> client = hook_client(*hook_, context_, why);
    if (!client) co_return fail(prefix + " failed: " + why);
    client::ApiResult<client::HttpResponse> answer =
        co_await client->request("POST", hook_->target, std::move(body), "application/json");
    if (!answer) co_return fail(prefix + " failed: " + request_failure(*hook_, answer.error()));

    std::string problem;
    std::optional<json::value> parsed = apimachinery::parse_json(answer->body, &problem);
    if (!parsed || !parsed->is_object()) {
      co_return fail(prefix + " failed: the answer is not a ConversionReview in JSON" +
                     (problem.empty() ? std::string() : ": " + problem));
    }
    const json::object& review = parsed->get_object();
    const bool v1 = review_version == "v1";
    outcome.failure_type = "conversion_webhook_malformed_response_failure";
    if (v1 && gvk_of(review) != "apiextensions.k8s.io/v1, Kind=ConversionReview") {
      co_return fail(prefix + " failed: expected webhook response of apiextensions.k8s.io/v1, "
                              "Kind=ConversionReview, got " + gvk_of(review));
    }
    const json::object* response = object_member(review, "response");
    if (response == nullptr) co_return fail(prefix + " failed: no response provided");
    if (v1 && string_at(response, "uid") != uid) {
      co_return fail(prefix + " failed: expected response.uid=" + apimachinery::go_quote(uid) +
                     ", got " + apimachinery::go_quote(string_at(response, "uid")));
    }
    const json::object* result = object_member(response, "result");
    if (string_at(result, "status") != "Success") {
      const std::string message = string_at(result, "message");
      co_return fail(prefix + " failed: " +
                     (!message.empty() ? message
                                       : "response.result.status was '" +
                                             string_at(result, "status") + "', not 'Success'"));
    }
    const json::array* converted = apimachinery::array_member(response, "convertedObjects");
    const std::size_t count = converted != nullptr ? converted->size() : 0;
    outcome.failure_type = "conversion_webhook_partial_response_failure";
    if (count != sent.size()) {
      co_return fail(prefix + " returned " + std::to_string(count) + " objects, expected " +
                     std::to_string(sent.size()));
    }
    outcome.failure_type = "conversion_webhook_invalid_converted_object_failure";
    const std::string want_gv = group_version_of(api_version);
    for (std::size_t k = 0; k < sent.size(); ++k) {
      const json::object& original = objects[sent[k]];
      // kube's list messages count from 1, its single-object ones name index 0.
      const std::string at = as_list ? " returned invalid converted object at index " +
                                           std::to_string(k + 1) + ": "
                                     : " returned invalid object at index 0: ";
      const json::object* out = (*converted)[k].if_object();
      if (out == nullptr) co_return fail(prefix + at + "the object is not a JSON object");
      const std::string got_gv = group_version_of(string_at(out, "apiVersion"));
      if (got_gv != want_gv) {
        co_return fail(prefix + at + "invalid groupVersion (expected " + want_gv + ", received " +
                       got_gv + ")");
      }
      if (string_at(out, "kind") != string_at(original, "kind")) {
        co_return fail(prefix + at + "invalid kind (expected " + string_at(original, "kind") +
                       ", received " + string_at(out, "kind") + ")");
      }
      json::object result_object = *out;
      if (auto differ = same_object(original, result_object); !differ.empty()) {
        co_return fail(prefix + (as_list ? at : " returned invalid object: ") + differ);
      }
      if (auto bad = restore_metadata(original, result_object); !bad.empty()) {
        co_return fail(prefix +
                       (as_list ? " returned invalid metadata in object at index " +
                                      std::to_string(k + 1) + ": "
                                : " returned invalid metadata: ") +
                       bad);
      }
      result_object["apiVersion"] = api_version;  // "group/v2", as the request asked
      objects[sent[k]] = std::move(result_object);
    }
    outcome.failure_type = {};
    co_return std::move(objects);
  }

  std::shared_ptr<Hook> hook_;
  ResolveContext context_;
  ConversionObserver observer_;
  std::string definition_;
};

}  // namespace

std::shared_ptr<const kinds::VersionConverter> make_conversion_webhook(
    const kinds::ConversionWebhook& webhook, asio::any_io_executor executor,
    ResolveContext context, ConversionObserver observer) {
  return std::make_shared<WebhookConverter>(webhook, std::move(executor), context,
                                            std::move(observer));
}

}  // namespace kwatch::admission
