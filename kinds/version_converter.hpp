// How the objects of a custom resource change version, when its definition says
// `spec.conversion.strategy: Webhook`: the webhook as the definition names it
// (`ConversionWebhook`, read by custom_resources), and the interface the registry converts
// through (`VersionConverter`). kinds/ does no I/O: the converter that calls the webhook is made
// by admission/conversion_webhook.hpp and set on each ResourceInfo by whoever serves the
// definition (the CRD controller, through a ConverterFactory the application gives it).
//
// Strategy None needs neither: only apiVersion changes (registry/store_rules.hpp).
#pragma once

#include "kinds/webhook_configuration.hpp"

#include "apimachinery/api_error.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::kinds {

// spec.conversion.webhook of a definition: its client (name "conversion_webhook_for_<crd>",
// url or service, caBundle; timeout 30 s, as kube's webhook client manager sets) and the
// ConversionReview version to send (review_version: the first of conversionReviewVersions kwatch
// speaks, v1 or v1beta1; "" when none is).
struct ConversionWebhook {
  std::string definition;  // the CRD's metadata.name
  CompiledWebhook client;
};

// Thread-safety: convert may be called concurrently from any thread.
class VersionConverter {
 public:
  virtual ~VersionConverter() = default;
  // `objects`, each with its apiVersion and kind, as `api_version` ("group/version"), in order;
  // those already in that version are not sent. `as_list`: the objects are a list's items (as
  // kube converts a list, which its errors then name: "Kind=WidgetList"). All or nothing: a
  // failed conversion is one 500 InternalError naming the webhook's resource kind ("conversion
  // webhook for group/v1, Kind=Widget failed: ...").
  virtual boost::asio::awaitable<apimachinery::ApiResult<std::vector<boost::json::object>>>
  convert(std::vector<boost::json::object> objects, std::string api_version,
          bool as_list) const = 0;
};

// Makes the converter of a definition's webhook (the application's, admission/).
using ConverterFactory =
    std::function<std::shared_ptr<const VersionConverter>(const ConversionWebhook&)>;

}  // namespace kwatch::kinds
