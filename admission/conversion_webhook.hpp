// The converter of a CustomResourceDefinition whose spec.conversion.strategy is Webhook, as
// kube-apiserver's webhook converter calls it: the objects not yet in the desired version in one
// ConversionReview (v1 or v1beta1, the first of the definition's conversionReviewVersions kwatch
// speaks) over HTTPS to the webhook's URL or Service (resolved as admission webhooks are:
// webhook_call.hpp), with the caBundle as its roots, within 30 s. The answer is checked as kube
// checks it (review kind and uid, result status, one object per object sent, each in the desired
// group/version with the same kind, name, namespace and uid) and each object's metadata is the
// original's but for the labels and annotations the webhook set (checked as labels and
// annotations). Any failure is one 500 naming the webhook's resource kind:
// "conversion webhook for stable.example.com/v1, Kind=CronTab failed: ...".
//
// Thread-safety: convert may run concurrently on any thread of the executor's io_context.
#pragma once

#include "admission/webhook_call.hpp"

#include "kinds/version_converter.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>
#include <string_view>

namespace kwatch::admission {

// The most of a conversion webhook's answer that is read: a list's objects come back in one
// answer, as kube sends a list's objects in one review.
inline constexpr std::size_t kMaxConversionResponseBytes = 64u << 20;

// One conversion that called the webhook, for kube's metrics
// (apiserver_crd_conversion_webhook_duration_seconds, apiserver_conversion_webhook_*).
struct ConversionCallRecord {
  std::string_view definition;    // the CRD's name
  std::string_view from_version;  // "v1"
  std::string_view to_version;
  bool succeeded = false;
  // kube's ConversionWebhookErrorType ("conversion_webhook_call_failure", ...); "" on success.
  std::string_view failure_type;
  double seconds = 0;
};
using ConversionObserver = std::function<void(const ConversionCallRecord&)>;

std::shared_ptr<const kinds::VersionConverter> make_conversion_webhook(
    const kinds::ConversionWebhook& webhook, boost::asio::any_io_executor executor,
    ResolveContext context, ConversionObserver observer = nullptr);

}  // namespace kwatch::admission
